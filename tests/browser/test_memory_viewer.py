"""MemoryViewerWidget as a person uses it: the quickstart notebook opened in
JupyterLab in headless Chromium, numbers on the page equal to the analysis,
a buffer clicked and its card shown, nothing fetched from off this machine."""

import shutil

import numpy as np

import xprof_widgets as xw

from .harness import (
    ARTIFACTS,
    REPO_ROOT,
    run_notebook_in_lab,
    run_notebook_in_notebook7,
    save_screenshot,
    show_widget,
)
from .test_platform import PAINTED_PIXELS_JS


def _mib(n):
    return f"{n / 2**20:,.2f} MiB"


# The page point at the middle of the allocation chart's block of a buffer (its id: the
# buffer's program order index).
BLOCK_CENTRE_JS = """
async (id) => {
  const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
  for (const view of Object.values(Bokeh.embed.index)) {
    if (!view.el.isConnected || view.frame == null) continue;
    const source = [...view.model.document.all_models].find((m) => m.name === "blocks" && m.data !== undefined);
    if (source == null) continue;
    const i = [...source.data.id].map(Number).indexOf(id);
    if (i < 0) return null;
    const d = source.data;
    const rect = view.canvas_view.el.getBoundingClientRect();
    return {
      x: rect.left + view.frame.x_scale.compute((d.left[i] + d.right[i]) / 2),
      y: rect.top + view.frame.y_scale.compute((d.bottom[i] + d.top[i]) / 2),
    };
  }
  return null;
}
"""


