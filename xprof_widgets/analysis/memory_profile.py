"""Memory Profile: an allocator's use of memory over time, and what was live at its peak.

Computes, from the `MemoryAllocation` / `MemoryDeallocation` events that
TensorFlow's and XLA's allocators record on the host plane (`/host:CPU`),
the same numbers as XProf 2.24.2's memory profile tool
(`xprof/convert/xplane_to_memory_profile.cc`):

* one *snapshot* per allocator event: stack (`bytes_reserved`), heap
  (`bytes_allocated`), free (`bytes_available`) bytes, fragmentation, and the
  activity (requested / allocated bytes, address, op, step, region, data
  type, shape). Events are split by allocator: `allocator_name`, else
  `index_on_host` / `device_ordinal`.
* the peak within the profile: the event, in file order, with the largest
  stack + heap (ties: the last one). Its time, stack, heap, free bytes and
  fragmentation form the summary; `peak_bytes_in_use` (the allocator's
  lifetime peak) is read from the last event in file order.
* after sorting by time: a missing step becomes the previous step + 1, and a
  deallocation takes the op / region / type / shape of the allocation at the
  same address.
* the breakdown at the peak: allocations of the peak's step up to the peak
  time that are still live, by address; the heap they do not explain becomes
  XProf's "unused preallocated device memory" row, the stack its own row;
  sorted by size and identical rows merged into `occurrences`.

Times are picoseconds: `time_ps` absolute, `time_offset_ps` relative to the
start of the event's thread line as XProf reports it; `time_ms` is the
latter in ms. Sizes are integer bytes.

Step ids: XProf groups events into steps before this analysis (the "event
forest" of `group_events.cc`) and reads the `group_id` it adds; here
`analysis.grouping.group_ids` does the same (the file's own `group_id`
stats where it has them), then XProf's fill rule gives ungrouped events the
previous step + 1.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from ..io.xspace import categorical
from .core.availability import NO_EVENTS_REASON, allocator_codes, has_allocator_events
from .core.cache import derived
from .core.grouping import GROUPING_STATS, group_ids, of_line_at, reads_line_stats
from .core.planes import HOST_PLANE

#: XProf's default number of points in the timeline it shows.
MAX_TIMELINE_POINTS = 1000
UNUSED_PREALLOCATED = "unused preallocated device memory"
ACTIVITIES = pd.Index(["alloc", "free"], dtype=object)

# TensorFlow's DataType enum, as XProf names it (`DataTypeString`).
_DATA_TYPES = {
    0: "INVALID",
    1: "float",
    2: "double",
    3: "int32",
    4: "uint8",
    5: "int16",
    6: "int8",
    7: "string",
    8: "complex64",
    9: "int64",
    10: "bool",
    11: "qint8",
    12: "quint8",
    13: "qint32",
    14: "bfloat16",
    15: "qint16",
    16: "quint16",
    17: "uint16",
    18: "complex128",
    19: "half",
    20: "resource",
    21: "variant",
    22: "uint32",
    23: "uint64",
    24: "float8_e5m2",
    25: "float8_e4m3fn",
    26: "float8_e4m3fnuz",
    27: "float8_e4m3b11fnuz",
    28: "float8_e5m2fnuz",
    29: "int4",
    30: "uint4",
    31: "int2",
    32: "uint2",
}
_REF_OFFSET = 100

_STATS = [
    "allocator_name",
    "index_on_host",
    "device_ordinal",
    "bytes_reserved",
    "bytes_allocated",
    "bytes_available",
    "fragmentation",
    "peak_bytes_in_use",
    "requested_bytes",
    "allocation_bytes",
    "addr",
    "tf_op",
    "group_id",
    "region_type",
    "data_type",
    "shape",
]

TIMELINE_COLUMNS = (
    "time_ps time_offset_ps time_ms heap_bytes stack_bytes free_bytes fragmentation peak_bytes_in_use "
    "activity op_name requested_bytes allocation_bytes address region_type data_type shape step_id"
).split()
_ROW_COLUMNS = ["op_name", "allocation_bytes", "requested_bytes", "region_type", "data_type", "shape"]
BREAKDOWN_COLUMNS = "op_name allocation_bytes requested_bytes occurrences region_type data_type shape".split()


def data_type_name(number):
    """XProf's name of a TensorFlow DataType enum number (`1` -> `"float"`, `101` -> `"float_ref"`)."""
    number = int(number)
    ref = number > _REF_OFFSET
    base = number - _REF_OFFSET if ref else number
    name = _DATA_TYPES.get(base)
    if name is None:
        return f"unknown dtype enum ({number})"
    return name + "_ref" if ref else name


