"""XProf's DataTable outputs (kernel_stats, framework_op_stats, roofline_model) as the
tests read them, cell-by-cell comparison with our DataFrames, and a two-host profile
made by hand for the differential tests against XProf 2.24.2 itself."""

from __future__ import annotations

import json

import numpy as np
import pytest

from xprof_widgets.io import schema

from .conftest import REFERENCE, add_stat
from .gpu_space import H100, hlo_proto_bytes

#: XProf's step table (input_pipeline_analyzer, GPU and CPU): the breakdown columns in its
#: order (the table's columns 1-9), by our names.
STEP_BREAKDOWN = [
    "device_compute_ms",
    "device_to_device_ms",
    "device_collectives_ms",
    "host_compute_ms",
    "kernel_launch_ms",
    "input_ms",
    "output_ms",
    "compilation_ms",
    "all_others_ms",
]

#: Every corpus run with XProf's references: (logdir, run folder).
RUNS = [
    ("tpu_v6e_inference", "2025_tpu_inference"),
    ("tf_gpu_multiworker", "2020_12_23_gpu_multi_worker"),
    ("tf_keras_cpu", "2026_11_22_03_16_08"),
    ("tf_keras_cpu", "2026_11_22_03_16_48"),
    ("jax_mlp_cpu", "2026_11_22_03_11_56"),
    ("jax_transformer_cpu", "2026_11_22_03_13_20"),
    ("amd_jax_gemm_mi300", "2026_02_20_13_54_10"),
    ("amd_jax_elementwise_mi300", "2026_02_20_13_54_27"),
    ("amd_jax_conv_mi300", "2026_02_20_13_53_59"),
    ("nvidia_jax_mlp_h200", "2026_11_26_01_22_22"),
    ("nvidia_jax_no_steps_h200", "2026_11_26_01_22_22"),
    ("nvidia_jax_mlp_no_graphs_h200", "2026_11_26_01_30_16"),
    ("nvidia_jax_scan_h200", "2026_11_26_01_49_05"),
    ("nvidia_jax_scan_no_graphs_h200", "2026_11_26_01_49_10"),
    ("nvidia_jax_conv_h200", "2026_11_27_21_20_45"),
    ("nvidia_jax_conv_no_graphs_h200", "2026_11_27_21_20_52"),
    ("nvidia_jax_remat_h200", "2026_11_27_21_21_01"),
    ("nvidia_jax_remat_no_graphs_h200", "2026_11_27_21_21_08"),
]


def table(data):
    """(column ids, rows as lists of values, custom properties) of a DataTable."""
    return ([c["id"] for c in data["cols"]], [[c.get("v") for c in r["c"]] for r in data["rows"]], data.get("p", {}))


def reference_json(logdir, session, tool):
    """XProf's output of `tool` for a corpus run, parsed."""
    return json.loads((REFERENCE / logdir / session / f"{tool}.json").read_text())


def reference(logdir, session, tool, index=None):
    """XProf's output of `tool` for a corpus run, as `table` gives it (`index`: which
    table of a list)."""
    data = reference_json(logdir, session, tool)
    return table(data if index is None else data[index])


def assert_rows_equal(df, ids, rows, rename=None, skip=(), rel=1e-9, what=""):
    """Every row and every column of XProf's table equals our frame's, in order: strings,
    booleans and counts exactly, other numbers to `rel` (float rounding of the same
    formula). `rename` maps XProf's column ids to ours; `skip` lists ids not compared."""
    rename = rename or {}
    assert len(df) == len(rows), f"{what}: {len(df)} rows, XProf {len(rows)}"
    wrong = []
    for col, values in zip(ids, zip(*rows)) if rows else ():
        if col in skip:
            continue
        ours = df[rename.get(col, col)].tolist()
        for i, (a, b) in enumerate(zip(ours, values)):
            if isinstance(b, (bool, str)) or b is None:
                ok = a == b
            else:
                ok = a == pytest.approx(b, rel=rel, abs=1e-12)
            if not ok:
                wrong.append((i, col, a, b))
    assert not wrong, f"{what}: {len(wrong)} cells differ, first: {wrong[:5]}"


# --- a profile made by hand: two hosts, host threads, two GPUs, an HLO module --------------

