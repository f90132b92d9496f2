"""GPU kernel statistics: XProf's kernel_stats tool, the kernel stats database
(`core.kernels`: one report per distinct kernel launch, all hosts, sorted and cut as XProf)
as a table with its columns."""

from __future__ import annotations

import numpy as np
import pandas as pd

from .core.command_buffers import graph_kernel_words
from .core.run_stats import RunStats, as_stats
from .core.runlike import RunLike

COLUMNS = [
    "kernel_name",
    "registers_per_thread",
    "shmem_bytes",
    "block_dim",
    "grid_dim",
    "occupancy_pct",
    "is_op_tensor_core_eligible",
    "is_kernel_using_tensor_core",
    "op_name",
    "occurrences",
    "total_duration_us",
    "avg_duration_us",
    "min_duration_us",
    "max_duration_us",
]


def _empty(reason):
    out = pd.DataFrame(
        {
            c: pd.Series(
                dtype=object
                if c in ("kernel_name", "block_dim", "grid_dim", "op_name")
                else bool
                if c.startswith("is_")
                else float
            )
            for c in COLUMNS
        }
    )
    out.attrs["reason"] = reason
    return out


def kernel_stats(source: RunStats | RunLike) -> pd.DataFrame:
    """XProf's GPU kernel statistics of a run's statistics (`core.run_stats.RunStats`; a run:
    its stats read in this process), all hosts: one row per distinct kernel launch,
    longest total first (`core.kernels` says how XProf makes each report).

    Columns: kernel_name, registers_per_thread, shmem_bytes (static + dynamic shared
    memory, bytes), block_dim and grid_dim ("x,y,z"), occupancy_pct (theoretical, %, as
    the profiler wrote it), is_op_tensor_core_eligible, is_kernel_using_tensor_core,
    op_name (framework op, "" if none), occurrences, total_duration_us, avg_duration_us,
    min_duration_us, max_duration_us (µs, from whole nanoseconds). Without GPU kernels the
    frame is empty and `attrs["reason"]` says why. `attrs["notes"]`: what became of the
    kernels run in CUDA graphs (their op names: `command_buffers`), "" if none ran so.
    """
    stats = as_stats(source)
    reports = stats.kernels
    if isinstance(reports, str):
        return _empty(reports)
    total = reports["total_duration_ns"].to_numpy(np.int64)
    occ = reports["occurrences"].to_numpy(np.int64)

    def dims(k):
        return [f"{a},{b},{c}" for a, b, c in zip(reports[f"{k}_0"], reports[f"{k}_1"], reports[f"{k}_2"])]

    out = pd.DataFrame(
        {
            "kernel_name": reports["kernel_name"].to_numpy(object),
            "registers_per_thread": reports["registers_per_thread"].to_numpy(np.int64),
            "shmem_bytes": (reports["static_shmem_bytes"] + reports["dynamic_shmem_bytes"]).to_numpy(np.int64),
            "block_dim": dims("block"),
            "grid_dim": dims("grid"),
            "occupancy_pct": reports["occupancy_pct"].to_numpy(float),
            "is_op_tensor_core_eligible": reports["is_op_tensor_core_eligible"].to_numpy(bool),
            "is_kernel_using_tensor_core": reports["is_kernel_using_tensor_core"].to_numpy(bool),
            "op_name": reports["op_name"].to_numpy(object),
            "occurrences": occ,
            "total_duration_us": total / 1e3,
            "avg_duration_us": (total // occ) / 1e3,
            "min_duration_us": reports["min_duration_ns"].to_numpy(np.int64) / 1e3,
            "max_duration_us": reports["max_duration_ns"].to_numpy(np.int64) / 1e3,
        }
    )
    out.attrs["reason"] = ""
    graphs = reports.attrs.get("graph_kernels")
    out.attrs["notes"] = graph_kernel_words(graphs, stats.attribute_cuda_graphs) if graphs is not None else ""
    return out
