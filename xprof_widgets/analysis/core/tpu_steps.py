"""TPU training steps as XProf finds them, and each step's TensorCore time breakdown.

Follows XProf 2.24.2: XLA's `group_events.cc` (`GroupTpuEventsOSS`), XProf's
`xplane_to_step_events.cc` (`ConvertDeviceTraceXPlaneToStepEvents`),
`step_events_to_steps_db.cc` and `op_stats_to_input_pipeline_analysis.cc`
(`ComputeTpuPerStepDataAcrossCores`):

1. **Grouping** (per TensorCore plane `/device:TPU:N` with a `Steps` line): each step event
   takes on the producer / consumer links of the events of the plane's other lines that
   lie inside it (the `XLA Modules` events carry the links of the host's launches), so a
   host step (`jax.profiler.StepTraceAnnotation`, a TF step) that reaches one of them
   reaches the step, which takes the group of the first host root that does (the host's
   grouping, `grouping.group_ids`). Steps no host step reaches are then dropped and runs of
   steps of one group merged (XLA's `MergeHostSteps`). When no host step reaches any
   TensorCore's steps, XProf numbers each core's step events in lock step: the k-th of
   every core is group `H + k`, H the number of host groups. Every event of the other
   lines takes the group of the first (merged) step that overlaps it, end points included
   (XLA's `GroupLine`: an op that starts exactly where a step ends belongs to that step).
   A file grouped already (`group_id` stats) keeps its own groups, as XProf does.
2. **Per core and step** (`tpu_step_cores`): the step's markers are the `Steps` events of
   the group (device clock: `device_offset_ps` / `device_duration_ps`); its ops, the
   grouped `XLA Ops` events with an op key (`program_id` and a non-zero `symbol_id`), each
   with its self time (device duration less its directly nested grouped ops') credited to
   its `hlo_category`. A step is kept when every core that has grouped ops has both
   markers and ops for it (XProf intersects cores); its time is the longest marker of any
   core (`StepDetails::StepTime`), the same for every core of the host.
3. **Per step** (`tpu_step_table`, XProf's `PerTpuStepDetails`): per core, idle = step time
   less all op time; compute = step time less the time waiting for the host (infeed,
   outfeed, host send / recv, idle); then across cores: `tc_compute_ms` the least compute,
   `tc_infeed_ms` the most infeed, `tc_outfeed_ms` the mean outfeed, `host_transfer_ms` the
   most host send + recv, `tc_idle_ms` the least step time less the rest (not below 0),
   `infeed_percent_*` the mean, least and most infeed share of the step,
   `tc_active_ms` the mean of each core's op time off the host's wait, at most the step.

**Where XProf's arithmetic is wrong, we show the right value.** XProf keeps idle time in
unsigned 64-bit integers: when the ops credited to a step take longer than the step (ops
that overlap on the `XLA Ops` line, an op that starts where the step ends, a short step
marker), a core's idle time wraps around and XProf shows that step's TensorCore compute as
0 and its idle time as the whole step. Here a core's idle time is at least 0, so compute is
the step time less the wait for the host (`ops_past_step_end` marks those steps; tests
check XProf's values on every other step and ours on these).

**Input seen from the host** (XProf's `MayFixTpuStepAnalysis`): where no TensorCore op is an
infeed, the TensorCores of a step whose host waited for input (`IteratorGetNext...`,
`MemcpyHToD`, `InfeedEnqueue...` in the host's step) are taken to have waited for it: each
core's idle time is counted as infeed in the ratio of that host time to the step's
TensorCore idle time, at most all of it.

**Waiting for the SparseCore** (`sparsecorev0 infeed` / `outfeed` ops on a TensorCore): a
core's SparseCoreV0 infeed beyond the outfeed that feeds it is its wait for the SparseCore;
it counts off the core's compute, the step's `scv0_compute_ms` is the longest wait of any
core and enters the idle arithmetic; `scv0_infeed_ms` stays 0 (XProf reads its input share
from a setting a profile never carries).

**SparseCore planes** (`/device:TPU:N SparseCore M`, lines `Sparse Core Steps` and `Sparse
Core Ops`; XProf's core id 1,000,000 + the plane's id) are cores of their own beside the
TensorCores (`sparse_core` rows of `tpu_step_cores`): their ops' self time per step (the
events' own spans, not `device_*_ps`: what XProf 2.24.2 reads), their step the longest of
their own markers (device clock) or, without one, the TensorCores' step. A SparseCore with
steps restricts the steps kept as a TensorCore does, and a SparseCore marker longer than
every TensorCore's is the step's time. Per step XProf shows the least busy time of any
SparseCore as `sc_compute_ms`, the mean idle, step time and busy time as `sc_idle_ms`,
`sc_step_time_ms` and `sc_active_ms`, 0 SparseCore infeed / outfeed, and drops the two
SparseCoreV0 columns. In a file XProf groups itself (as the runtime writes them all), the
SparseCore's ops take the step of their TensorCore that overlaps them (host clock) and its
markers none: each SparseCore's step is the TensorCores'; a file grouped already (`group_id`
stats) keeps its own. Each rule was observed on XProf 2.24.2 itself, where its public source
differs (tests/test_sparse_core.py). Not reproduced: where a SparseCore's ops run past its
own marker's end, XProf's idle is not the step less the busy time; ours is.

Not reimplemented: TPU collectives' compute / sync split.
Times are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .cache import derived
from .device_time import device_timespans
from .grouping import group_ids, is_grouped, of_line, step_events
from .intervals import children_time
from .planes import HOST_PLANE, sparse_core_planes, tensor_core_planes
from .steps import HOST_TO_DEVICE, HOST_WAIT_INPUT, host_event_type

STEPS_LINE = "Steps"
MODULES_LINE = "XLA Modules"
OPS_LINE = "XLA Ops"
SC_STEPS_LINE = "Sparse Core Steps"
SC_OPS_LINE = "Sparse Core Ops"
#: XProf's core id of a SparseCore: this + its plane's id (`kSparseCoreIndexStart`).
SPARSE_CORE_INDEX = 1_000_000

#: XLA's HLO categories (`xla_op_utils.h`) the TPU breakdown reads: column -> categories.
CATEGORY_COLUMNS = {
    "infeed_ps": ("infeed",),
    "outfeed_ps": ("outfeed",),
    "host_send_ps": ("host send", "host send-done"),
    "host_recv_ps": ("host recv", "host recv-done"),
    "megacore_fusion_ps": ("megacore fusion",),
    "all_reduce_ps": ("all-reduce", "all-reduce fusion", "all-to-all"),
    "send_ps": ("send", "send-done"),
    "recv_ps": ("recv", "recv-done"),
    "scv0_infeed_ps": ("sparsecorev0 infeed",),
    "scv0_outfeed_ps": ("sparsecorev0 outfeed",),
}
#: Categories XProf counts as the TensorCore waiting (off duty), not working.
OFF_DUTY = ("infeed", "outfeed", "host send", "host send-done", "host recv", "host recv-done", "megacore fusion")

#: XProf's step-time graph for TPU (its `step_time_graph_column_ids`): column -> label.
TPU_BREAKDOWN_LABELS = {
    "tc_compute_ms": "TensorCore compute",
    "scv0_compute_ms": "SparseCoreV0 compute",
    "scv0_infeed_ms": "SparseCoreV0 input",
    "tc_infeed_ms": "TensorCore input",
    "tc_outfeed_ms": "TensorCore output",
    "tc_idle_ms": "TensorCore idle",
    "host_transfer_ms": "Host transfer",
}

CORE_COLUMNS = [
    "step_num",
    "core_id",
    "plane",
    "begin_ps",
    "duration_ps",
    "op_time_ps",
    *CATEGORY_COLUMNS,
    "trace_begin_ps",
    "trace_end_ps",
    "sparse_core",
]

#: The per-step SparseCore columns (XProf's `SparseCoreStepSummary`), in ms.
SPARSE_CORE_COLUMNS = (
    "sc_compute_ms",
    "sc_infeed_ms",
    "sc_outfeed_ms",
    "sc_idle_ms",
    "sc_step_time_ms",
    "sc_active_ms",
)

TPU_STEP_COLUMNS = [
    "step_number",
    "step_num",
    "step_name",
    "group_id",
    "begin_ps",
    "step_time_ms",
    "tc_compute_ms",
    "scv0_compute_ms",
    "scv0_infeed_ms",
    "tc_infeed_ms",
    "tc_outfeed_ms",
    "tc_idle_ms",
    "host_transfer_ms",
    "infeed_percent_average",
    "infeed_percent_min",
    "infeed_percent_max",
    "tc_active_ms",
    "active_step_time_ms",
    "ops_past_step_end",
]

NO_TPU_STEPS_REASON = (
    "no TPU steps: no TensorCore plane has a `Steps` line with events (the TPU runtime writes one per "
    "training step of a program run in a training loop; an inference or serving run has none)"
)
NO_TPU_STEPS_KEPT = (
    "no TPU steps: the TensorCores' `Steps` lines hold no step that every core ran XLA ops in "
    "(XProf counts a step where each core with ops has both its step marker and its ops)"
)

_PS_PER_MS = 1e9


def _grouping_line(plane):
    """XLA's grouping line of a TPU plane: `Steps` with events, else `XLA Modules` with events."""
    by_name = {line.name: line for line in reversed(plane.lines)}  # the first of a name wins
    for name in (STEPS_LINE, MODULES_LINE):
        line = by_name.get(name)
        if line is not None and len(line):
            return line
    return None


