"""XProf's overview page: run environment, step time, top device ops, verdict.

Follows XProf's `op_stats_to_overview_page.cc` (with `xplane_to_op_stats.cc`
for the run environment and the TPU duty cycle):

* **Run environment**: host count = distinct host names over the run's
  files (a file without one counts as one unnamed host); device type = the
  TPU's `device_type_string`, for GPUs the model XProf names from the plane's
  vendor and capability ("AMD GPU - gfx942", "Nvidia GPU (Hopper)"; "GPU" without
  a vendor, `gpu_device.gpu_model_name`), else "CPU"; device core
  count = device planes summed over files (0 on CPU).
* **Steps and step time**: the input pipeline's step table
  (`input_pipeline.input_pipeline`), so both pages agree.
* **Top ops**: the device ops grouped by framework op (TF op name, or JAX
  op path; an op without one keeps its HLO name and category "Unknown"),
  the 10 with the most self time; fractions are of the summed op self time
  (idle excluded), FLOP rate = FLOPs / total time. CPU-only runs have no
  device ops: XProf shows an empty table, and so do we.
* **Op placement**: host / device share of the *number* of framework op
  executions (XProf's "Host TF op %", "Device TF op %"): on the host, the
  executions in XProf's host op database (`host_op_metrics`: framework ops on
  the host threads, less those its op stack drops); on TPUs, per framework op
  the most executions of its HLO ops; on GPUs, the same over XProf's GPU op
  database (`gpu_device_ops`).
* **Duty cycle (TPU)**: per core, busy = union of the "XLA Ops" events that
  are not off-duty (infeed, outfeed, host send/recv, megacore fusion), span =
  first to last event of "XLA Ops" and "XLA Modules"; summed over cores.
  Device idle % = 1 - op self time / device time.
* **Recommendation**: the input pipeline verdict, then XProf's precision and
  eager statements where they apply.

* **Eager execution**: the share of op self time in eagerly executed ops, on the
  host (XProf's host op database: framework ops on the host threads, self time
  less nested framework ops) and on the device (its TF-op database of GPU ops);
  an op is eager as XProf's grouping marks it (`grouping.eager_events`: under an
  `EagerExecute` whose `is_func` is 0). Above 10 % the recommendation says so.

* **Precision (GPU)**: 16-bit share of the steps' non-overlapped device
  compute time (a kernel is 16-bit by its tensor shapes, else its name).

* **Inference latency** (`core.inference`): XProf's table of the requests' latency
  breakdown by percentile, on runs that train nothing.

* **Module latency** (ours; XProf's inference latency table needs request markers
  and is empty on every reference): per XLA module, the run-time
  spread of its executions on the device "XLA Modules" lines (count, mean,
  p50/p90/p99, max). For a run without steps (inference, serving) it is
  the latency users ask about.

* **TPU steps** (`core.tpu_steps`): the TensorCores' `Steps` lines, each step's TensorCore
  compute, input, output, idle and host transfer time as XProf's TPU step table, and its
  averages (`tpu`); where XProf's unsigned arithmetic shows a step's compute as 0 we show
  the right value.

Not reimplemented: roofline utilisation over TPU steps, power and XProf's session latency.
Times are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .core.inference import LATENCY_COLUMNS as INFERENCE_COLUMNS
from .core.inference import inference_latency
from .core.op_stats import device_framework_ops
from .core.run_stats import RunStats, as_stats, input_pipeline_result
from .core.runlike import RunLike
from .core.tpu_steps import TPU_BREAKDOWN_LABELS

TOP_OPS_SHOWN = 10
#: Below this share of 16-bit device compute XProf suggests more 16-bit ops (%).
LOW_PRECISION_PERCENT = 10
#: Above this share of eager op time XProf suggests tf.function (%).
EAGER_REPORT_PERCENT = 10

TOP_OP_COLUMNS = [
    "operation",
    "category",
    "self_time_ps",
    "self_time_fraction",
    "cumulative_time_fraction",
    "time_ps",
    "flops",
    "flop_rate_gflops",
    "occurrences",
]

LATENCY_COLUMNS = ["module", "executions", "mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"]


@dataclass
class OverviewResult:
    """The overview page of a run.

    host_count, device_type ("CPU", "GPU", "TPU v6 Lite", ...),
    device_core_count (0 on CPU), is_training (an XLA program of the run computes a
    gradient, XProf's rule): the run environment.
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
    host_op_time_eager_percent, device_op_time_eager_percent: share of op self
        time in eagerly executed framework ops on the host / on the device (%;
        see `eager_percents`).
    precision: {"16bit_percent", "32bit_percent"} of the steps' device compute time
        on GPUs (both 0.0 without steps, as XProf shows), None on TPUs and CPUs.
    device_duty_cycle_percent, device_idle_percent, host_idle_percent: TPU
        only (%), else None.
    input_percent: % of step time waiting for input (input pipeline).
    bottleneck: "host", "both", "device" or "unknown" (XProf's verdict).
    recommendation: XProf's statements, in sentences with the numbers.
    reason: empty when there are steps; else why there are none.
    module_latency: DataFrame, one row per XLA module run on a device
        (module, executions, mean_ms, p50_ms, p90_ms, p99_ms, max_ms), the
        most total time first; empty where no device plane has "XLA Modules".
    notes: on GPUs, what became of the kernels run in CUDA graphs (whose ops the top ops
        and op placement count or not: `command_buffers`), else "".
    inference_latency: XProf's "Inference Session Latency Breakdown" (`core.inference`): rows
        "Avg", "50.0%", "75.0%", "90.0%", "99.0%", "99.9%" of the requests' host_ms, device_ms,
        communication_ms and total_ms; empty on a run without requests or that trains.
    mxu_utilization_percent, hbm_utilization_percent: TPU only (else None): the TPU runtime's
        matrix-unit and HBM utilisation (host plane stats), the mean over hosts as XProf 2.24.2
        combines them.
    tpu: on TPU runs with steps, XProf's TPU step summary (`InputPipelineResult.tpu`: the
        average of each TPU step column, the infeed shares, the TensorCore idle and output
        statements), else None. The TPU step columns themselves are in `steps`.
    """

    host_count: int
    device_type: str
    device_core_count: int
    steps: pd.DataFrame
    is_training: bool = False
    avg_step_time_ms: float = 0.0
    min_step_time_ms: float = 0.0
    max_step_time_ms: float = 0.0
    std_step_time_ms: float = 0.0
    top_ops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TOP_OP_COLUMNS))
    op_placement: dict = field(default_factory=dict)
    host_op_time_eager_percent: float = 0.0
    device_op_time_eager_percent: float = 0.0
    precision: dict | None = None
    device_duty_cycle_percent: float | None = None
    device_idle_percent: float | None = None
    host_idle_percent: float | None = None
    input_percent: float = 0.0
    bottleneck: str = "unknown"
    recommendation: str = ""
    reason: str = ""
    module_latency: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=LATENCY_COLUMNS))
    notes: str = ""
    tpu: dict | None = None
    inference_latency: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=INFERENCE_COLUMNS))
    mxu_utilization_percent: float | None = None
    hbm_utilization_percent: float | None = None

    def step_time_components(self) -> pd.DataFrame:
        """XProf's performance summary of the step time: per component of the breakdown
        (index: XProf's field name, e.g. "device_compute_time"), its label, the steps'
        column, avg_ms and sdv_ms (the sample standard deviation over the steps; NaN with a
        single step, where it is undefined: XProf prints "-nan" for the components that are
        zero, 0.0 for the others). Empty without steps."""
        return step_time_components(self.steps)


#: XProf's step-time components (overview_page.json `<field>_ms_avg/_sdv`): (field, label,
#: column of `steps`), in the order its performance summary lists them.
STEP_TIME_COMPONENTS = (
    ("compile_time", "Compilation", "compilation_ms"),
    ("infeed_time", "Input", "input_ms"),
    ("outfeed_time", "Output", "output_ms"),
    ("kernel_launch_time", "Kernel launch", "kernel_launch_ms"),
    ("host_compute_time", "Host compute", "host_compute_ms"),
    ("device_collectives_time", "Device collective communication", "device_collectives_ms"),
    ("device_to_device_time", "Device to device", "device_to_device_ms"),
    ("device_compute_time", "Device compute", "device_compute_ms"),
    ("other_time", "All others", "all_others_ms"),
)


#: The same for TPU steps (XProf's TPU step-time graph: `tpu_steps.TPU_BREAKDOWN_LABELS`).
TPU_STEP_TIME_COMPONENTS = tuple((c[:-3], label, c) for c, label in TPU_BREAKDOWN_LABELS.items()) + (
    # With SparseCore planes (XProf's overview: their step time, idle and busy time).
    ("sc_step_time", "SparseCore step time", "sc_step_time_ms"),
    ("sc_compute", "SparseCore compute", "sc_compute_ms"),
    ("sc_idle", "SparseCore idle", "sc_idle_ms"),
    ("sc_active", "SparseCore busy", "sc_active_ms"),
)


def step_time_components(steps: pd.DataFrame) -> pd.DataFrame:
    """See `OverviewResult.step_time_components`."""
    rows = []
    parts = TPU_STEP_TIME_COMPONENTS if "tc_compute_ms" in steps.columns else STEP_TIME_COMPONENTS
    for name, label, column in parts:
        if steps.empty or column not in steps:
            continue
        values = steps[column].to_numpy(np.float64)
        sdv = float(np.std(values, ddof=1)) if len(values) > 1 else float("nan")
        rows.append({"component": name, "label": label, "column": column, "avg_ms": values.mean(), "sdv_ms": sdv})
    return pd.DataFrame(rows, columns=["component", "label", "column", "avg_ms", "sdv_ms"]).set_index("component")


# The overview's fields that are the input pipeline's (`input_pipeline`), unchanged.
_FROM_INPUT_PIPELINE = (
    "steps avg_step_time_ms min_step_time_ms max_step_time_ms std_step_time_ms input_percent reason tpu".split()
)


def top_device_ops(db, n=TOP_OPS_SHOWN) -> pd.DataFrame:
    """The top `n` framework ops by device self time (see `OverviewResult`)
    from a `op_stats.DeviceOpMetrics`."""
    ops = db.ops[db.ops["occurrences"] > 0]
    if ops.empty:
        return pd.DataFrame(columns=TOP_OP_COLUMNS)
    tf = device_framework_ops(ops).rename(columns={"name": "operation", "type": "category"})
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


def _eager_share(ops, time):
    if ops.empty:
        return 0.0
    return _pct(float(ops.loc[ops["is_eager"].astype(bool), time].sum()), float(ops[time].sum()))


def eager_percents(stats: RunStats) -> tuple[float, float]:
    """(host, device) % of op self time in eagerly executed ops, as XProf's overview.

    Host: eager self time / self time over the framework ops of the host op database
    (`RunStats.host_ops`; an op counts as eager when any of its executions, on any thread
    or host, is). Device: the same over the GPU TF-op database (`RunStats.gpu_tf_ops`, per
    TF op the eager mark of its last device op in database order, as XProf's
    `CreateTfMetricsDbFromDeviceOpMetricsDb`); 0 where there are no GPU ops (TPU ops carry
    no eager mark; CPU runs have no device ops).
    """
    return _eager_share(stats.host_ops, "self_time_ps"), _eager_share(stats.gpu_tf_ops, "time_ps")


def eager_recommendation(host_percent, device_percent):
    """XProf's eager statement (`EagerRecommendationHtml`): "" below the threshold."""
    text = ""
    if host_percent > EAGER_REPORT_PERCENT:
        text += f"{host_percent:.1f}% of Op time on the host used eager execution. "
    if device_percent > EAGER_REPORT_PERCENT:
        text += f"{device_percent:.1f}% of Op time on the device used eager execution. "
    if text:
        text += "Performance could be improved with tf.function."
    return text


def executions_latency(frames) -> pd.DataFrame:
    """`latency_table` of module executions (`module_executions` of several files)."""
    frames = [f for f in frames if len(f)]
    if not frames:
        return pd.DataFrame(columns=LATENCY_COLUMNS)
    df = pd.concat(frames, ignore_index=True)
    df["ms"] = df["ms"].astype(np.float64)
    return latency_table(df)


def latency_table(df) -> pd.DataFrame:
    """The module latency table of module executions (`module`, `ms`): one row per module,
    the most total time first."""
    g = df.groupby("module", sort=False)["ms"]
    out = pd.DataFrame(
        {
            "executions": g.size(),
            "mean_ms": g.mean(),
            "p50_ms": g.quantile(0.5),
            "p90_ms": g.quantile(0.9),
            "p99_ms": g.quantile(0.99),
            "max_ms": g.max(),
            "total": g.sum(),
        }
    )
    out = out.sort_values("total", ascending=False, kind="stable").drop(columns="total")
    return out.reset_index()[LATENCY_COLUMNS]


def _pct(a, b):
    return 100.0 * a / b if b else 0.0


def overview(source: RunStats | RunLike) -> OverviewResult:
    """XProf's overview page (see `OverviewResult`; module doc for how each number is
    computed) of a run's statistics (`core.run_stats.RunStats`; a run: its stats read in
    this process). Steps come from the stats' step database (one host's, or the steps all
    hosts share), everything else from all hosts."""
    stats = as_stats(source)
    stats.build_ahead("host_op_db")  # (while the steps and the device's op database are built)
    return assemble_overview(
        input_pipeline_result(stats),
        stats.op_metrics,
        hostnames=set(stats.hostnames),
        device=stats.device,
        host_ops=stats.host_ops,
        gpu_ops=stats.gpu_tf_ops,
        duty_cycles=stats.duty_cycles if stats.has_tpu else None,
        has_gpu=stats.has_gpu,
        latency=executions_latency([stats.module_ms]),
        is_training=stats.is_training,
        inference=inference_latency(stats.requests) if not stats.is_training else None,
        utilization=(
            (float(np.mean([h.mxu_percent for h in stats.hosts])), float(np.mean([h.hbm_percent for h in stats.hosts])))
            if stats.has_tpu
            else None
        ),
    )


def assemble_overview(
    ip,
    db,
    *,
    hostnames,
    device,
    host_ops,
    gpu_ops,
    duty_cycles,
    has_gpu,
    latency,
    is_training=False,
    inference=None,
    utilization=None,
) -> OverviewResult:
    """The overview page from its parts: the input pipeline result
    `ip`, the device op metrics `db`, the distinct `hostnames`, `device` (type, cores),
    the host op database `host_ops` (by name: occurrences, self_time_ps, is_eager), the
    GPU TF-op database `gpu_ops` (occurrences, time_ps, is_eager), each host's TPU duty
    cycle `(busy_ps, idle_ps)` (None without TPUs), whether any host has GPUs, and the
    module latency table."""
    on_device = not db.empty and db.source in ("tpu", "gpu")
    top = top_device_ops(db) if on_device else pd.DataFrame(columns=TOP_OP_COLUMNS)
    # Op counts as XProf's: host op database; TPU: HLO ops by framework op; GPU: its TF-op database.
    n_dev = device_framework_op_count(db) if on_device and db.source == "tpu" else int(gpu_ops["occurrences"].sum())
    n_host = int(host_ops["occurrences"].sum()) if len(host_ops) else 0
    placement = {"host_percent": _pct(n_host, n_host + n_dev), "device_percent": _pct(n_dev, n_host + n_dev)}

    duty = dev_idle = host_idle = None
    if duty_cycles is not None:
        busy, idle = sum(b for b, _ in duty_cycles), sum(i for _, i in duty_cycles)
        duty = _pct(busy, busy + idle)
        dev_idle = 100.0 * (1 - db.total_op_time_ps / db.total_time_ps) if db.total_time_ps else 0.0
        # XProf's host op database carries no op time: its idle ratio is 1.
        host_idle = 100.0

    host_eager, device_eager = _eager_share(host_ops, "self_time_ps"), _eager_share(gpu_ops, "time_ps")
    recommendation = " ".join(t for t in (ip.recommendation, eager_recommendation(host_eager, device_eager)) if t)
    precision = None
    steps = ip.steps
    if has_gpu:
        # XProf: the share of the steps' non-overlapped device compute time in 16-bit
        # kernels; 0.0 % / 0.0 % when no step has device compute (no step markers).
        c16 = c32 = 0.0
        if len(steps) and "device_compute_16bit_ms" in steps:
            c16, c32 = float(steps["device_compute_16bit_ms"].sum()), float(steps["device_compute_32bit_ms"].sum())
        total = c16 + c32
        precision = {
            "16bit_percent": 100 * c16 / total if total else 0.0,
            "32bit_percent": 100 * c32 / total if total else 0.0,
        }
    kind, cores = device
    return OverviewResult(
        **{name: getattr(ip, name) for name in _FROM_INPUT_PIPELINE},
        host_count=len(hostnames),
        device_type=kind,
        device_core_count=cores,
        is_training=is_training,
        top_ops=top,
        op_placement=placement,
        host_op_time_eager_percent=host_eager,
        device_op_time_eager_percent=device_eager,
        precision=precision,
        device_duty_cycle_percent=duty,
        device_idle_percent=dev_idle,
        host_idle_percent=host_idle,
        bottleneck=ip.verdict,
        recommendation=recommendation,
        module_latency=latency,
        notes=db.notes if on_device and db.source == "gpu" else "",
        inference_latency=inference if inference is not None else pd.DataFrame(columns=INFERENCE_COLUMNS),
        mxu_utilization_percent=utilization[0] if utilization else None,
        hbm_utilization_percent=utilization[1] if utilization else None,
    )
