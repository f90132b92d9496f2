"""JAX on AMD MI300X GPUs in JupyterLab in headless Chromium: the op profile shows XProf's
tree (idle excluded first, as XProf, then its IDLE share) and the cost model's FLOP rates; the trace viewer shows XProf's
derived GPU lines and an XLA op event opens the op's card. JAX 0.11 on an NVIDIA H200: the
overview's steps are XProf's; the kernels that ran in CUDA graphs (idle time in XProf) have
their ops in the op profile, and one tapped in the trace opens its op card. Screenshots saved."""

import json

import xprof_widgets as xw

from ..conftest import PROFILES, REFERENCE
from .harness import finish, show_step_page, show_widget, tool_cell
from .test_platform import PAINTED_PIXELS_JS

ELEMENTWISE = PROFILES / "amd_jax_elementwise_mi300"
GEMM = PROFILES / "amd_jax_gemm_mi300"


def test_gpu_op_profile_idle_excluded_then_included(page, jupyter_lab):
    widget = show_widget(page, jupyter_lab, "gpu_op_profile.ipynb", tool_cell("OpProfileWidget", ELEMENTWISE))
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    # First view as XProf's: idle left out (62 % of this run), the card says so.
    ref = xw.OpProfileWidget(ELEMENTWISE)
    root = ref.profile.root
    assert (
        widget.locator("[data-stat='flops_utilization']").inner_text()
        == f"{100 * root.flops_utilization_of_time:.4f} %"
    )
    card = widget.locator(".xw-stat", has=page.locator("[data-stat='total_time']"))
    assert card.locator(".xw-label").inner_text() == "Op time (idle excluded)"
    assert widget.locator("[data-stat='total_time']").inner_text() == f"{root.time_ps / 1e9:,.3f} ms"
    assert "IDLE" not in widget.locator("tr[data-node] td:first-child").all_inner_texts()
    # Include idle: the devices' idle time, as XProf shows it with the box unticked.
    widget.get_by_label("exclude idle").uncheck()
    page.wait_for_function(
        "() => [...document.querySelectorAll('tr[data-node] td:first-child')].some(td => td.innerText === 'IDLE')",
        timeout=15_000,
    )
    assert card.locator(".xw-label").inner_text() == "Profile time (idle included)"
    with_idle = xw.OpProfileWidget(ELEMENTWISE, exclude_idle=False)
    idle = next(n for n, *_ in with_idle.nodes if n.name == "IDLE")
    assert 0.6 < idle.time_fraction < 0.63
    # The sin fusion: 662 cycles per element on XLA's sm_86 profile, XProf's 0.458 PFLOP/s.
    sin = next(i for i, (n, *_r) in enumerate(with_idle.nodes) if n.kind == "op" and n.program_id == 13)
    widget.locator(f"tr[data-node='{sin}']").click()
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='op-card-name']\")?.innerText === 'loop_convert_fusion'",
        timeout=15_000,
    )
    text = widget.locator("[data-op-card]").inner_text()
    assert "457.884 TFLOP/s" in text and "loop fusion" in text and "jit_sin(13)" in text
    finish(page, widget, "gpu-op-profile-widget.png", "gpu-op-profile")


def test_gpu_trace_derived_lines(page, jupyter_lab):
    widget = show_widget(page, jupyter_lab, "gpu_trace.ipynb", tool_cell("TraceViewerWidget", GEMM))
    tr = xw.load_run(GEMM).trace()
    assert {
        "XLA Modules - from #16",
        "XLA Ops - from #16",
        "Framework Ops - from #16",
        "Framework Name Scope - from #16",
        "Source code - from #16",
    } <= set(tr.tracks["name"])
    count = widget.locator("[data-testid='event-count']").inner_text()
    assert int(count.split()[0].replace(",", "")) == tr.event_count
    search = widget.locator("[data-testid='search']")
    search.fill("gemm_fusion_dot_general.1")
    search.press("Enter")
    # The first match is the host thread's launch of the op; the second the derived XLA op event.
    matches = tr.search("gemm_fusion_dot_general.1")
    assert tr.tracks.loc[matches["track"].iloc[1], "name"] == "XLA Ops - from #16"
    widget.locator("[data-testid='search-at']").wait_for(timeout=60_000)
    widget.locator("button[data-request='next']").click()
    widget.locator("[data-testid='op-card']").wait_for(timeout=60_000)
    details = widget.locator("[data-testid='event-details']").inner_text()
    assert "XLA Ops - from #16" in details and "made from" in details
    card = widget.locator("[data-op-card]").inner_text()
    assert "gemm_fusion_dot_general.1" in card and "custom fusion" in card and "jit_dot(5)" in card
    finish(page, widget, "gpu-trace-viewer.png", "gpu-trace-viewer")


