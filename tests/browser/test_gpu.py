"""JAX on AMD MI300X GPUs in JupyterLab in headless Chromium: the op profile shows XProf's
tree with its IDLE share and the cost model's FLOP rates; the trace viewer shows XProf's
derived GPU lines and an XLA op event opens the op's card. JAX 0.11 on an NVIDIA H200: the
overview's steps are XProf's, the op profile says why CUDA graph kernels are idle time.
Screenshots saved."""

import json

import xprof_widgets as xw

from ..conftest import PROFILES, REFERENCE
from .harness import finish, show_step_page, show_widget, tool_cell
from .test_platform import PAINTED_PIXELS_JS

ELEMENTWISE = PROFILES / "amd_jax_elementwise_mi300"
GEMM = PROFILES / "amd_jax_gemm_mi300"


def test_gpu_op_profile_with_idle(page, jupyter_lab):
    widget = show_widget(page, jupyter_lab, "gpu_op_profile.ipynb", tool_cell("OpProfileWidget", ELEMENTWISE))
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    ref = xw.OpProfileWidget(ELEMENTWISE)
    root = ref.profile.root
    assert (
        widget.locator("[data-stat='flops_utilization']").inner_text()
        == f"{100 * root.flops_utilization_of_time:.4f} %"
    )
    names = widget.locator("tr[data-node] td:first-child").all_inner_texts()
    assert "IDLE" in names  # the devices' idle time, as XProf shows it (62 % here)
    idle = next(n for n, *_ in ref.nodes if n.name == "IDLE")
    assert 0.6 < idle.time_fraction < 0.63
    # The sin fusion: 662 cycles per element on XLA's sm_86 profile, XProf's 0.458 PFLOP/s.
    sin = next(i for i, (n, *_r) in enumerate(ref.nodes) if n.kind == "op" and n.program_id == 13)
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
    op profile of the same run: 232 of its kernels ran in command buffers, counted idle as
    XProf does, and the page says how to see their ops."""
    logdir = PROFILES / "nvidia_jax_mlp_h200"
    ref = json.loads((REFERENCE / "nvidia_jax_mlp_h200" / "2026_11_26_01_22_22" / "overview_page.json").read_text())
    widget, expected = show_step_page(page, jupyter_lab, "OverviewWidget", logdir, "overview")
    assert [str(x) for x in expected.steps["step_name"]] == [r["c"][0]["v"] for r in ref[1]["rows"]]
    assert f"{expected.avg_step_time_ms:.1f}" == ref[1]["p"]["steptime_ms_average"] == "276.0"
    assert widget.locator("[data-stat='device_type']").inner_text() == "Nvidia GPU (Hopper)"
    finish(page, widget, "overview-nvidia-h200.png")
    widget = show_widget(page, jupyter_lab, "nvidia_op_profile.ipynb", tool_cell("OpProfileWidget", logdir))
    note = widget.locator(".xw-note", has_text="command buffers").first.inner_text()
    assert note.startswith("232 of the 305 GPU kernels that name an op ran in CUDA graphs")
    assert "XLA_FLAGS=--xla_gpu_enable_command_buffer=" in note
    finish(page, widget, "op-profile-nvidia-h200.png")
