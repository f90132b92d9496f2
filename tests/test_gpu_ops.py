"""XLA on GPU against XProf 2.24.2: the cost model op by op, the op database, device names
and peaks, and the derived trace lines, on profiles made here and run through XProf itself
(tests/xprof_oracle.py). The three real AMD profiles' tool outputs are compared in
test_gpu_runs.py, test_overview.py and test_trace.py."""

import random

import numpy as np
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.core.gpu_device import gpu_model_name, gpu_peaks
from xprof_widgets.analysis.core.hlo_cost import module_costs
from xprof_widgets.analysis.core.op_stats import device_op_metrics
from xprof_widgets.analysis.hlo_stats import hlo_stats
from xprof_widgets.analysis.op_profile import op_profile
from xprof_widgets.io.hlo import hlo_module

from . import hlo_corpus
from . import xprof_oracle as oracle
from .gpu_space import H100, MI300X, PASCAL, Kernel, gpu_space, hlo_proto_bytes, write

RANDOM_FUSIONS = 40


# --- the cost model, instruction by instruction -------------------------------------------


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """Every corpus module (and seeded random fusions) in one GPU profile: a kernel per
    instruction of every computation, fused ones included. Returns (modules by program
    id, XProf's op costs)."""
    texts = list(hlo_corpus.modules().items())
    texts += [(f"random_{s}", hlo_corpus.random_fusion_module(s)) for s in range(RANDOM_FUSIONS)]
    texts.append(("bad_config", hlo_corpus.BAD_CONFIG))
    protos, modules, kernels, t = {}, {}, [], 0
    for pid, (_, text) in enumerate(texts, start=1):
        data = hlo_proto_bytes(text)
        mod = hlo_module(data)
        protos[pid] = (mod.name, data)
        modules[pid] = mod
        for comp in mod.computations.values():
            for instr in comp.instructions:
                kernels.append(Kernel(f"k_{pid}_{instr.name}", t, 1000, op=instr.name, program_id=pid, module=mod.name))
                t += 2000
    path = write(tmp_path_factory.mktemp("corpus"), gpu_space(protos, kernels))
    return modules, oracle.op_costs(oracle.op_stats([path]))


def test_every_instruction_costs_as_in_xprof(corpus):
    """FLOPs (device and model), bytes accessed, HBM read and write of every instruction of
    ~60 modules (every opcode family, fusion kinds and roots, custom calls, control flow,
    collectives, 40 random fusions) equal XProf's, bit for bit."""
    modules, ref = corpus
    costs = {pid: module_costs(m) for pid, m in modules.items()}
    compared, wrong = 0, []
    for (pid, name), (occ, flops, model, nbytes, read, write_) in ref.items():
        if name == "IDLE":
            continue
        ours = tuple(v * occ for v in costs[pid].of(name))
        compared += 1
        if ours != (flops, model, nbytes, read, write_):
            wrong.append((modules[pid].name, name, ours, (flops, model, nbytes, read, write_)))
    assert compared == sum(len(c.instructions) for m in modules.values() for c in m.computations.values())
    assert compared > 1500
    assert not wrong, wrong[:5]


def test_the_rules_that_matter_on_real_gpus(corpus):
    """Spot checks, by hand from XLA's rules, of what XProf 2.24.2 shows."""
    modules, _ = corpus
    by_name = {m.name: (pid, m) for pid, m in modules.items()}
    pid, fusions = by_name["fusions"]
    c = module_costs(fusions)
    n = 8 * 256 * 128
    # bf16 multiply in f32: 3 converts + a multiply, 3 cycles each on the sm_86 profile.
    assert c.of("loop_convert_fusion")[0] == 12 * n
    # sine f32 costs 662 cycles per element (+ 2 converts).
    assert c.of("sin_fusion")[0] == (662 + 3 + 3) * 4096
    # Bytes: each bf16 operand read once, the output written once.
    assert c.of("loop_convert_fusion")[2:] == (3 * 2 * n, 2 * 2 * n, 2 * n)
    # An in-place dynamic-update-slice writes only its update, reads neither the buffer.
    assert c.of("dus_fusion")[3:] == (64 * 4 + 4, 64 * 4)
    _, calls = by_name["custom_calls"]
    cc = module_costs(calls)
    assert cc.of("lt")[0] == 2 * 512 * 1024 * 256  # cuBLASLt GEMM from its dot dimensions
    assert cc.of("legacy") == (0, 0, 0, 0, 0)  # __cublas$gemm (hipBLAS on ROCm): not costed in 2.24.2
    flops, model = cc.of("int8")[:2]
    assert model == 2 * 256**3 and flops == model // 2  # 8-bit GEMMs run at twice the rate
    # cuDNN/MIOpen conv, 3x3 "same" on 16x16: window positions inside the input per
    # dimension 15 + 16 + 15; 2 x in features x out features x batch x positions.
    assert cc.of("conv")[0] == 2 * 8 * 16 * 2 * 46 * 46
    _, bad = by_name["bad_config"]
    assert module_costs(bad).error and module_costs(bad).of("e") == (0, 0, 0, 0, 0)


