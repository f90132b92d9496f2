"""The compiled loops of `_wire.c`, when the install built them; None otherwise.

`hatch_build.py` compiles `_wire.c` into a shared library beside this file when a C
compiler is at hand (`pip install` from a checkout or an sdist, or a platform wheel).
It holds no Python API, so it is loaded with ctypes and needs no Python headers. Where it
is missing, or `XPROF_WIDGETS_NATIVE=0` is set, `wire.py`'s numpy code does the work
with the same results, only slower (at 50 M events, seconds rather than a fraction of
one). `available()` says which is used, and `why_not()` why not the compiled one.
"""

from __future__ import annotations

import ctypes
import os
import sys
from pathlib import Path

import numpy as np

ENV_ENABLE = "XPROF_WIDGETS_NATIVE"
#: The ABI number `xw_abi()` returns in the `_wire.c` this Python code was written for.
ABI = 18
#: `xw_event_stats`: more rows than the room given (`_wire.c`'s XW_FULL).
XW_FULL = -3

LIBRARY_NAME = "libxwwire" + (".dll" if sys.platform == "win32" else ".dylib" if sys.platform == "darwin" else ".so")
LIBRARY = Path(__file__).with_name(LIBRARY_NAME)

_C_TYPES = {
    "u8": ctypes.c_uint8,
    "i8": ctypes.c_int8,
    "i16": ctypes.c_int16,
    "u16": ctypes.c_uint16,
    "i32": ctypes.c_int32,
    "i64": ctypes.c_int64,
    "u64": ctypes.c_uint64,
}
#: The numpy types an array passed as each pointer may have (`_call` checks).
_ARRAY_TYPES = {
    "u8": ("u1", "b1"),
    "i8": ("i1",),
    "i16": ("i2",),
    "u16": ("u2",),
    "i32": ("i4",),
    "i64": ("i8",),
    "u64": ("u8",),
}
#: The C prototypes of _wire.c, argument by argument ("*": a pointer to such items, passed
#: as a numpy array, or None for NULL); each returns an int64.
_SIGNATURES = {
    "xw_find_records": "u8* i64 i64 i64 u8 i64* i32* i64 i64*",
    "xw_decode_head": "u8* i64 i64* i64 i32* i32 i64 u64* u8* i64* u8*",
    "xw_event_heads": "u8* i64 i64* i32* i64 i64 i32* i64* i64* u16* i32*",
    "xw_keyed_stats": "u8* i64 i64* i64* i64 u8 i64 i8* u8* i64 i64 i64* u64* i8* u64* i64* i64* i64* u8*",
    "xw_event_stats": "u8* i64 i32* i64* u16* i64 u8 i64 i8* u8* i64 i64 i64* u64* i8* u64* i64* i64* i64* u8*",
    "xw_split_stats": "u8* i64 i32* i64* u16* i64 u8 i64 i8* u8* i64 i64 i64* i64* i64 i64* i64*",
    "xw_open_count": "i64* i64* i64 i64* i16* i64",
    "xw_row_major": "i16* i64 u8* i64 i64* i64* i64* i32* i64* i64* i32* i64*",
    "xw_prev_enclosing": "i64* i64* i64 i32* i32*",
    "xw_nearest_kept": "i32* u8* i64 i64 i32*",
    "xw_count_unknown": "i32* i64 u8* i64",
    "xw_csr": "i32* i32* i64 i64 i64* i32*",
    "xw_min_label": "i64* i32* i64 i32* i64 i32* u8* i32*",
    "xw_reach": "i64* i32* i64 i32* i64 u8* i32*",
    "xw_nearest_source": "i64* i32* i64 i64 i32* i64 i32* i32* i32* i32* i32*",
    "xw_record_payloads": "u8* i64 i64* i64 i64 i64* i64*",
    "xw_live_runs": "u8* i64 i32* i64* u16* i64 i64* i64* i64*",
    "xw_rows_order": "i64* i64 i64 i64* i32*",
    "xw_groups": "i64* i64 i64 i32 i64* i64* i64*",
    "xw_step_walk": "i32* i64* i64 i64 i64* i64* i16* i64 i64* i64* i64 i64* i64 i64 i64 u64* u64* i64 i64* i64* u8*",
    "xw_grouped_events": "i64* i64 i32* i8* i32* i64* i64* i64 i16* u8* i64 i64* i64 i64* i64* i64* i16* u8* i64",
}


