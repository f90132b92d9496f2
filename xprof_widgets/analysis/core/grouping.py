"""Event grouping: the step (`group_id`) of every host and device event.

XProf's converters read a `group_id` stat on events to know which step an
event belongs to. Profilers rarely write it: XProf adds it before building
its tools (`PreprocessSingleHostXSpace`: `PreprocessXPlane` then
`GroupTfEvents`, tsl `group_events.cc`, the "event forest"). This module
computes the same numbers, vectorised:

1. **Nodes**: every event of every plane that has a stat or a name this algorithm
   reads; any other event is reached from its nesting parent only, so it takes the group
   of its nearest such ancestor on its line (`_Nodes`). XProf's `PreprocessXPlane` also
   adds a synthetic `ThreadpoolListener::Region` on a line per `StopRegion`,
   from the last `StartRegion` with a `_c` stat before it (its
   `ThreadpoolLineMutator`). In XProf 2.24.2 a region carries no context
   stats (tsl's "TODO: b/510930307 - Set consumer stat value for the region
   event"; newer tsl makes it a consumer of the pool's `Record`), so it takes
   part in nesting only, and a node that only nests passes on no group its
   enclosing event would not pass on itself. So regions are left out here:
   the groups are the same (XProf's own grouped space, from its internal
   `_xplane.pb` tool, agrees event for event on every CPU profile here) and
   4 M events group 0.4 s faster. Only the zero-length `StartRegion`, a
   consumer of the `Record` on the scheduling thread, joins that thread's
   step; for what that does to the step breakdown see `steps`. (The trace
   model, `analysis.trace`, shows the regions, as XProf's trace viewer does.)
2. **Edges** (parent -> child):
   * nesting on a line: an event's parent is the innermost earlier event that
     contains it (XProf walks a stack; on a line sorted by start that is the
     nearest earlier event whose end is at or after the event's end, found here
     by binary lifting over a sparse table of ends). Async events (`_a`) are
     left out of the nesting.
   * producer -> consumer: events sharing a context type and id (`_pt`/`_p`
     with `_ct`/`_c`), per process id (the plane's `process_id`, `_pid` on a
     consumer), all pairs, except where a context has 64+ producers and 64+
     consumers (XProf skips those as noise).
   * `ExecutorState::Process` -> `IteratorGetNext(AsOptional)Op::DoCompute`
     with the same (`id`, `iter_num`); host `KernelLaunch` -> device
     `KernelExecute` (events with a `correlation_id`) with the same id.
3. **Roots**: if TF executor loops exist (`ExecutorState::Process` events with
   an `iter_num` other than 0 for one `id`, tf.data functions excluded), the
   first event of each loop iteration, in time order, and every iteration
   takes an id. Otherwise events with a root level (`_r` stat, `TraceContext`,
   `ProcessBatch` / `BatchingSessionRun`) except tf.data functions, by root
   level (highest first) then start time; a root below another root of the
   same level is not a root of its own, and a root already reached by an
   earlier root takes no id.
4. **Groups**: a root's group is every event reachable from it that no
   earlier root reached. Equivalently: the group of an event is that of the
   first root (in the order above) that reaches it, which is what a min-label
   propagation over the edges computes, one numpy pass per edge hop.
5. **Eager marks** (`eager_events`; tsl `MarkEagerlyExecutedCpuTfOps` and
   `MarkEagerlyExecutedGpuKernels`): TF op runs (events named `name:Type`) and
   kernel executions (untyped device events with a `correlation_id`) are eager
   when the nearest `EagerExecute` above them (XProf walks up the edges above
   breadth first; here one walk down from all of them) has `is_func` = 0. An
   `EagerExecute` without `is_func` is a compiled function: not eager; so are
   ops with no `EagerExecute` above (TF1 graphs). The walk runs only when some
   `EagerExecute` has `is_func` = 0.

What XProf does with `group_id` stats already in the file: if any plane has a
`group_id` stat in its metadata the space counts as grouped and nothing is
recomputed; the file's stats are used as they are. `group_ids` does the same
unless `recompute=True` (then the file's stats are ignored).

Not reimplemented: the TPU path (`GroupTpuEventsOSS`: step/module lines of
`/device:TPU:*` planes and the host's TPU launch queues), tf.data
producer/consumer iterator links (XProf's `ConnectTfDataEvents`, not part of
`GroupTfEvents`). TF graphs with loop ops (`WhileOp-*`, `ForOp`...) are left
ungrouped and unmarked, as XProf leaves them.

Times are picoseconds (absolute, as in the file).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from ...io import column_cache, native
from ...io.xspace import decode_ahead
from .cache import derived, kept
from .columns import Groups
from .intervals import prev_enclosing, prev_enclosing_span
from .planes import (
    GPU_PLANE_PREFIX,
    HOST_PLANE,
    KERNEL_STATS,
    SCOPE_RANGE_PLANE,
    TPU_PLANE_PREFIX,
    XLA_HOST_PLANES,
    is_derived_line,
)

# XProf's `HostEventType` names this algorithm looks at.
EXECUTOR = "ExecutorState::Process"
GET_NEXT = ("IteratorGetNextOp::DoCompute", "IteratorGetNextAsOptionalOp::DoCompute")
TF_DATA_FUNCTIONS = (
    "InstantiatedCapturedFunction::Run",
    "InstantiatedCapturedFunction::RunAsync",
    "InstantiatedCapturedFunction::RunInstantiated",
    "InstantiatedCapturedFunction::RunWithBorrowedArgs",
)
LOOP_OPS = ("WhileOp-EvalCond", "WhileOp-StartBody", "ForOp", "ParallelForOp", "ForeverOp")
# Roots without an `_r` stat: legacy TraceContext (level 1), and the batching
# events `PreprocessXPlane` marks (overriding any `_r` they carry).
FORCED_ROOT_LEVEL = {"ProcessBatch": 2, "OrbaxServing::ProcessBatch": 2, "BatchingSessionRun": 1}
LEGACY_ROOT = "TraceContext"
# Roots XProf names by step number alone (no event name in the step name).
IMPLICIT_ROOTS = ("FunctionRun", "SessionRun", "RunGraph", EXECUTOR)
#: XProf's `kEagerKernelExecute` (named "EagerExecute" in 2.24.2), with its `is_func` stat.
EAGER_EXECUTE = "EagerExecute"
IS_FUNC = "is_func"
IS_EAGER = "is_eager"
TF_OP_RUN = "TfOpRun"
#: A context with at least this many producers and consumers is not connected.
MAX_CONTEXT_FANOUT = 64

_STATS = [
    "_r",
    "_p",
    "_pt",
    "_c",
    "_ct",
    "_pid",
    "_a",
    "id",
    "iter_num",
    "step_num",
    "correlation_id",
    "graph_type",
]
#: The stats the grouping reads of every event of every line (a reader that decodes a
#: line's stats for the grouping too asks for these).
GROUPING_STATS = frozenset(_STATS)
#: What the grouping decodes of a host line: its stats, and `tf_op`, which the host op
#: database reads next (the line keeps the last stats decoded: one walk over the records
#: of a Python tracer's million events, not two).
_STATS_READ_AHEAD = [*_STATS, "tf_op"]
#: What the grouping decodes of a GPU line: its stats, and those the GPU tools read next
#: (the op database, the kernel reports, the device steps, the CUDA graph attribution, the
#: trace's derived lines): one walk over a kernel's records, not four.
_GPU_STATS_READ_AHEAD = [
    *_STATS,
    *KERNEL_STATS,
    "hlo_module",
    "shape",
    "cuda_graph_id",
    "cuda_graph_exec_id",
    "cuda_graph_node_id",
    "scope_range_id",
]


def _read_ahead(plane):
    """The stats the grouping decodes of each line of `plane` (see above)."""
    if plane.name == HOST_PLANE:
        return _STATS_READ_AHEAD
    return _GPU_STATS_READ_AHEAD if plane.name.startswith(GPU_PLANE_PREFIX) else _STATS


def _node_dtype(n):
    """Node ids' type: int32 while `n` nodes (and the contexts added after them) fit."""
    return np.int32 if n < 2**30 else np.int64


