"""The lines XProf derives on a GPU plane before its trace viewer shows it.

A GPU profile holds one line per stream of kernels and copies. XProf 2.24.2 adds, when
the file is not grouped yet (`PreprocessSingleHostXSpace` -> `GenerateDerivedTimeLines`,
xprof/utils/derived_timeline.cc `DeriveEventsFromAnnotations`, `DeriveStepEventsFromGroups`,
`DeriveEventsFromHostTrace`):

* **Per stream**, for the first 16 streams (compute streams first, then by event
  count), six lines named "<line> - from #<stream id>": **Framework Name Scope**,
  **Framework Ops**, **XLA Modules** (`module(program_id)`), **XLA Ops** (the kernel's
  `hlo_op`, one nesting level per `::` part), **Source code** (`file.py:12` of the HLO
  instruction) and **Command Buffers** (`Command Buffer <cuda_graph_id>`). The k-th
  stream shows as row 1 + 7k and its lines as the six rows after it.
* **Steps**: one event per run of events of one step (`group_id`) over all streams.
* **Launch Stats**: per device and step, the span of the host's kernel launches.

Inputs of the stream lines: the stream's kernels (events with `kernel_details`, or a
CUDA graph launch), by start then duration, their own stats only. A kernel of an XLA
op feeds Framework Ops / Name Scope / Source from its HLO instruction (`op_name:op_type`
of its metadata, found by `program_id` and the op's name); another kernel from its
`tf_op` stat.

**The merge rule** on GPU planes (`DerivedXLineBuilder`): an input extends the line's
open event of its level when it has the same name and step and nothing reset the line
since; there is no gap limit. A new XLA module event resets the name scopes (and so the
framework ops), the XLA ops and the command buffers; a new top-level name scope resets
the framework ops; Source code is never reset. A derived event spans its inputs and
carries the step of its first.

**Scope ranges** (newer JAX/XLA on GPU): a kernel's `scope_range_id` stat and the tree of
the plane `/host:__ScopeRangeCallStack__` (its stats: a range's id -> its parent's) tell
which run of a module (the chain's root) and of each XLA op level a kernel belongs to. An
open XLA Modules event keeps the root of the kernel that began it, and a kernel of
another root begins a new event, so back-to-back runs of one module without steps stay
apart; XLA op levels do the same with the chain, level by level, where the chain is as
long as the op's `::` path. An input or an event without a range never splits.

Vectorised per line and level (differences and cumulative sums over the stream's
kernels); the only loop over events is the command buffers' correlation rule, over
kernels launched from CUDA graphs.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...io.xspace import filled
from .cache import derived
from .columns import Groups, by_pair, by_value
from .command_buffers import attributed_ops
from .derived_lines import DerivedLine, events_of, group_stat, libstdcxx_sort_order, stack_shrink_ns
from .planes import GPU_PLANE_PREFIX, HOST_PLANE, SCOPE_RANGE_PLANE, gpu_plane_index, is_derived_line
from .tf_op import hlo_op_name, name_scopes, parse_tf_op, stat_ids, tf_op_event_name

MAX_DERIVED_STREAMS = 16
LINES_PER_STREAM = 7  # the stream and its six derived lines
NAME_SCOPE, TF_OPS, MODULES, XLA_OPS, SOURCE, COMMAND_BUFFERS = (
    "Framework Name Scope",
    "Framework Ops",
    "XLA Modules",
    "XLA Ops",
    "Source code",
    "Command Buffers",
)
_OFFSETS = {NAME_SCOPE: 1, TF_OPS: 2, MODULES: 3, XLA_OPS: 4, SOURCE: 5, COMMAND_BUFFERS: 6}
STEPS_TID = 0xDEADBEEF
LAUNCH_STATS_TID = 0xDEADBEEF + 1
#: Lines up to this many events are sorted as XProf's std::sort does when ties need it.
EMULATED_SORT_LIMIT = 100_000
_STATS = [
    "kernel_details",
    "cuda_graph_exec_id",
    "hlo_op",
    "hlo_module",
    "program_id",
    "tf_op",
    "cuda_graph_id",
    "correlation_id",
    "scope_range_id",
]


def derives_gpu_lines(space, plane) -> bool:
    """True when XProf derives lines on this plane: a GPU plane of a file not grouped yet."""
    from .grouping import is_grouped

    return plane.name.startswith(GPU_PLANE_PREFIX) and not is_grouped(space)


def stream_order(plane):
    """The plane's stream lines (indices) in XProf's order: names with "Compute" first,
    then by event count, descending (std::sort's order among equals)."""

    streams = [li for li, line in enumerate(plane.lines) if not is_derived_line(line)]
    if not streams:
        return []
    counts = np.array([len(plane.lines[li]) for li in streams], dtype=np.int64)
    compute = np.array(["Compute" in plane.lines[li].name for li in streams], dtype=bool)
    top = int(counts.max()) + 1
    keys = np.where(compute, 0, top) + (top - 1 - counts)
    return [streams[i] for i in libstdcxx_sort_order(keys.tolist())]


def derive_gpu_lines(run, space, plane):
    """({stream line index: row id}, [DerivedLine]) of a GPU plane (empty lines left out)."""
    from .grouping import forward_filled_group_ids, gpu_stats_ahead
    from .xla_ops import program_modules

    gpu_stats_ahead(space)  # (the file's GPU lines decoded from the last on a thread)
    modules = program_modules(run)
    groups = forward_filled_group_ids(space, plane)
    tree = scope_range_tree(space)
    tids, lines = {}, []
    for k, li in enumerate(stream_order(plane)[:MAX_DERIVED_STREAMS]):
        base = 1 + LINES_PER_STREAM * k
        tids[li] = base
        line = plane.lines[li]
        if not len(line):
            continue
        for d in _stream_lines(run, space, plane, li, line, groups.get(li), modules, tree):
            d.tid = base + _OFFSETS[d.name]
            d.name = f"{d.name} - from #{line.id}"
            lines.append(d)
    steps = steps_line(space, plane, groups)
    if steps is not None:
        lines.append(steps)
    launch = _launch_stats_line(space, plane)
    if launch is not None:
        lines.append(launch)
    return tids, [d for d in lines if len(d)]


# --- inputs --------------------------------------------------------------------------------------


def _sorted_events(line):
    """The line's events in XProf's GetSortedEvents order: by start, then duration; ties
    as libstdc++'s std::sort leaves them (up to EMULATED_SORT_LIMIT events)."""
    begin, dur = line.start_ps.astype(np.int64), line.event_duration_ps.astype(np.int64)
    order = np.lexsort((np.arange(len(begin)), dur, begin))
    b, d = begin[order], dur[order]
    if len(order) <= EMULATED_SORT_LIMIT and ((b[1:] == b[:-1]) & (d[1:] == d[:-1])).any():
        new = np.ones(len(order), dtype=bool)
        new[1:] = (b[1:] != b[:-1]) | (d[1:] != d[:-1])
        key = np.empty(len(order), dtype=np.int64)
        key[order] = np.cumsum(new) - 1
        order = np.asarray(libstdcxx_sort_order(key.tolist()), dtype=np.int64)
    return order


def _str_col(cols, name, n):
    col = cols.get(name)
    if col is None:
        return np.full(n, None, dtype=object)
    return by_value(col, _text_or_none)


def _text_or_none(value):
    return value if isinstance(value, str) else None


def _int_col(cols, name, n):
    col = cols.get(name)
    if col is None:
        return np.full(n, np.nan)
    return stat_ids(col)


def scope_range_tree(space) -> dict[int, int]:
    """{scope range id: its parent's}: the stats of the space's first plane named
    `/host:__ScopeRangeCallStack__` (a stat's metadata id -> its integer value), as XProf
    reads them; {} without that plane. Read once per file (every GPU plane asks)."""

    def read():
        for plane in space.planes:
            if plane.name == SCOPE_RANGE_PLANE:
                return {int(st.metadata_id): int(st.int64_value) for st in plane.message.stats}
        return {}

    return derived(space, "scope_range_tree", read)


#: Steps walked in all over looping scope range chains (a damaged file) before the rest
#: of them are ignored: XProf walks each such chain once round its loop, which many ids on
#: one long loop would make quadratic.
LOOP_WALK_BUDGET = 10_000_000


def _range_summaries(ids, tree):
    """(chain length, root) of each scope range id: its chain is the id, then its parent,
    its parent's parent... as far as the tree goes; the root is the last of them. One walk
    over the tree in all, however deep: chains share their ancestors. Where the ancestors
    loop (a damaged file), XProf's own walk: it stops before a parent it has already
    added, so the chain goes once round the loop (length 0, no range, once
    LOOP_WALK_BUDGET is spent)."""
    memo = {}  # id -> (length, root); None where the chain loops
    for start in ids:
        path, on_path, x = [], set(), start
        while x not in memo and x not in on_path:
            path.append(x)
            on_path.add(x)
            parent = tree.get(x)
            if parent is None:
                memo[x] = (1, x)
                path.pop()
                break
            x = parent
        base = memo.get(x)  # None: x is on the path, a loop
        for y in reversed(path):
            base = None if base is None else (base[0] + 1, base[1])
            memo[y] = base
    budget = LOOP_WALK_BUDGET
    out = []
    for start in ids:
        summary = memo[start]
        if summary is None:  # XProf's walk, while the budget lasts (a cut walk: no range)
            chain = _range_chain(start, tree, budget) if budget > 0 else ()
            budget -= len(chain)
            summary = (len(chain), chain[-1]) if chain and budget > 0 else (0, 0)
        out.append(summary)
    return out


def _range_chain(range_id, tree, length):
    """At most `length` ids of a range's chain, innermost first, as XProf walks it:
    parents are added until the tree has none or one comes again."""
    chain, seen, parent = [range_id], set(), tree.get(range_id)
    while parent is not None and parent not in seen and len(chain) < length:
        seen.add(parent)
        chain.append(parent)
        parent = tree.get(parent)
    return tuple(chain)


def _optional_ints(cols, name, n):
    """An integer stat column as (int64 values, present): missing or non-integer values
    are not present."""
    col = cols.get(name)
    if col is None:
        return np.zeros(n, np.int64), np.zeros(n, dtype=bool)
    series = pd.Series(col)
    if pd.api.types.is_integer_dtype(series.dtype):
        present = series.notna().to_numpy(dtype=bool)
        values = np.zeros(n, np.int64)
        values[present] = series[present].to_numpy().astype(np.int64)
        return values, present
    present = np.array([isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in col], dtype=bool)
    values = np.array([int(v) if ok else 0 for v, ok in zip(col, present)], dtype=np.int64)
    return values, present


def _inputs(run, space, plane, li, line, group, modules, tree):
    """The stream's kernels in XProf's order, with what each derived line reads. A kernel
    run in a CUDA graph reads as its attributed op when the run attributes them (beyond
    XProf, whose XLA Ops line shows the command buffer there)."""
    n = len(line)
    cols = line.stat_columns(names=_STATS, metadata=False)
    kernel = _str_col(cols, "kernel_details", n)
    graph_exec = _int_col(cols, "cuda_graph_exec_id", n)
    keep = ((kernel != None) & (kernel != "")) | ~np.isnan(graph_exec)  # noqa: E711 (str or None)
    order = _sorted_events(line)
    order = order[keep[order]]
    if not len(order):
        return None
    hlo = attributed_ops(run, space, plane, li, _str_col(cols, "hlo_op", n))[order]
    module = _str_col(cols, "hlo_module", n)[order]
    pid = _int_col(cols, "program_id", n)[order]
    tf_op = _str_col(cols, "tf_op", n)[order]
    graph = _int_col(cols, "cuda_graph_id", n)[order]
    corr = _int_col(cols, "correlation_id", n)[order]
    range_id, has_range = (a[order] for a in _optional_ints(cols, "scope_range_id", n))
    g = (np.full(n, -1, np.int64) if group is None else np.asarray(group, dtype=np.int64))[order]
    begin = line.start_ps.astype(np.int64)[order]
    end = begin + line.event_duration_ps.astype(np.int64)[order]
    # (Per distinct value or pair: a stream of 100,000 kernels runs a few hundred ops.)
    mod_key = by_pair(module, pid, _module_key)
    # The framework op and source line of each kernel: its HLO instruction's (XLA ops), else its tf_op.
    is_hlo = hlo != None  # noqa: E711
    by_op = Groups(hlo, pid, dropna=False)
    op_tf, op_source = np.full(by_op.n, None, dtype=object), np.full(by_op.n, None, dtype=object)
    symbols = {}
    for k, (h, p) in enumerate(zip(by_op.first(hlo, skipna=False), by_op.first(pid, skipna=False))):
        if h is not None:
            key = (p, hlo_op_name(h))
            if key not in symbols:
                instr = None if np.isnan(p) else modules.instruction(int(p), key[1])
                if instr is None:
                    symbols[key] = (None, None)
                else:
                    md = instr.metadata
                    src = f"{md.source_file.rsplit('/', 1)[-1]}:{md.source_line}" if md.source_file else None
                    symbols[key] = (f"{md.op_name}:{md.op_type}", src)
            op_tf[k], op_source[k] = symbols[key]
    tf_full, source = op_tf[by_op.codes], op_source[by_op.codes]
    named = ~is_hlo & by_value(tf_op, bool, bool)
    tf_full[named] = tf_op[named]
    return {
        "line": li,
        "event": order,
        "begin": begin,
        "end": end,
        "group": g,
        "hlo": hlo,
        "module": module,
        "pid": pid,
        "mod_key": mod_key,
        "tf_full": tf_full,
        "source": source,
        "graph": graph,
        "corr": corr,
        "range_id": range_id,
        "tree": tree,
        **_ranges(range_id, has_range & ((module != None) | (hlo != None)), tree),  # noqa: E711
    }


def _module_key(module, pid):
    """An XLA Modules event's name: `module(program id)`, the module alone without an id;
    None without a module."""
    if not module:
        return None
    return f"{module}({int(pid)})" if not np.isnan(pid) else module


def _ranges(range_id, has_range, tree):
    """Each input's scope range chain: its length (0: no range) and its root."""
    length = np.zeros(len(range_id), dtype=np.int64)
    root = np.zeros(len(range_id), dtype=np.int64)
    at = np.flatnonzero(has_range)
    if len(at):
        codes, uniques = pd.factorize(range_id[at])
        summary = np.array(_range_summaries([int(u) for u in uniques], tree), dtype=np.int64).reshape(-1, 2)
        length[at], root[at] = np.maximum(summary[codes, 0], 0), summary[codes, 1]
    return {"range_length": length, "range_root": root}


# --- the merge rule -------------------------------------------------------------------------------


def _codes(values):
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return codes.astype(np.int64), np.asarray(uniques, dtype=object)


def _resets_between(calls, marks):
    """For each call (row positions, increasing), whether a marked row lies in
    (previous call, this call]; the first call counts every mark up to it."""
    cs = np.cumsum(marks)
    at = cs[calls]
    before = np.concatenate([[0], at[:-1]])
    return at - before > 0


def _single_level(ev, rows, keys, forced=None):
    """Heads (new events) of a one-level line over its input rows: a new name or step,
    or a reset since the line's last input."""
    head = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        g = ev["group"][rows]
        head[1:] = (keys[1:] != keys[:-1]) | (g[1:] != g[:-1])
    if forced is not None:
        head |= forced
    return head


def _multi_level(ev, rows, table, depth, forced, ranges=None):
    """Per level, the heads of a nested line (XLA ops, name scopes): level L of an input
    continues the open event when the input before had a level L, the same names on
    levels 0..L and the same step, nothing reset the line in between, and (`ranges`: ids
    and present, one column per level) no level up to L is of another scope range."""
    n = len(rows)
    common = np.zeros(n, dtype=np.int64)
    if n > 1:
        g = ev["group"][rows]
        same = (table[1:] == table[:-1]) & (table[1:] >= 0)
        prefix = np.cumprod(same, axis=1).sum(axis=1)
        common[1:] = np.minimum(prefix, np.minimum(depth[1:], depth[:-1]))
        common[1:][(g[1:] != g[:-1]) | forced[1:]] = 0
    levels = []
    for k in range(table.shape[1]):
        at = np.flatnonzero(depth > k)
        if not len(at):
            break
        heads = common[at] <= k
        if ranges is not None:
            split = _range_splits(heads, ranges[0][at, k], ranges[1][at, k]) & ~heads
            common[at[split]] = k  # a new event on this level: the deeper ones too
            heads |= split
        levels.append((k, at, heads))
    return levels, common


def _range_splits(heads, ids, present):
    """`heads` (the inputs that begin an event for other reasons) and the inputs the scope
    range rule adds: an event keeps the range of the input that began it and, when that
    has one, an input of another range begins a new event (keeping its range); inputs
    without a range continue. So within a run that began with a range, a new event begins
    wherever the range differs from the last range seen."""
    if not present.any():
        return heads
    pos = np.arange(len(heads))
    run_start = np.maximum.accumulate(np.where(heads, pos, 0))
    last_seen = np.maximum.accumulate(np.where(present, pos, -1))
    before = np.concatenate([[-1], last_seen[:-1]])
    split = present & present[run_start] & (before >= run_start) & (ids != ids[np.maximum(before, 0)])
    return heads | split


def _line(name, ev, rows, heads, names, long_names=None, level=0):
    begin, end = ev["begin"][rows], ev["end"][rows]
    lo, hi, start, stop = events_of(heads, begin, end)
    n = len(lo)
    return DerivedLine(
        name,
        0,
        start,
        stop - start,
        np.asarray(names, dtype=object),
        np.asarray(long_names if long_names is not None else filled(n, ""), dtype=object),
        np.full(n, level, np.int64),
        np.full(len(rows), ev["line"], np.int64),
        ev["event"][rows],
        lo,
        hi,
        group_stat(ev["group"][rows][lo]),
    )


def _concat(name, parts):
    """One DerivedLine from its levels' parts (members indexed per part, shifted)."""
    parts = [p for p in parts if len(p)]
    if not parts:
        return None
    shift = np.cumsum([0] + [len(p.members_event) for p in parts[:-1]])
    stats = {}
    if any(p.stats for p in parts):
        stats["group_id"] = np.concatenate([p.stats.get("group_id", np.full(len(p), None, object)) for p in parts])
    return DerivedLine(
        name,
        0,
        np.concatenate([p.start for p in parts]),
        np.concatenate([p.dur for p in parts]),
        np.concatenate([p.names for p in parts]),
        np.concatenate([p.long_names for p in parts]),
        np.concatenate([p.level for p in parts]),
        np.concatenate([p.members_line for p in parts]),
        np.concatenate([p.members_event for p in parts]),
        np.concatenate([p.member_lo + s for p, s in zip(parts, shift)]),
        np.concatenate([p.member_hi + s for p, s in zip(parts, shift)]),
        stats,
    )


def _stream_lines(run, space, plane, li, line, group, modules, tree):
    ev = _inputs(run, space, plane, li, line, group, modules, tree)
    if ev is None:
        return []
    n = len(ev["begin"])
    out = []
    # XLA Modules: reset by nothing; its new events reset the other lines.
    mod_rows = np.flatnonzero(ev["mod_key"] != None)  # noqa: E711
    module_new = np.zeros(n, dtype=bool)
    if len(mod_rows):
        codes, values = _codes(ev["mod_key"][mod_rows])
        has_root = ev["range_length"][mod_rows] > 0
        heads = _range_splits(_single_level(ev, mod_rows, codes), ev["range_root"][mod_rows], has_root)
        module_new[mod_rows[heads]] = True
        out.append(_line(MODULES, ev, mod_rows, heads, values[codes[heads]]))
    # Command Buffers: graph kernels; a kernel of another launch (correlation) splits.
    cb = _command_buffers(ev, module_new)
    if cb is not None:
        out.append(cb)
    # XLA Ops: one level per `::` part, named "<program id>/<op>" (shown: the op).
    x_rows = np.flatnonzero(ev["hlo"] != None)  # noqa: E711
    if len(x_rows):
        columns = (ev["hlo"][x_rows], ev["module"][x_rows], ev["pid"][x_rows])
        by_path = Groups(*columns, dropna=False)
        paths, shown = [], {}
        for h, m, p in zip(*(by_path.first(c, skipna=False) for c in columns)):
            prefix = f"{int(p)}/" if not np.isnan(p) else f"{m or ''}/"
            paths.append([prefix + part for part in h.split("::")])
            shown.update((prefix + part, part) for part in h.split("::"))
        plist = (by_path.codes, paths)
        ranges = _level_ranges(ev, x_rows, plist)
        forced = _resets_between(x_rows, module_new)
        after = bool(module_new[x_rows[-1] + 1 :].any())
        out.append(_nested_line(XLA_OPS, ev, x_rows, plist, forced, shown, ranges, reset_after=after)[0])
    # Framework Name Scope and Framework Ops, from each kernel's framework op.
    f_rows = np.flatnonzero(ev["tf_full"] != None)  # noqa: E711
    if len(f_rows):
        op_codes, ops = _codes(ev["tf_full"][f_rows])
        scopes = []
        for v in ops:
            p = parse_tf_op(v)
            scopes.append(name_scopes(p[1]) if p[0] in ("tensorflow", "jax") else [])
        scoped = np.array([bool(x) for x in scopes], dtype=bool)[op_codes]
        s_rows = f_rows[scoped]
        scope_new = np.zeros(n, dtype=bool)
        if len(s_rows):
            ns, common = _nested_line(
                NAME_SCOPE,
                ev,
                s_rows,
                (op_codes[scoped], scopes),
                _resets_between(s_rows, module_new),
                reset_after=bool(module_new[s_rows[-1] + 1 :].any()),
            )
            scope_new[s_rows[common == 0]] = True
            out.append(ns)
        codes, values = _codes(ev["tf_full"][f_rows])
        forced = _resets_between(f_rows, module_new | scope_new)
        heads = _single_level(ev, f_rows, codes, forced)
        full = values[codes[heads]]
        shown = by_value(full, tf_op_event_name)
        names = np.where(shown != "", shown, full)
        out.append(_line(TF_OPS, ev, f_rows, heads, names, np.where(shown != "", full, "")))
    # Source code: never reset.
    src_rows = np.flatnonzero(ev["source"] != None)  # noqa: E711
    if len(src_rows):
        codes, values = _codes(ev["source"][src_rows])
        heads = _single_level(ev, src_rows, codes)
        out.append(_line(SOURCE, ev, src_rows, heads, values[codes[heads]]))
    return [d for d in out if d is not None]


def _path_depths(paths):
    """Each input's number of levels, of `paths` as `_nested_line` takes them."""
    which, distinct = paths
    return np.array([len(p) for p in distinct], dtype=np.int64)[which]


def _level_ranges(ev, rows, paths):
    """(ids, present), one column per level, of the inputs whose scope range chain is as
    long as their op path (outermost range first), as XProf uses them; None when none is.
    `paths` as `_nested_line` takes them."""
    depth = _path_depths(paths)
    fits = np.flatnonzero(ev["range_length"][rows] == depth)
    if not len(fits):
        return None
    width = int(depth.max())
    codes, uniques = pd.factorize(ev["range_id"][rows[fits]])  # one range: one chain length
    table = np.zeros((len(uniques), width), dtype=np.int64)
    known = np.zeros(table.shape, dtype=bool)
    lengths = ev["range_length"][rows[fits[np.unique(codes, return_index=True)[1]]]]
    for k, (rid, length) in enumerate(zip(uniques, lengths)):
        chain = _range_chain(int(rid), ev["tree"], int(length))
        table[k, : len(chain)], known[k, : len(chain)] = chain[::-1], True
    ids = np.zeros((len(rows), width), dtype=np.int64)
    present = np.zeros(ids.shape, dtype=bool)
    ids[fits], present[fits] = table[codes], known[codes]
    return ids, present


def _nested_line(name, ev, rows, paths, forced, shown_of=None, ranges=None, reset_after=False):
    """A nested line (XLA ops, name scopes) over its input rows; returns it and each
    input's number of continued levels. `paths`: (each input's path, as an index into
    the distinct paths; the distinct paths, each a list of names, outermost first).
    `shown_of` maps an event name to the name shown (XLA ops show the op, their full name
    "<program id>/<op>" kept as long name). `reset_after`: the line is reset after its
    last input (a new module), which closes the events still open then."""
    which, distinct = paths
    lengths = np.array([len(p) for p in distinct], dtype=np.int64)
    depth = lengths[which]
    width = int(depth.max())
    # Each distinct path's names as codes (-1 past its depth), then each input's path's.
    codes, values = _codes([part for p in distinct for part in p])
    by_path = np.full((len(distinct), width), -1, dtype=np.int64)
    by_path[np.repeat(np.arange(len(distinct)), lengths), _positions(lengths)] = codes
    table = by_path[which]
    levels, common = _multi_level(ev, rows, table, depth, forced, ranges)
    parts = []
    for k, at, heads in levels:
        full = values[table[at[heads], k]]
        if shown_of is not None:
            shown = by_value(full, shown_of.__getitem__)
            names = np.where(shown != "", shown, full)
            long_names = np.where(shown != "", full, "")
        else:
            names, long_names = full, None
        parts.append(_line(name, ev, rows[at], heads, names, long_names, level=k))
    _shrink_closed_stacks(parts, levels, common, len(rows) if reset_after else -1)
    return _concat(name, parts), common


def _positions(lengths):
    """0..n-1 for each n of `lengths`, one after another."""
    starts = np.cumsum(lengths) - lengths
    return np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(starts, lengths)


def _shrink_closed_stacks(parts, levels, common, closed_at_end):
    """XProf's AdjustDurationForTraceViewer on a nested line's events (`parts`, one per
    level): the open events of levels common[j] and deeper close together when input j
    arrives (and all of them at `closed_at_end` if the line is reset after its last input,
    else -1: never); going down such a stack, each event with the same span as the one
    above it ends 1 ns earlier, and so does every event below (`stack_shrink_ns`). Events
    still open at the end are left as they are."""
    close = []
    for (k, at, _), part in zip(levels, parts):
        closers = np.flatnonzero(common <= k)  # inputs that end an open event of level k
        nxt = np.searchsorted(closers, at[part.member_hi - 1], side="right")
        close.append(np.where(nxt < len(closers), closers[np.minimum(nxt, len(closers) - 1)], closed_at_end))
    if not close:
        return
    close = np.concatenate(close)
    level = np.concatenate([np.full(len(part), k, dtype=np.int64) for (k, _, _), part in zip(levels, parts)])
    start = np.concatenate([part.start for part in parts])
    stop = start + np.concatenate([part.dur for part in parts])
    shrink = np.zeros(len(close), dtype=np.int64)
    closed = close >= 0
    if closed.any():
        shrink[closed] = stack_shrink_ns(close[closed], level[closed], start[closed], stop[closed])
    bounds = np.cumsum([0] + [len(part) for part in parts])
    for i, part in enumerate(parts):
        part.dur = part.dur - 1000 * shrink[bounds[i] : bounds[i + 1]]


def _command_buffers(ev, module_new):
    graph = ev["graph"]
    rows = np.flatnonzero(~np.isnan(graph) & (graph != 0))
    if not len(rows):
        return None
    forced = _resets_between(rows, module_new)
    heads = np.ones(len(rows), dtype=bool)
    stored = None
    g, corr = ev["group"][rows], ev["corr"][rows]
    for i in range(len(rows)):  # the stored correlation is the run's first: a short scan
        c = None if np.isnan(corr[i]) else corr[i]
        if (
            i
            and not forced[i]
            and graph[rows[i]] == graph[rows[i - 1]]
            and g[i] == g[i - 1]
            and (c is None or stored is None or c == stored)
        ):
            heads[i] = False
            continue
        stored = c
    names = np.array([f"Command Buffer {int(v)}" for v in graph[rows][heads]], dtype=object)
    return _line(COMMAND_BUFFERS, ev, rows, heads, names)


# --- steps and launch statistics -------------------------------------------------------------------


def _step_names(space):
    """{group id: step name} of the file (once per file: every GPU plane asks; shared, do
    not change it)."""
    from .grouping import step_events

    def compute():
        steps = step_events(space)
        return dict(zip(steps["group_id"].astype(np.int64), steps["step_name"].astype(str)))

    return derived(space, "gpu_lines.step_names", compute)


def steps_line(space, plane, groups):
    """One event per run of events of one step, over all the plane's streams in time order."""
    keys = [li for li in sorted(groups) if len(plane.lines[li])]
    if not keys or not any((groups[li] >= 0).any() for li in keys):
        return None
    begin = np.concatenate([plane.lines[li].start_ps.astype(np.int64) for li in keys])
    dur = np.concatenate([plane.lines[li].event_duration_ps.astype(np.int64) for li in keys])
    g = np.concatenate([groups[li] for li in keys])
    line_of = np.concatenate([np.full(len(plane.lines[li]), li) for li in keys])
    event_of = np.concatenate([np.arange(len(plane.lines[li])) for li in keys])
    order = np.lexsort((dur, begin))
    order = order[g[order] >= 0]
    gg = g[order]
    heads = np.ones(len(order), dtype=bool)
    heads[1:] = gg[1:] != gg[:-1]
    b, e = begin[order], begin[order] + dur[order]
    lo, hi, start, stop = events_of(heads, b, e)
    names = _step_names(space)
    shown = np.array([names.get(int(x), str(int(x))) for x in gg[lo]], dtype=object)
    return DerivedLine(
        "Steps",
        STEPS_TID,
        start,
        stop - start,
        shown,
        np.full(len(lo), "", object),
        np.zeros(len(lo), np.int64),
        line_of[order],
        event_of[order],
        lo,
        hi,
        {"group_id": np.array([int(x) for x in gg[lo]], dtype=object)},
    )


def _host_launches(space):
    """The host's kernel launches in a step, every device's: DataFrame (device, group,
    begin, end), or None without a host plane or step names. Once per file (each GPU
    plane takes its device's rows: with 8 GPUs and a million host events, the per-event
    work was done 8 times)."""
    from .grouping import group_ids

    def compute():
        host = next((p for p in space.planes if p.name == HOST_PLANE), None)
        if host is None:
            return None
        names = _step_names(space)
        if not names:
            return None
        groups = group_ids(space)
        parts = []
        for li, line in enumerate(host.lines):
            if not len(line) or is_derived_line(line):
                continue
            g = np.asarray(groups.get((host.name, li), np.full(len(line), -1)), dtype=np.int64)
            if not (g >= 0).any():
                continue
            cols = line.stat_columns(names=["device_id", "correlation_id"], metadata=False)
            dev, corr = _int_col(cols, "device_id", len(line)), _int_col(cols, "correlation_id", len(line))
            cats = line.names()
            not_cu = ~np.asarray(pd.Index(cats.categories, dtype=object).astype(str).str.startswith("cu"), dtype=bool)
            codes = np.asarray(cats.codes)
            launch = (g >= 0) & ~np.isnan(corr) & np.where(codes >= 0, not_cu[np.maximum(codes, 0)], True)
            launch &= np.isin(g, list(names))
            idx = np.flatnonzero(launch)
            if len(idx):
                parts.append(
                    pd.DataFrame(
                        {
                            "device": dev[idx],
                            "group": g[idx],
                            "begin": line.start_ps[idx].astype(np.int64),
                            "end": (line.start_ps[idx] + line.event_duration_ps[idx]).astype(np.int64),
                        }
                    )
                )
        return pd.concat(parts, ignore_index=True) if parts else None

    return derived(space, "gpu_lines.host_launches", compute)


def _launch_stats_line(space, plane):
    """Per step, the span of the host's kernel launches for this device (XProf's Launch Stats)."""
    launches = _host_launches(space)
    if launches is None:
        return None
    names = _step_names(space)
    device = gpu_plane_index(space, plane)
    df = launches[launches["device"] == device].drop(columns="device").reset_index(drop=True)
    if df.empty:
        return None
    df["dur_us"] = (df["end"] - df["begin"]) / 1e6
    agg = df.groupby("group", sort=True).agg(
        start=("begin", "min"),
        stop=("end", "max"),
        n=("begin", "size"),
        max_us=("dur_us", "max"),
        avg_us=("dur_us", "mean"),
    )
    shown = np.array([f"Launch Stats for {names[int(x)]}" for x in agg.index], dtype=object)
    none = np.zeros(len(agg), np.int64)  # made from host events: no members on this plane
    return DerivedLine(
        "Launch Stats",
        LAUNCH_STATS_TID,
        agg["start"].to_numpy(),
        (agg["stop"] - agg["start"]).to_numpy(),
        shown,
        np.full(len(agg), "", object),
        np.zeros(len(agg), np.int64),
        np.zeros(0, np.int64),
        np.zeros(0, np.int64),
        none,
        none,
        {
            "group_id": np.array([int(x) for x in agg.index], dtype=object),
            "num_launches": agg["n"].to_numpy().astype(object),
            "max_launch_time_us": agg["max_us"].to_numpy().astype(object),
            "avg_launch_time_us": agg["avg_us"].to_numpy().astype(object),
        },
    )
