"""KernelStatsWidget, FrameworkOpStatsWidget and RooflineWidget in JupyterLab in headless
Chromium: the tables hold the analysis' rows, a header click sorts, a click on a row, a
bar or a point shows that op's card, the filters and toggles re-draw, a run without the
data says why; nothing is fetched from off this machine. Screenshots:
tests/artifacts/kernel-stats.png, framework-op-stats.png, roofline.png."""

import xprof_widgets as xw

from ..conftest import PROFILES
from .harness import ARTIFACTS, run_notebook_in_lab, save_screenshot, show_widget, write_notebook
from .test_platform import PAINTED_PIXELS_JS

MULTIWORKER = PROFILES / "tf_gpu_multiworker"
ELEMENTWISE = PROFILES / "amd_jax_elementwise_mi300"
TPU = PROFILES / "tpu_v6e_inference"

# The page point of the glyph with id ID in the named source of the last drawn figure
# (BokehJS's own scales, log axes included); `half` takes the middle of a bar from 0 to x.
GLYPH_POINT_JS = """
async ([name, id, xField, yField, half]) => {
  const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
  for (const view of [...Object.values(Bokeh.embed.index)].reverse()) {
    if (!view.el.isConnected || view.frame == null) continue;
    const source = [...view.model.document.all_models].find((m) => m.name === name && m.data !== undefined);
    if (source == null) continue;
    const i = [...source.data.id].map(Number).indexOf(id);
    if (i < 0) return null;
    const x = half ? source.data[xField][i] / 2 : source.data[xField][i];
    const rect = view.canvas_view.el.getBoundingClientRect();
    return { x: rect.left + view.frame.x_scale.compute(x), y: rect.top + view.frame.y_scale.compute(source.data[yField][i]) };
  }
  return null;
}
"""


def _rows(widget, testid):
    return int(widget.locator(f"[data-testid='{testid}']").get_attribute("data-rows"))


def _column(widget, testid, key):
    """The texts of column `key` of a table, in page order."""
    keys = widget.locator(f"[data-testid='{testid}'] thead th").evaluate_all("ths => ths.map(t => t.dataset.col)")
    n = keys.index(key) + 1
    return widget.locator(f"[data-testid='{testid}'] tbody tr td:nth-child({n})").all_inner_texts()


def _number(text):
    return float(text.replace(",", "").replace("%", "").strip())


def _wait_text(page, testid, text, timeout=15_000):
    page.wait_for_function(
        "([id, v]) => document.querySelector(`[data-testid='${id}']`)?.innerText.includes(v)",
        arg=[testid, text],
        timeout=timeout,
    )


def _show_tool(page, jupyter_lab, nb_name, widget_class, run_expr):
    """Show `widget_class` (a class in xprof_widgets.widgets.<its module>) of the run that the
    Python expression `run_expr` gives, in a notebook of its own."""
    module = {
        "KernelStatsWidget": "kernel_stats",
        "FrameworkOpStatsWidget": "framework_op_stats",
        "RooflineWidget": "roofline",
    }[widget_class]
    cell = (
        "import xprof_widgets as xw\n"
        f"from xprof_widgets.widgets.{module} import {widget_class}\n"
        f"w = {widget_class}({run_expr})\nw"
    )
    return show_widget(page, jupyter_lab, nb_name, cell)