_NS = 1000
_HLO = """HloModule jit_f

ENTRY %main (a: f32[64,64], b: f32[64,64]) -> f32[64,64] {
  %a = f32[64,64]{1,0} parameter(0)
  %b = f32[64,64]{1,0} parameter(1)
  %d = f32[64,64]{1,0} dot(%a, %b), lhs_contracting_dims={1}, rhs_contracting_dims={0}, metadata={op_name="jit(f)/dot_general"}
  %e = f32[64,64]{1,0} exponential(%d), metadata={op_name="jit(f)/exp" source_file="/src/model.py" source_line=12}
  %m = f32[64,64]{1,0} multiply(%e, %e), metadata={op_type="Mul" op_name="model/mul"}
  ROOT %n = f32[64,64]{1,0} negate(%m)
}
"""
_DETAILS = "regs:32 static_shared:0 dynamic_shared:0 grid:8,1,1 block:128,1,1 occ_pct:25"
# (name, start, end in ns, stats) per line; kernels carry kernel_details unless told.
_GPU0 = {
    1: [
        (
            "volta_h884gemm",
            0,
            100,
            {
                "hlo_op": "d",
                "program_id": 7,
                "correlation_id": 1,
                "kernel_details": "regs:128 static_shared:1024 dynamic_shared:2048 grid:4,2,1 "
                "block:256,1,1 occ_pct:50.5",
            },
        ),
        (
            "volta_h884gemm",
            110,
            210,
            {
                "hlo_op": "d",
                "program_id": 7,
                "correlation_id": 2,
                "kernel_details": "regs:128 static_shared:1024 dynamic_shared:2048 grid:4,2,1 block:256,1,1 occ_pct:12",
            },
        ),
        (
            "sm90_xmma_gemm_f32",
            220,
            260,
            {
                "hlo_op": "d",
                "program_id": 7,
                "correlation_id": 3,
                "kernel_details": "regs:64\nblock:256,1 grid:x,1,1 bogus occ_pct:abc",
            },
        ),
        ("exp_kernel", 270, 300, {"hlo_op": "fusion::e", "program_id": 7, "correlation_id": 4}),
        ("mul_kernel", 300, 320, {"hlo_op": "m", "program_id": 7, "correlation_id": 5}),
        ("neg_kernel", 320, 330, {"hlo_op": "n", "program_id": 7, "correlation_id": 6}),
        ("tiny_kernel", 330, 330.5, {"hlo_op": "n", "program_id": 7, "correlation_id": 7}),
        (
            "lost_kernel",
            340,
            350,
            {"hlo_op": "not_there", "program_id": 7, "correlation_id": 8, "tf_op": "model/lost/Conv2D:Conv2D"},
        ),
    ],
    2: [
        ("conv_kernel", 0, 40, {"tf_op": "model/conv/Conv2D:Conv2D", "correlation_id": 11}),
        (
            "einsum_kernel",
            50,
            70,
            {"tf_op": "model/einsum/Einsum:Einsum", "equation": "ab,bc->ac", "correlation_id": 12},
        ),
        ("xmma_gemm_bias", 80, 95, {"tf_op": "model/dense/BiasAdd:BiasAdd", "correlation_id": 13}),
        ("plain_bias", 100, 105, {"tf_op": "model/dense/BiasAdd:BiasAdd", "correlation_id": 14}),
        ("untyped_kernel", 110, 130, {"correlation_id": 15}),
        ("memcpy", 140, 150, {"memcpy_details": "kind:HtoD size:64", "correlation_id": 16, "kernel_details": None}),
    ],
}
# The second GPU has no vendor: XProf sees no TensorCore use there.
_GPU1 = {
    3: [
        ("volta_h884gemm", 5, 105, {"hlo_op": "d", "program_id": 7, "correlation_id": 21}),
        ("exp_kernel", 110, 150, {"hlo_op": "e", "program_id": 7, "correlation_id": 22}),
    ]
}
_HOST = {
    1: [
        ("train_step", 0, 1000, {}),
        ("model/dense/MatMul:MatMul", 0, 100, {}),
        ("model/dense/MatMul/ReadVariableOp:ReadVariableOp", 10, 20, {}),
        ("Iterator::Prefetch", 200, 300, {}),
        ("Iterator::Prefetch::Map", 210, 250, {}),
        ("MemcpyHToD", 300, 310, {}),
        ("jit(f)/exp:", 320, 330, {}),
        ("a/X:Relu", 400, 500, {}),
        ("a/Y:Relu", 450, 550, {}),  # overlaps X without nesting: XProf's op stack drops it
        ("dup/op:TypeA", 600, 610, {}),
        ("thunk", 700, 720, {"tf_op": "model/dense/MatMul:MatMul"}),
        ("model/dense/MatMul:MatMul", 800, 830, {"tf_op": "model/other:Identity"}),
    ],
    2: [("dup/op:TypeB", 50, 80, {}), ("model/dense/BiasAdd:BiasAdd", 100, 160, {})],
    3: [],
}