def test_quickstart_memory_viewer_in_lab(page, jupyter_lab):
    url, token, notebook_dir = jupyter_lab
    shutil.copy(REPO_ROOT / "notebooks" / "quickstart.ipynb", notebook_dir / "quickstart.ipynb")
    run_notebook_in_lab(page, url, token, "quickstart.ipynb", ready_count=3)  # memory viewer, op profile, overview
    expected = xw.sample_run().memory_viewer()
    widget = page.locator(".xprof-widget").first
    widget.scroll_into_view_if_needed()

    # The charts drew: canvases with ink, heap chart and both buffer charts.
    assert widget.locator("canvas").count() >= 3
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    # The numbers shown are the analysis' numbers.
    shown = {
        key: widget.locator(f"[data-stat='{key}']").inner_text()
        for key in ("peak_heap_bytes", "peak_unpadded_heap_bytes", "total_allocation_bytes", "buffers_at_peak")
    }
    assert shown == {
        "peak_heap_bytes": _mib(expected.peak_heap_bytes),
        "peak_unpadded_heap_bytes": _mib(expected.peak_unpadded_heap_bytes),
        "total_allocation_bytes": _mib(expected.total_allocation_bytes),
        "buffers_at_peak": str(len(expected.buffers_at_peak)),
    }
    assert widget.locator("[data-testid='module']").input_value() == expected.module
    save_screenshot(page, "memory-viewer-1-rendered")
    widget.screenshot(path=str(ARTIFACTS / "memory-viewer-widget.png"))
    ops = page.locator(".xprof-widget").nth(1)  # the quickstart's op profile of JAX on CPU
    ops.scroll_into_view_if_needed()
    assert ops.locator("[data-testid='op-table']").get_attribute("data-rows") not in (None, "0")
    ops.screenshot(path=str(ARTIFACTS / "op-profile-cpu-quickstart.png"))
    widget.scroll_into_view_if_needed()

    # Click the middle of the widest buffer of the program-order chart.
    order = expected.buffers_at_peak.sort_values("program_order_index")
    right = np.cumsum(order.size_bytes.to_numpy())
    widest = int(np.argmax(order.size_bytes.to_numpy()))
    middle = (right[widest] - order.size_bytes.iloc[widest] / 2) / right[-1]
    canvas = widget.locator("[data-figure='buffers'] canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    # The plot frame spans the canvas less Bokeh's borders and the toolbar on the right.
    frame_left, frame_width = box["x"] + 10, box["width"] - 50
    page.mouse.move(box["x"] + 2, box["y"] + box["height"] / 2)
    page.mouse.click(frame_left + middle * frame_width, box["y"] + box["height"] / 2 - 5)
    name = order.instruction_name.iloc[widest]
    card = widget.locator("[data-testid='card-name']")
    card.wait_for(timeout=15_000)
    assert card.inner_text() == name
    # Hovering the buffer draws its lifespan (one box) on the heap chart.
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.move(box["x"] + 2, box["y"] + 2)
    page.mouse.move(frame_left + middle * frame_width + 3, box["y"] + box["height"] / 2 - 3)
    # (Entering over empty space first pushes an empty lifespan: wait for the one-row push.)
    page.wait_for_function(
        "() => { const d = document.querySelector('.xprof-widget').dataset;"
        " return d.lastPush === 'lifespan' && d.lastPushRows === '1'; }",
        timeout=15_000,
    )
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "memory-viewer-2-buffer-card")
    widget.screenshot(path=str(ARTIFACTS / "memory-viewer-widget-selected.png"))

    # The buffer allocation chart (XProf's timeline): a click on a temporary buffer's block,
    # one live at the peak, selects that buffer (its card).
    blocks = expected.allocation_blocks
    at_peak = expected.buffers_at_peak.set_index("logical_buffer_id")
    buffers = blocks[blocks["logical_buffer_id"] >= 0]  # (-1: the allocations' boxes)
    temp = buffers[buffers["logical_buffer_id"].isin(at_peak.index)].sort_values("size_bytes").iloc[-1]
    order_index = int(at_peak.loc[temp["logical_buffer_id"], "program_order_index"])
    chart = widget.locator("[data-figure='allocations']")
    chart.scroll_into_view_if_needed()
    point = None
    for _ in range(50):  # the chart draws once it is in view
        point = page.evaluate(BLOCK_CENTRE_JS, order_index)
        if point is not None:
            break
        page.wait_for_timeout(200)
    assert point is not None
    page.mouse.click(point["x"], point["y"])
    page.wait_for_function(
        "v => document.querySelector(\"[data-testid='card-name']\")?.innerText === v",
        arg=at_peak.loc[temp["logical_buffer_id"], "instruction_name"],
        timeout=15_000,
    )
    assert chart.evaluate(PAINTED_PIXELS_JS) > 2000
    page.mouse.move(1, 1)
    chart.screenshot(path=str(ARTIFACTS / "memory-viewer-allocations.png"))

    # Another module from the selector: the numbers follow.
    other = xw.sample_run().memory_viewer("jit__normal(16)")
    drawn = int(widget.get_attribute("data-figures-drawn"))
    widget.locator("[data-testid='module']").select_option("jit__normal(16)")
    page.wait_for_function(
        "v => document.querySelector(\"[data-stat='peak_heap_bytes']\")?.innerText === v",
        arg=_mib(other.peak_heap_bytes),
        timeout=15_000,
    )
    # The screenshot after the new module's charts are painted, not the old ones.
    page.wait_for_function(
        "n => { const d = document.querySelector('.xprof-widget').dataset;"
        " return Number(d.figuresDrawn) > n && d.ready === '1'; }",
        arg=drawn,
        timeout=30_000,
    )
    save_screenshot(page, "memory-viewer-3-other-module")
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_quickstart_in_notebook7(page, jupyter_lab):
    """The same notebook in Jupyter Notebook 7: the widget draws offline there too."""
    url, token, notebook_dir = jupyter_lab
    shutil.copy(REPO_ROOT / "notebooks" / "quickstart.ipynb", notebook_dir / "quickstart7.ipynb")
    run_notebook_in_notebook7(page, url, token, "quickstart7.ipynb", ready_count=3)
    expected = xw.sample_run().memory_viewer()
    widget = page.locator(".xprof-widget").first
    widget.scroll_into_view_if_needed()
    assert widget.locator("[data-stat='peak_heap_bytes']").inner_text() == _mib(expected.peak_heap_bytes)
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    save_screenshot(page, "memory-viewer-notebook7")
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_memory_space_selector_on_a_tpu_module(page, jupyter_lab):
    """The TPU module's memory spaces in the selector (HBM, VMEM, Sflag, Host: the ones its
    buffers use); choosing Host shows host memory's numbers (XProf's 15,360 MiB peak) and its
    allocation chart, and the selector keeps the choice."""
    from ..conftest import VENDORED

    path = VENDORED / "tpu_v6e_inference"
    module = "jit_f(12190760917235803885)"
    cell = f"import xprof_widgets as xw\nw = xw.MemoryViewerWidget({str(path)!r}, module={module!r})\nw"
    widget = show_widget(page, jupyter_lab, "memory_space.ipynb", cell)
    select = widget.locator("[data-testid='memory-space']")
    assert select.locator("option").all_inner_texts() == ["HBM", "VMEM", "Sflag", "Host"]
    hbm = xw.load_run(path).memory_viewer(module)
    assert widget.locator("[data-stat='peak_heap_bytes']").inner_text() == _mib(hbm.peak_heap_bytes)
    select.select_option(label="Host")
    page.wait_for_function(
        "v => document.querySelector(\"[data-stat='peak_heap_bytes']\")?.innerText === v",
        arg=_mib(15360 * 2**20),
        timeout=15_000,
    )
    assert widget.locator("[data-testid='memory-space']").input_value() == "5"
    # Host memory holds only whole-program buffers: a sentence says so, no empty charts.
    note = widget.locator("[data-testid='no-heap']").inner_text()
    assert note.startswith("No Host buffer of this module has a heap-simulator lifetime: its 15,360.00 MiB")
    assert widget.locator("[data-figure]").count() == 0
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    page.mouse.move(1, 1)
    widget.scroll_into_view_if_needed()
    widget.screenshot(path=str(ARTIFACTS / "memory-viewer-memory-space-host.png"))
