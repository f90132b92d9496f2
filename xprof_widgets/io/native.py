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
ABI = 3

LIBRARY_NAME = "libxwwire" + (".dll" if sys.platform == "win32" else ".dylib" if sys.platform == "darwin" else ".so")
LIBRARY = Path(__file__).with_name(LIBRARY_NAME)

_i64p = ctypes.POINTER(ctypes.c_int64)
_u64p = ctypes.POINTER(ctypes.c_uint64)
_u8p = ctypes.POINTER(ctypes.c_uint8)
_i32p = ctypes.POINTER(ctypes.c_int32)
_i8p = ctypes.POINTER(ctypes.c_int8)
_i16p = ctypes.POINTER(ctypes.c_int16)
_KINDS = {_u8p: ("u1", "b1"), _i8p: ("i1",), _i16p: ("i2",), _i32p: ("i4",), _i64p: ("i8",), _u64p: ("u8",)}


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
    lib.xw_find_records.restype = ctypes.c_int64
    lib.xw_find_records.argtypes = [
        _u8p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_uint8,
        _i64p,
        ctypes.c_int64,
        _i64p,
    ]
    lib.xw_decode_head.restype = ctypes.c_int64
    lib.xw_decode_head.argtypes = [
        _u8p,
        ctypes.c_int64,
        _i64p,
        ctypes.c_int64,
        _i32p,
        ctypes.c_int32,
        ctypes.c_int64,
        _u64p,
        _u8p,
        _i64p,
        _u8p,
    ]
    lib.xw_keyed_stats.restype = ctypes.c_int64
    lib.xw_keyed_stats.argtypes = [
        _u8p,
        ctypes.c_int64,
        _i64p,
        _i64p,
        ctypes.c_int64,
        ctypes.c_uint8,
        ctypes.c_int64,
        _i8p,
        _u8p,
        ctypes.c_int64,
        ctypes.c_int64,
        _i64p,
        _u64p,
        _i8p,
        _u64p,
        _i64p,
        _i64p,
        _i64p,
        _u8p,
    ]
    lib.xw_open_count.restype = ctypes.c_int64
    lib.xw_open_count.argtypes = [_i64p, _i64p, ctypes.c_int64, _i64p, _i16p, ctypes.c_int64]
    lib.xw_row_major.restype = ctypes.c_int64
    lib.xw_row_major.argtypes = [
        _i16p,
        ctypes.c_int64,
        _u8p,
        ctypes.c_int64,
        _i64p,
        _i64p,
        _i64p,
        _i32p,
        _i64p,
        _i64p,
        _i32p,
        _i64p,
    ]
    return lib, ""


_LIB, _WHY = _load()


def available() -> bool:
    """Whether the compiled loops are used."""
    return _LIB is not None


def why_not() -> str:
    """Why the numpy code is used instead ("" when it is not)."""
    return _WHY


def _ptr(array: np.ndarray, kind: type) -> object:
    """A pointer to `array`'s data for the C side, which reads it as one run of `kind`'s
    items: anything else (a strided view, another type) is a bug here, never passed on."""
    if not array.flags.c_contiguous or array.dtype.str[1:] not in _KINDS[kind]:
        raise TypeError(f"{array.dtype} array (contiguous: {array.flags.c_contiguous}) passed as {kind.__name__}")
    return array.ctypes.data_as(kind)


def find_records(data: np.ndarray, start: int, end: int, tag_byte: int) -> tuple[np.ndarray, int] | None:
    """`wire.find_records`'s (positions, end of the run), or None where the bytes need the
    numpy code's look (it raises the error they deserve)."""
    assert _LIB is not None
    pieces = []
    stop = ctypes.c_int64(0)
    here = start
    # Room for a record every 16 bytes (events are longer): only the pages written to are
    # ever touched, so the room not used costs nothing. A run of tinier records asks again.
    cap = (end - start) // 16 + 1024
    while True:
        out = np.empty(cap, dtype=np.int64)
        got = _LIB.xw_find_records(
            _ptr(data, _u8p), len(data), here, end, tag_byte, _ptr(out, _i64p), cap, ctypes.byref(stop)
        )
        if got < 0:
            return None
        pieces.append(out[:got])
        here = stop.value
        if got < cap:
            break
    return (pieces[0] if len(pieces) == 1 else np.concatenate(pieces)), here