def test_kernel_stats_in_lab(page, jupyter_lab):
    page.set_viewport_size({"width": 1400, "height": 1400})
    widget = _show_tool(page, jupyter_lab, "kernel_stats.ipynb", "KernelStatsWidget", "xw.sample_run('gpu')")
    run = xw.sample_run("gpu")
    stats = run.kernel_stats()
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000  # the bars
    assert _rows(widget, "kernel-table") == len(stats) == 12
    assert widget.locator("[data-testid='kernel-table'] tbody tr").count() == 12
    assert _column(widget, "kernel-table", "kernel_name") == list(stats["kernel_name"])
    assert [_number(t) for t in _column(widget, "kernel-table", "total_duration_us")] == [
        round(v, 3) for v in stats["total_duration_us"]
    ]
    # At 1,400 px the numbers read first (occurrences, durations) are in view without
    # scrolling; the table scrolls sideways inside its box, the kernel name staying put.
    wrap = widget.locator(".xw-table-wrap").first
    right = wrap.evaluate("el => el.getBoundingClientRect().right")
    save_screenshot(page, "kernel-stats-1400px")
    for col in ("kernel_name", "op_name", "occurrences", "total_duration_us", "avg_duration_us"):
        box = widget.locator(f"[data-testid='kernel-table'] th[data-col='{col}']").bounding_box()
        assert box["x"] + box["width"] <= right, col
    name = widget.locator("[data-testid='kernel-table'] th[data-col='kernel_name']")
    before = name.bounding_box()["x"]
    scrolled = wrap.evaluate("el => { el.scrollLeft = el.scrollWidth; return el.scrollLeft; }")
    page.wait_for_timeout(200)
    if scrolled > 0:  # wider than its box: the name column stays at the box's left edge
        left = wrap.evaluate("el => el.getBoundingClientRect().left")
        assert abs(name.bounding_box()["x"] - left) < 2 and name.bounding_box()["x"] <= before
    wrap.evaluate("el => { el.scrollLeft = 0; }")

    # The Columns menu: unticking "Op name" takes it out of the table, the menu stays open.
    widget.locator("[data-testid='columns'] > summary").click()
    widget.locator("[data-testid='columns'] input[data-col='op_name']").uncheck()
    page.wait_for_function(
        "() => !document.querySelector(\".xw-ks [data-testid='kernel-table'] th[data-col='op_name']\")",
        timeout=15_000,
    )
    assert widget.locator("[data-testid='columns']").get_attribute("open") is not None
    assert "1 hidden" in widget.locator("[data-testid='columns'] > summary").inner_text()
    save_screenshot(page, "kernel-stats-columns-menu")
    widget.locator("[data-testid='columns'] input[data-col='op_name']").check()
    page.wait_for_selector(".xw-ks [data-testid='kernel-table'] th[data-col='op_name']", timeout=15_000)
    widget.locator("[data-testid='columns'] > summary").click()  # closed again

    # A header click sorts on that column, largest first; a second one flips it.
    widget.locator("th[data-col='occurrences']").click()
    page.wait_for_selector(".xw-ks th.sorted[data-col='occurrences']", timeout=15_000)
    shown = [_number(t) for t in _column(widget, "kernel-table", "occurrences")]
    assert shown == sorted(stats["occurrences"], reverse=True)
    widget.locator("th[data-col='occurrences']").click()
    page.wait_for_function(
        "() => document.querySelector(\".xw-ks th.sorted[data-col='occurrences']\")?.innerText.includes('▲')",
        timeout=15_000,
    )
    assert [_number(t) for t in _column(widget, "kernel-table", "occurrences")] == sorted(stats["occurrences"])

    # A click on the longest kernel's row: its HLO op's card and that op's kernels.
    widget.locator("[data-testid='kernel-table'] tr[data-row='0']").click()
    _wait_text(page, "op-card-name", "custom-call.1")
    card = widget.locator("[data-op-card]").inner_text()
    assert "jit_dot(49)" in card and "custom-call" in card
    assert widget.locator("[data-testid='op-kernels'] tbody tr").count() == 1
    assert widget.locator("[data-testid='kernel-table'] tr.sel").get_attribute("data-row") == "0"

    # A click on a bar selects that kernel: the broadcast (row 5) is the sixth bar.
    point = page.evaluate(GLYPH_POINT_JS, ["kernels", 5, "total", "y", True])
    assert point is not None
    page.mouse.click(point["x"], point["y"])
    _wait_text(page, "op-card-name", "wrapped_broadcast")
    _wait_text(page, "selected-kernel", "wrapped_broadcast.kd")
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    page.mouse.move(1, 1)  # no tooltip over the screenshot
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "kernel-stats-page")
    widget.screenshot(path=str(ARTIFACTS / "kernel-stats.png"))

    # The op-name filter (Enter sends it): only the GEMM kernels are left, and the chart follows.
    box = widget.locator("[data-testid='op-filter']")
    box.fill("dot_general")
    box.press("Enter")
    expected = int(stats["op_name"].str.contains("dot_general").sum())
    page.wait_for_function(
        "n => document.querySelector(\"[data-testid='kernel-table']\")?.dataset.rows === String(n)",
        arg=expected,
        timeout=15_000,
    )
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    assert all("dot_general" in t for t in _column(widget, "kernel-table", "op_name"))
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_kernel_stats_of_tensorflow_gpus(page, jupyter_lab):
    widget = _show_tool(page, jupyter_lab, "kernel_stats_tf.ipynb", "KernelStatsWidget", repr(str(MULTIWORKER)))
    stats = xw.load_run(MULTIWORKER).kernel_stats()
    assert _rows(widget, "kernel-table") == len(stats) == 30
    widget.locator("[data-testid='top-n']").select_option("10")
    page.wait_for_function(
        "() => document.querySelectorAll(\"[data-testid='kernel-table'] tbody tr\").length === 10", timeout=15_000
    )
    assert _rows(widget, "kernel-table") == 30
    # These kernels name no op: the card says so instead of showing another op.
    widget.locator("[data-testid='kernel-table'] tr[data-row='2']").click()
    widget.locator("[data-testid='no-op']").wait_for(timeout=15_000)
    assert "EigenMetaKernel" in widget.locator("[data-testid='selected-kernel']").inner_text()
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "kernel-stats-tensorflow")