def _call_dag(depth, fan_out):
    """HLO text: computation c1 an exponential; each c<d> calls c<d-1> `fan_out` times in a
    chain; the entry calls c<depth> once (fan_out ** (depth - 1) exponentials unrolled)."""
    lines = ["HloModule call_dag", "", "%c1 (p: f32[64]) -> f32[64] {", "  %p = f32[64]{0} parameter(0)"]
    lines += ["  ROOT %e = f32[64]{0} exponential(%p)", "}", ""]
    for d in range(2, depth + 1):
        lines += [f"%c{d} (p: f32[64]) -> f32[64] {{", "  %p = f32[64]{0} parameter(0)"]
        prev = "%p"
        for k in range(fan_out):
            root = "ROOT " if k == fan_out - 1 else ""
            lines.append(f"  {root}%k{d}_{k} = f32[64]{{0}} call({prev}), to_apply=%c{d - 1}")
            prev = f"%k{d}_{k}"
        lines += ["}", ""]
    lines += ["ENTRY %main (a: f32[64]) -> f32[64] {", "  %a = f32[64]{0} parameter(0)"]
    lines += [f"  ROOT %top = f32[64]{{0}} call(%a), to_apply=%c{depth}", "}"]
    return "\n".join(lines)


@pytest.mark.parametrize("depth, fan_out", [(3, 2), (10, 8)])
def test_a_computation_called_from_many_places_is_analysed_once(monkeypatch, depth, fan_out):
    """A module whose calls fan out (the fuzzer's call DAG: 8 calls a level, 10 deep, a
    billion visits where XLA's walk repeats every call; the overview hung on it): each
    computation is analysed once, and a call still costs all it calls."""
    from xprof_widgets.analysis.core import hlo_cost

    module = hlo_module(hlo_proto_bytes(_call_dag(depth, fan_out)))
    visits = []
    accept = hlo_cost._Analysis.accept
    monkeypatch.setattr(hlo_cost._Analysis, "accept", lambda self, c: visits.append(c.name) or accept(self, c))
    costs = module_costs(module)
    assert not costs.error and sorted(visits) == sorted(c.name for c in module.computations.values())  # each once
    flops = costs.of("e")[0]
    assert flops > 0 and costs.of("top")[0] == fan_out ** (depth - 1) * flops
    assert costs.of(f"k{depth}_0")[0] == fan_out ** (depth - 2) * flops


# --- the op database: kernels, steps, devices ---------------------------------------------

_DOT = """HloModule jit_f

ENTRY %main (a: f32[64,64], b: f32[64,64]) -> f32[64,64] {
  %a = f32[64,64]{1,0} parameter(0)
  %b = f32[64,64]{1,0} parameter(1)
  %d = f32[64,64]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general"}
  ROOT %e = f32[64,64]{1,0} exponential(%d), metadata={op_name="jit(f)/exp" source_file="/src/model.py" source_line=12}
}
"""