def overlapping_step(step_begin, step_end, begin, end):
    """Index of the step event each event belongs to, -1 for none: the first step, in time
    order, whose span overlaps the event's, end points included (XLA's `GroupQueue`, over
    events in time order and steps that do not overlap each other)."""
    j = np.searchsorted(step_end, begin, side="left")
    ok = j < len(step_begin)
    ok[ok] = step_begin[j[ok]] <= end[ok]
    return np.where(ok, j, -1)


def _step_events(plane):
    """The `Steps` line's events in time order: host-clock begin and end, device-clock begin
    and duration (ps), and their indices in the line; None without a Steps line with events."""
    line = next((x for x in plane.lines if x.name == STEPS_LINE), None)
    if line is None or not len(line):
        return None
    order = np.argsort(line.start_ps.astype(np.int64), kind="stable")
    begin = line.start_ps.astype(np.int64)[order]
    d_begin, d_dur = device_timespans(line)
    return {
        "line": line,
        "order": order,
        "begin": begin,
        "end": begin + line.event_duration_ps.astype(np.int64)[order],
        "d_begin": d_begin[order],
        "d_end": d_begin[order] + d_dur[order],
    }


def _host_linked_groups(space, plane, steps):
    """The group each step event takes from the host (-1: none): XLA gives a step the
    producer / consumer links of the events of the plane's other lines that lie inside it
    (the first step ending after an event starts, if it holds the event whole), so a host
    step reaching one of them reaches the step; the first root to reach it, in XProf's root
    order, is the one with the smallest group id (`grouping.group_ids` gives each event's)."""
    groups = group_ids(space)
    out = np.full(len(steps["begin"]), np.iinfo(np.int64).max, np.int64)
    for li, line in plane.busy_lines:
        if line is steps["line"]:
            continue
        g = of_line(groups, plane, li, -1)
        has = np.flatnonzero(g >= 0)
        if not len(has):
            continue
        begin = line.start_ps.astype(np.int64)[has]
        end = begin + line.event_duration_ps.astype(np.int64)[has]
        j = np.searchsorted(steps["end"], begin, side="right")  # the first step ending after it starts
        ok = j < len(out)
        ok[ok] = (steps["begin"][j[ok]] <= begin[ok]) & (end[ok] <= steps["end"][j[ok]])
        np.minimum.at(out, j[ok], g[has][ok])
    out[out == np.iinfo(np.int64).max] = -1
    return out


