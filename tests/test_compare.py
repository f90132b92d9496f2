"""xw.compare on real runs: every number is the run's own, deltas are b - a.

tf_keras_cpu: two TensorFlow runs of the same Keras model (the second with the
BFC allocator, so it alone has a memory profile). tests/data/mlp_widths: the
same JAX MLP step at hidden width 256 and 1024 (made by make.py there).
"""

import html
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.compare import (
    DISJOINT_BREAKDOWN,
    pair_programs,
    split_program,
)
from xprof_widgets.format import size_short

from .conftest import PROFILES, corpus_run

MLP = Path(__file__).parent / "data" / "mlp_widths" / "plugins" / "profile"


@pytest.fixture(scope="module")
def tf_runs():
    runs = xw.list_runs(PROFILES / "tf_keras_cpu")
    return xw.load_run(runs.path[0]), xw.load_run(runs.path[1])


@pytest.fixture(scope="module")
def tf_compare(tf_runs):
    return xw.compare(*tf_runs)


@pytest.fixture(scope="module")
def mlp_runs():
    return xw.load_run(MLP / "w256"), xw.load_run(MLP / "w1024")


@pytest.fixture(scope="module")
def mlp_compare(mlp_runs):
    return xw.compare(*mlp_runs)


def test_steps_are_the_runs_own_numbers(tf_runs, tf_compare):
    a, b = tf_runs
    ova, ovb = a.overview(), b.overview()
    c = tf_compare
    assert (c.name_a, c.name_b) == (a.name, b.name)
    assert c.steps_reason == ""
    assert (c.step_count_a, c.step_count_b) == (len(ova.steps), len(ovb.steps)) == (28, 18)
    steps = c.steps.set_index("quantity")
    assert steps.loc["step_time_ms", "a_ms"] == ova.avg_step_time_ms == c.avg_step_time_a_ms
    assert steps.loc["step_time_ms", "b_ms"] == ovb.avg_step_time_ms == c.avg_step_time_b_ms
    for q in steps.index.drop("step_time_ms"):
        assert steps.loc[q, "a_ms"] == pytest.approx(ova.steps[q].mean(), rel=1e-12)
        assert steps.loc[q, "b_ms"] == pytest.approx(ovb.steps[q].mean(), rel=1e-12)
    np.testing.assert_allclose(steps["delta_ms"], steps["b_ms"] - steps["a_ms"])
    np.testing.assert_allclose(steps["ratio"], steps["b_ms"] / steps["a_ms"])
    np.testing.assert_allclose(steps["change_percent"], 100 * (steps["b_ms"] / steps["a_ms"] - 1))
    # CPU Keras: host compute, input and all others; the zero columns are left out.
    assert {"host_compute_ms", "input_ms", "all_others_ms"} <= set(steps.index)
    assert "device_compute_ms" not in steps.index
    # The disjoint breakdown adds up to the step time in each run, as in XProf.
    parts = steps.loc[[q for q in DISJOINT_BREAKDOWN if q in steps.index]]
    assert parts["a_ms"].sum() == pytest.approx(ova.steps["step_time_ms"].mean(), rel=1e-6)


def test_summary_sentences(tf_runs, tf_compare):
    a, b = tf_runs
    va, vb = a.overview().avg_step_time_ms, b.overview().avg_step_time_ms
    first = tf_compare.summary[0]
    assert first.startswith(f"step time {va:.4g} ms -> {vb:.4g} ms ({100 * (vb / va - 1):+.1f} %)")
    assert first == "step time 55.14 ms -> 36.72 ms (-33.4 %) (averages over 28 and 18 steps)"
    assert tf_compare.summary[1].startswith("biggest change in the step breakdown: host compute")
    assert str(tf_compare).splitlines() == tf_compare.summary


