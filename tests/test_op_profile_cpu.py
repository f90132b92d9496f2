"""Op profile and HLO stats of JAX on CPU, from XLA:CPU thunk events (beyond
XProf, which shows none). GPU kernels: tests/test_gpu_ops.py."""

import math

import numpy as np
import pandas as pd
import pytest

from xprof_widgets.analysis.core.op_stats import device_op_metrics
from xprof_widgets.analysis.hlo_stats import hlo_stats
from xprof_widgets.analysis.op_profile import op_profile
from xprof_widgets.io.hlo import parse_hlo_proto

from .conftest import corpus_run

CPU_RUNS = ["jax_mlp_cpu", "jax_transformer_cpu"]


@pytest.fixture(scope="module", params=CPU_RUNS)
def cpu_run(request):
    return corpus_run(request.param)


def _thunk_events(run):
    """(program_id, hlo_op, line, begin_ps, duration_ps) of every event with an
    `hlo_op` stat on /host:CPU, read straight from the trace."""
    rows = []
    for line in run.xspace().plane("/host:CPU").lines:
        st = line.stats(names=["hlo_op", "program_id"])
        if "hlo_op" not in st:
            continue
        m = st["hlo_op"].notna().to_numpy()
        rows.append(
            pd.DataFrame(
                {
                    "program_id": st["program_id"].to_numpy()[m].astype(np.int64),
                    "hlo_op": st["hlo_op"].to_numpy()[m].astype(str),
                    "line": line.name,
                    "begin": line.start_ps[m].astype(np.int64),
                    "dur": line.event_duration_ps[m].astype(np.int64),
                }
            )
        )
    return pd.concat(rows, ignore_index=True)


def _top_level_duration(ev):
    """Summed durations of events not nested in another event of their line
    (a plain loop, independent of the vectorised code under test)."""
    total = 0
    for _, g in ev.groupby("line"):
        order = np.lexsort((-(g["begin"] + g["dur"]).to_numpy(), g["begin"].to_numpy()))
        end_max = -1
        for b, d in zip(g["begin"].to_numpy()[order], g["dur"].to_numpy()[order]):
            if b + d > end_max:  # not inside the enclosing event
                if b >= end_max:
                    total += d
                else:  # partial overlap: count only the uncovered part
                    total += b + d - end_max
                end_max = b + d
    return total


def test_cpu_op_profile_is_not_empty(cpu_run):
    prof = op_profile(cpu_run)
    assert not prof.empty and prof.reason == "" and prof.source == "cpu"
    assert "NaN" in prof.notes and "estimated" in prof.notes
    assert all(n.kind == "program" for n in prof.root.children)  # no IDLE on CPU
    stats = hlo_stats(cpu_run)
    assert not stats.empty and stats.attrs["reason"] == "" and stats.attrs["notes"]
    assert (stats["self_time_ps"].diff().dropna() <= 0).all()
    assert stats["cumulative_self_time_fraction"].iloc[-1] == pytest.approx(1.0)
    assert (stats["bound_by"] == "Unknown").all() and stats["hbm_bw_gibs"].isna().all()


def test_cpu_times_match_the_trace(cpu_run):
    ev = _thunk_events(cpu_run)
    db = device_op_metrics(cpu_run)
    ops = db.ops
    # Every thunk event is counted once, in its op.
    assert ops["occurrences"].sum() == len(ev)
    assert ops["time_ps"].sum() == ev["dur"].sum()
    per_op = ev.groupby(["program_id", "hlo_op"])["dur"].agg(["count", "sum"])
    got = ops.set_index(["program_id", "name"]).loc[per_op.index]
    assert (got["occurrences"].to_numpy() == per_op["count"].to_numpy()).all()
    assert (got["time_ps"].to_numpy() == per_op["sum"].to_numpy()).all()
    # Self times add up to the time some thunk ran on each thread.
    assert ops["self_time_ps"].sum() == _top_level_duration(ev)
    assert db.total_time_ps == ops["self_time_ps"].sum() and db.idle_time_ps == 0

    prof = op_profile(cpu_run)
    assert prof.root.time_ps == ops["self_time_ps"].sum()
    for prog in prof.root.children:
        mine = ops[ops["program_id"] == prog.program_id]
        assert prog.time_ps == mine["self_time_ps"].sum(), prog.name
        assert prog.occurrences == 0  # as XProf: program nodes add time only
        # Leaves hold the ops without nested thunks; while/call add self time only.
        leaves = mine[mine["children_time_ps"] == 0]
        assert sum(c.time_ps for c in prog.children) == leaves["time_ps"].sum(), prog.name
        assert sum(c.occurrences for c in prog.children) == leaves["occurrences"].sum(), prog.name


def test_cpu_program_names_and_ops_are_in_the_hlo(cpu_run):
    db = device_op_metrics(cpu_run)
    assert db.ops["in_hlo"].all()
    for pid, names in db.ops.groupby("program_id")["name"]:
        key = db.program_names[int(pid)]
        assert key in cpu_run.hlo_protos and key.endswith(f"({pid})")
        module = parse_hlo_proto(cpu_run.hlo_protos[key]).hlo_module
        hlo_names = {i.name for c in module.computations for i in c.instructions}
        assert set(names) <= hlo_names, key
    stats = hlo_stats(cpu_run)
    assert set(stats["program"]) <= set(cpu_run.hlo_protos)
    assert stats["expression"].str.match(r"^%\S+ = ").all()
    assert (stats["category"] != "unknown").all()


