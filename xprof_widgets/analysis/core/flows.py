"""Flows: the events XProf's trace viewer connects with arrows, and how.

XProf 2.24.2 reads one `flow` stat per event (`xprof/convert/xplane_to_trace_container.cc`,
`ConvertXStatsToTraceEventArguments`: the event's metadata's stats, then its own; the last
`flow` read wins) and writes it as the event's `bind_id`, `flow_out` / `flow_in` and `cat`
in the trace JSON. Few files hold `flow` stats; XProf adds them when it loads a host
(`xprof/convert/preprocess_single_host_xplane.cc` calls openxla/xla
`xla/tsl/profiler/utils/xplane_utils.cc` `AddFlowsToXplane` on every plane, after
`PreprocessXPlane`), appending to each event's own stats, from its own stats only:

* `correlation_id` (its uint64 value; a record of another kind reads 0): a flow of
  category `gpu_launch` keyed by the id, going out of the events of host planes (the
  launch, `cudaLaunchKernel`, `cuGraphLaunch`, a memcpy call...) and into those of the
  other planes (the kernels and copies it started, on every GPU);
* `_pt` and `_p` (producer type and id, both needed): a flow going out, keyed by the
  type and the id, its category the type;
* `_ct` and `_c` (consumer type and id): a flow coming in, keyed the same way.

They are added in that order, after the file's own `flow` stats, so an event's flow is
its consumer one if it has one, else its producer one, else its `correlation_id` one,
else the `flow` stat of the file (its own, else its metadata's). A type above
XProf's last context type (`threadpool_event`, 15) is the generic type (`GetSafeContextType`).
XProf keys its flows by a hash of the host and these ids (`XFlow::GetFlowId`); here the
key is the ids themselves and which rule made the flow. The `flow` stat holds the
direction in its 2 low bits, the id in the next 56 and the category in the top 6 (`XFlow`).

XProf adds them only to a file it groups: one grouped already (`group_id` stats,
`grouping.is_grouped`; `PreprocessSingleHostXSpace` runs `AddFlowsToXplane` inside its
`if (step_grouping && !IsXSpaceGrouped(*space))`) keeps only its own `flow` stats.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .planes import XLA_HOST_PLANES

#: XProf's flow categories by number (openxla/xla `tsl/profiler/lib/context_types.h`
#: `ContextType`, `GetContextTypeString`): "" for the generic and legacy types, which its
#: trace JSON writes without a `cat`.
CATEGORIES = (
    "",
    "",
    "tf_exec",
    "tfrt_exec",
    "batch_sched",
    "PjRt",
    "as_batch_sched",
    "tfrt_rt",
    "tpu_embed",
    "gpu_launch",
    "batcher",
    "tpu_stream",
    "tpu_launch",
    "pathways_exec",
    "pjrt_library_call",
    "threadpool_event",
)
GPU_LAUNCH = CATEGORIES.index("gpu_launch")

#: How an event takes part in its flow (XProf's `TraceEvent::FlowEntryType`): it starts it
#: (`flow_out`), continues it (both) or ends it (`flow_in`); NONE: a `flow` stat without a
#: direction.
NONE, OUT, MID, IN = 0, 1, 2, 3
_ENTRY_OF_DIRECTION = np.array([NONE, IN, OUT, MID], dtype=np.int8)  # XFlow's kFlowIn = 1, kFlowOut = 2

#: Which rule made a flow: its key is only compared with keys of the same rule.
FROM_FILE, FROM_CORRELATION, FROM_CONTEXT = 0, 1, 2

#: Planes whose `correlation_id` events start flows (openxla/xla `xplane_utils.cc` `IsHostPlane`).
HOST_PLANES = frozenset(XLA_HOST_PLANES)
HOST_PLANE_PREFIXES = ("/device:CUSTOM:", "/custom:")

_STATS = ("correlation_id", "_pt", "_p", "_ct", "_c", "flow")
_ID_BITS = (1 << 56) - 1
_PART_TYPES = (np.int8, np.uint64, np.int8, np.int8, np.int8)  # rule, key, kind, category, entry


def is_host_plane(name):
    """Whether XProf counts a plane as a host's (its flows from `correlation_id` go out)."""
    return name in HOST_PLANES or name.startswith(HOST_PLANE_PREFIXES)


