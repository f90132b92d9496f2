"""XProf's overview page: run environment, step time, top device ops, verdict.

Follows XProf's `op_stats_to_overview_page.cc` (with `xplane_to_op_stats.cc`
for the run environment and the TPU duty cycle):

* **Run environment**: host count = distinct host names over the run's
  files (a file without one counts as one unnamed host); device type = the
  TPU's `device_type_string`, "GPU" for GPU planes (XProf names the model only
  when the plane says the vendor; see `_device_type`), else "CPU"; device core
  count = device planes summed over files (0 on CPU).
* **Steps and step time**: the input pipeline's step table
  (`input_pipeline.input_pipeline`), so both pages agree.
* **Top ops**: the device ops grouped by framework op (TF op name, or JAX
  op path; an op without one keeps its HLO name and category "Unknown"),
  the 10 with the most self time; fractions are of the summed op self time
  (idle excluded), FLOP rate = FLOPs / total time. CPU-only runs have no
  device ops: XProf shows an empty table, and so do we.
* **Op placement**: host / device share of the *number* of framework op
  executions (XProf's "Host TF op %", "Device TF op %").
* **Duty cycle (TPU)**: per core, busy = union of the "XLA Ops" events that
  are not off-duty (infeed, outfeed, host send/recv, megacore fusion), span =
  first to last event of "XLA Ops" and "XLA Modules"; summed over cores.
  Device idle % = 1 - op self time / device time.
* **Recommendation**: the input pipeline verdict, then XProf's precision and
  eager statements where they apply.

* **Precision (GPU)**: 16-bit share of the steps' non-overlapped device
  compute time (a kernel is 16-bit by its tensor shapes, else its name).

* **Module latency** (ours; XProf's inference latency table needs serving
  sessions and is empty on every reference): per XLA module, the run-time
  spread of its executions on the device "XLA Modules" lines (count, mean,
  p50/p90/p99, max). For a run without steps (inference, serving) it is
  the latency users ask about.

Not reimplemented: TPU steps and roofline utilisation (needs complete TPU
steps; 0 in the references), power and XProf's session latency.
Times are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .input_pipeline import input_pipeline
from .op_stats import device_op_metrics

TOP_OPS_SHOWN = 10
#: Below this share of 16-bit device compute XProf suggests more 16-bit ops (%).
LOW_PRECISION_PERCENT = 10
#: Above this share of eager op time XProf suggests tf.function (%).
EAGER_REPORT_PERCENT = 10

TOP_OP_COLUMNS = ["operation", "category", "self_time_ps", "self_time_fraction",
                  "cumulative_time_fraction", "time_ps", "flops", "flop_rate_gflops", "occurrences"]

LATENCY_COLUMNS = ["module", "executions", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"]

_OFF_DUTY = {"infeed", "outfeed", "host send", "host send done", "host recv", "host recv done",
             "megacore fusion"}
_TF_OP = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_./>\-]*:[A-Z_][A-Za-z0-9_]*$")
_JAX_TYPE = re.compile(r"^[a-z_][a-z0-9_]*(\[.*\])?$")


@dataclass
class OverviewResult:
    """The overview page of a run.

    host_count, device_type ("CPU", "GPU", "TPU v6 Lite", ...),
    device_core_count (0 on CPU): the run environment.
    steps: DataFrame, one row a step, as `input_pipeline(run).steps`
        (step_time_ms and the breakdown columns, ms).
    avg_step_time_ms, min_step_time_ms, max_step_time_ms, std_step_time_ms:
        step time summary (ms; std is the sample standard deviation).
    top_ops: DataFrame, at most 10 rows by self time: operation, category,
        self_time_ps, self_time_fraction and cumulative_time_fraction (0-1, of
        all device op self time), time_ps, flops, flop_rate_gflops
        (GFLOP/s over the op's total time), occurrences. Empty on CPU runs.
    op_placement: {"host_percent", "device_percent"}: share of framework op
        executions on the host and on the device (%).
    precision: {"16bit_percent", "32bit_percent"} of device compute time, or
        None where not computed (no device compute, or GPU; see module doc).
    device_duty_cycle_percent, device_idle_percent, host_idle_percent: TPU
        only (%), else None.
    input_percent: % of step time waiting for input (input pipeline).
    bottleneck: "host", "both", "device" or "unknown" (XProf's verdict).
    recommendation: XProf's statements, in sentences with the numbers.
    reason: empty when there are steps; else why there are none.
    module_latency: DataFrame, one row per XLA module run on a device
        (module, executions, mean_ms, p50_ms, p90_ms, p99_ms, max_ms), the
        most total time first; empty where no device plane has "XLA Modules".
    """

    host_count: int
    device_type: str
    device_core_count: int
    steps: pd.DataFrame
    avg_step_time_ms: float = 0.0
    min_step_time_ms: float = 0.0
    max_step_time_ms: float = 0.0
    std_step_time_ms: float = 0.0
    top_ops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TOP_OP_COLUMNS))
    op_placement: dict = field(default_factory=dict)
    precision: dict | None = None
    device_duty_cycle_percent: float | None = None
    device_idle_percent: float | None = None
    host_idle_percent: float | None = None
    input_percent: float = 0.0
    bottleneck: str = "unknown"
    recommendation: str = ""
    reason: str = ""
    module_latency: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LATENCY_COLUMNS))


def _device_planes(space, prefix):
    return [p for p in space.planes if p.name.startswith(prefix)]


def _tensor_core_planes(space):
    # Sparse cores are planes named "/device:TPU:N SparseCore M"; XProf counts
    # tensor cores only.
    return [p for p in _device_planes(space, "/device:TPU:") if " " not in p.name]


def _device_type(spaces):
    """XProf's run environment device type and core count over all files."""
    kind, cores = "CPU", 0
    for space in spaces:
        gpu = _device_planes(space, "/device:GPU:")
        tpu = _tensor_core_planes(space)
        if gpu:
            # XProf names the model from the plane's `device_vendor`; without
            # it (as in older profiles) it says "GPU".
            vendor = gpu[0].stats.get("device_vendor")
            kind = "GPU" if not vendor else f"{vendor} GPU"
            cores += len(gpu)
        elif tpu:
            kind = str(tpu[0].stats.get("device_type_string", kind))
            cores += len(tpu)
    return kind, cores


def framework_op(provenance, hlo_name):
    """(name, category) of the framework op an HLO op comes from.

    TF ops `name:Type` give (name, Type); JAX paths `.../add` (with or without
    a trailing `:`) give (path, "add"); no provenance: (HLO name, "Unknown").
    Vectorised over distinct values by the caller. Arguments are str.
    """
    if not provenance:
        return hlo_name, "Unknown"
    name, _, kind = provenance.partition(":")
    if kind:
        return name, kind
    last = name.rsplit("/", 1)[-1]
    return name, (last if _JAX_TYPE.match(last) else "Unknown")


def top_device_ops(db, n=TOP_OPS_SHOWN) -> pd.DataFrame:
    """The top `n` framework ops by device self time (see `OverviewResult`)
    from a `op_stats.DeviceOpMetrics`."""
    ops = db.ops[db.ops["occurrences"] > 0]
    if ops.empty:
        return pd.DataFrame(columns=TOP_OP_COLUMNS)
    pairs = pd.Series(list(zip(ops["provenance"].astype(str), ops["name"].astype(str))))
    distinct = pairs.drop_duplicates()
    mapped = {p: framework_op(*p) for p in distinct}  # over distinct ops, not events
    key = [mapped[p] for p in pairs]
    df = pd.DataFrame({
        "operation": [k[0] for k in key], "category": [k[1] for k in key],
        "self_time_ps": ops["self_time_ps"].to_numpy(np.int64),
        "time_ps": ops["time_ps"].to_numpy(np.int64),
        "flops": ops["flops"].to_numpy(np.float64),
        "occurrences": ops["occurrences"].to_numpy(np.int64),
    })
    # A framework op's category is its first HLO op's; its count the largest.
    g = df.groupby("operation", sort=False)
    tf = g.agg(category=("category", "first"), self_time_ps=("self_time_ps", "sum"),
               time_ps=("time_ps", "sum"), flops=("flops", "sum"),
               occurrences=("occurrences", "max")).reset_index()
    total = float(db.total_op_time_ps) or float(tf["self_time_ps"].sum())
    order = np.lexsort((np.arange(len(tf)), -tf["self_time_ps"].to_numpy()))
    tf = tf.iloc[order[:n]].reset_index(drop=True)
    frac = tf["self_time_ps"].to_numpy(np.float64) / total if total else np.zeros(len(tf))
    t_ns = tf["time_ps"].to_numpy(np.float64) / 1e3
    rate = np.divide(tf["flops"].to_numpy(np.float64), t_ns, out=np.zeros(len(tf)), where=t_ns > 0)
    tf["self_time_fraction"] = frac
    tf["cumulative_time_fraction"] = np.cumsum(frac)
    tf["flop_rate_gflops"] = rate
    return tf[TOP_OP_COLUMNS]


def device_framework_op_count(db) -> int:
    """Executions of device framework ops: per framework op, the largest
    occurrence count of its HLO ops (XProf's convention), summed."""
    ops = db.ops[db.ops["occurrences"] > 0]
    if ops.empty:
        return 0
    tf = top_device_ops(db, n=len(ops))
    return int(tf["occurrences"].sum())


def _is_framework_op_name(name):
    """XProf's `ParseTfOpFullname` gives a known category: TF `name:Type`,
    JAX `scope/op:op`, `Iterator::...`, or a memcpy."""
    if name.lower().startswith("memcpy") or name.startswith("Iterator::"):
        return True
    if _TF_OP.match(name):
        return True
    scope, sep, kind = name.partition(":")
    return bool(sep and scope and _JAX_TYPE.match(kind) and kind.split("[")[0] in scope.rsplit("/", 1)[-1])


def host_framework_op_count(space) -> int:
    """Executions of framework ops on the host threads of one file, as XProf's
    host op database counts them: events named as a framework op (see
    `_is_framework_op_name`) plus events with a non-empty `tf_op` stat."""
    plane = space.plane("/host:CPU")
    if plane is None:
        return 0
    has_tf_op_stat = "tf_op" in plane.stat_names.values()
    total = 0
    for line in plane.lines:
        if not len(line):
            continue
        names = line.names()
        cats = np.asarray(names.categories, dtype=object)
        is_op = np.array([_is_framework_op_name(n) for n in cats], dtype=bool)  # distinct names
        codes = np.asarray(names.codes)
        total += int(is_op[codes[codes >= 0]].sum())
        if has_tf_op_stat:
            v = line.stats(names=["tf_op"]).get("tf_op")
            if v is not None:
                total += int((v.notna() & (v.astype(str) != "")).sum())
    return total


def _union_length(start, end):
    if not len(start):
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
    return int(np.clip(e - np.maximum(s, prev), 0, None).sum())


def tpu_duty_cycle(space):
    """(busy_ps, idle_ps) summed over the TPU tensor cores of one file."""
    busy = idle = 0
    for plane in _tensor_core_planes(space):
        lo, hi, parts = None, None, []
        for line in plane.lines:
            if line.name not in ("XLA Ops", "XLA Modules") or not len(line):
                continue
            start = line.start_ps
            end = start + line.event_duration_ps
            lo = start.min() if lo is None else min(lo, start.min())
            hi = end.max() if hi is None else max(hi, end.max())
            if line.name == "XLA Ops":
                cat = line.stats(names=["hlo_category"]).get("hlo_category")
                off = (np.isin(cat.astype(str).to_numpy(), list(_OFF_DUTY)) if cat is not None
                       else np.zeros(len(line), bool))
                parts.append((start[~off], end[~off]))
        if lo is None:
            continue
        active = _union_length(np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64),
                               np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64))
        busy += active
        idle += int(hi - lo) - active
    return busy, idle