def _dot_flops_by_hand(module, name):
    """2*M*N*K of the (single) dot inside op `name`, with M, N from the result
    shape and K from the lhs shape, plus its output element count."""
    comps = {c.id: c for c in module.computations}
    for comp in module.computations:
        by_id = {i.id: i for i in comp.instructions}
        if name not in {i.name for i in comp.instructions}:
            continue
        instr = next(i for i in comp.instructions if i.name == name)
        if instr.opcode == "fusion":
            (cid,) = instr.called_computation_ids
            by_id = {i.id: i for i in comps[cid].instructions}
            (instr,) = [i for i in comps[cid].instructions if i.opcode == "dot"]
        assert instr.opcode == "dot"
        lhs = list(by_id[instr.operand_ids[0]].shape.dimensions)
        out = list(instr.shape.dimensions)
        assert len(out) == 2 and len(lhs) == 2
        (kdim,) = instr.dot_dimension_numbers.lhs_contracting_dimensions
        m, n, k = out[0], out[1], lhs[kdim]
        return 2 * m * n * k
    raise AssertionError(f"no dot in {name}")


def test_cpu_dot_flops_from_shapes():
    run = corpus_run("jax_mlp_cpu")
    module = parse_hlo_proto(run.hlo_protos["jit_step(30)"]).hlo_module
    ops = device_op_metrics(run).ops.set_index(["program_id", "name"])
    dot = ops.loc[(30, "dot.1")]
    assert dot["category"] == "dot" and dot["flops_estimated"]
    expected = _dot_flops_by_hand(module, "dot.1")
    assert expected == 2 * 1024 * 1024 * 256  # the MLP's 1024x1024 weight gradient, batch 256
    assert dot["flops"] == dot["occurrences"] * expected
    # A YNNPACK matmul fusion holds just a dot: its FLOPs are the dot's.
    fusion = ops.loc[(30, "ynn_fusion.4")]
    assert fusion["category"] == "custom fusion"  # XLA's category of a kCustom fusion, as XProf names GPU ones
    assert fusion["flops"] == fusion["occurrences"] * _dot_flops_by_hand(module, "ynn_fusion.4")
    assert fusion["flops"] == fusion["model_flops"]
    # Elementwise fusion: one FLOP per element of each fused elementwise op.
    add_max = ops.loc[(30, "add_maximum_fusion")]
    assert add_max["flops"] == add_max["occurrences"] * 2 * 256 * 1024  # add + maximum
    # f32 bytes: operands [256,1024] + [1024] and the [256,1024] result.
    assert add_max["bytes_accessed"] == add_max["occurrences"] * 4 * (2 * 256 * 1024 + 1024)
    stats = hlo_stats(run).set_index("hlo_op_name")
    assert stats.loc["dot.1", "flop_rate_gflops"] == pytest.approx(dot["flops"] / (dot["time_ps"] / 1e3))


def test_cpu_utilisations_are_nan_and_flops_marked(cpu_run):
    prof = op_profile(cpu_run)
    df = prof.to_dataframe()
    busy = df[df["time_ps"] > 0]
    assert busy["flops_utilization"].isna().all() and busy["hbm_utilization"].isna().all()
    assert busy["wasted_time_fraction"].isna().all()
    # Fused ops (no time of their own) are as unknown as their parents: "n/a", not "0.00 %".
    fused = df[df["kind"] == "fused"]
    assert len(fused) > 10
    assert fused["flops_utilization"].isna().all() and fused["hbm_utilization"].isna().all()
    assert df.loc[df["flops"] > 0, "flops_estimated"].all()
    assert df.loc[0, "flops_estimated"]
    by_cat = op_profile(cpu_run, "category")
    assert sum(c.time_ps for c in by_cat.root.children) <= by_cat.root.time_ps
    assert math.isclose(sum(c.time_fraction for c in prof.root.children), 1.0)


@pytest.mark.parametrize("logdir", ["jax_mlp_cpu", "tpu_v6e_inference"])
def test_group_by_provenance(logdir):
    """The framework-op path as a tree: each node's time is the sum of the ops below it."""
    from xprof_widgets.analysis.op_profile import NO_PROVENANCE

    run = corpus_run(logdir)
    prof = run.op_profile(group_by="provenance", top_n=10_000, exclude_idle=True)
    by_program = run.op_profile(top_n=10_000, exclude_idle=True)
    leaves = [n for n, _, _ in prof.root.walk() if n.kind == "op"]
    assert sorted(n.name for n in leaves) == sorted(n.name for n, _, _ in by_program.root.walk() if n.kind == "op")
    for node, _, _ in prof.root.walk():
        if node.kind == "provenance":
            below = [c for c, _, _ in node.walk() if c.kind == "op"]
            assert node.time_ps == pytest.approx(sum(c.time_ps for c in below))
    for leaf in leaves:  # each op sits under its own path
        path = [p for p in (leaf.provenance or "").split("/") if p] or [NO_PROVENANCE]
        node = prof.root
        for part in path:
            node = next(c for c in node.children if c.name == part and c.kind == "provenance")
        assert any(c is leaf for c in node.children)


def test_cpu_op_card_says_bandwidth_is_unknown(cpu_run):
    """A CPU op's card: no HBM peak and no HBM bytes measured reads "n/a", as the tables say
    it, never "0.00 GB/s"; where bytes are known, the rate with "peak unknown"."""
    from xprof_widgets.widgets.op_details import op_details, op_details_html

    prof = op_profile(cpu_run)
    nodes = [n for n, _, _ in prof.root.walk() if n.kind in ("op", "fused")]
    for node in nodes:
        details = op_details(node, "p")
        page = op_details_html(details)
        assert "0.00 GB/s" not in page, node.name
        if details["hbm_gb_per_s"]:
            assert f"{details['hbm_gb_per_s']:,.2f} GB/s (peak unknown)" in page
        else:
            assert "<td>HBM bandwidth</td><td>n/a</td>" in page
    assert any(not op_details(n, "p")["hbm_gb_per_s"] for n in nodes)