# --------------------------------------------------------------------------
# Reading the events


def _line_events(line):
    """The allocator events of one line as a dict of columns (None if it has none).

    Stats are read as XProf reads them (`IntValue`, `DoubleValue`,
    `StrOrRefValue`: 0, 0.0 or "" where an event lacks one or has another kind
    of value). `event` holds each one's index on the line, for its group id
    (the step).
    """
    idx, is_alloc = _allocator_event_index(line.names())
    if not len(idx):
        return None
    n = len(idx)
    st = line.stat_table(names=_STATS, events=idx)
    codes, uniq = _memory_id(st, n)
    # Data types by number: a name table for the usual numbers, "" where missing.
    names = np.array([data_type_name(u) for u in range(_REF_OFFSET * 2)] + [""], dtype=object)
    ev, numbers = st.ints("data_type")
    code = np.where((numbers >= 0) & (numbers < _REF_OFFSET * 2), numbers, -1)
    odd = code == -1
    if odd.any():  # other numbers: named one by one
        extra, inverse = np.unique(numbers[odd], return_inverse=True)
        code[odd] = len(names) + inverse
        names = np.concatenate([names, np.array([data_type_name(u) for u in extra], dtype=object)])
    data_type = np.full(n, _REF_OFFSET * 2)
    data_type[ev] = code
    return {
        "event": idx,
        "memory_id": categorical(codes, uniq),
        "time_ps": line.start_ps[idx],
        "time_offset_ps": line.start_ps[idx] - line.timestamp_ns * 1000,
        "heap_bytes": st.int_column("bytes_allocated"),
        "stack_bytes": st.int_column("bytes_reserved"),
        "free_bytes": st.int_column("bytes_available"),
        "fragmentation": st.float_column("fragmentation"),
        "peak_bytes_in_use": st.int_column("peak_bytes_in_use"),
        "is_alloc": is_alloc[idx],
        "op_name": st.str_category("tf_op"),
        "requested_bytes": st.int_column("requested_bytes"),
        "allocation_bytes": st.int_column("allocation_bytes"),
        "address": st.int_column("addr", np.uint64),
        "region_type": st.str_category("region_type"),
        "data_type": categorical(data_type, names),
        "shape": st.str_category("shape"),
    }


def _memory_id(st, n):
    """Each of the `n` events' memory id, the allocator's name, else the device index XLA
    gives: (codes, names), the id of event i `names[codes[i]]`, only names some event has
    (a million events have a few allocators: no string per event is made)."""
    names = [np.array([""], dtype=object)]
    codes = np.zeros(n, np.int64)
    size = 1
    for key in ("index_on_host", "device_ordinal"):
        ev, values = st.ints(key)
        uniq, inverse = np.unique(values, return_inverse=True)
        codes[ev] = size + inverse
        names.append(uniq.astype(str).astype(object))
        size += len(uniq)
    ev, at, values = st.string_codes("allocator_name")
    codes[ev] = size + at
    names.append(values)
    names = np.concatenate(names)
    used = np.bincount(codes, minlength=len(names)) > 0
    return (np.cumsum(used) - 1)[codes], names[used]


