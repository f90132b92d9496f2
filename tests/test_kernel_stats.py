"""GPU kernel statistics against XProf 2.24.2: every row and column of its kernel_stats
table for every corpus run, and its rules (TensorCore use by vendor, eligible ops,
launch parameters, several hosts) on profiles made here and run through XProf itself."""

import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.core.kernels import (
    NO_GPU,
    einsum_tensor_core_eligible,
    op_tensor_core_eligible,
    parse_kernel_details,
    uses_tensor_core,
)
from xprof_widgets.analysis.kernel_stats import COLUMNS, kernel_stats

from . import xprof_oracle as oracle
from .conftest import corpus_run
from .gpu_space import H100, MI300X, Kernel, gpu_space, hlo_proto_bytes, write
from .xprof_tables import RUNS, assert_rows_equal, reference, table, write_hand_made_run

#: Runs without a GPU plane: XProf's table is empty.
NO_GPU_RUNS = {"tpu_v6e_inference", "tf_keras_cpu", "jax_mlp_cpu", "jax_transformer_cpu"}


@pytest.mark.parametrize("logdir,session", RUNS, ids=lambda v: v)
def test_kernel_stats_equal_xprof(logdir, session):
    """Every row (XProf's order) and every column of XProf's kernel_stats; its rank is the
    row position. tf_gpu_multiworker has two hosts with the same file: each kernel is two
    rows, as XProf concatenates the hosts' lists."""
    ids, rows, _ = reference(logdir, session, "kernel_stats")
    df = kernel_stats(corpus_run(logdir, session))
    assert ids[0] == "rank" and [r[0] for r in rows] == list(range(1, len(rows) + 1))
    assert list(df.columns) == ids[1:] == COLUMNS
    assert_rows_equal(df, ids[1:], [r[1:] for r in rows], what=f"{logdir}/{session}")
    if logdir in NO_GPU_RUNS:
        assert df.empty and df.attrs["reason"] == NO_GPU
    else:
        assert len(df) > 0 and df.attrs["reason"] == ""
    if logdir == "tf_gpu_multiworker":
        assert df.iloc[::2].reset_index(drop=True).equals(df.iloc[1::2].reset_index(drop=True))


def test_amd_kernels_and_their_ops():
    """By hand, from the GEMM run on an MI300X: hipBLASLt's `Cijk_..._MI16x16x16x1_...` and
    XLA's `gemm_fusion_dot_general` kernels use the matrix cores, a JAX `dot_general` is
    eligible, the op is the instruction's `op_name` metadata."""
    df = kernel_stats(corpus_run("amd_jax_gemm_mi300"))
    gemm = df[df["kernel_name"].str.startswith(("Cijk_", "gemm_fusion"))]
    assert len(gemm) == 6 and gemm["is_kernel_using_tensor_core"].all()
    assert (gemm["op_name"] == "jit(dot)/dot_general").all() and gemm["is_op_tensor_core_eligible"].all()
    broadcast = df[df["kernel_name"] == "wrapped_broadcast.kd"]
    assert not broadcast["is_kernel_using_tensor_core"].any() and not broadcast["is_op_tensor_core_eligible"].any()
    assert (df["total_duration_us"].diff().dropna() <= 0).all()


def test_rules_by_hand():
    got = parse_kernel_details("regs:40 static_shared:16 dynamic_shared:32 grid:2,3,4 block:5,6,7 occ_pct:37.5")
    assert len(got) == 6 and (got["block"], got["grid"], got["occupancy_pct"]) == ((5, 6, 7), (2, 3, 4), 37.5)
    assert [got[k] for k in ("registers_per_thread", "static_shmem_bytes", "dynamic_shmem_bytes")] == [40, 16, 32]
    # Old CUPTI profiles write `shm:` (not read), malformed dims stay 1,1,1.
    got = parse_kernel_details("regs:38 shm:0 grid:160,1 block:-1,1,1")
    assert got["registers_per_thread"] == 38 and got["static_shmem_bytes"] == 0
    assert got["grid"] == (1, 1, 1) and got["block"] == (1, 1, 1)
    assert uses_tensor_core("volta_h884gemm", "Nvidia") and not uses_tensor_core("volta_h884gemm", "AMD")
    assert uses_tensor_core("x_MI32x32x8x1_y", "AMD") and not uses_tensor_core("x_MI32x32", "AMD")
    assert not uses_tensor_core("volta_h884gemm", None)
    assert op_tensor_core_eligible("model/dense/MatMul") and not op_tensor_core_eligible("model/MatMulX")
    assert op_tensor_core_eligible("jit(f)/conv_general_dilated") and op_tensor_core_eligible("dot_general/y")
    assert einsum_tensor_core_eligible("ab,bc->ac") and not einsum_tensor_core_eligible("abc->ac")


