"""GraphViewerWidget in JupyterLab in headless Chromium: the graph around an op of the shipped
CPU sample is drawn with as many nodes as the analysis finds, a click on a node re-centres the
graph on it and shows its card, a click on the centre fusion opens its fused computation, a
typo in the op box is a sentence (not a traceback), a run without HLO modules says why, and a
large module of jax_transformer_cpu is drawn readably; nothing is fetched from off this machine.
Screenshots: tests/artifacts/graph-viewer*.png."""

import xprof_widgets as xw
from xprof_widgets.analysis.graph_viewer import graph_viewer

from ..conftest import PROFILES
from .harness import ARTIFACTS, save_screenshot, show_widget
from .test_platform import PAINTED_PIXELS_JS

MODULE = "jit_step(30)"

# The page point at the middle of node NAME of the last drawn graph (BokehJS's own scales).
NODE_POINT_JS = """
async (name) => {
  const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
  for (const view of [...Object.values(Bokeh.embed.index)].reverse()) {
    if (!view.el.isConnected || view.frame == null) continue;
    const source = [...view.model.document.all_models].find((m) => m.name === "nodes" && m.data !== undefined);
    if (source == null) continue;
    const i = [...source.data.id].indexOf(name);
    if (i < 0) return null;
    const rect = view.canvas_view.el.getBoundingClientRect();
    return { x: rect.left + view.frame.x_scale.compute(source.data.x[i]),
             y: rect.top + view.frame.y_scale.compute(source.data.y[i]) };
  }
  return null;
}
"""


def _state(widget):
    root = widget.locator("[data-testid='graph-viewer']")
    return {
        "op": root.get_attribute("data-op"),
        "nodes": int(root.get_attribute("data-nodes")),
        "edges": int(root.get_attribute("data-edges")),
    }


def _click_node(page, widget, name, more_nodes=False):
    """Click node `name` on the canvas and wait until the graph is redrawn, centred on it
    (`more_nodes`: the centre node clicked again, the same op: until it shows more nodes)."""
    drawn = int(widget.get_attribute("data-figures-drawn"))
    nodes = _state(widget)["nodes"] if more_nodes else None
    point = page.evaluate(NODE_POINT_JS, name)
    assert point is not None, f"node {name} is not on the page"
    page.mouse.click(point["x"], point["y"])
    page.wait_for_function(
        "([n, name, k]) => { const w = document.querySelector('.xprof-widget');"
        " const g = w.querySelector('[data-testid=graph-viewer]');"
        " return Number(w.dataset.figuresDrawn) > n && w.dataset.ready === '1' && g && g.dataset.op === name"
        " && (k === null || Number(g.dataset.nodes) > k); }",
        arg=[drawn, name, nodes],
        timeout=30_000,
    )