_PEAK_STATS = (
    *("index_on_host", "device_ordinal", "allocator_name"),
    *("bytes_allocated", "bytes_reserved", "bytes_available"),
)


def allocator_peaks(run, host=None):
    """Each allocator's highest use on a host: a DataFrame of memory_id, peak_bytes (heap +
    stack at its highest; the last event at that height) and capacity_bytes (heap +
    stack + free there), by memory_id. The few stats this needs only, and no step
    grouping: the per-host summary of a pod reads this, not `allocator_events`."""
    space = run.xspace(host)
    plane = space.plane(HOST_PLANE)
    ids, used, free = [], [], []
    for line in [] if plane is None else plane.lines:
        idx = _allocator_event_index(line.names())[0] if len(line) else ()
        if not len(idx):
            continue
        st = line.stat_table(names=_PEAK_STATS, events=idx)
        codes, names = _memory_id(st, len(idx))
        ids.append(names[codes])
        used.append(st.int_column("bytes_allocated").astype(np.float64) + st.int_column("bytes_reserved"))
        free.append(st.int_column("bytes_available").astype(np.float64))
    if not ids:
        return pd.DataFrame({"memory_id": [], "peak_bytes": [], "capacity_bytes": []})
    total = np.concatenate(used)
    capacity = total + np.concatenate(free)
    mem = pd.DataFrame({"memory_id": np.concatenate(ids).astype(str), "peak_bytes": total, "capacity_bytes": capacity})
    at_peak = mem.sort_values("peak_bytes", kind="stable").groupby("memory_id", sort=True).tail(1)
    return at_peak.sort_values("memory_id").reset_index(drop=True)


_CATEGORICAL = ("memory_id", "op_name", "region_type", "data_type", "shape")


def allocator_events(run, host=None):
    """Every allocator event of a host's `/host:CPU` plane, in file order (line by line).

    A DataFrame with the raw per-event columns (see TIMELINE_COLUMNS, plus
    `memory_id` and `is_alloc`), before XProf's post-processing.
    """
    space = run.xspace(host)
    return derived(space, "allocator_events", lambda: _allocator_events(run, space, host))


def _allocator_events(run, space, host):
    plane = space.plane(HOST_PLANE)
    if plane is None or not has_allocator_events(run, host)[0]:
        parts = []
    else:
        # The grouping (the steps) and the allocator columns read stats of the same
        # events: the stats both read of a host line are decoded once, in one walk over
        # its records (the decoding is most of the time here), the grouping's of every
        # event and the allocator columns' (for its allocator events). Two threads, numpy
        # releasing the GIL: the grouping walks the lines from the first, this thread
        # decodes them from the last (each line by whichever reaches it first, lines
        # without allocator events too: the grouping, the longer task, finds them
        # decoded), then builds the allocator columns while the grouping finishes. A file
        # whose grouping reads no stats (one grouped already, or with nothing to group)
        # decodes the allocator events' stats alone, line by line.
        if not reads_line_stats(space):
            groups = group_ids(space, eager_marks=False)
            lines = [(i, _line_events(ln)) for i, ln in enumerate(plane.lines) if len(ln)]
        else:
            shared = [ln for ln in plane.lines if len(ln)]
            with space.sharing_stats(shared, names={*_STATS, *GROUPING_STATS}):
                with ThreadPoolExecutor(max_workers=1) as pool:
                    grouping = pool.submit(group_ids, space, eager_marks=False)
                    for ln in reversed(shared):
                        ln.stat_table(names=_STATS)
                    lines = [(i, _line_events(ln)) for i, ln in reversed(list(enumerate(plane.lines))) if len(ln)]
                    lines.reverse()
                    groups = grouping.result()
        parts = []
        for i, p in lines:
            if p:
                p["step_id"] = of_line_at(groups, plane, i, p.pop("event"), -1).astype(np.int64, copy=False)
                parts.append(p)
    if not parts:
        return pd.DataFrame({k: pd.Series(dtype=object) for k in ["memory_id", *TIMELINE_COLUMNS, "is_alloc"]})
    columns = {
        k: union_categoricals([p[k] for p in parts], sort_categories=True)
        if k in _CATEGORICAL
        else np.concatenate([p[k] for p in parts])
        for k in parts[0]
    }
    # (Not consolidated: a block per column, none copied into 2-D blocks of a kind.)
    return pd.DataFrame(columns, copy=False)