def _db_case(tmp_path):
    """Two GPUs, two streams, kernels of unknown ops, TF ops and steps."""
    dot = hlo_proto_bytes(_DOT)
    protos = {5: ("jit_f", dot), 6: ("jit_f", dot)}
    step = {"group_id": 7}
    k0 = [
        Kernel("gemm", 0, 100, op="d", program_id=5, module="jit_f", stats=step),
        Kernel("gemm_splitk", 100, 50, op="d", program_id=6, module="jit_f", stats=step),  # merged into program 5
        Kernel("exp", 200, 30, op="e", program_id=5, module="jit_f"),
        Kernel("exp", 250, 30, op="e", program_id=5, module="jit_f"),  # no step: never merged
        Kernel("mystery", 300, 40, op="not_in_hlo", program_id=5, module="jit_f"),  # skipped
        Kernel("exp", 400, 30, op="fusion::e", program_id=5, module="jit_f", stream=2),  # last :: part
        Kernel("Relu", 500, 20, stats={"tf_op": "model/dense/Relu:Relu"}, stream=2),  # a TF op
        # An hlo_op written as bytes: XProf's StrOrRefValue reads no op there (skipped).
        Kernel("exp", 600, 10, op=b"e", program_id=5, module="jit_f", stream=2),  # type: ignore[arg-type]
        Kernel("copy", 900, 5, stream=2),  # neither: only extends the span
    ]
    k1 = [Kernel("exp", 0, 10, op="e", program_id=5, module="jit_f")]
    data = gpu_space(protos, [], device=H100, devices=3, kernels_by_device={0: k0, 1: k1})
    # The file's own steps: every host and device plane has a group_id stat (XProf keeps them).
    from xprof_widgets.io import schema

    space = schema.XSpace.FromString(data)
    for plane in space.planes:
        if "group_id" not in {m.name for m in plane.stat_metadata.values()}:
            sid = max(plane.stat_metadata.keys(), default=0) + 1
            plane.stat_metadata[sid].id = sid
            plane.stat_metadata[sid].name = "group_id"
    return write(tmp_path, space.SerializeToString())


def test_op_database_equals_xprofs(tmp_path):
    path = _db_case(tmp_path)
    stats = oracle.op_stats([path])
    db = device_op_metrics(xw.load_run(path))
    ref = {(m.hlo_module_id, m.name): m for m in stats.device_op_metrics_db.metrics_db}
    ours = db.ops.set_index(["program_id", "name"])
    assert set(ours.index) | {(0, "IDLE")} == set(ref)
    for key, m in ref.items():
        if m.name == "IDLE":
            assert db.idle_time_ps == m.time_ps
            continue
        o = ours.loc[key]
        assert (o.occurrences, o.time_ps, o.self_time_ps, o.flops, o.model_flops, o.bytes_accessed) == (
            m.occurrences,
            m.time_ps,
            m.self_time_ps,
            m.flops,
            m.model_flops,
            m.bytes_accessed,
        ), key
        assert (o.category, o.provenance, o.expression, o.num_cores) == (
            m.category,
            m.provenance,
            m.long_name,
            m.num_cores,
        ), key
        assert (o.source_file, o.source_line) == (m.source_info.file_name, m.source_info.line_number), key
    assert db.total_time_ps == stats.device_op_metrics_db.total_time_ps
    assert db.total_op_time_ps == stats.device_op_metrics_db.total_op_time_ps
    # By hand: the dot ran as two kernels in one step (one entry of program 5); exp 4 kernels.
    assert ours.loc[(5, "d")].occurrences == 2 and ours.loc[(5, "d")].time_ps == 150 * 1000
    assert ours.loc[(5, "d")].flops == 2 * 2 * 64**3
    assert ours.loc[(5, "e")].occurrences == 4 and ours.loc[(5, "e")].num_cores == 2
    assert ours.loc[(0, "model/dense/Relu/Relu")].category == "Relu"
    # Busy 260 ns of 905 on GPU 0 (the unknown op is not counted), 10 of 10 on GPU 1, none on GPU 2.
    assert db.total_time_ps == 905 * 1000 + 10 * 1000 and db.idle_time_ps == (905 - 260) * 1000


def test_op_profile_and_hlo_stats_equal_xprofs(tmp_path):
    path = _db_case(tmp_path)
    run = xw.load_run(path)
    ref = oracle.tool_data([path], "op_profile")
    prof = op_profile(run)
    root = ref["byProgram"]
    assert prof.root.time_ps == int(root["metrics"]["rawTime"])
    ours = {c.name: c for c in prof.root.children}
    for child in root["children"]:
        n = ours[child["name"]]
        assert n.time_ps == int(child["metrics"]["rawTime"])
        assert n.raw_flops == pytest.approx(child["metrics"].get("rawFlops", 0))
        assert n.flops_utilization == pytest.approx(child["metrics"].get("flops", 0), rel=1e-9, abs=1e-15)
    table = oracle.tool_data([path], "hlo_stats")
    cols = [c["id"] for c in table["cols"]]
    rows = [{c: (v or {}).get("v") for c, v in zip(cols, r["c"])} for r in table["rows"]]
    ours = hlo_stats(run)
    assert list(ours["hlo_op_name"]) == [r["hlo_op_name"] for r in rows]
    assert list(ours["bound_by"]) == [r["bound_by"] for r in rows]
    np.testing.assert_allclose(ours["flop_rate_gflops"], [r["normalized_flop_rate"] for r in rows], rtol=1e-9)
    np.testing.assert_allclose(ours["hbm_bw_gibs"], [r["hbm_bw"] for r in rows], rtol=1e-9)
    np.testing.assert_allclose(
        ours["self_time_fraction"] * 100, [r["total_self_time_percent"] for r in rows], rtol=1e-9
    )