def _load() -> tuple[ctypes.CDLL | None, str]:
    if os.environ.get(ENV_ENABLE, "1").strip().lower() in ("0", "false", "no", "off"):
        return None, f"{ENV_ENABLE} is off"
    if not LIBRARY.is_file():
        return None, f"{LIBRARY_NAME} was not built (no C compiler when the package was installed)"
    try:
        lib = ctypes.CDLL(str(LIBRARY))
        lib.xw_abi.restype = ctypes.c_int32
        abi = lib.xw_abi()
    except (OSError, AttributeError) as error:
        return None, f"{LIBRARY_NAME} does not load ({error})"
    if abi != ABI:
        return None, f"{LIBRARY_NAME} is from another version (ABI {abi}, wanted {ABI}): reinstall the package"
    for name, signature in _SIGNATURES.items():
        function = getattr(lib, name)
        function.restype = ctypes.c_int64
        function.argtypes = [ctypes.c_void_p if t.endswith("*") else _C_TYPES[t] for t in signature.split()]
    return lib, ""


_LIB, _WHY = _load()
#: Each function, and per argument the numpy types a pointer may be given as (None: not a
#: pointer), parsed once.
_FUNCTIONS = (
    {
        name: (
            getattr(_LIB, name),
            [
                (kind, frozenset(np.dtype(t) for t in _ARRAY_TYPES[kind[:-1]]) if kind.endswith("*") else None)
                for kind in signature.split()
            ],
        )
        for name, signature in _SIGNATURES.items()
    }
    if _LIB is not None
    else {}
)


def available() -> bool:
    """Whether the compiled loops are used."""
    return _LIB is not None


def why_not() -> str:
    """Why the numpy code is used instead ("" when it is not)."""
    return _WHY


def _call(name: str, *args: object) -> int:
    """Call `name` in the library: a numpy array where its prototype has a pointer must
    be one contiguous run of that type (anything else is a bug here: TypeError, never
    memory read as something it is not)."""
    assert _LIB is not None
    function, kinds = _FUNCTIONS[name]
    if len(args) != len(kinds):
        raise TypeError(f"{name}: {len(args)} arguments for {len(kinds)}")
    passed = []
    for arg, (kind, allowed) in zip(args, kinds):
        if allowed is not None and arg is not None:  # a pointer (None: NULL)
            if not isinstance(arg, np.ndarray) or not arg.flags.c_contiguous or arg.dtype not in allowed:
                raise TypeError(f"{name}: {getattr(arg, 'dtype', type(arg).__name__)} passed as {kind}")
            # The address as an int (the prototype takes void pointers): a third of the
            # cost of a typed ctypes pointer, which a call on a tiny line notices.
            arg = arg.ctypes.data
        passed.append(arg)
    return int(function(*passed))


def find_records(
    data: np.ndarray, start: int, end: int, tag_byte: int, narrow: bool = False
) -> tuple[np.ndarray, int] | None:
    """`wire.find_records`'s (positions, end of the run), int32 where `narrow` (the caller
    knows they fit), or None where the bytes need the numpy code's look (it raises the
    error they deserve)."""
    pieces = []
    stop = np.zeros(1, np.int64)
    here = start
    # Room for a record every 16 bytes (events are longer): only the pages written to are
    # ever touched, so the room not used costs nothing. A run of tinier records asks again.
    cap = (end - start) // 16 + 1024
    while True:
        out = np.empty(cap, dtype=np.int32 if narrow else np.int64)
        wide, thin = (None, out) if narrow else (out, None)
        got = _call("xw_find_records", data, len(data), here, end, tag_byte, wide, thin, cap, stop)
        if got < 0:
            return None
        pieces.append(out[:got])
        here = int(stop[0])
        if got < cap:
            break
    return (pieces[0] if len(pieces) == 1 else np.concatenate(pieces)), here