def _allocator_event_index(names):
    """(index of the allocation and deallocation events, whether each event of the line
    is an allocation) from a line's Categorical of event names."""
    codes = np.asarray(names.codes)
    found = allocator_codes(names)
    alloc_code, free_code = np.where(found >= 0, found, -2)
    is_alloc = codes == alloc_code
    return np.flatnonzero(is_alloc | (codes == free_code)), is_alloc


def memory_ids(run, host=None):
    """The allocators with events on `host` (default: the first), sorted as XProf lists them."""
    ev = allocator_events(run, host)
    return _memory_ids(ev)


# --------------------------------------------------------------------------
# Post-processing one allocator


def _fill_steps(step):
    """XProf's rule: a missing step (-1) becomes the last valid step before it + 1 (0 at the start)."""
    missing = np.flatnonzero(step == -1)
    if not len(missing):
        return step
    valid = np.flatnonzero(step != -1)
    if not len(valid):
        return np.zeros_like(step)
    before = np.searchsorted(valid, missing) - 1  # the last valid one before each missing
    out = step.copy()
    out[missing] = np.where(before >= 0, step[valid[np.maximum(before, 0)]] + 1, 0)
    return out


def _memory_ids(ev):
    """The memory ids of some allocator events, sorted by their bytes as XProf lists them."""
    col = ev["memory_id"]
    seen = (
        col.cat.remove_unused_categories().cat.categories
        if isinstance(col.dtype, pd.CategoricalDtype)
        else pd.unique(col)
    )
    return sorted((str(s) for s in seen), key=lambda s: s.encode())


def _copy_allocation_metadata(tl):
    """Deallocations take op, region, data type and shape from their allocation (matched by address).

    Per address, an allocation is remembered only when none is pending, and a
    deallocation consumes the pending one: so each deallocation pairs with the
    first allocation after the previous deallocation at its address, if any.
    """
    is_free = ~tl["is_alloc"].to_numpy()
    addr, seen = pd.factorize(tl["address"].to_numpy())
    n = len(addr)
    # Each address's events together, in time order (a radix sort where the addresses
    # number at most 2^16, as an allocator's do: a few thousand in a million events).
    order = np.argsort(addr.astype(np.uint16) if len(seen) <= 1 << 16 else addr, kind="stable")
    a, f = addr[order], is_free[order]
    # A segment: an address's events after its previous deallocation, up to the next one.
    start = np.ones(n, bool)
    start[1:] = (a[1:] != a[:-1]) | f[:-1]
    pos = np.arange(n)
    seg_start = np.maximum.accumulate(np.where(start, pos, 0))
    first_alloc = np.minimum.accumulate(np.where(f, n, pos)[::-1])[::-1]  # at or after each (n: none)
    frees = np.flatnonzero(f)
    src = first_alloc[seg_start[frees]]
    has = src < frees  # the segment's first allocation comes before its deallocation
    dst, src = order[frees[has]], order[src[has]]
    for col in ("op_name", "region_type", "data_type", "shape"):
        values = tl[col].array  # a Categorical (see allocator_events): move codes, not strings
        codes = values.codes.copy()
        codes[dst] = codes[src]
        tl[col] = pd.Categorical.from_codes(codes, dtype=values.dtype)
    return tl