class _Stat:
    """One integer stat over all nodes, sparse: the nodes that have it (ascending) and
    its values there (IntOrUintValue, int64)."""

    def __init__(self, events, values):
        if len(events) > 1 and not (events[1:] > events[:-1]).all():  # metadata stats come after a line's own
            order = np.argsort(events, kind="stable")
            events, values = events[order], values[order]
        self.events, self.values = events, values

    def at(self, nodes_):
        """(values, present) at some nodes; 0 where absent."""
        nodes_ = np.asarray(nodes_, dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.events, nodes_), max(len(self.events) - 1, 0))
        present = self.events[pos] == nodes_ if len(self.events) else np.zeros(len(nodes_), bool)
        return np.where(present, self.values[pos] if len(self.events) else 0, 0), present

    def mask(self, n):
        out = np.zeros(n, bool)
        out[self.events] = True
        return out


#: Names the grouping looks events up by (`_Nodes.where_name`): an event with one takes part.
_ROLE_SET = frozenset((EXECUTOR, *GET_NEXT, *TF_DATA_FUNCTIONS, EAGER_EXECUTE, LEGACY_ROOT, *FORCED_ROOT_LEVEL))
#: Stats the grouping reads only at events that are nodes for another reason (`id`: at
#: executors, iterators and tf.data functions, named in `_ROLE_SET`, and at roots, which
#: have `_r` or such a name): an event with no other makes no node (on a JAX run the
#: allocator's events on the Python tracer's line carry one, 58,400 of them on the AMD file).
_READ_AT_NODES = frozenset(("id",))
#: Lines of at most this many events keep all as nodes (`_Nodes`).
_SHORT_LINE = 256


class _Nodes:
    """The events of a space that take part in the grouping, as flat columns (nodes in
    plane, line, file order), and the way every other event finds its group.

    An event with none of the grouping's stats (`_STATS`; those `_READ_AT_NODES` aside)
    and none of its names (`_ROLE_SET`) is reached by one edge only, from its nesting
    parent, and leads only to its nesting children: its group is that of its nearest
    ancestor on its line that takes part. So only those events are nodes, each nested under its nearest such ancestor;
    `nearest[k]` maps every event of line k to its own node or that ancestor's (-1: none),
    None where every event of the line is a node. On a JAX GPU run the Python tracer's
    calls are most of the events and almost none takes part: the graph is a tenth of the
    events. `keep_all`: every event is a node (the eager marks count hops between events).

    `stat[name]` is a `_Stat`: a profile sets these stats on a fraction of its
    events, so they stay sparse.
    """

    def __init__(self, space, keep_all=False):
        # Each line's own columns, not the file's concatenated ones (`event_columns`): a
        # copy of every event's start and duration that only the few roots and executors
        # read (`start_of`), fresh memory as large as the events' (on a Python tracer's
        # line of 1.4 M calls, 6 ms of page faults).
        total = sum(len(line) for plane in space.planes for _, line in plane.busy_lines)
        sparse = {k: [] for k in _STATS if k != "graph_type"}
        self.graph_type = {}  # node -> the `graph_type` string, where set
        # Names as integer codes into one table (a plane's categories at an
        # offset; the last entry stands for "no name"): comparing codes is
        # far cheaper than comparing millions of Python strings.
        tables, code_offset = [], 0
        self.lines = []  # (plane name, line index) of the lines with events
        self.nearest = []  # per line: event -> node (see the class), or None
        self.plane_names = [p.name for p in space.planes]
        self.loop_ops = False
        self.dtype = _node_dtype(total)
        sizes, planes, pids, line_offsets, nesting = [], [], [], [], []
        # Each node's event among all the file's (the event columns'), and its name code,
        # written in place line by line (at most one node per event): starts and ends are
        # read for the few nodes asked (roots, executors), not gathered for millions.
        position = np.empty(total, np.int32 if total < 2**31 else np.int64)
        name = np.empty(total, np.int32)
        self._line_objects = []  # the Line of each entry of `lines`
        offset = count = 0  # events and nodes before this line
        for pi, plane in enumerate(space.planes):
            # (From the message: the metadata DataFrame costs a millisecond a plane, and a
            # file may hold 20,000 planes.)
            if not self.loop_ops and plane.lines:
                self.loop_ops = any(m.name in LOOP_OPS for m in plane.message.event_metadata.values())
            pid = plane.stats.get("process_id") if plane.lines else None
            plane_names = role = None
            for li, line in plane.busy_lines:  # (lines without events have no nodes)
                self.lines.append((plane.name, li))
                self._line_objects.append(line)
                line_offsets.append(offset)
                m = len(line)
                planes.append(pi)
                pids.append(-1 if pid is None else int(pid))
                codes = np.asarray(line.names().codes)  # (narrow: int8 for a plane of < 128 names)
                if plane_names is None:
                    plane_names = np.asarray(line.names().categories, dtype=object)
                    tables.append(plane_names)
                    code_offset += len(plane_names)
                    # (A set per name, not np.isin: a plane may have a handful of names, and a
                    # file 20,000 planes.)
                    role = np.fromiter((n in _ROLE_SET for n in (*plane_names, None)), bool, len(plane_names) + 1)
                # A short line keeps every event: sorting out which take part costs more there.
                short = m <= _SHORT_LINE
                kept = np.ones(m, bool) if keep_all or short else role[codes]
                table = line.stat_table(names=_read_ahead(plane))
                found = {k: table.ints(k) for k in sparse if k in table}
                typed = table.strings("graph_type") if "graph_type" in table else None
                everything = keep_all or short
                if not everything:
                    for k, (ev, _) in (*found.items(), *([("graph_type", typed)] if typed else [])):
                        if k not in _READ_AT_NODES:
                            kept[ev] = True
                    everything = kept.all()
                parent = self._parents(line.start_ps, line.event_duration_ps, found)
                if everything:  # every event is its own node
                    at, up, near = np.arange(m), parent, None
                else:
                    at = np.flatnonzero(kept)
                    near = _nearest_node(parent, kept, count, self.dtype)  # event -> node
                    up = parent[at]
                    up = np.where(up >= 0, near[np.maximum(up, 0)] - count, -1)
                self.nearest.append(near)
                child = np.flatnonzero(up >= 0)
                if len(child):
                    nesting.append(np.stack([up[child] + count, child + count]).astype(self.dtype, copy=False))
                for k, (ev, v) in found.items():
                    if near is not None and k in _READ_AT_NODES:  # (only at nodes: the others' are never read)
                        at_node = kept[ev]
                        ev, v = ev[at_node], v[at_node]
                    sparse[k].append((_renumbered(ev, near, count), v))
                if typed is not None:
                    self.graph_type.update(zip(_renumbered(typed[0], near, count).tolist(), typed[1].tolist()))
                shift = np.int32(code_offset - len(plane_names))
                mine, dst = codes[at], name[count : count + len(at)]
                np.add(mine, shift, out=dst)
                dst[mine < 0] = -1
                np.add(at, offset, out=position[count : count + len(at)], casting="unsafe")
                sizes.append(len(at))
                offset += m
                count += len(at)
        sizes = np.asarray(sizes, dtype=np.int64)
        self.n = count
        # (Views where most events are nodes; where few are, as on a GPU run, a copy of
        # their part, not the event-sized buffers kept alive.)
        small = count < total // 2
        self._position = position[:count].copy() if small else position[:count]
        self._line_offset = np.asarray(line_offsets, dtype=np.int64)  # each line's first event among all
        self.line = np.repeat(np.arange(len(sizes), dtype=np.int32), sizes)
        self.line_start = np.cumsum(sizes) - sizes  # node of each line's first event
        # Per line: its plane (index) and the plane's process id; per node through `line`.
        self.line_plane = np.asarray(planes, dtype=np.int64)
        self.line_pid = np.asarray(pids, dtype=np.int64)
        names_ = np.asarray(self.plane_names, dtype=object)[self.line_plane] if len(planes) else np.zeros(0, object)
        self.host = (names_ == HOST_PLANE)[self.line]
        self.tpu = np.array([str(p).startswith(TPU_PLANE_PREFIX) for p in names_], dtype=bool)[self.line]
        self.name_table = np.concatenate([*tables, np.array([None], dtype=object)])
        # Codes into name_table; -1: none (the table's last entry).
        self.name = name[:count].copy() if small else name[:count]
        empty = np.zeros(0, np.int64)
        joined = lambda x: x[0] if len(x) == 1 else np.concatenate(x)  # noqa: E731 (one line: no copy)
        self.stat = {
            k: _Stat(*(joined(x) for x in zip(*parts))) if parts else _Stat(empty, empty) for k, parts in sparse.items()
        }
        self.nesting = np.concatenate(nesting, axis=1) if nesting else np.zeros((2, 0), self.dtype)

    @staticmethod
    def _parents(start, duration, found):
        """Each event's nesting parent on its line (-1: none): the innermost earlier event
        that contains it. Async events (`_a` set) neither nest nor contain."""
        if len(start) < 2:  # (a file may hold 20,000 lines of an event each)
            return np.full(len(start), -1, np.int32)
        async_ = np.zeros(0, np.int64)
        if "_a" in found:
            ev, v = found["_a"]
            async_ = ev[v != 0]
        if len(async_):
            is_async = np.zeros(len(start), bool)
            is_async[async_] = True
            sync = np.flatnonzero(~is_async)
            par = prev_enclosing(start[sync] + duration[sync])
            parent = np.full(len(start), -1, np.int32 if len(start) < 2**31 else np.int64)
            parent[sync] = np.where(par >= 0, sync[np.maximum(par, 0)], -1)
        else:
            parent = prev_enclosing_span(start, duration)
        if len(start) > 1 and not (start[1:] >= start[:-1]).all():
            # Out of start order (files are sorted; this keeps the rule defined):
            # a parent must not start after its child.
            child = np.flatnonzero(parent >= 0)
            late = child[start[parent[child]] > start[child]]
            parent = parent.copy()
            parent[late] = -1
        return parent

    def start_of(self, nodes_):
        """The nodes' events' starts (ps)."""
        return self._event_values(nodes_, "start_ps")

    def end_of(self, nodes_):
        """The nodes' events' ends (ps)."""
        return self._event_values(nodes_, "start_ps") + self._event_values(nodes_, "event_duration_ps")

    def _event_values(self, nodes_, column):
        """The nodes' events' values of a Line column (int64), read line by line."""
        nodes_ = np.asarray(nodes_, dtype=np.int64)
        out = np.empty(len(nodes_), np.int64)
        if not len(nodes_):
            return out
        line = self.line[nodes_]
        event = self._position[nodes_] - self._line_offset[line]
        order = np.argsort(line, kind="stable")
        cuts = np.flatnonzero(line[order][1:] != line[order][:-1]) + 1
        for part in np.split(order, cuts):
            out[part] = getattr(self._line_objects[line[part[0]]], column)[event[part]]
        return out

    def event_of(self, nodes_):
        """Index of each node's event on its line."""
        return self._position[nodes_] - self._line_offset[self.line[nodes_]]

    def pid_of(self, nodes_):
        return self.line_pid[self.line[nodes_]]

    def codes_of(self, *names):
        """The name codes of these event names (any plane)."""
        return np.flatnonzero(np.isin(self.name_table[:-1], list(names)))

    def where_name(self, *names):
        codes = self.codes_of(*names)
        if len(codes) == 1:
            return np.flatnonzero(self.name == codes[0])
        return np.flatnonzero(np.isin(self.name, codes))

    def name_of(self, node):
        return self.name_table[self.name[node]]


