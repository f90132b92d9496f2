"""XProf's host op database: the framework ops the host threads ran.

XProf (`xplane_to_op_metrics_db.cc` `ConvertHostThreadsXPlaneToOpMetricsDb`,
`op_utils.cc` `HostOpMetricsDbBuilder`) takes, per host thread (`/host:CPU` line), the events
named as a framework op (`name:Type`, JAX `name:`, `Iterator::...`, memcpy; not user
TraceMes) and the events with a non-empty `tf_op` stat, nested by its op stack (an op popped
over by an inner one's end is dropped); self time is time less the time of the ops directly
inside. Each thread adds an IDLE op: from its first op's start to its last op's end, less
its ops' self time. Threads and hosts combine by op name (type: the first one's). The
framework op stats show it; the overview counts its executions and eager time.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .columns import Groups, by_category
from .grouping import eager_events
from .intervals import prev_enclosing
from .planes import HOST_PLANE, is_derived_id
from .tf_op import parse_tf_op

#: The name and type of the op of the time no op ran.
IDLE = "IDLE"


IDLE = "IDLE"


OP_DB_COLUMNS = [
    "name",
    "type",
    "occurrences",
    "time_ps",
    "self_time_ps",
    "flops",
    "model_flops",
    "bytes_accessed",
    "is_eager",
]


def _line_activities(line, known, parsed, eager_mask, has_tf_op_stat, by_categories):
    """The framework-op activities of one host line in XProf's push order (by event, an
    event's name-op before its `tf_op` op): begin, end (ps), op id (in `parsed`, the op
    strings seen so far; `known` maps event names that are ops to theirs), is_eager.
    `by_categories` keeps the op id of each of a plane's names (`columns.by_category`)."""
    if known:
        names = line.names()
        op_of_code = by_category(by_categories, names, lambda c: known.get(c, -1), -1, np.int64)
        ops = op_of_code[np.asarray(names.codes)]  # -1 where the event's name is no framework op
        by_name = np.flatnonzero(ops >= 0)
        ops = ops[by_name]
    else:  # (no name of the plane is an op: a JAX run's host ops are its `tf_op` stats)
        by_name, ops = np.zeros(0, np.int64), np.zeros(0, np.int64)
    ev, sub, key = [by_name], [np.zeros(len(by_name), np.int64)], [ops]
    marked = [eager_mask[by_name]]
    if has_tf_op_stat:
        st = line.stat_table(names=["tf_op"])
        if "tf_op" in st:
            # An op id per distinct text (a thread runs a few hundred ops, each launch names
            # one), then per event by its code: no string per event, none hashed per event.
            events, at, values = st.string_codes("tf_op")
            ids = np.array([parsed.setdefault(v, len(parsed)) if v else -1 for v in map(str, values)], np.int64)
            ids = ids[at] if len(values) else np.zeros(0, np.int64)
            nonempty = ids >= 0
            events, ids = events[nonempty], ids[nonempty]
            ev.append(events)
            sub.append(np.ones(len(events), np.int64))
            key.append(ids)
            marked.append(np.zeros(len(events), bool))
    ev, sub = np.concatenate(ev), np.concatenate(sub)
    order = np.lexsort((sub, ev))
    ev = ev[order]
    begin = line.start_ps[ev].astype(np.int64)
    return (
        begin,
        begin + line.event_duration_ps[ev].astype(np.int64),
        np.concatenate(key)[order],
        np.concatenate(marked)[order],
    )