def _box_filter(total, max_points):
    """Indices XProf keeps to draw at most `max_points` snapshots: the max of each box, first on ties."""
    n = len(total)
    if n <= max_points:
        return np.arange(n)
    width = n // max_points
    count1 = max_points * (width + 1) - n
    count2 = max_points - count1
    picks = []
    for w, count, start in ((width, count1, 0), (width + 1, count2, width * count1)):
        if count <= 0:
            continue
        boxes = total[start : start + w * count].reshape(count, w)
        picks.append(start + np.arange(count) * w + np.argmax(boxes, axis=1))
    return np.concatenate(picks)


def _live_at(tl, time_offset_ps, step_id=None):
    """Allocations live at a time: the last event of each address up to then is an allocation.

    Returns (indices of the live allocations, bytes of deallocations whose
    allocation is not among the events considered).
    """
    t = tl["time_offset_ps"].to_numpy()
    keep = t <= time_offset_ps
    if step_id is not None:
        keep &= tl["step_id"].to_numpy() == step_id
    rows = np.flatnonzero(keep)
    addr = tl["address"].to_numpy()[rows]
    is_alloc = (tl["activity"] == "alloc").to_numpy()[rows]
    df = pd.DataFrame({"addr": addr, "alloc": is_alloc})
    prev_alloc = df.groupby("addr", sort=False)["alloc"].shift(1).fillna(False).astype(bool).to_numpy()
    unmatched_free = ~is_alloc & ~prev_alloc
    last = ~df.duplicated("addr", keep="last").to_numpy()
    live = rows[last & is_alloc]
    unmatched_bytes = int(tl["allocation_bytes"].to_numpy()[rows][unmatched_free].sum())
    return live, rows, unmatched_bytes


def _merge_rows(rows):
    """Sort like XProf (largest first, then by name, region, type, shape) and merge identical rows."""
    if rows.empty:
        return pd.DataFrame(
            {c: pd.Series(dtype=np.int64 if "bytes" in c or c == "occurrences" else object) for c in BREAKDOWN_COLUMNS}
        )
    keys = ["allocation_bytes", "requested_bytes", "op_name", "region_type", "data_type", "shape"]
    rows = rows.astype({c: object for c in keys if isinstance(rows[c].dtype, pd.CategoricalDtype)})
    out = rows.groupby(keys, sort=False).size().rename("occurrences").reset_index()
    out["_neg_a"] = -out["allocation_bytes"]
    out["_neg_r"] = -out["requested_bytes"]
    out = out.sort_values(["_neg_a", "_neg_r", "op_name", "region_type", "data_type", "shape"], kind="stable")
    return out[BREAKDOWN_COLUMNS].reset_index(drop=True)


def _special_rows(unmapped_bytes, stack_bytes):
    rows = []
    if unmapped_bytes > 0:
        rows.append((UNUSED_PREALLOCATED, unmapped_bytes, "persist/dynamic"))
    if stack_bytes > 0:
        rows.append(("stack", stack_bytes, "stack"))
    return pd.DataFrame(
        {
            "op_name": [r[0] for r in rows],
            "allocation_bytes": np.array([r[1] for r in rows], dtype=np.int64),
            "requested_bytes": np.array([r[1] for r in rows], dtype=np.int64),
            "region_type": [r[2] for r in rows],
            "data_type": [data_type_name(0)] * len(rows),
            "shape": ["unknown"] * len(rows),
        }
    )