def _merged_steps(steps, groups):
    """XLA's `MergeHostSteps`: ungrouped step events dropped (unless none is grouped), runs
    of consecutive steps of one group made one step (host span from the first's start to the
    last's end, device span their union). A DataFrame: group, begin, end (host clock),
    d_begin, d_end (device clock), in time order."""
    frame = pd.DataFrame({"group": groups, **{k: steps[k] for k in ("begin", "end", "d_begin", "d_end")}})
    if (groups >= 0).any():
        frame = frame[groups >= 0]
    run = (frame["group"] != frame["group"].shift()).cumsum()
    merged = frame.groupby(run, sort=False).agg(
        group=("group", "first"),
        begin=("begin", "first"),
        end=("end", "last"),
        d_begin=("d_begin", "min"),
        d_end=("d_end", "max"),
    )
    return merged.reset_index(drop=True)


def _grouped_lines(space, planes):
    """{plane index: (merged steps, groups of the XLA Ops line)} of the TensorCore planes with
    a Steps line (see the module doc): steps grouped from the host where a host step reaches
    any of them, else numbered in lock step after the host's groups."""
    found = {i: _step_events(p) for i, p in enumerate(planes)}
    found = {i: st for i, st in found.items() if st is not None}
    linked = {i: _host_linked_groups(space, planes[i], st) for i, st in found.items()}
    lock_step = not any((g >= 0).any() for g in linked.values())
    base = len(step_events(space)) if lock_step else 0
    out = {}
    for i, st in found.items():
        groups = base + np.arange(len(st["begin"])) if lock_step else linked[i]
        merged = _merged_steps(st, groups)
        ops = next((x for x in planes[i].lines if x.name == OPS_LINE), None)
        op_groups = np.full(0 if ops is None else len(ops), -1, np.int64)
        if ops is not None and len(ops) and len(merged):
            begin = ops.start_ps.astype(np.int64)
            at = overlapping_step(
                merged["begin"].to_numpy(),
                merged["end"].to_numpy(),
                begin,
                begin + ops.event_duration_ps.astype(np.int64),
            )
            op_groups = np.where(at >= 0, merged["group"].to_numpy()[np.maximum(at, 0)], -1)
        out[i] = (merged, op_groups)
    return out