def _plane(space, pid, name, stats=None):
    plane = space.planes.add(id=pid, name=name)
    ids, md = {}, {}

    def stat_id(key):
        if key not in ids:
            ids[key] = len(ids) + 1
            plane.stat_metadata[ids[key]].id, plane.stat_metadata[ids[key]].name = ids[key], key
        return ids[key]

    for k, v in (stats or {}).items():
        add_stat(plane.stats, stat_id(k), v)

    def line(lid, lname, events, kernels=False):
        ln = plane.lines.add(id=lid, display_id=lid, name=lname, timestamp_ns=1_000_000)
        for ev_name, start, end, ev_stats in events:
            if ev_name not in md:
                md[ev_name] = len(md) + 1
                plane.event_metadata[md[ev_name]].id = md[ev_name]
                plane.event_metadata[md[ev_name]].name = ev_name
            ev = ln.events.add(
                metadata_id=md[ev_name], offset_ps=int(start * _NS), duration_ps=round((end - start) * _NS)
            )
            all_stats = {"kernel_details": _DETAILS} if kernels else {}
            all_stats.update(ev_stats)
            for k, v in all_stats.items():
                if v is not None:
                    add_stat(ev.stats, stat_id(k), v)

    return line


def hand_made_space(host, shift_ns=0):
    """One host's profile (serialized XSpace): HLO module `jit_f(7)`, host threads with
    nested, overlapping, typed and untyped framework ops, two GPUs (an H100, and one
    without a vendor) running XLA and TF kernels. `shift_ns` moves every event."""
    space = schema.XSpace(hostnames=[host])
    meta = space.planes.add(id=0, name="/host:metadata")
    meta.stat_metadata[1].id, meta.stat_metadata[1].name = 1, "Hlo Proto"
    md = meta.event_metadata[7]
    md.id, md.name = 7, "jit_f"
    md.stats.add(metadata_id=1, bytes_value=hlo_proto_bytes(_HLO))

    def shift(lines):
        return {k: [(n, s + shift_ns, e + shift_ns, st) for n, s, e, st in v] for k, v in lines.items()}

    host_line = _plane(space, 1, "/host:CPU")
    for lid, events in shift(_HOST).items():
        host_line(lid, f"thread{lid}", events)
    for pid, (name, stats, lines) in enumerate(
        [
            ("/device:GPU:0", H100, _GPU0),
            ("/device:GPU:1", {"clock_rate": 1_530_000, "core_count": 80, "memory_bandwidth": 898_048_000_000}, _GPU1),
        ],
        start=2,
    ):
        gpu_line = _plane(space, pid, name, stats)
        for lid, events in shift(lines).items():
            gpu_line(lid, f"Stream #{lid}(Kernel)", events, kernels=True)
    return space.SerializeToString()


def write_hand_made_run(tmp_path):
    """A run folder with two hosts' files (the second shifted by 5 µs); returns the paths."""
    folder = tmp_path / "plugins" / "profile" / "hand"
    folder.mkdir(parents=True)
    paths = []
    for i, host in enumerate(("alpha", "beta")):
        path = folder / f"{host}.xplane.pb"
        path.write_bytes(hand_made_space(host, shift_ns=5000 * i))
        paths.append(path)
    return folder, paths


def rows_sorted(rows, key_cols):
    """Rows sorted by some column positions (to compare tables whose ties XProf leaves in
    no defined order)."""
    return sorted(rows, key=lambda r: tuple(str(r[i]) for i in key_cols))


def as_float(values):
    return np.asarray(values, dtype=np.float64)
