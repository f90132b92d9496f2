"""TPU training pages in JupyterLab in headless Chromium, on TPU runs made from the real v6e
file (`tools/make_tpu_profiles.py`): the overview's TPU step table (average step time, the
TPU conclusion, a step clicked), the pod viewer (steps, a step's eight cores on two hosts,
a core clicked), and in a ProfileWidget the pod viewer's "Open in the trace viewer" showing
that core's step. Screenshots: tests/artifacts/overview-tpu-training.png,
pod-viewer.png, pod-viewer-to-trace.png, inference-profile.png, perf-counters.png,
overview-smart-suggestion.png, utilization-viewer.png, kernel-utilization.png,
megascale-stats.png, inference-batches.png, inference-tensor-patterns.png,
overview-sparse-cores.png."""

import pytest

import xprof_widgets as xw

from ..test_tpu_steps import make_tpu_profiles
from .harness import ARTIFACTS, click_a_step, finish, save_screenshot, show_widget, tool_cell

# The x range of the last connected Bokeh plot on the page: [start, end].
X_RANGE_JS = """
async () => {
  const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
  for (const view of [...Object.values(Bokeh.embed.index)].reverse()) {
    if (!view.el.isConnected || view.model.x_range == null) continue;
    return [view.model.x_range.start, view.model.x_range.end];
  }
  return null;
}
"""


@pytest.fixture(scope="module")
def tpu_runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("tpu_browser")
    for v in ("infeed", "pod", "serving", "counters", "barriers", "megascale", "serving_details", "sparsecore_planes"):
        make_tpu_profiles.write(v, root / v)
    return root


