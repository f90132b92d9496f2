"""Kernels run in CUDA graphs get their HLO op (analysis/command_buffers.py): beyond XProf.

Each rule of the attribution on made-up command buffers over real HLO (parsed by jaxlib),
then files (launches found by correlation id, kernels launched outside the graph while it
ran), then the real H200 runs recorded with graphs on against XProf on the same programs
recorded with graphs off, and the switch that gives XProf's accounting back.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.core import command_buffers as cb
from xprof_widgets.analysis.core.command_buffers import (
    NO_FIT,
    NO_SCHEDULE,
    LaunchPlan,
    attribute_kernels,
    kernel_base_name,
    sanitized_name,
)
from xprof_widgets.io import schema
from xprof_widgets.io.hlo import hlo_module

from .conftest import REFERENCE, corpus_run
from .gpu_space import H100, Kernel, gpu_space, hlo_proto_bytes, write
from .graph_pairs import FOUND_AT_LEAST, WITHIN_AT_LEAST, agreement, xprof_hlo_rows

# Fusions named as XLA names them; `loop_add_fusion.1` is `loop_add_fusion` again (XLA's
# kernel reuse cache gives both one kernel); a while loop whose body is a program of its own.
MODULE = """HloModule jit_step, is_scheduled=true

fused_add {
  p0 = f32[1024]{0} parameter(0)
  p1 = f32[1024]{0} parameter(1)
  ROOT a = f32[1024]{0} add(p0, p1)
}

fused_add.1 {
  q0 = f32[1024]{0} parameter(0)
  q1 = f32[1024]{0} parameter(1)
  ROOT b = f32[1024]{0} add(q0, q1)
}

fused_multiply {
  p0 = f32[1024]{0} parameter(0)
  p1 = f32[1024]{0} parameter(1)
  ROOT m = f32[1024]{0} multiply(p0, p1)
}

fused_subtract {
  p0 = f32[1024]{0} parameter(0)
  p1 = f32[1024]{0} parameter(1)
  ROOT s = f32[1024]{0} subtract(p0, p1)
}

fused_negate {
  p0 = f32[1024]{0} parameter(0)
  ROOT n = f32[1024]{0} negate(p0)
}

body {
  bp = (s32[], f32[1024]{0}) parameter(0)
  i = s32[] get-tuple-element(bp), index=0
  v = f32[1024]{0} get-tuple-element(bp), index=1
  loop_negate_fusion = f32[1024]{0} fusion(v), kind=kLoop, calls=fused_negate
  ROOT bt = (s32[], f32[1024]{0}) tuple(i, loop_negate_fusion)
}

cond {
  cp = (s32[], f32[1024]{0}) parameter(0)
  ROOT c = pred[] constant(false)
}