# --- the rules against XProf itself -------------------------------------------------------

_OP_NAMES = [
    "jit(f)/dot_general",
    "jit(f)/conv_general_dilated",
    "jit(f)/dot_general_x",
    "dot_general/y",
    "jit(f)/exp",
    "m/MatMul",
    "m/BatchMatMulV2",
    "m/FusedMatMulX",
]
_KERNEL_NAMES = [
    "Cijk_foo",
    "Custom_Cijk_x",
    "mfma_x",
    "MFMA_x",
    "wmma_x",
    "gemm_fusion_x",
    "gemm_x",
    "plain",
    "x_MI16x16x16x1",
    "_MI16x16",
    "a_MI0x0x0b",
    "h884",
    "hmma",
    "xmma_gemm",
    "16816",
    "s1688",
    "conv1x1_k",
    "direct_group_y",
]


def _rules_module():
    lines = ["HloModule jit_f", "", "ENTRY %main (a: f32[8]) -> f32[8] {", "  %a = f32[8]{0} parameter(0)"]
    for i, n in enumerate(_OP_NAMES):
        lines.append(f'  %e{i} = f32[8]{{0}} exponential(%a), metadata={{op_name="{n}"}}')
    lines.append('  %t = f32[8]{0} exponential(%a), metadata={op_type="MatMul" op_name="m/dense/MatMul"}')
    lines.append('  %u = f32[8]{0} exponential(%a), metadata={op_type="Foo" op_name=""}')
    lines += ["  ROOT %r = f32[8]{0} add(%e0, %e1)", "}", ""]
    return "\n".join(lines)


@pytest.mark.parametrize("vendor", ["amd", "nvidia", "none"])
def test_rules_equal_xprof(tmp_path, vendor):
    """XProf 2.24.2 on kernels made here: TensorCore use from the kernel name with the
    plane's vendor's patterns (AMD's are new in 2.24 and not in XProf's public sources),
    eligibility from the op (JAX `dot_general` / `conv_general_dilated` anywhere in the
    name), the op from the instruction's metadata or the `tf_op` stat, a two-operand
    einsum; then XProf's order (total time, then the report key)."""
    device = {"amd": MI300X, "nvidia": H100, "none": {"clock_rate": 1_980_000, "core_count": 132}}[vendor]
    kernels, t = [], 0
    for i in range(len(_OP_NAMES)):
        kernels.append(Kernel(f"k_op_{i}", t, 1000 + i, op=f"e{i}", program_id=5, module="jit_f"))
        t += 2000
    for op in ("t", "u"):
        kernels.append(Kernel(f"k_{op}", t, 900, op=op, program_id=5, module="jit_f"))
        t += 2000
    for name in _KERNEL_NAMES:
        kernels.append(Kernel(name, t, 1000, op="e4", program_id=5, module="jit_f"))
        t += 2000
    for j, (tf_op, extra) in enumerate(
        [
            ("jit(f)/dot_general:", {}),
            ("m/MatMul:MatMul", {}),
            ("jit(f)/exp:", {}),
            ("e/x:Einsum", {"equation": "ab,bc->ac"}),
            ("xmma_tf:Relu", {}),
        ]
    ):
        kernels.append(
            Kernel("xmma_gemm_tf" if j == 4 else f"tf_{j}", t, 700, stream=2, stats={"tf_op": tf_op, **extra})
        )
        t += 2000
    path = write(tmp_path, gpu_space({5: ("jit_f", hlo_proto_bytes(_rules_module()))}, kernels, device=device))
    ids, rows, _ = table(oracle.tool_data([path], "kernel_stats"))
    df = kernel_stats(xw.load_run(str(path)))
    assert_rows_equal(df, ids[1:], [r[1:] for r in rows], what=vendor)
    if vendor == "none":
        assert not df["is_kernel_using_tensor_core"].any()


@pytest.mark.parametrize("hosts", [1, 2])
def test_hand_made_run_equals_xprof(tmp_path, hosts):
    """A profile made by hand (tests/xprof_tables.py), one host or two: launch parameters
    (malformed ones, the first launch's occupancy), a sub-nanosecond launch (0 ns, kept),
    a kernel whose `hlo_op` is not in its module (the `tf_op` stat names the op), a memcpy
    (no `kernel_details`: not a kernel), a GPU without a vendor, and two hosts' lists
    concatenated."""
    _, paths = write_hand_made_run(tmp_path)
    paths = paths[:hosts]
    ids, rows, _ = table(oracle.tool_data(paths, "kernel_stats"))
    df = kernel_stats(xw.load_run(paths))
    assert_rows_equal(df, ids[1:], [r[1:] for r in rows], what=f"{hosts} hosts")
    assert "memcpy" not in set(df["kernel_name"]) and "tiny_kernel" in set(df["kernel_name"])
