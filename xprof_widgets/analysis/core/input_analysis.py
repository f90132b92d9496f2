"""XProf's input pipeline analyzer: step time, input share, tf.data host ops.

Follows XProf's `op_stats_to_input_pipeline_analysis.cc` for CPU-only and
generic (non-TPU) runs:

* **Steps** (`steps.host_steps`): one row a step with its breakdown (ms).
* **Input %**: total input time (waiting for input + host-to-device) over
  total step time, all kept steps; XProf's verdict: >= 20 % highly,
  >= 5 % moderately input-bound; else, if "all others" is >= 3 % of step time,
  potentially input-bound; else not input-bound.
* **Input ops**: host TF ops of the tf.data (`Iterator::...`), infeed enqueue
  and `MemcpyHToD` kinds over the whole capture, with count, total and self
  time (self: minus the directly nested TF ops on the same thread), sorted by
  self time. File reads: names ending `::TFRecord`, `::TextLine`,
  `::FixedLengthRecord`, `::SSTable`, `::RecordIO`, `::ArrayRecord`,
  "advanced" if also `::MemoryReader`, `::MemoryWriter`, `::Interleave`,
  `::Prefetch` or `::ParallelMap` in the name, else "demanded"; enqueue ops
  are "Enqueue"; the rest "Preprocessing".
* **Host breakdown** (µs): enqueue time, and the non-enqueue input time split
  in proportion to the self times of the categories (XProf's scaling: the
  non-enqueue time is enqueue * (1 - r) / r with r = host-to-device / step
  time, or the ops' own total when r is 0).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .cache import derived
from .intervals import children_time
from .planes import HOST_PLANE, has_tensor_cores
from .steps import STEP_COLUMNS, device_steps, host_steps
from .tpu_steps import SPARSE_CORE_COLUMNS, TPU_BREAKDOWN_LABELS, no_steps_reason, tpu_step_cores, tpu_step_table

#: XProf's thresholds (percent of step time).
HIGHLY_INPUT_BOUND_PERCENT = 20
MODERATELY_INPUT_BOUND_PERCENT = 5
MODERATELY_ALL_OTHERS_PERCENT = 3
HIGHLY_ALL_OTHERS_PERCENT = 15
MODERATELY_KERNEL_LAUNCH_PERCENT = 3
HIGHLY_KERNEL_LAUNCH_PERCENT = 15
MODERATELY_COLLECTIVES_PERCENT = 3
HIGHLY_COLLECTIVES_PERCENT = 15
MODERATELY_OUTPUT_BOUND_PERCENT = 5
HIGHLY_OUTPUT_BOUND_PERCENT = 20
#: TPU: TensorCore idle time (not waiting for input) worth a statement (%).
TC_IDLE_PERCENT = 3

NO_STEPS_REASON = (
    "no step markers: wrap each training step in "
    "jax.profiler.StepTraceAnnotation('train', step_num=i) (JAX) or "
    "tf.profiler.experimental.Trace('train', step_num=i, _r=1) (TensorFlow); "
    "Keras model.fit marks steps itself"
)

INPUT_OP_COLUMNS = ["op_name", "count", "time_us", "time_percent", "self_time_us", "self_time_percent", "category"]

_TF_OP = re.compile(r"^[A-Za-z0-9.][A-Za-z0-9_./>\-]*:[A-Z_][A-Za-z0-9_]*$")
_FILE_READ_ENDS = ("::TFRecord", "::TextLine", "::FixedLengthRecord", "::SSTable", "::RecordIO", "::ArrayRecord")
_ADVANCED_READ = ("::MemoryReader", "::MemoryWriter", "::Interleave", "::Prefetch", "::ParallelMap")


def _one_digit(x):
    return f"{x:.1f}"


@dataclass
class InputPipelineResult:
    """The input pipeline analysis of a run.

    steps: DataFrame, one row a step (see `steps.host_steps`): step_number,
        step_name, step_time_ms and the breakdown columns in ms.
    avg_step_time_ms, min_step_time_ms, max_step_time_ms, std_step_time_ms:
        step time summary (ms; std is the sample standard deviation).
    input_percent: % of the total step time spent on input (waiting for
        input + host-to-device), XProf's summary number.
    all_others_percent: % of the total step time covered by no event.
    host_breakdown_us: input time on the host by kind (µs): enqueue,
        preprocessing, advanced_file_read, demanded_file_read, unclassified.
    input_ops: DataFrame of host input ops (tf.data iterators, enqueue):
        op_name, count, time_us, time_percent, self_time_us,
        self_time_percent (of all input ops' self time), category.
    verdict: "host" (highly), "both" (moderately or potentially), "device"
        (not input-bound) or "unknown" (no steps).
    recommendation: XProf's conclusion and next step, in sentences.
    reason: empty when there are steps; else why there are none.
    tpu: on TPU runs with steps, XProf's TPU summary (None elsewhere): the average of each
        step-time column (`tc_compute_ms_average`, ..., `host_transfer_ms_average`,
        `tc_active_ms_average`, `active_steptime_ms_average`), `infeed_percent_*` (the
        average, minimum, maximum and standard deviation over the steps of each step's
        largest infeed share, %), `output_percent`, `tc_idle_percent`, `compute_percent` (of
        the summed step time, %), `input_statement`, `output_statement`, `tc_idle_statement`.
    """

    steps: pd.DataFrame
    avg_step_time_ms: float = 0.0
    min_step_time_ms: float = 0.0
    max_step_time_ms: float = 0.0
    std_step_time_ms: float = 0.0
    input_percent: float = 0.0
    all_others_percent: float = 0.0
    host_breakdown_us: dict = field(default_factory=dict)
    input_ops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=INPUT_OP_COLUMNS))
    verdict: str = "unknown"
    recommendation: str = ""
    reason: str = ""
    tpu: dict | None = None


def _input_op_kinds(names):
    """For distinct op names: (kind: "Enqueue", "Dataset" or "" (not an input op), True
    where the name is a TF op XProf's host op database keeps), one pass over the names."""
    kind = np.full(len(names), "", dtype=object)
    is_tf = np.zeros(len(names), dtype=bool)
    for i, n in enumerate(names):
        if n.startswith("Iterator::"):
            kind[i], is_tf[i] = "Dataset", True
            continue
        lower = n.lower()
        tf_op = _TF_OP.match(n) is not None
        is_tf[i] = tf_op or lower.startswith("memcpy")
        if lower.startswith("memcpyhtod") or (tf_op and n.rsplit(":", 1)[1].startswith("InfeedEnqueue")):
            kind[i] = "Enqueue"
    return kind, is_tf


def input_op_category(name):
    """XProf's input op category of a tf.data op name (see module doc)."""
    if name.endswith(_FILE_READ_ENDS):
        return "Advanced file read" if any(k in name for k in _ADVANCED_READ) else "Demanded file read"
    return "Preprocessing"


def host_input_ops(space) -> pd.DataFrame:
    """Host input ops of one host, summed over threads: op_name, kind
    ("Dataset" / "Enqueue"), count, time_ps, self_time_ps."""
    plane = next((p for p in space.planes if p.name == HOST_PLANE), None)
    parts = []
    per_names = {}  # the lines of a plane share its name table: classify each name once
    for _, line in plane.busy_lines if plane is not None else []:
        names = line.names()
        cats = np.asarray(names.categories, dtype=object)
        codes = np.asarray(names.codes)
        if id(names.categories) not in per_names:  # (the categories are kept: the key is their id)
            per_names[id(names.categories)] = (names.categories, *_input_op_kinds(cats))
        kind, is_tf = per_names[id(names.categories)][1:]
        if not (kind != "").any():
            continue
        tf = np.flatnonzero(is_tf[codes])
        begin = line.start_ps[tf]
        end = begin + line.event_duration_ps[tf]
        self_ps = (end - begin) - children_time(begin, end)
        k = kind[codes[tf]]
        keep = k != ""
        parts.append(
            pd.DataFrame(
                {
                    "op_name": cats[codes[tf][keep]],
                    "kind": k[keep],
                    "time_ps": (end - begin)[keep],
                    "self_time_ps": self_ps[keep],
                }
            )
        )
    if not parts:
        return pd.DataFrame(columns=["op_name", "kind", "count", "time_ps", "self_time_ps"])
    df = pd.concat(parts, ignore_index=True)
    return (
        df.groupby(["op_name", "kind"], sort=False)
        .agg(count=("time_ps", "size"), time_ps=("time_ps", "sum"), self_time_ps=("self_time_ps", "sum"))
        .reset_index()
    )


def _summary(values):
    if not len(values):
        return 0.0, 0.0, 0.0, 0.0
    std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0  # XProf: 0 for a single step
    return float(np.mean(values)), float(np.min(values)), float(np.max(values)), std


def _verdict(input_pct, all_others_pct, tf_data_used):
    """(verdict, conclusion, next step, all-others already reported)."""
    if input_pct >= HIGHLY_INPUT_BOUND_PERCENT:
        v, text, reported = (
            "host",
            (
                f"Your program is HIGHLY input-bound because {_one_digit(input_pct)}% of the total step "
                "time sampled is waiting for input. Therefore, you should first focus on reducing the "
                "input time."
            ),
            False,
        )
    elif input_pct >= MODERATELY_INPUT_BOUND_PERCENT:
        v, text, reported = (
            "both",
            (
                f"Your program is MODERATELY input-bound because {_one_digit(input_pct)}% of the total "
                "step time sampled is waiting for input. Therefore, you would need to reduce both the "
                "input time and other time."
            ),
            False,
        )
    elif all_others_pct >= MODERATELY_ALL_OTHERS_PERCENT:
        v, text, reported = (
            "both",
            (
                f"Your program is POTENTIALLY input-bound because {_one_digit(all_others_pct)}% of the "
                "total step time sampled is spent on 'All Others' time (which could be due to I/O or "
                "Python execution or both)."
            ),
            True,
        )
    else:
        v, text, reported = (
            "device",
            (
                f"Your program is NOT input-bound because only {_one_digit(input_pct)}% of the total "
                "step time sampled is waiting for input. Therefore, you should focus on reducing other "
                "time."
            ),
            False,
        )
    if v in ("host", "both"):
        nxt = (
            "Look at the input ops below for the breakdown of input time on the host."
            if tf_data_used
            else "Consider using the tf.data API to enable profiler's host-side analysis for input "
            "pipeline. Profiler currently does not support custom input pipeline (ignore the "
            "input op table)."
        )
    else:
        nxt = "You may skip the rest of this page."
    return v, text, nxt, reported


def _level_statement(pct, moderate, high, what):
    if pct >= moderate:
        return f"{_one_digit(pct)} % of the total step time sampled is spent on '{what}'."
    return ""


def analyze_input_pipeline(steps: pd.DataFrame, ops: pd.DataFrame) -> InputPipelineResult:
    """The analysis from a step table (`steps.host_steps`) and host input ops
    (`host_input_ops`)."""
    ops = ops.copy()
    ops["category"] = np.where(ops["kind"] == "Enqueue", "Enqueue", [input_op_category(n) for n in ops["op_name"]])
    ops = ops.sort_values("self_time_ps", ascending=False, kind="stable").reset_index(drop=True)
    total_self = float(ops["self_time_ps"].sum())
    input_ops = pd.DataFrame(
        {
            "op_name": ops["op_name"].astype(str),
            "count": ops["count"].astype(np.int64),
            "time_us": ops["time_ps"].to_numpy(np.float64) / 1e6,
            "time_percent": 100.0 * ops["time_ps"].to_numpy(np.float64) / total_self if total_self else 0.0,
            "self_time_us": ops["self_time_ps"].to_numpy(np.float64) / 1e6,
            "self_time_percent": (100.0 * ops["self_time_ps"].to_numpy(np.float64) / total_self if total_self else 0.0),
            "category": ops["category"].astype(str),
        },
        columns=INPUT_OP_COLUMNS,
    )

    avg, lo, hi, std = _summary(steps["step_time_ms"].to_numpy(np.float64))
    by_cat = input_ops.groupby("category")["self_time_us"].sum()
    enqueue = float(by_cat.get("Enqueue", 0.0))
    demanded = float(by_cat.get("Demanded file read", 0.0))
    advanced = float(by_cat.get("Advanced file read", 0.0))
    prep = float(by_cat.get("Preprocessing", 0.0))
    total_non_enqueue = demanded + advanced + prep
    ratio = min(1.0, float(steps["host_to_device_ms"].mean()) / avg) if avg > 0 else 0.0
    non_enqueue = enqueue * (1 - ratio) / ratio if ratio else total_non_enqueue
    scale = non_enqueue / total_non_enqueue if total_non_enqueue else 0.0
    host = {
        "enqueue": enqueue,
        "preprocessing": prep * scale,
        "advanced_file_read": advanced * scale,
        "demanded_file_read": demanded * scale,
    }
    host["unclassified"] = max(
        0.0, non_enqueue - host["preprocessing"] - host["advanced_file_read"] - host["demanded_file_read"]
    )
    if input_ops.empty:
        host = {k: 0.0 for k in host}
    tf_data_used = total_non_enqueue > 0

    total_step = float(steps["step_time_ms"].sum())
    if total_step == 0:
        return InputPipelineResult(
            steps=steps,
            host_breakdown_us=host,
            input_ops=input_ops,
            verdict="unknown",
            recommendation="No step time measured. Therefore we cannot tell where the performance bottleneck is.",
            reason=NO_STEPS_REASON,
        )
    pct = {
        c: 100.0 * float(steps[c].sum()) / total_step
        for c in ("input_ms", "all_others_ms", "kernel_launch_ms", "device_collectives_ms")
    }
    verdict, text, nxt, reported = _verdict(pct["input_ms"], pct["all_others_ms"], tf_data_used)
    extra = [
        _level_statement(
            pct["device_collectives_ms"],
            MODERATELY_COLLECTIVES_PERCENT,
            HIGHLY_COLLECTIVES_PERCENT,
            "Device Collective Communication",
        ),
        _level_statement(
            pct["kernel_launch_ms"], MODERATELY_KERNEL_LAUNCH_PERCENT, HIGHLY_KERNEL_LAUNCH_PERCENT, "Kernel Launch"
        ),
    ]
    if not reported and pct["all_others_ms"] >= MODERATELY_ALL_OTHERS_PERCENT:
        extra.append(
            f"{_one_digit(pct['all_others_ms'])} % of the total step time sampled is spent "
            "on 'All Others' time. This could be due to Python execution overhead."
        )
    recommendation = " ".join([text, *[e for e in extra if e], nxt])
    return InputPipelineResult(
        steps=steps,
        avg_step_time_ms=avg,
        min_step_time_ms=lo,
        max_step_time_ms=hi,
        std_step_time_ms=std,
        input_percent=pct["input_ms"],
        all_others_percent=pct["all_others_ms"],
        host_breakdown_us=host,
        input_ops=input_ops,
        verdict=verdict,
        recommendation=recommendation,
    )


def _output_statement(pct):
    """XProf's output analysis (TPU): "" below 5 % of step time."""
    if pct >= HIGHLY_OUTPUT_BOUND_PERCENT:
        return (
            f"Your program is HIGHLY output-bound because {_one_digit(pct)}% of the total step time sampled "
            "is spent on output. Therefore, you should first focus on reducing the output time."
        )
    if pct >= MODERATELY_OUTPUT_BOUND_PERCENT:
        return (
            f"Your program is MODERATELY output-bound because {_one_digit(pct)}% of the total step time "
            "sampled is spent on output. Therefore, you would need to reduce both the output time and other time."
        )
    return ""


def analyze_tpu_input_pipeline(steps: pd.DataFrame, ops: pd.DataFrame) -> InputPipelineResult:
    """XProf's TPU input pipeline analysis (`ComputeTpuInputPipelineAnalysisResult`,
    `ComputeTpuBottleneckAnalysis`) from a TPU step table (`tpu_steps.tpu_step_table`) and the
    host input ops: input % = infeed time over step time summed over the steps (each step's
    time being the sum of its parts), XProf's verdict on it, its output and TensorCore-idle
    statements (every core profiled)."""
    res = analyze_input_pipeline(steps.assign(host_to_device_ms=0.0, **{c: 0.0 for c in _GENERIC_PARTS}), ops)
    res.steps = steps
    if steps.empty:
        return res

    def col(c):  # (with SparseCores XProf drops the SparseCoreV0 columns: 0)
        return steps[c].to_numpy(np.float64) if c in steps else np.zeros(len(steps))

    infeed = col("tc_infeed_ms") + col("scv0_infeed_ms")
    step_total = col("tc_compute_ms") + col("scv0_compute_ms") + infeed + col("tc_outfeed_ms") + col("tc_idle_ms")
    total = float(step_total.sum())
    averaged = [c for c in _TPU_AVERAGED if c in steps]
    if "sc_step_time_ms" in steps and col("sc_step_time_ms").min() > 0:  # (XProf: every step has some)
        averaged += SPARSE_CORE_COLUMNS
    summary: dict[str, float | str] = {f"{c[:-3]}_ms_average": float(col(c).mean()) for c in averaged}
    summary["steptime_ms_average"] = res.avg_step_time_ms
    summary["active_steptime_ms_average"] = summary.pop("active_step_time_ms_average")
    peak = col("infeed_percent_max")
    summary.update(
        {
            "infeed_percent_average": float(peak.mean()),
            "infeed_percent_minimum": float(peak.min()),
            "infeed_percent_maximum": float(peak.max()),
            "infeed_percent_standard_deviation": float(np.std(peak, ddof=1)) if len(peak) > 1 else 0.0,
        }
    )
    if total == 0:
        res.verdict, res.recommendation, res.tpu = "unknown", _NO_STEP_TIME, summary
        return res
    input_pct = 100.0 * float(infeed.sum()) / total
    output_pct = 100.0 * float(col("tc_outfeed_ms").sum()) / total
    idle_pct = 100.0 * float(col("tc_idle_ms").sum()) / total
    verdict, text, nxt, _ = _verdict(input_pct, 0.0, _tf_data_used(res))
    idle_text = (
        f"{idle_pct:.1f} % of the total step time sampled is due to host overhead that is not input-related. "
        "For TF 2.x, you may want to use a host-training loop (i.e. running multiple steps within a tf.function)."
        if idle_pct >= TC_IDLE_PERCENT
        else ""
    )
    output_text = _output_statement(output_pct)
    summary.update(
        {
            "input_percent": input_pct,
            "output_percent": output_pct,
            "tc_idle_percent": idle_pct,
            "compute_percent": max(0.0, 100.0 - input_pct - output_pct - idle_pct),
            "input_statement": text,
            "output_statement": output_text,
            "tc_idle_statement": idle_text,
        }
    )
    res.input_percent, res.all_others_percent = input_pct, 0.0
    res.verdict, res.tpu = verdict, summary
    res.recommendation = " ".join(t for t in (text, output_text, idle_text, nxt) if t)
    return res


#: The generic breakdown columns the shared summary reads, 0 on TPU steps.
_GENERIC_PARTS = ("input_ms", "all_others_ms", "kernel_launch_ms", "device_collectives_ms")
#: TPU step columns XProf averages into its summary: its step-time graph's, and active time.
_TPU_AVERAGED = (*TPU_BREAKDOWN_LABELS, "tc_active_ms", "active_step_time_ms")
_NO_STEP_TIME = "No step time measured. Therefore we cannot tell where the performance bottleneck is."


def _tf_data_used(res):
    """Whether the host breakdown has tf.data input time (XProf's `TfDataInUse`)."""
    h = res.host_breakdown_us
    return any(h.get(k, 0.0) > 0 for k in ("preprocessing", "advanced_file_read", "demanded_file_read"))


def is_tpu_step_table(steps) -> bool:
    """Whether a step table is XProf's TPU one (`tpu_steps.tpu_step_table`)."""
    return "tc_compute_ms" in steps.columns


def host_step_table(space):
    """(steps, reason): the steps XProf's input pipeline reads of one file. With a GPU, the
    device steps; else the host steps of a CPU-only host; a host with a device and no
    device steps has none, and the reason says why ("" otherwise).

    Computed once per file (the overview and the input pipeline both read it; on millions
    of events it takes seconds); each call gets its own copy of the small table.
    """
    steps, reason = derived(space, "host_step_table", lambda: _host_step_table(space))
    return steps.copy(), reason


def _host_step_table(space):
    if has_tensor_cores(space):
        steps = tpu_step_table(tpu_step_cores(space))  # XProf's TPU steps: the TensorCores'
        return steps, "" if len(steps) else no_steps_reason(space)
    if any(p.name.startswith("/device:GPU") for p in space.planes):
        gpu_steps = device_steps(space)  # with a GPU, XProf's steps are the device's
        if len(gpu_steps):
            return gpu_steps, ""
    steps = host_steps(space)
    if any(p.name.startswith(("/device:GPU", "/device:TPU")) for p in space.planes):
        why = "device (GPU/TPU) step analysis is not implemented yet; input ops only" if len(steps) else NO_STEPS_REASON
        return pd.DataFrame(columns=STEP_COLUMNS), why
    return steps, ""


def merge_input_ops(frames):
    """Input op tables (`host_input_ops` of several files, or merged ones) as one: count,
    time_ps and self_time_ps summed per (op_name, kind), in first-seen order."""
    frames = [f for f in frames if f is not None]
    full = [f for f in frames if len(f)]
    if not full:  # (an empty table keeps its columns)
        return frames[0] if frames else pd.DataFrame()
    ops = pd.concat(full, ignore_index=True)
    return ops.groupby(["op_name", "kind"], sort=False)[["count", "time_ps", "self_time_ps"]].sum().reset_index()
