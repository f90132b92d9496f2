"""The compiled reading loops (`xprof_widgets/io/_wire.c`) give what the numpy code gives.

Both are run on the same bytes: well-formed runs and records of every layout, runs cut
short, and a few hundred mutants of the shipped samples (every byte the walk can meet:
lengths, tags, varints). Where the bytes are bad, both raise the same WireError.
"""

from __future__ import annotations

import gzip
import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets.io import native, wire
from xprof_widgets.io.xspace import read_xspace

from .fuzz import varint

pytestmark = pytest.mark.skipif(
    not native.available(), reason=f"the compiled loops are not built here: {native.why_not()}"
)


def _both(monkeypatch, call):
    """`call()` with the library, then with numpy alone: (result or error text) each."""
    out = []
    for lib in (native._LIB, None):
        monkeypatch.setattr(native, "_LIB", lib)
        try:
            out.append(call())
        except wire.WireError as error:
            out.append(f"WireError: {error}")
    return out


def _run_of(lengths, tail=b""):
    records = [b"\x22" + varint(n) + bytes([0x08]) * n for n in lengths]
    buf, size = wire.padded(b"".join(records) + tail)
    return buf, np.frombuffer(buf, dtype=np.uint8), size


@pytest.mark.parametrize(
    "lengths, tail",
    [
        ([0, 1, 127, 128, 300, 16384, 5], b""),
        ([3] * 5000, b""),  # more records than the first output buffer holds
        ([0] * 70000, b"\x2a\x00"),  # two-byte records, then another tag ends the run
        (np.random.default_rng(1).integers(0, 400, 3000).tolist(), b"\x10\x01"),
    ],
)
def test_find_records_equals_numpy(monkeypatch, lengths, tail):
    buf, data, size = _run_of(lengths, tail)
    narrow, end = wire.find_records(buf, data, 0, size, 0x22, narrow=True)  # as a line's events are found
    ours, theirs = _both(monkeypatch, lambda: wire.find_records(buf, data, 0, size, 0x22))
    assert ours[0].tolist() == theirs[0].tolist() and ours[1] == theirs[1]
    assert len(ours[0]) == len(lengths)
    assert narrow.dtype == np.int32 and narrow.tolist() == ours[0].tolist() and end == ours[1]


@pytest.mark.parametrize(
    "cut",
    [
        b"\x22\x05\x08",  # a length past the end
        b"\x22",  # a tag with no length
        b"\x22\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # a varint of 11 bytes
        b"\x22\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # a length of 2**63
    ],
)
def test_find_records_of_a_cut_run_raise_as_numpy_does(monkeypatch, cut):
    buf, data, size = _run_of([4, 200, 0], cut)
    ours, theirs = _both(monkeypatch, lambda: wire.find_records(buf, data, 0, size, 0x22))
    assert isinstance(ours, str) and ours.startswith("WireError")
    assert ours == theirs


@pytest.mark.parametrize(
    "cut",
    [
        b"",
        b"\x22\x05\x08",  # a length past the end
        b"\x22\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # a varint of 11 bytes
        b"\x22\x80\x80\x80\x80\x80\x80\x80\x80\x01",  # a length of 2**63
        b"\x22\xfb\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # 2**64 - 5: wraps if added signed
    ],
)
def test_record_payloads_equal_numpy(monkeypatch, cut):
    """Payload bounds of records of every length width, and the same error where one is cut."""
    buf, data, size = _run_of([0, 1, 127, 128, 300, 16384, 5, *range(0, 2000, 37)], cut)
    pos, _ = wire.find_records(buf, data, 0, size - len(cut), 0x22)
    if cut:
        pos = np.append(pos, size - len(cut))
    for limit in (None, size, size - 1):
        ours, theirs = _both(monkeypatch, lambda limit=limit: wire.record_payloads(data, pos, limit))
        if isinstance(ours, str):
            assert ours == theirs and ours.startswith("WireError")
        else:
            assert [a.tolist() for a in ours] == [a.tolist() for a in theirs]
            assert (ours[1] - ours[0]).tolist()[:7] == [0, 1, 127, 128, 300, 16384, 5]


def _events(rng, count):
    """Event records: fields 1-3 of every varint length, some absent, negative offsets,
    stats after them, and layouts writers never produce (out of order, repeated, other types)."""
    sizes = [0, 1, 127, 128, 1 << 20, (1 << 49) - 1, 1 << 49, (1 << 56) - 1, 1 << 56, (1 << 63) - 1]
    events = []
    for _ in range(count):
        fields = b""
        for number in (1, 2, 3):
            if rng.random() < 0.8:
                value = sizes[int(rng.integers(len(sizes)))]
                if number == 2 and rng.random() < 0.1:
                    value = (1 << 64) - 5
                fields += bytes([number << 3]) + varint(value)
        fields += b"".join(b"\x22\x02\x08\x01" for _ in range(int(rng.integers(0, 3))))
        events.append(fields)
    events += [b"\x10\x05\x08\x07", b"\x08\x01\x08\x02\x18\x03", b"\x08\x01\x12\x01\x00", b"\x18\x01\x10\x02", b""]
    events += [b"\x18\x01\x18\x02", b"\x20\x01", b"\x08" + varint(1 << 62)]  # 3 twice, field 4, 9 bytes
    return [b"\x22" + varint(len(e)) + e for e in events]