def test_missing_tools_are_said_in_words(tf_runs, tf_compare):
    a, b = tf_runs
    c = tf_compare
    # No XLA in a Keras CPU run: no ops, no modules; said once, not raised.
    assert c.ops.empty and c.ops_reason.startswith("no HLO ops in either run: ")
    assert "hlo_op" in c.ops_reason
    assert c.modules.empty and c.modules_reason.startswith("no HLO modules in either run")
    # Only run b used the BFC allocator.
    assert c.allocators["memory_id"].tolist() == ["bfc_cpu_allocator_for_gpu"]
    row = c.allocators.iloc[0]
    assert np.isnan(row.peak_bytes_in_use_a)
    assert row.peak_bytes_in_use_b == b.memory_profile("bfc_cpu_allocator_for_gpu").peak_bytes_in_use == 134210304
    assert f"run a ({a.name}) has no memory profile: no allocator events" in c.allocators_reason
    assert any(s.startswith("allocator bfc_cpu_allocator_for_gpu peak in use: n/a -> 128 MiB") for s in c.summary)


def test_ops_are_the_runs_own_hlo_stats(mlp_runs, mlp_compare):
    a, b = mlp_runs
    c = mlp_compare
    assert c.ops_reason == ""
    ha = a.hlo_stats().set_index(["program", "hlo_op_name"])
    hb = b.hlo_stats().set_index(["program", "hlo_op_name"])
    both = c.ops_in_both
    assert len(both) >= 20
    for row in both.itertuples():
        ra, rb = ha.loc[(row.program_a, row.hlo_op_name)], hb.loc[(row.program_b, row.hlo_op_name)]
        assert row.total_time_a_ps == ra.total_time_ps and row.total_time_b_ps == rb.total_time_ps
        assert row.occurrences_a == ra.occurrences and row.occurrences_b == rb.occurrences
        assert row.flop_rate_a_gflops == pytest.approx(ra.flop_rate_gflops)
    assert (c.ops["delta_ps"] == c.ops["total_time_b_ps"] - c.ops["total_time_a_ps"]).all()
    np.testing.assert_allclose(both["ratio"], both["total_time_b_ps"] / both["total_time_a_ps"])
    # Sorted by the size of the change.
    d = c.ops["delta_ps"].abs().to_numpy()
    assert (d[:-1] >= d[1:]).all()
    # Every op of either run is there once: the ones in both plus those of one run.
    assert len(c.ops) == len(ha) + len(hb) - len(both)
    # The step function was compiled as jit_step(26) in one process and jit_step(30) in the other.
    assert set(both["program"]) == {"jit_step(26) / jit_step(30)"}
    # XLA:CPU has no known peak: utilisation unknown, not 0.
    assert both["flops_utilization_a"].isna().all()


def _is_matmul(run, program, name):
    """A dot, or a fusion (XLA:CPU's YNNPACK custom fusions) around one."""
    from xprof_widgets.analysis.core.xla_ops import program_id_of, program_modules

    instr = program_modules(run).instruction(program_id_of(program), name)
    return instr.opcode == "dot" or any(i.opcode == "dot" for c in instr.called for i in c.instructions)


def test_wider_mlp_has_slower_matmuls(mlp_runs, mlp_compare):
    c = mlp_compare
    both = c.ops_in_both
    mm = both[[_is_matmul(mlp_runs[0], p, n) for p, n in zip(both["program_a"], both["hlo_op_name"])]]
    assert len(mm) >= 8
    # 4x wider layers: 4-16x the FLOPs of each matmul; every one takes longer.
    assert (mm["ratio"] > 1).all()
    assert mm["total_time_b_ps"].sum() > 3 * mm["total_time_a_ps"].sum()
    assert c.avg_step_time_b_ms > 2 * c.avg_step_time_a_ms
    regressions = next(s for s in c.summary if s.startswith("biggest regressions: "))
    top = c.ops_in_both.iloc[0]
    assert regressions.startswith(f"biggest regressions: {top.hlo_op_name} in jit_step ")