def _file_groups(plane):
    """(steps, groups of the XLA Ops line) of a plane of a file grouped already (`group_id`
    stats, which XProf reads as they are)."""
    st = _step_events(plane)
    ops = next((x for x in plane.lines if x.name == OPS_LINE), None)
    read = _file_group_ids
    merged = pd.DataFrame(columns=["group", "begin", "end", "d_begin", "d_end"], dtype=np.int64)
    if st is not None:
        g = read(st["line"])[st["order"]]
        keep = g >= 0
        merged = pd.DataFrame({"group": g[keep], **{k: st[k][keep] for k in ("begin", "end", "d_begin", "d_end")}})
    return merged, read(ops) if ops is not None else np.zeros(0, np.int64)


def _file_group_ids(line) -> np.ndarray:
    """The `group_id` stat of each event of `line` (-1: none)."""
    out = np.full(len(line), -1, np.int64)
    ev, v = line.stat_table(names=["group_id"]).ints("group_id")
    out[ev] = v
    return out


def _core_steps(plane, merged, op_groups):
    """(markers, ops) of one TensorCore: markers a DataFrame (group, begin_ps, duration_ps on
    the device clock, trace_begin_ps / trace_end_ps on the host's) of its grouped steps; ops
    a DataFrame (group, category, self_ps) of its grouped `XLA Ops` events with an op key."""
    markers = pd.DataFrame(
        {
            "group": merged["group"].to_numpy(np.int64),
            "begin_ps": merged["d_begin"].to_numpy(np.int64),
            "duration_ps": (merged["d_end"] - merged["d_begin"]).to_numpy(np.int64),
            "trace_begin_ps": merged["begin"].to_numpy(np.int64),  # the host clock the trace shows
            "trace_end_ps": merged["end"].to_numpy(np.int64),
        }
    )
    empty_ops = pd.DataFrame({"group": np.zeros(0, np.int64), "category": [], "self_ps": np.zeros(0, np.int64)})
    ops = next((x for x in plane.lines if x.name == OPS_LINE), None)
    g = op_groups
    keep = np.flatnonzero(g >= 0)
    if ops is None or not len(keep):
        return markers, empty_ops
    begin, dur = device_timespans(ops)
    begin, dur = begin[keep], dur[keep]
    # Only grouped ops take part in the nesting (XProf pushes nothing else on its stack).
    self_ps = dur - children_time(begin, begin + dur)
    md = ops.metadata_id[keep]
    ids = np.unique(md)
    st = plane.metadata_stats(ids, ["hlo_category", "program_id", "symbol_id"])
    key_ok = _has_op_key(st, len(ids))
    # A category that is not text (a damaged file) is no category.
    category = np.array([c if isinstance(c, str) else "" for c in st.get("hlo_category", [None] * len(ids))], object)
    at = np.searchsorted(ids, md)
    mine = key_ok[at]
    return markers, pd.DataFrame({"group": g[keep][mine], "category": category[at][mine], "self_ps": self_ps[mine]})


def _has_op_key(st, n):
    """Whether each metadata has XProf's op key: a program id and a non-zero symbol id."""
    out = np.ones(n, bool)
    for name in ("program_id", "symbol_id"):
        col = st.get(name)
        if col is None:
            return np.zeros(n, bool)
        v = pd.to_numeric(pd.Series(col, dtype=object), errors="coerce")
        out &= v.notna().to_numpy()
        if name == "symbol_id":
            out &= (v.fillna(0) != 0).to_numpy()
    return out


def tpu_step_cores(space) -> pd.DataFrame:
    """One row per (step, TensorCore) of one host file (see the module doc): step_num (XProf's
    step number: the group id), core_id (the plane's id, XProf's core key), plane (its name),
    begin_ps and duration_ps (the step, from the longest marker of any core), op_time_ps (the
    self time of the core's ops credited to the step) and its part in each of
    `CATEGORY_COLUMNS`, trace_begin_ps / trace_end_ps (the core's own marker on the host's
    clock, as the trace viewer shows it). Empty without TPU steps. Once per file."""
    return derived(space, "tpu_step_cores", lambda: _tpu_step_cores(space))


