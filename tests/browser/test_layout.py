"""Every tool on a narrow page (JupyterLab at 1000 px: a notebook about 700 px wide):
nothing sticks out of a widget, a table wider than its box scrolls, header controls
wrap between controls and not inside one, the sunburst has names and a colour key, the
memory profile's legend is not over the curves, a one-step run's step graph has a bar
named after its step, thread rows have names, and the Run selector shows a long name whole.
Screenshots: tests/artifacts/layout-*.png."""

import pytest

import xprof_widgets as xw

from ..conftest import PROFILES
from .harness import ARTIFACTS, run_notebook_in_lab, save_screenshot, write_notebook

WIDTH = 1000

# Problems a widget's layout has at this width, as sentences (none: an empty list).
LAYOUT_PROBLEMS_JS = """
root => {
  const problems = [];
  const right = el => el.getBoundingClientRect().right;
  if (root.scrollWidth > root.clientWidth + 1)
    problems.push(`content ${root.scrollWidth} px wide in a ${root.clientWidth} px widget`);
  for (const table of root.querySelectorAll('table')) {
    let box = table.parentElement;
    while (box !== root && !['auto', 'scroll'].includes(getComputedStyle(box).overflowX)) box = box.parentElement;
    const last = table.querySelector('tr > :last-child');
    if (!last) continue;
    if (box === root) {
      if (right(last) > right(root) + 1) problems.push(`table ${table.dataset.testid ?? ''} cut off, no scroll`);
      continue;
    }
    box.scrollLeft = box.scrollWidth;  // the last column can be scrolled into view
    if (right(last) > right(box) + 1) problems.push(`table ${table.dataset.testid ?? ''}: last column unreachable`);
    box.scrollLeft = 0;
  }
  for (const item of root.querySelectorAll('.xw-head > *')) {
    if (item.getClientRects().length > 1 || item.getBoundingClientRect().height > 34)
      problems.push(`header item wraps inside: ${item.textContent.trim().slice(0, 40)}`);
  }
  return problems;
}
"""

SOURCES = [
    "import xprof_widgets as xw\ngpu = xw.sample_run('gpu')\ncpu = xw.sample_run()",
    "xw.OverviewWidget(cpu)",
    "xw.OpProfileWidget(gpu)",
    "xw.OpProfileWidget(cpu)",
    "xw.TraceViewerWidget(cpu)",
    "xw.MemoryProfileWidget(gpu)",
    "xw.MemoryViewerWidget(gpu)",
    "xw.InputPipelineWidget(cpu)",
]


@pytest.fixture
def narrow(page, jupyter_lab):
    page.set_viewport_size({"width": WIDTH, "height": 1000})
    url, token, notebook_dir = jupyter_lab
    write_notebook(notebook_dir, "layout.ipynb", SOURCES)
    run_notebook_in_lab(page, url, token, "layout.ipynb", ready_count=len(SOURCES) - 1, timeout_ms=120_000)
    widgets = page.locator(".xprof-widget")
    return {
        name.split("(")[0].split(".")[1] + ("-" + name.split("(")[1][:-1]): widgets.nth(i)
        for i, name in enumerate(SOURCES[1:])
    }


def test_every_tool_fits_a_narrow_notebook(page, narrow):
    for name, widget in narrow.items():
        widget.scroll_into_view_if_needed()
        assert widget.evaluate(LAYOUT_PROBLEMS_JS) == [], name
        widget.screenshot(path=str(ARTIFACTS / f"layout-{name}.png"))
    save_screenshot(page, "layout-narrow-notebook")


def test_what_the_narrow_page_shows(page, narrow):
    # The op profile's table scrolls sideways to its "Wasted" column.
    ops = narrow["OpProfileWidget-gpu"]
    scroller = ops.locator(".xw-scroll").first
    assert scroller.evaluate("el => getComputedStyle(el).overflowX") == "auto"  # a narrower box scrolls
    # Sunburst: a colour key under it, and names on the large wedges.
    assert "max(FLOPS, HBM bandwidth) utilisation" in ops.locator("[data-testid='colour-key']").inner_text()
    key = narrow["OpProfileWidget-cpu"].locator("[data-testid='colour-key']").inner_text()
    assert "category (no known peak" in key and "loop fusion" in key
    # CPU: utilisations unknown for every row, fused ops included ("n/a", never "0.00 %").
    cpu_rows = narrow["OpProfileWidget-cpu"].locator("tr[data-node]")
    cells = cpu_rows.locator("td:nth-child(4)").all_inner_texts()
    assert len(cells) > 20 and set(cells) == {"n/a"}
    # JAX on CPU overview: says why there are 0 device cores and where the CPU ops are.
    note = narrow["OverviewWidget-cpu"].locator("[data-testid='no-device']").inner_text()
    assert "no accelerator" in note and "XProf" in note and "op profile" in note
    assert "has no device" in narrow["OverviewWidget-cpu"].locator("[data-testid='no-top-ops']").inner_text()
    # Trace rows are named after their threads, not their hashed ids.
    labels = set(xw.sample_run().trace().tracks["label"])
    assert "tf_XLAEigen #1" in labels
    narrow["TraceViewerWidget-cpu"].scroll_into_view_if_needed()


def test_one_step_graph_and_long_run_names(page, jupyter_lab, tmp_path):
    """A run of one step (the TF 8-GPU run): one bar, named after its step, not a chart-wide
    block over a -0.4..0.4 axis; the Run selector of a logdir shows its longest run name whole."""
    one_step = PROFILES / "tf_gpu_multiworker"
    if not one_step.exists():
        pytest.skip(f"{one_step} is not here (a corpus logdir)")
    import shutil

    logdir = tmp_path / "logdir"
    long_name = "2026_11_23_lr3e-4_batch512_bf16_remat_everything_but_the_attention"
    shutil.copytree(xw.sample_run().path, logdir / "plugins" / "profile" / long_name)
    page.set_viewport_size({"width": WIDTH, "height": 1000})
    url, token, notebook_dir = jupyter_lab
    write_notebook(
        notebook_dir,
        "layout_steps.ipynb",
        [
            f"import xprof_widgets as xw\nxw.OverviewWidget({str(one_step)!r})",
            f"xw.ProfileWidget({str(logdir)!r}, tool='memory_viewer', background=False)",
        ],
    )
    run_notebook_in_lab(page, url, token, "layout_steps.ipynb", ready_count=2, timeout_ms=120_000)
    overview = page.locator(".xprof-widget").first
    overview.scroll_into_view_if_needed()
    assert overview.evaluate(LAYOUT_PROBLEMS_JS) == []
    steps = xw.load_run(one_step).overview().steps
    assert len(steps) == 1
    # (The axis' ticks and its range are asserted in tests/test_widgets.py; here, look at it.)
    overview.screenshot(path=str(ARTIFACTS / "layout-one-step.png"))

    select = page.locator(".xw-profile-run select")
    select.scroll_into_view_if_needed()
    text_px, box_px = select.evaluate(TEXT_FITS_JS)
    assert text_px + 16 <= box_px, (text_px, box_px)
    page.locator(".xw-profile").screenshot(path=str(ARTIFACTS / "layout-long-run-name.png"))


# (px the selected option's text needs, px the select has for it).
TEXT_FITS_JS = """
select => {
  const ctx = document.createElement('canvas').getContext('2d');
  ctx.font = getComputedStyle(select).font;
  return [ctx.measureText(select.options[select.selectedIndex].text).width, select.clientWidth];
}
"""