@pytest.mark.parametrize("block", [7, 1 << 16])
def test_decode_head_equals_numpy(monkeypatch, block):
    monkeypatch.setattr(wire, "BLOCK_RECORDS", block)
    records = _events(np.random.default_rng(4), 2000)
    buf, size = wire.padded(b"".join(records))
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = np.cumsum([0] + [len(r) for r in records])[:-1]

    def head():
        got = wire.decode_head(data, pos, (1, 2, 3), end=size)
        return (
            [got.scalar[n].tolist() for n in (1, 2, 3)]
            + [got.present[n].tolist() for n in (1, 2, 3)]
            + [got.rest.tolist()]
        )

    ours, theirs = _both(monkeypatch, head)
    assert ours == theirs
    # and both as protobuf's parser reads them (any field order, the last value winning)
    from xprof_widgets.io import schema

    events = [schema.XEvent.FromString(_payload(r)) for r in records]
    want = [[e.metadata_id % 2**64 for e in events], [e.offset_ps % 2**64 for e in events]]
    want.append([e.duration_ps % 2**64 for e in events])
    assert ours[:3] == want


def _usual_events(rng, count):
    """Event records as writers make them: fields 1-3 in order (each may be absent), values
    of every varint length up to 7 bytes, metadata ids below 2**31, then stats."""
    sizes = [0, 1, 127, 128, 1 << 20, (1 << 31) - 1, (1 << 49) - 1]
    events = []
    for _ in range(count):
        fields = b""
        for number in (1, 2, 3):
            if rng.random() < 0.8:
                top = 6 if number == 1 else 7
                fields += bytes([number << 3]) + varint(sizes[int(rng.integers(top))])
        fields += b"".join(b"\x22\x02\x08\x01" for _ in range(int(rng.integers(0, 3))))
        events.append(b"\x22" + varint(len(fields)) + fields)
    return events


def _heads(records, narrow=True):
    buf, size = wire.padded(b"".join(records))
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = np.cumsum([0] + [len(r) for r in records])[:-1].astype(np.int64)
    return data, size, pos, wire.event_heads(data, pos, size, narrow)


@pytest.mark.parametrize("block", [7, 1 << 16])
def test_event_heads_equal_decode_head(monkeypatch, block):
    """The line's columns written in one pass equal what `decode_head` gives, narrowed."""
    monkeypatch.setattr(wire, "BLOCK_RECORDS", block)
    records = _usual_events(np.random.default_rng(6), 3000)
    data, size, pos, got = _heads(records)
    assert got is not None
    want = wire.decode_head(data, pos, (1, 2, 3), end=size)
    metadata_id, offset_ps, duration_ps, stats_at, positions = got
    assert [a.dtype for a in got] == [np.int32, np.int64, np.int64, np.uint16, np.int32]
    assert metadata_id.tolist() == want.value(1).tolist()
    assert offset_ps.tolist() == want.value(2).tolist()
    assert duration_ps.tolist() == want.value(3).tolist()
    assert stats_at.tolist() == want.rest.tolist()
    assert positions.tolist() == pos.tolist()
    _, _, _, wide = _heads(records, narrow=False)
    assert wide[4].dtype == np.int64 and wide[4].tolist() == pos.tolist()
    # Positions found as int32 are read as they are, and kept.
    thin = wire.event_heads(data, pos.astype(np.int32), size, True)
    assert all(a.tolist() == b.tolist() for a, b in zip(thin, got)) and thin[4].dtype == np.int32