def core_steps(space) -> list:
    """[(plane, merged steps, markers, ops)] of each TensorCore plane with a Steps line (see
    the module doc: the steps after grouping, a DataFrame of group, begin / end on the host
    clock and d_begin / d_end on the device's; `_core_steps`' markers and ops). Once per
    file: the step table and the event-time fractions (`smart_suggestion`) read it."""
    return derived(space, "tpu_core_steps", lambda: _core_steps_of(space))


def _core_steps_of(space):
    planes = tensor_core_planes(space)
    if not _has_steps_line(planes):
        return []
    grouped = {i: _file_groups(p) for i, p in enumerate(planes)} if is_grouped(space) else _grouped_lines(space, planes)
    return [(planes[i], grouped[i][0], *_core_steps(planes[i], *grouped[i])) for i in sorted(grouped)]


def line_groups(merged, line) -> np.ndarray:
    """The group of each event of a TensorCore plane's `line` (-1: none): that of the first
    of the plane's (merged) steps that overlaps it, end points included (XLA's `GroupLine`)."""
    if not len(merged) or not len(line):
        return np.full(len(line), -1, np.int64)
    begin = line.start_ps.astype(np.int64)
    at = overlapping_step(merged["begin"].to_numpy(), merged["end"].to_numpy(), begin, begin + line.event_duration_ps)
    return np.where(at >= 0, merged["group"].to_numpy()[np.maximum(at, 0)], -1)


def sparse_core_steps(space) -> list:
    """[(plane, markers, ops)] of each SparseCore plane (see the module doc): markers a
    DataFrame (group, duration_ps on the device clock, trace_begin_ps / trace_end_ps on the
    host's) of its grouped `Sparse Core Steps` events; ops a DataFrame (group, self_ps) of its
    grouped `Sparse Core Ops` events with an op key. Once per file."""
    return derived(space, "tpu_sparse_core_steps", lambda: _sparse_core_steps(space))


def _sparse_core_steps(space):
    found = sparse_core_planes(space)
    if not found:
        return []
    grouped = is_grouped(space)
    steps_of = {plane.name: merged for plane, merged, _, _ in core_steps(space)}
    out = []
    for plane, tensor_core in found:
        by_name = {line.name: line for line in reversed(plane.lines)}  # the first of a name wins
        marks, ops = by_name.get(SC_STEPS_LINE), by_name.get(SC_OPS_LINE)
        merged = steps_of.get(tensor_core)
        if grouped:
            mark_g = _file_group_ids(marks) if marks is not None else None
            op_g = _file_group_ids(ops) if ops is not None else None
        else:  # XProf's own grouping: by the TensorCore's steps (see the module doc)
            mark_g = None  # (XProf 2.24.2 groups no SparseCore marker)
            op_g = line_groups(merged, ops) if ops is not None and merged is not None else None
        out.append((plane, _sparse_core_markers(marks, mark_g), _sparse_core_ops(plane, ops, op_g)))
    return out


_MARKER_COLUMNS = ("group", "begin_ps", "duration_ps", "trace_begin_ps", "trace_end_ps")


def _sparse_core_markers(line, groups):
    if line is None or groups is None or not (groups >= 0).any():
        return pd.DataFrame({k: np.zeros(0, np.int64) for k in _MARKER_COLUMNS})
    keep = np.flatnonzero(groups >= 0)
    d_begin, dur = device_timespans(line)
    begin = line.start_ps.astype(np.int64)[keep]
    return pd.DataFrame(
        {
            "group": groups[keep],
            "begin_ps": d_begin[keep],
            "duration_ps": dur[keep],
            "trace_begin_ps": begin,
            "trace_end_ps": begin + line.event_duration_ps.astype(np.int64)[keep],
        }
    )


def _sparse_core_ops(plane, line, groups):
    empty = pd.DataFrame({"group": np.zeros(0, np.int64), "self_ps": np.zeros(0, np.int64)})
    if line is None or groups is None or not (groups >= 0).any():
        return empty
    keep = np.flatnonzero(groups >= 0)
    # The events' own spans (XProf 2.24.2 reads no `device_*_ps` of a SparseCore op).
    begin = line.start_ps.astype(np.int64)[keep]
    end = begin + line.event_duration_ps.astype(np.int64)[keep]
    self_ps = end - begin - children_time(begin, end)
    md = line.metadata_id[keep]
    ids = np.unique(md)
    key_ok = _has_op_key(plane.metadata_stats(ids, ["program_id", "symbol_id"]), len(ids))
    mine = key_ok[np.searchsorted(ids, md)]
    return pd.DataFrame({"group": groups[keep][mine], "self_ps": self_ps[mine]})