def test_kernel_stats_and_roofline_of_a_cpu_run_say_why(page, jupyter_lab):
    url, token, notebook_dir = jupyter_lab
    cell = (
        "import xprof_widgets as xw\n"
        "from xprof_widgets.widgets.kernel_stats import KernelStatsWidget\n"
        "from xprof_widgets.widgets.roofline import RooflineWidget\n"
        "run = xw.sample_run()\ndisplay(KernelStatsWidget(run))\ndisplay(RooflineWidget(run))"
    )
    write_notebook(notebook_dir, "no_gpu.ipynb", [cell])
    run_notebook_in_lab(page, url, token, "no_gpu.ipynb", ready_count=2)
    notices = page.locator(".xprof-widget .xw-notice").all_inner_texts()
    assert len(notices) == 2
    assert notices[0].startswith("No kernel stats for run") and "no GPU plane" in notices[0]
    assert notices[1].startswith("No roofline model for run") and "no GPU or TPU plane" in notices[1]
    assert page.locator(".xprof-widget canvas").count() == 0  # a sentence, never an empty chart


def test_framework_op_stats_in_lab(page, jupyter_lab):
    page.set_viewport_size({"width": 1400, "height": 1300})
    widget = _show_tool(page, jupyter_lab, "framework_op_stats.ipynb", "FrameworkOpStatsWidget", "xw.sample_run('gpu')")
    stats = xw.sample_run("gpu").framework_op_stats(exclude_idle=True)  # IDLE out at first, as XProf
    # Two pies (device and host), each with its legend, and XProf's table.
    assert widget.locator("[data-testid='device_types-pie'] canvas").count() >= 1
    assert widget.locator("[data-testid='host_types-pie'] canvas").count() >= 1
    assert widget.evaluate(PAINTED_PIXELS_JS) > 10_000
    assert _rows(widget, "op-table") == len(stats) == 4
    assert _column(widget, "op-table", "operation") == list(stats["operation"])
    widget.locator("th[data-col='total_time']").click()
    page.wait_for_selector(".xw-fos th.sorted[data-col='total_time']", timeout=15_000)
    shown = [_number(t) for t in _column(widget, "op-table", "total_time")]
    assert shown == sorted((round(v, 3) for v in stats["total_time"]), reverse=True)
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "framework-op-stats-page")
    widget.screenshot(path=str(ARTIFACTS / "framework-op-stats.png"))

    # A wedge click filters the table to that op type (wedge 1 of the device pie: dot_general).
    device = stats[stats["host_or_device"] == "Device"]
    second = device.groupby("type")["total_self_time"].sum().sort_values(ascending=False).index[1]
    widget.locator("[data-testid='device_types-pie'] canvas").first.scroll_into_view_if_needed()
    point = page.evaluate("""async () => {
      const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
      for (const view of Object.values(Bokeh.embed.index)) {
        const s = [...view.model.document.all_models].find((m) => m.name === "device_types" && m.data !== undefined);
        if (s == null || !view.el.isConnected) continue;
        const mid = (s.data.start[1] + s.data.end[1]) / 2;
        const rect = view.canvas_view.el.getBoundingClientRect();
        return { x: rect.left + view.frame.x_scale.compute(0.6 * Math.cos(mid)),
                 y: rect.top + view.frame.y_scale.compute(0.6 * Math.sin(mid)) };
      }
      return null;
    }""")
    page.mouse.click(point["x"], point["y"])
    page.wait_for_function(
        "v => document.querySelector(\"[data-testid='type-filter']\")?.value === v", arg=second, timeout=15_000
    )
    assert set(_column(widget, "op-table", "type")) == {second}
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_framework_op_stats_idle_toggle_on_multiworker(page, jupyter_lab):
    widget = _show_tool(
        page, jupyter_lab, "framework_op_stats_tf.ipynb", "FrameworkOpStatsWidget", repr(str(MULTIWORKER))
    )
    run = xw.load_run(MULTIWORKER)
    # IDLE left out at first (XProf's default); including it recomputes the table.
    without = run.framework_op_stats(exclude_idle=True)
    assert _rows(widget, "op-table") == len(without) == 499
    assert "IDLE" not in _column(widget, "op-table", "type")
    widget.locator("[data-testid='include-idle']").check()
    stats = run.framework_op_stats()
    page.wait_for_function(
        "n => document.querySelector(\"[data-testid='op-table']\")?.dataset.rows === String(n)",
        arg=len(stats),
        timeout=30_000,
    )
    assert len(stats) == 501 and widget.locator("[data-testid='op-table'] tbody tr").count() == 100  # top 100
    assert "IDLE" in _column(widget, "op-table", "type")
    # And out again.
    widget.locator("[data-testid='include-idle']").uncheck()
    page.wait_for_function(
        "n => document.querySelector(\"[data-testid='op-table']\")?.dataset.rows === String(n)",
        arg=len(without),
        timeout=30_000,
    )
    assert "IDLE" not in _column(widget, "op-table", "type")
    # Only the host had ops: without IDLE the device pie is a sentence.
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    assert widget.locator("[data-testid='device_types-none']").count() == 1
    box = widget.locator("[data-testid='type-filter']")
    box.fill("Dataset")
    box.press("Enter")
    expected = int(without["type"].str.lower().str.contains("dataset").sum())
    page.wait_for_function(
        "n => document.querySelector(\"[data-testid='op-table']\")?.dataset.rows === String(n)",
        arg=expected,
        timeout=15_000,
    )
    save_screenshot(page, "framework-op-stats-multiworker")