ENTRY main {
  x = f32[1024]{0} parameter(0)
  y = f32[1024]{0} parameter(1)
  loop_add_fusion = f32[1024]{0} fusion(x, y), kind=kLoop, calls=fused_add
  custom-call.1 = f32[1024]{0} custom-call(loop_add_fusion, y), custom_call_target="__cublas$lt$matmul"
  loop_multiply_fusion = f32[1024]{0} fusion(custom-call.1, y), kind=kLoop, calls=fused_multiply
  custom-call.2 = f32[1024]{0} custom-call(loop_multiply_fusion, y), custom_call_target="__cublas$lt$matmul"
  custom-call.3 = f32[1024]{0} custom-call(custom-call.2, y), custom_call_target="__cublas$lt$matmul"
  loop_subtract_fusion = f32[1024]{0} fusion(custom-call.3, x), kind=kLoop, calls=fused_subtract
  loop_add_fusion.1 = f32[1024]{0} fusion(loop_subtract_fusion, y), kind=kLoop, calls=fused_add.1
  zero = s32[] constant(0)
  init = (s32[], f32[1024]{0}) tuple(zero, loop_add_fusion.1)
  while.1 = (s32[], f32[1024]{0}) while(init), condition=cond, body=body
  ROOT out = f32[1024]{0} get-tuple-element(while.1), index=1
}
"""
NVJET = "nvjet_sm90_tss_256x64_64x5_1x2_h_bz_bias_NNT"
SPLIT_K = "sm90_xmma_gemm_f32f32_tf32f32_f32_nn_n_tilesize64x256x32_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas"
REDUCE = "splitKreduce_kernel"


@pytest.fixture(scope="module")
def module_bytes():
    return hlo_proto_bytes(MODULE)


@pytest.fixture(scope="module")
def plan(module_bytes):
    return LaunchPlan(hlo_module(module_bytes))


def ops(plan, kernels):
    return [op for op, _ in attribute_kernels(plan, kernels)]


def test_kernel_names_follow_xla():
    """LLVM's function names: every character outside [A-Za-z0-9_$] becomes `_`, a leading
    digit gets `_` before it; a clash adds `__<n>`."""
    assert sanitized_name("gemm_fusion_dot_general.11") == "gemm_fusion_dot_general_11"
    assert sanitized_name("custom-call.1") == "custom_call_1"
    assert sanitized_name("1st.fusion") == "_1st_fusion"
    assert sanitized_name("a$b") == "a$b"
    assert kernel_base_name("loop_add_fusion__2") == "loop_add_fusion"
    assert kernel_base_name("loop_add_fusion_2") == "loop_add_fusion_2"


def test_a_kernel_per_fusion(plan):
    assert ops(plan, ["loop_add_fusion", "loop_multiply_fusion", "loop_subtract_fusion"]) == [
        "loop_add_fusion",
        "loop_multiply_fusion",
        "loop_subtract_fusion",
    ]


def test_library_kernels_take_the_call_between_their_neighbours(plan):
    """cuBLAS names its kernels; a call can launch several (split-K and its reduction)."""
    kernels = ["loop_add_fusion", SPLIT_K, REDUCE, "loop_multiply_fusion", NVJET, NVJET, "loop_subtract_fusion"]
    assert ops(plan, kernels[:4]) == ["loop_add_fusion", "custom-call.1", "custom-call.1", "loop_multiply_fusion"]
    # Two calls, two kernels: one each, in order (each call launches at least one).
    assert ops(plan, kernels[3:]) == ["loop_multiply_fusion", "custom-call.2", "custom-call.3", "loop_subtract_fusion"]


def test_a_reused_kernel_is_the_fusion_in_its_place(plan):
    """`loop_add_fusion.1` runs XLA's kernel `loop_add_fusion` (same fused computation): the
    schedule, not the name, says which fusion ran."""
    kernels = ["loop_subtract_fusion", "loop_add_fusion"]
    assert ops(plan, kernels) == ["loop_subtract_fusion", "loop_add_fusion.1"]
    assert ops(plan, ["loop_add_fusion", SPLIT_K]) == ["loop_add_fusion", "custom-call.1"]


def test_a_kernel_no_instruction_fits_is_left_idle(plan):
    """The while body's fusion among the entry's kernels: no instruction of the entry fits,
    and the body alone cannot hold the launch."""
    got = attribute_kernels(plan, ["loop_add_fusion", "loop_negate_fusion", "loop_multiply_fusion"])
    assert got[1] == (None, NO_FIT)
    assert [g[0] for g in got] == ["loop_add_fusion", None, "loop_multiply_fusion"]
    # The body's own launch is the body's.
    assert ops(plan, ["loop_negate_fusion"]) == ["loop_negate_fusion"]


def test_two_places_that_fit_equally_are_not_guessed(plan):
    """One cuBLAS kernel between two calls: either could have launched it. It stays idle
    and says which ops fit; its neighbours keep theirs."""
    got = attribute_kernels(plan, ["loop_multiply_fusion", NVJET, "loop_subtract_fusion"])
    assert got[0] == ("loop_multiply_fusion", "") and got[2] == ("loop_subtract_fusion", "")
    assert got[1][0] is None
    assert got[1][1] == "fits custom-call.2, custom-call.3 equally well"
    # Library kernels alone, with three calls in the program: none is guessed.
    assert ops(plan, [NVJET]) == [None]


COLLECTIVE = """HloModule jit_psum, is_scheduled=true

sum {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT c = f32[] add(a, b)
}

fused_negate {
  p0 = f32[1024]{0} parameter(0)
  ROOT n = f32[1024]{0} negate(p0)
}

