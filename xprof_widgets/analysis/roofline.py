"""The roofline model: XProf's roofline_model tool, from the device op statistics.

XProf (`op_stats_to_roofline_model.cc`, `op_metrics_to_record.h` `SetRooflineMetrics`,
`roofline_model_processor.cc`, `xplane_to_op_stats.cc` `GetPerfEnvFromXPlane`,
`op_stats_combiner.cc`) turns the device op database into rows:

* a "Program" row for the whole profile (step "Total"): the FLOPs and bytes of every op
  that is not a container (`call`, `conditional`, `while`, `megacore fusion`) over the
  devices' total time, idle included; then one row per op with executions, by self time
  (longest first, then name), at most 1000;
* a "Program" row per step ("Average" over complete steps, then each step's number):
  XProf fills these from per-step op databases that its GPU and step-less TPU paths
  leave empty, so they show zeros; "Average" is there for a TPU host and whenever
  several hosts are combined, the step rows for the steps of the run's step database
  (one host's step group ids; several hosts' steps aligned and numbered from 0);
* all of it twice: with infeed/outfeed ops (`include_infeed_outfeed` True), then
  without them (their time also leaves the totals).

Per row: rates over the row's total time (GFLOP/s, GiB/s), operational intensities
(FLOP/byte), the resource it is bound by (Compute, HBM, and on TPUs CMEM/VMEM, on GPUs
Shm/L1: the highest utilisation of the peaks) and the roofline efficiency (the highest
of the FLOP-rate and memory-bandwidth utilisations). The op statistics are the project's
(`op_stats.device_op_metrics`: XProf's TPU op database, and its GPU one with XLA's cost
model); peaks come from the first device plane as XProf's PerfEnv has them. A run with
no GPU or TPU (CPU only) has no roofline in XProf: the frame is empty and
`attrs["reason"]` says so.

Not reimplemented (the op statistics do not read these, and none of the corpus
profiles has them): TPU DMA stalls (`dma_stall_duration_ps`, so dma_stall_percent is 0),
DVFS time scaling (`time_scale_multiplier`), and the per-step op databases of TPU runs
with step markers (their step rows are left out and `attrs["notes"]` says so).
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from .core.intervals import safe_divide
from .core.records import GIBI_IN_GIGA, peak_bandwidth, roofline_metrics
from .core.run_stats import RunStats, as_stats
from .core.runlike import RunLike
from .core.steps import align_steps

IDLE = "IDLE"
_CONTAINERS = ("call", "conditional", "while", "megacore fusion")
MAX_RECORDS = 1000

# XProf's roofline columns (roofline_model.json): the same head and tail on GPU and TPU,
# the rates and intensities between them per memory the device has.
_HEAD = (
    "step rank category operation occurrences total_time avg_time total_self_time avg_self_time "
    "total_self_time_percent cumulative_total_self_time_percent"
).split()
_TAIL = [
    "bottleneck_operational_intensity",
    "bound_by",
    "total_time_per_core",
    "total_time_in_percentage",
    "optimal_flop_rate",
    "roofline_efficiency",
    "compute_efficiency",
    "max_mem_bw_utilization",
    "include_infeed_outfeed",
    "hlo_module_id",
    "source_info",
]
COLUMNS_GPU = (
    _HEAD
    + [
        "measured_flop_rate",
        "model_flop_rate",
        "measured_memory_bw",
        "hbm_bw",
        "vmem_write_bw",
        "operational_intensity",
        "hbm_operational_intensity",
        "vmem_write_operational_intensity",
    ]
    + _TAIL
)
COLUMNS_TPU = (
    _HEAD
    + [
        "dma_stall_percent",
        "measured_flop_rate",
        "model_flop_rate",
        "measured_memory_bw",
        "hbm_bw",
        "cmem_read_bw",
        "cmem_write_bw",
        "vmem_read_bw",
        "vmem_write_bw",
        "operational_intensity",
        "hbm_operational_intensity",
        "cmem_read_operational_intensity",
        "cmem_write_operational_intensity",
        "vmem_read_operational_intensity",
        "vmem_write_operational_intensity",
    ]
    + _TAIL
)
# The per-op costs a roofline point is made of (FLOPs, bytes by memory), summed over ops.
_COST_COLUMNS = (
    "flops",
    "model_flops",
    "bytes_accessed",
    "hbm_bytes",
    "cmem_read_bytes",
    "cmem_write_bytes",
    "vmem_read_bytes",
    "vmem_write_bytes",
)
NO_DEVICE = (
    "the profile has no GPU or TPU plane: XProf's roofline model is for accelerators "
    "(a CPU-only run has no device op statistics)"
)
NO_STEP_MARKER = (
    "No step marker observed and hence the step time is unknown. This may happen if (1) training "
    "steps are not instrumented (e.g., if you are not using Keras) or (2) the profiling duration is "
    "shorter than the step time. For (1), you need to add step instrumentation; for (2), you may try "
    "to profile longer."
)
EMPTY_INTERSECT = (
    "Although there are steps observed on some host(s), the intersection of the steps over all hosts "
    "is empty (because the differences among individual host's step sequences are too big). "
    "Consequently, the overall step time is unknown."
)


# --- steps as XProf's combined step database has them ------------------------------------


def step_rows(stats: RunStats):
    """(has the "Average" row, [step labels], notes) of the run's step database as XProf's
    combined OpStats has it: from each host's hardware and device step spans
    (`steps.device_step_spans`: None for a TPU host with a `Steps` line)."""
    kinds = [h.hardware for h in stats.hosts]
    host_steps = stats.step_spans
    if len(kinds) == 1:
        steps = host_steps[0]
        if steps is None:
            return True, [], "per-step rows of a TPU run with step markers are not reimplemented"
        return kinds[0] == "TPU", [str(s) for s in steps[0]], ""
    accel = any(k != "CPU" for k in kinds)
    hosts = []
    for steps, kind in zip(host_steps, kinds):
        if accel and kind == "CPU":
            continue  # a coordinator: XProf leaves it out of the intersection
        if steps is None:
            return True, [], "per-step rows of a TPU run with step markers are not reimplemented"
        hosts.append(steps)
    if not hosts:
        return True, [], ""
    spans = [(b, e) for _, b, e in hosts]
    durations = [int(e[e > b].max() - b[e > b].min()) if (e > b).any() else 0 for b, e in spans]
    chief = int(np.argmin(durations))
    if not len(spans[chief][0]):
        return True, [], ""
    begin, end = 0, 2**32 - 1
    for h, span in enumerate(spans):
        _, bc, n = (0, 0, len(span[0])) if h == chief else align_steps(span, spans[chief])
        begin, end = max(begin, bc), min(end, bc + n)
    if begin > end:
        return True, [], "empty_intersect"
    return True, [str(i) for i in range(end - begin)], ""


# --- records -------------------------------------------------------------------------------


def _is_infeed_outfeed(category):
    return category.str.contains("infeed", regex=False) | category.str.contains("outfeed", regex=False)


def _escape(text):
    """XProf's EscapeHtml: & < > " and ' (as &#39;)."""
    return html.escape(text, quote=True).replace("&#x27;", "&#39;")


def source_info_text(file, line, stack) -> str:
    """XProf's source cell (SourceInfoFormattedText): "" without a file or line."""
    if not file or line == -1:
        return ""
    return f"<div class='source-info-cell' title='{_escape(stack)}'>{_escape(file)}:{line}</div>"


def _records(ops, env, roof, total_time_ps, cores, include, step, num_steps=None, program_only=False):
    """XProf's ConvertOpMetricsDbToRooflineModelRecords: the Program row, then (unless
    `program_only`) one row per op with executions."""
    io = _is_infeed_outfeed(ops["category"])
    io_time = int(ops.loc[io, "time_ps"].sum()) if not include else 0
    total = total_time_ps - io_time
    inner = ops[~ops["category"].isin(_CONTAINERS) & (include | ~io)]
    program = pd.DataFrame(
        {
            "category": ["Program"],
            "name": ["Program"],
            "program_id": [0],
            "occurrences": [1],
            "time_ps": [total],
            "self_time_ps": [0],
            **{k: [float(inner[k].sum())] for k in _COST_COLUMNS},
            "has_breakdown": [bool(inner["has_breakdown"].any())],
            "dma_stall_ps": [0],
            "source_info": [""],
        }
    )
    rows = [program]
    if not program_only:
        # SortedOpMetricsDb: self time descending, then name; the top 1000, IDLE included.
        top = ops.iloc[np.lexsort((ops["name"].to_numpy(str), -ops["self_time_ps"].to_numpy(np.float64)))]
        top = top.iloc[:MAX_RECORDS]
        top = top[(top["occurrences"] > 0) & (include | ~_is_infeed_outfeed(top["category"]))]
        rows.append(top)
    rec = pd.concat(rows, ignore_index=True)
    occ = rec["occurrences"].to_numpy(np.float64)
    total_us = rec["time_ps"].to_numpy(np.float64) / 1e6
    self_us = rec["self_time_ps"].to_numpy(np.float64) / 1e6
    # The columns in a dict, one DataFrame at the end (a column inserted at a time costs a
    # block copy each: 40 of them, four times per model).
    out = {
        "step": np.full(len(rec), step, dtype=object),
        "rank": np.arange(len(rec)),
        "category": rec["category"].to_numpy(object),
        "operation": rec["name"].to_numpy(object),
        "occurrences": rec["occurrences"].to_numpy(np.int64),
    }
    if num_steps is not None:  # the average step: per-step totals
        total_us, self_us = safe_divide(total_us, num_steps), safe_divide(self_us, num_steps)
    out["total_time"] = total_us
    out["avg_time"] = safe_divide(rec["time_ps"].to_numpy(np.float64) / 1e6, occ)
    out["total_self_time"] = self_us
    out["avg_self_time"] = safe_divide(rec["self_time_ps"].to_numpy(np.float64) / 1e6, occ)
    frac = safe_divide(rec["self_time_ps"].to_numpy(np.float64) / 1e6, total / 1e6)
    frac[0] = 0.0
    out["total_self_time_percent"] = frac
    out["cumulative_total_self_time_percent"] = np.cumsum(frac)
    out["dma_stall_percent"] = safe_divide(
        rec["dma_stall_ps"].to_numpy(np.float64), rec["time_ps"].to_numpy(np.float64)
    )
    m = roofline_metrics(rec, env)
    out.update({c: m[c].to_numpy() for c in m.columns})
    out["total_time_per_core"] = safe_divide(total_us, cores)
    out["total_time_in_percentage"] = safe_divide(rec["time_ps"].to_numpy(np.float64), total)
    flops_util = safe_divide(out["measured_flop_rate"], roof["peak_flop_rate"])
    mem = [safe_divide(out["hbm_bw"], roof["peak_hbm_bw"])]
    if roof["has_cmem"]:
        mem += [
            safe_divide(out["cmem_read_bw"], roof["peak_cmem_read_bw"]),
            safe_divide(out["cmem_write_bw"], roof["peak_cmem_write_bw"]),
        ]
    if roof["has_merged_vmem"]:
        mem += [
            safe_divide(out["vmem_read_bw"], roof["peak_vmem_read_bw"]),
            safe_divide(out["vmem_write_bw"], roof["peak_vmem_write_bw"]),
        ]
    max_mem = np.max(mem, axis=0)
    efficiency = np.maximum(max_mem, flops_util)
    out["optimal_flop_rate"] = safe_divide(out["measured_flop_rate"], efficiency)
    out["roofline_efficiency"] = efficiency
    out["compute_efficiency"] = flops_util
    out["max_mem_bw_utilization"] = max_mem
    out["include_infeed_outfeed"] = np.full(len(rec), include)
    out["hlo_module_id"] = np.array([str(int(p)) for p in rec["program_id"]], dtype=object)
    out["source_info"] = rec["source_info"].to_numpy(object)
    return pd.DataFrame(out)


def _op_table(db):
    """The device op database as roofline rows need it (one row per HLO op, plus IDLE)."""
    ops = db.ops
    n = len(ops)

    def get(k, d=0):
        return ops[k] if k in ops else pd.Series(d, index=ops.index)

    table = pd.DataFrame(
        {
            "category": get("category", "").astype(str),
            "name": ops["name"].astype(str),
            "program_id": ops["program_id"].astype(object),
            "occurrences": get("occurrences").astype(np.int64),
            "time_ps": get("time_ps").astype(np.int64),
            "self_time_ps": get("self_time_ps").astype(np.int64),
            **{k: get(k).astype(np.float64) for k in _COST_COLUMNS},
            "has_breakdown": get("has_breakdown", False).astype(bool),
            "dma_stall_ps": 0,
            "normalized_time_ps": get("normalized_time_ps").astype(np.float64),
        }
    )
    table["source_info"] = _source_cells(ops) if n else pd.Series(dtype=object)
    idle = pd.DataFrame(
        {
            "category": [IDLE],
            "name": [IDLE],
            "program_id": [0],
            "occurrences": [0],
            "time_ps": [db.idle_time_ps],
            "self_time_ps": [db.idle_time_ps],
            "has_breakdown": [False],
            "dma_stall_ps": [0],
            "source_info": [""],
            "normalized_time_ps": [0.0],
        }
    )
    return pd.concat([table, idle], ignore_index=True).fillna(dict.fromkeys(_COST_COLUMNS, 0.0))


def _source_cells(ops):
    """XProf's source cell per op: GPU ops carry file, line and stack; TPU ops a `source`
    stat ("file:line") and a `source_stack`."""
    if "source_file" in ops:
        keys = zip(
            ops["source_file"].fillna("").astype(str),
            ops["source_line"].fillna(-1).astype(int),
            ops["stack_frame"].fillna("").astype(str),
        )
        return [source_info_text(*k) for k in keys]
    cells = []
    for src, stack in zip(
        ops.get("source", pd.Series([None] * len(ops))), ops.get("source_stack", pd.Series([None] * len(ops)))
    ):
        file, line = "", 0
        if isinstance(src, str) and ":" in src:
            f, _, ln = src.partition(":")
            try:
                file, line = f, int(ln)
            except ValueError:
                pass
        cells.append(source_info_text(file, line, stack if isinstance(stack, str) else ""))
    return cells


def roofs(env) -> dict:
    """The roofline database's roofs (GFLOP/s and GiB/s) and ridge points (FLOP/byte), as
    XProf's InitializeRooflineModelDatabaseFromOpStats and its table properties."""
    out = {
        "device_type": env["device_type"],
        "peak_flop_rate": env["peak_tflops"] * 1e3,
        "peak_hbm_bw": peak_bandwidth(env, 0) / GIBI_IN_GIGA,
        "megacore": False,
        "has_cmem": False,
        "has_merged_vmem": False,
        "peak_cmem_read_bw": 0.0,
        "peak_cmem_write_bw": 0.0,
        "peak_vmem_read_bw": 0.0,
        "peak_vmem_write_bw": 0.0,
    }
    if env["hardware"] == "TPU":
        out.update(megacore=env["has_megacore"], has_cmem=env["has_cmem"], has_merged_vmem=env["has_merged_vmem"])
        if out["has_cmem"]:
            out.update(
                peak_cmem_read_bw=peak_bandwidth(env, 3) / GIBI_IN_GIGA,
                peak_cmem_write_bw=peak_bandwidth(env, 4) / GIBI_IN_GIGA,
            )
        elif out["has_merged_vmem"]:
            out.update(
                peak_vmem_read_bw=peak_bandwidth(env, 5) / GIBI_IN_GIGA,
                peak_vmem_write_bw=peak_bandwidth(env, 6) / GIBI_IN_GIGA,
            )
    elif env["hardware"] == "GPU":
        out.update(
            has_merged_vmem=True,
            peak_vmem_read_bw=peak_bandwidth(env, 1) / GIBI_IN_GIGA,
            peak_vmem_write_bw=peak_bandwidth(env, 2) / GIBI_IN_GIGA,
        )

    def ridge(bw):
        return float(safe_divide(out["peak_flop_rate"], bw * GIBI_IN_GIGA))  # XProf's RidgePoint

    for k in ("hbm", "cmem_read", "cmem_write", "vmem_read", "vmem_write"):
        out[f"{k}_ridge_point"] = ridge(out[f"peak_{k}_bw"])
    return out


def _empty(reason, columns=COLUMNS_TPU):
    out = pd.DataFrame({c: pd.Series(dtype=object) for c in columns})
    out.attrs["reason"] = reason
    return out


def _no_device(env):
    out = _empty(NO_DEVICE)
    out.attrs.update(roofs(env), time_scale_multiplier=0.0, diagnostics=[], notes="")
    return out


def roofline_model(source: RunStats | RunLike) -> pd.DataFrame:
    """XProf's roofline model of a run's statistics (`core.run_stats.RunStats`; a run: its
    stats read in this process): one row per op and per step's program (see the
    module docstring), with infeed/outfeed ops and then without.

    Columns (XProf's; GPU runs have fewer, as XProf's GPU table): step ("Total",
    "Average" or a step number), rank, category, operation, occurrences, total_time,
    avg_time, total_self_time, avg_self_time (µs), total_self_time_percent and
    cumulative_total_self_time_percent (fractions 0-1 of the total time), dma_stall_percent
    (TPU), measured_flop_rate and model_flop_rate (GFLOP/s), measured_memory_bw, hbm_bw,
    cmem_read_bw, cmem_write_bw, vmem_read_bw, vmem_write_bw (GiB/s; on GPUs vmem_write_bw
    is shared memory/L1), operational intensities (FLOP/byte), bound_by, total_time_per_core
    (µs), total_time_in_percentage, optimal_flop_rate (GFLOP/s), roofline_efficiency,
    compute_efficiency, max_mem_bw_utilization (fractions), include_infeed_outfeed,
    hlo_module_id (program id, str), source_info (XProf's HTML cell: file:line, stack in
    its title).

    `attrs`: the roofs (`roofs`): device_type, peak_flop_rate (GFLOP/s), peak_hbm_bw,
    peak_cmem_read_bw, peak_cmem_write_bw, peak_vmem_read_bw, peak_vmem_write_bw (GiB/s),
    megacore, has_cmem, has_merged_vmem, the ridge points (FLOP/byte), and
    time_scale_multiplier; `diagnostics` ([(severity, message)]), `reason` (why it is
    empty), `notes` (what is not as XProf).
    """
    stats = as_stats(source)
    env = stats.perf_env
    if env["hardware"] == "CPU":
        return _no_device(env)
    db = stats.op_metrics
    has_average, steps, note = step_rows(stats)
    columns = COLUMNS_GPU if "GPU" in env["device_type"] else COLUMNS_TPU
    ops = _op_table(db)
    r = roofs(env)
    cores = env["device_core_count"]
    frames = []
    for include in (True, False):
        frames.append(_records(ops, env, r, db.total_time_ps, cores, include, "Total"))
        empty = ops.iloc[:0]
        if has_average:
            frames.append(
                _records(empty, env, r, 0, cores, include, "Average", num_steps=len(steps), program_only=True)
            )
        if steps:  # every step's row is the same empty Program row: made once, labelled per step
            row = _records(empty, env, r, 0, cores, include, "", program_only=True)
            frames.append(pd.concat([row] * len(steps), ignore_index=True).assign(step=list(steps)))
    out = pd.concat(frames, ignore_index=True)[columns]
    self_ps, time_ps = ops["self_time_ps"].to_numpy(np.float64), ops["time_ps"].to_numpy(np.float64)
    normalized = ops["normalized_time_ps"].to_numpy(np.float64)
    op_time = float(db.total_op_time_ps)
    multiplier = float(safe_divide(np.sum(self_ps[:-1] * safe_divide(normalized[:-1], time_ps[:-1])), op_time))
    out.attrs.update(r)
    out.attrs["time_scale_multiplier"] = multiplier if env["hardware"] == "TPU" else 0.0
    diag = []
    if not steps:
        diag.append(("WARNING", EMPTY_INTERSECT if note == "empty_intersect" else NO_STEP_MARKER))
    out.attrs["diagnostics"] = diag
    out.attrs["reason"] = ""
    notes = [note] if note and note != "empty_intersect" else []
    if db.source == "gpu" and db.notes:
        notes.append(db.notes)  # kernels run in CUDA graphs (command_buffers)
    out.attrs["notes"] = "; ".join(notes)
    return out