@pytest.mark.parametrize(
    "odd",
    [
        b"\x10\x05\x08\x07",  # out of order
        b"\x08\x01\x08\x02",  # repeated
        b"\x08\x01\x22\x02\x08\x01\x18\x03",  # field 3 after the stats
        b"\x10" + varint(1 << 49),  # an 8-byte varint
        b"\x10" + varint((1 << 64) - 5),  # a negative offset
        b"\x08" + varint(1 << 31),  # a metadata id past int32
    ],
)
def test_event_heads_leave_other_layouts_to_decode_head(odd):
    """A line with one record in another layout, or that does not fit the narrow types, is
    left to the general decoder (which reads it as protobuf does)."""
    records = _usual_events(np.random.default_rng(7), 100)
    records.insert(50, b"\x22" + varint(len(odd)) + odd)
    assert _heads(records)[3] is None


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_live_runs_equal_numpy(monkeypatch, dtype):
    """The events with stats and their stats' bounds, from a line's own columns, as the
    numpy blocks find them (most events without stats, as on a Python tracer's line)."""
    from xprof_widgets.io import xspace

    rng = np.random.default_rng(8)
    records = _usual_events(rng, 5000)
    data, size, pos, heads = _heads(records)
    pos = pos.astype(dtype)
    ours, theirs = _both(monkeypatch, lambda: xspace._live_runs(data, pos, heads[3]))
    assert [a.tolist() for a in ours] == [a.tolist() for a in theirs]
    assert 0 < len(ours[0]) < len(records)
    # A record whose length runs past the data: the numpy code names it.
    cut = np.concatenate([pos, [size - 1]]).astype(dtype)
    at = np.concatenate([heads[3], [np.uint16(1)]])
    data[size - 1] = 0x22
    data[size] = 0x7F
    ours, theirs = _both(monkeypatch, lambda: str(xspace._live_runs(data, cut, at)))
    assert ours == theirs and ours.startswith("WireError")


def _payload(record):
    """The payload of a LENGTH record (tag byte, varint length, payload)."""
    _, at = wire.read_varint(record, 1, len(record))
    return bytes(record[at:])


def test_count_unknown_counts_ids_without_metadata():
    rng = np.random.default_rng(3)
    known = rng.random(300) < 0.7
    ids = rng.integers(-5, 320, 10_000).astype(np.int32)
    inside = (ids >= 0) & (ids < len(known))
    want = int((~inside).sum() + (~known[ids[inside]]).sum())
    assert native.count_unknown(ids, known) == want
    assert native.count_unknown(ids[:0], known) == 0


@pytest.mark.parametrize("cut", [None, b"\x08\x81", b"\x08\x01\x10"])  # the line's end; varints cut
def test_decode_head_of_bad_records_raises_as_numpy_does(monkeypatch, cut):
    records = _events(np.random.default_rng(5), 50)
    if cut is not None:
        records.insert(20, b"\x22" + varint(len(cut)) + cut)
    buf, size = wire.padded(b"".join(records))
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = np.cumsum([0] + [len(r) for r in records])[:-1]
    end = size - 3 if cut is None else size
    ours, theirs = _both(monkeypatch, lambda: wire.decode_head(data, pos, (1, 2, 3), end=end))
    assert isinstance(ours, str) and ours == theirs


def _columns(path):
    """A hash of every event column the open reads, or the error it raised."""
    try:
        space = read_xspace(path, cache=False)
    except xw.ProfileError as error:
        return f"ProfileError: {error}"
    h = hashlib.sha256()
    for plane in space.planes:
        for line in plane.lines:
            for a in (line.start_ps, line.event_duration_ps, line.metadata_id, line.record_pos, line.stats_at):
                h.update(str(a.dtype).encode() + np.ascontiguousarray(a).tobytes())
    return h.hexdigest()


def _samples():
    for kind in ("cpu", "gpu"):
        for path in sorted(Path(xw.sample_run(kind).path).glob("*.xplane.pb*")):
            data = path.read_bytes()
            yield gzip.decompress(data) if path.name.endswith(".gz") else data