ENTRY main {
  x = f32[1024]{0} parameter(0)
  all-reduce-start = f32[1024]{0} all-reduce-start(x), replica_groups={}, to_apply=sum
  all-reduce-done = f32[1024]{0} all-reduce-done(all-reduce-start)
  ROOT loop_negate_fusion = f32[1024]{0} fusion(all-reduce-done), kind=kLoop, calls=fused_negate
}
"""


def test_a_collective_launches_at_its_start():
    """NCCL's kernel belongs to the all-reduce's start; its done is a wait, no work."""
    plan = LaunchPlan(hlo_module(hlo_proto_bytes(COLLECTIVE)))
    assert ops(plan, ["ncclDevKernel_AllReduce_Sum_f32_RING_LL", "loop_negate_fusion"]) == [
        "all-reduce-start",
        "loop_negate_fusion",
    ]


def test_a_module_without_schedule_is_read_by_names_alone():
    """No schedule in the profile: a kernel named after one instruction that no identical
    fusion could have run gets it; reused and library kernels stay idle, saying why."""
    plan = LaunchPlan(hlo_module(hlo_proto_bytes(MODULE.replace(", is_scheduled=true", ""))))
    assert not plan.scheduled
    got = attribute_kernels(plan, ["loop_multiply_fusion", NVJET, "loop_add_fusion"])
    assert got[0] == ("loop_multiply_fusion", "")
    assert got[1] == got[2] == (None, NO_SCHEDULE)


# --- files ---------------------------------------------------------------------------------------


def _graph_kernel(name, start, corr, op="command_buffer_3", node=0):
    return Kernel(
        name,
        start,
        10,
        op=op,
        program_id=7,
        module="jit_step",
        stream=14,
        stats={"correlation_id": corr, "cuda_graph_id": 5, "cuda_graph_node_id": (5 << 32) + node},
    )


def _launch(t0, corr, with_outside=False):
    """One launch of the graph: the entry's kernels; with `with_outside`, XLA ran
    custom-call.1 outside the graph while it ran, its kernel naming its op."""
    names = [
        "loop_add_fusion",
        SPLIT_K,
        "loop_multiply_fusion",
        NVJET,
        NVJET,
        "loop_subtract_fusion",
        "loop_add_fusion",
    ]
    out = [_graph_kernel(n, t0 + 20 * i, corr, node=i) for i, n in enumerate(names)]
    if with_outside:
        out[1] = Kernel(SPLIT_K, t0 + 20, 10, op="custom-call.1", program_id=7, module="jit_step", stream=14)
    return out


@pytest.fixture(scope="module")
def graph_file(tmp_path_factory, module_bytes):
    kernels = _launch(0, 1) + _launch(1000, 2) + _launch(2000, 3, with_outside=True)
    return write(tmp_path_factory.mktemp("graphs"), gpu_space({7: ("jit_step", module_bytes)}, kernels, device=H100))


def test_a_file_of_graph_launches(graph_file):
    """Kernels naming `command_buffer_3`, three launches (correlation ids 1-3); in the third,
    custom-call.1 ran outside the graph and names its op: it holds its place."""
    run = xw.load_run(graph_file)
    table = run.cuda_graph_kernels()
    assert set(table["command_buffer"]) == {"command_buffer_3"}
    got = table.groupby(["kernel", "op"], dropna=False)["launches"].sum().to_dict()
    assert got == {
        ("loop_add_fusion", "loop_add_fusion"): 3,
        ("loop_add_fusion", "loop_add_fusion.1"): 3,
        (SPLIT_K, "custom-call.1"): 2,
        ("loop_multiply_fusion", "loop_multiply_fusion"): 3,
        (NVJET, "custom-call.2"): 3,
        (NVJET, "custom-call.3"): 3,
        ("loop_subtract_fusion", "loop_subtract_fusion"): 3,
    }
    stats = run.hlo_stats().set_index("hlo_op_name")
    assert stats["occurrences"].to_dict() == {
        "loop_add_fusion": 3,
        "loop_add_fusion.1": 3,
        "custom-call.1": 3,
        "loop_multiply_fusion": 3,
        "custom-call.2": 3,
        "custom-call.3": 3,
        "loop_subtract_fusion": 3,
    }
    assert (stats["self_time_ps"] == 30_000).all()
    assert "20 of 20 kernels attributed" in run.hlo_stats().attrs["notes"]


def test_xprof_accounting_on_request(graph_file):
    """attribute_cuda_graphs=False: the graph kernels are idle, as XProf counts them; only
    the kernel that names its op is an op."""
    run = xw.load_run(graph_file, attribute_cuda_graphs=False)
    stats = run.hlo_stats()
    assert stats["hlo_op_name"].tolist() == ["custom-call.1"]
    assert "load_run(path)` finds their ops" in stats.attrs["notes"]
    assert run.cuda_graph_kernels()["op"].notna().all()  # the table is there either way


def test_launches_without_correlation_ids(tmp_path, module_bytes):
    """A tracer that wrote no correlation ids: a launch is a run of consecutive kernels of
    one command buffer on the line."""
    space = schema.XSpace.FromString(gpu_space({7: ("jit_step", module_bytes)}, _launch(0, 0), device=H100))
    for plane in space.planes:
        corr = {k for k, m in plane.stat_metadata.items() if m.name == "correlation_id"}
        for line in plane.lines:
            for ev in line.events:
                keep = [s for s in ev.stats if s.metadata_id not in corr]
                del ev.stats[:]
                ev.stats.extend(keep)
    run = xw.load_run(write(tmp_path, space.SerializeToString()))
    assert run.cuda_graph_kernels()["op"].tolist() == [
        "loop_add_fusion",
        "custom-call.1",
        "loop_multiply_fusion",
        "custom-call.2",
        "custom-call.3",
        "loop_subtract_fusion",
        "loop_add_fusion.1",
    ]


# --- real runs: graphs on, against XProf on the same program with graphs off ---------------------

PAIRS = [
    ("nvidia_jax_mlp_h200", "nvidia_jax_mlp_no_graphs_h200", "2026_11_26_01_30_16"),
    ("nvidia_jax_scan_h200", "nvidia_jax_scan_no_graphs_h200", "2026_11_26_01_49_10"),
    ("nvidia_jax_conv_h200", "nvidia_jax_conv_no_graphs_h200", "2026_11_27_21_20_52"),
    ("nvidia_jax_remat_h200", "nvidia_jax_remat_no_graphs_h200", "2026_11_27_21_21_08"),
]


@pytest.mark.parametrize("graphs_on,graphs_off,session", PAIRS)
def test_attributed_hlo_stats_agree_with_xprof_without_graphs(graphs_on, graphs_off, session):
    """The ops that make 90 % of XProf's device op time with graphs off: every one found
    with graphs on, with its occurrences, and self time within ±35 % for ≥ 85 % of that
    time (two recordings of one program: kernel times differ by a few percent, a few ops by
    more)."""
    ours = corpus_run(graphs_on, attribute_cuda_graphs=True).hlo_stats()
    xprof = json.loads(next((REFERENCE / graphs_off / session).glob("hlo_stats.json")).read_text())
    result = agreement(ours, xprof_hlo_rows(xprof, corpus_run(graphs_off)))
    assert result.found == 1.0 >= FOUND_AT_LEAST
    assert result.within >= WITHIN_AT_LEAST
    assert (result.ops["ours_occurrences"] == result.ops["xprof_occurrences"]).all()


@pytest.mark.parametrize("graphs_on,graphs_off,session", PAIRS)
def test_every_graph_kernel_gets_the_op_it_has_without_graphs(graphs_on, graphs_off, session):
    """Each (kernel name, op) pair we attribute is one XProf sees in the graphs-off
    recording of the same program (where every kernel names its op), reused kernels
    included (`loop_subtract_fusion_3` runs for `loop_subtract_fusion.2` too)."""
    table = corpus_run(graphs_on, attribute_cuda_graphs=True).cuda_graph_kernels()
    assert table["op"].notna().all()
    off = corpus_run(graphs_off)
    truth = set()
    for space in off.xspaces():
        for plane in space.planes:
            if not plane.name.startswith("/device:GPU:"):
                continue
            for line in plane.lines:
                st = line.stat_columns(names=["hlo_op"])
                if "hlo_op" in st:
                    truth |= set(zip(np.asarray(line.names(), dtype=object), np.asarray(st["hlo_op"], dtype=object)))
    # Copies ran as MemcpyD2D without graphs and as the driver's memcpy kernels inside them.
    pairs = {(k, op) for k, op in zip(table["kernel"], table["op"]) if not k.startswith("memcpy")}
    assert pairs <= truth
    memcpy_ops = set(table.loc[table["kernel"].str.startswith("memcpy"), "op"])
    assert memcpy_ops <= {op for name, op in truth if name == "MemcpyD2D"}


def test_runs_without_graph_kernels_are_unchanged():
    """AMD, TPU and CPU runs and the graphs-off H200 run: the same tables with either setting."""
    for name in ("amd_jax_conv_mi300", "tpu_v6e_inference", "nvidia_jax_mlp_no_graphs_h200"):
        off, on = corpus_run(name), corpus_run(name, attribute_cuda_graphs=True)
        assert on.cuda_graph_kernels().empty
        pd.testing.assert_frame_equal(on.hlo_stats(), off.hlo_stats())
        pd.testing.assert_frame_equal(on.kernel_stats(), off.kernel_stats())


# --- hostile modules and files: the attribution is bounded by its input (issue 46) -------------


def _call_dag(depth, calls):
    """A scheduled module where each of `depth` computations calls the next `calls` times
    (no cycle): unrolled, the entry holds calls**(depth-1) copies of the last one's fusion."""
    parts = [
        "HloModule dag, is_scheduled=true",
        "fused_negate {\n  p0 = f32[4]{0} parameter(0)\n  ROOT n = f32[4]{0} negate(p0)\n}",
        f"c{depth} {{\n  p = f32[4]{{0}} parameter(0)\n"
        f"  ROOT loop_negate_fusion = f32[4]{{0}} fusion(p), kind=kLoop, calls=fused_negate\n}}",
    ]
    for d in range(depth - 1, 0, -1):
        body = ["  x0 = f32[4]{0} parameter(0)"]
        for k in range(calls):
            root = "ROOT " if k == calls - 1 else ""
            body.append(f"  {root}x{k + 1} = f32[4]{{0}} call(x{k}), to_apply=c{d + 1}")
        parts.append(("ENTRY " if d == 1 else "") + f"c{d} {{\n" + "\n".join(body) + "\n}")
    return "\n\n".join(parts) + "\n"


