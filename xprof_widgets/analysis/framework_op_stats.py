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

import numpy as np
import pandas as pd

from .core.environment import combine_devices, combine_perf_env, host_device, host_perf_env, perf_env
from .core.intervals import prev_enclosing, safe_divide
from .core.planes import HOST_PLANE, is_derived_id
from .grouping import eager_events
from .op_stats import device_framework_ops
from .tf_op import _JAX_OP_TYPE, _TF_OP_NAME, _TF_OP_TYPE, name_scopes, parse_tf_op

IDLE = "IDLE"
#: XProf shows at most this many ops per part (op_stats_to_tf_stats.cc kMaxNumOfOps).
MAX_OPS = 500
COLUMNS = (
    "rank host_or_device type operation occurrences total_time avg_time total_self_time avg_self_time "
    "device_total_self_time_percent device_cumulative_total_self_time_percent "
    "host_total_self_time_percent host_cumulative_total_self_time_percent measured_flop_rate "
    "model_flop_rate measured_memory_bw operational_intensity gpu_tensorcore_utilization bound_by "
    "eager"
).split()
_DB_COLUMNS = [
    "name",
    "type",
    "occurrences",
    "time_ps",
    "self_time_ps",
    "flops",
    "model_flops",
    "bytes_accessed",
    "is_eager",
]
NO_OPS = (
    "the profile has no host thread plane (`/host:CPU`) and no GPU or TPU plane, so XProf has no framework op to list"
)
NO_OP_TIME = (
    "without IDLE there is nothing left: no host thread ran a TensorFlow or JAX framework op (events "
    "named `name:Type`, or with a `tf_op` stat) and no device ran ops"
)


# --- host: XProf's host op database -------------------------------------------------------


def _line_activities(line, known, parsed, eager_mask, has_tf_op_stat):
    """The framework-op activities of one host line in XProf's push order (by event, an
    event's name-op before its `tf_op` op): begin, end (ps), op id (in `parsed`, the op
    strings seen so far; `known` maps event names that are ops to theirs), is_eager."""
    names = line.names()
    codes = np.asarray(names.codes)
    cats = np.asarray(names.categories, dtype=object)
    op_of_code = np.array([known.get(c, -1) for c in cats] + [-1], dtype=np.int64)
    ops = op_of_code[codes]  # -1 where the event's name is no framework op
    by_name = np.flatnonzero(ops >= 0)
    ev, sub, key = [by_name], [np.zeros(len(by_name), np.int64)], [ops[by_name]]
    marked = [eager_mask[by_name]]
    if has_tf_op_stat:
        st = line.stat_table(names=["tf_op"])
        if "tf_op" in st:
            events, values = st.strings("tf_op")
            nonempty = values != ""
            events, values = events[nonempty], values[nonempty]
            inverse, distinct = pd.factorize(values.astype(str))  # hashed: no sort of the strings
            ids = np.array([parsed.setdefault(v, len(parsed)) for v in distinct], dtype=np.int64)
            ev.append(events)
            sub.append(np.ones(len(events), np.int64))
            key.append(ids[inverse] if len(distinct) else np.zeros(0, np.int64))
            marked.append(np.zeros(len(events), bool))
    ev, sub = np.concatenate(ev), np.concatenate(sub)
    order = np.lexsort((sub, ev))
    ev = ev[order]
    begin = line.start_ps[ev].astype(np.int64)
    return (
        begin,
        begin + line.event_duration_ps[ev].astype(np.int64),
        np.concatenate(key)[order],
        np.concatenate(marked)[order],
    )