def stack_self_time(begin, end):
    """(counted, self time) of nested activities on one thread, as XProf's op stack has them.

    XProf (`ProcessTfActivities`) sorts the begins and ends of the activities by
    time, stable (each activity's begin, then its end, in line order), pushes on a
    begin and, on an end, pops down to that activity: one that was popped over is
    dropped, and so is one whose end finds it gone. A counted activity adds its
    duration to the children time of the one below it. Properly nested activities
    (the usual case) are done with arrays; otherwise a loop over the sorted ends.
    """
    n = len(begin)
    dur = end - begin
    if n == 0:
        return np.zeros(0, bool), dur
    if (dur >= 0).all() and (end[:-1] <= begin[1:]).all():
        # One after another (a thread's launches): each begin and end sort next to each
        # other, so none holds another: all counted, each its whole time.
        return np.ones(n, bool), dur
    ts = np.concatenate([begin, end])
    closing = np.repeat([False, True], n)
    act = np.tile(np.arange(n), 2)
    order = np.lexsort((2 * act + closing, ts))
    closing, act = closing[order], act[order]
    depth = np.cumsum(np.where(closing, -1, 1))
    level = depth + closing  # an open's level after its push, a close's before its pop
    by_level = np.lexsort((np.arange(2 * n), level))
    prev = np.roll(by_level, 1)
    close_at = np.flatnonzero(closing[by_level])
    matched = (
        (level[prev[close_at]] == level[by_level[close_at]])
        & ~closing[prev[close_at]]
        & (act[prev[close_at]] == act[by_level[close_at]])
    )
    if matched.all():  # every end finds its activity on top
        pos = np.empty(2 * n, np.int64)
        pos[order] = np.arange(2 * n)
        open_pos, close_pos = pos[:n], pos[n:]
        by_open = np.argsort(open_pos)
        parent = prev_enclosing(close_pos[by_open])
        has = parent >= 0
        children = np.zeros(n, np.int64)
        np.add.at(children, by_open[parent[has]], dur[by_open[has]])
        return np.ones(n, bool), dur - children
    counted = np.zeros(n, bool)
    children = np.zeros(n, np.int64)
    stack = []
    for a, is_close in zip(act.tolist(), closing.tolist()):
        if not is_close:
            stack.append(a)
            continue
        if a not in stack:
            continue
        while stack[-1] != a:
            stack.pop()
        stack.pop()
        counted[a] = True
        if stack:
            children[stack[-1]] += dur[a]
    return counted, dur - children


def host_op_db(spaces, eager=None):
    """XProf's host op database over the files `spaces`, combined: (DataFrame with
    OP_DB_COLUMNS, one row per framework op, IDLE last; total_time_ps; total_op_time_ps),
    or None when no file has a host thread plane."""

    frames, total_time, op_time, any_line = [], 0, 0, False
    names, types = [], []  # op ids: name and type of each distinct framework op string
    parsed = {}  # op string -> op id
    for i, space in enumerate(spaces):
        plane = space.plane(HOST_PLANE)
        if plane is None or not plane.lines:
            continue
        any_line = True
        marks = eager[i] if eager is not None else eager_events(space)
        has_tf_op_stat = plane.has_stat("tf_op")
        # Event names that are framework ops (XProf's tf_ops map, by metadata).
        cats = pd.unique(plane.metadata_names[1])
        known = {}
        for c in cats:
            if c and parse_tf_op(c)[0] != "unknown":
                known[c] = parsed.setdefault(c, len(parsed))
        by_categories: dict = {}
        for li, line in plane.busy_lines:
            if is_derived_id(line.id):
                continue
            mask = marks.get((HOST_PLANE, li), np.zeros(len(line), bool))
            begin, end, key, is_eager = _line_activities(line, known, parsed, mask, has_tf_op_stat, by_categories)
            if not len(begin):
                continue
            counted, self_ps = stack_self_time(begin, end)
            # An op enters the database when its end is reached: that order decides its type.
            entered = np.lexsort((np.arange(len(begin)), end))
            entered = entered[counted[entered]]
            line_op_time = int(self_ps[entered].sum())
            line_total = max(int(end.max() - begin.min()), line_op_time)
            total_time += line_total
            op_time += line_op_time
            frames.append(  # (columns: a DataFrame per thread costs more than its rows)
                {
                    "op": key[entered],
                    "time_ps": (end - begin)[entered],
                    "self_time_ps": self_ps[entered],
                    "is_eager": is_eager[entered],
                }
            )
    if not any_line:
        return None
    for text in parsed:  # ids were given in insertion order
        _, name, kind = parse_tf_op(text)
        names.append(name)
        types.append(kind)
    ops = None
    if frames:
        # Summed per op string first (integer keys), in the order they entered; _op_db then
        # keys them by name (several strings may name one op).
        rows = {k: np.concatenate([f[k] for f in frames]) for k in frames[0]}
        g = Groups(rows["op"])
        ops = g.frame(
            {"op": rows["op"]},
            occurrences=g.size(),
            time_ps=g.sum(rows["time_ps"]),
            self_time_ps=g.sum(rows["self_time_ps"]),
            is_eager=g.any(rows["is_eager"]),
        )
        ops["name"] = np.asarray(names, dtype=object)[ops["op"].to_numpy()]
        ops["type"] = np.asarray(types, dtype=object)[ops["op"].to_numpy()]
    return _op_db(ops, total_time, op_time)


