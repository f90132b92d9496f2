"""Framework op statistics: XProf's framework_op_stats (tf_stats) tool.

XProf (`op_stats_to_tf_stats.cc`, `xplane_to_op_metrics_db.cc`
`ConvertHostThreadsXPlaneToOpMetricsDb`, `op_metrics_db_utils.cc`
`CreateTfMetricsDbFromDeviceOpMetricsDb`, `op_utils.cc` `HostOpMetricsDbBuilder`,
`op_metrics_to_record.h`) lists TensorFlow and JAX ops in two parts:

* **Device**: the device op database (`op_stats.device_op_metrics`: TPU XLA ops, GPU
  kernels of XLA or TF ops) regrouped by framework op: the name of the op's provenance
  (`name:Type`; an op without one keeps its HLO name, type "Unknown"), its time and
  self time summed, its occurrences the most of its device ops, its FLOPs and bytes
  summed (no memory breakdown: all bytes count as HBM), its eager mark the last device
  op's; plus IDLE, the devices' time without ops. CPU-only runs have no device part.
* **Host**: per host thread (`/host:CPU` line), the events named as a framework op
  (`name:Type`, JAX `name:`, `Iterator::...`, memcpy; not user TraceMes) and the events
  with a non-empty `tf_op` stat, nested by XProf's op stack (an op popped over by an
  inner one's end is dropped); self time is time less the time of the ops directly
  inside. Each thread adds an IDLE op: from its first op's start to its last op's end,
  less its ops' self time. Threads and hosts combine by op name (type: the first one's).

Each part is sorted by self time (longest first, then name) and cut to 500 rows, IDLE
included. Rows carry times in µs, the self time as a fraction of the part's total
time (device time for device rows, host thread time for host rows; without IDLE, of the
op time), FLOP rate (GFLOP/s), memory bandwidth (GiB/s), operational intensity
(FLOP/byte) and what bounds the op (`roofline.roofline_metrics`), and on GPUs the
TensorCore utilisation: the share of the op's kernel time (`kernel_stats`) in kernels
that use TensorCores.

Not reimplemented: tf.data stage ids (`input_pipeline_stage_id` stats, which key
newer tf.data ops by stage); none of the corpus profiles has them.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd

from .core.columns import Groups
from .core.grouping import gpu_stats_first
from .core.host_ops import IDLE, OP_DB_COLUMNS
from .core.intervals import safe_divide
from .core.op_stats import DeviceOpMetrics, device_framework_ops
from .core.records import roofline_columns
from .core.run_stats import RunStats, as_stats
from .core.runlike import RunLike
from .core.tf_op import has_gradients

#: XProf shows at most this many ops per part (op_stats_to_tf_stats.cc kMaxNumOfOps).
MAX_OPS = 500
COLUMNS = (
    "rank host_or_device type operation occurrences total_time avg_time total_self_time avg_self_time "
    "device_total_self_time_percent device_cumulative_total_self_time_percent "
    "host_total_self_time_percent host_cumulative_total_self_time_percent measured_flop_rate "
    "model_flop_rate measured_memory_bw operational_intensity gpu_tensorcore_utilization bound_by "
    "eager"
).split()
NO_OPS = (
    "the profile has no host thread plane (`/host:CPU`) and no GPU or TPU plane, so XProf has no framework op to list"
)
NO_OP_TIME = (
    "without IDLE there is nothing left: no host thread ran a TensorFlow or JAX framework op (events "
    "named `name:Type`, or with a `tf_op` stat) and no device ran ops"
)


# --- device: XProf's TF-op database of the device ops ---------------------------------------


def device_tf_db(db: DeviceOpMetrics, gpu_tf_ops: Callable[[], pd.DataFrame]):
    """XProf's CreateTfMetricsDbFromDeviceOpMetricsDb of a `op_stats.DeviceOpMetrics`:
    {column: array} with OP_DB_COLUMNS, IDLE last, or None for a CPU-only run (no device
    ops in XProf). Arrays, not a frame: a few ops on most runs, where a DataFrame's fixed
    cost is most of this tool's on a GPU run. GPU eager marks come from `gpu_tf_ops()`
    (`RunStats.gpu_tf_ops`: the device op database with the grouping's `is_eager`), asked
    only when a device op ran eagerly (none does in an XLA program: then every mark is
    "Function" whichever device op is a framework op's last)."""
    if db.source not in ("tpu", "gpu"):
        return None
    ops = db.ops
    tf = device_framework_ops(ops) if len(ops) else pd.DataFrame(columns=OP_DB_COLUMNS)
    names = tf["name"].to_numpy(object)
    eager = np.zeros(len(tf), bool)
    if db.source == "gpu" and len(tf) and ("is_eager" not in ops or ops["is_eager"].to_numpy(bool).any()):
        found = gpu_tf_ops()
        marks = dict(zip(found.index, found["is_eager"].astype(bool)))  # (by name)
        eager = np.array([marks.get(name, False) for name in names], dtype=bool)
    idle = db.idle_time_ps
    return {
        "name": np.append(names, IDLE),
        "type": np.append(tf["type"].to_numpy(object), IDLE),
        "occurrences": np.append(tf["occurrences"].to_numpy(np.int64), 0),
        "time_ps": np.append(tf["time_ps"].to_numpy(np.int64), idle),
        "self_time_ps": np.append(tf["self_time_ps"].to_numpy(np.int64), idle),
        **{c: np.append(tf[c].to_numpy(np.float64), 0.0) for c in ("flops", "model_flops", "bytes_accessed")},
        "is_eager": np.append(eager, False),
    }


# --- the table ------------------------------------------------------------------------------


def _sorted_top(db):
    """SortedOpMetricsDb of op database columns ({name: array}): self time descending, then
    name; the rows of the top MAX_OPS."""
    return np.lexsort((db["name"].astype(str), -db["self_time_ps"].astype(np.float64)))[:MAX_OPS]


def _records(db, where, total_time_ps, env, tensor_core, exclude_idle):
    """The table's rows of one part ({column: array}) from its op database's columns."""
    top = _sorted_top(db)
    if exclude_idle:
        top = top[db["type"][top] != IDLE]
    rows = {c: np.asarray(db[c])[top] for c in OP_DB_COLUMNS}
    occ = rows["occurrences"].astype(np.float64)
    total_us = rows["time_ps"].astype(np.float64) / 1e6
    self_us = rows["self_time_ps"].astype(np.float64) / 1e6
    frac = safe_divide(self_us, total_time_ps / 1e6)
    zero = np.zeros(len(top))
    device = where == "Device"
    m = roofline_columns(rows, env)
    names = rows["name"].astype(object)
    shares = zero
    if device and tensor_core is not None:
        shares = np.array([tensor_core.get(name, 0.0) for name in names], dtype=np.float64)
    return {
        "host_or_device": np.full(len(top), where, dtype=object),
        "type": rows["type"].astype(object),
        "operation": names,
        "occurrences": rows["occurrences"].astype(np.int64),
        "total_time": total_us,
        "avg_time": safe_divide(total_us, occ),
        "total_self_time": self_us,
        "avg_self_time": safe_divide(self_us, occ),
        "device_total_self_time_percent": frac if device else zero,
        "device_cumulative_total_self_time_percent": np.cumsum(frac) if device else zero,
        "host_total_self_time_percent": zero if device else frac,
        "host_cumulative_total_self_time_percent": zero if device else np.cumsum(frac),
        **{c: m[c] for c in ("measured_flop_rate", "model_flop_rate", "measured_memory_bw", "operational_intensity")},
        "gpu_tensorcore_utilization": shares,
        "bound_by": m["bound_by"],
        "eager": np.where(rows["is_eager"].astype(bool), "Eager", "Function").astype(object),
    }


def _tensor_core_share(reports):
    """{op name: TensorCore kernel time / kernel time} over XProf's kernel reports
    (GroupKernelReportsByOpName)."""
    if isinstance(reports, str) or reports.empty:
        return {}
    duration = reports["total_duration_ns"].to_numpy(np.int64)
    tc = np.where(reports["is_kernel_using_tensor_core"].to_numpy(bool), duration, 0)
    op = reports["op_name"].to_numpy(object)
    g = Groups(op)  # (a pandas groupby costs ms for a few reports)
    return {
        k: (t / d if d else 0.0) for k, t, d in zip(op[g.order[g.starts]], g.sum(tc).tolist(), g.sum(duration).tolist())
    }


def task_type(operations, types) -> str:
    """XProf's ModelTracker guess from the listed ops (`tf_op.has_gradients`): "Training"
    when they hold a gradient, else "Inference"."""
    return "Training" if has_gradients(zip(operations, types)) else "Inference"


def framework_op_stats(source: RunStats | RunLike, exclude_idle=False) -> pd.DataFrame:
    """XProf's framework op statistics of a run's statistics (`core.run_stats.RunStats`; a
    run: its stats read in this process), all hosts: device ops then host ops, each by self
    time (see the module docstring).

    Columns (XProf's ids): rank, host_or_device ("Device"/"Host"), type (op type),
    operation (op name), occurrences, total_time, avg_time, total_self_time,
    avg_self_time (µs), device_total_self_time_percent,
    device_cumulative_total_self_time_percent, host_total_self_time_percent,
    host_cumulative_total_self_time_percent (fractions 0-1 of the part's total time, as
    XProf's, despite the name), measured_flop_rate and model_flop_rate (GFLOP/s),
    measured_memory_bw (GiB/s), operational_intensity (FLOP/byte), gpu_tensorcore_utilization
    (0-1; only on GPU runs, as XProf), bound_by, eager ("Eager" or "Function").
    `exclude_idle` leaves out the IDLE rows and makes the fractions of op time (XProf's
    second table). `attrs`: reason (why the frame is empty), device_type, task_type
    ("Training"/"Inference") and architecture_type, as XProf's table properties; notes
    (on GPUs, what became of kernels run in CUDA graphs: `command_buffers`).
    """
    stats = as_stats(source)
    env = stats.perf_env
    if env["hardware"] != "CPU":
        stats.build_ahead("host_op_db", first=gpu_stats_first)  # (while the device's is built)
    db = stats.op_metrics if env["hardware"] != "CPU" else None
    dev = device_tf_db(db, lambda: stats.gpu_tf_ops) if db is not None else None
    gpu = "GPU" in env["device_type"]
    columns = COLUMNS if gpu else [c for c in COLUMNS if c != "gpu_tensorcore_utilization"]
    parts = []
    if dev is not None and db is not None:
        total = db.total_op_time_ps if exclude_idle else db.total_time_ps
        # (The kernel reports before the host's database is waited for: built meanwhile.)
        parts.append(
            _records(dev, "Device", total, env, _tensor_core_share(stats.kernels) if gpu else None, exclude_idle)
        )
    host = stats.host_op_db
    if host is not None:
        frame, total_time, op_time = host
        hdb = {c: frame[c].to_numpy() for c in OP_DB_COLUMNS}
        parts.append(_records(hdb, "Host", op_time if exclude_idle else total_time, env, None, exclude_idle))
    if not parts:
        out = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
        out.attrs.update(
            reason=NO_OPS, device_type=env["device_type"] or "CPU", task_type="Inference", architecture_type="Unknown"
        )
        return out
    rows = {c: np.concatenate([part[c] for part in parts]) for c in COLUMNS[1:]}
    rows["rank"] = np.arange(1, len(rows["operation"]) + 1)
    # (Texts as objects: pandas would look at every one to make them its string dtype.)
    out = pd.DataFrame(
        {c: pd.Series(rows[c], dtype=object) if rows[c].dtype == object else rows[c] for c in columns}, copy=False
    )
    out.attrs.update(
        reason="" if len(out) else NO_OP_TIME,
        device_type=env["device_type"] or "CPU",
        task_type=task_type(out["operation"], out["type"]),
        # XProf's open sources never set the flags its architecture guess reads.
        architecture_type="Unknown",
        notes=db.notes if db is not None and db.source == "gpu" else "",  # kernels run in CUDA graphs
    )
    return out