def decode_head(
    data: np.ndarray, record_pos: np.ndarray, numbers: tuple[int, ...], end: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(values, present, rest, ok) of `wire.decode_head`'s fast layout for records at
    `record_pos` (int64): values/present are (fields, records); `ok` False marks the records
    the general decoder must read. None where the bytes need the numpy code's look."""
    record_pos = np.ascontiguousarray(record_pos, dtype=np.int64)
    n = len(record_pos)
    values = np.empty((len(numbers), n), dtype=np.uint64)
    present = np.empty((len(numbers), n), dtype=bool)
    rest = np.empty(n, dtype=np.int64)
    ok = np.empty(n, dtype=bool)
    nums = np.asarray(numbers, dtype=np.int32)
    got = _call("xw_decode_head", data, len(data), record_pos, n, nums, len(numbers), end, values, present, rest, ok)
    return None if got < 0 else (values, present, rest, ok)


def event_heads(data: np.ndarray, record_pos: np.ndarray, end: int, out: tuple[np.ndarray, ...]) -> bool:
    """Fill `out` (metadata ids int32, offsets and durations int64, stats offsets uint16,
    and record positions int32 or None), one row per event record at `record_pos`
    (int64, or int32), as `xw_event_heads` does; False where a record is in another layout or does
    not fit those types (the caller decodes the line the general way)."""
    metadata_id, offset_ps, duration_ps, stats_at, pos32 = out
    wide, thin = (None, record_pos) if record_pos.dtype == np.int32 else (record_pos, None)
    got = _call(
        "xw_event_heads", data, len(data), wide, thin, len(record_pos), end,
        metadata_id, offset_ps, duration_ps, stats_at, pos32,
    )  # fmt: skip
    return got == 0


def _event_columns(
    record_pos: np.ndarray, at: np.ndarray
) -> tuple[np.ndarray | None, np.ndarray | None, np.ndarray] | None:
    """A line's columns as the compiled loops over its events take them: (positions if
    int32, else None; positions if int64, else None; stats offsets), contiguous; None where
    they have other types or lengths."""
    if record_pos.dtype not in (np.int32, np.int64) or at.dtype != np.uint16 or len(at) != len(record_pos):
        return None
    record_pos, at = np.ascontiguousarray(record_pos), np.ascontiguousarray(at)
    narrow = record_pos.dtype == np.int32
    return (record_pos if narrow else None), (None if narrow else record_pos), at


def live_runs(
    data: np.ndarray, record_pos: np.ndarray, at: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """`xspace._live_runs`' (events with stats, their stats' start and end) for a line's
    columns (positions int32 or int64, stats offsets uint16), or None where the columns
    have other types or the bytes need the numpy code's look."""
    columns = _event_columns(record_pos, at)
    if columns is None:
        return None
    n = len(record_pos)
    # Room for every event, written only as far as the events with stats go: the pages
    # past that are never touched.
    live, starts, stops = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
    got = _call("xw_live_runs", data, len(data), *columns, n, live, starts, stops)
    if got < 0:
        return None
    return live[:got].copy(), starts[:got].copy(), stops[:got].copy()


def keyed_stats(
    data: np.ndarray,
    starts: np.ndarray,
    stops: np.ndarray,
    tag_byte: int,
    offset: int,
    kinds: np.ndarray,
    keys: np.ndarray | None,
) -> tuple[np.ndarray, ...] | None:
    """The keyed records in the runs of repeated field `tag_byte` that open each
    `starts[i]:stops[i]` (int64): (owner, key, number, raw, rec_start, rec_stop, text_start,
    ok), see `xw_keyed_stats` in _wire.c; None where the numpy code must look."""
    starts, stops = np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(stops, dtype=np.int64)
    head = (
        data,
        len(data),
        starts,
        stops,
        len(starts),
        tag_byte,
        offset,
        kinds,
        keys,
        0 if keys is None else len(keys),
    )
    count = _call("xw_keyed_stats", *head, 0, *[None] * 8)  # how many there are
    if count < 0:
        return None
    owner, rec_start, rec_stop, text_start = (np.empty(count, np.int64) for _ in range(4))
    key, raw = np.empty(count, np.uint64), np.empty(count, np.uint64)
    number, ok = np.empty(count, np.int8), np.empty(count, bool)
    out = (owner, key, number, raw, rec_start, rec_stop, text_start, ok)
    got = _call("xw_keyed_stats", *head, count, *out)
    # Fewer than counted where wanted keys were asked for.
    return None if got < 0 else tuple(a[:got] for a in out)


def event_stats(
    data: np.ndarray,
    record_pos: np.ndarray,
    at: np.ndarray,
    tag_byte: int,
    offset: int,
    kinds: np.ndarray,
    keys: np.ndarray | None,
    room: int,
) -> tuple[np.ndarray, ...] | None:
    """`keyed_stats`' records of the stats of events, read from a line's columns (record
    positions int32 or int64, stats offsets uint16; see `xw_event_stats` in _wire.c) in
    one pass where they fit in `room` rows (a guess: else they are counted, then read);
    None where the columns have other types or the bytes need the numpy code's look."""
    columns = _event_columns(record_pos, at)
    if columns is None:
        return None
    head = (data, len(data), *columns, len(at), tag_byte, offset, kinds, keys, 0 if keys is None else len(keys))
    for _ in range(2):
        # Room for `room` rows, written only as far as the rows go: pages past that are
        # never touched.
        owner, rec_start, rec_stop, text_start = (np.empty(room, np.int64) for _ in range(4))
        key, raw = np.empty(room, np.uint64), np.empty(room, np.uint64)
        number, ok = np.empty(room, np.int8), np.empty(room, bool)
        out = (owner, key, number, raw, rec_start, rec_stop, text_start, ok)
        got = _call("xw_event_stats", *head, room, *out)
        if got != XW_FULL:
            break
        room = _call("xw_event_stats", *head, 0, *[None] * 8)  # every element: at least the rows
        if room < 0:
            return None
    # (Views: the caller's sort by key copies the rows, and the room past them, never
    # touched, goes back with the arrays.)
    return None if got < 0 else tuple(a[:got] for a in out)


def split_stats(
    data: np.ndarray,
    record_pos: np.ndarray,
    at: np.ndarray,
    tag_byte: int,
    offset: int,
    kinds: np.ndarray,
    keys: np.ndarray | None,
    kmax: int,
    counts: np.ndarray,
    texts: np.ndarray | None,
    owner_wide: bool,
    ptrs: np.ndarray | None,
    cursor: np.ndarray | None,
) -> int:
    """`xw_split_stats` (see _wire.c) on a line's columns (record positions int32 or int64,
    stats offsets uint16): counts per key into `counts` and `texts` (`ptrs` None), or writes
    each key's rows through the addresses in `ptrs` (int64, five per key) from `cursor` to
    `counts` (each key's end row).
    The elements read, or -1 where the events must be read the other way."""
    columns = _event_columns(record_pos, at)
    if columns is None:
        return -1
    return _call(
        "xw_split_stats", data, len(data), *columns, len(at), tag_byte, offset, kinds, keys,
        0 if keys is None else len(keys), kmax, counts, texts, int(owner_wide), ptrs, cursor,
    )  # fmt: skip


def record_payloads(data: np.ndarray, record_pos: np.ndarray, limit: int) -> tuple[np.ndarray, np.ndarray] | None:
    """`wire.record_payloads`' (payload starts, payload ends), or None where the bytes need
    the numpy code's look (it raises the error they deserve)."""
    record_pos = np.ascontiguousarray(record_pos, dtype=np.int64)
    start, stop = np.empty(len(record_pos), np.int64), np.empty(len(record_pos), np.int64)
    got = _call("xw_record_payloads", data, len(data), record_pos, len(record_pos), limit, start, stop)
    return None if got < 0 else (start, stop)


def open_count(start: np.ndarray, dur: np.ndarray, limit: int) -> np.ndarray | None:
    """int16 open counts of a track's events (see `trace._open_count`), None when one
    reaches `limit` (<= 2**15)."""
    start, dur = np.ascontiguousarray(start, dtype=np.int64), np.ascontiguousarray(dur, dtype=np.int64)
    n = len(start)
    heap = np.empty(n, np.int64)  # pages touched: only as many as events open at once
    depth = np.empty(n, np.int16)
    top = _call("xw_open_count", start, dur, n, heap, depth, limit)
    return None if top < 0 else depth


def row_major(
    row: np.ndarray,
    taken: np.ndarray | None,
    start: np.ndarray,
    dur: np.ndarray,
    order: np.ndarray,
    out_start: np.ndarray,
    out_end: np.ndarray,
) -> tuple[int, np.ndarray, np.ndarray] | None:
    """Lay out the events not `taken` (bool) by their int16 `row`: their positions into
    `order` (int32), starts and ends into out_start / out_end (see `xw_row_major`).
    Returns (how many were laid out, events per row, the earlier of each two neighbours
    of a row that overlap); None for a negative row (the numpy code says what it makes of it)."""
    start, dur = np.ascontiguousarray(start, dtype=np.int64), np.ascontiguousarray(dur, dtype=np.int64)
    n = len(row)
    rows = int(row.max(initial=-1)) + 1
    ends = np.zeros(rows, np.int64)
    bad = np.empty(n, np.int32)  # pages touched: only as many as overlaps
    placed = np.zeros(1, np.int64)
    found = _call("xw_row_major", row, n, taken, rows, ends, start, dur, order, out_start, out_end, bad, placed)
    return None if found < 0 else (int(placed[0]), np.diff(ends, prepend=0), bad[:found])


def prev_enclosing(end: np.ndarray, duration: np.ndarray | None = None) -> np.ndarray | None:
    """`analysis.core.intervals.prev_enclosing`: for each i the largest j < i with end[j] >= end[i], or
    -1 (int32); None past 2**31 events. With `duration`, `end` holds the starts and the ends
    are start + duration (`intervals.prev_enclosing_span`)."""
    end = np.ascontiguousarray(end, dtype=np.int64)
    n = len(end)
    if duration is not None:
        duration = np.ascontiguousarray(duration, dtype=np.int64)
        if len(duration) != n:
            raise TypeError("prev_enclosing: starts and durations differ in length")
    stack = np.empty(n, np.int32)  # pages touched: only as deep as the nesting
    parent = np.empty(n, np.int32)
    return None if _call("xw_prev_enclosing", end, duration, n, stack, parent) < 0 else parent


def nearest_kept(parent: np.ndarray, kept: np.ndarray, base: int) -> np.ndarray | None:
    """`analysis.core.grouping._nearest_node`: per event its node (the kept events are
    nodes `base`, `base + 1`, ...; another takes its nearest kept ancestor's by `parent`;
    -1: none), int32; None for a parent not before its child or ids past int32."""
    parent = np.ascontiguousarray(parent, dtype=np.int32)
    kept = np.ascontiguousarray(kept, dtype=np.uint8)
    out = np.empty(len(parent), np.int32)
    return None if _call("xw_nearest_kept", parent, kept, len(parent), base, out) < 0 else out


def count_unknown(ids: np.ndarray, known: np.ndarray) -> int:
    """How many of the int32 `ids` are not True in `known` (bool, by id): negative, past
    its end or False there."""
    known = np.ascontiguousarray(known, dtype=bool).view(np.uint8)
    return int(_call("xw_count_unknown", np.ascontiguousarray(ids, dtype=np.int32), len(ids), known, len(known)))


def csr(src: np.ndarray, dst: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(ptr int64, out int32): the int32 edges `src -> dst` by source, each source's edges
    in input order (a stable counting sort); None for an id outside [0, n)."""
    src, dst = np.ascontiguousarray(src, dtype=np.int32), np.ascontiguousarray(dst, dtype=np.int32)
    ptr, out = np.empty(n + 1, np.int64), np.empty(len(src), np.int32)
    return None if _call("xw_csr", src, dst, len(src), n, ptr, out) < 0 else (ptr, out)


def min_label(ptr: np.ndarray, out: np.ndarray, label: np.ndarray) -> bool:
    """`label` (int32, in place; INT32_MAX: none) becomes, per node, the smallest label of
    the nodes it is reachable from along the CSR edges. False for a bad id (label untouched
    then only where the walk had not reached)."""
    seeds = np.flatnonzero(label != np.iinfo(np.int32).max).astype(np.int32)
    seeds = seeds[np.argsort(label[seeds], kind="stable")]
    n = len(label)
    seen, stack = np.zeros(n, np.uint8), np.empty(n, np.int32)
    return _call("xw_min_label", ptr, out, n, seeds, len(seeds), label, seen, stack) >= 0


def reach(ptr: np.ndarray, out: np.ndarray, n: int, seeds: np.ndarray) -> np.ndarray | None:
    """Mask of the nodes reachable from `seeds` by one edge or more; None for a bad id."""
    seeds = np.ascontiguousarray(seeds, dtype=np.int32)
    seen, stack = np.zeros(n, np.uint8), np.empty(n, np.int32)
    return None if _call("xw_reach", ptr, out, n, seeds, len(seeds), seen, stack) < 0 else seen.view(bool)


def nearest_source(ptr: np.ndarray, out: np.ndarray, n: int, total: int, sources: np.ndarray) -> np.ndarray | None:
    """`grouping._nearest_source` over CSR edges (int64, -1 where no source reaches); None
    for a bad id."""
    sources = np.ascontiguousarray(sources, dtype=np.int32)
    label, stamp, frontier, nxt, ctx = (np.empty(total, np.int32) for _ in range(5))
    args = (ptr, out, n, total, sources, len(sources), label, stamp, frontier, nxt, ctx)
    if _call("xw_nearest_source", *args) < 0:
        return None
    return np.where(label == np.iinfo(np.int32).max, -1, label.astype(np.int64))


def rows_order(row: np.ndarray, rows: int) -> tuple[np.ndarray, np.ndarray] | None:
    """The events of each row together (`xw_rows_order`): (offset, order), row r's events
    `order[offset[r]:offset[r + 1]]` ascending; `row` int64, -1 for an event left out.
    None for a row out of range or too many events."""
    offset, order = np.empty(rows + 1, np.int64), np.empty(len(row), np.int32)
    return None if _call("xw_rows_order", row, len(row), rows, offset, order) < 0 else (offset, order)


def groups(code: np.ndarray, size: int, sort: bool) -> tuple[np.ndarray, np.ndarray] | None:
    """`columns.Groups`' groups of rows by int64 `code` (in [0, size), -1: in no group),
    renumbered in place in order of their first rows (`sort`: of their codes)
    (`xw_groups`): (starts, order), group g's rows `order[starts[g]:starts[g + 1]]`
    ascending (int64 both; `starts` one longer than the groups). None for a code out of
    range."""
    n = len(code)
    table = np.empty(size, np.int64)
    starts = np.empty(min(n, size) + 1, np.int64)
    order = np.empty(n, np.int64)
    got = _call("xw_groups", code, n, size, int(bool(sort)), table, starts, order)
    if got < 0:
        return None
    return starts[: got + 1], order[: int(starts[got])]


#: `step_walk`'s answer for a step whose events span too long a time for its keys.
WIDE = -2


def step_walk(
    order: np.ndarray,
    offset: np.ndarray,
    rows: range,
    start: np.ndarray,
    end: np.ndarray,
    kind: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    col: np.ndarray,
    mark: int,
    per: np.ndarray,
    marked: np.ndarray,
) -> int:
    """XProf's boundary walk of `steps._breakdown` for the steps in `rows` (a range), from
    their events (`rows_order`; int64 `start`, `end`, int16 `kind`): adds each step's time
    per label column into `per` ((steps, columns) int64) and sets `marked` (bool, per
    step) where a boundary is labelled `mark` (see `xw_step_walk`). Calls on other rows
    may run on other threads at once. 0, or WIDE, or -1 for an index, type or column out
    of range."""
    steps, ncols = per.shape
    counts = offset[rows.start + 1 : rows.stop + 1] - offset[rows.start : rows.stop]
    room = 2 * int(counts.max(initial=0))
    keys, tmp = np.empty(room, np.uint64), np.empty(room, np.uint64)
    count = np.empty(len(col), np.int64)
    args = (order, offset, rows.start, rows.stop, start, end, kind, len(start), lo, hi, steps, col, len(col))
    return _call("xw_step_walk", *args, ncols, mark, keys, tmp, room, count, per, marked)


def grouped_events(
    group: np.ndarray,
    near: np.ndarray | None,
    code: np.ndarray,
    start: np.ndarray,
    duration: np.ndarray,
    kind: np.ndarray,
    is_marker: np.ndarray,
    roots: np.ndarray,
    out: dict[str, np.ndarray] | None,
) -> int:
    """`steps._host_events`' columns of one line's grouped events, written into `out`
    (group, start, end, type, marker: as long as the line's grouped events) by
    `xw_grouped_events`, or (`out` None) how many there are. `group`: each event's group
    id, or with `near` (each event's node, int32, -1: none) each node's; `code`: the
    events' name codes (int8 or int32) into the tables `kind` (int16) and `is_marker`
    (bool), whose last entry is for an event without a name. The events written or
    counted, or -1 for a node or code out of range."""
    code = np.asarray(code)
    if code.dtype not in (np.int8, np.int32):
        code = code.astype(np.int32)
    roots = np.ascontiguousarray(roots, dtype=np.int64)
    code8, code32 = (code, None) if code.dtype == np.int8 else (None, code)
    args = (group, len(group), near, code8, code32, start, duration, len(start), kind, is_marker, len(kind))
    if out is None:
        return _call("xw_grouped_events", *args, roots, len(roots), *[None] * 5, 0)
    columns = (out["group"], out["start"], out["end"], out["type"], out["marker"])
    return _call("xw_grouped_events", *args, roots, len(roots), *columns, len(out["group"]))
