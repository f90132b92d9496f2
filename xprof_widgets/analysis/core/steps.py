"""Training steps as XProf finds them, with the time breakdown of each step.

XProf (`xplane_to_step_events.cc`, `event_span.cc`,
`step_events_to_steps_db.cc`) turns the grouped host events of each step
(`group_id`, see `grouping`) into a step table:

1. **Step time**: the longest *step marker* of the group. Markers are events
   named `train...`, `test...` or `TraceContext...` without a `/` (explicit
   markers, e.g. `jax.profiler.StepTraceAnnotation("train", step_num=i)`) and
   the group's root event (implicit marker: grouping gives it a step name).
2. **Events**: every other grouped host event that is real computation (not
   `EagerExecute*`, `EagerLocalExecute*`, `EagerKernelExecute*`,
   `FunctionRun*`) gets a type: `MemcpyHToD` / `InfeedEnqueue*` ops are
   host-to-device, `MemcpyHToH` host-to-host, `IteratorGetNext*` waiting for
   input, anything else host compute. XProf's host converter never sees a
   device here (kernel launch is a GPU-only type).
3. **Breakdown** (`event_span.cc` `ToNonOverlappedEvents`, then
   `ConvertStepDetailsToStepInfo`): the group's events, all threads
   together and not clipped, are cut into spans by a sweep over their
   boundaries that keeps the highest type active (waiting for input >
   host-to-device > host-to-host > host compute); each span counts for its
   type what of it lies inside the step; what no span covers is "all
   others" (XProf's unknown time). Mostly that is the union by priority,
   but XProf's sweep puts the end of a zero-length event before its start:
   one at a time when nothing of its type or higher runs leaves that type
   "on" with nothing counted, so the gap after it counts as that type until
   the next event of the type (or a higher one) in the group ends. XLA:CPU
   profiles hit this: a pool worker's `ThreadpoolListener::StartRegion`
   (zero length, in the step of the Python-thread `Record` that scheduled
   the task) that falls after the step's last Python op makes the rest of
   the step host compute (jax_transformer_cpu: where the worker picked up
   the task late, e.g. step 1, 61.95 of 62.03 ms; where it did so while
   Python was still inside the launching call, 3-13 ms). See `_sweep`.
4. **Steps kept**: only well-formed steps (with a step marker and, for a
   CPU-only run, a span of host compute, even an empty one), sorted by group
   id; with more than 5 of them the first and the last are dropped as
   probably partial.

Not reimplemented: GPU and TPU device steps (device events, the `Step`
line), `input_pipeline_stage_name` stats (newer tf.data root stages),
and a host that has several hosts' steps (XProf combines hosts by step).
Times are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pandas as pd

from ...io import native
from ...io.sorting import order_by_key
from .cache import derived
from .grouping import forward_filled_group_ids, group_ids, step_events
from .planes import HOST_PLANE, TPU_PLANE_PREFIX, gpu_planes

# XProf's `EventType` priorities (higher wins where events overlap).
UNKNOWN_TIME = 0
HOST_COMPUTE = 10
HOST_COMPILE = 60
HOST_TO_HOST = 70
HOST_TO_DEVICE = 80
HOST_PREPARE = 90
DEVICE_COLLECTIVES = 100
HOST_WAIT_INPUT = 110
DEVICE_TO_DEVICE = 120
DEVICE_TO_HOST = 130
DEVICE_COMPUTE_32 = 140
DEVICE_COMPUTE_16 = 150
DEVICE_WAIT_DEVICE = 160
DEVICE_WAIT_HOST = 170

#: With more steps than this XProf drops the first and the last (partial) step.
DROP_PARTIAL_STEPS_ABOVE = 5

#: Breakdown columns of the step table (ms), XProf's `PerGenericStepDetails`:
#: column -> event types summed into it.
BREAKDOWN_COLUMNS = {
    "device_compute_ms": (DEVICE_COMPUTE_16, DEVICE_COMPUTE_32),
    "device_to_device_ms": (DEVICE_TO_DEVICE, DEVICE_WAIT_DEVICE),
    "device_collectives_ms": (DEVICE_COLLECTIVES,),
    "host_compute_ms": (HOST_COMPUTE,),
    "kernel_launch_ms": (HOST_PREPARE,),
    "input_ms": (HOST_WAIT_INPUT, HOST_TO_DEVICE, DEVICE_WAIT_HOST),
    "output_ms": (DEVICE_TO_HOST,),
    "compilation_ms": (HOST_COMPILE,),
    "all_others_ms": (UNKNOWN_TIME,),
}
#: The breakdown columns as people read them.
BREAKDOWN_LABELS = {
    "device_compute_ms": "Device compute",
    "device_to_device_ms": "Device to device",
    "device_collectives_ms": "Collectives",
    "host_compute_ms": "Host compute",
    "kernel_launch_ms": "Kernel launch",
    "input_ms": "Input",
    "output_ms": "Output",
    "compilation_ms": "Compilation",
    "all_others_ms": "All others",
}
#: The parts of the input column, kept apart for the summary.
INPUT_PARTS = {
    "wait_input_ms": (HOST_WAIT_INPUT,),
    "host_to_device_ms": (HOST_TO_DEVICE, DEVICE_WAIT_HOST),
    # The parts of device compute, for the overview's 16/32-bit precision.
    "device_compute_16bit_ms": (DEVICE_COMPUTE_16,),
    "device_compute_32bit_ms": (DEVICE_COMPUTE_32,),
}

STEP_COLUMNS = (
    ["step_number", "step_name", "group_id", "begin_ps", "step_time_ms"] + list(BREAKDOWN_COLUMNS) + list(INPUT_PARTS)
)

_EXPLICIT_MARKER = re.compile(r"^(train|test|TraceContext)[^/]*$")
_NOT_REAL_COMPUTE = ("EagerExecute", "EagerLocalExecute", "EagerKernelExecute", "FunctionRun")
_PS_PER_MS = 1e9


def is_step_marker_name(names):
    """True where a name is an explicit host step marker (`train...`, `test...`,
    `TraceContext...`, no `/`). `names`: array-like of str."""
    return np.array([bool(_EXPLICIT_MARKER.match(n)) for n in names], dtype=bool)


def _op_type(name):
    """The type of a TF op name `scope/name:Type` (or the name itself)."""
    return name.rsplit(":", 1)[-1] if ":" in name else name


def host_event_type(names):
    """XProf's event type of host events by name (`ClassifyCpuEvent` for a
    host without device). Names that are markers or not real compute are -1
    (not counted). `names`: array-like of str; returns int64 array."""
    out = np.empty(len(names), dtype=np.int64)
    for i, n in enumerate(names):  # over distinct names, not events
        if _EXPLICIT_MARKER.match(n) or n.startswith(_NOT_REAL_COMPUTE):
            out[i] = -1
        elif n.lower().startswith("memcpyhtod") or _op_type(n).startswith("InfeedEnqueue"):
            out[i] = HOST_TO_DEVICE
        elif n.lower().startswith("memcpyhtoh"):
            out[i] = HOST_TO_HOST
        elif n.lower().startswith("iteratorgetnext"):
            out[i] = HOST_WAIT_INPUT
        else:
            out[i] = HOST_COMPUTE
    return out


#: `native.grouped_events`' tables where it only counts (type, marker, roots: not read).
_NO_TABLES = (np.zeros(1, np.int16), np.zeros(1, bool), np.zeros(0, np.int64))


def _host_events(space, roots):
    """Grouped host events as columns: group, start, end (ps), type, marker."""
    plane = next((p for p in space.planes if p.name == HOST_PLANE), None)
    groups = group_ids(space)
    dtypes = {"group": np.int64, "start": np.int64, "end": np.int64, "type": np.int16, "marker": bool}
    if plane is None:
        return {k: np.zeros(0, dt) for k, dt in dtypes.items()}
    roots = roots[roots["plane"] == HOST_PLANE] if len(roots) else roots
    grouped = []  # (line index, line, its group ids or (event -> node, node -> group), how many are grouped)
    nodes_of = getattr(groups, "nodes_of", None) if native.available() else None
    for li, line in plane.busy_lines:
        key = (HOST_PLANE, li)
        if key not in groups:
            continue
        # A Python tracer's line (1.4 M calls) read through its events' nodes: no array of
        # every event's group id made for one pass (11 MB of fresh memory).
        lazy = nodes_of(key) if nodes_of is not None else None
        if lazy is not None:
            near, table = lazy
            count = native.grouped_events(
                table, near, line.names().codes, line.start_ps, line.event_duration_ps, *_NO_TABLES, None
            )
            if count >= 0:
                if count:
                    grouped.append((li, line, lazy, count))
                continue
        gid = groups[key]
        count = int(np.count_nonzero(gid >= 0))
        if count:
            grouped.append((li, line, gid, count))
    # Written in place into columns of every line's events (tens of millions on a CPU
    # run): no per-line pieces joined after, which would be as many fresh pages again.
    total = sum(count for *_, count in grouped)
    cols = {k: np.empty(total, dt) for k, dt in dtypes.items()}
    at = 0
    typed = {}  # id(a table of names) -> (that table, each name's type, whether it marks a step)
    for li, line, gid, count in grouped:
        part = {k: v[at : at + count] for k, v in cols.items()}
        at += count
        names = line.names()
        found = typed.get(id(names.categories))
        if found is None or found[0] is not names.categories:  # (a plane's lines share one)
            # By name, the last entry for an event without one (code -1); types < 2**15.
            cats = np.append(np.asarray(names.categories, dtype=object), "")
            found = typed[id(names.categories)] = (
                names.categories,
                host_event_type(cats).astype(np.int16),
                is_step_marker_name(cats),
            )
        _, kind, is_marker = found
        # The root carries the step name: an implicit marker.
        r_event = roots["event"][roots["line"] == li].to_numpy(np.int64) if len(roots) else np.zeros(0, np.int64)
        r_event = np.sort(r_event)
        start, duration, codes = line.start_ps, line.event_duration_ps, np.asarray(names.codes)
        tables = (kind, is_marker, r_event, part)
        near, table = gid if isinstance(gid, tuple) else (None, gid)
        if native.available() and native.grouped_events(table, near, codes, start, duration, *tables) == count:
            continue
        if near is not None:
            gid = groups[(HOST_PLANE, li)]
        idx = np.flatnonzero(gid >= 0)
        codes = codes[idx]
        np.take(kind, codes, out=part["type"])
        marker = part["marker"]
        np.take(is_marker, codes, out=marker)
        pos = np.searchsorted(idx, r_event)
        ok = pos < len(idx)
        ok[ok] = idx[pos[ok]] == r_event[ok]
        marker[pos[ok]] = True
        np.take(gid, idx, out=part["group"])
        np.take(start, idx, out=part["start"])
        end = part["end"]
        np.take(duration, idx, out=end)
        end += part["start"]
        part["type"][marker] = -1
    return cols


def union_length(group, start, end):
    """Length of the union of intervals per group: {group: ps} as a Series.

    Vectorised: sort by (group, start); an interval adds what it reaches past
    the furthest end of the earlier intervals of its group.
    """
    if not len(group):
        return pd.Series(dtype=np.int64)
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    reach = pd.Series(e).groupby(g).cummax().to_numpy()
    prev = np.empty_like(reach)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = reach[:-1]
    first = np.ones(len(g), bool)
    first[1:] = g[1:] != g[:-1]
    prev[first] = np.iinfo(np.int64).min
    added = np.clip(e - np.maximum(s, prev), 0, None)
    return pd.Series(added).groupby(g).sum()


def _boundaries(group, start, end, types):
    """The start and end boundaries of events in XProf's order (`CmpEventBoundaries`):
    by group, then time; at one time ends before starts, higher types first. Returns
    (group, time, type, is_start) of the sorted boundaries (types below 1024)."""
    bg = np.concatenate([group, group])
    bt = np.concatenate([start, end])
    minor = np.concatenate([1024 - types, -types])  # ends (<= 0) before starts (> 0)
    order = np.lexsort((minor, bt, bg))
    bg, bt, minor = bg[order], bt[order], minor[order]
    is_start = minor > 0
    return bg, bt, np.where(is_start, 1024 - minor, -minor), is_start


def _sweep(group, start, end, types, mark_type):
    """XProf's `ToNonOverlappedEvents` on the events of every group at once.

    XProf sorts the start and end boundaries of a group's events (by time; at
    one time ends before starts, higher types first) and walks them with a
    count per type and a current maximum type: a start raises the maximum to
    its type; an end lowers it, to the highest type still counted, only when
    it is an end of the maximum's own type that brings that count to exactly
    zero. Each boundary but the last labels the span up to the next one.

    Where spans nest or overlap this is the union by priority. A zero-length
    event is the exception: its end comes before its start, so at a time when
    nothing of its type (or higher) runs, its end takes the count to -1 (no
    change of maximum) and its start puts it back to 0 while raising the
    maximum to its type. The maximum then stays on that type, with nothing
    counted, until an end of that type next takes its count to zero, i.e.
    until the next event of that type (or of a higher one) has ended: the
    gap is labelled with the type. E.g. a `ThreadpoolListener::StartRegion`
    of the step, on a worker thread, after the step's last host op: host
    compute runs on to the end of the next host op still in the group.

    Vectorised, per time (all boundaries of a group at one instant): counts
    are cumulative sums per type, whence the correct maximum C (highest type
    counted > 0). The walk's maximum after a time is max(C after its ends,
    highest type starting there), unless the maximum before was stale (above
    C), which it then keeps, raised by the types starting. A stale maximum v
    set at time U is held at a later time T while C stayed below v at every
    time from U to just before T: per type v, "the last time that started a
    v-span lies after the last time C reached v", two running maxima.

    `group`, `start`, `end`, `types`: int64 arrays, one entry an event
    (types >= 0). Returns (spans, marked). spans: dict of arrays, one entry
    a time, sorted by group then time: group, begin, end (the group's next
    time; its last time ends where it begins), label (the type of the span).
    marked: the groups in which some boundary is labelled `mark_type` (XProf
    keys a step's breakdown by every label, even of an empty span).
    """
    n = len(group)
    if n == 0:
        e = np.zeros(0, np.int64)
        return {"group": e, "begin": e, "end": e, "label": e}, e
    nb = 2 * n
    bg, bt, bty, is_start = _boundaries(group, start, end, types)
    # The correct maximum after each boundary (0: nothing counted). A group's
    # boundaries sum to zero, so cumulative sums over all groups are per group.
    delta = np.where(is_start, 1, -1)
    kinds = np.flatnonzero(np.bincount(types))
    correct = np.zeros(nb, np.int64)
    for ty in kinds:  # ascending: a higher counted type overrides
        correct[np.cumsum(np.where(bty == ty, delta, 0)) > 0] = ty
    # Times: runs of boundaries with the same (group, time).
    new_time = np.empty(nb, bool)
    new_time[0] = True
    np.not_equal(bt[1:], bt[:-1], out=new_time[1:])
    new_group = np.empty(nb, bool)
    new_group[0] = True
    np.not_equal(bg[1:], bg[:-1], out=new_group[1:])
    new_time |= new_group
    first = np.flatnonzero(new_time)
    nt = len(first)
    t_group, t_time = bg[first], bt[first]
    group_first = new_group[first]
    group_last = np.ones(nt, bool)
    group_last[:-1] = group_first[1:]
    after = np.append(first[1:], nb)  # one past the time's last boundary
    n_end = np.add.reduceat(delta < 0, first, dtype=np.int64)
    c_full = correct[after - 1]
    # After the time's ends: the last end, else the time before (0 at a
    # group's first time: the previous group's counts are back to zero).
    c_ends = correct[first + n_end - 1]
    has_start = first + n_end < after
    s_top = np.where(has_start, bty[np.minimum(first + n_end, nb - 1)], 0)
    label = np.maximum(c_ends, s_top)
    origin = s_top > c_full
    if origin.any():
        idx = np.arange(nt)
        gfirst = np.maximum.accumulate(np.where(group_first, idx, 0))
        for ty in np.unique(s_top[origin]):
            started = np.maximum.accumulate(np.where(s_top == ty, idx, -1))
            reached = np.maximum.accumulate(np.where(c_full >= ty, idx, -1))
            held = np.zeros(nt, bool)
            held[1:] = (started[:-1] > reached[:-1]) & (started[:-1] >= gfirst[1:])
            label[held] = np.maximum(label[held], ty)
    t_end = np.where(group_last, t_time, np.append(t_time[1:], 0))
    spans = {"group": t_group, "begin": t_time, "end": t_end, "label": label}
    # Groups with a boundary labelled `mark_type`: the last boundary of each
    # time labels its span, so a group with a span so labelled is marked.
    # The others: check every boundary but the group's last one (starts
    # carry their time's label; ends a stale maximum from before, else the
    # correct maximum there, 0 after the group's last boundary).
    grank = np.cumsum(group_first) - 1
    marked = np.zeros(grank[-1] + 1, bool)
    marked[grank[(label == mark_type) & ~group_last]] = True
    rest = ~marked[grank]
    if rest.any():
        stale_before = np.zeros(nt, bool)
        stale_before[1:] = (label[:-1] > c_full[:-1]) & ~group_first[1:]
        before = np.append(0, label[:-1])
        n_start = after - first - n_end
        starts = n_start - (group_last & (n_start > 0))
        ends = n_end - (group_last & (n_start == 0))
        hit_end = np.add.reduceat((correct == mark_type) & (delta < 0), first, dtype=np.int64) > 0
        hit = ((starts > 0) & (label == mark_type)) | np.where(
            stale_before, (ends > 0) & (before == mark_type), hit_end
        )
        marked[grank[hit]] = True
    return spans, t_group[group_first][marked]


#: Events per sweep: `_sweep` (or the compiled walk's boundaries) makes temporaries of
#: twice this length, which stay a few MB each (reused by the allocator, not fresh pages)
#: instead of the whole run's hundreds of MB each. (1 << 17 rather than 1 << 20: the
#: breakdown of the 9.7 M CPU file's steps 1.3 s instead of 1.6.)
SWEEP_CHUNK = 1 << 17


def _breakdown(ev, steps, well_formed_type=HOST_COMPUTE):
    """Time per event type per step (ps): DataFrame indexed by group id.

    As XProf (`ConvertStepDetailsToStepInfo`): the group's events, not
    clipped, resolved into spans by `_sweep`; each span counts for its type
    what of it lies inside the step's span; what no span of a type covers is
    unknown time. `well_formed`: some boundary of the step is labelled
    `well_formed_type` (host compute for a CPU-only host; XProf's test is
    the type's presence in the breakdown, empty spans included).

    The walk runs in the compiled loops (`_walked`), else in numpy (`_swept`): the same
    numbers.
    """
    span = steps.set_index("group_id")[["begin_ps", "end_ps"]].sort_index()
    ids = span.index.to_numpy(np.int64)
    lo_all = span["begin_ps"].to_numpy(np.int64)
    hi_all = span["end_ps"].to_numpy(np.int64)
    # Each kept event's step (its row in `ids`; -1: none, or a marker).
    row = np.searchsorted(ids, ev["group"])
    keep = ev["type"] >= 0
    keep &= row < len(ids)
    keep[keep] = ids[row[keep]] == ev["group"][keep]
    # Span labels are the events' types or unknown time: one column each.
    present = np.bincount(ev["type"][keep], minlength=UNKNOWN_TIME + 1) > 0
    present[UNKNOWN_TIME] = True
    kinds = np.flatnonzero(present)
    rank = np.zeros(int(kinds[-1]) + 1, np.int64)
    rank[kinds] = np.arange(len(kinds))
    per = np.zeros((len(ids), len(kinds)), np.int64)  # (step, kind) ps
    marked = np.zeros(len(ids), bool)
    if not (native.available() and _walked(ev, row, keep, lo_all, hi_all, rank, well_formed_type, per, marked)):
        _swept(ev, row, keep, lo_all, hi_all, rank, well_formed_type, per, marked)
    out = pd.DataFrame(index=span.index)
    for k, ty in enumerate(kinds.tolist()):
        if ty != UNKNOWN_TIME and per[:, k].any():
            out[int(ty)] = per[:, k]
    out[UNKNOWN_TIME] = (hi_all - lo_all) - out.sum(axis=1).to_numpy(np.int64)
    out["well_formed"] = marked
    return out


#: Events from which `_walked` splits the steps between two threads.
_TWO_THREADS = 1 << 18


def _walked(ev, row, keep, lo, hi, rank, mark, per, marked):
    """`_breakdown`'s walk in the compiled loops (`native.step_walk`): the steps' events
    put together by a counting sort, each step's boundaries sorted and walked in C, the
    steps split between two threads on a big run. False where it cannot (a step spanning
    2**52 ps, more events than int32 counts): `_swept` then does the work."""
    row = np.where(keep, row, -1)
    found = native.rows_order(row, len(per))
    if found is None:
        return False
    offset, order = found
    columns = (
        np.ascontiguousarray(ev["start"], dtype=np.int64),
        np.ascontiguousarray(ev["end"], dtype=np.int64),
        np.ascontiguousarray(ev["type"], dtype=np.int16),
    )
    walk = lambda rows: native.step_walk(order, offset, rows, *columns, lo, hi, rank, mark, per, marked)  # noqa: E731
    total = int(offset[-1])
    if total >= _TWO_THREADS and len(per) > 1 and (os.cpu_count() or 1) > 1:
        # Steps split where half the events are: each thread writes its own steps' rows.
        cut = min(max(int(np.searchsorted(offset, total // 2)), 1), len(per) - 1)
        with ThreadPoolExecutor(max_workers=1) as pool:
            other = pool.submit(walk, range(cut, len(per)))
            answers = [walk(range(0, cut)), other.result()]
    else:
        answers = [walk(range(len(per)))]
    if all(a == 0 for a in answers):
        return True
    if any(a not in (0, native.WIDE) for a in answers):
        raise ValueError("step walk: a step or event type out of range")  # a bug here, not in the file
    per[:] = 0
    marked[:] = False
    return False


def _swept(ev, row, keep, lo_all, hi_all, rank, mark, per, marked):
    """`_breakdown`'s walk in numpy (`_sweep`): steps are independent, so they are swept a
    few at a time (whole steps, about `SWEEP_CHUNK` events), the per-step sums added up as
    they come."""
    pos = np.flatnonzero(keep)
    row = row[pos]
    n_steps, n_kinds = per.shape
    # A step goes to the chunk where its first event falls (chunks of about
    # SWEEP_CHUNK events, a step never split); positions stay ascending in each chunk.
    per_row = np.bincount(row, minlength=n_steps)
    chunk_of_row = (np.cumsum(per_row) - per_row) // SWEEP_CHUNK
    if not n_steps or chunk_of_row[-1] == 0:
        chunks = [slice(None)]
    else:
        order, counts = order_by_key(chunk_of_row[row])
        bounds = np.cumsum(counts)
        chunks = [order[b - c : b] for b, c in zip(bounds.tolist(), counts.tolist(), strict=True) if c]
    size = per.size
    flat = per.reshape(-1)
    for chunk in chunks:
        taken = pos[chunk]
        columns = [np.asarray(ev[k][taken], dtype=np.int64) for k in ("start", "end", "type")]
        spans, marked_rows = _sweep(row[chunk], *columns, mark)
        marked[marked_rows] = True
        r = spans["group"]
        ps = np.clip(np.minimum(spans["end"], hi_all[r]) - np.maximum(spans["begin"], lo_all[r]), 0, None)
        key = r * n_kinds + rank[spans["label"]]
        # Two exact float sums (each under 2**53) rather than one of int64 ps.
        high = np.bincount(key, weights=ps >> 32, minlength=size).astype(np.int64)
        low = np.bincount(key, weights=ps & 0xFFFFFFFF, minlength=size).astype(np.int64)
        flat += (high << 32) + low


def host_steps(space, drop_partial=True) -> pd.DataFrame:
    """The steps of one host (CPU-only run), as XProf's step database.

    One row a step, sorted by group id. Columns: step_number (the group id,
    XProf's step number), step_name (e.g. "train 3", what XProf shows),
    group_id, begin_ps (absolute), step_time_ms, then the breakdown in ms:
    device_compute_ms, device_to_device_ms, device_collectives_ms,
    host_compute_ms, kernel_launch_ms, input_ms (wait for input +
    host-to-device), output_ms, compilation_ms, all_others_ms, and the parts
    of input: wait_input_ms, host_to_device_ms. The breakdown columns add up
    to step_time_ms.

    Every step is computed once per file (the step database drops the first and last,
    XProf's pod viewer keeps them); each call gets its own table.
    """
    return _dropped(derived(space, "host_steps_all", lambda: _host_steps_all(space)), drop_partial)


def _dropped(steps, drop_partial):
    """A copy of a step table, without its first and last step where XProf drops them."""
    if drop_partial and len(steps) > DROP_PARTIAL_STEPS_ABOVE:
        return steps.iloc[1:-1].reset_index(drop=True)
    return steps.copy()


def _host_steps_all(space):
    roots = step_events(space)
    ev = _host_events(space, roots)
    if not len(ev["group"]) or not ev["marker"].any():
        return pd.DataFrame(columns=STEP_COLUMNS)
    m = ev["marker"]
    marks = pd.DataFrame({"group_id": ev["group"][m], "begin_ps": ev["start"][m], "end_ps": ev["end"][m]})
    marks["dur"] = marks["end_ps"] - marks["begin_ps"]
    # The longest marker (the first of equal ones, as XProf's strict >).
    steps = marks.sort_values(["group_id", "dur"], ascending=[True, False], kind="stable")
    steps = steps.drop_duplicates("group_id").reset_index(drop=True)
    steps = steps[steps["dur"] > 0]
    bd = _breakdown(ev, steps)
    steps = steps.set_index("group_id").join(bd)
    steps = steps[steps["well_formed"]]
    names = roots.set_index("group_id")["step_name"] if len(roots) else pd.Series(dtype=object)
    return _step_table(steps, [names.get(g, str(g)) for g in steps.index])


def _step_table(steps, step_names):
    """The public step table from per-step time (ps) by event type: names, times and breakdown (ms)."""
    out = pd.DataFrame(
        {
            "step_number": steps.index.to_numpy(np.int64),
            "step_name": step_names,
            "group_id": steps.index.to_numpy(np.int64),
            "begin_ps": steps["begin_ps"].to_numpy(np.int64),
            "step_time_ms": steps["dur"].to_numpy(np.float64) / _PS_PER_MS,
        }
    )
    for col, types in {**BREAKDOWN_COLUMNS, **INPUT_PARTS}.items():
        ps = sum((steps[t].fillna(0).to_numpy(np.float64) for t in types if t in steps), np.zeros(len(steps)))
        out[col] = ps / _PS_PER_MS
    return out


# --- GPU device steps (XProf's `ConvertDeviceTraceXPlaneToStepEvents`) ---

_STEP_INFO_LINE_ID = -559038737  # XProf's derived "Steps" line of a GPU plane


def _is_16bit(name, shapes):
    """XProf's precision rule: the tensor shapes decide when the kernel has them,
    else its name (half / fp16 in it)."""
    if shapes:
        return "half" in shapes
    return "half" in name or "fp16" in name


def gpu_event_type(names, shapes=None):
    """XProf's `ClassifyGpuEvent` by kernel name (and tensor shapes): memcpy
    HToD / DToH / DToD, `nccl...` collectives, else compute (16-bit by
    `_is_16bit`). Names such as `MemcpyH2D` do not
    match XProf's spellings and count as compute, as in XProf. Returns int64."""
    shapes = [""] * len(names) if shapes is None else shapes
    out = np.empty(len(names), dtype=np.int64)
    for i, (n, sh) in enumerate(zip(names, shapes)):  # over distinct (name, shape)
        low = n.lower()
        if low.startswith("memcpyhtod"):
            out[i] = HOST_TO_DEVICE
        elif low.startswith("memcpydtoh"):
            out[i] = DEVICE_TO_HOST
        elif low.startswith("memcpydtod"):
            out[i] = DEVICE_TO_DEVICE
        elif low.startswith("nccl"):
            out[i] = DEVICE_COLLECTIVES
        elif _is_16bit(low, str(sh or "").lower()):
            out[i] = DEVICE_COMPUTE_16
        else:
            out[i] = DEVICE_COMPUTE_32
    return out


def device_steps(space) -> pd.DataFrame:
    """`gpu_device_steps(space)`, computed once per file (the input pipeline's step database
    and the roofline's step spans both read it): shared, do not change it."""
    return derived(space, "gpu_device_steps", lambda: gpu_device_steps(space))


def gpu_device_steps(space, drop_partial=True) -> pd.DataFrame:
    """The steps of one host with GPUs, as XProf's step database for GPU.

    A step is a group id with a marker on a GPU plane's "Steps" line; its
    time is the longest marker of the group over the GPUs. Its events are the
    kernels and memcpys (raw stream lines, with `correlation_id` and
    `group_id`) of all GPUs, typed by `gpu_event_type`, clipped to the step
    and resolved by priority as in `host_steps`; uncovered time is "all
    others". Host events do not enter (XProf ignores them when there is a
    device). Same columns as `host_steps` (ms); step_name is the group id.

    A file that is not grouped yet (JAX's, `grouping.is_grouped`) has neither the
    `group_id` stats nor the "Steps" line: XProf adds both before its step analysis
    (grouping, then `ProcessUngroupedEvents` and `DeriveStepEventsFromGroups`), and so
    do we: the groups of `grouping.forward_filled_group_ids` and the markers of the
    derived Steps line (`gpu_lines.steps_line`).

    Every step is computed once per file (see `host_steps`); each call gets its own table.
    """
    return _dropped(derived(space, "gpu_device_steps_all", lambda: _gpu_device_steps_all(space)), drop_partial)


def _gpu_device_steps_all(space):
    from .gpu_lines import derives_gpu_lines, steps_line

    marks: list = []
    parts: dict[str, list] = {k: [] for k in ("group", "start", "end", "type")}
    for plane in gpu_planes(space):
        # The groups XProf's step analysis reads: the file's, or those it gives a file it
        # groups itself; one array per line of the device's own (derived lines left out).
        groups = forward_filled_group_ids(space, plane)
        derive = derives_gpu_lines(space, plane)
        if derive:
            derived_steps = steps_line(space, plane, groups)
            if derived_steps is not None:
                marks.append(
                    pd.DataFrame(
                        {
                            "group_id": derived_steps.stats["group_id"].astype(np.int64),
                            "begin_ps": derived_steps.start,
                            "end_ps": derived_steps.start + derived_steps.dur,
                        }
                    )
                )
        for li, line in plane.busy_lines:
            if line.id == _STEP_INFO_LINE_ID and not derive:
                g = line.stats(names=["group_id"]).get("group_id")
                if g is None:
                    continue
                ok = g.notna().to_numpy()
                marks.append(
                    pd.DataFrame(
                        {
                            "group_id": g[ok].to_numpy(np.int64),
                            "begin_ps": line.start_ps[ok],
                            "end_ps": line.start_ps[ok] + line.event_duration_ps[ok],
                        }
                    )
                )
            elif li in groups:
                # (Columns, not a DataFrame per line: a file may hold 20,000 GPU planes.)
                st = line.stat_columns(names=["correlation_id", "shape"])
                if "correlation_id" not in st:
                    continue
                group = groups[li]
                ok = (group >= 0) & ~pd.isna(st["correlation_id"])
                if not ok.any():
                    continue
                # Typed per distinct (name, shape): by the names' codes and the shapes'.
                names = line.names()
                shapes = (
                    pd.Series(st["shape"][ok]).astype(str).to_numpy(object)
                    if "shape" in st
                    else np.full(ok.sum(), "", dtype=object)
                )
                shape_codes, distinct_shapes = pd.factorize(shapes)
                key = np.asarray(names.codes, dtype=np.int64)[ok] * (len(distinct_shapes) + 1) + shape_codes
                _, first, pair = np.unique(key, return_index=True, return_inverse=True)
                first_names = np.asarray(names[np.flatnonzero(ok)[first]], dtype=object)
                types = gpu_event_type(first_names, shapes[first])[pair]
                parts["group"].append(group[ok].astype(np.int64))
                parts["start"].append(line.start_ps[ok])
                parts["end"].append(line.start_ps[ok] + line.event_duration_ps[ok])
                parts["type"].append(types)
    if not marks or not parts["group"]:
        return pd.DataFrame(columns=STEP_COLUMNS)
    ev = {k: np.concatenate(v) for k, v in parts.items()}
    table = pd.concat(marks, ignore_index=True)
    table["dur"] = table["end_ps"] - table["begin_ps"]
    steps = table.sort_values(["group_id", "dur"], ascending=[True, False], kind="stable")
    steps = steps.drop_duplicates("group_id").reset_index(drop=True)
    steps = steps[(steps["dur"] > 0) & steps["group_id"].isin(np.unique(ev["group"]))]
    bd = _breakdown(ev, steps).drop(columns="well_formed")
    steps = steps.set_index("group_id").join(bd)
    return _step_table(steps, [str(g) for g in steps.index])


def align_steps(sub, chief):
    """XProf's FindStepsAlignment of one host's steps with the chief's: (begin in sub,
    begin in chief, number of steps), the offset with the most overlapping time."""
    (sb, se), (cb, ce) = sub, chief
    n, m = len(sb), len(cb)
    if not n or not m:
        return 0, 0, 0
    sim = np.zeros(n + m - 1)
    i = j = 0
    while i < n and j < m:  # a walk over the steps (few), as XProf's
        if se[i] - sb[i] == 0:
            i += 1
            continue
        if ce[j] - cb[j] == 0:
            j += 1
            continue
        sim[j - i + n - 1] += max(0, min(se[i], ce[j]) - max(sb[i], cb[j]))
        if se[i] < ce[j]:
            i += 1
        elif ce[j] < se[i]:
            j += 1
        else:
            i, j = i + 1, j + 1
    order = np.concatenate([np.arange(m), -np.arange(1, n)])  # XProf's tie order: the first wins
    best = int(order[np.argmax(sim[order + n - 1])])
    bs, bc = (0, best) if best >= 0 else (-best, 0)
    return bs, bc, min(n - bs, m - bc)


def device_step_spans(space, kind):
    """(step numbers, begin_ps, end_ps) of one host's step database as the roofline model
    reads it (`kind`: the host's hardware); TPU: None (XProf's TPU steps, from a `Steps`
    line, are not reimplemented) unless it has no step line."""
    if kind == "TPU":
        has_steps = any(
            line.name == "Steps" and len(line)
            for p in space.planes
            if p.name.startswith(TPU_PLANE_PREFIX)
            for line in p.lines
        )
        return None if has_steps else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64))
    steps = device_steps(space)
    if steps.empty:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    begin = steps["begin_ps"].to_numpy(np.int64)
    end = begin + np.rint(steps["step_time_ms"].to_numpy(np.float64) * 1e9).astype(np.int64)
    return steps["group_id"].to_numpy(np.int64), begin, end


def step_intersection(step_tables: Sequence[pd.DataFrame | None]) -> tuple[list[int], int]:
    """XProf's step intersection (`StepIntersection`): ([first step index of each host],
    number of steps all share). Each table needs begin_ps and step_time_ms; a host
    that is None takes no part (index 0)."""
    spans: list[tuple[np.ndarray, np.ndarray] | None] = []
    for t in step_tables:
        if t is None:
            spans.append(None)
            continue
        starts = t["begin_ps"].to_numpy(np.float64) if len(t) else np.zeros(0)
        duration = np.round(t["step_time_ms"].to_numpy(np.float64) * 1e9) if len(t) else np.zeros(0)
        spans.append((starts, starts + duration))
    workers = [i for i, s in enumerate(spans) if s is not None]
    if not workers:
        return [0] * len(spans), 0

    def stepped(i):
        b, e = spans[i]  # type: ignore[misc]  # (a worker's span is there)
        real = e > b
        return float(e[real].max() - b[real].min()) if real.any() else 0.0

    chief = min(workers, key=stepped)  # the first of equals, in host order
    chief_span = spans[chief]
    assert chief_span is not None  # (a worker)
    n_chief = len(chief_span[0])
    if n_chief == 0:
        return [0] * len(spans), 0
    align: dict[int, tuple[int, int, int]] = {}
    for i in workers:
        align[i] = (0, 0, n_chief) if i == chief else align_steps(spans[i], chief_span)
    begin = max(a[1] for a in align.values())
    end = min(a[1] + a[2] for a in align.values())
    if begin > end:
        return [0] * len(spans), 0
    first = [int(align[i][0] + begin - align[i][1]) if i in align else 0 for i in range(len(spans))]
    return first, int(end - begin)