def test_mutants_open_alike(monkeypatch, tmp_path):
    """Mutants of the shipped samples (bytes overwritten where the events lie, runs cut):
    the same columns, or the same error, with the library and without."""
    rng = np.random.default_rng(11)
    path = tmp_path / "m.xplane.pb"
    seen = {"opened": 0, "error": 0}
    for data in _samples():
        for k in range(60):
            bad = bytearray(data)
            if k % 6 == 5:
                bad = bad[: int(rng.integers(len(bad) // 2, len(bad)))]
            else:
                for at in rng.integers(len(bad) // 4, len(bad), int(rng.integers(1, 8))).tolist():
                    bad[at] = int(rng.choice([0x00, 0x22, 0x80, 0xFF, int(rng.integers(256))]))
            path.write_bytes(bytes(bad))
            ours, theirs = _both(monkeypatch, lambda: _columns(path))
            assert ours == theirs, k
            seen["error" if ours.startswith("ProfileError") else "opened"] += 1
    # Opening walks each event to its end (fields may come in any order), so most damaged
    # bytes are found at open.
    assert seen["opened"] > 5 and seen["error"] > 10, seen


def _stat(rng):
    """One XStat record: key first and one value last (the usual layout) or another layout."""
    key = int(rng.choice([0, 1, 5, 127, 128, 300, 70000, 1 << 33]))
    kind = int(rng.integers(9))
    head = b"\x08" + varint(key)
    if kind == 0:  # a double
        return head + b"\x11" + rng.bytes(8)
    if kind == 1:  # a string
        return head + b"\x2a" + varint(n := int(rng.integers(0, 200))) + b"s" * n
    if kind == 2:  # uint64 / int64 / ref of every varint length, negative ones included
        value = int(rng.choice([0, 1, 127, 128, 1 << 35, (1 << 56) - 1, 1 << 56, (1 << 63) - 1, (1 << 64) - 3]))
        return head + bytes([int(rng.choice([0x18, 0x20, 0x38]))]) + varint(value)
    if kind == 3:  # bytes
        return head + b"\x32\x03abc"
    if kind == 4:  # value first, then the key
        return b"\x20\x07" + head
    if kind == 5:  # the key alone, or nothing
        return head if rng.random() < 0.5 else b""
    if kind == 6:  # a FIXED32, a field no XStat has, two values
        return head + bytes([int(rng.choice([0x15, 0x48, 0x18]))]) + b"\x01\x02\x03\x04"
    if kind == 7:  # a LENGTH value whose length is off, a double cut short
        return head + (b"\x2a\x05ab" if rng.random() < 0.5 else b"\x11\x01\x02")
    return head + b"\x20" + varint(int(rng.integers(1 << 20)))


def _events_with_stats(rng, count, tail=b""):
    events = []
    for _ in range(count):
        stats = b"".join(b"\x22" + varint(len(s)) + s for s in (_stat(rng) for _ in range(int(rng.integers(0, 6)))))
        events.append(b"\x08\x01\x10\x02" + stats + (tail if rng.random() < 0.1 else b""))
    return events


def _as_lists(found):
    """`decode_keyed_by_key`'s records as plain lists (with each array's type), to compare."""
    return {
        k: [
            None if a is None else (str(a.dtype), a.tolist())
            for a in (r.owner, r.number, r.raw, r.text_start, r.text_stop)
        ]
        for k, r in found.items()
    }


@pytest.mark.parametrize("tail", [b"", b"\x2a\x00"])  # a later field after the stats (not in XEvent: kept short)
@pytest.mark.parametrize("keys", [None, [1, 128, 300]])
def test_keyed_stats_equal_numpy(monkeypatch, tail, keys):
    """Events' stats split by key as the numpy code splits them: values of every kind and
    layout, keys of every length, a wanted-keys filter, runs ended by a later field."""
    monkeypatch.setattr(wire, "BLOCK_RECORDS", 64)
    events = _events_with_stats(np.random.default_rng(7), 3000, tail)
    buf, size = wire.padded(b"".join(events))
    data = np.frombuffer(buf, dtype=np.uint8)
    starts = np.cumsum([0] + [len(e) for e in events])[:-1] + 4  # the stats start after fields 1 and 2
    stops = np.cumsum([len(e) for e in events])
    mask = None if keys is None else np.isin(np.arange(400), keys)

    def split():
        got = wire.decode_keyed_by_key(data, starts, stops, (2, 3, 4, 7), (5, 6), repeated=4, keys=mask)
        return _as_lists(got)

    ours, theirs = _both(monkeypatch, split)
    assert ours == theirs
    assert len(ours) > 3


@pytest.mark.parametrize(
    "bad", [b"\x1a\x00", b"\x22\x09\x08\x01", b"\x22\x02\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"]
)
def test_keyed_stats_of_other_layouts_and_bad_bytes_as_numpy(monkeypatch, bad):
    """A run met by field 3 (a layout only the numpy code reads), a stat past its event, a
    key that never ends: the same result or the same error."""
    events = _events_with_stats(np.random.default_rng(8), 200)
    events[77] += bad
    buf, size = wire.padded(b"".join(events))
    data = np.frombuffer(buf, dtype=np.uint8)
    starts = np.cumsum([0] + [len(e) for e in events])[:-1] + 4
    stops = np.cumsum([len(e) for e in events])

    def split():
        got = wire.decode_keyed_by_key(data, starts, stops, (2, 3, 4, 7), (5, 6), repeated=4)
        return {k: [r.owner.tolist(), r.number.tolist(), r.raw.tolist()] for k, r in got.items()}

    ours, theirs = _both(monkeypatch, split)
    assert ours == theirs


@pytest.mark.parametrize("density", [0.05, 0.9])  # a Python tracer's line; a device's
@pytest.mark.parametrize("keys", [None, [1, 128, 300]])
@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_event_stats_equal_numpy(monkeypatch, density, keys, dtype):
    """The stats of a line's events read from its columns in one pass (`xw_event_stats`:
    each event's length looked at, the stats of those that have some walked) split by key
    as the numpy code splits them: values of every kind and layout, few events with stats
    or most, a wanted-keys filter, positions int32 or int64, and rows past the room first
    guessed (then counted and read again)."""
    from xprof_widgets.io import xspace

    monkeypatch.setattr(wire, "BLOCK_RECORDS", 256)
    rng = np.random.default_rng(9)
    events = []
    for event in _events_with_stats(rng, 4000):
        body = event if rng.random() < density else event[:4]  # (fields 1 and 2, no stats)
        events.append(b"\x22" + varint(len(body)) + body)
    data, pos, at = _event_line(events, dtype)
    mask = None if keys is None else np.isin(np.arange(400), keys)

    def split():
        got = xspace._event_stats(data, pos, at, mask)
        return _as_lists(got)

    ours, theirs = _both(monkeypatch, split)
    assert ours == theirs and len(ours) > 3
    # Where the room guessed is short, the rows are counted, then read.
    monkeypatch.undo()  # (the library back)
    calls = []
    real = native._call

    def counted(name, *args):
        calls.append((name, args[11]) if name == "xw_event_stats" else name)
        return real(name, *args)

    monkeypatch.setattr(native, "_call", counted)
    got = native.event_stats(data, pos, at, 0x22, 0, np.zeros(256, np.int8), None, 3)
    assert [c for c in calls if c[0] == "xw_event_stats"][:2] == [("xw_event_stats", 3), ("xw_event_stats", 0)]
    assert len(got[0]) > 3


def _usual_stat(rng, keys=(0, 1, 5, 127, 128, 300, 4095)):
    """One XStat record in the usual layout (key first, one value last) of every value kind."""
    head = b"\x08" + varint(int(rng.choice(keys)))
    kind = int(rng.integers(5))
    if kind == 0:  # a double
        return head + b"\x11" + rng.bytes(8)
    if kind == 1:  # a string, empty ones too
        return head + b"\x2a" + varint(n := int(rng.integers(0, 200))) + b"s" * n
    if kind == 2:  # bytes
        return head + b"\x32" + varint(n := int(rng.integers(0, 20))) + b"b" * n
    value = int(rng.choice([0, 1, 127, 128, 1 << 35, (1 << 56) - 1, 1 << 56, (1 << 63) - 1, (1 << 64) - 3]))
    return head + bytes([int(rng.choice([0x18, 0x20, 0x38]))]) + varint(value)


@pytest.mark.parametrize(
    "keys, split, block",
    [
        (None, True, 256),
        (list(range(1, 5000)), True, 256),
        ([1, 300], False, 256),
        (None, False, 256),  # a key past 4096
        ([2, 3], True, 256),  # none of them there: counted (none), nothing written
        ([1, 300], True, 1 << 16),  # a line of one block: read in one walk
        ([2, 3], True, 1 << 16),
    ],
)
def test_event_stats_split_by_key_in_place_equal_numpy(monkeypatch, keys, split, block):
    """Where most of the events' stats are asked for, they are counted per key, then
    written into each key's arrays (`wire._split_events`, `xw_split_stats`), block by block:
    the records numpy splits by key. Where a few keys are asked for (some, in a line of more
    than one block), or a key is past SPLIT_KEYS, the rows are read the other way. A line
    of one block is read in one walk; one whose sample holds none of the keys is counted
    first: none found, nothing more is read."""
    from xprof_widgets.io import xspace

    monkeypatch.setattr(wire, "BLOCK_RECORDS", block)
    rng = np.random.default_rng(10)
    events = []
    for k in range(3000):
        count = int(rng.integers(0, 6)) if rng.random() < 0.6 else 0
        stats = [_usual_stat(rng) for _ in range(count)]
        if not split and keys is None and k == 1500:
            stats.append(_usual_stat(rng, keys=(70000,)))
        body = b"\x08\x01\x10\x02" + b"".join(b"\x22" + varint(len(x)) + x for x in stats)
        events.append(b"\x22" + varint(len(body)) + body)
    data, pos, at = _event_line(events)
    mask = None if keys is None else np.isin(np.arange(5000), keys)
    used = _found_by(monkeypatch, "_split_events")

    def split_():
        got = xspace._event_stats(data, pos, at, mask)
        return _as_lists(got)

    ours, theirs = _both(monkeypatch, split_)
    assert used == [split]
    assert ours == theirs and (len(ours) >= 2 if keys != [2, 3] else ours == {})


@pytest.mark.parametrize("crowded", [False, True])
def test_one_block_of_few_keys_read_in_one_walk_equal_counted(monkeypatch, crowded):
    """A line of one block and a few keys asked for is read in one walk into rows for as
    many stats of each key as there are events (`wire._split_in_one_walk`): the records
    counting first gives, texts' bounds 0 where a record has none. Where a key has more
    stats than there are events (each event holds it three times), the walk declines and
    they are counted first: the same records again, and numpy's."""
    from xprof_widgets.io import xspace

    rng = np.random.default_rng(12 + crowded)
    events = []
    for _ in range(2000):
        stats = [_usual_stat(rng, keys=(1,)) for _ in range(3)] if crowded else []
        stats += [_usual_stat(rng) for _ in range(int(rng.integers(0, 6)))]
        body = b"\x08\x01\x10\x02" + b"".join(b"\x22" + varint(len(x)) + x for x in stats)
        events.append(b"\x22" + varint(len(body)) + body)
    data, pos, at = _event_line(events)
    mask = np.isin(np.arange(5000), [1, 5, 300, 4095])
    walked = _found_by(monkeypatch, "_split_in_one_walk")
    one_walk = _as_lists(xspace._event_stats(data, pos, at, mask))
    assert walked == [not crowded]
    monkeypatch.setattr(wire, "_split_in_one_walk", lambda *args: None)
    counted = _as_lists(xspace._event_stats(data, pos, at, mask))
    ours, theirs = _both(monkeypatch, lambda: _as_lists(xspace._event_stats(data, pos, at, mask)))
    assert one_walk == counted == ours == theirs
    assert set(one_walk) == {1, 5, 300, 4095} and one_walk[1][3] is not None  # (texts among them)


def _event_line(events, dtype=np.int32):
    """A line's padded bytes and columns for event records `events` (each its tag and
    length, fields 1 and 2 in 4 bytes, then its stats): (data, record positions of
    `dtype`, stats offsets uint16)."""
    buf, _ = wire.padded(b"".join(events))
    pos = np.cumsum([0] + [len(e) for e in events])[:-1].astype(dtype)
    at = np.array([_stats_at(e) for e in events], dtype=np.uint16)
    return np.frombuffer(buf, dtype=np.uint8), pos, at


def _found_by(monkeypatch, name):
    """`wire.<name>` wrapped: the list it fills, per call, with whether it found the
    records (not None)."""
    calls = []
    real = getattr(wire, name)

    def spied(*args):
        found = real(*args)
        calls.append(found is not None)
        return found

    monkeypatch.setattr(wire, name, spied)
    return calls


def _stats_at(record):
    """Where the stats of an event record (tag, length, fields 1 and 2 in 4 bytes) start."""
    k = 1  # (the length varint's first byte)
    while record[k] >= 0x80:
        k += 1
    return k + 1 + 4


@pytest.mark.parametrize(
    "bad", [b"\x1a\x00", b"\x22\x09\x08\x01", b"\x22\x02\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff"]
)
def test_event_stats_of_other_layouts_and_bad_bytes_as_numpy(monkeypatch, bad):
    """A run met by field 3, a stat past its event, a key that never ends, read from the
    line's columns: the same result or the same error as the numpy code."""
    from xprof_widgets.io import xspace

    events = []
    for k, event in enumerate(_events_with_stats(np.random.default_rng(8), 200)):
        body = event + bad if k == 77 else event
        events.append(b"\x22" + varint(len(body)) + body)
    data, pos, at = _event_line(events)

    def split():
        got = xspace._event_stats(data, pos, at, None)
        return {k: [r.owner.tolist(), r.number.tolist(), r.raw.tolist()] for k, r in got.items()}

    ours, theirs = _both(monkeypatch, split)
    assert ours == theirs


def _track(rng, n):
    """A track's events sorted by start (longer first at equal starts): nested ones,
    overlapping ones (improperly nested), ties and zero lengths."""
    start = np.sort(rng.integers(0, n * 4, n)).astype(np.int64)
    dur = rng.choice([0, 1, 3, 10, 40, 400, 5000], n).astype(np.int64)
    order = np.lexsort((-dur, start))
    return start[order], dur[order]


@pytest.mark.parametrize("seed", range(8))
def test_rows_equal_numpy(monkeypatch, seed):
    """The trace viewer's rows (open counts, row-major layout, overlapping events taken out
    to extra rows) are the same with the compiled loops."""
    from xprof_widgets.analysis import trace as T

    rng = np.random.default_rng(seed)
    start, dur = _track(rng, int(rng.integers(1, 3000)))

    def rows():
        out_s, out_e = np.empty(len(start), np.int64), np.empty(len(start), np.int64)
        depth = T._open_count(start, dur)
        order, per_row, extra = T._rows(start, dur, out_s, out_e)
        return [
            str(depth.dtype),
            depth.tolist(),
            order.tolist(),
            per_row.tolist(),
            extra,
            out_s.tolist(),
            out_e.tolist(),
        ]

    ours, theirs = _both(monkeypatch, rows)
    assert ours == theirs


def test_open_count_past_int16_equals_numpy(monkeypatch):
    """A track nested deeper than int16 rows allow: the wider types, both ways."""
    from xprof_widgets.analysis import trace as T

    n = T._INT16_DEPTH + 10
    start, dur = np.arange(n, dtype=np.int64), np.full(n, 10 * n, dtype=np.int64)  # each inside the last
    ours, theirs = _both(monkeypatch, lambda: T._open_count(start, dur))
    assert ours.dtype == theirs.dtype == np.int32
    assert ours.tolist() == theirs.tolist() == list(range(n))


def test_arrays_of_another_type_or_layout_are_refused():
    """The C side reads a pointer as one run of its type: a strided view or another dtype
    is a TypeError here, never memory read as something it is not."""
    start = np.arange(20, dtype=np.int64)
    with pytest.raises(TypeError, match="xw_open_count"):
        native._call("xw_open_count", start[::2], start[::2], 10, np.empty(10, np.int64), np.empty(10, np.int16), 99)
    with pytest.raises(TypeError, match="int32 passed as i64"):
        native._call(
            "xw_open_count", start.astype(np.int32), start, 20, np.empty(20, np.int64), np.empty(20, np.int16), 99
        )


@pytest.mark.parametrize("seed", range(6))
def test_nesting_parents_equal_numpy(monkeypatch, seed):
    """Each event's nesting parent (the last earlier event ending no earlier) is the same
    with the compiled loop: nested, tied, ascending and descending ends, pieces or not."""
    from xprof_widgets.analysis.core import intervals as I

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 5000))
    end = [rng.integers(0, 50, n), np.arange(n), np.arange(n)[::-1], np.full(n, 7)][seed % 4].astype(np.int64)
    if seed >= 4:
        start, dur = _track(rng, n)
        end = start + dur
    ours, theirs = _both(monkeypatch, lambda: I.prev_enclosing(end, chunk=97).tolist())
    assert ours == theirs
    assert ours == [max([j for j in range(i) if end[j] >= end[i]], default=-1) for i in range(min(n, 300))] + ours[300:]
    if seed >= 4:  # the ends added as the walk goes: the same parents
        spans = _both(monkeypatch, lambda: I.prev_enclosing_span(start, dur).tolist())
        assert spans == [ours, ours]


@pytest.mark.parametrize("seed", range(6))
def test_nearest_kept_ancestor_equals_numpy(monkeypatch, seed):
    """Each event's node (the kept events numbered from a base, in order; another event the
    node of its nearest kept ancestor) is the same with the compiled loop, and is what
    walking up the parents one by one finds: deep chains, none kept, all kept, a parent
    not taken."""
    from xprof_widgets.analysis.core import grouping as G
    from xprof_widgets.analysis.core import intervals as I

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 4000))
    start, dur = _track(rng, n)
    parent = I.prev_enclosing(start + dur)
    parent[rng.random(n) < 0.05] = -1
    kept = [rng.random(n) < 0.1, np.zeros(n, bool), np.ones(n, bool)][seed % 3]
    base = int(rng.integers(0, 1000))
    ours, theirs = _both(monkeypatch, lambda: G._nearest_node(parent, kept, base, np.int32).tolist())
    assert ours == theirs

    def walk(i):
        while i >= 0 and not kept[i]:
            i = int(parent[i])
        return -1 if i < 0 else base + int(kept[:i].sum())

    assert ours == [walk(i) for i in range(n)]