def _stack_self_time(begin, end):
    """(counted, self time) of nested activities on one thread, as XProf's op stack has them.

    XProf (`ProcessTfActivities`) sorts the begins and ends of the activities by
    time, stable (each activity's begin, then its end, in line order), pushes on a
    begin and, on an end, pops down to that activity: one that was popped over is
    dropped, and so is one whose end finds it gone. A counted activity adds its
    duration to the children time of the one below it. Properly nested activities
    (the usual case) are done with arrays; otherwise a loop over the sorted ends.
    """
    n = len(begin)
    dur = end - begin
    if n == 0:
        return np.zeros(0, bool), dur
    ts = np.concatenate([begin, end])
    closing = np.repeat([False, True], n)
    act = np.tile(np.arange(n), 2)
    order = np.lexsort((2 * act + closing, ts))
    closing, act = closing[order], act[order]
    depth = np.cumsum(np.where(closing, -1, 1))
    level = depth + closing  # an open's level after its push, a close's before its pop
    by_level = np.lexsort((np.arange(2 * n), level))
    prev = np.roll(by_level, 1)
    close_at = np.flatnonzero(closing[by_level])
    matched = (
        (level[prev[close_at]] == level[by_level[close_at]])
        & ~closing[prev[close_at]]
        & (act[prev[close_at]] == act[by_level[close_at]])
    )
    if matched.all():  # every end finds its activity on top
        pos = np.empty(2 * n, np.int64)
        pos[order] = np.arange(2 * n)
        open_pos, close_pos = pos[:n], pos[n:]
        by_open = np.argsort(open_pos)
        parent = prev_enclosing(close_pos[by_open])
        has = parent >= 0
        children = np.zeros(n, np.int64)
        np.add.at(children, by_open[parent[has]], dur[by_open[has]])
        return np.ones(n, bool), dur - children
    counted = np.zeros(n, bool)
    children = np.zeros(n, np.int64)
    stack = []
    for a, is_close in zip(act.tolist(), closing.tolist()):
        if not is_close:
            stack.append(a)
            continue
        if a not in stack:
            continue
        while stack[-1] != a:
            stack.pop()
        stack.pop()
        counted[a] = True
        if stack:
            children[stack[-1]] += dur[a]
    return counted, dur - children


def host_op_db(spaces, eager=None):
    """XProf's host op database over the files `spaces`, combined: (DataFrame with
    _DB_COLUMNS, one row per framework op, IDLE last; total_time_ps; total_op_time_ps),
    or None when no file has a host thread plane."""

    frames, total_time, op_time, any_line = [], 0, 0, False
    names, types = [], []  # op ids: name and type of each distinct framework op string
    parsed = {}  # op string -> op id
    for i, space in enumerate(spaces):
        plane = space.plane(HOST_PLANE)
        if plane is None or not plane.lines:
            continue
        any_line = True
        marks = eager[i] if eager is not None else eager_events(space)
        has_tf_op_stat = "tf_op" in plane.stat_names.values()
        # Event names that are framework ops (XProf's tf_ops map, by metadata).
        cats = pd.unique(plane.event_metadata["name"])
        known = {}
        for c in cats:
            if c and parse_tf_op(c)[0] != "unknown":
                known[c] = parsed.setdefault(c, len(parsed))
        for li, line in enumerate(plane.lines):
            if not len(line) or is_derived_id(line.id):
                continue
            mask = marks.get((HOST_PLANE, li), np.zeros(len(line), bool))
            begin, end, key, is_eager = _line_activities(line, known, parsed, mask, has_tf_op_stat)
            if not len(begin):
                continue
            counted, self_ps = _stack_self_time(begin, end)
            # An op enters the database when its end is reached: that order decides its type.
            entered = np.lexsort((np.arange(len(begin)), end))
            entered = entered[counted[entered]]
            line_op_time = int(self_ps[entered].sum())
            line_total = max(int(end.max() - begin.min()), line_op_time)
            total_time += line_total
            op_time += line_op_time
            frames.append(
                pd.DataFrame(
                    {
                        "op": key[entered],
                        "time_ps": (end - begin)[entered],
                        "self_time_ps": self_ps[entered],
                        "is_eager": is_eager[entered],
                    }
                )
            )
    if not any_line:
        return None
    for text in parsed:  # ids were given in insertion order
        _, name, kind = parse_tf_op(text)
        names.append(name)
        types.append(kind)
    ops = None
    if frames:
        # Summed per op string first (integer keys), in the order they entered; _op_db then
        # keys them by name (several strings may name one op).
        ops = (
            pd.concat(frames, ignore_index=True)
            .groupby("op", sort=False)
            .agg(
                occurrences=("time_ps", "size"),
                time_ps=("time_ps", "sum"),
                self_time_ps=("self_time_ps", "sum"),
                is_eager=("is_eager", "any"),
            )
            .reset_index()
        )
        ops["name"] = np.asarray(names, dtype=object)[ops["op"].to_numpy()]
        ops["type"] = np.asarray(types, dtype=object)[ops["op"].to_numpy()]
    return _op_db(ops, total_time, op_time)