def _renumbered(events, near, count):
    """Node ids of some kept events of a line whose first node is `count` (`near`: event ->
    node, None where every event is one)."""
    return events + count if near is None else near[events].astype(np.int64)


def _nearest_node(parent, kept, base, dtype):
    """Per event of a line its node: the kept events are nodes `base`, `base + 1`, ... in
    order; another takes the node of its nearest kept ancestor by `parent` (each parent
    before its child), else -1."""
    if native.available() and dtype == np.int32:
        found = native.nearest_kept(parent, kept, base)
        if found is not None:
            return found
    near = np.where(kept, np.arange(len(parent)), parent).astype(np.int64)
    todo = np.flatnonzero(near >= 0)
    todo = todo[~kept[near[todo]]]
    while len(todo):  # pointer jumping: each round doubles the steps taken
        near[todo] = near[near[todo]]
        todo = todo[near[todo] >= 0]
        todo = todo[~kept[near[todo]]]
    node = np.cumsum(kept, dtype=np.int64) + (base - 1)
    return np.where(near >= 0, node[np.maximum(near, 0)], -1).astype(dtype)


def _context_edges(nodes):
    """Producer -> consumer links of every context (type, id, pid): (edges, contexts).

    XProf links every producer of a context to every consumer. Here each
    context is one extra node (ids from `nodes.n` on): producers point to it,
    it points to the consumers. Min-label propagation and reachability give
    the same answer for every event, with p + c edges instead of p x c (a
    profile whose ids repeat, e.g. one tiled in time, would have millions).
    """
    st = nodes.stat
    prod, p_at, pt_at = _with_both(st["_p"], st["_pt"])
    cons, c_at, ct_at = _with_both(st["_c"], st["_ct"])
    if len(prod) == 0 or len(cons) == 0:
        return np.zeros((2, 0), np.int64), 0
    columns = [
        np.concatenate([st["_p"].values[p_at], st["_c"].values[c_at]]),
        np.concatenate([st["_pt"].values[pt_at], st["_ct"].values[ct_at]]),
    ]
    # Only consumers may change the pid (`_pid`); -1 stands for "no pid". Events of one
    # process, none changing it (the usual file): the pid tells no context apart.
    if len(st["_pid"].events) or len(np.unique(nodes.line_pid)) > 1:
        own_pid, has_pid = st["_pid"].at(cons)
        columns.append(np.concatenate([nodes.pid_of(prod), np.where(has_pid, own_pid, nodes.pid_of(cons))]))
    ctx = _row_codes(*columns)
    ctx_prod, ctx_cons = ctx[: len(prod)], ctx[len(prod) :]
    count = ctx.max() + 1
    n_prod = np.bincount(ctx_prod, minlength=count)
    n_cons = np.bincount(ctx_cons, minlength=count)
    ok = (n_prod > 0) & (n_cons > 0) & ((n_prod < MAX_CONTEXT_FANOUT) | (n_cons < MAX_CONTEXT_FANOUT))
    keep_p, keep_c = ok[ctx_prod], ok[ctx_cons]
    edges = np.concatenate(
        [
            np.stack([prod[keep_p], nodes.n + ctx_prod[keep_p]]),
            np.stack([nodes.n + ctx_cons[keep_c], cons[keep_c]]),
        ],
        axis=1,
    )
    return edges, int(count)


def _with_both(a, b):
    """The nodes that have both `_Stat`s a and b: (nodes, their index in a, in b). Usually
    the two are set on the same events (a context's type and id): no search then."""
    if len(a.events) == len(b.events) and np.array_equal(a.events, b.events):
        at = np.arange(len(a.events))
        return a.events, at, at
    return np.intersect1d(a.events, b.events, assume_unique=True, return_indices=True)


def _row_codes(*columns):
    """Each row's number among the distinct rows of these integer columns (0 to their
    count - 1, in no set order: a context's number names it, nothing more). Columns
    with a small range (a context's type, a process id) are their own codes, offset;
    all combined into one integer while that fits, then numbered by a table over the
    combined range where that is small (no hashing), else by one hash pass."""
    codes, size = None, 1
    for column in columns:
        lo, hi = (int(column.min()), int(column.max())) if len(column) else (0, 0)
        if hi - lo < 2**20:
            col, width = column - lo, hi - lo + 1
        else:
            col, uniques = pd.factorize(column)
            width = len(uniques)
        if codes is None:
            codes, size = col, width
        elif size * width < 2**62:
            codes, size = codes * width + col, size * width
        else:
            codes, seen = pd.factorize(codes)  # renumbered: below the row count
            codes, size = codes * width + col, len(seen) * width
    if codes is None:
        return np.zeros(0, np.int64)
    if size <= 4 * len(codes) + 4096:
        used = np.zeros(size, bool)
        used[codes] = True
        return (np.cumsum(used) - 1)[codes]
    return pd.factorize(codes)[0]