def _tpu_step_cores(space):
    kept: set | None = None
    per_core = []
    for plane, _, markers, ops in core_steps(space):
        if ops.empty:  # XProf: a core without grouped ops has no step events to intersect
            continue
        groups = set(markers["group"].tolist()) & set(ops["group"].tolist())
        kept = groups if kept is None else kept & groups
        per_core.append((plane, markers, ops))
    sparse = []
    for plane, markers, ops in sparse_core_steps(space) if kept else ():
        groups = set(markers["group"].tolist()) | set(ops["group"].tolist())
        if groups:  # (a SparseCore without steps is left out, not intersected)
            kept &= groups
            sparse.append((plane, markers, ops))
    if not kept:
        return pd.DataFrame(columns=CORE_COLUMNS)
    groups = np.array(sorted(kept), dtype=np.int64)
    # The step: the longest marker of any core, SparseCores' included (the first of
    # equals, in core order).
    all_markers = pd.concat([m for _, m, _ in per_core] + [m for _, m, _ in sparse], ignore_index=True)
    all_markers = all_markers[all_markers["group"].isin(groups)]
    longest = all_markers.sort_values("duration_ps", ascending=False, kind="stable").drop_duplicates("group")
    longest = longest.set_index("group").loc[groups]
    rows = []
    for plane, markers, ops in per_core:
        ops = ops[ops["group"].isin(groups)]
        span = markers.groupby("group").agg(b=("trace_begin_ps", "min"), e=("trace_end_ps", "max")).reindex(groups)
        sums = ops.groupby("group")["self_ps"].sum().reindex(groups, fill_value=0)
        by_cat = ops.groupby(["group", "category"])["self_ps"].sum()
        frame = pd.DataFrame(
            {
                "step_num": groups,
                "core_id": plane.id,
                "plane": plane.name,
                "begin_ps": longest["begin_ps"].to_numpy(np.int64),
                "duration_ps": longest["duration_ps"].to_numpy(np.int64),
                "op_time_ps": sums.to_numpy(np.int64),
            }
        )
        frame["trace_begin_ps"] = span["b"].fillna(-1).to_numpy(np.int64)
        frame["trace_end_ps"] = span["e"].fillna(-1).to_numpy(np.int64)
        cats = by_cat.unstack(fill_value=0).reindex(groups, fill_value=0) if len(by_cat) else None
        for col, names in CATEGORY_COLUMNS.items():
            have = [c for c in names if cats is not None and c in cats.columns]
            frame[col] = cats[have].sum(axis=1).to_numpy(np.int64) if have else np.zeros(len(groups), np.int64)
        frame["sparse_core"] = False
        rows.append(frame)
    for plane, markers, ops in sparse:
        own = markers.groupby("group").agg(
            d=("duration_ps", "max"), b=("trace_begin_ps", "min"), e=("trace_end_ps", "max")
        )
        own = own.reindex(groups)
        step = own["d"].fillna(longest["duration_ps"]).to_numpy(np.int64)  # none: the TensorCores' step
        frame = pd.DataFrame(
            {
                "step_num": groups,
                "core_id": SPARSE_CORE_INDEX + plane.id,
                "plane": plane.name,
                "begin_ps": longest["begin_ps"].to_numpy(np.int64),
                "duration_ps": step,
                "op_time_ps": ops.groupby("group")["self_ps"].sum().reindex(groups, fill_value=0).to_numpy(np.int64),
                **{col: np.zeros(len(groups), np.int64) for col in CATEGORY_COLUMNS},
                "trace_begin_ps": own["b"].fillna(-1).to_numpy(np.int64),
                "trace_end_ps": own["e"].fillna(-1).to_numpy(np.int64),
                "sparse_core": True,
            }
        )
        rows.append(frame)
    out = pd.concat(rows, ignore_index=True)
    out = out.sort_values(["step_num", "core_id"], kind="stable").reset_index(drop=True)[CORE_COLUMNS]
    return _idle_as_input(space, out)


_INFEED_CATEGORIES = ("infeed", "sparsecorev0 infeed")


def _has_infeed_op(space) -> bool:
    """Whether some TensorCore op is an infeed (XProf's `HasTpuInfeedOp` over the device ops)."""
    for plane in tensor_core_planes(space):
        ops = next((x for x in plane.lines if x.name == OPS_LINE), None)
        if ops is None or not len(ops):
            continue
        ids = np.unique(ops.metadata_id)
        cats = plane.metadata_stats(ids, ["hlo_category"]).get("hlo_category")
        if cats is not None and any(c in _INFEED_CATEGORIES for c in cats.tolist()):
            return True
    return False