# --- device names and peaks ---------------------------------------------------------------

_DEVICES = {
    "H100": H100,
    "A100": {**H100, "compute_cap_major": 8, "compute_cap_minor": 0, "core_count": 108, "clock_rate": 1410000},
    "Pascal": PASCAL,
    "Blackwell+": {**H100, "compute_cap_major": 12, "compute_cap_minor": 0},
    "V100, no vendor": {k: v for k, v in H100.items() if k != "device_vendor"} | {"compute_cap_major": 7},
    "MI300X": MI300X,
    "MI355X by name": {**MI300X, "compute_cap_major": 9, "compute_cap_minor": 5, "gpu_device_name": "gfx950"},
    "MI250 by name": {**MI300X, "compute_cap_major": 9, "compute_cap_minor": 0, "gpu_device_name": "gfx90a"},
    "AMD unknown": {**MI300X, "compute_cap_major": 11, "compute_cap_minor": 0},
}


@pytest.mark.parametrize("label", list(_DEVICES))
def test_device_name_and_peaks_equal_xprofs(tmp_path, label):
    stats = _DEVICES[label]
    dot = hlo_proto_bytes(_DOT)
    path = write(tmp_path, gpu_space({5: ("jit_f", dot)}, [Kernel("gemm", 0, 100, op="d", program_id=5)], device=stats))
    roofline = oracle.tool_data([path], "roofline_model")
    overview = oracle.tool_data([path], "overview_page")
    p = roofline[0]["p"]
    assert (gpu_model_name(stats) or "GPU") == overview[2]["p"]["device_type"]
    peaks = gpu_peaks(stats)
    # XProf prints 6 significant digits: GFLOP/s and GiB/s.
    assert f"{peaks['peak_flops'] / 1e9:.6g}" == p["peak_flop_rate"]
    assert f"{peaks['peak_hbm_bw'] / 2**30:.6g}" == p["peak_hbm_bw"]
    run = xw.load_run(path)
    dev = run.devices[run.devices.kind == "GPU"].iloc[0]
    assert dev.model == overview[2]["p"]["device_type"] and dev.peak_flops == peaks["peak_flops"]


# --- derived trace lines --------------------------------------------------------------------


def _random_trace_case(seed, tmp_path):
    """Kernels on 1-3 streams of 1-2 GPUs: XLA ops (nested `::` names, unknown ops, another
    program), TF ops, copies, zero durations and exact ties; real HLO for the symbols."""
    rng = random.Random(seed)
    proto = hlo_proto_bytes(hlo_corpus.CONTROL)
    ops = [i.name for c in hlo_module(proto).computations.values() for i in c.instructions]
    protos = {3: ("control", proto), 4: ("control", proto)}
    by_device = {}
    for d in range(rng.randint(1, 2)):
        kernels, t = [], 0
        for _ in range(rng.randint(5, 60)):
            t += rng.choice([0, 0, 10, 100, 1000])
            kind = rng.random()
            stream = rng.randint(1, 3)
            dur = rng.choice([0, 5, 50, 500])
            if kind < 0.6:
                op = rng.choice(ops)
                if rng.random() < 0.2:
                    op = f"{rng.choice(ops)}::{op}"
                if rng.random() < 0.05:
                    op = "not_an_op"
                kernels.append(
                    Kernel(f"k{op}", t, dur, op=op, program_id=rng.choice([3, 3, 4]), module="control", stream=stream)
                )
            elif kind < 0.8:
                tf = rng.choice(["model/dense/MatMul:MatMul", "a/b/c:", "Iterator::Batch", "weird name"])
                kernels.append(Kernel("tfk", t, dur, stream=stream, stats={"tf_op": tf}))
            elif kind < 0.9:
                kernels.append(Kernel("MemcpyHtoD", t, dur, stream=stream, stats={"kernel_details": ""}))
            else:
                kernels.append(Kernel("plain", t, dur, stream=stream))
        by_device[d] = kernels
    return write(tmp_path, gpu_space(protos, [], devices=len(by_device), kernels_by_device=by_device))