@dataclass
class FlowEnds:
    """The events of one line that are ends of flows, one entry each, ascending."""

    events: np.ndarray  # int64: the event's index in the file's line
    rule: np.ndarray  # int8: FROM_FILE, FROM_CORRELATION or FROM_CONTEXT
    key: np.ndarray  # uint64: the flow's id under its rule (with `kind`: the flow)
    kind: np.ndarray  # int8: the context type for FROM_CONTEXT keys, else 0
    category: np.ndarray  # int8: index in CATEGORIES
    entry: np.ndarray  # int8: OUT, MID, IN (or NONE)


def _last_per_event(events, *columns):
    """The last record of each event (records in file order): (events ascending, columns)."""
    if not len(events):
        return (events, *columns)
    rev = events[::-1]
    uniq, first_in_rev = np.unique(rev, return_index=True)
    at = len(events) - 1 - first_in_rev
    return (uniq, *(c[at] for c in columns))


def _safe_type(values):
    """XProf's `GetSafeContextType` of int64 stat values (read as uint32)."""
    t = values.astype(np.int64) & 0xFFFFFFFF
    return np.where(t < len(CATEGORIES), t, 0).astype(np.int8)


def _context(table, type_stat, id_stat):
    """(events, type, id) of the events with both stats of a producer or consumer."""
    te, tv, _ = table.own_ints(type_stat)
    ie, iv, _ = table.own_ints(id_stat)
    te, tv = _last_per_event(te, tv)
    ie, iv = _last_per_event(ie, iv)
    events, at_t, at_i = np.intersect1d(te, ie, assume_unique=True, return_indices=True)
    return events, _safe_type(tv[at_t]), iv[at_i].view(np.uint64)


def line_flow_ends(plane, line, added=True):
    """The flow ends of a line as XProf 2.24.2 reads them (module doc), or None. `added`:
    with the flows XProf adds (False: the file's `flow` stats only, as for a grouped file)."""
    named = set(plane.stat_names.values())
    if not named.intersection(_STATS) or not len(line):
        return None
    table = line.stat_table(names=[s for s in _STATS if s in named])
    parts = []  # (precedence, events, rule, key, kind, category, entry): a higher precedence wins

    def add(precedence, events, rule, key, kind, category, entry):
        n = len(events)
        if n:
            values = (rule, key, kind, category, entry)
            full = [np.broadcast_to(np.asarray(v, dtype=t), n) for v, t in zip(values, _PART_TYPES)]
            parts.append((np.full(n, precedence, np.int8), events.astype(np.int64), *full))

    if "flow" in table:
        for precedence, (events, values) in enumerate((table.metadata_ints("flow"), table.own_ints("flow")[:2])):
            events, values = _last_per_event(events, values)
            bits = values.view(np.uint64)
            category = _safe_type((bits >> np.uint64(58)).astype(np.int64))
            entry = _ENTRY_OF_DIRECTION[(bits & np.uint64(3)).astype(np.int64)]
            add(precedence, events, FROM_FILE, (bits >> np.uint64(2)) & np.uint64(_ID_BITS), 0, category, entry)
    if added and "correlation_id" in table:
        events, values, uint = table.own_ints("correlation_id")
        events, values, uint = _last_per_event(events, values, uint)
        key = np.where(uint, values, 0).view(np.uint64)
        add(2, events, FROM_CORRELATION, key, 0, GPU_LAUNCH, OUT if is_host_plane(plane.name) else IN)
    if added and "_pt" in table and "_p" in table:
        events, kind, key = _context(table, "_pt", "_p")
        add(3, events, FROM_CONTEXT, key, kind, kind, OUT)
    if added and "_ct" in table and "_c" in table:
        events, kind, key = _context(table, "_ct", "_c")
        add(4, events, FROM_CONTEXT, key, kind, kind, IN)
    if not parts:
        return None
    precedence, events, rule, key, kind, category, entry = (np.concatenate(c) for c in zip(*parts))
    order = np.lexsort((precedence, events))
    last = np.append(events[order][1:] != events[order][:-1], True)
    pick = order[last]  # per event, its entry of the highest precedence
    events = events[pick]
    return FlowEnds(
        events=events,
        rule=rule[pick].astype(np.int8),
        key=key[pick].astype(np.uint64),
        kind=kind[pick].astype(np.int8),
        category=category[pick].astype(np.int8),
        entry=entry[pick].astype(np.int8),
    )
