"""Op profile and HLO stats against XProf 2.24.2's references."""

import json

import pytest

from xprof_widgets.analysis.hlo_stats import hlo_stats
from xprof_widgets.analysis.op_profile import op_profile

from .conftest import REFERENCE, corpus_run

TPU_REF = REFERENCE / "tpu_v6e_inference" / "2025_tpu_inference"
# Every run where XProf has ops: the TPU inference and the three JAX runs on AMD GPUs.
OP_RUNS = [
    ("tpu_v6e_inference", "2025_tpu_inference"),
    ("amd_jax_gemm_mi300", "2026_02_20_13_54_10"),
    ("amd_jax_elementwise_mi300", "2026_02_20_13_54_27"),
    ("amd_jax_conv_mi300", "2026_02_20_13_53_59"),
    ("nvidia_jax_mlp_h200", "2026_11_26_01_22_22"),
    ("nvidia_jax_mlp_no_graphs_h200", "2026_11_26_01_30_16"),
    ("nvidia_jax_scan_h200", "2026_11_26_01_49_05"),
    ("nvidia_jax_scan_no_graphs_h200", "2026_11_26_01_49_10"),
]


@pytest.fixture(scope="module")
def tpu_run():
    return corpus_run("tpu_v6e_inference")


@pytest.fixture(scope="module", params=OP_RUNS, ids=lambda p: p[0])
def op_run(request):
    name, session = request.param
    return corpus_run(name, session), REFERENCE / name / session


def _ref_nodes(node, path=()):
    path = path + (node["name"],)
    yield path, node
    for c in node.get("children", []):
        yield from _ref_nodes(c, path)


@pytest.mark.parametrize("key,exclude_idle", [("byProgram", False), ("byProgramExcludeIdle", True)])
def test_op_profile_matches_xprof(op_run, key, exclude_idle):
    """Every node of XProf's tree, every metric: times, occurrences, children, FLOPs,
    utilisations, HBM bytes, expression, category, provenance (GPU: from the cost model)."""
    run, ref_dir = op_run
    ref = json.loads((ref_dir / "op_profile.json").read_text())[key]
    ours = dict(op_profile(run, "program", exclude_idle=exclude_idle).root.paths())
    refs = list(_ref_nodes(ref))
    assert len(refs) == len(ours)
    for path, r in refs:
        assert path in ours, path
        n, m = ours[path], r["metrics"]
        assert n.time_ps == m.get("rawTime", 0), path
        assert n.occurrences == m.get("occurrences", 0), path
        assert n.num_children == r.get("numChildren", 0), path
        assert n.normalized_time_ps == m.get("normalizedTimePs", 0), path
        assert n.raw_flops == pytest.approx(m.get("rawFlops", 0), rel=1e-9), path
        assert n.flops_utilization == pytest.approx(m.get("flops", 0), rel=1e-6, abs=1e-15), path
        assert n.uncapped_flops_utilization == pytest.approx(m.get("uncappedFlops", 0), rel=1e-6, abs=1e-15)
        bw = m.get("bandwidthUtils", [0, 0, 0])
        got = [n.hbm_utilization, n.on_chip_read_utilization, n.on_chip_write_utilization]
        assert got == pytest.approx(bw, rel=1e-6, abs=1e-15), path
        raw_bytes = m.get("rawBytesAccessedArray", [0, 0, 0])[0]
        assert n.hbm_bytes == pytest.approx(raw_bytes, rel=1e-9), path
        if "xla" in r and r["xla"].get("programId", "0") != "0":
            assert n.expression == r["xla"]["expression"], path
            assert n.category == r["xla"]["category"], path
            assert n.provenance == r["xla"]["provenance"], path
        # Children sorted by time as XProf (fused ops by FLOPs: all zero here).
        if n.kind != "op":
            assert [c.name for c in n.children] == [c["name"] for c in r.get("children", [])], path


def test_op_profile_by_category_and_frame(tpu_run):
    prof = op_profile(tpu_run, "category")
    names = [c.name for c in prof.root.children]
    assert names[0] == "copy-done" and "IDLE" in names
    assert sum(c.time_ps for c in prof.root.children) == prof.root.time_ps
    df = op_profile(tpu_run).to_dataframe()
    assert df.loc[0, "name"] == "by_program" and df.loc[0, "depth"] == 0
    assert (df["wasted_time_fraction"] >= 0).all() and (df["wasted_time_fraction"] <= 1).all()
    fusion = df[df["name"] == "broadcast_add_fusion.1 and its duplicate(s)"].iloc[0]
    assert fusion["flops_utilization"] == pytest.approx(1610612736000 / (9619893637500e-12 * 918e12))