def _nested_reducers(depth, calls):
    """A fusion whose fused computation calls a reducer `calls` times, each reducer calling
    the next `calls` times, `depth` deep (rendered at every call site: calls**depth texts)."""
    parts = ["HloModule nested, is_scheduled=true"]
    parts.append(f"r{depth} {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}}")
    for d in range(depth - 1, -1, -1):
        body = ["  a = f32[] parameter(0)", "  b = f32[] parameter(1)", "  z = f32[4]{0} broadcast(a), dimensions={}"]
        for k in range(calls):
            body.append(f"  m{k} = f32[] reduce(z, b), dimensions={{0}}, to_apply=r{d + 1}")
        body.append("  ROOT s = f32[] add(" + ", ".join(f"m{k}" for k in range(2)) + ")")
        parts.append(f"r{d} {{\n" + "\n".join(body) + "\n}")
    parts.append(
        "fused_reduce {\n  p0 = f32[4]{0} parameter(0)\n  c = f32[] constant(0)\n"
        "  ROOT r = f32[] reduce(p0, c), dimensions={0}, to_apply=r0\n}"
    )
    parts.append(
        "ENTRY main {\n  x = f32[4]{0} parameter(0)\n"
        "  ROOT input_reduce_fusion = f32[] fusion(x), kind=kInput, calls=fused_reduce\n}"
    )
    return "\n\n".join(parts) + "\n"