def test_roofline_in_lab(page, jupyter_lab):
    page.set_viewport_size({"width": 1400, "height": 1400})
    widget = _show_tool(page, jupyter_lab, "roofline.ipynb", "RooflineWidget", repr(str(ELEMENTWISE)))
    ref = xw.load_run(ELEMENTWISE).roofline_model()
    total = ref[(ref["step"] == "Total") & ref["include_infeed_outfeed"].astype(bool)]
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    assert _rows(widget, "roofline-table") == len(total) == 14
    assert _column(widget, "roofline-table", "operation") == list(total["operation"])
    assert (
        widget.locator("[data-stat='peak_flop_rate']").inner_text()
        == f"{ref.attrs['peak_flop_rate'] / 1e3:,.1f} TFLOP/s"
    )
    assert widget.locator("[data-testid='left-out']").count() == 0  # every op has FLOPs and bytes

    # A click on the point of the sin fusion (program 13): its op card.
    row = int(total[total["hlo_module_id"] == "13"].index[0])
    point = page.evaluate(GLYPH_POINT_JS, ["ops", row, "x", "y", False])
    assert point is not None
    page.mouse.click(point["x"], point["y"])
    _wait_text(page, "op-card-name", "loop_convert_fusion")
    card = widget.locator("[data-op-card]").inner_text()
    assert "jit_sin(13)" in card and "loop fusion" in card
    numbers = widget.locator("[data-testid='roofline-numbers']").inner_text()
    assert f"{ref.loc[row, 'operational_intensity']:,.3f} FLOP/byte" in numbers
    assert widget.locator("[data-testid='roofline-table'] tr.sel").get_attribute("data-row") == str(row)
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    page.mouse.move(1, 1)  # no tooltip over the screenshot
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "roofline-page")
    widget.screenshot(path=str(ARTIFACTS / "roofline.png"))

    # Sort by FLOP rate from the header; then the category filter.
    widget.locator("th[data-col='measured_flop_rate']").click()
    page.wait_for_selector(".xw-rl th.sorted[data-col='measured_flop_rate']", timeout=15_000)
    rates = [_number(t) for t in _column(widget, "roofline-table", "measured_flop_rate")]
    assert rates == sorted(rates, reverse=True) and rates[0] == round(total["measured_flop_rate"].max(), 2)
    widget.locator("[data-testid='category']").select_option("input fusion")
    n = int((total["category"] == "input fusion").sum())
    page.wait_for_function(
        "n => document.querySelector(\"[data-testid='roofline-table']\")?.dataset.rows === String(n)",
        arg=n,
        timeout=15_000,
    )
    assert set(_column(widget, "roofline-table", "category")) == {"input fusion"}
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_roofline_of_the_gpu_sample_counts_what_it_leaves_out(page, jupyter_lab):
    widget = _show_tool(page, jupyter_lab, "roofline_gpu.ipynb", "RooflineWidget", "xw.sample_run('gpu')")
    ref = xw.sample_run("gpu").roofline_model()
    total = ref[(ref["step"] == "Total") & ref["include_infeed_outfeed"].astype(bool)]
    drawn = int(((total["operational_intensity"] > 0) & (total["measured_flop_rate"] > 0)).sum())
    left = widget.locator("[data-testid='left-out']")
    assert int(left.get_attribute("data-count")) == len(total) - drawn == 15
    assert left.inner_text().startswith(f"15 of {len(total)} rows are not drawn")
    assert widget.evaluate(PAINTED_PIXELS_JS) > 3000  # the roofs and the two points on log axes
    # A row click (an op not on the chart) still shows its card.
    widget.locator("[data-testid='roofline-table'] tr[data-row='1']").click()
    _wait_text(page, "op-card-name", "custom-call.1")
    assert "jit_dot(49)" in widget.locator("[data-op-card]").inner_text()
    save_screenshot(page, "roofline-gpu-sample")