def _op_db(ops, total_time, op_time):
    """(the host op database, total_time, op_time) from op rows (name, type, occurrences,
    time_ps, self_time_ps, is_eager; None: no op) in the order ops entered it: keyed by
    name, the type the first entered row's that has one (XProf keeps the first
    non-empty), IDLE last (the time no op ran)."""
    if ops is not None and len(ops):
        ops = ops.assign(type_or_none=ops["type"].where(ops["type"] != "", None))
        db = (
            ops.groupby("name", sort=False)
            .agg(
                type=("type_or_none", "first"),
                occurrences=("occurrences", "sum"),
                time_ps=("time_ps", "sum"),
                self_time_ps=("self_time_ps", "sum"),
                is_eager=("is_eager", "any"),
            )
            .reset_index()
        )
        db["type"] = db["type"].fillna("")
    else:
        db = pd.DataFrame(columns=["name", "type", "occurrences", "time_ps", "self_time_ps", "is_eager"])
    idle = total_time - op_time
    idle_row = {"name": [IDLE], "type": [IDLE], "occurrences": [0], "time_ps": [idle], "self_time_ps": [idle]}
    db = pd.concat([db, pd.DataFrame({**idle_row, "is_eager": [False]})], ignore_index=True)
    for k in ("flops", "model_flops", "bytes_accessed"):
        db[k] = 0.0
    return db[_DB_COLUMNS], total_time, op_time


def combine_host_op_dbs(parts):
    """`host_op_db` of several hosts from each host's own (in host order; None for a host
    without a host thread plane): rows of one op summed, its type the first host's that
    has one, IDLE made again from the summed times."""
    parts = [p for p in parts if p is not None]
    if len(parts) <= 1:
        return parts[0] if parts else None
    ops = pd.concat([db.iloc[:-1] for db, _, _ in parts], ignore_index=True)  # IDLE is last
    return _op_db(ops, sum(t for _, t, _ in parts), sum(o for _, _, o in parts))


def host_part(run):
    """One host's part of the framework op stats of a many-host run (a `Run.map_hosts`
    task): its perf env (`core.environment.host_perf_env`), device (type, cores) and host op
    database."""

    space = run.xspace()
    return {
        "env": host_perf_env(space),
        "device": host_device(space),
        "host": host_op_db([space], [eager_events(space)]),
    }


# --- device: XProf's TF-op database of the device ops ---------------------------------------


def device_tf_db(run, db, gpu_tf_ops=None):
    """XProf's CreateTfMetricsDbFromDeviceOpMetricsDb of a `op_stats.DeviceOpMetrics`:
    (DataFrame with _DB_COLUMNS, IDLE last) or None for a CPU-only run (no device ops in
    XProf). GPU eager marks come from `overview._gpu_tf_ops` (the device op database with
    the grouping's `is_eager`), or `gpu_tf_ops` when given (a pod's, combined)."""
    if db.source not in ("tpu", "gpu"):
        return None
    ops = db.ops
    if len(ops):
        tf = device_framework_ops(ops)
        tf["is_eager"] = False
        if db.source == "gpu":
            from .overview import _gpu_tf_ops

            gpu = gpu_tf_ops if gpu_tf_ops is not None else _gpu_tf_ops(run, run.xspaces())
            tf["is_eager"] = tf["name"].map(gpu["is_eager"].astype(bool)).fillna(False).astype(bool).to_numpy()
    else:
        tf = pd.DataFrame(columns=_DB_COLUMNS)
    idle = pd.DataFrame(
        {
            "name": [IDLE],
            "type": [IDLE],
            "occurrences": [0],
            "time_ps": [db.idle_time_ps],
            "self_time_ps": [db.idle_time_ps],
            "flops": [0.0],
            "model_flops": [0.0],
            "bytes_accessed": [0.0],
            "is_eager": [False],
        }
    )
    return pd.concat([tf, idle], ignore_index=True)[_DB_COLUMNS]