def test_a_call_graph_calling_computations_many_times_over_is_unrolled_within_bounds():
    """8 computations each calling the next 8 times unroll to 8**7 = 2 M fusions: the plan
    stops at its room (a few times the module's size), says it was cut, and attributes
    what fits."""
    module = hlo_module(hlo_proto_bytes(_call_dag(depth=8, calls=8)))
    plan = LaunchPlan(module)
    instructions = sum(len(c.instructions) for c in module.computations.values())
    assert plan.cut
    room = cb.EXPAND_PER_INSTRUCTION * instructions + cb.EXPAND_MIN
    assert sum(len(p.instructions) for p in plan.programs) <= room
    got = attribute_kernels(plan, ["loop_negate_fusion"] * 3)
    assert [op for op, _ in got] == ["loop_negate_fusion"] * 3


def test_fused_computations_calling_others_many_times_are_rendered_once_each():
    """A fusion whose reducers call the next reducer 4 times, 9 deep (4**9 call sites): its
    fingerprint renders each computation once (a digest where it is called)."""
    module = hlo_module(hlo_proto_bytes(_nested_reducers(depth=9, calls=4)))
    plan = LaunchPlan(module)
    comps = {c.name: c for c in module.computations.values()}
    fusion = comps["main"].instructions[-1]
    assert fusion.opcode == "fusion"
    fingerprint = plan.fingerprint(fusion)
    assert 0 < len(fingerprint) < 2_000
    assert len(plan._texts) == 10  # r0 ... r9, once each
    # A digest stands for the whole text below it: r8 (reducing with r9) is not r9.
    texts = {}
    assert cb._computation_digest(comps["r8"], texts) != cb._computation_digest(comps["r9"], texts)


