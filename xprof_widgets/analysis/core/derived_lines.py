"""The lines XProf derives on a TPU plane before its trace viewer shows it.

A TPU profile has `XLA Modules` and `XLA Ops` lines; XProf adds four kinds of
line from the ops' stats when it loads the file (`PreprocessSingleHostXSpace`
-> `GenerateDerivedTimeLines` -> `DeriveLinesFromStats`, for every plane named
`/device:TPU:N`; xprof `xprof/utils/derived_timeline.cc`,
`xprof/utils/host_offload_utils.cc`):

* **Framework Name Scope**: the name scopes of each op's `tf_op` stat (the
  path split on "/", the last part being the op), one nesting level per scope.
* **Framework Ops**: the `tf_op` itself, named after its op type (JAX:
  `add` for `jit(f)/jit(main)/add:`), the full name kept as long name.
* **Source code**: the `source` stat (`file.py:29`).
* **Host Offload Ops row N**: a `copy-start`/`copy-done` (or
  `dynamic-slice-*`, `dynamic-update-slice-*`) pair whose HLO names host
  memory (`S(5)`), as one event from the start's start to the done's end,
  named `offload-copy.3`; rows are packed greedily.

**The merge rule** (`DerivedXLineBuilder::ExpandOrAddLevelEvent`): the
plane's events are read in time order (start, then shorter first), async ones
(`_a`) skipped. Per line and nesting level, an op extends the level's last
derived event when it has the same name and `group_id` and, without a
`group_id`, starts no later than that event's end plus twice its duration;
otherwise it opens a new event, which closes every deeper level of the line,
and a new top-level name scope also closes the open framework op. So a run
of ops of one framework op within one module run becomes one event, split
where an op of another framework op comes between (ops with no `tf_op` feed
nothing and split nothing). When a stack of name scopes closes, scopes with
the same span as the one above are shortened by 1 ns per level
(`AdjustDurationForTraceViewer`), so that they nest visibly. Derived events
carry the `group_id` of their first op.

**Groups** (`device_groups`): with no host step tied to the device, XProf
groups TPU events "in lock step" (`GroupTpuEventsOSS`): each event of the
`XLA Modules` line (or of a non-empty `Steps` line) is a group, numbered in
line order from 0 on every core, and every other event takes the group of
the module run it overlaps. Not followed: host steps that XProf ties to the
modules through their launch context ids (a host with `StepTraceAnnotation`
steps driving the TPU); the group ids would then differ, and ops of several
module runs of one step could merge.

**Order of ties**: events with the same start and duration (zero-length
`copy-done` ops at a barrier) reach XProf's loop in the order its
`std::sort` leaves them (libstdc++ introsort, not stable). It decides which
host offload row an event lands in, so it is emulated (`libstdcxx_sort_order`,
planes up to EMULATED_SORT_LIMIT events; larger ones keep the file's order).

Vectorised: a level's merges are "same key as the previous input and not
forced new", then the gap rule, which only ever splits: checked against the
earliest possible head of each run, a failing op is a true split (later heads
only lower the bar), so splits are added pass after pass until none fails
(usually one or two passes). Levels go top-down, one pass each. The only
loops over events: the greedy packing of host offload rows (one iteration
per host offload copy) and the sort emulation (only where ties matter).

XProf only derives these when the file is not grouped already (no
`group_id` stat in any plane: `IsXSpaceGrouped`). GPU planes' derived lines
(`DeriveEventsFromAnnotations`, `Steps`, launch stats) are not derived:
the GPU profiles we have are grouped already, so XProf derives none either.

Times are integer picoseconds, absolute (as in the file).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ...io.xspace import filled
from .tf_op import parse_tf_op, tf_op_event_name

#: XProf's `kTpuPlaneRegex`: the TensorCore planes it derives lines for.
TPU_CORE_PLANE = re.compile(r"/device:TPU:[0-9]*")
NAME_SCOPE_LINE = "Framework Name Scope"
TF_OP_LINE = "Framework Ops"
SOURCE_LINE = "Source code"
HOST_OFFLOAD_LINE = "Host Offload Ops"
# XProf's thread ids for derived lines (tsl `trace_utils.h`, kThreadIdDerivedMin = 0xdeadbeef):
# the trace orders tracks by them, so these come after the file's lines.
THREAD_ID_DERIVED_MIN = 0xDEADBEEF
TID_NAME_SCOPE = THREAD_ID_DERIVED_MIN + 2
TID_TF_OP = THREAD_ID_DERIVED_MIN + 3
TID_SOURCE = THREAD_ID_DERIVED_MIN + 7
TID_HOST_OFFLOAD = THREAD_ID_DERIVED_MIN + 8
#: kThreadIdHostOffloadOpEnd - kThreadIdHostOffloadOpStart + 1; past it the last row takes the rest.
MAX_HOST_OFFLOAD_ROWS = 41
#: StatType::kIsAsync: async events feed no derived line; host offload events carry it.
IS_ASYNC = "_a"
HOST_MEMORY_LABEL = "S(5)"
STEPS_LINE = "Steps"
XLA_MODULES_LINE = "XLA Modules"  # xla::Layout::kHostMemorySpace in an HLO shape
HOST_OFFLOAD_KEYWORDS = (
    "copy-start",
    "copy-done",
    "dynamic-slice-start",
    "dynamic-slice-done",
    "dynamic-update-slice-start",
    "dynamic-update-slice-done",
)

# ParseTfOpFullname (tsl `tf_op_utils.cc`).


@dataclass
class DerivedLine:
    """One derived line of a plane: its events (in derivation order) and where each came from.

    `start` / `dur` (int64 ps), `names` (shown), `long_names` (the full name
    when it differs, else ""), `level` (name-scope depth, 0 elsewhere).
    Event i was made from the file events `members_line[k]`,
    `members_event[k]` (line index in the plane, event index in the line)
    for k in `range(member_lo[i], member_hi[i])`. `stats`: per-event
    columns of the stats XProf gives the events (None where absent).
    """

    name: str
    tid: int
    start: np.ndarray
    dur: np.ndarray
    names: np.ndarray
    long_names: np.ndarray
    level: np.ndarray
    members_line: np.ndarray
    members_event: np.ndarray
    member_lo: np.ndarray
    member_hi: np.ndarray
    stats: dict = field(default_factory=dict)

    def __len__(self):
        return len(self.start)

    def take(self, order):
        """The same line with its events in `order` (members kept)."""
        return DerivedLine(
            self.name,
            self.tid,
            self.start[order],
            self.dur[order],
            self.names[order],
            self.long_names[order],
            self.level[order],
            self.members_line,
            self.members_event,
            self.member_lo[order],
            self.member_hi[order],
            {k: v[order] for k, v in self.stats.items()},
        )


def derives_lines(space, plane):
    """True when XProf derives lines on this plane: a TPU TensorCore plane of a file not grouped yet."""
    from .grouping import is_grouped

    if not TPU_CORE_PLANE.fullmatch(plane.name):
        return False
    return not is_grouped(space)


def derive_lines(plane):
    """The non-empty derived lines of a TPU plane (`DeriveLinesFromStats`), as DerivedLines."""
    ev = _inputs(plane)
    if ev is None:
        return []
    lines = list(_framework_lines(ev))
    lines.append(_single_level_line(ev, ev["source"], ev["source_values"], SOURCE_LINE, TID_SOURCE))
    lines.extend(_host_offload_lines(plane, ev))
    return [line for line in lines if line is not None and len(line)]


# --- inputs ----------------------------------------------------------------------------------


def _inputs(plane):
    """The plane's events that feed a derived line, in XProf's order (start, then shorter first).

    A dict of arrays: `line`, `event`, `begin`, `end`, `tf_op` / `source`
    (codes into `tf_op_values` / `source_values`, -1: none) and `offload`
    (host offload candidates). None when no event feeds any line.
    """
    have = set(plane.stat_names.values())
    wanted = [s for s in ("tf_op", "source", IS_ASYNC) if s in have]
    md = plane.event_metadata
    md_names = md["name"].to_numpy(dtype=object)
    display = md["display_name"].to_numpy(dtype=object)
    shown = np.where(display != "", display, md_names)
    offload_ids = md["id"].to_numpy()[
        np.fromiter(
            (HOST_MEMORY_LABEL in n and any(k in s for k in HOST_OFFLOAD_KEYWORDS) for n, s in zip(md_names, shown)),
            dtype=bool,
            count=len(md),
        )
    ]
    if not wanted and not len(offload_ids):
        return None
    parts = []
    offset = 0  # position of each line's first event among all the plane's events, lines in file order
    for li, line in plane.busy_lines:
        n = len(line)
        cols = line.stat_columns(names=wanted) if wanted else {}
        tf_op, source = _strings(cols.get("tf_op"), n), _strings(cols.get("source"), n)
        is_async = _nonzero(cols.get(IS_ASYNC), n)
        offload = np.isin(line.metadata_id, offload_ids) if len(offload_ids) else np.zeros(n, bool)
        keep = np.flatnonzero(((tf_op != "") | (source != "") | offload) & ~is_async)
        if len(keep):
            parts.append(
                (
                    li,
                    keep,
                    line.start_ps[keep],
                    line.event_duration_ps[keep],
                    tf_op[keep],
                    source[keep],
                    offload[keep],
                    line.metadata_id[keep],
                    keep + offset,
                )
            )
        offset += n
    if not parts:
        return None
    cat = [np.concatenate([p[k] if k else np.full(len(p[1]), p[0]) for p in parts]) for k in range(9)]
    li, idx, begin, dur, tf_op, source, offload, mid, pos = cat
    order = _xprof_order(plane, begin, dur, pos)
    group = device_groups(plane, begin[order], begin[order] + dur[order])
    tf_codes, tf_values = pd.factorize(tf_op[order])
    src_codes, src_values = pd.factorize(source[order])
    empty_tf = np.flatnonzero(tf_values == "")
    empty_src = np.flatnonzero(src_values == "")
    return {
        "line": li[order].astype(np.int64),
        "event": idx[order].astype(np.int64),
        "begin": begin[order],
        "end": begin[order] + dur[order],
        "metadata_id": mid[order],
        "tf_op": np.where(np.isin(tf_codes, empty_tf), -1, tf_codes),
        "tf_op_values": np.asarray(tf_values, dtype=object),
        "source": np.where(np.isin(src_codes, empty_src), -1, src_codes),
        "source_values": np.asarray(src_values, dtype=object),
        "offload": offload[order],
        "group": group,
    }


def device_groups(plane, begin, end):
    """The `group_id` XProf gives events of a TPU plane with these spans (ps), -1 for none.

    With no host step tied to the device (`GroupTpuEventsOSS`, tsl
    `group_events.cc`: "group all in lock step"), the events of the
    grouping line (`Steps` if it has events, else `XLA Modules`) are
    groups 0, 1, ... in line order on every core, and any other event takes
    the group of the first grouping event that overlaps it (ends included).
    Host steps that XProf ties to the device modules (through the launch
    context ids) are not followed: with them the ids would differ.
    """
    line = plane.line(STEPS_LINE)
    if line is None or not len(line):
        line = plane.line(XLA_MODULES_LINE)
    if line is None or not len(line):
        return np.full(len(begin), -1, dtype=np.int64)
    g_begin = line.start_ps
    g_end = np.maximum.accumulate(line.start_ps + line.event_duration_ps)  # XProf scans forward
    j = np.searchsorted(g_end, begin, side="left")
    inside = j < len(g_begin)
    j = np.minimum(j, len(g_begin) - 1)
    return np.where(inside & (g_begin[j] <= end), j, -1).astype(np.int64)


#: Planes up to this many events are sorted as XProf's std::sort does when ties need it (see `_xprof_order`).
EMULATED_SORT_LIMIT = 100_000


def _xprof_order(plane, begin, dur, pos):
    """The order XProf reads these events in (GetSortedEvents): by start, shorter first at equal starts.

    Ties (same start and duration: zero-length ops at a barrier) come in the
    order XProf's `std::sort` (libstdc++ introsort, not stable) leaves them,
    which depends on every event of the plane (`pos`: each event's position
    among them, lines in file order). That order is emulated when the ties
    concern the events read here and the plane has at most
    EMULATED_SORT_LIMIT events; otherwise ties keep the file's order.
    """
    order = np.lexsort((pos, dur, begin))
    b, d = begin[order], dur[order]
    if not ((b[1:] == b[:-1]) & (d[1:] == d[:-1])).any():
        return order
    lines = [line for line in plane.lines if len(line)]
    total = sum(len(line) for line in lines)
    if total > EMULATED_SORT_LIMIT:
        return order
    all_begin = np.concatenate([line.start_ps for line in lines])
    all_dur = np.concatenate([line.event_duration_ps for line in lines])
    by_key = np.lexsort((all_dur, all_begin))
    key = np.empty(total, dtype=np.int64)  # dense rank of (start, duration)
    new = np.ones(total, dtype=bool)
    new[1:] = (all_begin[by_key][1:] != all_begin[by_key][:-1]) | (all_dur[by_key][1:] != all_dur[by_key][:-1])
    key[by_key] = np.cumsum(new) - 1
    rank = np.empty(total, dtype=np.int64)
    rank[np.asarray(libstdcxx_sort_order(key.tolist()), dtype=np.int64)] = np.arange(total)
    return np.argsort(rank[pos])


def libstdcxx_sort_order(keys):
    """The permutation libstdc++'s `std::sort` (introsort) applies to a list of int keys.

    Returns the indices of `keys` in the order the sort leaves them: sorted,
    equal keys in the order its partitions leave them. Follows GCC's
    `__introsort_loop` (median-of-three pivot moved to the front, unguarded
    Hoare partition, 16-element threshold, heapsort past 2 log2 n levels)
    and `__final_insertion_sort`.
    """
    a = list(range(len(keys)))
    k = keys

    def insertion(first, last):  # __insertion_sort: stable, with the "new minimum" shortcut
        for i in range(first + 1, last):
            v = a[i]
            if k[v] < k[a[first]]:
                a[first + 1 : i + 1] = a[first:i]
                a[first] = v
            else:
                unguarded_insert(i)

    def unguarded_insert(i):
        v = a[i]
        kv = k[v]
        j = i - 1
        while kv < k[a[j]]:
            a[j + 1] = a[j]
            j -= 1
        a[j + 1] = v

    def adjust_heap(first, hole, length, v):
        top = hole
        child = hole
        while child < (length - 1) // 2:
            child = 2 * (child + 1)
            if k[a[first + child]] < k[a[first + child - 1]]:
                child -= 1
            a[first + hole] = a[first + child]
            hole = child
        if length % 2 == 0 and child == (length - 2) // 2:
            child = 2 * (child + 1)
            a[first + hole] = a[first + child - 1]
            hole = child - 1
        parent = (hole - 1) // 2
        while hole > top and k[a[first + parent]] < k[v]:
            a[first + hole] = a[first + parent]
            hole = parent
            parent = (hole - 1) // 2
        a[first + hole] = v

    def heap_sort(first, last):  # __partial_sort(first, last, last): make_heap then sort_heap
        length = last - first
        if length >= 2:
            parent = (length - 2) // 2
            while True:
                adjust_heap(first, parent, length, a[first + parent])
                if parent == 0:
                    break
                parent -= 1
        while last - first > 1:
            last -= 1
            v = a[last]
            a[last] = a[first]
            adjust_heap(first, 0, last - first, v)

    def median_to_first(result, x, y, z):
        kx, ky, kz = k[a[x]], k[a[y]], k[a[z]]
        if kx < ky:
            m = y if ky < kz else (z if kx < kz else x)
        else:
            m = x if kx < kz else (z if ky < kz else y)
        a[result], a[m] = a[m], a[result]

    def partition(first, last, pivot):  # __unguarded_partition
        kp = k[a[pivot]]
        while True:
            while k[a[first]] < kp:
                first += 1
            last -= 1
            while kp < k[a[last]]:
                last -= 1
            if not first < last:
                return first
            a[first], a[last] = a[last], a[first]
            first += 1

    stack = [(0, len(a), 2 * (len(a).bit_length() - 1) if a else 0)]
    while stack:  # __introsort_loop, its recursion on the right part as a stack
        first, last, depth = stack.pop()
        while last - first > 16:
            if depth == 0:
                heap_sort(first, last)
                break
            depth -= 1
            mid = first + (last - first) // 2
            median_to_first(first, first + 1, mid, last - 1)
            cut = partition(first + 1, last, first)
            stack.append((cut, last, depth))
            last = cut
    if len(a) > 16:  # __final_insertion_sort
        insertion(0, 16)
        for i in range(16, len(a)):
            unguarded_insert(i)
    else:
        insertion(0, len(a))
    return a


def _strings(col, n):
    """A stat column as an object array of str, "" where missing or not a string (XProf
    reads these stats with StrOrRefValue: a number or bytes in a damaged file reads "")."""
    if col is None:
        return filled(n, "")
    col = np.asarray(col, dtype=object)
    if pd.api.types.infer_dtype(col, skipna=True) not in ("string", "empty"):
        col = np.array([v if isinstance(v, str) else "" for v in col.tolist()], dtype=object)
    missing = pd.isna(col)
    if missing.any():
        col = col.copy()
        col[missing] = ""
    return col


def _nonzero(col, n):
    """A numeric stat column as bool (missing: False)."""
    if col is None:
        return np.zeros(n, dtype=bool)
    values = pd.to_numeric(pd.Series(np.asarray(col, dtype=object)), errors="coerce").fillna(0).to_numpy()
    return values != 0


# --- the merge rule ----------------------------------------------------------------------------


def merge_heads(begin, end, key, group, forced, max_passes=32):
    """Which inputs open a derived event on one level of a DerivedXLineBuilder (bool array).

    Inputs in processing order: `begin` / `end` (int64 ps), `key` (the event
    name's code), `group` (group id, -1: none), `forced` (the level was reset
    just before: a parent level opened an event). An input extends the open
    event when it is not forced, has the previous input's key and group, and
    (no group) starts at most twice the open event's duration after its end.
    The open event spans from its first input's start to the latest end so far.
    """
    n = len(begin)
    head = np.ones(n, dtype=bool)
    if n < 2:
        return head
    head[1:] = (key[1:] != key[:-1]) | (group[1:] != group[:-1])
    head |= forced
    gap_rule = group < 0
    for _ in range(max_passes):
        fail = _gap_failures(begin, end, head, gap_rule)
        if not fail.any():
            return head
        head |= fail  # each is a true split: see the module docstring
    return _gap_scan(begin, end, head, gap_rule)


def _gap_failures(begin, end, head, gap_rule):
    """Inputs that start more than twice the open event's duration after its end, given these heads."""
    seg = np.cumsum(head) - 1
    first = begin[np.flatnonzero(head)][seg]
    # The open event's end before each input: the running max of ends in its segment, exclusive.
    upto = pd.Series(end).groupby(seg).cummax().to_numpy()
    before = np.empty_like(upto)
    before[0] = upto[0]
    before[1:] = upto[:-1]
    return ~head & gap_rule & (begin - before > 2 * (before - first))


