"""Nesting on a timeline: which event encloses which, and the time of what is nested.

XProf walks a stack of open events along each line (sorted by start, the longer first at
one start) to find every event's parent and its self time: `prev_enclosing` finds the
same parents vectorised (a pass per piece of the line, not per nesting level, so a chain of
identical events in a damaged file stays linear), `children_time` the time of each event's
direct children. `safe_divide` is tsl's SafeDivide, which every XProf rate and share uses.
"""

from __future__ import annotations

import numpy as np

from ...io import native

#: Events per piece of `prev_enclosing`: its walk gathers at random within a piece,
#: which then stays in the cache (2**18 ends and pointers: 3 MB).
ENCLOSING_CHUNK = 1 << 18


def prev_enclosing(end, chunk=ENCLOSING_CHUNK):
    """For each position i, the largest j < i with end[j] >= end[i] (-1 if none; int32
    positions while they fit).

    On a line sorted by start this is the parent XProf's stack walk finds: an
    earlier event that ends before event i ends has been popped by then.

    Piece by piece (`chunk` events): within a piece most events find theirs
    (`_prev_enclosing_piece`, all its gathers in cache). The ones that do not end
    after every earlier event of their piece; their answer lies in an earlier
    piece, and there it is a *suffix maximum* (no later event of its piece ends
    as late: one that did would be a later answer). So the same rule, run over
    just those events and every piece's suffix maxima (in position order), gives
    theirs; that set is small (about the nesting depth per piece) unless the
    events barely nest, when it is run whole.
    """
    n = len(end)
    if native.available() and end.dtype == np.int64:
        found = native.prev_enclosing(end)
        if found is not None:  # else past 2**31 events
            return found
    if n <= chunk:
        return _prev_enclosing_piece(end)
    dtype = np.int32 if n < 2**31 else np.int64
    p = np.empty(n, dtype)
    queries, maxima = [], []
    reach = np.iinfo(end.dtype).min  # max(end[:a])
    for a in range(0, n, chunk):
        part = end[a : a + chunk]
        local = _prev_enclosing_piece(part)
        open_ = np.flatnonzero(local < 0)
        np.add(local, a, out=p[a : a + len(part)], casting="unsafe")
        p[a + open_] = -1
        queries.append(open_[part[open_] <= reach] + a)  # the others have none
        reach = max(reach, part.max())
        later = np.maximum.accumulate(part[::-1])[::-1]  # max(part[j:])
        maxima.append(np.append(np.flatnonzero(part[:-1] > later[1:]), len(part) - 1) + a)
    q = np.concatenate(queries)
    rest = np.union1d(q, np.concatenate(maxima))
    if len(rest) * 2 > n:  # little nesting: no smaller problem to hand on
        return _prev_enclosing_piece(end)
    found = prev_enclosing(end[rest], chunk)[np.searchsorted(rest, q)]
    p[q] = np.where(found >= 0, rest[np.maximum(found, 0)], -1)
    return p


def prev_enclosing_span(start, duration):
    """`prev_enclosing(start + duration)`; the compiled walk adds each start and duration
    as it goes, so no array of the ends is made (an event-sized one of fresh memory)."""
    if native.available() and start.dtype == np.int64 and duration.dtype == np.int64:
        found = native.prev_enclosing(start, duration)
        if found is not None:
            return found
    return prev_enclosing(start + duration)


def _prev_enclosing_piece(end):
    """`prev_enclosing` in one piece.

    Events that end after every earlier one have none (a running maximum
    finds them: on most lines, nearly all of them). The others follow
    pointers: every event strictly between p[j] and j ends before end[j], so
    when p[i]'s event ends too early, p[i] may jump to p[p[i]]. Jumps double
    the distance covered while the pointers jumped over still move, and an event
    drops out once its pointer holds; past pointers that hold already an event
    climbs one level a round (rounds: about the nesting depth, ~100 on a deep
    Python thread).
    """
    n = len(end)
    dtype = np.int32 if n < 2**31 else np.int64
    p = np.arange(-1, n - 1, dtype=dtype)
    if n == 0:
        return p
    before = np.empty(n, dtype=end.dtype)  # max(end[:i])
    before[0] = np.iinfo(end.dtype).min
    np.maximum.accumulate(end[:-1], out=before[1:])
    enclosed = before >= end  # some earlier event encloses: the pointers never reach -1
    del before
    p[~enclosed] = -1
    todo = np.flatnonzero(enclosed).astype(dtype, copy=False)
    del enclosed
    # The pointers of the events still walking, and their ends, kept beside them (each
    # round reads them in order instead of gathering them again).
    ptr, e_todo = todo - 1, end[todo]
    while todo.size:
        walking = end[ptr] < e_todo
        todo, ptr, e_todo = todo[walking], ptr[walking], e_todo[walking]
        ptr = p[ptr]
        p[todo] = ptr
    return p


def children_time(begin, end):
    """Time of direct nested children per event (ps), events as in XProf's ancestor stack:
    sorted by start (longer first at one start), each event's parent is the nearest earlier
    one still open, i.e. the last earlier event that ends no earlier (`prev_enclosing`)."""
    n = len(begin)
    children = np.zeros(n, dtype=np.int64)
    if n == 0:
        return children
    order = np.lexsort((-end, begin))
    parent = prev_enclosing(end[order])
    has = parent >= 0
    np.add.at(children, order[parent[has]], (end - begin)[order[has]])
    return children


def safe_divide(a, b):
    """tsl SafeDivide, elementwise: 0 where |b| < 1e-10."""
    a = np.asarray(a, dtype=np.float64)
    b = np.broadcast_to(np.asarray(b, dtype=np.float64), a.shape)
    ok = np.abs(b) >= 1e-10
    return np.divide(a, np.where(ok, b, 1.0), out=np.zeros(a.shape), where=ok)