@pytest.mark.parametrize("seed", range(int(__import__("os").environ.get("GPU_TRACE_SEEDS", 12))))
def test_derived_gpu_lines_equal_xprofs(tmp_path, seed):
    """Per stream XLA Modules / XLA Ops / Framework Ops / Name Scope / Source code lines, with
    XProf's names, counts and merge rule, on seeded random kernel streams."""
    path = _random_trace_case(seed, tmp_path)
    ref = oracle.trace_counts([path])
    tr = xw.load_run(path).trace()
    ours = {f"{t.section} :: {t.name}": t.events for t in tr.tracks.itertuples()}
    gpu = {k: v for k, v in ref.items() if k.startswith("/device:GPU")}
    assert {k: ours.get(k) for k in gpu} == gpu
    assert not {k for k in ours if k.startswith("/device:GPU")} - set(gpu)


def test_by_pair_asks_once_per_distinct_pair_and_only_where_asked():
    """The per-(program, op) lookups of the GPU databases: one call per distinct pair; with
    `where`, only the pairs of those rows, the other rows empty even where a pair is shared."""
    import numpy as np

    from xprof_widgets.analysis.core.columns import by_pair, by_value

    calls = []

    def rule(p, name):
        calls.append((p, name))
        return (1.0, 2.0, 3.0)

    programs, names = np.array([7, 7, 8, 7, 8]), np.array(["a", "a", "a", "b", "a"], dtype=object)
    where = np.array([True, False, True, True, False])
    got = by_pair(programs, names, rule, where=where, dtype=np.float64, shape=(3,))
    assert got.tolist() == [[1, 2, 3], [0, 0, 0], [1, 2, 3], [1, 2, 3], [0, 0, 0]]
    assert sorted(calls) == [(7, "a"), (7, "b"), (8, "a")]
    kinds = by_pair(programs, names, lambda p, n: f"{p}:{n}")
    assert kinds.tolist() == ["7:a", "7:a", "8:a", "7:b", "8:a"] and kinds.dtype == object
    assert by_pair(programs, names, lambda p, n: True, where=where, dtype=bool).tolist() == where.tolist()
    assert by_value(np.array(["x::op.1", "op.2", "x::op.1"], dtype=object), len).tolist() == [7, 4, 7]


@pytest.mark.parametrize("name", ["nvidia_jax_conv_h200", "amd_jax_gemm_mi300"])
@pytest.mark.parametrize(
    "tool", ["overview", "hlo_stats", "framework_op_stats", "op_profile", "roofline_model", "kernel_stats", "trace"]
)
def test_a_gpu_line_is_decoded_once_for_every_tool(monkeypatch, name, tool):
    """The grouping decodes ahead what the GPU tools read of a kernel, and a line keeps the
    last named stats it decoded: the op database, the kernel reports, the CUDA graph check
    and the trace's derived lines find them there, no second walk over a kernel's records.
    (Kernel stats, which groups nothing, reads them once too.)"""
    from xprof_widgets.analysis.core.planes import GPU_PLANE_PREFIX
    from xprof_widgets.io import xspace

    from .conftest import PROFILES

    monkeypatch.setenv("XPROF_WIDGETS_CACHE", "0")  # (a kept grouping would skip the read-ahead)
    decoded = []
    original = xspace.Line._decoded_stats

    def counted(line, idx, names=None):
        if idx is None and line.plane.name.startswith(GPU_PLANE_PREFIX):
            decoded.append((line.plane.name, line.name))
        return original(line, idx, names)

    monkeypatch.setattr(xspace.Line, "_decoded_stats", counted)
    run = xw.load_run(PROFILES / name, attribute_cuda_graphs=True)
    getattr(run, tool)()
    busy = [
        (p.name, line.name)
        for p in run.xspace().planes
        if p.name.startswith(GPU_PLANE_PREFIX)
        for _, line in p.busy_lines
    ]
    assert decoded and len(decoded) == len(set(decoded)), decoded
    assert set(decoded) <= set(busy)