def _join_edges(nodes, parents, children, keys):
    """Edges from `parents` to `children` (node index arrays) with equal stats `keys`.

    Where several parents share the keys the last one wins, as in XProf's map.
    """

    def having(idx):  # (the nodes that have every key, their key values)
        ok = np.ones(len(idx), bool)
        values = []
        for k in keys:
            v, h = nodes.stat[k].at(idx)
            ok &= h
            values.append(v)
        return np.asarray(idx, np.int64)[ok], [v[ok] for v in values]

    src, p_values = having(parents)
    dst, c_values = having(children)
    if not len(src) or not len(dst):
        return np.zeros((2, 0), np.int64)
    # One code per distinct key tuple, over parents and children together.
    code = Groups(*(np.concatenate(values) for values in zip(p_values, c_values))).codes
    p_code, c_code = code[: len(src)], code[len(src) :]
    # The last parent of each key (XProf's map), kept in parent order.
    _, last = np.unique(p_code[::-1], return_index=True)
    keep = np.sort(len(src) - 1 - last)
    src, p_code = src[keep], p_code[keep]
    # Each child's parent; edges in parent order, then child order (as pandas' inner merge).
    by_code = np.argsort(p_code, kind="stable")
    at = np.minimum(np.searchsorted(p_code[by_code], c_code), len(p_code) - 1)
    parent = by_code[at]
    hit = np.flatnonzero(p_code[parent] == c_code)
    edge = hit[np.lexsort((hit, parent[hit]))]
    return np.stack([src[parent[edge]], dst[edge]])


class _Graph:
    """Edges in CSR form (by source) for frontier propagation."""

    def __init__(self, n, edges):
        src, dst = edges
        self.n = n
        # The compiled walks take int32 ids (node ids fit them below 2**31 nodes).
        self.native = native.available() and edges.dtype == np.int32 and n < np.iinfo(np.int32).max
        built = native.csr(src, dst, n) if self.native else None
        if built is not None:
            self.ptr, self.dst = built
            return
        self.native = False
        self.ptr = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(np.bincount(src, minlength=n), out=self.ptr[1:])
        self.dst = dst[np.argsort(src, kind="stable")]

    def out_edges(self, nodes_):
        """(source, destination) of every edge leaving `nodes_`."""
        lo, hi = self.ptr[nodes_], self.ptr[nodes_ + 1]
        cnt = hi - lo
        src = np.repeat(nodes_, cnt)
        pos = np.repeat(lo - np.cumsum(cnt) + cnt, cnt) + np.arange(cnt.sum())
        return src, self.dst[pos]

    def min_label(self, label):
        """Propagates the smallest label along edges until nothing changes, in place;
        the largest value of `label`'s type stands for "no label"."""
        if self.native and label.dtype == np.int32 and native.min_label(self.ptr, self.dst, label):
            return label
        frontier = np.flatnonzero(label != np.iinfo(label.dtype).max)
        while len(frontier):
            src, dst = self.out_edges(frontier)
            cand = label[src]
            better = cand < label[dst]
            if not better.any():
                break
            dst, cand = dst[better], cand[better]
            np.minimum.at(label, dst, cand)
            frontier = self.distinct(dst)
        return label

    def distinct(self, nodes_):
        """Distinct node ids (in no set order: a frontier's order does not matter). A mask
        over all nodes beats hashing millions; hashing beats clearing and scanning a mask
        of every node for a few."""
        if len(nodes_) * 8 < self.n:
            return pd.unique(nodes_)
        mask = np.zeros(self.n, dtype=bool)
        mask[nodes_] = True
        return np.flatnonzero(mask)

    def reach(self, seeds):
        """Mask of nodes reachable from `seeds` by one edge or more."""
        if self.native:
            found = native.reach(self.ptr, self.dst, self.n, seeds)
            if found is not None:
                return found
        seen = np.zeros(self.n, bool)
        _, frontier = self.out_edges(self.distinct(seeds))
        frontier = self.distinct(frontier)
        while len(frontier):
            frontier = frontier[~seen[frontier]]
            seen[frontier] = True
            _, nxt = self.out_edges(frontier)
            frontier = self.distinct(nxt)
        return seen


# --- eager marking ---------------------------------------------------------------------------

#: Host event types XProf's trace viewer never shows (`IsInternalEvent`, xplane_schema.cc).
INTERNAL_EVENTS = frozenset(
    {
        "MemoryAllocation",
        "MemoryDeallocation",
        "PrefetchProduce",
        "PrefetchConsume",
        "ParallelInterleaveProduce",
        "ParallelInterleaveConsume",
        "ParallelInterleaveInitializeInput",
        "ParallelMapProduce",
        "ParallelMapConsume",
        "MapAndBatchProduce",
        "MapAndBatchConsume",
        "ParseExampleProduce",
        "ParseExampleConsume",
    }
)

# Names XProf's `FindHostEventType` gives a type of its own (tsl `xplane_schema.cc`): an event
# with one of these names is neither a TF op run nor a kernel execution, whatever its stats.
_HOST_EVENT_TYPE_NAMES = frozenset(
    (
        "UnknownHostEventType",
        LEGACY_ROOT,
        "SessionRun",
        "FunctionRun",
        "RunGraph",
        "RunGraphDone",
        TF_OP_RUN,
        EAGER_EXECUTE,
        EXECUTOR,
        "ExecutorDoneCallback",
        *INTERNAL_EVENTS,
        "RemotePerfCounter",
        *TF_DATA_FUNCTIONS,
        *LOOP_OPS,
        *GET_NEXT,
        "Iterator",
        "Iterator::Prefetch::Generator",
        "ParallelBatchProduce",
        "ParallelBatchConsume",
        *FORCED_ROOT_LEVEL,
        "BrainSessionRun",
        "ConcatInputTensors",
        "MergeInputTensors",
        "ScheduleWithoutSplit",
        "ScheduleWithSplit",
        "ScheduleWithEagerSplit",
        "ASBSQueue::Schedule",
        "OrbaxServing::ConcatInputBuffers",
        "TfrtModelRun",
        "ServingModelRun",
        "KernelLaunch",
        "KernelExecute",
    )
)


def _eager_targets(nodes):
    """Mask of the nodes XProf marks with `is_eager`: TF op runs (an event named `TfOpRun`, or
    a TensorFlow op `name:Type` by `ParseTfOpFullname`) and kernel executions (an event named
    `KernelExecute`, or an untyped event with a `correlation_id` off the host plane). TPU
    planes are left out: XProf puts only their step/module events in its forest."""
    from .tf_op import parse_tf_op

    table = nodes.name_table[:-1]
    typed = np.zeros(len(table) + 1, bool)  # the last entry: no name
    tf_op_run = np.zeros(len(table) + 1, bool)
    execute = np.zeros(len(table) + 1, bool)
    for code, name in enumerate(table):  # distinct names only
        name = str(name)
        category = parse_tf_op(name)[0]
        tf_op_run[code] = name == TF_OP_RUN or (name not in _HOST_EVENT_TYPE_NAMES and category == "tensorflow")
        typed[code] = name in _HOST_EVENT_TYPE_NAMES or category in ("tensorflow", "tf.data")
        execute[code] = name == "KernelExecute"
    code = nodes.name  # -1 (no name) reads the last entry
    kernel = nodes.stat["correlation_id"].mask(nodes.n) & ~nodes.host & ~typed[code]
    return (tf_op_run[code] | execute[code] | kernel) & ~nodes.tpu