def test_module_peaks_are_the_memory_viewers(mlp_runs, mlp_compare):
    a, b = mlp_runs
    m = mlp_compare.modules
    step = m[m["name"] == "jit_step"].iloc[0]
    assert (step.module_a, step.module_b, step.matched_by) == ("jit_step(26)", "jit_step(30)", "name")
    assert step.peak_heap_a_bytes == a.memory_viewer("jit_step(26)").peak_heap_bytes
    assert step.peak_heap_b_bytes == b.memory_viewer("jit_step(30)").peak_heap_bytes
    assert step.peak_heap_b_bytes > 4 * step.peak_heap_a_bytes  # activations 4x wider, weights 4-16x
    assert step.delta_bytes == step.peak_heap_b_bytes - step.peak_heap_a_bytes
    # Every module of both runs is listed once.
    assert set(m["module_a"].dropna()) == set(a.modules["module"])
    assert set(m["module_b"].dropna()) == set(b.modules["module"])
    assert mlp_compare.allocators.empty and "JAX CPU runs do not record them" in mlp_compare.allocators_reason


def test_reversed_comparison_negates(mlp_runs, mlp_compare):
    back = xw.compare(mlp_runs[1], mlp_runs[0])
    fwd = mlp_compare.ops.rename(columns={"program_a": "program_of_w256"})
    rev = back.ops.rename(columns={"program_b": "program_of_w256"})
    joined = fwd.merge(rev, on=["program_of_w256", "hlo_op_name"], suffixes=("", "_rev"))
    assert len(joined) == len(mlp_compare.ops_in_both) + len(mlp_compare.ops_only_a)
    assert (joined["delta_ps"] == -joined["delta_ps_rev"]).all()
    s = back.steps.set_index("quantity")
    assert s.loc["step_time_ms", "a_ms"] == mlp_compare.avg_step_time_b_ms


def test_utilisations_from_the_op_profile():
    run = corpus_run("tpu_v6e_inference")
    c = xw.compare(run, run)
    prof = run.op_profile(top_n=1 << 30)
    util = {(n.program_id, n.name): n.flops_utilization_of_time for n, _, _ in prof.root.walk() if n.kind == "op"}
    ops = run.hlo_stats()
    assert len(c.ops) == len(ops) and (c.ops["present"] == "both").all()
    assert (c.ops["delta_ps"] == 0).all() and (c.ops["ratio"] == 1).all()
    pid = {p: i for p, i in zip(ops["program"], ops["program_id"])}
    for row in c.ops.itertuples():
        assert row.flops_utilization_a == pytest.approx(util[(pid[row.program_a], row.hlo_op_name)])
        assert row.flops_utilization_b == row.flops_utilization_a
    assert c.ops["flops_utilization_a"].max() > 0
    # Four allocators (one per TPU core), compared with themselves.
    assert c.allocators["memory_id"].tolist() == ["0", "1", "2", "3"]
    assert c.allocators["peak_bytes_in_use_a"].iloc[0] == run.memory_profile("0").peak_bytes_in_use
    # No step markers in this inference profile: said, and no exception.
    assert "has no steps" in c.steps_reason and c.avg_step_time_a_ms is None
    assert c.steps["a_ms"].isna().all()


def test_runs_with_nothing_in_common(tf_runs):
    jax_run = xw.load_run(MLP / "w256")
    c = xw.compare(tf_runs[0], jax_run)
    assert c.ops["present"].eq("b only").all() and len(c.ops) == len(jax_run.hlo_stats())
    assert c.ops_reason.startswith(f"run a ({tf_runs[0].name}) has no HLO ops")
    assert c.modules["module_a"].isna().all()
    assert c.avg_step_time_a_ms == tf_runs[0].overview().avg_step_time_ms
    assert not any(s.startswith("biggest regressions") for s in c.summary)
    assert "0 op(s) only in run a, " in " ".join(c.summary)


def test_paths_work(tf_runs):
    c = xw.compare(tf_runs[0].path, str(tf_runs[1].path))
    assert c.name_b == tf_runs[1].name