def test_hlo_stats_matches_xprof(op_run):
    run, ref_dir = op_run
    ref = json.loads((ref_dir / "hlo_stats.json").read_text())
    cols = [c["id"] for c in ref["cols"]]
    rows = [{c: (v or {}).get("v") for c, v in zip(cols, r["c"])} for r in ref["rows"]]
    ours = hlo_stats(run)
    assert len(ours) == len(rows)
    for (_, o), r in zip(ours.iterrows(), rows):
        assert o["rank"] == r["rank"]
        assert str(o["program_id"]) == r["program_id"]
        assert (o["category"], o["hlo_op_name"], o["expression"], o["framework_op"]) == (
            r["category"],
            r["hlo_op_name"],
            r["hlo_op_expression"],
            r["tf_op_name"],
        )
        assert o["occurrences"] == r["occurrences"]
        ap = lambda x: pytest.approx(x, rel=1e-9, abs=1e-12)  # noqa: E731
        assert o["total_time_ps"] / 1e6 == ap(r["total_time"])
        assert o["avg_time_ps"] / 1e6 == ap(r["avg_time"])
        assert o["self_time_ps"] / 1e6 == ap(r["total_self_time"])
        assert o["avg_self_time_ps"] / 1e6 == ap(r["avg_self_time"])
        assert o["self_time_fraction"] * 100 == ap(r["total_self_time_percent"])
        assert o["cumulative_self_time_fraction"] * 100 == ap(r["cumulative_total_self_time_percent"])
        assert o["model_flop_rate_gflops"] == ap(r["model_flop_rate"])
        assert o["flop_rate_gflops"] == ap(r["normalized_flop_rate"])
        assert o["memory_bw_gibs"] == ap(r["measured_memory_bw"])
        assert o["hbm_bw_gibs"] == ap(r["hbm_bw"])
        assert o["cmem_read_bw_gibs"] == ap(r["cmem_read_bw"])
        assert o["cmem_write_bw_gibs"] == ap(r["cmem_write_bw"])
        assert o["operational_intensity"] == ap(r["operational_intensity"])
        assert o["bound_by"] == r["bound_by"]
        assert ("Yes" if o["rematerialization"] else "No") == r["hlo_rematerialization"]
        assert ("Yes" if o["outside_compilation"] else "No") == r["outside_compilation"]


@pytest.mark.parametrize(
    "name,session,why",
    [
        ("tf_gpu_multiworker", "2020_12_23_gpu_multi_worker", "tf_op"),
        ("nvidia_jax_no_steps_h200", "2026_11_26_01_22_22", "--xla_gpu_enable_command_buffer="),
    ],
)
def test_gpu_without_xla_or_tf_ops_is_all_idle(name, session, why):
    """XProf's op profile is the devices' time, all idle, when no kernel names an op of its
    program: tf_gpu_multiworker's kernels name no XLA op (`hlo_op`) and no TF op (`tf_op`);
    JAX 0.11's kernels on the H200 ran in CUDA graphs (XLA command buffers), each naming its
    command buffer, `command_buffer_1`, which is no instruction of the program (the reason
    says how to profile without them). XProf shows that tree's root as the IDLE node itself:
    its dedup step takes a root whose only child is IDLE for a group of one; ours keeps the
    root and says why there are no ops."""
    run = corpus_run(name, session)
    ref = json.loads((REFERENCE / name / session / "op_profile.json").read_text())["byProgram"]
    assert ref["name"] == "IDLE" and not ref["children"]
    prof = op_profile(run)
    assert prof.empty and why in prof.reason
    assert [c.name for c in prof.root.children] == ["IDLE"]
    assert prof.root.time_ps == prof.root.children[0].time_ps == int(ref["metrics"]["rawTime"])
    assert hlo_stats(run).empty


def test_command_buffer_kernels_are_counted_and_explained():
    """Of the H200 run's 305 kernels that name an op, 232 ran in command buffers: XProf
    counts them idle (its tree has 20 + 2 + 51 op executions), and the profile says so."""
    prof = op_profile(corpus_run("nvidia_jax_mlp_h200"))
    assert prof.notes.startswith("232 of the 305 GPU kernels that name an op ran in CUDA graphs")
    assert "XLA_FLAGS=--xla_gpu_enable_command_buffer=" in prof.notes
    assert not op_profile(corpus_run("nvidia_jax_mlp_no_graphs_h200")).notes


# JAX on CPU now gets an op profile from XLA:CPU thunks (tests/test_op_profile_cpu.py).
@pytest.mark.parametrize("name", ["tf_keras_cpu", "tf_gpu_multiworker"])
def test_empty_profiles_give_a_reason(name):
    run = corpus_run(name)
    prof = op_profile(run)
    assert prof.empty and prof.reason
    stats = hlo_stats(run)
    assert stats.empty and stats.attrs["reason"]


def test_tpu_ops_are_measured_not_estimated(tpu_run):
    prof = op_profile(tpu_run)
    assert prof.source == "tpu" and prof.notes == ""
    assert not any(n.flops_estimated for n, _, _ in prof.root.walk())
    stats = hlo_stats(tpu_run)
    assert not stats["flops_estimated"].any() and stats.attrs["notes"] == ""


def test_rematerialization_and_outside_compilation_follow_xprofs_rules():
    """XProf's `IsRematerialization` reads the op's own name (the HLO text before `=`), not its
    operands; its `IsOutsideCompilationOp` wants a host `send-done` or TF's host transfer ops."""
    from xprof_widgets.analysis.hlo_stats import is_outside_compilation, is_rematerialization

    assert is_rematerialization("%fusion.remat2 = f32[8]{0} fusion(%p), kind=kLoop", "")
    assert not is_rematerialization("%fusion.3 = f32[8]{0} fusion(%fusion.remat), kind=kLoop", "")
    assert is_rematerialization("%fusion.3 = f32[8]{0} fusion(%p)", "jit(f)/rematted_computation/dot_general")
    assert not is_rematerialization("", "jit(f)/checkpoint/dot_general")
    assert is_outside_compilation("model/outside:XlaSendToHost", "")
    assert is_outside_compilation("", "%send-done.1 = token[] send-done(%send.1), is_host_transfer=true")
    assert not is_outside_compilation("", "%send-done.1 = token[] send-done(%send.1), channel_id=2")
