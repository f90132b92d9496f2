"""The fields every op table shares (XProf's `op_metrics_to_record.h`): FLOP rates, memory
bandwidths and operational intensities of op metrics against the device's peaks, and what
bounds each op (`SetRooflineMetrics`). The framework op stats and the roofline model read them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .intervals import safe_divide

GIBI_IN_GIGA = 2**30 / 1e9  # XProf GigaToGibi: GB/s / 1.073741824 = GiB/s


def peak_bandwidth(env, index):
    """GetMemoryPeakBandwidth: bws[index], else the HBM peak (GB/s)."""
    bws = env["bws"]
    return bws[index] if len(bws) > index else (bws[0] if bws else 0.0)


def roofline_metrics(ops: pd.DataFrame, env: dict) -> pd.DataFrame:
    """`roofline_columns` as a DataFrame with `ops`' index."""
    return pd.DataFrame(roofline_columns(ops, env), index=ops.index)


def roofline_columns(ops, env: dict) -> dict:
    """XProf's SetRooflineMetrics over rows of op metrics (a DataFrame, or a dict of
    columns), vectorised: {name: column}.

    `ops` has time_ps, flops, model_flops, bytes_accessed (over all occurrences) and,
    optionally, the memory breakdown: has_breakdown, hbm_bytes, cmem_read_bytes,
    cmem_write_bytes, vmem_read_bytes, vmem_write_bytes (without a breakdown all bytes
    count as HBM). Returns measured_flop_rate, model_flop_rate (GFLOP/s),
    measured_memory_bw, hbm_bw, cmem/vmem read/write bw (GiB/s), operational_intensity
    and the per-memory ones (FLOP/byte), bottleneck_operational_intensity and bound_by.
    """
    n = len(ops["time_ps"])

    def col(k):
        return np.asarray(ops[k], dtype=np.float64) if k in ops else np.zeros(n)

    t_ns = col("time_ps") / 1e3
    flops, nbytes = col("flops"), col("bytes_accessed")
    has_bd = np.asarray(ops["has_breakdown"], dtype=bool) if "has_breakdown" in ops else np.zeros(n, bool)
    hbm = np.where(has_bd, col("hbm_bytes"), nbytes)
    mem = {k: col(f"{k}_bytes") for k in ("cmem_read", "cmem_write", "vmem_read", "vmem_write")}
    out = {
        "measured_flop_rate": safe_divide(flops, t_ns),
        "model_flop_rate": safe_divide(col("model_flops"), t_ns),
        "measured_memory_bw": safe_divide(nbytes, t_ns) / GIBI_IN_GIGA,
        "operational_intensity": safe_divide(flops, nbytes),
        "hbm_bw": safe_divide(hbm, t_ns) / GIBI_IN_GIGA,
        "hbm_operational_intensity": safe_divide(flops, hbm),
    }
    for k, v in mem.items():
        out[f"{k}_bw"] = safe_divide(v, t_ns) / GIBI_IN_GIGA
        out[f"{k}_operational_intensity"] = safe_divide(flops, v)
    # The bottleneck: the resource with the highest utilisation (strictly higher wins).
    candidates = [
        (
            "Compute",
            safe_divide(out["measured_flop_rate"], env["peak_tflops"] * 1e3),
            out["operational_intensity"],
            np.ones(n, bool),
        ),
        (
            "HBM",
            safe_divide(out["hbm_bw"], peak_bandwidth(env, 0) / GIBI_IN_GIGA),
            out["hbm_operational_intensity"],
            np.ones(n, bool),
        ),
    ]
    if env["hardware"] == "TPU":
        for name, key, index in (
            ("CMEM Read", "cmem_read", 3),
            ("CMEM Write", "cmem_write", 4),
            ("VMEM Read", "vmem_read", 5),
            ("VMEM Write", "vmem_write", 6),
        ):
            peak = peak_bandwidth(env, index)
            if peak:
                candidates.append(
                    (
                        name,
                        safe_divide(out[f"{key}_bw"], peak / GIBI_IN_GIGA),
                        out[f"{key}_operational_intensity"],
                        mem[key] != 0,
                    )
                )
    if env["hardware"] == "GPU" and peak_bandwidth(env, 2):
        candidates.append(
            (
                "Shm/L1",
                safe_divide(out["hbm_bw"], peak_bandwidth(env, 2) / GIBI_IN_GIGA),
                out["hbm_operational_intensity"],
                np.ones(n, bool),
            )
        )
    bound = np.full(n, "Unknown", dtype=object)
    best = np.zeros(n)
    intensity = np.zeros(n)
    for name, util, oi, applies in candidates:
        win = applies & (best < util)
        bound[win], best[win], intensity[win] = name, util[win], oi[win]
    out["bottleneck_operational_intensity"] = intensity
    out["bound_by"] = bound
    return out