@pytest.mark.parametrize("seed", range(8))
def test_grouping_graph_walks_equal_numpy(monkeypatch, seed):
    """The grouping's graph walks (CSR build, smallest label reaching each node, nodes
    reachable from seeds) give the numpy code's answers: random graphs with cycles,
    self-loops, repeated edges and isolated nodes, few labels or many."""
    from xprof_widgets.analysis.core.grouping import _Graph

    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    m = int(rng.integers(0, 3 * n))
    edges = rng.integers(0, n, (2, m)).astype(np.int32)
    none = np.iinfo(np.int32).max
    label = np.full(n, none, np.int32)
    labelled = rng.choice(n, int(rng.integers(0, max(1, n // [2, 50][seed % 2]))), replace=False)
    label[labelled] = rng.permutation(len(labelled))
    seeds = rng.choice(n, int(rng.integers(0, 20)), replace=False)

    def walks():
        graph = _Graph(n, edges)
        return (
            graph.dst.tolist(),
            graph.ptr.tolist(),
            graph.min_label(label.copy()).tolist(),
            graph.reach(seeds).tolist(),
        )

    ours, theirs = _both(monkeypatch, walks)
    assert ours == theirs
    # By hand on a small case: 0 -> 1 -> 2 -> 0 (a cycle), 3 -> 1; labels 5 on 3, 2 on 2.
    if seed == 0:
        tiny = _Graph(5, np.array([[0, 1, 2, 3], [1, 2, 0, 1]], np.int32))
        got = tiny.min_label(np.array([none, none, 2, 5, none], np.int32)).tolist()
        assert got == [2, 2, 2, 5, none]
        assert tiny.reach(np.array([3])).tolist() == [True, True, True, False, False]


@pytest.mark.parametrize("seed", range(8))
def test_nearest_source_equals_numpy(monkeypatch, seed):
    """The nearest source each node descends from (the grouping's eager marking) is the
    numpy code's: random graphs of events and context nodes (producers -> context ->
    consumers, crossed within a round), ties at equal distance, sources reaching sources."""
    from xprof_widgets.analysis.core.grouping import _Graph, _nearest_source

    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 2000))
    contexts = int(rng.integers(0, 50))
    m = int(rng.integers(0, 3 * n))
    edges = [rng.integers(0, n, (2, m))]
    if contexts:  # producers -> context, context -> consumers
        k = int(rng.integers(1, 4 * contexts))
        edges.append(np.stack([rng.integers(0, n, k), n + rng.integers(0, contexts, k)]))
        edges.append(np.stack([n + rng.integers(0, contexts, k), rng.integers(0, n, k)]))
    edges = np.concatenate(edges, axis=1).astype(np.int32)
    sources = rng.choice(n, int(rng.integers(1, max(2, n // 10))), replace=False)

    def nearest():
        return _nearest_source(_Graph(n + contexts, edges), n, sources).tolist()

    ours, theirs = _both(monkeypatch, nearest)
    assert ours == theirs
    assert all(ours[s] == i for i, s in enumerate(sources))  # a source is its own nearest


def test_grouped_host_events_of_a_python_tracer_line_equal_numpy(monkeypatch):
    """On an H200 run with steps, whose Python tracer's line has most events not nodes of
    the grouping, `steps._host_events` reads that line through its events' nodes (no group
    id array made): the columns numpy makes from the line's group ids."""
    from xprof_widgets.analysis.core import steps
    from xprof_widgets.analysis.core.grouping import group_ids, step_events

    from .conftest import VENDORED

    space = xw.load_run(VENDORED / "nvidia_jax_mlp_no_graphs_h200").xspace()
    groups = group_ids(space)
    lazy = [k for k in groups if k[0] == steps.HOST_PLANE and groups.nodes_of(k) is not None]
    assert lazy, "no host line of the sample read through its nodes"
    roots = step_events(space)
    ours = steps._host_events(space, roots)
    assert all(groups.nodes_of(k) is not None for k in lazy)  # (not made)
    monkeypatch.setattr(native, "_LIB", None)
    theirs = steps._host_events(space, roots)
    assert len(ours["group"]) > 30_000 and ours["marker"].sum() > 0
    for k in ours:
        np.testing.assert_array_equal(ours[k], theirs[k], err_msg=k)


def test_grouped_host_events_equal_numpy(monkeypatch):
    """`steps._host_events`' columns (`xw_grouped_events`) as numpy makes them, on the CPU
    sample and with a tenth of its events' names unknown (code -1: the type of a name
    ""), and the step breakdowns (`xw_step_walk`) of the two equal."""
    from xprof_widgets.analysis.core import steps
    from xprof_widgets.analysis.core.grouping import group_ids, step_events

    space = xw.sample_run("cpu").xspace()
    groups = group_ids(space)
    roots = step_events(space)
    line_index, line = space.plane(steps.HOST_PLANE).busy_lines[0]
    for unnamed in (False, True):
        if unnamed:
            for _, ln in space.plane(steps.HOST_PLANE).busy_lines:
                names = ln.names()
                codes = np.asarray(names.codes).copy()
                codes[::10] = -1
                ln._names = type(names).from_codes(codes, dtype=names.dtype)
        ours, theirs = _both(monkeypatch, lambda: steps._host_events(space, roots))
        assert len(ours["group"]) == 81576 and ours["marker"].sum() == 20
        for k in ours:
            np.testing.assert_array_equal(ours[k], theirs[k], err_msg=k)
        marks = ours["marker"]
        table = pd.DataFrame({"group_id": ours["group"][marks], "begin_ps": ours["start"][marks]})
        table["end_ps"] = ours["end"][marks]
        table = table.drop_duplicates("group_id")
        walked, swept = _both(monkeypatch, lambda ev=ours, table=table: steps._breakdown(ev, table))
        pd.testing.assert_frame_equal(walked, swept)
    # The first line's grouped events come first; those without a name have the type of "".
    gid = groups[(steps.HOST_PLANE, line_index)]
    grouped = np.flatnonzero(gid >= 0)
    unnamed = np.isin(grouped, np.arange(0, len(line), 10)) & ~ours["marker"][: len(grouped)]
    assert unnamed.sum() > 100
    assert (ours["type"][: len(grouped)][unnamed] == steps.host_event_type([""])[0]).all()