def _nearest_source(graph, n, sources):
    """Per node, the index into `sources` of the nearest one it descends from (-1: none).

    XProf walks up from each marked event breadth first (`FindParentWithComparator`);
    walking down from all sources at once, one hop a round, finds the same nearest
    source. A context node stands for direct producer -> consumer edges, so it is
    crossed within the round. Sources at the same distance: the earliest listed wins.
    """
    if graph.native:
        found = native.nearest_source(graph.ptr, graph.dst, n, graph.n, sources)
        if found is not None:
            return found
    none = np.iinfo(np.int64).max
    label = np.full(graph.n, none)
    label[sources] = np.arange(len(sources))
    frontier = graph.distinct(sources)
    while len(frontier):
        src, dst = graph.out_edges(frontier)
        new = label[dst] == none
        src, dst = src[new], dst[new]
        np.minimum.at(label, dst, label[src])
        reached = graph.distinct(dst)
        ctx = reached[reached >= n]
        if len(ctx):
            src, dst = graph.out_edges(ctx)
            new = label[dst] == none
            src, dst = src[new], dst[new]
            np.minimum.at(label, dst, label[src])
            reached = graph.distinct(np.concatenate([reached[reached < n], dst]))
        frontier = reached
    return np.where(label == none, -1, label)


def _eager_nodes(space, nodes, graph):
    """Nodes XProf's grouping marks `is_eager` = 1 (tsl `MarkEagerlyExecutedCpuTfOps`,
    `MarkEagerlyExecutedGpuKernels`, `EventNode::IsEager`).

    A TF op run or kernel execution is eager when the nearest `EagerExecute` it descends
    from (nesting, producer/consumer contexts, kernel launch -> execute, TF loops) has an
    `is_func` stat equal to 0; without one it is a compiled function, and without such an
    ancestor the op is not eager (TF1 graphs, functions run by `FunctionRun`).
    """
    eager_execute = nodes.where_name(EAGER_EXECUTE)
    if not len(eager_execute):
        return np.zeros(0, np.int64)
    is_func = np.ones(len(eager_execute), np.int64)  # absent: a compiled function
    line_of = nodes.line[eager_execute]
    for li in np.unique(line_of):
        at = np.flatnonzero(line_of == li)
        plane_name, idx = nodes.lines[li]
        line = space.plane(plane_name).lines[idx]
        ev, values = line.stat_table(names=[IS_FUNC], events=nodes.event_of(eager_execute[at])).ints(IS_FUNC)
        is_func[at[ev]] = values
    if not (is_func == 0).any():
        return np.zeros(0, np.int64)  # no op can be eager: no walk
    order = np.lexsort((eager_execute, nodes.start_of(eager_execute)))
    sources = eager_execute[order]
    nearest = _nearest_source(graph, nodes.n, sources)[: nodes.n]
    targets = np.flatnonzero(_eager_targets(nodes) & (nearest >= 0))
    return targets[is_func[order][nearest[targets]] == 0]


_NO_LINKS = pd.DataFrame({"parent": np.zeros(0, np.int64), "child": np.zeros(0, np.int64)})


def _forest(space, eager=True):
    """(nodes, node group id (-1 none), step table, eager nodes, group links: `_links`, made
    when first asked: only the trace viewer's flows read them) of XProf's grouping
    (`eager=False`: no eager nodes looked for)."""
    # The eager marks take the nearest `EagerExecute` by hops between events: all are nodes.
    nodes = _Nodes(space, keep_all=eager and _has_eager_execute(space))
    n = nodes.n
    empty = pd.DataFrame(columns=["group_id", "node", "root_level"])
    if nodes.loop_ops or n == 0:  # XProf groups nothing and marks nothing eager
        return nodes, np.full(n, -1, np.int64), empty, np.zeros(0, np.int64), _Later(_NO_LINKS.copy)
    context_edges, contexts = _context_edges(nodes)
    edges = [nodes.nesting, context_edges]
    executors = nodes.where_name(EXECUTOR)
    edges.append(_join_edges(nodes, executors, nodes.where_name(*GET_NEXT), ["id", "iter_num"]))
    # Kernel launch / execute: events XProf gives no other type, with a
    # correlation_id, on the host plane / on a device plane.
    corr = nodes.stat["correlation_id"].mask(n) & ~nodes.tpu
    edges.append(
        _join_edges(nodes, np.flatnonzero(corr & nodes.host), np.flatnonzero(corr & ~nodes.host), ["correlation_id"])
    )

    step_id = nodes.stat["id"]
    ids, has = step_id.at(nodes.where_name(*TF_DATA_FUNCTIONS))
    tf_data_ids = np.unique(ids[has])

    # TF executor loops: each (id, iter_num) iteration is a root.
    ex_ids, ex_has = step_id.at(executors)
    ex_iter, it_has = nodes.stat["iter_num"].at(executors)
    keep = ex_has & it_has
    ex, ex_ids, ex_iter = executors[keep], ex_ids[keep], ex_iter[keep]
    keep = ~np.isin(ex_ids, tf_data_ids)
    ex, ex_ids, ex_iter = ex[keep], ex_ids[keep], ex_iter[keep]
    loop_roots = np.zeros(0, np.int64)
    if len(ex):
        df = pd.DataFrame({"id": ex_ids, "iter": ex_iter, "node": ex, "start": nodes.start_of(ex)})
        loops = df.groupby("id")["iter"].agg(lambda s: not (s == 0).all())
        df = df[df["id"].map(loops)]
        if len(df):
            df = df.sort_values(["start", "node"], kind="stable")
            first = df.groupby(["id", "iter"], sort=False)["node"].transform("first").to_numpy()
            loop_roots = df.drop_duplicates(["id", "iter"])["node"].to_numpy()
            other = df["node"].to_numpy() != first
            edges.append(np.stack([first[other], df["node"].to_numpy()[other]]))
    graph = _Graph(n + contexts, np.concatenate([e.astype(nodes.dtype, copy=False) for e in edges], axis=1))
    total = graph.n  # events, then one node per producer/consumer context
    eager = _eager_nodes(space, nodes, graph) if eager else np.zeros(0, np.int64)

    level = np.zeros(n, np.int64)
    level[nodes.stat["_r"].events] = nodes.stat["_r"].values
    is_root = nodes.stat["_r"].mask(n)
    legacy = np.zeros(n, bool)
    legacy[nodes.where_name(LEGACY_ROOT)] = True
    legacy &= ~is_root
    level[legacy], is_root[legacy] = 1, True
    for name, lv in FORCED_ROOT_LEVEL.items():
        m = nodes.where_name(name)
        level[m], is_root[m] = lv, True

    all_edges = np.concatenate([e.astype(np.int64, copy=False) for e in edges], axis=1)
    if len(loop_roots):
        roots = loop_roots  # every iteration takes an id, grouped or not
        label = np.full(total, np.iinfo(nodes.dtype).max, nodes.dtype)  # (no label)
        label[roots] = np.arange(len(roots))
        label = graph.min_label(label)[:n]
        group = label.astype(np.int64)
        group[label == np.iinfo(nodes.dtype).max] = -1
        steps = pd.DataFrame({"group_id": np.arange(len(roots)), "node": roots, "root_level": level[roots]})
        return nodes, group, steps, eager, _Later(lambda: _links(all_edges, n, group))

    roots = np.flatnonzero(is_root)
    ids, has = step_id.at(roots)
    roots = roots[~(has & np.isin(ids, tf_data_ids))]
    # A root below a root of the same level is grouped with that one.
    below = np.zeros(len(roots), bool)
    for lv in np.unique(level[roots]):
        reach = graph.reach(np.flatnonzero(is_root & (level == lv)))[:n]
        at = level[roots] == lv
        below[at] = reach[roots[at]]
    roots = roots[~below]
    roots = roots[np.lexsort((roots, nodes.start_of(roots), -level[roots]))]
    # Labels in the node ids' type (int32 while they fit), the type's largest: no label.
    label = np.full(total, np.iinfo(nodes.dtype).max, nodes.dtype)
    label[roots] = np.arange(len(roots))
    label = graph.min_label(label)[:n]
    # A root reached by an earlier root is already grouped: it takes no id.
    own = label[roots] == np.arange(len(roots))
    ids = np.full(len(roots) + 1, -1, np.int64)
    ids[np.flatnonzero(own)] = np.arange(own.sum())
    group = ids[np.minimum(label, len(roots), out=label)]  # no label: ids[len(roots)], -1
    steps = pd.DataFrame({"group_id": np.arange(own.sum()), "node": roots[own], "root_level": level[roots[own]]})
    return nodes, group, steps, eager, _Later(lambda: _links(all_edges, n, group))


