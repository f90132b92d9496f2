"""XProf's HLO op statistics (`hlo_stats`): the device op database (`core.op_stats`), one row
per HLO op with its times, rates, bandwidths and what bounds it (`op_stats_to_hlo_stats.cc`)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .core.run_stats import RunStats, as_stats
from .core.runlike import RunLike

_GIB_PER_GB = 1e9 / 2**30
_HLO_STATS_COLUMNS = [
    "rank",
    "program_id",
    "program",
    "category",
    "hlo_op_name",
    "expression",
    "framework_op",
    "occurrences",
    "total_time_ps",
    "avg_time_ps",
    "self_time_ps",
    "avg_self_time_ps",
    "self_time_fraction",
    "cumulative_self_time_fraction",
    "flop_rate_gflops",
    "model_flop_rate_gflops",
    "memory_bw_gibs",
    "hbm_bw_gibs",
    "cmem_read_bw_gibs",
    "cmem_write_bw_gibs",
    "operational_intensity",
    "bound_by",
    "rematerialization",
    "outside_compilation",
    "flops_estimated",
]


def is_rematerialization(expression: str, framework_op: str) -> bool:
    """XProf's `IsRematerialization`: `.remat` in the op's name (its HLO text before the
    first `=`, the `%name`), or a framework op inside a `rematted_computation`."""
    return ".remat" in expression.split("=", 1)[0] or "/rematted_computation/" in framework_op


def is_outside_compilation(framework_op: str, expression: str) -> bool:
    """XProf's `IsOutsideCompilationOp`: TF's host transfer ops of outside compilation, or
    an HLO `send-done` to the host."""
    return framework_op.endswith((":XlaSendToHost", ":XlaRecvFromHost")) or (
        "send-done" in expression and "is_host_transfer=true" in expression
    )


def hlo_stats(source: RunStats | RunLike) -> pd.DataFrame:
    """XProf's HLO op statistics of a run's statistics (`core.run_stats.RunStats`; a run: its
    stats read in this process): one row per HLO op, by self time descending.

    Columns: rank, program_id, program ("name(id)"), category, hlo_op_name,
    expression (HLO text), framework_op, occurrences, total_time_ps,
    avg_time_ps, self_time_ps, avg_self_time_ps (ps), self_time_fraction and
    cumulative_self_time_fraction (of all device time, idle included, 0-1),
    flop_rate_gflops and model_flop_rate_gflops (GFLOP/s), memory_bw_gibs
    (all bytes accessed), hbm_bw_gibs, cmem_read_bw_gibs, cmem_write_bw_gibs
    (GiB/s, as XProf's table), operational_intensity (FLOP/byte), bound_by
    ("Compute", "HBM", ... or "Unknown"), rematerialization (the op recomputes a value
    to save memory: `.remat` in its name, or a framework op in a `rematted_computation`),
    outside_compilation (a transfer to the host of TF's outside compilation:
    `XlaSendToHost`/`XlaRecvFromHost`, or a host `send-done`), flops_estimated (FLOPs
    and bytes derived from the HloProto, not measured). Empty (with `attrs["reason"]`)
    when the profile has no device ops.

    On GPUs rows come from the kernels as XProf counts them (see
    `device_op_metrics`), bound_by may also be "Shm/L1". For XLA:CPU thunks
    (beyond XProf) fractions are of the summed op self time, hbm_bw_gibs is NaN
    and bound_by "Unknown" (no known peaks); `attrs["notes"]` says so.
    """
    db = as_stats(source).op_metrics
    if db.empty:
        out = pd.DataFrame(columns=_HLO_STATS_COLUMNS)
        out.attrs["reason"] = db.reason
        out.attrs["notes"] = db.notes
        return out
    ops = db.ops[db.ops["occurrences"] > 0].copy()
    # XProf's SortedOpMetricsDb: self time descending, then name.
    ops = ops.iloc[np.lexsort((ops["name"].astype(str).to_numpy(), -ops["self_time_ps"].to_numpy()))]
    t_ns = ops["time_ps"].to_numpy(dtype=float) / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        div = lambda a, b: np.where(b > 0, a / np.where(b > 0, b, 1), 0.0)  # noqa: E731
        flop_rate = div(ops["flops"].to_numpy(float), t_ns)
        model_rate = div(ops["model_flops"].to_numpy(float), t_ns)
        mem_bw = div(ops["bytes_accessed"].to_numpy(float), t_ns) * _GIB_PER_GB
        hbm_bytes = np.where(ops["has_breakdown"], ops["hbm_bytes"], ops["bytes_accessed"]).astype(float)
        hbm_bw = div(hbm_bytes, t_ns) * _GIB_PER_GB
        cmem_r = div(ops["cmem_read_bytes"].to_numpy(float), t_ns) * _GIB_PER_GB
        cmem_w = div(ops["cmem_write_bytes"].to_numpy(float), t_ns) * _GIB_PER_GB
        intensity = div(ops["flops"].to_numpy(float), ops["bytes_accessed"].to_numpy(float))
    p = db.peaks
    utils = np.stack(
        [
            div(flop_rate, np.full_like(flop_rate, p["peak_flops"] / 1e9)),
            div(hbm_bw, np.full_like(hbm_bw, p["peak_hbm_bw"] / 1e9 * _GIB_PER_GB)),
            np.where(
                ops["cmem_read_bytes"] > 0,
                div(cmem_r, np.full_like(cmem_r, p["peak_cmem_read_bw"] / 1e9 * _GIB_PER_GB)),
                0,
            ),
            np.where(
                ops["cmem_write_bytes"] > 0,
                div(cmem_w, np.full_like(cmem_w, p["peak_cmem_write_bw"] / 1e9 * _GIB_PER_GB)),
                0,
            ),
        ]
    )
    names = ["Compute", "HBM", "CMEM Read", "CMEM Write"]
    if db.source == "gpu" and p.get("peak_on_chip_write_bw", 0):
        # XProf on GPUs: HBM traffic against the shared-memory peak ("Shm/L1"), which wins
        # only where the HBM peak is unknown.
        shm = div(hbm_bw, np.full_like(hbm_bw, p["peak_on_chip_write_bw"] / 1e9 * _GIB_PER_GB))
        utils = np.vstack([utils, shm[None, :]])
        names.append("Shm/L1")
    labels = np.array(["Unknown"] + names, dtype=object)
    best = np.where(utils.max(axis=0) > 0, utils.argmax(axis=0) + 1, 0)
    expression = np.where(ops["expression"] == "", ops["name"], ops["expression"])
    # XProf's two flags read the op's own HLO text (its long name, "" where it has none).
    long_names = ops["expression"].astype(str).to_numpy(object)
    framework = ops["provenance"].astype(str).to_numpy(object)
    self_ps = ops["self_time_ps"].to_numpy(dtype=np.int64)
    frac = self_ps / db.total_time_ps if db.total_time_ps else np.zeros(len(ops))
    occ = ops["occurrences"].to_numpy(dtype=np.int64)
    pid = ops["program_id"].to_numpy()
    out = pd.DataFrame(
        {
            "rank": np.arange(1, len(ops) + 1),
            "program_id": pid,
            "program": [db.program_names.get(int(x), "main") for x in pid],
            "category": ops["category"].to_numpy(),
            "hlo_op_name": ops["name"].to_numpy(),
            "expression": expression,
            "framework_op": ops["provenance"].to_numpy(),
            "occurrences": occ,
            "total_time_ps": ops["time_ps"].to_numpy(dtype=np.int64),
            "avg_time_ps": ops["time_ps"].to_numpy(float) / occ,
            "self_time_ps": self_ps,
            "avg_self_time_ps": self_ps / occ,
            "self_time_fraction": frac,
            "cumulative_self_time_fraction": np.cumsum(frac),
            "flop_rate_gflops": flop_rate,
            "model_flop_rate_gflops": model_rate,
            "memory_bw_gibs": mem_bw,
            "hbm_bw_gibs": hbm_bw,
            "cmem_read_bw_gibs": cmem_r,
            "cmem_write_bw_gibs": cmem_w,
            "operational_intensity": intensity,
            "bound_by": labels[best],
            "rematerialization": [is_rematerialization(e, f) for e, f in zip(long_names, framework)],
            "outside_compilation": [is_outside_compilation(f, e) for e, f in zip(long_names, framework)],
            "flops_estimated": ops["flops_estimated"].to_numpy(dtype=bool)
            if "flops_estimated" in ops
            else np.zeros(len(ops), dtype=bool),
        }
    )
    if db.source == "cpu":
        out["hbm_bw_gibs"] = np.nan  # no HBM: bytes are in memory_bw_gibs
    out.attrs["reason"] = ""
    out.attrs["notes"] = db.notes
    return out