def test_roofline_step_filter_on_tpu(page, jupyter_lab):
    widget = _show_tool(page, jupyter_lab, "roofline_tpu.ipynb", "RooflineWidget", repr(str(TPU)))
    assert widget.locator("[data-testid='step']").input_value() == "Total"
    assert _rows(widget, "roofline-table") == 18
    widget.locator("[data-testid='step']").select_option("Average")
    widget.locator("[data-testid='no-points']").wait_for(timeout=15_000)
    assert _rows(widget, "roofline-table") == 1
    assert _column(widget, "roofline-table", "operation") == ["Program"]


def test_exports_open_from_a_file(page, tmp_path):
    """`to_html()` of each widget, opened with no server: the charts draw, the tables and the
    selected op's card are there, nothing is fetched."""
    from xprof_widgets.widgets.framework_op_stats import FrameworkOpStatsWidget
    from xprof_widgets.widgets.kernel_stats import KernelStatsWidget
    from xprof_widgets.widgets.roofline import RooflineWidget

    from .test_export import assert_self_contained, open_export

    run = xw.sample_run("gpu")
    kernels = KernelStatsWidget(run)
    kernels.select_kernel(0)
    roofline = RooflineWidget(ELEMENTWISE)
    roofline.select_row(3)
    for name, w, table, rows in (
        ("kernel-stats", kernels, "kernel-table", 12),
        ("framework-op-stats", FrameworkOpStatsWidget(run), "op-table", 4),  # IDLE out, as XProf
        ("roofline", roofline, "roofline-table", 14),
    ):
        path = w.to_html(tmp_path / f"{name}.html")
        widget = open_export(page, path, name)
        assert _rows(widget, table) == rows
        assert widget.evaluate(PAINTED_PIXELS_JS) > 3000, name
        assert_self_contained(page, path)
        page.requests.clear()
    assert widget.locator("[data-testid='op-card-name']").inner_text() == "loop_convert_fusion"


def test_hlo_stats_in_profile_widget(page, jupyter_lab):
    """HLO op stats is one of ProfileWidget's tools: XProf's table and its charts; a row
    opens the op card, whose button opens the graph viewer on that op."""
    page.set_viewport_size({"width": 1400, "height": 1300})
    widget = show_widget(
        page,
        jupyter_lab,
        "hlo_stats.ipynb",
        "import xprof_widgets as xw\nw = xw.ProfileWidget(xw.sample_run('gpu'), tool='hlo_stats', background=False)\nw",
    )
    labels = widget.locator(".xw-profile-tool select option").all_inner_texts()
    assert "HLO op stats" in labels
    stats = xw.sample_run("gpu").hlo_stats()
    assert _rows(widget, "hlo-table") == len(stats) == 16
    assert _column(widget, "hlo-table", "hlo_op_name") == list(stats["hlo_op_name"])
    for name in ("categories", "ops", "rates"):
        assert widget.locator(f"[data-figure='{name}'] canvas").count() >= 1, name
    assert widget.evaluate(PAINTED_PIXELS_JS) > 10_000
    widget.locator("[data-testid='hlo-table'] tr[data-row='0']").click()
    page.wait_for_function(
        "n => document.querySelector(\"[data-testid='op-card-name']\")?.innerText === n",
        arg=str(stats["hlo_op_name"][0]),
        timeout=15_000,
    )
    save_screenshot(page, "hlo-stats-in-profile-widget")
    widget.screenshot(path=str(ARTIFACTS / "hlo-stats-widget.png"))
    widget.locator("[data-testid='show-in-graph']").click()
    page.wait_for_function(
        "() => document.querySelector('.xw-profile-tool select')?.value === 'graph_viewer'", timeout=30_000
    )
    assert page.off_host == [], f"requests left localhost: {page.off_host}"