class _Later:
    """A value made the first time `value()` is asked for (by `make()`), then kept."""

    def __init__(self, make):
        self._make, self._value = make, None

    def value(self):
        if self._make is not None:
            self._value, self._make = self._make(), None
        return self._value


def _links(edges, n, group):
    """(parent group, child group) pairs, unique: XProf's group walk, meeting an event of
    another group, records that group as its child (`EventNode::PropagateGroupId`). Every
    edge from an event of one group to an event of another is such a meeting; a context
    (`_context_edges`' extra nodes) links each of its producers to each of its consumers."""
    src, dst = edges
    direct = (src < n) & (dst < n)
    a, b = group[src[direct]], group[dst[direct]]
    pairs = [np.stack([a, b])]
    into, out_of = (src < n) & (dst >= n), (src >= n) & (dst < n)
    if into.any() and out_of.any():
        producers = pd.DataFrame({"ctx": dst[into], "parent": group[src[into]]}).drop_duplicates()
        consumers = pd.DataFrame({"ctx": src[out_of], "child": group[dst[out_of]]}).drop_duplicates()
        joined = producers.merge(consumers, on="ctx")
        pairs.append(np.stack([joined["parent"].to_numpy(np.int64), joined["child"].to_numpy(np.int64)]))
    both = np.concatenate(pairs, axis=1)
    keep = (both[0] >= 0) & (both[1] >= 0) & (both[0] != both[1])
    out = pd.DataFrame({"parent": both[0][keep], "child": both[1][keep]}).drop_duplicates()
    return out.sort_values(["parent", "child"], ignore_index=True)


_HOST_PLANE_PREFIXES = (*XLA_HOST_PLANES, "/host:CUPTI", SCOPE_RANGE_PLANE)


def of_line(table, plane, li, fill):
    """`table[(plane.name, li)]` (one value per event of the line: group ids, eager marks),
    or `fill` for each event where the table has none. Tables are kept by plane name: in a
    damaged file with two planes of one name a line may find the other plane's, and one of
    another length counts as none."""
    n = len(plane.lines[li])
    values = table.get((plane.name, li))
    if values is None or len(values) != n:
        return np.full(n, fill)
    return np.asarray(values)


def of_line_at(table, plane, li, events, fill):
    """`of_line(table, plane, li, fill)[events]`, without making the line's ids where the
    table makes them when asked (`_LineGroups.at`: the memory profile reads the steps of
    the allocator's 58,400 events on a Python tracer's line of 1.4 M)."""
    at = getattr(table, "at", None)
    if at is not None and (plane.name, li) in table and table.length(plane.name, li) == len(plane.lines[li]):
        return at((plane.name, li), events)
    return of_line(table, plane, li, fill)[events]


def is_grouped(space):
    """True when every host and device plane of the space has a `group_id` stat (XProf's
    IsXSpaceGrouped: then it neither regroups nor derives lines). Once per space: each
    plane's analysis asks."""
    return derived(space, "is_grouped", lambda: _is_grouped(space))


def _is_grouped(space):
    for p in space.planes:
        host = p.name.startswith(_HOST_PLANE_PREFIXES)
        device = not host and p.name.startswith(("/device", "#Chip"))
        if (host or device) and not p.has_stat("group_id"):
            return False
    return True


def _file_group_ids(space):
    out = {}
    for plane in space.planes:
        for li, line in plane.busy_lines:
            g = np.full(len(line), -1, np.int64)
            ev, v = line.stat_table(names=["group_id"]).ints("group_id")
            g[ev] = v
            out[(plane.name, li)] = g
    return out


def group_ids(space, recompute=False, eager_marks=True):
    """The step (group id) of every event: {(plane name, line index): int64 array}, a
    read-only mapping (a line's array made when it is first asked for).

    One array per line with events of every plane, in the line's file order (a line
    without events has none: `of_line` reads any line); -1 where an event belongs to no
    group. If the file has `group_id` stats (see
    `is_grouped`) they are returned as they are, as XProf does; with
    `recompute=True` they are ignored and the grouping is computed.
    `eager_marks=False`: the caller will not ask for `eager_events` (the memory
    profile): the grouping is computed without them (a walk of the whole graph
    less), unless it is kept with them already.
    """
    if is_grouped(space) and not recompute:
        return derived(space, "file_group_ids", lambda: _file_group_ids(space))
    return _computed(space, eager_marks)[0]


def forward_filled_group_ids(space, plane):
    """{line index: group ids} of a device plane's lines after XProf's ProcessUngroupedEvents:
    over all its lines (derived ones left out) by (start, duration), an event without a
    group takes the last group seen before it (events before the first keep -1). XProf does
    this while deriving its timelines, so not in a file grouped already (`is_grouped`).

    Computed once per plane (the trace, the GPU op database and the GPU steps all read
    it); the arrays are shared and read-only."""
    key = ("forward_filled_group_ids", space.index_of(plane))
    return derived(space, key, lambda: _forward_filled_group_ids(space, plane))


def _forward_filled_group_ids(space, plane):

    groups = group_ids(space)
    keys = [(li, line) for li, line in plane.busy_lines if not is_derived_line(line)]
    g = [of_line(groups, plane, li, -1) for li, _ in keys]
    if not g or is_grouped(space) or not any((x >= 0).any() for x in g):
        return {li: _read_only(x) for (li, _), x in zip(keys, g)}
    begin = np.concatenate([line.start_ps.astype(np.int64) for _, line in keys])
    dur = np.concatenate([line.event_duration_ps.astype(np.int64) for _, line in keys])
    flat = np.concatenate(g)
    order = np.lexsort((dur, begin))
    seq = flat[order]
    pos = np.where(seq >= 0, np.arange(len(seq)), -1)
    np.maximum.accumulate(pos, out=pos)
    out = np.empty_like(flat)
    out[order] = np.where(pos >= 0, seq[np.maximum(pos, 0)], -1)
    bounds = np.cumsum([0] + [len(x) for x in g])
    return {li: _read_only(out[bounds[k] : bounds[k + 1]]) for k, (li, _) in enumerate(keys)}


def _read_only(array):
    array = array.view()
    array.flags.writeable = False
    return array


_STEP_COLUMNS = [
    "group_id",
    "plane",
    "line",
    "event",
    "name",
    "start_ps",
    "duration_ps",
    "root_level",
    "step_num",
    "step_name",
]


def _computed(space, eager=True):
    """(group ids by line, step table, eager nodes by line) of one grouping pass, kept
    with the space. Per host the memory profile, the overview and the steps all ask
    for them; the pass is the costly part (seconds on millions of events).

    `eager=False`: the eager nodes are not looked for (None), unless the pass that
    found them is kept already. A file without `EagerExecute` has no eager node: one pass
    (none looked for, {} found) serves both."""

    _read_ahead_marked(space)
    if _groups_nothing(space):
        return derived(space, "grouping", lambda: _ungrouped(space))

    def compute(eager):
        name = f"{_GROUPING_CACHE}-{'eager' if eager else 'plain'}"
        found = column_cache.load_derived(space, name)
        restored = _restored_grouping(space, *found) if found is not None else None
        if restored is not None:
            return restored
        nodes, group, steps, marked, links = _forest(space, eager)
        split = _split(nodes, group)
        out = split, _step_table(nodes, steps), _split_nodes(nodes, marked) if eager else None, links
        column_cache.store_derived_later(space, name, lambda: _saved_grouping(out))
        return out

    if not _has_eager_execute(space):
        return derived(space, "grouping", lambda: compute(True))  # (no eager nodes: no cost)
    if not eager and not kept(space, "grouping"):
        return derived(space, "grouping_without_eager", lambda: compute(False))
    return derived(space, "grouping", lambda: compute(True))