@dataclass
class MemoryProfileResult:
    """One allocator's memory profile, as XProf 2.24.2 computes it.

    Sizes are bytes; `peak_time_ps` is relative to the start of the peak
    event's thread line, as XProf reports it (`peak_time_ms` in ms), and
    `peak_time_abs_ps` absolute. `timeline` holds every snapshot in time order
    (see `sampled_timeline` for what XProf draws); its string columns (op name,
    region type, data type, shape, activity) are Categoricals: a million
    snapshots share a few thousand distinct strings. `reason` is empty when
    there is data, else says why there is none.
    """

    memory_id: str = ""
    memory_ids: list = field(default_factory=list)
    timeline: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=TIMELINE_COLUMNS))
    peak_bytes_in_use: int = 0
    peak_heap_bytes: int = 0
    peak_stack_bytes: int = 0
    peak_free_bytes: int = 0
    peak_time_ps: int = 0
    peak_time_abs_ps: int = 0
    capacity_bytes: int = 0
    fragmentation_at_peak: float = 0.0
    peak_step_id: int = 0
    breakdown_at_peak: pd.DataFrame = field(default_factory=lambda: _merge_rows(pd.DataFrame()))
    host: str = ""
    reason: str = ""

    def __repr__(self):
        if self.reason:
            return f"<MemoryProfileResult: empty ({self.reason[:60]}...)>"
        return (
            f"<MemoryProfileResult {self.memory_id!r} of {self.memory_ids}: {len(self.timeline)} snapshots, "
            f"peak {self.peak_heap_bytes + self.peak_stack_bytes} bytes at {self.peak_time_ms:.3f} ms>"
        )

    @property
    def peak_time_ms(self):
        """Time of the peak in ms, as XProf shows it."""
        return self.peak_time_ps / 1e9

    @property
    def peak_bytes_in_profile(self):
        """Stack + heap bytes at the peak within the profile."""
        return self.peak_heap_bytes + self.peak_stack_bytes

    def sampled_timeline(self, max_points=MAX_TIMELINE_POINTS):
        """The timeline as XProf draws it: at most `max_points` rows, each the largest
        (heap + stack) of a box of consecutive snapshots, so the peak is never lost."""
        tl = self.timeline
        total = tl["heap_bytes"].to_numpy() + tl["stack_bytes"].to_numpy()
        return tl.iloc[_box_filter(total, int(max_points))].reset_index(drop=True)

    def breakdown_at(self, time_ps, step_id=None):
        """Allocations live at absolute time `time_ps` (ps), merged like `breakdown_at_peak`.

        Unlike XProf's breakdown, all steps count unless `step_id` is given, and
        no synthetic rows are added: the rows are real allocations only.
        `breakdown_at(self.peak_time_abs_ps, self.peak_step_id)` is the
        breakdown at peak without XProf's "unused preallocated device memory"
        and "stack" rows.
        """
        tl = self.timeline
        if tl.empty:
            return _merge_rows(pd.DataFrame())
        # The timeline is in XProf's order, by offset within each line. Lines may start
        # at different times: the moment goes onto the offset clock of the latest event
        # at or before it (the peak's own event for the peak time).
        absolute = tl["time_ps"].to_numpy()
        shift = absolute - tl["time_offset_ps"].to_numpy()
        before = np.flatnonzero(absolute <= int(time_ps))
        if len(before):
            j = before[np.argmax(absolute[before])]
            cutoff = int(time_ps) - int(shift[j])
        else:
            cutoff = int(time_ps) - int(shift.max())
        live, _, _ = _live_at(tl, cutoff, step_id)
        return _merge_rows(tl.iloc[live][_ROW_COLUMNS])


def _empty(run, host, reason, ids=()):
    return MemoryProfileResult(memory_ids=list(ids), host=host or run.readable_hosts[0], reason=reason)