def _gap_scan(begin, end, head, gap_rule):
    """The gap rule input by input (after many passes: a run with very many splits)."""
    head = head.copy()
    first = last = 0
    b, e, h, g = begin.tolist(), end.tolist(), head.tolist(), gap_rule.tolist()
    for i in range(len(b)):
        if not h[i] and g[i] and b[i] - last > 2 * (last - first):
            h[i] = True
        if h[i]:
            first, last = b[i], e[i]
        else:
            last = max(last, e[i])
    return np.asarray(h, dtype=bool)


def events_of(heads, begin, end):
    """Per derived event (runs opened at `heads`): first input, one past the last, start and end (ps)."""
    lo = np.flatnonzero(heads)
    hi = np.append(lo[1:], len(heads))
    return lo, hi, begin[lo], np.maximum.reduceat(end, lo) if len(lo) else end[:0]


# --- framework name scopes and ops --------------------------------------------------------------


def _framework_lines(ev):
    """The Framework Name Scope and Framework Ops lines (ProcessTfOpEvent on every op with a tf_op)."""
    ops = np.flatnonzero(ev["tf_op"] >= 0)
    if not len(ops):
        return
    values = ev["tf_op_values"]
    parsed = [parse_tf_op(v) for v in values]
    scopes = [name.split("/")[:-1] if cat in ("tensorflow", "jax") else [] for cat, name, _ in parsed]
    scope_names, scope_code = [], {}
    depth = max((len(s) for s in scopes), default=0)
    table = np.full((len(values), max(depth, 1)), -1, dtype=np.int64)
    for u, s in enumerate(scopes):
        for k, part in enumerate(s):
            table[u, k] = scope_code.setdefault(part, len(scope_code))
            if table[u, k] == len(scope_names):
                scope_names.append(part)
    n_scopes = np.array([len(s) for s in scopes], dtype=np.int64)
    code = ev["tf_op"][ops]
    begin, end = ev["begin"][ops], ev["end"][ops]
    group = ev["group"][ops]

    # Name scopes: the ops with at least one scope, level after level.
    scoped = np.flatnonzero(n_scopes[code] > 0)  # positions in `ops`
    reset_ops = np.zeros(len(ops), dtype=bool)  # a new top-level scope closes the open framework op
    if len(scoped):
        n = n_scopes[code[scoped]]
        n_prev = np.concatenate([[0], n[:-1]])
        sb, se = begin[scoped], end[scoped]
        new_above = np.zeros(len(scoped), dtype=bool)
        ev_lo, ev_hi, ev_start, ev_end, ev_level, ev_name, ev_group = [], [], [], [], [], [], []
        for k in range(depth):
            at = np.flatnonzero(n > k)
            if not len(at):
                break
            # The level holds an open event only if the previous scoped op reached it
            # and no level above opened a new event for this op.
            forced = new_above[at] | (n_prev[at] <= k)
            heads = merge_heads(sb[at], se[at], table[code[scoped[at]], k], group[scoped[at]], forced)
            lo, hi, s, e = events_of(heads, sb[at], se[at])
            ev_lo.append(at[lo])
            ev_hi.append(at[hi - 1] + 1)
            ev_start.append(s)
            ev_end.append(e)
            ev_level.append(np.full(len(lo), k, dtype=np.int64))
            ev_name.append(table[code[scoped[at[lo]]], k])
            ev_group.append(group[scoped[at[lo]]])
            new_above = np.zeros(len(scoped), dtype=bool)
            new_above[at[heads]] = True
            new_above[at] |= forced  # a forced level is new too
            if k == 0:
                reset_ops[scoped[at[heads]]] = True
        lo, hi = np.concatenate(ev_lo), np.concatenate(ev_hi)
        start, stop = np.concatenate(ev_start), np.concatenate(ev_end)
        level = np.concatenate(ev_level)
        stop = stop - 1000 * stack_shrink_ns(hi - 1, level, start, stop)  # closed by their last op
        names = np.asarray(scope_names, dtype=object)[np.concatenate(ev_name)]
        seq = ops[scoped]
        yield DerivedLine(
            NAME_SCOPE_LINE,
            TID_NAME_SCOPE,
            start,
            stop - start,
            names,
            np.full(len(lo), "", object),
            level,
            ev["line"][seq],
            ev["event"][seq],
            lo,
            hi,
            group_stat(np.concatenate(ev_group)),
        )

    heads = merge_heads(begin, end, code, group, reset_ops)
    lo, hi, start, stop = events_of(heads, begin, end)
    full = values[code[lo]]
    shown = np.array([tf_op_event_name(v) for v in values], dtype=object)[code[lo]]
    long_names = np.where(shown != full, full, "")
    shown = np.where(shown != "", shown, full)
    yield DerivedLine(
        TF_OP_LINE,
        TID_TF_OP,
        start,
        stop - start,
        shown,
        long_names.astype(object),
        np.zeros(len(lo), np.int64),
        ev["line"][ops],
        ev["event"][ops],
        lo,
        hi,
        group_stat(group[lo]),
    )