# --- the table ------------------------------------------------------------------------------


def _sorted_top(db):
    """SortedOpMetricsDb: self time descending, then name; the top MAX_OPS."""
    order = np.lexsort((db["name"].to_numpy(str), -db["self_time_ps"].to_numpy(np.float64)))
    return db.iloc[order[:MAX_OPS]]


def _records(db, where, total_time_ps, env, tensor_core, exclude_idle):
    from .roofline import roofline_metrics

    top = _sorted_top(db)
    if exclude_idle:
        top = top[top["type"] != IDLE]
    occ = top["occurrences"].to_numpy(np.float64)
    total_us = top["time_ps"].to_numpy(np.float64) / 1e6
    self_us = top["self_time_ps"].to_numpy(np.float64) / 1e6
    frac = safe_divide(self_us, total_time_ps / 1e6)
    zero = np.zeros(len(top))
    out = pd.DataFrame(
        {
            "host_or_device": where,
            "type": top["type"].to_numpy(object),
            "operation": top["name"].to_numpy(object),
            "occurrences": top["occurrences"].to_numpy(np.int64),
            "total_time": total_us,
            "avg_time": safe_divide(total_us, occ),
            "total_self_time": self_us,
            "avg_self_time": safe_divide(self_us, occ),
            "device_total_self_time_percent": frac if where == "Device" else zero,
            "device_cumulative_total_self_time_percent": np.cumsum(frac) if where == "Device" else zero,
            "host_total_self_time_percent": frac if where == "Host" else zero,
            "host_cumulative_total_self_time_percent": np.cumsum(frac) if where == "Host" else zero,
        }
    )
    m = roofline_metrics(top.reset_index(drop=True), env)
    for c in ("measured_flop_rate", "model_flop_rate", "measured_memory_bw", "operational_intensity"):
        out[c] = m[c].to_numpy()
    if where == "Device" and tensor_core is not None:
        out["gpu_tensorcore_utilization"] = out["operation"].map(tensor_core).fillna(0.0).to_numpy(float)
    else:
        out["gpu_tensorcore_utilization"] = 0.0
    out["bound_by"] = m["bound_by"].to_numpy()
    out["eager"] = np.where(top["is_eager"].to_numpy(bool), "Eager", "Function")
    return out


def _tensor_core_share(run):
    """{op name: TensorCore kernel time / kernel time} over XProf's kernel reports
    (GroupKernelReportsByOpName)."""
    from .kernel_stats import kernel_reports

    reports = kernel_reports(run)
    if isinstance(reports, str) or reports.empty:
        return {}
    tc = np.where(reports["is_kernel_using_tensor_core"], reports["total_duration_ns"], 0)
    g = reports.assign(tc=tc).groupby("op_name", sort=False)[["tc", "total_duration_ns"]].sum()
    return {k: (t / d if d else 0.0) for k, t, d in zip(g.index, g["tc"], g["total_duration_ns"])}


def task_type(operations, types) -> str:
    """XProf's ModelTracker guess from the listed ops: "Training" when a TensorFlow op sits in
    a `gradient_tape` or `gradients*` name scope or a JAX op in a `transpose(...)` one (a
    gradient), else "Inference"."""
    for name, kind in set(zip(operations, types)):
        if _TF_OP_TYPE.fullmatch(kind) and _TF_OP_NAME.fullmatch(name):
            for scope in name_scopes(name):
                if scope.startswith("gradient") and (scope[8:] == "_tape" or scope[8:].startswith("s")):
                    return "Training"
        elif (kind == "" or (name and _JAX_OP_TYPE.fullmatch(kind) and kind in name.split("/")[-1])) and any(
            part.startswith("transpose(") for part in name.split("/")
        ):
            return "Training"
    return "Inference"