def memory_profile(run, memory_id=None, host=None):
    """XProf's memory profile of one allocator on one host.

    `memory_id` is one of `result.memory_ids` (default: the first, as XProf
    selects it); `host` defaults to the run's first host (XProf's tool reads
    one host). Returns a MemoryProfileResult; with no allocator events its
    `reason` says why and how to record them. Raises KeyError for an unknown
    `memory_id`, listing the ids.
    """
    host = run.readable_hosts[0] if host is None else host
    ev = allocator_events(run, host)
    if ev.empty:
        if memory_id is not None:
            raise KeyError(f"no memory id {memory_id!r} on host {host!r}: {NO_EVENTS_REASON}")
        return _empty(run, host, NO_EVENTS_REASON)
    ids = _memory_ids(ev)
    if memory_id is None:
        memory_id = ids[0]
    memory_id = str(memory_id)
    if memory_id not in ids:
        raise KeyError(f"no memory id {memory_id!r} on host {host!r}; memory ids: {ids}")
    # This allocator's events, in file order (its rows of the host's, not copied: a
    # million-event frame is taken once, below, in time order).
    one = len(ids) == 1 and not ev["memory_id"].isna().any()
    mine = None if one else np.flatnonzero((ev["memory_id"] == memory_id).to_numpy())
    column = (lambda c: ev[c].to_numpy()) if mine is None else (lambda c: ev[c].to_numpy()[mine])

    # Summary, in file order as XProf visits the events.
    total = column("heap_bytes") + column("stack_bytes")
    peak_bytes = total.max()
    p = int(np.flatnonzero(total == peak_bytes)[-1])
    peak = ev.iloc[p if mine is None else int(mine[p])]
    last_peak_in_use = int(column("peak_bytes_in_use")[-1])

    # Time order (stable: ties keep file order), then XProf's two fix-ups.
    time = column("time_offset_ps")
    if len(time) < 2 or (time[1:] >= time[:-1]).all():
        order = mine  # in time order already (one line, or lines one after another)
    else:
        order = np.argsort(time, kind="stable")
        order = order if mine is None else mine[order]
    tl = (ev.copy(deep=False) if order is None else ev.take(order)).reset_index(drop=True)
    tl["step_id"] = _fill_steps(tl["step_id"].to_numpy())
    tl = _copy_allocation_metadata(tl)
    tl["activity"] = pd.Categorical.from_codes(np.where(tl["is_alloc"].to_numpy(), 0, 1), categories=ACTIVITIES)
    tl["time_ms"] = tl["time_offset_ps"].to_numpy() / 1e9

    # The peak's step: that of the last snapshot in time order at the peak bytes.
    tl_total = tl["heap_bytes"].to_numpy() + tl["stack_bytes"].to_numpy()
    at_peak = np.flatnonzero(tl_total == peak_bytes)
    peak_step = int(tl["step_id"].to_numpy()[at_peak[-1]]) if len(at_peak) else 0

    live, rows, unmatched_free_bytes = _live_at(tl, int(peak["time_offset_ps"]), peak_step)
    alloc_bytes = tl["allocation_bytes"].to_numpy()[rows]
    is_alloc = tl["is_alloc"].to_numpy()[rows]
    unmapped = (
        int(peak["heap_bytes"])
        - int(alloc_bytes[is_alloc].sum())
        + int(alloc_bytes[~is_alloc].sum())
        - unmatched_free_bytes
    )
    rows_df = pd.concat(
        [tl.iloc[live][_ROW_COLUMNS], _special_rows(unmapped, int(peak["stack_bytes"]))],
        ignore_index=True,
    )
    breakdown = _merge_rows(rows_df)

    return MemoryProfileResult(
        memory_id=memory_id,
        memory_ids=ids,
        timeline=tl[TIMELINE_COLUMNS],
        peak_bytes_in_use=last_peak_in_use,
        peak_heap_bytes=int(peak["heap_bytes"]),
        peak_stack_bytes=int(peak["stack_bytes"]),
        peak_free_bytes=int(peak["free_bytes"]),
        peak_time_ps=int(peak["time_offset_ps"]),
        peak_time_abs_ps=int(peak["time_ps"]),
        capacity_bytes=int(peak["heap_bytes"]) + int(peak["stack_bytes"]) + int(peak["free_bytes"]),
        fragmentation_at_peak=float(peak["fragmentation"]),
        peak_step_id=peak_step,
        breakdown_at_peak=breakdown,
        host=host,
    )