def group_stat(group):
    """The `group_id` stat of derived events (from their first op): {} when none has one."""
    if not (group >= 0).any():
        return {}
    return {"group_id": np.array([int(g) if g >= 0 else None for g in group.tolist()], dtype=object)}


def stack_shrink_ns(close, level, start, stop):
    """ns to take off each derived event's end (XProf's AdjustDurationForTraceViewer).

    Events with the same `close` (what closed them) close together, as one stack of
    consecutive levels. Going down the stack, each event with the same span as the one
    above adds 1 ns to the shrink of it and every event below, up to the deepest
    event's duration in ns less 1.
    """
    order = np.lexsort((level, close))
    c, s_o, e_o = close[order], start[order], stop[order]
    first = np.ones(len(order), dtype=bool)
    first[1:] = c[1:] != c[:-1]
    same = ~first
    same[1:] &= (s_o[1:] == s_o[:-1]) & (e_o[1:] == e_o[:-1])
    grp = np.cumsum(first) - 1
    count = pd.Series(same.astype(np.int64)).groupby(grp).cumsum().to_numpy()
    top = np.append(np.flatnonzero(first)[1:], len(order)) - 1
    cap = np.maximum((e_o[top] - s_o[top]) // 1000 - 1, 0)[grp]
    shrink = np.empty(len(order), dtype=np.int64)
    shrink[order] = np.minimum(count, cap)
    return shrink


def _single_level_line(ev, codes, values, name, tid):
    """A one-level derived line keyed by a stat (the Source code line)."""
    at = np.flatnonzero(codes >= 0)
    if not len(at):
        return None
    begin, end = ev["begin"][at], ev["end"][at]
    heads = merge_heads(begin, end, codes[at], ev["group"][at], np.zeros(len(at), dtype=bool))
    lo, hi, start, stop = events_of(heads, begin, end)
    return DerivedLine(
        name,
        tid,
        start,
        stop - start,
        values[codes[at[lo]]],
        np.full(len(lo), "", object),
        np.zeros(len(lo), np.int64),
        ev["line"][at],
        ev["event"][at],
        lo,
        hi,
        group_stat(ev["group"][at[lo]]),
    )


# --- host offload ------------------------------------------------------------------------------


def offload_name(op_name):
    """XProf's GetOffloadInstructionName: `copy-start.3` -> `offload-copy.3` (no dot: `.0`)."""
    parts = op_name.split(".")
    ident = parts[-1] if len(parts) >= 2 else "0"
    for marker in ("-start", "-done"):
        at = op_name.find(marker)
        if at >= 0:
            return f"offload-{op_name[:at]}.{ident}"
    return f"offload-{op_name}.{ident}"


def _host_offload_lines(plane, ev):
    """The Host Offload Ops rows: each done paired with the oldest unpaired start of its name, packed in rows."""
    at = np.flatnonzero(ev["offload"])
    if not len(at):
        return []
    md = plane.event_metadata
    mids = ev["metadata_id"][at]
    uniq, inv = np.unique(mids, return_inverse=True)
    display = md["display_name"].reindex(uniq).fillna("").to_numpy(dtype=object)
    shown = np.where(display != "", display, md["name"].reindex(uniq).fillna("").to_numpy(dtype=object))
    is_start = np.array(["-start" in s for s in shown], dtype=bool)[inv]
    key_names, key = np.unique(np.array([offload_name(s) for s in shown], dtype=object)[inv], return_inverse=True)
    # FIFO per name, vectorised: a done finds no waiting start when the running max of
    # (dones - starts) so far rises at it, and is dropped; the k-th kept done of a name
    # takes the name's k-th start.
    by_key = np.argsort(key, kind="stable")
    k_sorted, s_sorted = key[by_key], is_start[by_key]
    starts = pd.Series(s_sorted.astype(np.int64)).groupby(k_sorted).cumsum().to_numpy()
    dones = pd.Series((~s_sorted).astype(np.int64)).groupby(k_sorted).cumsum().to_numpy()
    dropped = pd.Series(np.maximum(dones - starts, 0)).groupby(k_sorted).cummax().to_numpy()
    group_head = np.r_[True, k_sorted[1:] != k_sorted[:-1]]
    dropped_before = np.where(group_head, 0, np.r_[0, dropped[:-1]])
    kept = ~s_sorted & (dropped == dropped_before)
    start_keys = k_sorted[s_sorted]  # starts grouped by name, in time order within a name
    nth = np.searchsorted(start_keys, k_sorted[kept]) + (dones - dropped)[kept] - 1
    done_at, start_at = by_key[kept], by_key[s_sorted][nth]
    order = np.argsort(done_at, kind="stable")  # XProf makes the event when it reads the done
    done_at, start_at = done_at[order], start_at[order]
    begin = ev["begin"][at[start_at]]
    end = ev["end"][at[done_at]]
    row = _pack_rows(begin, end)
    names = key_names[key[done_at]].astype(object)
    # Stats XProf sets: is_async, the done's raw_bytes_accessed, the start's shape_with_layout.
    done_stats = plane.metadata_stats(ev["metadata_id"][at[done_at]], names=["raw_bytes_accessed"])
    start_stats = plane.metadata_stats(ev["metadata_id"][at[start_at]], names=["shape_with_layout"])
    stats = {IS_ASYNC: np.ones(len(done_at), dtype=np.int64)}
    if "raw_bytes_accessed" in done_stats:
        stats["raw_bytes_accessed"] = np.asarray(done_stats["raw_bytes_accessed"], dtype=object)
    if "shape_with_layout" in start_stats:
        stats["shape_with_layout"] = np.asarray(start_stats["shape_with_layout"], dtype=object)
    members = np.column_stack([at[start_at], at[done_at]]).ravel()
    out = []
    for r in range(int(row.max()) + 1):
        mine = np.flatnonzero(row == r)
        out.append(
            DerivedLine(
                f"{HOST_OFFLOAD_LINE} row {r}",
                TID_HOST_OFFLOAD + r,
                begin[mine],
                end[mine] - begin[mine],
                names[mine],
                np.full(len(mine), "", object),
                np.zeros(len(mine), np.int64),
                ev["line"][members],
                ev["event"][members],
                2 * mine,
                2 * mine + 2,
                {k: v[mine] for k, v in stats.items()},
            )
        )
    return out


def _pack_rows(begin, end):
    """XProf's row for each host offload event, in processing order.

    The row whose last end is the earliest among those ended by the event's
    start (the later row on a tie), else a new row, up to MAX_HOST_OFFLOAD_ROWS
    (then the last). One iteration per host offload copy: few, next to the ops.
    """
    frontier = []
    row = np.empty(len(begin), dtype=np.int64)
    for i, (b, e) in enumerate(zip(begin.tolist(), end.tolist())):
        best, low = -1, b
        for r, f in enumerate(frontier):
            if f <= low:
                best, low = r, f
        if best < 0:
            if len(frontier) < MAX_HOST_OFFLOAD_ROWS:
                frontier.append(e)
            best = len(frontier) - 1
        frontier[best] = max(frontier[best], e)
        row[i] = best
    return row