def _click_canvas_until(page, widget, figure, testid, fractions=(0.12, 0.3, 0.5, 0.7, 0.88)):
    """Click across the `figure` chart until `testid` shows (bars have gaps); its locator."""
    canvas = widget.locator(f"[data-figure='{figure}'] canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    chosen = widget.locator(f"[data-testid='{testid}']")
    for fraction in fractions:
        page.mouse.click(box["x"] + box["width"] * fraction, box["y"] + box["height"] * 0.8)
        try:
            chosen.wait_for(timeout=4_000)
            return chosen
        except Exception:
            continue
    chosen.wait_for(timeout=10_000)
    return chosen


def test_tpu_training_overview_in_lab(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "infeed"
    page.set_viewport_size({"width": 1300, "height": 1200})
    widget = show_widget(page, jupyter_lab, "overview-tpu-training.ipynb", tool_cell("OverviewWidget", logdir))
    expected = xw.load_run(logdir).overview()
    assert len(expected.steps) == 100 and "tc_compute_ms" in expected.steps
    assert widget.locator("[data-stat='avg_step_time_ms']").inner_text() == f"{expected.avg_step_time_ms:,.3f} ms"
    assert widget.locator("[data-testid='recommendation']").inner_text() == expected.recommendation
    assert expected.recommendation.startswith("Your program is NOT input-bound because only 3.8%")
    # The performance summary lists XProf's TPU components, averaged over the steps.
    summary = widget.locator("[data-testid='step-summary']").inner_text()
    for label in ("TensorCore compute", "TensorCore input", "TensorCore output", "TensorCore idle"):
        assert label in summary
    assert f"{expected.tpu['tc_infeed_ms_average']:,.1f}" in summary
    chosen = click_a_step(page, widget)
    assert chosen.inner_text().startswith("Selected ")
    finish(page, widget, "overview-tpu-training.png", "overview-tpu-training-page")


def test_sparse_cores_on_the_overview_in_lab(page, jupyter_lab, tpu_runs):
    """A run with SparseCore planes: the performance summary adds XProf's SparseCore step
    time, compute, idle and busy averages; the step chart has no SparseCoreV0 parts."""
    logdir = tpu_runs / "sparsecore_planes"
    page.set_viewport_size({"width": 1300, "height": 1200})
    widget = show_widget(page, jupyter_lab, "overview-sparse-cores.ipynb", tool_cell("OverviewWidget", logdir))
    expected = xw.load_run(logdir).overview()
    assert "sc_step_time_ms" in expected.steps and "scv0_compute_ms" not in expected.steps
    rows = {
        r.get_attribute("data-component"): r.inner_text()
        for r in widget.locator("[data-testid='step-summary'] tr[data-component]").all()
    }
    for name, key in (("sc_step_time", "sc_step_time_ms_average"), ("sc_idle", "sc_idle_ms_average")):
        assert f"{expected.tpu[key]:,.1f}" in rows[name]
    assert rows["sc_step_time"].startswith("SparseCore step time") and "scv0_compute" not in rows
    finish(page, widget, "overview-sparse-cores.png", "overview-sparse-cores-page")


def test_pod_viewer_in_lab(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "pod"
    page.set_viewport_size({"width": 1300, "height": 1400})
    widget = show_widget(page, jupyter_lab, "pod-viewer.ipynb", tool_cell("PodViewerWidget", logdir))
    pod = xw.load_run(logdir).pod_viewer()
    slowest_step = int(pod.loc[pod["total_duration_us"].idxmax(), "step_num"])
    assert widget.locator("[data-stat='steps']").inner_text() == "100"
    assert widget.locator("[data-stat='cores']").inner_text() == "8 on 2 host(s)"
    assert widget.locator("[data-stat='step']").inner_text() == str(slowest_step)  # the slowest step first
    rows = widget.locator("[data-testid='pod-cores'] tbody tr")
    assert rows.count() == 8
    step = pod[pod["step_num"] == slowest_step].sort_values("core_id")
    assert rows.first.locator("td").nth(2).inner_text() == f"{step['total_duration_us'].iloc[0] / 1e3:,.3f}"
    slow = step.loc[(step["total_duration_us"] - step["All others"]).idxmax()]
    assert widget.locator("[data-stat='slowest_core']").inner_text().startswith(f"{slow.host}:{slow.core_id},")
    chosen = _click_canvas_until(page, widget, "cores", "selected-core")
    assert chosen.inner_text().startswith("Selected core tpu-worker-")
    finish(page, widget, "pod-viewer.png", "pod-viewer-page")


def test_pod_viewer_opens_the_trace_in_a_profile_widget(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "pod"
    page.set_viewport_size({"width": 1300, "height": 1400})
    source = (
        f"import xprof_widgets as xw\nw = xw.ProfileWidget({str(logdir)!r}, background=False)\nw.tool = 'pod_viewer'\nw"
    )
    show_widget(page, jupyter_lab, "pod-viewer-profile.ipynb", source)
    widget = page.locator(".xw-profile")
    assert "Pod viewer" in widget.locator(".xw-profile-tool select").inner_text()
    chosen = _click_canvas_until(page, widget, "cores", "selected-core")
    text = chosen.inner_text()  # "Selected core HOST:CORE, step N: ..."
    host = text.split("Selected core ")[1].split(":")[0]
    core = int(text.split(":")[1].split(",")[0])
    step = int(text.split("step ")[1].split(":")[0])
    widget.locator("[data-testid='show-in-trace']").click()
    page.wait_for_function(
        "() => document.querySelector('.xw-profile-tool select')?.value === 'trace_viewer'", timeout=30_000
    )
    assert widget.locator(".xw-profile-host select").input_value() == host
    # The trace shows that core's step: the kernel's viewer window is the step's time range.
    pod = xw.load_run(logdir).pod_viewer()
    row = pod[(pod["core_id"] == core) & (pod["step_num"] == step)].iloc[0]
    shown = None
    for _ in range(40):  # the trace viewer's x range (ms from the profile's start), once drawn
        shown = page.evaluate(X_RANGE_JS)
        if shown and shown[1] - shown[0] < 5_000:
            break
        page.wait_for_timeout(250)
    assert shown is not None
    width_ms = (row.end_ps - row.begin_ps) / 1e9
    assert shown[1] - shown[0] == pytest.approx(width_ms, rel=1e-3)
    assert shown[0] == pytest.approx(row.begin_ps / 1e9, abs=1e-3)  # (the trace's origin: the file's 0)
    save_screenshot(page, "pod-viewer-to-trace")
    assert (ARTIFACTS / "pod-viewer-to-trace.png").exists()
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_inference_profile_in_lab(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "serving"
    page.set_viewport_size({"width": 1300, "height": 1100})
    widget = show_widget(page, jupyter_lab, "inference.ipynb", tool_cell("InferenceProfileWidget", logdir))
    p = xw.load_run(logdir).inference_profile()
    assert widget.locator("[data-stat='requests']").inner_text() == "99"
    assert widget.locator("[data-stat='average_latency_ms']").inner_text() == f"{p.average_latency_ms:,.3f} ms"
    rows = widget.locator("[data-testid='inference-requests'] tbody tr")
    assert rows.count() == 4 and rows.last.locator("td").first.inner_text() == "Average"
    assert rows.first.locator("td").nth(2).inner_text() == f"{p.requests['latency_ms'].iloc[0]:,.3f}"
    assert widget.locator("[data-figure='requests'] canvas").count() >= 1
    finish(page, widget, "inference-profile.png")


def test_inference_batches_in_lab(page, jupyter_lab, tpu_runs):
    """Two models' batches with TF Serving's batching parameters and the tensor patterns
    (`serving_details`): the first model's parameters and patterns, then the other model's
    tables (no parameters recorded for it)."""
    logdir = tpu_runs / "serving_details"
    page.set_viewport_size({"width": 1400, "height": 1300})
    widget = show_widget(page, jupyter_lab, "batches.ipynb", tool_cell("InferenceProfileWidget", logdir))
    p = xw.load_run(logdir).inference_profile()
    first, second = p.models
    assert widget.locator("[data-stat='batches']").inner_text() == f"{(p.all_batches['model_id'] == first).sum():,}"
    row = widget.locator("[data-testid='batching-params'] tr[data-param='max_batch_size'] td")
    assert row.first.inner_text() == "Maximum size of a batch" and row.last.inner_text() == "64"
    patterns = widget.locator("[data-testid='tensor-patterns'] tbody tr")
    assert patterns.count() == len(p.per_model[first].tensor_patterns)
    assert (
        patterns.first.locator("td").nth(1).inner_text() == f"{p.per_model[first].tensor_patterns['count'].iloc[0]:,}"
    )
    widget.locator("[data-testid='tensor-patterns']").scroll_into_view_if_needed()
    save_screenshot(page, "inference-tensor-patterns")
    # The other model chosen in the menu: its requests and batches, asked of the kernel.
    widget.locator("[data-testid='model']").select_option(second)
    want = len(p.per_model[second].batches)
    page.wait_for_function(
        "(n) => document.querySelector(\"[data-testid='inference-batches']\")?.dataset.rows === String(n)"
        " && document.querySelector(\"[data-testid='model']\").value === 'model_b'",
        arg=want,
        timeout=15_000,
    )
    last = widget.locator("[data-testid='inference-batches'] tbody tr").last.locator("td")
    assert last.first.inner_text() == "Aggregated"
    assert last.nth(2).inner_text() == f"{p.per_model[second].batches['latency_ms'].iloc[-1]:,.3f}"
    assert widget.locator("[data-testid='batching-params']").count() == 0
    finish(page, widget, "inference-batches.png")


def test_perf_counters_in_lab(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "counters"
    page.set_viewport_size({"width": 1300, "height": 1100})
    widget = show_widget(page, jupyter_lab, "counters.ipynb", tool_cell("PerfCountersWidget", logdir))
    t = xw.load_run(logdir).perf_counters()
    assert widget.locator("[data-stat='samples']").inner_text() == f"{len(t):,}"
    assert widget.locator("[data-testid='counter-samples']").get_attribute("data-rows") == str(len(t))
    # The filter: only the HBM counters' samples are left, asked of the kernel on Enter.
    box = widget.locator("[data-testid='counter-filter']")
    box.fill("hbm")
    box.press("Enter")
    hbm = int(t["counter"].str.contains("hbm").sum())
    page.wait_for_function(
        "(n) => document.querySelector(\"[data-testid='counter-samples']\")?.dataset.rows === String(n)",
        arg=hbm,
        timeout=15_000,
    )
    finish(page, widget, "perf-counters.png")


def test_utilization_viewer_in_lab(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "counters"
    page.set_viewport_size({"width": 1300, "height": 1300})
    widget = show_widget(page, jupyter_lab, "utilization.ipynb", tool_cell("UtilizationViewerWidget", logdir))
    t = xw.load_run(logdir).utilization_viewer()
    keys = t[["host", "device", "sample"]].drop_duplicates()
    assert widget.locator("[data-stat='samples']").inner_text() == f"{len(keys):,}"
    # Another sample chosen in the menu: its metrics are asked of the kernel and shown.
    host, device, sample = keys.iloc[-1]
    chosen = t[(t["device"] == device) & (t["sample"] == sample)]
    widget.locator("[data-testid='sample']").select_option(f"{host}/{device}/{sample}")
    mxu = chosen[chosen["name"] == "Avg MXU Busy"].iloc[0]
    share = f"{100 * mxu.achieved / mxu.peak:.2f}"
    # The kernel answers with the sample's table: its Avg MXU Busy row shows that sample's share.
    page.wait_for_function(
        """(want) => [...document.querySelectorAll("[data-testid='utilization'] tbody tr")]
          .some((tr) => tr.cells[1]?.textContent === "Avg MXU Busy" && tr.cells[5]?.textContent === want)""",
        arg=share,
        timeout=15_000,
    )
    rows = widget.locator("[data-testid='utilization'] tbody tr")
    assert rows.count() == len(chosen)
    finish(page, widget, "utilization-viewer.png")


def test_kernel_utilization_in_lab(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "counters"
    page.set_viewport_size({"width": 1300, "height": 1300})
    widget = show_widget(page, jupyter_lab, "kernels.ipynb", tool_cell("KernelUtilizationWidget", logdir))
    result = xw.load_run(logdir).kernel_utilization()
    rows = widget.locator("[data-testid='kernels'] tbody tr")
    assert rows.count() == len(result.kernels)
    # A kernel clicked: its units' utilization is shown.
    last = int(result.kernels.index[-1])
    rows.nth(last).click()
    metrics = result.metrics[result.metrics["kernel_row"] == last]
    # The first kernel is selected before the click, with as many metrics: wait for the
    # clicked row to be the selected one (a race CI once lost when waiting for the count alone).
    page.wait_for_function(
        """([n, row]) => {
          const sel = document.querySelector("[data-testid='kernels'] tr.sel");
          return sel !== null && JSON.parse(sel.dataset.params).row === row
            && document.querySelector("[data-testid='kernel-metrics']")?.dataset.rows === String(n);
        }""",
        arg=[len(metrics), last],
        timeout=15_000,
    )
    selected = widget.locator("[data-testid='kernels'] tr.sel td")
    assert selected.nth(4).inner_text().startswith(f"{result.kernels.at[last, 'mxu_utilization']:.2f}")
    finish(page, widget, "kernel-utilization.png")


def test_megascale_stats_in_lab(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "megascale"
    page.set_viewport_size({"width": 1400, "height": 900})
    widget = show_widget(page, jupyter_lab, "megascale.ipynb", tool_cell("MegascaleStatsWidget", logdir))
    run = xw.load_run(logdir)
    both = run.megascale_stats()
    assert widget.locator("[data-stat='collectives']").inner_text() == str(len(both))
    assert widget.locator("[data-stat='occurrences']").inner_text() == f"{int(both['occurrences'].sum()):,}"
    # One host chosen: its own collectives, asked of the kernel.
    one = run.megascale_stats("tpu-slice-1")
    widget.locator("select[data-request='host']").select_option("tpu-slice-1")
    page.wait_for_function(
        "(n) => document.querySelector(\"[data-stat='occurrences']\")?.innerText === n",
        arg=f"{int(one['occurrences'].sum()):,}",
        timeout=15_000,
    )
    first = widget.locator("[data-testid='megascale'] tbody tr").first.locator("td")
    top = one.sort_values("total_stall_ms", ascending=False, kind="stable").iloc[0]
    assert first.nth(0).inner_text() == top.rendezvous_name
    assert first.nth(4).inner_text() == f"{top.slack_time_ms:,.3f}"
    finish(page, widget, "megascale-stats.png")


def test_smart_suggestion_on_the_overview_in_lab(page, jupyter_lab, tpu_runs):
    logdir = tpu_runs / "barriers"
    page.set_viewport_size({"width": 1300, "height": 1100})
    widget = show_widget(page, jupyter_lab, "suggestion.ipynb", tool_cell("OverviewWidget", logdir))
    box = widget.locator("[data-testid='smart-suggestions']")
    text = box.inner_text()
    assert "TPU barrier-cores" in text and "tpu-worker-2" in text and "11.7% of each step time" in text
    assert box.locator("li").count() == 5  # the stragglers item (with its host) and XProf's three tips
    finish(page, widget, "overview-smart-suggestion.png")