def test_pair_programs():
    assert split_program("jit_step(30)") == ("jit_step", 30)
    assert split_program("main") == ("main", None)
    pairs = pair_programs(
        ["jit_step(26)", "jit_f(3)", "jit_g(5)", "jit_g(9)", "gone(1)", "jit_h(1)", "jit_h(4)"],
        ["jit_step(30)", "jit_f(3)", "jit_g(7)", "jit_g(8)", "jit_g(11)", "new(2)", "jit_h(1)", "jit_h(5)", "jit_h(6)"],
    )
    got = {(a, b): how for a, b, how in pairs}
    assert got == {
        ("jit_f(3)", "jit_f(3)"): "name and program id",
        ("jit_step(26)", "jit_step(30)"): "name",
        ("jit_g(5)", "jit_g(7)"): "name, 1 of 3 by program id",
        ("jit_g(9)", "jit_g(8)"): "name, 2 of 3 by program id",
        (None, "jit_g(11)"): "b only",
        ("gone(1)", None): "a only",
        (None, "new(2)"): "b only",
        ("jit_h(1)", "jit_h(1)"): "name and program id, one of 3",
        ("jit_h(4)", "jit_h(5)"): "name, 1 of 2 by program id",
        (None, "jit_h(6)"): "b only",
    }
    assert len(pairs) == len(got)


def test_summary_names_only_sure_module_pairs(mlp_compare):
    # jit__normal is compiled once per shape: 4 in the narrow run, 5 in the wide one; which
    # pairs with which is a guess, so the summary speaks of jit_step (one in each run).
    m = mlp_compare.modules
    assert not m[m["name"] == "jit__normal"]["matched_by"].isin(["name", "name and program id"]).any()
    memory = [s for s in mlp_compare.summary if "peak heap" in s]
    assert memory and all("jit__normal" not in s for s in memory)
    step = m[m["name"] == "jit_step"].iloc[0]
    assert memory[0] == (
        f"peak heap of the largest module, jit_step: {size_short(step.peak_heap_a_bytes)} -> "
        f"{size_short(step.peak_heap_b_bytes)} ({100 * (step.ratio - 1):+.1f} %)"
    )


def test_widget(mlp_compare):
    from xprof_widgets.widgets.compare import CompareWidget

    w = CompareWidget(mlp_compare)
    assert w.result is mlp_compare
    assert set(w.figures) == {"steps"}
    assert f'data-rows="{len(mlp_compare.ops)}"' in w.html
    top = mlp_compare.ops.iloc[0]
    assert f"<td>{top.hlo_op_name}</td>" in w.html
    assert "jit_step(26) / jit_step(30)" in w.html
    assert html.escape(mlp_compare.summary[0]) in w.html
    assert 'data-testid="modules"' in w.html and 'data-testid="allocators-reason"' in w.html


def test_widget_from_runs_without_steps_or_ops(tf_runs):
    from xprof_widgets.widgets.compare import CompareWidget

    w = CompareWidget(*tf_runs)
    assert 'data-testid="ops-reason"' in w.html and "no HLO ops in either run" in w.html
    assert 'data-testid="allocators"' in w.html
    # The step bars: two runs, stacked by the breakdown columns they use.
    assert set(w.figures) == {"steps"}


def test_names_are_escaped(mlp_runs):
    from xprof_widgets.widgets.compare import CompareWidget

    c = xw.compare(*mlp_runs)
    c.ops = c.ops.copy()
    c.ops.loc[0, "hlo_op_name"] = "<img src=x onerror=alert(1)>"
    c.name_a = "<b>run</b>"
    c.summary = ["<script>x</script>"]
    page = CompareWidget(c).html
    assert "<img" not in page and "<script>x" not in page and "<b>run</b>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page


def test_dataframe_dtypes(mlp_compare):
    ops = mlp_compare.ops
    for col in ("total_time_a_ps", "total_time_b_ps", "delta_ps", "occurrences_a"):
        assert pd.api.types.is_integer_dtype(ops[col]), col