def test_graph_viewer_recentre_and_open_fusion(page, jupyter_lab):
    page.set_viewport_size({"width": 1400, "height": 1800})  # the whole widget in view for its screenshots
    run = xw.sample_run()
    expected = graph_viewer(run, "dot.1", module=MODULE, radius=2)
    widget = show_widget(
        page,
        jupyter_lab,
        "graph.ipynb",
        (
            "import xprof_widgets as xw\n"
            "from xprof_widgets.widgets.graph_viewer import GraphViewerWidget\n"
            f"w = GraphViewerWidget(xw.sample_run(), op='dot.1', module={MODULE!r}, radius=2)\nw"
        ),
    )
    assert _state(widget) == {"op": "dot.1", "nodes": len(expected.nodes), "edges": len(expected.edges)}
    assert widget.locator("[data-testid='node-card-name']").inner_text() == "dot.1"
    assert widget.locator("[data-testid='op-card-name']").inner_text() == "dot.1"  # the profile timed it
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    # Every node of the analysis is a box on the canvas.
    for name in expected.nodes["name"]:
        assert page.evaluate(NODE_POINT_JS, name) is not None, name
    save_screenshot(page, "graph-viewer-1-page")
    widget.screenshot(path=str(ARTIFACTS / "graph-viewer.png"))

    # A click on an operand re-centres the graph on it; its card follows.
    _click_node(page, widget, "compare_select_fusion.1")
    after = graph_viewer(run, "compare_select_fusion.1", module=MODULE, radius=2)
    assert _state(widget) == {"op": "compare_select_fusion.1", "nodes": len(after.nodes), "edges": len(after.edges)}
    assert widget.locator("[data-testid='node-card-name']").inner_text() == "compare_select_fusion.1"
    widget.screenshot(path=str(ARTIFACTS / "graph-viewer-2-recentred.png"))

    # A click on the centre fusion opens its fused computation inside a box.
    _click_node(page, widget, "compare_select_fusion.1", more_nodes=True)
    opened = graph_viewer(run, "compare_select_fusion.1", module=MODULE, radius=2, expand=True)
    assert _state(widget)["nodes"] == len(opened.nodes)
    fused = set(opened.nodes.loc[opened.nodes["fusion"] == "compare_select_fusion.1", "name"])
    assert fused and all(page.evaluate(NODE_POINT_JS, n) is not None for n in fused)
    assert "Close fused computation" in widget.locator("[data-testid='toggle-fusion']").inner_text()
    widget.screenshot(path=str(ARTIFACTS / "graph-viewer-3-fusion-open.png"))

    # A typo in the op box: a sentence above the graph, the graph kept.
    drawn = int(widget.get_attribute("data-figures-drawn"))
    box = widget.locator("[data-testid='op']")
    box.fill("dot.99")
    box.press("Enter")
    error = widget.locator("[data-testid='graph-error']")
    error.wait_for(timeout=15_000)
    assert "no op or computation named 'dot.99'" in error.inner_text()
    assert int(widget.get_attribute("data-figures-drawn")) == drawn
    # A good name recentres (and Back returns).
    box = widget.locator("[data-testid='op']")
    box.fill("dot.2")
    box.press("Enter")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=graph-viewer]')?.dataset.op === 'dot.2'", timeout=15_000
    )
    assert widget.locator("[data-testid='graph-error']").count() == 0
    widget.locator("[data-testid='back']").click()
    page.wait_for_function(
        "() => document.querySelector('[data-testid=graph-viewer]')?.dataset.op === 'compare_select_fusion.1'",
        timeout=15_000,
    )
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_graph_viewer_large_module_and_no_modules(page, jupyter_lab):
    """The busiest op of jax_transformer_cpu's training step (2,050 instructions), radius 2; and a
    TensorFlow run without HLO modules, which says why instead of drawing an empty chart."""
    page.set_viewport_size({"width": 1400, "height": 1800})
    transformer = str(PROFILES / "jax_transformer_cpu")
    keras = str(PROFILES / "tf_keras_cpu")
    run = xw.load_run(transformer)
    expected = graph_viewer(run, radius=2)
    widget = show_widget(
        page,
        jupyter_lab,
        "graph-big.ipynb",
        (
            "import xprof_widgets as xw\nfrom IPython.display import display\n"
            "from xprof_widgets.widgets.graph_viewer import GraphViewerWidget\n"
            f"display(GraphViewerWidget({transformer!r}, radius=2))\n"
            f"display(GraphViewerWidget({keras!r}))"
        ),
        ready_count=2,
    )
    assert _state(widget) == {"op": expected.op, "nodes": len(expected.nodes), "edges": len(expected.edges)}
    assert widget.locator("[data-testid='busiest'] button").count() >= 3
    widget.screenshot(path=str(ARTIFACTS / "graph-viewer-4-transformer.png"))
    # Colour by device time: the legend says so.
    widget.locator("[data-testid='color-by']").select_option("time")
    page.wait_for_function(
        "() => document.querySelector('[data-testid=legend]')?.innerText.includes('device time')", timeout=15_000
    )
    page.wait_for_function("() => document.querySelector('.xprof-widget').dataset.ready === '1'", timeout=15_000)
    widget.screenshot(path=str(ARTIFACTS / "graph-viewer-5-by-time.png"))
    empty = page.locator(".xprof-widget").nth(1)
    empty.scroll_into_view_if_needed()
    text = empty.inner_text()
    assert "No graph viewer for run" in text and "no HLO modules in the profile" in text
    assert empty.locator("canvas").count() == 0
    save_screenshot(page, "graph-viewer-6-page")
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_show_in_graph_from_the_op_card(page, jupyter_lab):
    """In ProfileWidget, the op profile's card links to the graph viewer: the button opens it,
    centred on the op (XProf's "link to the operation in the Graph Viewer tool")."""
    widget = show_widget(
        page,
        jupyter_lab,
        "graph-link.ipynb",
        (
            "import xprof_widgets as xw\n"
            "w = xw.ProfileWidget(xw.sample_run('gpu'), tool='op_profile', background=False)\nw"
        ),
    )
    widget.locator("tr[data-node] td:first-child", has_text="custom-call.1").first.click()
    widget.locator("[data-testid='show-in-graph']").click()
    page.wait_for_function(
        "() => document.querySelector('.xw-profile-tool select')?.value === 'graph_viewer'", timeout=30_000
    )
    widget.locator("[data-testid='show-in-graph']").wait_for(state="detached", timeout=30_000)
    page.wait_for_function("() => document.querySelector('.xprof-widget').dataset.ready === '1'", timeout=30_000)
    assert "custom-call.1" in widget.inner_text()
    widget.screenshot(path=str(ARTIFACTS / "graph-viewer-7-from-op-card.png"))
    assert page.off_host == [], f"requests left localhost: {page.off_host}"