def test_nvidia_jax_steps_and_command_buffers(page, jupyter_lab):
    """XProf 2.24.2 finds 6 steps in the H200 run (of 8: it drops the first and last), the
    third 1,588 ms (the evaluation program compiling); the overview shows that table. The
    op profile of the same run: 232 of its kernels ran in command buffers (CUDA graphs),
    where XProf counts them idle; here every one has its op, and the page says so."""
    logdir = PROFILES / "nvidia_jax_mlp_h200"
    ref = json.loads((REFERENCE / "nvidia_jax_mlp_h200" / "2026_11_26_01_22_22" / "overview_page.json").read_text())
    widget, expected = show_step_page(page, jupyter_lab, "OverviewWidget", logdir, "overview")
    assert [str(x) for x in expected.steps["step_name"]] == [r["c"][0]["v"] for r in ref[1]["rows"]]
    assert f"{expected.avg_step_time_ms:.1f}" == ref[1]["p"]["steptime_ms_average"] == "276.0"
    assert widget.locator("[data-stat='device_type']").inner_text() == "Nvidia GPU (Hopper)"
    finish(page, widget, "overview-nvidia-h200.png")
    # The default view (idle excluded, as XProf's): the ops at first sight, not an IDLE disc.
    widget = show_widget(page, jupyter_lab, "nvidia_op_profile.ipynb", tool_cell("OpProfileWidget", logdir))
    note = widget.locator(".xw-note", has_text="CUDA graphs").first.inner_text()
    assert note.startswith("232 of the 305 GPU kernels that name an op ran in CUDA graphs")
    assert "232 of 232 kernels attributed" in note
    names = widget.locator("tr[data-node] td:first-child").all_inner_texts()
    # The longest ops of the training step, as XProf shows them with graphs off.
    assert {"gemm_fusion_dot.1", "custom-call.3", "loop_subtract_fusion"} <= {n.strip() for n in names}
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    finish(page, widget, "op-profile-nvidia-h200.png")


def test_nvidia_graph_kernel_opens_its_op_card(page, jupyter_lab):
    """In the trace of the H200 scan run (graphs on), a kernel of a CUDA graph found by
    search opens the card of the op it ran for: `loop_dynamic_update_slice_fusion_3`, whose
    `hlo_op` stat names `command_buffer_22`, is `loop_dynamic_update_slice_fusion.3`."""
    logdir = PROFILES / "nvidia_jax_scan_h200"
    widget = show_widget(page, jupyter_lab, "nvidia_trace.ipynb", tool_cell("TraceViewerWidget", logdir))
    assert "1,326 of 1,326 kernels attributed" in widget.locator("[data-testid='graph-note']").inner_text()
    search = widget.locator("[data-testid='search']")
    search.fill("loop_dynamic_update_slice_fusion_3")
    search.press("Enter")
    widget.locator("[data-testid='search-at']").wait_for(timeout=60_000)
    widget.locator("[data-testid='op-card']").wait_for(timeout=60_000)
    attributed = widget.locator("[data-testid='attributed-op']").inner_text()
    assert "loop_dynamic_update_slice_fusion.3" in attributed and "command_buffer_22" in attributed
    card = widget.locator("[data-op-card]").inner_text()
    assert "loop_dynamic_update_slice_fusion.3" in card and "jit_scan_train_step(6632)" in card
    finish(page, widget, "trace-viewer-nvidia-graph-kernel.png")