def reads_line_stats(space) -> bool:
    """Whether `group_ids` decodes the lines' stats (`GROUPING_STATS`): not for a file that
    is grouped already (`is_grouped`) or that has nothing to group (`_groups_nothing`)."""
    return not is_grouped(space) and not _groups_nothing(space)


def gpu_stats_ahead(space, here=False):
    """Once per file, for the tools that read its GPU kernels' stats: each GPU plane's
    `read_ahead` marked, and its lines decoded from the last on a thread
    (`xspace.decode_ahead`) while the tool reads them from the first. `here`: on the
    calling thread, returned from when done (a thread of its own: `gpu_stats_first`); a
    tool that asks meanwhile starts no other."""
    backwards = []

    def start():
        _read_ahead_marked(space)
        lines = [
            line
            for plane in space.planes
            if plane.name.startswith(GPU_PLANE_PREFIX)
            for _, line in plane.busy_lines
            if not is_derived_line(line)
        ]
        if here:
            backwards.append(lines)  # (decoded below: a tool's thread does not wait for it)
        else:
            decode_ahead(lines, _GPU_READ_AHEAD)
        return True

    derived(space, "gpu_stats_ahead", start)
    for lines in backwards:
        decode_ahead(lines, _GPU_READ_AHEAD, thread=False)


def gpu_stats_first(run) -> None:
    """`gpu_stats_ahead` of every file of `run`, on the calling thread: what a part built
    ahead on a thread (`RunStats.build_ahead`'s `first`) does before its own work, so that
    the two cores decode the GPU stats the tool waits for first (the framework op stats'
    first view on the 45 MB AMD file: 408 -> 386 ms, medians of 11)."""
    for space in run.xspaces():
        gpu_stats_ahead(space, here=True)


def _read_ahead_marked(space):
    """`_mark_read_ahead`, once per file: every plane's forward fill asks (a file may hold
    20,000 planes)."""
    derived(space, "gpu_read_ahead", lambda: _mark_read_ahead(space))


def _mark_read_ahead(space):
    """Each GPU plane's `read_ahead`: the first tool to read a GPU line's stats decodes what
    the others read next too (the grouping's pass asks for them all; without one, the op
    database or the kernel reports is first)."""
    for plane in space.planes:
        if plane.read_ahead is None and plane.name.startswith(GPU_PLANE_PREFIX):
            plane.read_ahead = _GPU_READ_AHEAD


_GPU_READ_AHEAD = frozenset(_GPU_STATS_READ_AHEAD)

#: Names of the events that make a root (`_forest`: TF executor loops, legacy and batching
#: roots) or start the eager walk: without one of them, and without an `_r` stat, no
#: event of the file has a group or an eager mark.
_STARTING_NAMES = frozenset((EXECUTOR, LEGACY_ROOT, *FORCED_ROOT_LEVEL, EAGER_EXECUTE))


def _groups_nothing(space) -> bool:
    """Whether the grouping gives every event of the file group -1 and marks none eager, as
    the planes' metadata says before any line's stats are read: no plane with events has
    an `_r` stat (a root level: what `jax.profiler.StepTraceAnnotation` and TF's step
    markers write) or an event named in `_STARTING_NAMES`, or some plane names a TF loop op
    (XProf groups nothing then). A JAX run without step markers is such a file: its
    grouping pass (most of a GPU tool's time on tens of MB) finds nothing, so none is made."""

    def check():
        names = _event_names(space)
        rooted = any(plane.has_stat("_r") for plane in space.planes if plane.lines)
        return bool(names & set(LOOP_OPS)) or not (rooted or names & _STARTING_NAMES)

    return derived(space, "groups_nothing", check)


def _ungrouped(space):
    """`_computed`'s result where `_groups_nothing`: every line's events in group -1, no
    step, no eager event, no link."""
    lengths = {(plane.name, li): len(line) for plane in space.planes for li, line in plane.busy_lines}
    return _NoGroups(lengths), pd.DataFrame([], columns=_STEP_COLUMNS), {}, _Later(_NO_LINKS.copy)


def _has_eager_execute(space) -> bool:
    """Whether an event of the file is named `EagerExecute` (found once per file)."""
    return EAGER_EXECUTE in _event_names(space)


def _event_names(space) -> frozenset:
    """The names of the event metadata of the planes with lines (found once per file)."""
    return derived(
        space,
        "event_names",
        lambda: frozenset(m.name for p in space.planes if p.lines for m in p.message.event_metadata.values()),
    )


#: The name the grouping has in the column cache; a new number when what it computes changes.
_GROUPING_CACHE = "grouping-1"
_STEP_TEXT = ("plane", "name", "step_name")


def _saved_grouping(out):
    """(meta, arrays) of `_computed`'s result, kept beside the file's columns (the grouping
    pass is most of a tool's time on a GPU file of tens of MB): the group ids of every line
    in one array, the step table's columns (text as codes into the meta's values), the
    eager events, the group links."""
    split, steps, eager, links = out
    keys = list(split)
    meta: dict = {"lines": [[k[0], int(k[1]), len(split[k])] for k in keys], "strings": {}}
    arrays = {"groups": _joined([split[k] for k in keys])}
    for col in _STEP_COLUMNS:
        values = steps[col].to_numpy()
        if col in _STEP_TEXT:
            arrays[f"step_{col}"], meta["strings"][col] = column_cache.text_codes(values)
        else:
            arrays[f"step_{col}"] = np.asarray(values, dtype=np.int64)
    meta["eager"] = None if eager is None else [[k[0], int(k[1]), len(v)] for k, v in eager.items()]
    if eager is not None:
        arrays["eager"] = _joined(list(eager.values()))
    links = links.value()
    arrays["link_parent"] = links["parent"].to_numpy(np.int64)
    arrays["link_child"] = links["child"].to_numpy(np.int64)
    return meta, arrays


def _joined(parts):
    return np.concatenate([np.asarray(p, np.int64) for p in parts]) if parts else np.zeros(0, np.int64)


def _restored_grouping(space, meta, arrays):
    """`_saved_grouping`'s inverse, checked against the file's lines; None where it does not fit."""
    try:
        lengths = {}
        for plane in space.planes:
            for li, line in plane.busy_lines:
                lengths.setdefault((plane.name, li), len(line))
        split, at = {}, 0
        groups = arrays["groups"]
        for plane_name, li, n in meta["lines"]:
            key = (plane_name, int(li))
            if lengths.get(key, -1) != n or at + n > len(groups):
                return None
            split[key] = groups[at : at + n]
            at += n
        if at != len(groups):
            return None
        rows = len(arrays["step_group_id"])
        columns = {}
        for col in _STEP_COLUMNS:
            a = np.asarray(arrays[f"step_{col}"])
            if len(a) != rows:
                return None
            if col in _STEP_TEXT:
                columns[col] = column_cache.text_values(a, meta["strings"][col])
                if columns[col] is None:
                    return None
            else:
                columns[col] = a.copy()
        steps = pd.DataFrame(columns, columns=_STEP_COLUMNS)
        eager = None
        if meta["eager"] is not None:
            eager, at = {}, 0
            for plane_name, li, n in meta["eager"]:
                eager[(plane_name, int(li))] = np.asarray(arrays["eager"][at : at + n])
                at += n
        links = pd.DataFrame({"parent": np.array(arrays["link_parent"]), "child": np.array(arrays["link_child"])})
        return split, steps, eager, _Later(lambda: links)
    except (KeyError, TypeError, ValueError):
        return None


def _split(nodes, group):
    """Group ids per line, in file order (-1: none), as a read-only mapping made line by line
    when asked (`_LineGroups`)."""
    return _LineGroups(nodes, group)