def _op_db(ops, total_time, op_time):
    """(the host op database, total_time, op_time) from op rows (name, type, occurrences,
    time_ps, self_time_ps, is_eager; None: no op) in the order ops entered it: keyed by
    name, the type the first entered row's that has one (XProf keeps the first
    non-empty), IDLE last (the time no op ran). Texts as objects, one DataFrame made from
    the columns (pandas' steps per column cost more than the few rows)."""
    idle = total_time - op_time
    if ops is not None and len(ops):
        name = ops["name"].to_numpy(object)
        kind = ops["type"].to_numpy(object)
        g = Groups(name)
        first_kind = g.first(np.where(kind != "", kind, None))
        columns = {
            "name": name[g.order[g.starts]],
            "type": np.where(pd.isna(first_kind), "", first_kind),
            "occurrences": g.sum(ops["occurrences"].to_numpy(np.int64)),
            "time_ps": g.sum(ops["time_ps"].to_numpy(np.int64)),
            "self_time_ps": g.sum(ops["self_time_ps"].to_numpy(np.int64)),
            "is_eager": g.any(ops["is_eager"].to_numpy(bool)),
        }
    else:
        columns = {"name": [], "type": [], "occurrences": [], "time_ps": [], "self_time_ps": [], "is_eager": []}
    idle_row = {"name": IDLE, "type": IDLE, "occurrences": 0, "time_ps": idle, "self_time_ps": idle, "is_eager": False}
    types = {"name": object, "type": object, "occurrences": np.int64, "time_ps": np.int64, "self_time_ps": np.int64}
    rows = {k: np.append(np.asarray(columns[k], dtype=t), np.array([idle_row[k]], dtype=t)) for k, t in types.items()}
    rows["is_eager"] = np.append(np.asarray(columns["is_eager"], dtype=bool), False)
    for k in ("flops", "model_flops", "bytes_accessed"):
        rows[k] = np.zeros(len(rows["name"]))
    frame = pd.DataFrame(
        {k: pd.Series(rows[k], dtype=object) if k in ("name", "type") else rows[k] for k in OP_DB_COLUMNS}, copy=False
    )
    return frame, total_time, op_time


def combine_host_op_dbs(parts):
    """`host_op_db` of several hosts from each host's own (in host order; None for a host
    without a host thread plane): rows of one op summed, its type the first host's that
    has one, IDLE made again from the summed times."""
    parts = [p for p in parts if p is not None]
    if len(parts) <= 1:
        return parts[0] if parts else None
    ops = pd.concat([db.iloc[:-1] for db, _, _ in parts], ignore_index=True)  # IDLE is last
    return _op_db(ops, sum(t for _, t, _ in parts), sum(o for _, _, o in parts))


HOST_OP_COLUMNS = ["name", "occurrences", "time_ps", "self_time_ps", "is_eager"]


def host_op_metrics(space, eager=None) -> pd.DataFrame:
    """XProf's host op database of one file (`ConvertHostThreadsXPlaneToOpMetricsDb`:
    `host_op_db`, without IDLE).

    One row per framework op: name (the op name of `ParseTfOpFullname`),
    occurrences, time_ps, self_time_ps (less the time of framework ops nested in
    it on its thread) and is_eager (any execution marked eager). Activities are
    the `/host:CPU` events named as a framework op (TF `name:Type`, JAX,
    `Iterator::...`, memcpy), with their `is_eager` mark (`grouping.eager_events`,
    or pass `eager`), and the events with a non-empty `tf_op` stat (never eager).
    Not reimplemented: input pipeline stage ids (`_ipl_stage_id`).
    """
    db = host_op_db([space], None if eager is None else [eager])
    if db is None:
        return pd.DataFrame(columns=HOST_OP_COLUMNS)
    return db[0].iloc[:-1][HOST_OP_COLUMNS].reset_index(drop=True)  # IDLE is last


def merge_host_ops(frames):
    """Host op databases (`host_op_metrics`, in file order) as one: name, occurrences and
    self_time_ps summed, is_eager if any."""
    columns = ["name", "occurrences", "self_time_ps", "is_eager"]
    frames = [f[columns] for f in frames if f is not None]
    host = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=columns)
    g = Groups(host["name"])
    return g.frame(
        {"name": host["name"]},
        occurrences=g.sum(host["occurrences"]),
        self_time_ps=g.sum(host["self_time_ps"]),
        is_eager=g.any(host["is_eager"]),
    )