def _host_input_ps(space) -> dict[int, int]:
    """{group: time (ps) of its host events that wait for input or send it to the device}
    (XProf's `TotalInputPs` over the host's step events: `IteratorGetNext...`, `MemcpyHToD`,
    `InfeedEnqueue...`, durations summed as they are)."""
    plane = next((p for p in space.planes if p.name == HOST_PLANE), None)
    if plane is None:
        return {}
    groups = group_ids(space)
    out: dict[int, int] = {}
    for li, line in plane.busy_lines:
        g = of_line(groups, plane, li, -1)
        if not (g >= 0).any():
            continue
        names = line.names()
        kinds = host_event_type(names.categories.astype(str))
        codes = names.codes
        wanted = (codes >= 0) & (g >= 0)
        wanted[wanted] = np.isin(kinds[codes[wanted]], (HOST_WAIT_INPUT, HOST_TO_DEVICE))
        if not wanted.any():
            continue
        for gid, ps in pd.Series(line.event_duration_ps[wanted].astype(np.int64)).groupby(g[wanted]).sum().items():
            out[int(gid)] = out.get(int(gid), 0) + int(ps)
    return out


def _idle_as_input(space, cores: pd.DataFrame) -> pd.DataFrame:
    """XProf's `MayFixTpuStepAnalysis`: where no TensorCore op is an infeed, the TensorCores
    of a step whose host waited for input are taken to have waited for it too: each core's
    idle time (its step less its ops', at least 0) is counted as infeed in the ratio of the
    host's input time to the step's TensorCore idle time (at most all of it)."""
    if cores.empty or _has_infeed_op(space):
        return cores
    wait = _host_input_ps(space)
    if not wait:
        return cores
    idle_ms = tpu_step_table(cores).set_index("step_num")["tc_idle_ms"]
    out = cores.copy()
    steps = out["step_num"].to_numpy(np.int64)
    input_ms = np.array([wait.get(int(s), 0) for s in steps], np.float64) / _PS_PER_MS
    idle = idle_ms.reindex(steps).to_numpy(np.float64)
    ratio = np.minimum(np.divide(input_ms, idle, out=np.zeros(len(steps)), where=np.abs(idle) >= 1e-10), 1.0)
    ratio[out["sparse_core"].to_numpy(bool)] = 0.0  # (the TensorCores only)
    core_idle = np.maximum(out["duration_ps"].to_numpy(np.int64) - out["op_time_ps"].to_numpy(np.int64), 0)
    added = (core_idle * ratio).astype(np.int64)  # XProf: a double into whole picoseconds
    out["infeed_ps"] = out["infeed_ps"].to_numpy(np.int64) + added
    out["op_time_ps"] = out["op_time_ps"].to_numpy(np.int64) + added
    return out


def no_steps_reason(space) -> str:
    """Why a host file has no TPU steps, in a sentence: no `Steps` line with events, or none
    of its steps has ops on every core."""
    return NO_TPU_STEPS_KEPT if _has_steps_line(tensor_core_planes(space)) else NO_TPU_STEPS_REASON


def _has_steps_line(planes) -> bool:
    """Whether a TensorCore plane has a `Steps` line with events (its grouping line)."""
    return any(_grouping_line(p) is not None and _grouping_line(p).name == STEPS_LINE for p in planes)