def decode_head(
    data: np.ndarray, record_pos: np.ndarray, numbers: tuple[int, ...], end: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None:
    """(values, present, rest, ok) of `wire.decode_head`'s fast layout for records at
    `record_pos` (int64): values/present are (fields, records); `ok` False marks the records
    the general decoder must read. None where the bytes need the numpy code's look."""
    assert _LIB is not None
    record_pos = np.ascontiguousarray(record_pos, dtype=np.int64)
    n = len(record_pos)
    values = np.empty((len(numbers), n), dtype=np.uint64)
    present = np.empty((len(numbers), n), dtype=np.uint8)
    rest = np.empty(n, dtype=np.int64)
    ok = np.empty(n, dtype=np.uint8)
    nums = np.asarray(numbers, dtype=np.int32)
    got = _LIB.xw_decode_head(
        _ptr(data, _u8p),
        len(data),
        _ptr(record_pos, _i64p),
        n,
        _ptr(nums, _i32p),
        len(numbers),
        end,
        _ptr(values, _u64p),
        _ptr(present, _u8p),
        _ptr(rest, _i64p),
        _ptr(ok, _u8p),
    )
    if got < 0:
        return None
    return values, present.view(bool), rest, ok.view(bool)


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
    assert _LIB is not None
    starts, stops = np.ascontiguousarray(starts, dtype=np.int64), np.ascontiguousarray(stops, dtype=np.int64)
    n = len(starts)
    no_i64, no_u64, no_i8, no_u8 = _i64p(), _u64p(), _i8p(), _u8p()  # NULL pointers
    args = (_ptr(data, _u8p), len(data), _ptr(starts, _i64p), _ptr(stops, _i64p), n, tag_byte, offset)
    mask = (no_u8, 0) if keys is None else (_ptr(keys, _u8p), len(keys))
    count = _LIB.xw_keyed_stats(
        *args, _ptr(kinds, _i8p), *mask, 0, no_i64, no_u64, no_i8, no_u64, no_i64, no_i64, no_i64, no_u8
    )
    if count < 0:
        return None
    owner, rec_start, rec_stop, text_start = (np.empty(count, np.int64) for _ in range(4))
    key, raw = np.empty(count, np.uint64), np.empty(count, np.uint64)
    number, ok = np.empty(count, np.int8), np.empty(count, np.uint8)
    got = _LIB.xw_keyed_stats(
        *args,
        _ptr(kinds, _i8p),
        *mask,
        count,
        _ptr(owner, _i64p),
        _ptr(key, _u64p),
        _ptr(number, _i8p),
        _ptr(raw, _u64p),
        _ptr(rec_start, _i64p),
        _ptr(rec_stop, _i64p),
        _ptr(text_start, _i64p),
        _ptr(ok, _u8p),
    )
    if got < 0:
        return None
    # Fewer than counted where wanted keys were asked for.
    return tuple(a[:got] for a in (owner, key, number, raw, rec_start, rec_stop, text_start, ok.view(bool)))


def open_count(start: np.ndarray, dur: np.ndarray, limit: int) -> np.ndarray | None:
    """int16 open counts of a track's events (see `trace._open_count`), None when one
    reaches `limit` (<= 2**15)."""
    assert _LIB is not None
    start, dur = np.ascontiguousarray(start, dtype=np.int64), np.ascontiguousarray(dur, dtype=np.int64)
    n = len(start)
    heap = np.empty(n, np.int64)  # pages touched: only as many as events open at once
    depth = np.empty(n, np.int16)
    top = _LIB.xw_open_count(_ptr(start, _i64p), _ptr(dur, _i64p), n, _ptr(heap, _i64p), _ptr(depth, _i16p), limit)
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
    assert _LIB is not None
    n = len(row)
    rows = int(row.max(initial=-1)) + 1
    ends = np.zeros(rows, np.int64)
    bad = np.empty(n, np.int32)  # pages touched: only as many as overlaps
    placed = ctypes.c_int64(0)
    mask = _u8p() if taken is None else _ptr(taken.view(np.uint8), _u8p)
    found = _LIB.xw_row_major(
        _ptr(row, _i16p),
        n,
        mask,
        rows,
        _ptr(ends, _i64p),
        _ptr(start, _i64p),
        _ptr(dur, _i64p),
        _ptr(order, _i32p),
        _ptr(out_start, _i64p),
        _ptr(out_end, _i64p),
        _ptr(bad, _i32p),
        ctypes.byref(placed),
    )
    if found < 0:
        return None
    return placed.value, np.diff(ends, prepend=0), bad[:found]