class _LineGroups(Mapping):
    """{(plane name, line index): group id of each event (-1: none)}: a line whose events
    are all nodes views its part of `group`; another's events take their node's
    (`_Nodes.nearest`), an array made the first time the line is asked for. The device
    tools ask for the device lines only: a Python tracer's line of 1.4 M calls is not
    given 11 MB of group ids (3-11 ms of fresh memory) that no one reads. Until then the
    line's event -> node map (int32, half the ids' size) is what is kept."""

    def __init__(self, nodes, group):
        group.flags.writeable = False  # shared by every tool: views, read-only
        self._group = group
        self._none = None  # `group` and a -1 after it (a node of -1 reads it: no group)
        bounds = np.append(nodes.line_start, nodes.n).tolist()
        # Per line: its ids once made, else (first node, end node, event -> node or None).
        self._lines = {key: (bounds[k], bounds[k + 1], nodes.nearest[k]) for k, key in enumerate(nodes.lines)}

    def __getitem__(self, key):
        found = self._lines[key]
        if isinstance(found, tuple):  # (two threads may both make it: the same values)
            a, b, near = found
            if near is None:
                found = self._group[a:b]
            else:
                found = self._with_none()[near]
                found.flags.writeable = False
            self._lines[key] = found
        return found

    def __contains__(self, key):  # (Mapping's would make the line's ids)
        return key in self._lines

    def length(self, plane_name, li):
        """How many events line `li` of the plane named so has here."""
        found = self._lines[(plane_name, li)]
        if not isinstance(found, tuple):
            return len(found)
        a, b, near = found
        return b - a if near is None else len(near)

    def at(self, key, events):
        """`self[key][events]`, without making the line's ids (an int64 array)."""
        found = self._lines[key]
        if not isinstance(found, tuple):
            return found[events]
        a, b, near = found
        if near is None:
            return self._group[a:b][events]
        return self._with_none()[near[events]]

    def _with_none(self):
        """`group` and a -1 after it: the ids of `nearest`'s nodes, -1 (no node) reading -1."""
        if self._none is None:
            self._none = np.append(self._group, -1)
        return self._none

    def nodes_of(self, key):
        """(each event's node, int32, -1: none; each node's group id) of a line whose ids
        are not made yet, for a caller that reads them once (`steps._host_events`); None
        where they are made or the line's events are all nodes (`self[key]` then)."""
        found = self._lines[key]
        if isinstance(found, tuple) and found[2] is not None and found[2].dtype == np.int32:
            return found[2], self._group
        return None

    def __iter__(self):
        return iter(self._lines)

    def __len__(self):
        return len(self._lines)


class _NoGroups(Mapping):
    """`_LineGroups` where no event has a group: {(plane name, line index): -1 per event},
    a line's array made when it is first asked for."""

    def __init__(self, lengths):
        self._lengths = lengths
        self._made: dict = {}

    def __getitem__(self, key):
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = _read_only(np.full(self._lengths[key], -1, np.int64))
        return found

    def __contains__(self, key):
        return key in self._lengths

    def length(self, plane_name, li):
        return self._lengths[(plane_name, li)]

    def at(self, key, events):
        self._lengths[key]  # (a KeyError for a line it does not hold, as `_LineGroups.at`)
        return np.full(len(events), -1, np.int64)

    def nodes_of(self, key):
        return None

    def __iter__(self):
        return iter(self._lengths)

    def __len__(self):
        return len(self._lengths)


def _split_nodes(nodes, which):
    """{(plane name, line index): event indices} of some nodes (lines without any left out)."""
    out = {}
    if not len(which):
        return out
    which = np.sort(which)
    for li in np.unique(nodes.line[which]):
        at = which[nodes.line[which] == li]
        out[nodes.lines[li]] = nodes.event_of(at)
    return out


def eager_events(space, recompute=False):
    """Events marked eagerly executed: {(plane name, line index): bool array}, one per line
    with events (`of_line` reads any line).

    True where XProf's `is_eager` stat is set (see `_eager_nodes` for the rule). If the
    file is grouped (`is_grouped`) XProf does not regroup and reads the file's own
    `is_eager` stats; so does this unless `recompute=True`.
    """
    if is_grouped(space) and not recompute:
        marked = derived(space, "file_eager", lambda: _file_eager(space))
    elif not _has_eager_execute(space):
        marked = {}  # no `EagerExecute` to descend from: nothing is eager, no grouping pass
    else:
        marked = _computed(space)[2]
    out = {}
    for plane in space.planes:
        for li, line in plane.busy_lines:
            key = (plane.name, li)
            if key in out:  # (a damaged file's planes of one name: the first's)
                continue
            mask = np.zeros(len(line), bool)
            found = marked.get(key)
            if found is not None and len(found):
                at = np.asarray(found, dtype=np.int64)
                mask[at[at < len(line)]] = True  # (a damaged file's planes of one name share marks)
            out[key] = mask
    return out


def _file_eager(space):
    """{(plane name, line index): indices of the events whose `is_eager` stat is nonzero}."""
    out = {}
    for plane in space.planes:
        if not plane.has_stat(IS_EAGER):
            continue
        for li, line in plane.busy_lines:
            ev, v = line.stat_table(names=[IS_EAGER]).ints(IS_EAGER)
            if (v != 0).any():
                out[(plane.name, li)] = np.sort(ev[v != 0])
    return out


def group_links(space) -> pd.DataFrame:
    """(parent, child) group id pairs of one file: where XProf's grouping walk from one group
    met an event of another (a request meeting the batch it was put in: the batch is its
    child, it the batch's parent; `_links`). Empty for a file grouped already."""
    if is_grouped(space):
        return _NO_LINKS.copy()
    return _computed(space)[3].value().copy()


def step_events(space, recompute=False):
    """The root event of each group (step), as a DataFrame sorted by group id.

    Columns: group_id, plane, line (index in the plane), event (index in the
    line), name, start_ps, duration_ps, root_level, step_num (the `iter_num`
    or `step_num` of the root or its nearest ancestor, else the group id) and
    step_name (XProf's group name: the `graph_type` or, for user-defined
    roots, the event name, then the step number; e.g. "train 3").

    For a file that already has `group_id` stats (see `is_grouped`) XProf does
    not regroup and keeps no root table; pass `recompute=True` to get one.
    """
    if is_grouped(space) and not recompute:
        return pd.DataFrame(columns=_STEP_COLUMNS)
    return _computed(space)[1].copy()


def _step_table(nodes, steps):
    """`step_events`' table from the forest's roots (`_forest`'s step table)."""
    roots = steps["node"].to_numpy(np.int64)
    # The step number and graph type: the root's, else its nearest nesting ancestor's
    # (`iter_num` before `step_num` on one event). All roots walk up together.
    parent = np.full(nodes.n, -1, np.int64)
    parent[nodes.nesting[1]] = nodes.nesting[0]
    num = np.zeros(len(roots), np.int64)
    has_num = np.zeros(len(roots), bool)
    gt = np.full(len(roots), None, dtype=object)
    typed = np.fromiter(nodes.graph_type, dtype=np.int64, count=len(nodes.graph_type))
    cur = roots.copy()
    todo = np.arange(len(roots))
    while len(todo):
        v = cur[todo]
        for k in ("iter_num", "step_num"):
            val, has = nodes.stat[k].at(v)
            take = has & ~has_num[todo]
            num[todo[take]], has_num[todo[take]] = val[take], True
        for i in np.flatnonzero(np.isin(v, typed)):
            if gt[todo[i]] is None:
                gt[todo[i]] = str(nodes.graph_type[int(v[i])])
        cur[todo] = parent[v]
        todo = todo[(cur[todo] >= 0) & ~(has_num[todo] & (gt[todo] != None))]  # noqa: E711
    rows = []
    start, end = nodes.start_of(roots), nodes.end_of(roots)
    for i, (g, node, level) in enumerate(zip(steps["group_id"], roots, steps["root_level"])):
        name = nodes.name_of(node)
        prefix = gt[i] if gt[i] is not None else (None if name in IMPLICIT_ROOTS else name)
        n = int(num[i]) if has_num[i] else int(g)
        rows.append(
            {
                "group_id": int(g),
                "plane": nodes.plane_names[nodes.line_plane[nodes.line[node]]],
                "line": nodes.lines[nodes.line[node]][1],
                "event": int(nodes.event_of(node)),
                "name": name,
                "start_ps": int(start[i]),
                "duration_ps": int(end[i] - start[i]),
                "root_level": int(level),
                "step_num": n,
                "step_name": f"{prefix} {n}" if prefix else str(n),
            }
        )
    return pd.DataFrame(rows, columns=_STEP_COLUMNS)