def framework_op_stats(run, exclude_idle=False, in_process=False) -> pd.DataFrame:
    """XProf's framework op statistics of `run`, all hosts: device ops then host ops, each
    by self time (see the module docstring).

    Columns (XProf's ids): rank, host_or_device ("Device"/"Host"), type (op type),
    operation (op name), occurrences, total_time, avg_time, total_self_time,
    avg_self_time (µs), device_total_self_time_percent,
    device_cumulative_total_self_time_percent, host_total_self_time_percent,
    host_cumulative_total_self_time_percent (fractions 0-1 of the part's total time, as
    XProf's, despite the name), measured_flop_rate and model_flop_rate (GFLOP/s),
    measured_memory_bw (GiB/s), operational_intensity (FLOP/byte), gpu_tensorcore_utilization
    (0-1; only on GPU runs, as XProf), bound_by, eager ("Eager" or "Function").
    `exclude_idle` leaves out the IDLE rows and makes the fractions of op time (XProf's
    second table). A run of many hosts analysed host by host (`run.pooled`) gets each
    host's part on its executor (`run.map_hosts`) unless `in_process` (every host file
    read here). `attrs`: reason (why the frame is empty), device_type, task_type
    ("Training"/"Inference") and architecture_type, as XProf's table properties; notes
    (on GPUs, what became of kernels run in CUDA graphs: `command_buffers`).
    """
    from .op_stats import device_op_metrics

    if len(run.hosts) > 1 and getattr(run, "pooled", False) and not in_process:
        # Many hosts: each host's part on the run's executor, the device op database from
        # the combined per-host summaries; the driver reads no host file.
        pod = run.pod()
        parts = [p for p in run.map_hosts(host_part) if p is not None]
        env = combine_perf_env([p["env"] for p in parts], combine_devices(p["device"] for p in parts))
        db = pod.op_metrics if env["hardware"] != "CPU" else None
        dev = device_tf_db(run, db, gpu_tf_ops=pod.gpu_tf_ops) if db is not None else None
        host = combine_host_op_dbs([p["host"] for p in parts])
    else:
        spaces = run.xspaces()
        env = perf_env(run)
        eager = [eager_events(s) for s in spaces]
        db = device_op_metrics(run) if env["hardware"] != "CPU" else None
        dev = device_tf_db(run, db) if db is not None else None
        host = host_op_db(spaces, eager)
    gpu = "GPU" in env["device_type"]
    columns = COLUMNS if gpu else [c for c in COLUMNS if c != "gpu_tensorcore_utilization"]
    parts = []
    if dev is not None:
        total = db.total_op_time_ps if exclude_idle else db.total_time_ps
        parts.append(_records(dev, "Device", total, env, _tensor_core_share(run) if gpu else None, exclude_idle))
    if host is not None:
        hdb, total_time, op_time = host
        parts.append(_records(hdb, "Host", op_time if exclude_idle else total_time, env, None, exclude_idle))
    if not parts:
        out = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
        out.attrs.update(
            reason=NO_OPS, device_type=env["device_type"] or "CPU", task_type="Inference", architecture_type="Unknown"
        )
        return out
    out = pd.concat(parts, ignore_index=True)
    out.insert(0, "rank", np.arange(1, len(out) + 1))
    out = out[columns]
    out.attrs.update(
        reason="" if len(out) else NO_OP_TIME,
        device_type=env["device_type"] or "CPU",
        task_type=task_type(out["operation"], out["type"]),
        # XProf's open sources never set the flags its architecture guess reads.
        architecture_type="Unknown",
        notes=db.notes if db is not None and db.source == "gpu" else "",  # kernels run in CUDA graphs
    )
    return out