def tpu_step_table(cores: pd.DataFrame) -> pd.DataFrame:
    """XProf's TPU step table (`PerTpuStepDetails`, one row a step, times in ms) from
    `tpu_step_cores`' rows (one host's, or several hosts' steps of one number): see the module
    doc for each column; `ops_past_step_end` marks the steps where a core's ops took longer
    than the step (XProf shows 0 compute there, we the right value)."""
    if cores.empty:
        return pd.DataFrame(columns=TPU_STEP_COLUMNS)
    sparse = cores["sparse_core"].to_numpy(bool) if "sparse_core" in cores else np.zeros(len(cores), bool)
    c = cores[~sparse]
    step = c["duration_ps"].to_numpy(np.int64)
    ops = c["op_time_ps"].to_numpy(np.int64)
    idle = np.maximum(step - ops, 0)
    host_sr = c["host_send_ps"].to_numpy(np.int64) + c["host_recv_ps"].to_numpy(np.int64)
    infeed = c["infeed_ps"].to_numpy(np.int64)
    outfeed = c["outfeed_ps"].to_numpy(np.int64)
    # The core's wait for the SparseCore (XProf's `wait_for_scv0`): its SparseCoreV0 infeed
    # beyond the outfeed that feeds it (the rest XProf counts as transforming the input).
    sc_in = c["scv0_infeed_ps"].to_numpy(np.int64) if "scv0_infeed_ps" in c else np.zeros(len(c), np.int64)
    sc_out = c["scv0_outfeed_ps"].to_numpy(np.int64) if "scv0_outfeed_ps" in c else np.zeros(len(c), np.int64)
    sc_wait = np.where(sc_in > 0, sc_in - np.minimum(sc_in, sc_out), 0)
    wait = infeed + outfeed + host_sr + idle + sc_wait
    off = sum(c[col].to_numpy(np.int64) for col in ("infeed_ps", "outfeed_ps", "host_send_ps", "host_recv_ps"))
    off = off + c["megacore_fusion_ps"].to_numpy(np.int64) + sc_wait
    per = pd.DataFrame(
        {
            "step_num": c["step_num"].to_numpy(np.int64),
            "begin_ps": c["begin_ps"].to_numpy(np.int64),
            "step_ps": step,
            "compute_ps": step - wait,
            "infeed_ps": infeed,
            "outfeed_ps": outfeed,
            "host_sr_ps": host_sr,
            "scv0_ps": sc_wait,
            "infeed_pct": 100.0 * infeed / np.where(step > 0, step, 1),
            "active_ps": np.minimum(ops - off, step),
            "past_end": ops > step,
        }
    )
    g = per.groupby("step_num", sort=True)
    t = pd.DataFrame(
        {
            "begin_ps": g["begin_ps"].first(),
            "step_time_ms": g["step_ps"].max() / _PS_PER_MS,
            "min_step_ms": g["step_ps"].min() / _PS_PER_MS,
            "tc_compute_ms": g["compute_ps"].min() / _PS_PER_MS,
            "tc_infeed_ms": g["infeed_ps"].max() / _PS_PER_MS,
            "tc_outfeed_ms": g["outfeed_ps"].mean() / _PS_PER_MS,
            "host_transfer_ms": g["host_sr_ps"].max() / _PS_PER_MS,
            "infeed_percent_average": g["infeed_pct"].mean(),
            "infeed_percent_min": g["infeed_pct"].min(),
            "infeed_percent_max": g["infeed_pct"].max(),
            "tc_active_ms": g["active_ps"].mean() / _PS_PER_MS,
            "ops_past_step_end": g["past_end"].any(),
            # The longest wait for the SparseCore of any core; its input share XProf never
            # knows from a profile (its `scv0_infeed_percent` stays unset): all is compute.
            "scv0_compute_ms": g["scv0_ps"].max() / _PS_PER_MS,
        }
    )
    t["scv0_infeed_ms"] = 0.0
    non_idle = t["tc_compute_ms"] + t["scv0_compute_ms"] + t["tc_infeed_ms"] + t["tc_outfeed_ms"]
    t["tc_idle_ms"] = np.maximum(t["min_step_ms"] - non_idle, 0.0)
    t["active_step_time_ms"] = t["tc_active_ms"]
    t = t.reset_index()
    t["step_number"] = t["step_num"]
    t["group_id"] = t["step_num"]
    t["step_name"] = t["step_num"].astype(str)
    if not sparse.any():
        return t[TPU_STEP_COLUMNS]
    # With SparseCores XProf shows their summary in place of the SparseCoreV0 columns.
    sc = cores[sparse]
    step = sc["duration_ps"].to_numpy(np.int64)
    busy = sc["op_time_ps"].to_numpy(np.int64)
    idle = np.maximum(step - busy, 0)
    per = pd.DataFrame({"step_num": sc["step_num"].to_numpy(np.int64), "step": step, "busy": busy, "idle": idle})
    g = per.assign(compute=step - idle).groupby("step_num", sort=True)
    summary = pd.DataFrame(
        {
            "sc_compute_ms": g["compute"].min() / _PS_PER_MS,
            "sc_infeed_ms": 0.0,
            "sc_outfeed_ms": 0.0,
            "sc_idle_ms": g["idle"].mean() / _PS_PER_MS,
            "sc_step_time_ms": g["step"].mean() / _PS_PER_MS,
            "sc_active_ms": g["busy"].mean() / _PS_PER_MS,
        }
    ).reindex(t["step_num"].to_numpy(), fill_value=0.0)
    for col in SPARSE_CORE_COLUMNS:
        t[col] = summary[col].to_numpy(np.float64)
    columns = [x for x in TPU_STEP_COLUMNS if not x.startswith("scv0_")]
    at = columns.index("host_transfer_ms") + 1
    return t[columns[:at] + list(SPARSE_CORE_COLUMNS) + columns[at:]]