def test_kernels_run_outside_overlapping_launches_join_one_launch_each(tmp_path, module_bytes):
    """3,000 launches that all overlap and 3,000 kernels naming their op inside them: each
    kernel joins one launch (a row per kernel, not per pair: 9 M rows before)."""
    n = 3000
    graph = [_graph_kernel("loop_add_fusion", 10 * i, corr=i + 1) for i in range(n)]
    for k in graph:
        k.duration_ns = 10 * n  # every launch runs to the end of the file
    own = [
        Kernel("loop_multiply_fusion", 10 * i + 5, 1, op="loop_multiply_fusion", program_id=7, module="jit_step")
        for i in range(n)
    ]
    path = write(tmp_path, gpu_space({7: ("jit_step", module_bytes)}, graph + own, device=H100))
    run = xw.load_run(path, cache=False)
    space = run.xspace()
    ev, own_frames = cb._graph_events(run, space)
    ev = ev.assign(launch=cb._launches(ev))
    rows = cb._own_ops_within(ev, own_frames)
    assert len(rows) == n and rows["launch"].is_unique
    # Each joins the launch that started last before it (all of them still run).
    assert (rows.sort_values("start")["launch"].to_numpy() == np.sort(rows["launch"].to_numpy())).all()
    table = run.cuda_graph_kernels()
    assert table["launches"].sum() == n


def test_many_distinct_short_launches_spend_the_files_budget(tmp_path, module_bytes, monkeypatch):
    """Each distinct launch sequence costs a fixed amount of the file's budget besides its
    cells: with room for about 20, the rest stay idle, saying why (40,000 such launches
    took 25 s unbudgeted)."""
    kinds = ["loop_add_fusion", "loop_multiply_fusion", "loop_subtract_fusion", NVJET, SPLIT_K]
    import itertools

    sequences = [seq for r in (1, 2, 3) for seq in itertools.product(kinds, repeat=r)][:100]
    kernels, t = [], 0
    for corr, seq in enumerate(sequences, 1):
        for node, name in enumerate(seq):
            kernels.append(_graph_kernel(name, t, corr, node=node))
            t += 20
        t += 100
    path = write(tmp_path, gpu_space({7: ("jit_step", module_bytes)}, kernels, device=H100))
    monkeypatch.setattr(cb, "FILE_BUDGET_CELLS", 20 * cb.PIECE_CELLS)
    table = xw.load_run(path, cache=False).cuda_graph_kernels()
    too_large = table.loc[table["reason"] == cb.TOO_LARGE, "launches"].sum()
    assert too_large > 0.6 * len(kernels)
    assert table.loc[table["op"].notna(), "launches"].sum() > 0


@pytest.mark.parametrize("name, graphs", [("amd_jax_conv_mi300", False), ("nvidia_jax_conv_h200", True)])
def test_a_run_without_command_buffers_is_known_without_parsing_its_modules(name, graphs, monkeypatch):
    """`_names_command_buffers` looks inside a module only where its bytes hold
    "command_buffer" (`ProgramModules.may_hold`, which finds each module's own name): an
    AMD run's modules are never parsed to learn it has no CUDA graph; an H200 run with
    graphs still finds them."""
    from xprof_widgets.analysis.core import xla_ops

    run = xw.load_run(corpus_run(name).path, cache=False)
    modules = xla_ops.program_modules(run)
    assert modules.names and all(modules.may_hold(pid, modules.names[pid].split("(")[0]) for pid in modules.names)
    assert not any(modules.may_hold(pid, "no such name \x01") for pid in modules.names)
    if not graphs:  # (the H200 run's graphs are named by its kernels' `hlo_op`, not its modules)
        assert not any(modules.may_hold(pid, cb.COMMAND_BUFFER_PREFIX) for pid in modules.names)
        monkeypatch.setattr(modules, "module", lambda pid: pytest.fail(f"module {pid} parsed"))
    assert cb._names_command_buffers(run.xspace(), modules) == graphs