def module_latency(spaces) -> pd.DataFrame:
    """Execution time spread of each XLA module over the device "XLA Modules" lines of all files."""
    names, durations = [], []
    for space in spaces:
        for plane in space.planes:
            if not plane.name.startswith("/device:"):
                continue
            for line in plane.lines:
                if line.name == "XLA Modules" and len(line):
                    names.append(np.asarray(line.names().astype(object)))
                    durations.append(line.event_duration_ps)
    if not names:
        return pd.DataFrame(columns=LATENCY_COLUMNS)
    df = pd.DataFrame({"module": np.concatenate(names), "ms": np.concatenate(durations) / 1e9})
    g = df.groupby("module", sort=False)["ms"]
    out = pd.DataFrame({
        "executions": g.size(), "mean_ms": g.mean(), "p50_ms": g.quantile(0.5), "p90_ms": g.quantile(0.9),
        "p99_ms": g.quantile(0.99), "max_ms": g.max(), "total": g.sum(),
    })
    out = out.sort_values("total", ascending=False, kind="stable").drop(columns="total")
    return out.reset_index()[LATENCY_COLUMNS]


def _pct(a, b):
    return 100.0 * a / b if b else 0.0


def overview(run, host=None) -> OverviewResult:
    """XProf's overview page of a run (see `OverviewResult`; module doc for
    how each number is computed). Steps come from `host` (default the first),
    everything else from all hosts."""
    spaces = [run.xspace(h) for h in run.hosts]
    hostnames = set()
    for s in spaces:
        hostnames.update(s.hostnames[:1] or [""])
    kind, cores = _device_type(spaces)
    ip = input_pipeline(run, host=host)

    db = device_op_metrics(run)
    on_device = not db.empty and db.source in ("tpu", "gpu")
    top = top_device_ops(db) if on_device else pd.DataFrame(columns=TOP_OP_COLUMNS)
    n_dev = device_framework_op_count(db) if on_device else 0
    n_host = sum(host_framework_op_count(s) for s in spaces)
    placement = {"host_percent": _pct(n_host, n_host + n_dev), "device_percent": _pct(n_dev, n_host + n_dev)}

    duty = dev_idle = host_idle = None
    if any(_tensor_core_planes(s) for s in spaces):
        busy = idle = 0
        for s in spaces:
            b, i = tpu_duty_cycle(s)
            busy, idle = busy + b, idle + i
        duty = _pct(busy, busy + idle)
        dev_idle = 100.0 * (1 - db.total_op_time_ps / db.total_time_ps) if db.total_time_ps else 0.0
        # XProf's host op database carries no op time: its idle ratio is 1.
        host_idle = 100.0

    recommendation = ip.recommendation
    precision = None
    steps = ip.steps
    if len(steps) and "device_compute_16bit_ms" in steps:
        # XProf: the share of non-overlapped device compute time in 16-bit kernels.
        c16, c32 = float(steps["device_compute_16bit_ms"].sum()), float(steps["device_compute_32bit_ms"].sum())
        if c16 + c32 > 0:
            precision = {"16bit_percent": 100 * c16 / (c16 + c32), "32bit_percent": 100 * c32 / (c16 + c32)}
    return OverviewResult(
        host_count=len(hostnames), device_type=kind, device_core_count=cores, steps=ip.steps,
        avg_step_time_ms=ip.avg_step_time_ms, min_step_time_ms=ip.min_step_time_ms,
        max_step_time_ms=ip.max_step_time_ms, std_step_time_ms=ip.std_step_time_ms,
        top_ops=top, op_placement=placement, precision=precision, device_duty_cycle_percent=duty,
        device_idle_percent=dev_idle, host_idle_percent=host_idle, input_percent=ip.input_percent,
        bottleneck=ip.verdict, recommendation=recommendation, reason=ip.reason,
        module_latency=module_latency(spaces))
