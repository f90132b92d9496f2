"""One host's XSpace as columns: planes, lines, and numpy arrays of events.

`read_xspace(path)` reads a `.xplane.pb` (or `.xplane.pb.gz`) file. Planes and
lines are Python objects (there are few); events are numpy arrays per line:
absolute start and duration in picoseconds and the event-metadata id. Stats
are decoded only when asked for, for one line at a time, vectorised.
"""

from __future__ import annotations

import gc
import mmap
import os
import threading
import zlib
from concurrent.futures import ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np
import pandas as pd

from ..errors import ProfileError, os_errors
from . import column_cache, fs, native, schema, wire
from .logdir import XSPACE_SUFFIXES, host_of  # noqa: F401 - re-exported: open a file by its host

# Field numbers of the XSpace schema (xprof_widgets/io/proto/xplane.proto).
_SPACE_FIELDS = {1: "planes", 2: "errors", 3: "warnings", 4: "hostnames"}
_PLANE_TAG = (1 << 3) | wire.LENGTH  # 0x0a: an XSpace's planes
_PLANE_LINES = 3
# The plane's metadata maps and stats (fields 4, 5, 6): runs of thousands of entries.
_PLANE_MAP_TAGS = frozenset((n << 3) | wire.LENGTH for n in (4, 5, 6))
_LINE_ID, _LINE_NAME, _LINE_TIMESTAMP_NS, _LINE_EVENTS = 1, 2, 3, 4
_LINE_DURATION_PS, _LINE_DISPLAY_ID, _LINE_DISPLAY_NAME = 9, 10, 11
_EVENT_METADATA_ID, _EVENT_OFFSET_PS, _EVENT_DURATION_PS, _EVENT_STATS = 1, 2, 3, 4
_EVENT_NUM_OCCURRENCES = 5
_EVENT_TAG = (_LINE_EVENTS << 3) | wire.LENGTH  # 0x22
# XStat value fields, by field number.
_STAT_DOUBLE, _STAT_UINT64, _STAT_INT64, _STAT_STR = 2, 3, 4, 5
_STAT_BYTES, _STAT_REF, _STAT_COMPRESSED = 6, 7, 8
_STAT_SCALARS, _STAT_LENGTHS = (
    (_STAT_DOUBLE, _STAT_UINT64, _STAT_INT64, _STAT_REF),
    (_STAT_STR, _STAT_BYTES, _STAT_COMPRESSED),
)


def stat_value(stat, stat_names):
    """The Python value of one XStat message (ref values resolved to their string)."""
    kind = stat.WhichOneof("value")
    if kind is None:
        return None
    value = getattr(stat, kind)
    if kind == "ref_value":
        return stat_names.get(value, "")
    if kind == "compressed_str_value":
        return _gunzip_utf8(value)
    return value


def _utf8(b):
    return b.decode("utf-8", "replace")


#: Stats whose bytes values are binary (serialized protos): every other bytes value on an
#: event is read as text (UTF-8, bad bytes replaced), since the tools read stats as names.
BINARY_STATS = frozenset({"Hlo Proto", "memory_access_breakdown", "hlo_proto", "dcn_collective_info"})

#: The most a compressed string stat may inflate to: a real one is an HLO text or a
#: long name; more is a damaged (or hostile) file, refused before it takes the memory.
MAX_INFLATED_STAT_BYTES = 64 * 2**20


def _gunzip_utf8(b):
    """A compressed_str_value's text (gzip or zlib). Raises WireError when it does not
    inflate, or inflates past MAX_INFLATED_STAT_BYTES."""
    inflater = zlib.decompressobj(wbits=47)  # 32 + 15: gzip or zlib header, detected
    try:
        text = inflater.decompress(bytes(b), MAX_INFLATED_STAT_BYTES)
    except zlib.error as e:
        raise wire.WireError(f"a compressed string stat does not inflate ({e})") from None
    if inflater.unconsumed_tail:
        raise wire.WireError(f"a compressed string stat inflates past {MAX_INFLATED_STAT_BYTES // 2**20} MiB")
    if not inflater.eof:
        raise wire.WireError("a compressed string stat is cut short")
    return _utf8(text)


def categorical(codes, values):
    """A pandas Categorical of `values[codes]` with distinct, sorted str categories (equal
    strings in `values` merge): columns of a few distinct strings over millions of events."""
    uniq, inverse = np.unique(np.asarray(values, dtype=object).astype(str), return_inverse=True)
    return pd.Categorical.from_codes(inverse[codes], categories=pd.Index(uniq, dtype=object))


def filled(n, value):
    """An object array of `n` times `value`. (`np.full(n, value, dtype=object)` with a str
    value casts a string array to objects, 0.2 ms per 10,000 rows; this is a fill.)"""
    out = np.empty(n, dtype=object)
    out.fill(value)
    return out


def _is_object(values):
    dtype = getattr(values, "dtype", None)
    return dtype is not None and dtype.kind == "O"


# Equal to itself only (comparing fields would walk the file); slots, no __dict__: a file
# may hold a million lines.
@dataclass(eq=False, slots=True)
class Line:
    """One timeline of a plane, with its events as columns.

    `start_ps` (absolute, ps since the epoch) and `duration_ps` are int64 arrays in
    file order (XProf's writers sort each line by start); `metadata_id` is int32 when
    every id fits (it always has in real profiles), else int64.
    """

    plane: Plane
    id: int
    name: str
    display_id: int
    display_name: str
    timestamp_ns: int
    duration_ps: int
    start_ps: np.ndarray
    event_duration_ps: np.ndarray
    metadata_id: np.ndarray
    record_pos: np.ndarray = field(repr=False)  # byte offset of each event record
    stats_at: np.ndarray | None = field(repr=False, default=None)  # offset from record_pos to its stats
    _names: object = field(repr=False, default=None, compare=False)
    # The last named stats of every event decoded: (their names, the StatTable), which
    # serves a later call for some of them (`stat_table`).
    _kept_stats: object = field(repr=False, default=None, compare=False)

    def __len__(self):
        return len(self.start_ps)

    @property
    def title(self):
        """The name shown to people: the display name if set, else the name."""
        return self.display_name or self.name

    def names(self):
        """Event names, one per event (a pandas Categorical; kept: tools ask for it often)."""
        if self._names is None:
            self._names = self.plane.names_for(self.metadata_id)
        return self._names

    def name_strings(self, events=None):
        """Event names as an object array of str ("" for an event whose metadata is
        missing), of all events or of those at the indices `events`: one take from the
        categories (never a conversion per event)."""
        names = self.names()
        codes = names.codes if events is None else names.codes[events]
        return self.name_table()[codes]

    def name_table(self, missing=""):
        """The line's distinct event names as an object array indexed by the names' codes,
        `missing` last (code -1: an event whose metadata is missing)."""
        return np.append(np.asarray(self.names().categories, dtype=object), missing)

    def stats(self, names=None, events=None):
        """Stats of this line's events as a DataFrame, one row per event.

        One column per stat name (`names` limits which). Stats set on the event's
        metadata fill in where the event itself does not set them; ref values
        become their strings; missing values are NaN or None. `events` (an index
        array) decodes only those events.
        """
        columns = self.stat_columns(names, events)
        index = pd.RangeIndex(len(self)) if events is None else pd.Index(np.asarray(events, dtype=np.int64))
        # Object columns stay object: pandas 3 would convert str values to its
        # string dtype, which costs more than the decoding on a million rows.
        return pd.DataFrame(
            {k: pd.Series(v, index=index, dtype=object if _is_object(v) else None) for k, v in columns.items()},
            index=index,
        )

    def _stat_runs(self, idx):
        """(start, end) of the stats of events `idx` (None: all), each a run of field 4
        after fields 1-3, which were read at open; None where open kept no `stats_at`."""
        if self.stats_at is None:
            return None
        pos = self.record_pos if idx is None else self.record_pos[idx]
        _, stops = wire.record_payloads(self.plane.space.data, pos)
        return pos + (self.stats_at if idx is None else self.stats_at[idx]), stops

    def _stat_records(self, idx):
        """(owner, payload start, payload end) of every XStat record of events `idx` (None: all)."""
        data = self.plane.space.data
        runs = self._stat_runs(idx)
        if runs is None:
            pos = self.record_pos if idx is None else self.record_pos[idx]
            return wire.decode_records(data, pos, lengths=(_EVENT_STATS,)).ranges[_EVENT_STATS]
        return wire.repeated_run(data, *runs, _EVENT_STATS)

    def _decoded_stats(self, idx, names=None):
        """The XStat records of events `idx` (None: all), decoded and split by stat id:
        {id: `wire.KeyRecords`}, owners counted among `idx`. `names`: only these stats'
        values are decoded (None: all; records of others may come back)."""
        data = self.plane.space.data
        keys = self.plane._stat_keys(names)
        if self.stats_at is None:
            owner, s, e = self._stat_records(idx)
            return wire.decode_keyed_by_key(data, s, e, _STAT_SCALARS, _STAT_LENGTHS, owner=owner, keys=keys)
        pos = self.record_pos if idx is None else self.record_pos[idx]
        at = self.stats_at if idx is None else self.stats_at[idx]
        return _event_stats(data, pos, at, keys)

    def stat_table(self, names=None, events=None):
        """The stats of this line's events (`events`: an index array, else all) as a `StatTable`.

        Sparse: one entry per stat an event has, nothing for the ones it lacks.
        Stats on the event's metadata fill in where the event does not set them.
        Inside `XSpaceFile.sharing_stats` a line's stats are decoded once for
        every call. The line keeps the last named stats it decoded of all its events: a
        later call for some of them reads those. A plane's `read_ahead` names are decoded
        with any of them asked for.
        """
        shared = self.plane.space._shared_tables
        with self._corrupt_stats_named():
            slot = shared.get(id(self)) if shared is not None else None
            if slot is not None and (slot["names"] is None or (names is not None and slot["names"] >= set(names))):
                with slot["lock"]:  # the first reader decodes, the others wait for it
                    if slot["table"] is None:
                        wanted = slot["names"]
                        slot["table"] = StatTable(
                            self.plane, self.metadata_id, self._decoded_stats(None, wanted), wanted
                        )
                return slot["table"].take(names, events)
            batched = self.plane.space._small_lines.decoded(self) if len(self) <= SMALL_LINE else None
            if batched is not None:
                table = StatTable(self.plane, self.metadata_id, batched, names)
                return table if events is None else table.take(None, np.asarray(events, dtype=np.int64))
            kept = self._kept_stats
            if kept is not None and names is not None and kept[0] >= set(names):
                return kept[1].take(names, None if events is None else np.asarray(events, dtype=np.int64))
            idx = None if events is None else np.asarray(events, dtype=np.int64)
            wanted, ahead = names, self.plane.read_ahead
            if idx is None and names is not None and ahead is not None and ahead >= set(names):
                wanted = ahead
            table = StatTable(
                self.plane,
                self.metadata_id if idx is None else self.metadata_id[idx],
                self._decoded_stats(idx, wanted),
                wanted,
            )
            if idx is None and wanted is not None:  # (a few stats: never all of a line's kept)
                self._kept_stats = (frozenset(wanted), table)
            return table if wanted is names else table.take(names)

    @contextmanager
    def _corrupt_stats_named(self):
        """Stats are decoded after the file opened: bytes that do not decode become a
        ProfileError naming the file and the line."""
        try:
            yield
        except wire.WireError as e:
            raise ProfileError(
                self.plane.space.path, f"has stats that do not decode on line {self.title!r} of {self.plane.name}: {e}"
            ) from None

    def stat_columns(self, names=None, events=None, metadata=True):
        """`stats()` as a dict of columns (numpy or pandas arrays), without the DataFrame.

        `metadata=False` reads the events' own stats only (XProf's GPU event stats do).
        Read from `stat_table` (so decoded once inside `XSpaceFile.sharing_stats`), each
        column as `StatTable.stat_column` makes it.
        """
        with self._corrupt_stats_named():
            table = self.stat_table(names=names, events=events)
            columns = {name: table.stat_column(name) for name in table.own_names}
        if not metadata:
            return columns
        ids = self.metadata_id if events is None else self.metadata_id[np.asarray(events, dtype=np.int64)]
        from_metadata = self.plane.metadata_stats(ids, names)
        for name, values in from_metadata.items():
            if name in columns:
                own = columns[name]
                missing = pd.isna(own)
                if missing.any():
                    own = own.astype(object) if own.dtype != values.dtype else own.copy()
                    own[missing] = values[missing]
                    columns[name] = own
            else:
                columns[name] = values
        return columns


#: At most this many metadata (ids, names) are sorted and matched in Python, not numpy,
#: whose calls cost tens of µs each: a file may hold 20,000 planes of one kernel each.
_FEW = 32

#: A line of at most this many events is a small line: where a file holds many
#: (`SmallLines.MANY`), their stats are decoded many lines at a time (`SmallLines`).
SMALL_LINE = 256


class SmallLines:
    """The stats of a file's small lines (at most SMALL_LINE events), decoded many lines
    at a time: a file of 20,000 one-event GPU planes asks for each line's stats once per
    analysis, and one decode per line is a thousand times the work of its records (the
    calls, the arrays, the blocks). The lines are cut, in file order, into chunks of
    about CHUNK events, each decoded at its first line's first ask (one pass over its
    records) and split per line; the last KEPT chunks stay decoded (analyses walk the
    lines in order), so memory stays bounded whatever the file holds.

    `decoded(line)`: that line's {stat id: `wire.KeyRecords`} (all stats, owners counted
    on the line), or None where the line is read on its own (`Line._decoded_stats`): not
    a small line, too few small lines in the file, no `stats_at` kept at open, or a chunk
    whose stats do not decode (the line's own decode names the line in the error).
    """

    MANY = 64
    CHUNK = 1 << 18
    KEPT = 2

    def __init__(self, space):
        self._space = space
        self._lock = threading.Lock()
        self._where = None  # id(line) -> (chunk, first event in the chunk)
        self._chunks = []  # per chunk: its lines
        self._kept = {}  # chunk -> decoded (dict order: oldest first)

    def decoded(self, line):
        with self._lock:
            if self._where is None:
                self._index()
            found = self._where.get(id(line))
            if found is None:
                return None
            chunk, first = found
            if chunk not in self._kept:
                if len(self._kept) >= self.KEPT:
                    del self._kept[next(iter(self._kept))]
                self._kept[chunk] = self._decode(self._chunks[chunk])
            parts = self._kept[chunk]
        if parts is None:
            return None
        out = {}
        for sid, (records, bounds) in parts.items():
            a, b = bounds[first]
            if b > a:
                texts = records.text_start, records.text_stop
                out[sid] = wire.KeyRecords(
                    records.owner[a:b] - first,
                    records.number[a:b],
                    records.raw[a:b],
                    *(None if t is None else t[a:b] for t in texts),
                )
        return out

    def _index(self):
        small = [
            line
            for plane in self._space.planes
            for line in plane.lines
            if 0 < len(line) <= SMALL_LINE and line.stats_at is not None
        ]
        self._where = {}
        if len(small) < self.MANY:
            return
        chunk, size = [], 0
        for line in small:
            if size and size + len(line) > self.CHUNK:
                self._chunks.append(chunk)
                chunk, size = [], 0
            self._where[id(line)] = (len(self._chunks), size)
            chunk.append(line)
            size += len(line)
        self._chunks.append(chunk)

    def _decode(self, lines):
        """{stat id: (its records, {first event of a line: (first record, end)})} of the
        chunk's lines, or None when they do not decode."""
        data = self._space.data
        pos = np.concatenate([line.record_pos for line in lines])
        at = np.concatenate([line.stats_at for line in lines])
        firsts = np.cumsum([0] + [len(line) for line in lines])
        try:
            found = _event_stats(data, pos, at, None)
        except wire.WireError:
            return None
        out = {}
        heads = firsts[:-1].tolist()
        for sid, records in found.items():  # (owners: events of the chunk, ascending)
            edges = np.searchsorted(records.owner, firsts).tolist()
            out[sid] = (records, dict(zip(heads, zip(edges[:-1], edges[1:]))))
        return out


def decode_ahead(lines, names, thread=True):
    """Decode the stats `names` (a plane's `read_ahead` or part of it) of `lines` on a
    thread, last line first, while the caller reads them first to last: the decoding is
    compiled code that releases the GIL, so a second core does half of it. The thread
    stops where it finds a line decoded (the caller got there) and leaves any error for
    the caller to meet. Lines of SMALL_LINE events or fewer are left out (decoded in
    batches); nothing where fewer than two lines are left. Returns the thread (None: none
    started). `thread=False`: the same work on the calling thread (one of its own already),
    returned from when it is done."""
    big = [line for line in lines if len(line) > SMALL_LINE]
    if len(big) < 2:
        return None
    wanted = frozenset(names)
    for line in big:  # (the planes' tables made here, before two threads ask for them)
        line.plane._stat_keys(wanted)
        line.plane._metadata_stat_records  # noqa: B018

    def work():
        for line in reversed(big):
            kept = line._kept_stats
            if kept is not None and kept[0] >= wanted:
                return
            try:
                line.stat_table(names=wanted)
            except Exception:  # (the caller decodes the line again and meets it)
                return

    if not thread:
        work()
        return None
    ahead = threading.Thread(target=work, name="xprof-widgets stats ahead", daemon=True)
    ahead.start()
    return ahead


def _event_stats(data, pos, at, keys):
    """The XStat records of the events whose records are at `pos` with their stats `at`
    bytes in (field 4 after fields 1-3), decoded and split by stat id: {id:
    `wire.KeyRecords`}, owners counted among them; `keys` as `decode_keyed_by_key`'s."""
    kinds = dict(repeated=_EVENT_STATS, scalars=_STAT_SCALARS, lengths=_STAT_LENGTHS, keys=keys)
    # Where most events carry stats, each block of events finds the bounds of its stats
    # itself: no event-sized array of them (hundreds of MB on a line of millions). Where
    # most carry none (a Python tracer's line: a million calls, a few thousand with
    # stats), the compiled pass looks at each event's length and walks only the others,
    # in blocks of more events; the numpy code walks only the others, their owners mapped
    # back. Which is the case, a sample tells (both give the same records).
    # (Compiled, a line of one block at any density needs no sample: the density sizes blocks.)
    if not len(pos) or native.available() and wire.one_block(len(pos)):
        density = 1.0
    else:
        sample = np.linspace(0, len(pos) - 1, min(len(pos), 512)).astype(np.int64)
        density = len(_live_runs(data, pos[sample], at[sample])[0]) / len(sample)
    if 2 * density >= 1 or native.available():
        return wire.decode_keyed_by_key(data, None, None, heads=(pos, at), density=density, **kinds)
    live, starts, stops = _live_runs(data, pos, at)
    found = wire.decode_keyed_by_key(data, starts, stops, **kinds)
    for records in found.values():
        records.owner = live[records.owner].astype(records.owner.dtype, copy=False)
    return found


#: Events whose stat runs `_live_runs` bounds at a time: a few MB of bounds, memory the
#: allocator hands back for the next block (on a line of millions, event-sized arrays of
#: bounds would be hundreds of MB of fresh pages, most of the time of the search).
LIVE_RUN_BLOCK = 1 << 19


def _live_runs(data, pos, at):
    """(the events with stats, the start and end of their stats' run) among the events
    whose records are at `pos` with their stats `at` bytes in (field 4 after fields 1-3)."""
    if native.available() and data.dtype == np.uint8 and data.flags.c_contiguous:
        found = native.live_runs(data, np.asarray(pos), np.asarray(at))
        if found is not None:
            return found
    parts = []
    for a in range(0, len(pos), LIVE_RUN_BLOCK):
        block = pos[a : a + LIVE_RUN_BLOCK]
        _, stops = wire.record_payloads(data, block)
        starts = block + at[a : a + LIVE_RUN_BLOCK]
        live = np.flatnonzero(stops > starts)
        parts.append((live + a, starts[live], stops[live]))
    if not parts:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    return tuple(np.concatenate(column) for column in zip(*parts))


@dataclass(eq=False)  # one plane is equal to itself only (list.index, `in`)
class Plane:
    """One plane of an XSpace (a device, the host CPU, metadata...)."""

    space: XSpaceFile
    id: int
    name: str
    message: object = field(repr=False)  # XPlane with metadata and stats, no lines
    lines: list = field(default_factory=list)
    # Stat names a line of this plane decodes together whenever it is asked for some of
    # them (None: only those asked), set by an analysis that knows what the tools read
    # next (`analysis.core.grouping`: a GPU line's kernel stats): one walk over its
    # records serves every tool (`Line.stat_table`).
    read_ahead: frozenset | None = field(default=None, repr=False)

    @property
    def busy_lines(self):
        """[(index, line)] of the lines that have events, in file order: what most passes
        over a plane read (a file may hold a million lines without any). Kept; a plane
        without lines answers at once (a file may hold a million such planes too)."""
        if not self.lines:
            return ()
        found = self.__dict__.get("_busy_lines")
        if found is None:
            found = self.__dict__["_busy_lines"] = [(li, line) for li, line in enumerate(self.lines) if len(line)]
        return found

    @cached_property
    def stat_names(self):
        """{stat metadata id: stat name}."""
        return {k: v.name for k, v in self.message.stat_metadata.items()}

    @cached_property
    def _stat_ids_by_name(self):
        """{stat name: [its metadata ids]} (a name may have several)."""
        out: dict = {}
        for k, v in self.stat_names.items():
            out.setdefault(v, []).append(k)
        return out

    def has_stat(self, name):
        """Whether the plane's stat metadata names `name` (its events and their metadata can
        have that stat only then): a dict lookup, before reading any line's stats."""
        return name in self._stat_ids_by_name

    def _stat_keys(self, names):
        """A bool table by stat id marking the ids of `names` (None: all ids, or ids too
        large for a table), for `wire.decode_keyed_by_key`'s `keys`."""
        if names is None:
            return None
        top = max(self.stat_names, default=0)
        if not 0 <= top < 1 << 20:
            return None
        table = np.zeros(top + 1, dtype=bool)
        by_name = self._stat_ids_by_name
        table[[i for name in set(names) for i in by_name.get(name, ())]] = True
        return table

    @cached_property
    def stats(self):
        """Plane-level stats as {name: value} (e.g. a device's peak FLOPS)."""
        names = self.stat_names
        with self._corrupt_stats_named("the plane's own stats"):
            return {names.get(s.metadata_id, str(s.metadata_id)): stat_value(s, names) for s in self.message.stats}

    @contextmanager
    def _corrupt_stats_named(self, where):
        """Stats decoded after the file opened: a value that does not decode becomes a
        ProfileError naming the file, the plane and `where`."""
        try:
            yield
        except wire.WireError as e:
            raise ProfileError(
                self.space.path, f"has stats that do not decode in {where} of {self.name}: {e}"
            ) from None

    @cached_property
    def event_metadata(self):
        """Event metadata as a DataFrame: id, name, display_name (index: id).

        An id that events refer to but the plane does not define gets a row with empty
        names, as XProf's plane visitor gives it empty metadata: lookups never miss."""
        ids, names, display = self.metadata_names
        frame = pd.DataFrame({"id": ids, "name": names, "display_name": display})
        return frame.set_index("id", drop=False)

    @cached_property
    def metadata_names(self):
        """`event_metadata`'s columns as numpy arrays, without the DataFrame: (ids sorted,
        names, display names; object arrays). The names of the events need only these, and a
        DataFrame costs a millisecond, which a file of 20,000 tiny planes notices."""
        items = sorted(self.message.event_metadata.items())
        ids = np.array([k for k, _ in items], dtype=np.int64)
        names = [m.name for _, m in items]
        display = [m.display_name for _, m in items]
        if self._all_ids_known(ids):
            missing = ids[:0]
        else:
            referenced = self._referenced_ids()
            if len(referenced) <= _FEW:  # (a set lookup: numpy's setdiff1d costs 60 µs, on 20,000 planes)
                known = self.message.event_metadata
                missing = np.array([i for i in referenced.tolist() if i not in known], dtype=np.int64)
            else:
                missing = np.setdiff1d(referenced, ids)
        if len(missing):
            ids = np.concatenate([ids, missing])
            names += [""] * len(missing)
            display += [""] * len(missing)
            order = np.argsort(ids, kind="stable")
            ids, names, display = ids[order], [names[i] for i in order], [display[i] for i in order]
        return ids, np.array(names, dtype=object), np.array(display, dtype=object)

    def _all_ids_known(self, ids):
        """Whether every event of the plane has metadata among the sorted `ids`, found in one
        compiled pass over its events' ids (the usual answer; a table of the ids used costs
        a pass and an event-sized int64 copy more: 8-17 ms of a first read, fresh memory, on a
        Python tracer's 1.4 M calls, against 1 ms).
        False also where that pass does not apply (then `_referenced_ids` tells)."""
        used = [line.metadata_id for line in self.lines if len(line.metadata_id)]
        if sum(map(len, used)) <= _FEW or not native.available():
            return False
        if not len(ids) or ids[0] < 0 or ids[-1] >= 1 << 22 or any(u.dtype != np.int32 for u in used):
            return False
        known = np.zeros(int(ids[-1]) + 1, bool)
        known[ids] = True
        return all(native.count_unknown(u, known) == 0 for u in used)

    def _referenced_ids(self):
        """The metadata ids the plane's events use (counted, not sorted, when they are small)."""
        used = [line.metadata_id for line in self.lines if len(line.metadata_id)]
        if sum(map(len, used)) <= _FEW:  # (a set: a few events, many planes)
            return np.array(sorted(set().union(*(ids.tolist() for ids in used))), dtype=np.int64)
        found = []
        for ids in used:
            lo, hi = int(ids.min()), int(ids.max())
            if 0 <= lo and hi < 1 << 22:
                found.append(np.flatnonzero(np.bincount(ids, minlength=0)).astype(np.int64))
            else:
                found.append(np.unique(ids))
        return np.unique(np.concatenate(found)) if found else np.zeros(0, np.int64)

    @cached_property
    def _name_lookup(self):
        """(sorted metadata ids, category code of each, categories): ids to names, vectorised."""
        ids, names, _ = self.metadata_names
        if len(names) <= _FEW:  # (sorted in Python: as numpy's unique sorts, a tenth of its time here)
            categories = sorted(set(names.tolist()))
            position = {name: k for k, name in enumerate(categories)}
            codes = np.array([position[name] for name in names.tolist()], dtype=np.int64)
        else:
            categories, codes = np.unique(names, return_inverse=True)
        return ids, codes, self._shared_names(categories)[0]

    @cached_property
    def _name_dtype(self):
        """The Categorical dtype of the event names (made once: pandas checks its categories)."""
        return self._shared_names(self._name_lookup[2])[1]

    def _shared_names(self, categories):
        """(pd.Index, CategoricalDtype) of these sorted names, one pair for all the planes
        of the space that have them (GPU planes of one program name the same kernels, and a
        pandas Index and dtype cost 50 µs a plane, which a file of 20,000 planes notices)."""
        key = tuple(categories) if len(categories) <= _FEW else None
        found = self.space._name_tables.get(key) if key is not None else None
        if found is None:
            index = pd.Index(categories, dtype=object)
            found = (index, pd.CategoricalDtype(index))
            if key is not None:
                self.space._name_tables[key] = found
        return found

    @cached_property
    def _name_code_table(self):
        """Small ids (the usual case): the category code of every id up to the largest
        (-1 where no metadata), in the narrowest type; else None."""
        ids, codes, categories = self._name_lookup
        if not len(ids) or ids[0] < 0 or ids[-1] >= 1 << 22:
            return None
        dtype = np.int8 if len(categories) < 2**7 else np.int16 if len(categories) < 2**15 else np.int32
        table = np.full(int(ids[-1]) + 1, -1, dtype)
        table[ids] = codes
        return table

    def names_for(self, metadata_id):
        """Names for an array of metadata ids, as a pandas Categorical (NaN if unknown)."""
        ids, codes, categories = self._name_lookup
        if len(ids) == 0:
            return pd.Categorical.from_codes(np.full(len(metadata_id), -1), categories=[])
        metadata_id = np.asarray(metadata_id)
        table = self._name_code_table
        if table is not None and len(metadata_id):
            # A lookup in a table by id, one narrow array: on tens of millions of events
            # a binary search per event and its int64 temporaries cost seconds.
            if 0 <= metadata_id.min() and metadata_id.max() < len(table):
                found = table[metadata_id]
            else:
                inside = (metadata_id >= 0) & (metadata_id < len(table))
                found = np.where(inside, table[np.where(inside, metadata_id, 0)], -1).astype(table.dtype)
            return pd.Categorical.from_codes(found, dtype=self._name_dtype, validate=False)
        pos = np.clip(np.searchsorted(ids, metadata_id), 0, len(ids) - 1)
        hit = ids[pos] == metadata_id
        return pd.Categorical.from_codes(np.where(hit, codes[pos], -1), dtype=self._name_dtype)

    @cached_property
    def _metadata_stat_table(self):
        """{stat name: (sorted metadata ids, value column)} for stats set on event metadata.

        Built once per plane: every `Line.stats()` call looks values up here.
        """
        names = self.stat_names
        by_name = {}
        with self._corrupt_stats_named("the event metadata"):
            for mid, md in self.message.event_metadata.items():
                for s in md.stats:
                    by_name.setdefault(names.get(s.metadata_id, str(s.metadata_id)), {})[mid] = stat_value(s, names)
        table = {}
        for name, by_id in by_name.items():
            keys = np.fromiter(by_id.keys(), dtype=np.int64, count=len(by_id))
            vals = list(by_id.values())
            order = np.argsort(keys)
            table[name] = (keys[order], _column([vals[i] for i in order]))
        return table

    def metadata_stats(self, metadata_id, names=None):
        """Per-event columns of the stats that sit on each event's metadata."""
        out = {}
        for name, (keys, values) in self._metadata_stat_table.items():
            if names is not None and name not in names:
                continue
            pos = np.clip(np.searchsorted(keys, metadata_id), 0, len(keys) - 1)
            hit = keys[pos] == metadata_id
            col = values[pos]
            if not hit.all():
                col = col.astype(float) if col.dtype.kind in "iub" else col.astype(object)
                col[~hit] = np.nan if col.dtype.kind == "f" else None
            out[name] = col
        return out

    @cached_property
    def _metadata_stat_records(self):
        """`_metadata_stat_table` as StatTable rows: {name: (sorted ids, kind, raw, text)}."""
        out = {}
        for name, (keys, values) in self._metadata_stat_table.items():
            kind = np.zeros(len(keys), np.int8)
            raw = np.zeros(len(keys), np.uint64)
            text = np.full(len(keys), None, dtype=object)
            for i, v in enumerate(values.tolist()):
                if isinstance(v, bool) or v is None:
                    continue
                if isinstance(v, int):
                    kind[i] = _STAT_UINT64 if v >= 1 << 63 else _STAT_INT64
                    raw[i] = v & 0xFFFFFFFFFFFFFFFF
                elif isinstance(v, float):
                    kind[i], raw[i] = _STAT_DOUBLE, np.float64(v).view(np.uint64)
                elif isinstance(v, bytes):
                    kind[i], text[i] = _STAT_BYTES, v
                else:  # str, refs already resolved
                    kind[i], text[i] = _STAT_STR, str(v)
            has = kind != 0
            out[name] = (keys[has], kind[has], raw[has], text[has])
        return out

    def line(self, name):
        """The first line whose name or display name is `name` (None if none)."""
        for line in self.lines:
            if name in (line.name, line.display_name):
                return line
        return None

    @property
    def event_count(self):
        return sum(len(line) for line in self.lines)


_INT_KINDS = np.zeros(9, bool)
_INT_KINDS[[_STAT_UINT64, _STAT_INT64]] = True


class StatTable:
    """Stats of some events of a plane, sparse: an entry per stat an event has.

    Made by `Line.stat_table`. Each stat is read as XProf's `XStatVisitor` reads
    it, whatever value field the writer used:

    * `ints(name)`: (events, int64 values) of the events that have the stat
      (`IntOrUintValue`: uint64 values keep their bits; a double, string or
      ref reads 0).
    * `int_column`, `float_column`, `str_column`: one value per event, 0, 0.0
      or `fill` where the event lacks it or has another kind of value
      (`IntOrUintValue`, `DoubleValue`, `StrOrRefValue`).
    * `strings(name)`: (events, str) of the events with a string or ref value.
    * `present(name)`: which events have the stat.

    Events are positions among the events the table was made for. Stats set on
    an event's metadata count for the events that do not set them.

    Storage: per stat name, its XStat records as they were decoded
    (`wire.decode_keyed_by_key`: the value field, the scalar's bits, the string
    payloads' ranges) with their events (`_stats`); a table restricted to some
    names or events (`take`) shares those columns and keeps which rows it has.
    """

    def __init__(self, plane, metadata_id, records, names=None):
        self.plane = plane
        self.count = len(metadata_id)
        self._metadata_id = metadata_id
        names_by_id = plane.stat_names
        # name -> (events, (kind, raw, text start, text stop), rows): `events` ascending;
        # `rows` None when the columns are the events' own (aligned with them), else the
        # positions in them of the events' records (a table `take` cut from another).
        self._stats = {}
        by_name = {}
        for sid in sorted(records):
            name = names_by_id.get(int(sid), str(int(sid)))
            if names is None or name in names:
                by_name.setdefault(name, []).append(records[sid])
        for name, parts in by_name.items():
            r = wire.KeyRecords.joined(parts)
            if len(parts) > 1:  # two ids with one name: one list, in event order
                order = np.argsort(r.owner, kind="stable")
                r = wire.KeyRecords(
                    *(None if c is None else c[order] for c in (r.owner, r.number, r.raw, r.text_start, r.text_stop))
                )
            self._stats[name] = (r.owner, (r.number, r.raw, r.text_start, r.text_stop), None)
        # Stats on the events' metadata, for events without their own.
        self._from_metadata = {}
        for name, (keys, kind, raw, text) in plane._metadata_stat_records.items():
            if (names is not None and name not in names) or not len(keys):
                continue
            pos = np.clip(np.searchsorted(keys, metadata_id), 0, len(keys) - 1)
            hit = keys[pos] == metadata_id
            if name in self._stats:
                hit[self._stats[name][0]] = False
            events = np.flatnonzero(hit)
            if len(events):
                at = pos[events]
                self._from_metadata[name] = (events, kind[at], raw[at], text[at])
        # `str_codes` per stat name, shared with the tables `take` cuts of the same events
        # (the op database and the kernel reports read a line's `hlo_op` and `tf_op`).
        self._codes_of: dict = {}

    def take(self, names=None, events=None):
        """This table restricted to stats `names` and to `events` (positions here, ascending)."""
        out = object.__new__(StatTable)
        out.__dict__.update(self.__dict__)
        keep = (lambda name: True) if names is None else set(names).__contains__
        if events is None:
            out._stats = {k: v for k, v in self._stats.items() if keep(k)}
            out._from_metadata = {k: v for k, v in self._from_metadata.items() if keep(k)}
            return out
        events = np.asarray(events, dtype=np.int64)
        out._codes_of = {}
        new_pos = np.full(self.count, -1, dtype=np.int32 if len(events) < 2**31 else np.int64)
        new_pos[events] = np.arange(len(events))
        out.count = len(events)
        out._metadata_id = self._metadata_id[events]
        out._stats = {}
        for name, (ev, cols, rows) in self._stats.items():
            if keep(name):
                at = new_pos[ev]
                has = at >= 0
                if has.all():  # every record of the stat is on a kept event: the same rows
                    out._stats[name] = (at, cols, rows)
                    continue
                sel = np.flatnonzero(has)
                out._stats[name] = (at[sel], cols, sel if rows is None else rows[sel])
        out._from_metadata = {}
        for name, (ev, *rest) in self._from_metadata.items():
            if keep(name):
                at = new_pos[ev]
                has = at >= 0
                out._from_metadata[name] = (at[has], *(x[has] for x in rest))
        return out

    @property
    def names(self):
        return set(self._stats) | set(self._from_metadata)

    @property
    def own_names(self):
        """The stats the events set themselves (not through their metadata), in id order."""
        return list(self._stats)

    def stat_column(self, name):
        """The events' own values of a stat as one column (`Line.stats()`'s): all doubles:
        float64, NaN where missing; all integers: int64 (uint64 when none is negative, so
        ids and addresses past 2**63 keep their value), a nullable Int64/UInt64 where some
        events lack it; else (strings, refs, bytes, mixed kinds) an object array, None
        where missing. Bytes are text (UTF-8) unless the stat is in BINARY_STATS."""
        events, kind, raw, text_start, text_stop = self._own(name)
        count = self.count
        dbl, i64, u64 = kind == _STAT_DOUBLE, kind == _STAT_INT64, kind == _STAT_UINT64
        if dbl.all():
            col = np.full(count, np.nan)
            col[events] = raw.view(np.float64)
            return col
        ints = raw.view(np.int64)
        one_int_dtype = (i64 | u64).all()
        if one_int_dtype:
            if u64.all() or (ints[i64] >= 0).all():
                ints = raw
            elif (raw[u64] >= 2**63).any():  # negative int64 beside huge uint64
                one_int_dtype = False
        if one_int_dtype:
            if self._one_each(events):
                return ints.copy()
            col = pd.array(np.zeros(count, dtype=ints.dtype), dtype="UInt64" if ints.dtype == np.uint64 else "Int64")
            mask = np.ones(count, dtype=bool)
            mask[events] = False
            col[events] = ints
            col[mask] = pd.NA
            return col
        values = np.full(len(kind), None, dtype=object)
        values[dbl] = raw[dbl].view(np.float64)
        values[i64] = ints[i64]
        values[u64] = raw[u64]
        ref = kind == _STAT_REF
        if ref.any():
            codes, names = self._ref_names(raw[ref])
            values[ref] = names[codes]
        data = self.plane.space.data
        for k, decode in (
            (_STAT_STR, _utf8),
            (_STAT_BYTES, (lambda b: b) if name in BINARY_STATS else _utf8),
            (_STAT_COMPRESSED, _gunzip_utf8),
        ):
            has = kind == k
            if has.any():
                values[has] = wire.decode_strings(data, text_start[has], text_stop[has], decode)
        col = np.full(count, None, dtype=object)
        col[events] = values
        return col

    def __contains__(self, name):
        return name in self._stats or name in self._from_metadata

    def _one_each(self, events):
        """Whether `events` (a stat's, ascending) hold every event once: its values are
        then a column as they are. Owners come in order, so strictly increasing is that."""
        return len(events) == self.count and (self.count < 2 or bool((np.diff(events) > 0).all()))

    def _ref_names(self, raw):
        """Ref values (stat ids) as (codes, names): raw[i] is the stat named names[codes[i]]
        ("" for an id without metadata); each distinct id looked up once."""
        uniq, codes = _distinct(raw)
        names_by_id = self.plane.stat_names
        return codes, np.array([names_by_id.get(int(u), "") for u in uniq], dtype=object)

    def _own(self, name):
        """(events, kind, raw, text start, text stop) of the events' own records of a stat
        (text None where it has no LENGTH values)."""
        if name not in self._stats:
            empty = np.zeros(0, np.int64)
            return empty, np.zeros(0, np.int8), np.zeros(0, np.uint64), None, None
        events, cols, rows = self._stats[name]
        if rows is not None:
            cols = tuple(None if c is None else c[rows] for c in cols)
        return (events, *cols)

    def _values(self, name):
        """(events, kind, raw) of a stat, the events' own entries then their metadata's."""
        own = self._own(name)[:3]
        md = self._from_metadata.get(name)
        if md is None:
            return own
        return tuple(np.concatenate([a, b]) for a, b in zip(own, md[:3]))

    def present(self, name):
        out = np.zeros(self.count, bool)
        out[self._values(name)[0]] = True
        return out

    def ints(self, name):
        events, kind, raw = self._values(name)
        return events, np.where(_INT_KINDS[kind], raw, 0).view(np.int64)

    def own_ints(self, name):
        """The events' own records of a stat, not their metadata's: (events, int64 values,
        uint) in record order (an event may have several), the values as `ints` reads them
        and `uint` True where the record is a uint64 (XProf's `uint64_value()` reads 0 for
        any other)."""
        events, kind, raw = self._own(name)[:3]
        return events, np.where(_INT_KINDS[kind], raw, 0).view(np.int64), kind == _STAT_UINT64

    def metadata_ints(self, name):
        """(events, int64 values) of the events that get a stat from their metadata (only
        those without a record of their own), as `ints` reads them."""
        md = self._from_metadata.get(name)
        if md is None:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        return md[0], np.where(_INT_KINDS[md[1]], md[2], 0).view(np.int64)

    def int_column(self, name, dtype=np.int64):
        """int64 (uint64 with `dtype`: addresses past 2**63 stay positive), 0 where missing."""
        events, values = self.ints(name)
        if self._one_each(events):
            return values.view(dtype)  # one entry per event, in order: no scatter
        out = np.zeros(self.count, np.int64)
        out[events] = values
        return out.view(dtype)

    def float_column(self, name):
        events, kind, raw = self._values(name)
        out = np.zeros(self.count)
        out[events] = np.where(kind == _STAT_DOUBLE, raw, 0).view(np.float64)
        return out

    def _string_parts(self, name):
        """[(events, codes, values)]: the string and ref values of a stat, by kind."""
        events, kind, raw, text_start, text_stop = self._own(name)
        parts = []
        data = self.plane.space.data
        for k, decode in ((_STAT_STR, _utf8), (_STAT_COMPRESSED, _gunzip_utf8)):
            at = kind == k
            if at.any():
                with self.plane._corrupt_stats_named(f"the {name!r} stats"):
                    parts.append((events[at], *wire.string_codes(data, text_start[at], text_stop[at], decode)))
        at = kind == _STAT_REF
        if at.any():
            parts.append((events[at], *self._ref_names(raw[at])))
        md = self._from_metadata.get(name)
        if md is not None:
            is_str = md[1] == _STAT_STR
            codes, values = pd.factorize(md[3][is_str])
            parts.append((md[0][is_str], codes, np.asarray(values, dtype=object)))
        return parts

    def strings(self, name):
        """(events, object array of str) of the events whose value is a string or ref."""
        events, codes, values = self.string_codes(name)
        return events, values[codes]

    def string_codes(self, name):
        """(events, codes, values) of the events whose value is a string or ref: each
        event's string is `values[code]` (values not merged: equal strings may repeat),
        without a string object per event."""
        parts = self._string_parts(name)
        if not parts:
            return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, object)
        offsets = np.cumsum([0] + [len(p[2]) for p in parts])
        codes = np.concatenate([p[1].astype(np.int64) + o for p, o in zip(parts, offsets)])
        return np.concatenate([p[0] for p in parts]), codes, np.concatenate([p[2] for p in parts])

    def str_codes(self, name):
        """`str_column(name)` as codes: (per event the position of its string in `values`,
        -1 where it has none; values), without a str object per event. Made once per stat
        of these events; read-only arrays (copy to change them)."""
        # (A table cut to other names shares the dict: a name it lacks is not kept there.)
        has = name in self._stats or name in self._from_metadata
        found = self._codes_of.get(name) if has else None
        if found is None:
            events, codes, values = self.string_codes(name)
            at = np.full(self.count, -1, np.int64)
            at[events] = codes
            at.flags.writeable = values.flags.writeable = False
            found = (at, values)
            if has:
                self._codes_of[name] = found
        return found

    def str_column(self, name, fill=""):
        out = filled(self.count, fill)
        events, values = self.strings(name)
        out[events] = values
        return out

    def str_category(self, name, fill=""):
        """`str_column` as a pandas Categorical (sorted categories): for columns of a few
        distinct strings over millions of events, built from codes without a string per event."""
        events, at, values = self.string_codes(name)
        codes = np.zeros(self.count, np.int64)  # 0: fill
        codes[events] = at + 1
        # Equal strings from different kinds or byte strings merge.
        return categorical(codes, np.concatenate([np.array([fill], dtype=object), values]))


def _distinct(ids):
    """`np.unique(ids, return_inverse=True)` of unsigned ids; where they lie in a small range
    (stat metadata ids: a few hundred), by a table over it, without a sort of every value."""
    ids = np.asarray(ids)
    top = int(ids.max()) if len(ids) else 0
    if top >= 4 * len(ids) + 4096:
        return np.unique(ids, return_inverse=True)
    used = np.zeros(top + 1, bool)
    used[ids] = True
    rank = np.cumsum(used) - 1
    return np.flatnonzero(used).astype(ids.dtype), rank[ids]


def _column(values):
    """A numpy column from Python values: int64, float64 or object."""
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        try:
            return np.array(values, dtype=np.int64)
        except OverflowError:
            return np.array(values, dtype=np.uint64)
    if all(isinstance(v, (int, float, np.number)) for v in values):
        return np.array(values, dtype=np.float64)
    return np.array(values, dtype=object)


#: The per-event columns a DataFrame of events shows: (column name, Line attribute).
_EVENT_COLUMNS = (("start_ps", "start_ps"), ("duration_ps", "event_duration_ps"), ("metadata_id", "metadata_id"))


class XSpaceFile:
    """One host's profile: `planes`, each with `lines`, each with event columns."""

    def __init__(self, path, data, size, source_key=None):
        self.path = str(path)
        self.host = host_of(path)
        # The file's bytes, padded (see wire.padded). None when the columns came from the
        # column cache: read at the first `data`, when a tool asks for stats.
        self._data = None if data is None else np.frombuffer(data, dtype=np.uint8)
        self._data_lock = threading.Lock()
        self._source_key = source_key  # the file as it was when its columns were cached
        self.size = size
        self.planes = []
        self.errors = []
        self.warnings = []
        self.hostnames = []
        # What analyses derive per host (group ids, allocator events...) is kept on this
        # object by `analysis.core.cache.derived`: computed once, shared by every tool.
        self._shared_tables = None  # see sharing_stats
        self._small_lines = SmallLines(self)  # see Line.stat_table
        self._plane_positions = None  # see index_of
        self._name_tables: dict = {}  # see Plane._shared_names
        self._columns = None  # see event_columns
        self._columns_lock = threading.Lock()

    @property
    def data(self):
        """The file's bytes as a padded uint8 array (what event and stat positions index).

        Read on first use when the columns came from the column cache; a file that
        changed since then is refused (its positions would point into other bytes)."""
        if self._data is None:
            with self._data_lock:
                if self._data is None:
                    self._data = self._read_data()
        return self._data

    def _read_data(self):
        key = self._source_key
        with os_errors(self.path):
            now = column_cache.source_key(self.path)
        # Every part of the key: an in-place rewrite that puts the size and mtime back
        # still changes the ctime (which no call can set).
        if key is not None and now != key:
            raise ProfileError(self.path, "changed on disk since it was opened: open it again")
        buf, size = read_padded(self.path)
        if size != self.size:
            raise ProfileError(self.path, "changed on disk since it was opened: open it again")
        return np.frombuffer(buf, dtype=np.uint8)

    def event_columns(self):
        """Every line's events in one set of columns: ({"start_ps", "duration_ps",
        "metadata_id": read-only pandas Series over int64 arrays}, {id(line): (first row,
        end row)} of the lines with events), lines in plane and file order.

        Each line's own arrays are views into these (after the first call, or from the
        start when the columns came from the column cache), so a DataFrame of all events
        shares them instead of copying ten million rows per column. The Series are kept
        here so that pandas' copy-on-write sees them: a DataFrame made from them copies a
        column before it writes into it, and never writes into a line.
        """
        with self._columns_lock:
            if self._columns is None:
                # (An empty line keeps its empty arrays, read-only and shared: a file may
                # hold a million, and the passes below are over the others.)
                busy = [line for plane in self.planes for _, line in plane.busy_lines]
                rows, at = {}, 0
                for line in busy:
                    rows[id(line)] = (at, at + len(line))
                    at += len(line)
                if not busy:  # (the columns' types: an empty line's)
                    busy = [line for plane in self.planes for line in plane.lines[:1]][:1]
                series = {}
                for column, attr in _EVENT_COLUMNS:
                    parts = [getattr(line, attr) for line in busy]
                    shared = np.concatenate(parts) if parts else np.zeros(0, np.int64)
                    shared.flags.writeable = False
                    for line in busy:  # the lines read the shared copy: memory is not doubled
                        a, b = rows.get(id(line), (0, 0))
                        if b > a:
                            setattr(line, attr, shared[a:b])
                    series[column] = pd.Series(shared, copy=False)
                self._columns = (series, rows)
            return self._columns

    @contextmanager
    def sharing_stats(self, lines, names=None):
        """Within the block, each of `lines` decodes all its stats (or the stats `names`)
        once, at its first `stat_table` call, and every call for those reads from that.

        For analyses that read different stats of the same events (the memory profile's
        grouping and allocator columns): one pass over the records instead of one per
        reader. Readers may run on several threads: the first to ask for a line decodes
        it, the others wait for it. The decoded stats are dropped at the end of the block.
        """
        outer = self._shared_tables
        self._shared_tables = dict(outer or {})
        for line in lines:
            self._shared_tables.setdefault(
                id(line), {"lock": threading.Lock(), "table": None, "names": None if names is None else set(names)}
            )
        try:
            yield
        finally:
            self._shared_tables = outer

    def index_of(self, plane):
        """The position of `plane` (one of `planes`) in `planes`: by a table made once, not a
        scan (a file may hold 20,000 planes, and each plane's analysis asks)."""
        positions = self._plane_positions
        if positions is None or len(positions) != len(self.planes):
            positions = self._plane_positions = {id(p): k for k, p in enumerate(self.planes)}
        try:
            return positions[id(plane)]
        except KeyError:
            raise ValueError(f"plane {plane.name!r} is not one of {self.path}") from None

    def plane(self, name):
        """The plane named `name`, or None."""
        for p in self.planes:
            if p.name == name:
                return p
        return None

    @property
    def event_count(self):
        return sum(p.event_count for p in self.planes)

    def __repr__(self):
        return f"<XSpaceFile {self.host!r}: {len(self.planes)} planes, {self.event_count} events>"


#: Bytes read per call when reading a profile file: a progress callback hears
#: from each chunk, so a 185 MB file reports about a dozen times.
READ_CHUNK_BYTES = 16 * 2**20


def _read_chunks(f, view, progress):
    """Fill `view` from `f` a chunk at a time, calling `progress(done, len(view))`; returns bytes read."""
    total, done = len(view), 0
    if progress is not None:
        progress(0, total)
    while done < total:
        got = f.readinto(view[done : done + READ_CHUNK_BYTES])
        if not got:
            break
        done += got
        if progress is not None:
            progress(done, total)
    return done


def _read_halves(f, view):
    """`_read_chunks(f, view, None)` with the second half of the file read on a thread (for
    a large file: `_in_halves`): the kernel's work of a read, a fault and a zeroed
    page per 4 KiB of fresh memory, then the copy from the page cache, is most of it, and
    runs on both cores so (45 MB: 20 -> 13 ms; 185 MB: 78 -> 51). Bytes read; a file cut
    short while it is read reads as short as its first half says, the rest zeroed again."""
    total = len(view)
    fd, half = f.fileno(), total // 2 // mmap.PAGESIZE * mmap.PAGESIZE

    def read(start, stop):
        at = start
        while at < stop:
            got = os.preadv(fd, [view[at : min(at + READ_CHUNK_BYTES, stop)]], at)
            if not got:
                break
            at += got
        return at - start

    with ThreadPoolExecutor(max_workers=1) as pool:
        second = pool.submit(read, half, total)
        first = read(0, half)
        rest = second.result()  # (an OSError of the thread is raised here)
    if first < half:
        view[first : half + rest] = bytes(half + rest - first)
        return first
    return half + rest


def _in_halves(size) -> bool:
    """Whether `_read_halves` reads a file of `size` bytes on two threads."""
    return size >= _PARALLEL_READ_BYTES and hasattr(os, "preadv") and (os.cpu_count() or 1) >= 2


#: Files from which `_read_halves` reads on two threads.
_PARALLEL_READ_BYTES = 8 * 2**20


def read_padded(path, progress=None):
    """The decompressed bytes of a profile file in a padded buffer: (buffer, size).

    Read straight into a buffer with room for `wire.PADDING` zero bytes, so a
    185 MB profile is not copied once more; in two halves on two threads without
    `progress` (`_read_halves`). `progress`, if given, is called as
    `progress(bytes_read, file_size)` before the first chunk and after each
    (`READ_CHUNK_BYTES`); for a gzip file these are compressed bytes, and the
    decompression follows the last call. Raises ProfileError.
    """
    fs.check_regular(path)  # (a folder, a FIFO or a device is refused before it is opened)
    with os_errors(path), open(Path(path), "rb") as f:
        head = f.read(2)
        f.seek(0)
        size = os.fstat(f.fileno()).st_size
        if str(path).endswith(".gz") or head == b"\x1f\x8b":
            packed = bytearray(size)
            got = _read_chunks(f, memoryview(packed), progress)
            return wire.padded(inflate(memoryview(packed)[:got], path))
        _check_fits(path, size)
        halves = progress is None and _in_halves(size)
        buf = zeroed_buffer(size + wire.PADDING, populate=not halves)  # (each half its own faults)
        view = memoryview(buf)[:size]
        got = _read_halves(f, view) if halves else _read_chunks(f, view, progress)
        return buf, got


def zeroed_buffer(n, populate=True):
    """A writable buffer of `n` zero bytes for a file's contents, its memory mapped in
    up front where Linux can (`MAP_POPULATE`: one call maps every page, where a `bytearray`
    zero-fills them, a fault a page: 10 instead of 13 ms for 32 MB on these machines; each
    first touch of a page costs more than the reading that follows). `populate=False`:
    mapped as it is first written (two threads reading a half each share the faults).
    Anonymous memory, not the file's: a file cut short while it is read only reads short."""
    flag = getattr(mmap, "MAP_POPULATE", 0)
    if n < _MAPPED_BYTES or (populate and not flag) or not hasattr(mmap, "MAP_ANONYMOUS"):
        return bytearray(n)
    populate = flag if populate else 0
    try:
        return mmap.mmap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS | populate)
    except (OSError, ValueError, OverflowError):  # (no room to map: the bytearray says so)
        return bytearray(n)


#: Files from which `zeroed_buffer` maps its memory (below, a bytearray costs less).
_MAPPED_BYTES = 1 << 20


#: A .gz profile may inflate to at most this many times its size (real ones: 5-20x), and
#: at least to INFLATE_FLOOR_BYTES; past that it is refused before taking the memory.
MAX_INFLATE_RATIO = 200
INFLATE_FLOOR_BYTES = 256 * 2**20
_INFLATE_STEP = 16 * 2**20
_XSPACE_FIRST_BYTES = (0x0A, 0x12, 0x1A, 0x22)  # planes, errors, warnings, hostnames


def inflate(packed, path):
    """The bytes inside a gzip file (every member), inflated a step at a time: refused
    (ProfileError) as soon as they do not start like an XSpace, or grow past
    MAX_INFLATE_RATIO times the file (a gzip bomb) or past what memory can hold."""
    cap = max(MAX_INFLATE_RATIO * len(packed), INFLATE_FLOOR_BYTES)
    free = available_memory_bytes()
    if free is not None:
        cap = min(cap, int(free / MEMORY_PER_FILE_BYTE))
    room = address_space_room()
    if room is not None:  # a limit on this process (ulimit -v, a container): the growing
        cap = min(cap, room // 3)  # buffer may briefly need twice its size while it moves
    out = bytearray()
    rest = bytes(packed)
    try:
        while rest:
            inflater = zlib.decompressobj(wbits=31)  # one gzip member
            chunk = inflater.decompress(rest, _INFLATE_STEP)
            while True:
                if len(out) + len(chunk) > cap:  # before the memory is taken
                    raise ProfileError(
                        path,
                        f"would inflate past {cap / 2**20:,.0f} MiB ({len(packed):,} bytes "
                        f"compressed): a damaged file or a gzip bomb; refused",
                    )
                out += chunk
                if out and out[0] not in _XSPACE_FIRST_BYTES:
                    raise ProfileError(
                        path, f"holds a gzip stream that is not an XSpace profile (first byte {out[0]:#04x})"
                    )
                if inflater.eof or not inflater.unconsumed_tail and not chunk:
                    break
                chunk = inflater.decompress(inflater.unconsumed_tail, _INFLATE_STEP)
            if not inflater.eof:
                raise ProfileError(path, "is not a valid gzip file (cut short: it ends before its gzip stream)")
            rest = inflater.unused_data.lstrip(b"\0")  # another member may follow (padding zeros: none)
    except zlib.error as e:
        raise ProfileError(path, f"is not a valid gzip file ({e})") from None
    except MemoryError:
        raise ProfileError(
            path, f"inflates to more than this process can hold ({len(out) / 2**20:,.0f} MiB so far)"
        ) from None
    return out


# Opening needs the file's bytes plus its columns: about 4x the file on the
# profiles measured (746 MB for 185 MB). Refuse up front what cannot fit,
# rather than have the kernel killed for memory half-way.
MEMORY_PER_FILE_BYTE = 1.5


def available_memory_bytes():
    """Memory the OS can give this process now, or None if unknown.

    Linux's MemAvailable counts the page cache it can reclaim; free pages
    alone (sysconf's AVPHYS_PAGES) would refuse files that fit once the cache
    is full, so that is only the fallback.
    """
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def address_space_room():
    """Bytes this process may still map under its address-space limit (`RLIMIT_AS`: `ulimit
    -v`, some containers and job schedulers), or None without a limit (or where unknown)."""
    try:
        import resource

        limit = resource.getrlimit(resource.RLIMIT_AS)[0]
        if limit == resource.RLIM_INFINITY:
            return None
        with open("/proc/self/statm") as f:
            used = int(f.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")
        return max(limit - used, 0)
    except (ImportError, OSError, ValueError, IndexError, AttributeError):
        return None


#: What each plane and line costs in memory while a file opens, beyond its bytes (measured
#: with the compiled loops and numpy alike: a million planes without lines peak at 1.4 KB
#: each, a million empty lines at 0.5 KB each). A small file may hold millions of either.
MEMORY_PER_PLANE_BYTES = 1536
MEMORY_PER_LINE_BYTES = 512

#: Planes and lines found are checked against free memory once they would take this much
#: (a check reads /proc/meminfo: not once per plane of a file of 20,000).
_OBJECTS_CHECKED_BYTES = 32 * 2**20


class _ObjectBudget:
    """Counts the planes and lines a file's parse is about to make, and refuses (a
    ProfileError naming the file) once those not yet checked need more memory than is
    free, before they are made: `_check_fits` budgets the file's bytes, this its objects,
    which a hostile file can make 60x its size."""

    def __init__(self, path):
        self.path = path
        self.planes = self.lines = 0  # all so far
        self._pending = 0  # bytes of those not checked yet

    def add(self, planes=0, lines=0):
        self.planes += planes
        self.lines += lines
        self._pending += planes * MEMORY_PER_PLANE_BYTES + lines * MEMORY_PER_LINE_BYTES
        if self._pending < _OBJECTS_CHECKED_BYTES:
            return
        need, self._pending = self._pending, 0
        free = [x for x in (available_memory_bytes(), address_space_room()) if x is not None]
        if free and need > min(free):
            raise ProfileError(
                self.path,
                f"is too large to open here: its {self.planes:,} planes and {self.lines:,} lines so far need "
                f"about {need / 2**20:,.0f} MiB more in memory, and {min(free) / 2**20:,.0f} MiB is free",
            )


def _check_fits(path, size):
    free = available_memory_bytes()
    if free is not None and size * MEMORY_PER_FILE_BYTE > free:
        raise ProfileError(
            path,
            f"is too large to open here: {size / 2**30:.1f} GiB, and opening needs more than "
            f"{MEMORY_PER_FILE_BYTE:g}x that in memory; {free / 2**30:.1f} GiB is free",
        )


def read_xspace(path, data=None, progress=None, cache=None):
    """Read one `.xplane.pb[.gz]` file into an XSpaceFile, or raise ProfileError.

    `data` may hold the file's (decompressed) bytes already, e.g. read through
    fsspec from a remote logdir. `progress(bytes_read, file_size)` hears how
    the reading goes (see `read_padded`); decoding follows its last call.

    A local file's decoded columns are kept in the column cache (`column_cache`;
    `cache=False`, or `XPROF_WIDGETS_CACHE=0`, turns it off): opening the same
    file again, in any process, maps them instead of decoding, and reads the
    file's bytes only when a tool asks for stats.
    """
    with _made_in_bulk():
        return _read_xspace(path, data, progress, cache)


@contextmanager
def _made_in_bulk():
    """Python's cycle collector paused while a file's planes and lines (and a cache
    entry's manifest) are made: it would walk every object made so far again and again
    (a file of a million planes opened in 14 s, 4.6 s without; from the column cache 10.9 s,
    4.8 s without). What is made here is freed by reference counts or kept; the collector
    runs again after."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def _read_xspace(path, data, progress, cache):
    key = None
    if data is None and column_cache.enabled(cache):
        try:
            key = column_cache.source_key(path)
        except OSError:
            key = None  # read_padded says what is wrong with the path
        found = column_cache.load(key) if key is not None and column_cache.cacheable(key) else None
        space = _from_cache(path, key, found) if found is not None else None
        if space is not None:
            if progress is not None:
                progress(key["size"], key["size"])
            return space
    buf, size = read_padded(path, progress) if data is None else wire.padded(data)
    if not size:
        raise ProfileError(path, "is empty (0 bytes): the profiler wrote nothing")
    space = XSpaceFile(path, buf, size)
    try:
        _parse_space(space, buf, size)
    except wire.WireError as e:
        raise ProfileError(path, f"is not a readable XSpace profile: {e}") from None
    if not space.planes:
        raise ProfileError(path, "holds no planes: not an XSpace profile, or an empty capture")
    if key is not None and column_cache.cacheable(key) and column_cache.unchanged(path, key):
        space._source_key = key  # what tools' derived data in the cache is stored under
        column_cache.store_later(space, key)
    return space


def _from_cache(path, key, found):
    """An XSpaceFile from a column cache entry (`column_cache.load`), or None if the
    entry does not make one (then the file is decoded as if there were no entry)."""
    manifest, arrays, shells = found
    try:
        space = XSpaceFile(path, None, int(manifest["data_size"]), source_key=key)
        space.errors = [str(x) for x in manifest["errors"]]
        space.warnings = [str(x) for x in manifest["warnings"]]
        space.hostnames = [str(x) for x in manifest["hostnames"]]
        rows = {}
        for described in manifest["planes"]:
            a, b = described["shell"]
            message = schema.XPlane.FromString(shells[a:b].tobytes())
            plane = Plane(space=space, id=message.id, name=message.name, message=message)
            for ln in described["lines"]:
                first, end = (int(x) for x in ln["rows"])
                line = Line(
                    plane=plane,
                    id=int(ln["id"]),
                    name=str(ln["name"]),
                    display_id=int(ln["display_id"]),
                    display_name=str(ln["display_name"]),
                    timestamp_ns=int(ln["timestamp_ns"]),
                    duration_ps=int(ln["duration_ps"]),
                    start_ps=arrays["start_ps"][first:end],
                    event_duration_ps=arrays["duration_ps"][first:end],
                    metadata_id=arrays["metadata_id"][first:end],
                    record_pos=arrays["record_pos"][first:end],
                    stats_at=arrays["stats_at"][first:end],
                )
                plane.lines.append(line)
                rows[id(line)] = (first, end)
            space.planes.append(plane)
    except Exception:  # a damaged entry (protobuf's DecodeError, wrong types...)
        return None
    if not space.planes:
        return None
    series = {column: pd.Series(arrays[column], copy=False) for column, _ in _EVENT_COLUMNS}
    space._columns = (series, rows)
    return space


def _parse_space(space, buf, size):
    plane_ranges = []
    i = 0
    while i < size:
        if buf[i] == _PLANE_TAG:  # a run of planes: found as events are (a file may hold a million)
            found, i = wire.find_records(buf, space.data, i, size, _PLANE_TAG)
            starts, stops = wire.record_payloads(space.data, found, size)
            plane_ranges.extend(zip(starts.tolist(), stops.tolist()))
            continue
        number, wt, _, s, e = wire.field_at(buf, i, size)
        if number not in _SPACE_FIELDS or wt != wire.LENGTH:
            raise wire.WireError(f"field {number} (wire type {wt}) is not part of an XSpace: this is not a profile")
        if number == 1:  # (a tag written in more bytes than it needs)
            plane_ranges.append((s, e))
        else:
            getattr(space, _SPACE_FIELDS[number]).append(bytes(buf[s:e]).decode("utf-8", "replace"))
        i = e
    budget = _ObjectBudget(space.path)
    budget.add(planes=len(plane_ranges))
    for s, e in plane_ranges:
        space.planes.append(_parse_plane(space, buf, s, e, budget))


#: A plane of at most this many bytes is first given to protobuf whole: one without lines
#: (a file may hold a million such) needs no walk of its fields.
_SMALL_PLANE_BYTES = 4096


def _parse_plane(space, buf, start, end, budget):
    if end - start <= _SMALL_PLANE_BYTES:
        try:
            message = schema.XPlane.FromString(bytes(buf[start:end]))
        except Exception:  # (the walk below says what is wrong)
            message = None
        if message is not None and not len(message.lines):  # the shell the walk would make
            return Plane(space=space, id=message.id, name=message.name, message=message)
    # Every field but the lines, as one small XPlane: fields follow one another, so each
    # one's bytes (tag included) run from the previous one's end to its own; runs of
    # neighbouring non-line fields are copied as one slice.
    # A run of metadata entries is stepped over by `wire.scan_run`'s tight loop, not
    # field by field through `wire.walk`.
    # A run of lines (a plane may hold a million) is found by `wire.find_records`, not
    # field by field.
    shell = []
    line_ranges = []  # per line, or per run of lines: (payload starts, payload ends)
    data = space.data
    field_at = run_at = start
    while field_at < end:
        if buf[field_at] in _PLANE_MAP_TAGS:
            field_at = wire.scan_run(buf, field_at, end, buf[field_at], [])
            continue
        if buf[field_at] == _LINE_TAG:
            if run_at < field_at:
                shell.append(bytes(buf[run_at:field_at]))
            found, field_at = wire.find_records(buf, data, field_at, end, _LINE_TAG)
            line_ranges.append(wire.record_payloads(data, found, end))
            run_at = field_at
            continue
        number, wt, _, s, e = wire.field_at(buf, field_at, end)
        if number == _PLANE_LINES and wt == wire.LENGTH:  # (a tag written in more bytes)
            line_ranges.append((np.array([s], np.int64), np.array([e], np.int64)))
            if run_at < field_at:
                shell.append(bytes(buf[run_at:field_at]))
            run_at = e
        field_at = e
    if run_at < field_at:
        shell.append(bytes(buf[run_at:field_at]))
    try:
        message = schema.XPlane.FromString(b"".join(shell))
    except Exception as error:  # protobuf raises DecodeError subclasses of Exception
        raise wire.WireError(f"plane metadata does not decode ({error})") from None
    plane = Plane(space=space, id=message.id, name=message.name, message=message)
    if line_ranges:
        starts, ends = (np.concatenate(x) for x in zip(*line_ranges))
        budget.add(lines=len(starts))
        plane.lines.extend(_parse_lines(plane, buf, starts, ends))
    return plane


#: Lines of at most this many payload bytes are read together when they have no events.
_SMALL_LINE_BYTES = 256
_LINE_TAG = (_PLANE_LINES << 3) | wire.LENGTH  # 0x1a


def _parse_lines(plane, buf, starts, ends):
    """The Lines of payloads `starts[i]:ends[i]`, in order. Small lines without events (a
    plane may hold a million) are read all at once by `_small_line_fields`; any other line,
    and a small one in another layout, by `_parse_line`, which is the rule (and names what
    is wrong with a line)."""
    small = np.flatnonzero(ends - starts <= _SMALL_LINE_BYTES)
    if len(small) < 2:
        return _parsed_lines(plane, buf, starts.tolist(), ends.tolist())
    ok, ints, texts = _small_line_fields(plane.space.data, starts[small], ends[small])
    # `_check_times` of a line without events, for all: one outside the times a profile
    # holds is left to `_parse_line`, which says so.
    timestamp = ints[_LINE_TIMESTAMP_NS].view(np.int64)
    limit = _TIME_LIMIT_PS // 1000
    ok &= (timestamp <= limit) & (timestamp >= -limit)
    quick = np.full(len(starts), -1, np.int64)  # line -> its row among the small ones read, -1: none
    quick[small[ok]] = np.flatnonzero(ok)
    line_id, timestamp, duration, display_id = (
        ints[k].view(np.int64).tolist() for k in (_LINE_ID, _LINE_TIMESTAMP_NS, _LINE_DURATION_PS, _LINE_DISPLAY_ID)
    )
    name, display_name = texts[_LINE_NAME].tolist(), texts[_LINE_DISPLAY_NAME].tolist()
    out: list = []
    walked = []  # (position in out, start, end) of the lines `_parse_line` reads
    for s, e, k in zip(starts.tolist(), ends.tolist(), quick.tolist()):
        if k < 0:
            walked.append((len(out), s, e))
            out.append(None)
        else:  # (as `_line` makes a line without events)
            out.append(
                Line(
                    plane=plane,
                    id=line_id[k],
                    name=name[k],
                    display_id=display_id[k],
                    display_name=display_name[k],
                    timestamp_ns=timestamp[k],
                    duration_ps=duration[k],
                    **_NO_EVENTS,
                )
            )
    if walked:
        at, s_, e_ = zip(*walked)
        for i, line in zip(at, _parsed_lines(plane, buf, s_, e_)):
            out[i] = line
    return out


def _parsed_lines(plane, buf, starts, ends):
    """`_parse_line` of each payload `starts[i]:ends[i]`, in order. Where several lines hold
    at least `_PARALLEL_LINE_BYTES` together, two at a time on threads, longest first:
    finding a line's records is a walk from record to record, one core's work, and the
    compiled loops release the GIL, so while one thread walks the Python tracer's line
    (half the events of a JAX run) the other reads the rest. An error is the one the first
    bad line in file order gives, as one at a time would."""
    if len(starts) < 2 or sum(e - s for s, e in zip(starts, ends)) < _PARALLEL_LINE_BYTES:
        return [_parse_line(plane, buf, s, e) for s, e in zip(starts, ends)]
    longest_first = sorted(range(len(starts)), key=lambda i: starts[i] - ends[i])
    with ThreadPoolExecutor(max_workers=min(2, os.cpu_count() or 1)) as pool:
        futures = {i: pool.submit(_parse_line, plane, buf, starts[i], ends[i]) for i in longest_first}
        wait(futures.values())
    return [futures[i].result() for i in range(len(starts))]


#: Lines that hold at least this many bytes together are read two at a time (`_parsed_lines`).
_PARALLEL_LINE_BYTES = 4 * 2**20


def _small_line_fields(data, starts, ends):
    """The fields of many small XLine payloads at once, read as `_parse_line` reads them
    (any order, the last value of a field winning, other fields skipped): (ok, {field:
    uint64 per line}, {field: str per line}). A line is not ok (left to `_parse_line`)
    where it has events, a field of the wrong wire type, a varint of ten bytes (a negative
    number), or anything a walk would reject: only lines read exactly as it reads them are
    ok."""
    n = len(starts)
    ok = np.ones(n, bool)
    ints = {k: np.zeros(n, np.uint64) for k in _LINE_INT_FIELDS}
    bounds = {k: (np.zeros(n, np.int64), np.zeros(n, np.int64)) for k in _LINE_TEXT_FIELDS}
    pos = starts.copy()
    todo = np.flatnonzero(pos < ends)
    while len(todo):
        p, stop = pos[todo], ends[todo]
        tag, width = wire.varints(data, p)
        number, wire_type = (tag >> np.uint64(3)).astype(np.int64), (tag & np.uint64(7)).astype(np.int64)
        p = p + width
        nxt = np.full(len(todo), -1, np.int64)  # -1: not read here
        bad = (width >= 10) | (number == 0) | (number == _LINE_EVENTS)
        bad |= np.isin(number, _LINE_INT_FIELDS) & (wire_type != wire.VARINT)
        bad |= np.isin(number, _LINE_TEXT_FIELDS) & (wire_type != wire.LENGTH)
        at = np.flatnonzero(wire_type == wire.VARINT)
        if len(at):
            value, w = wire.varints(data, p[at])
            nxt[at] = np.where(w < 10, p[at] + w, -1)
            for k in _LINE_INT_FIELDS:
                hit = at[number[at] == k]
                ints[k][todo[hit]] = value[number[at] == k]
        at = np.flatnonzero(wire_type == wire.LENGTH)
        if len(at):
            size, w = wire.varints(data, p[at])
            body = p[at] + w
            # Compared unsigned before it is added: a length of 2**63 or more never wraps.
            fits = (w < 10) & (size <= np.maximum(stop[at] - body, 0).astype(np.uint64))
            end = body + np.where(fits, size, np.uint64(0)).astype(np.int64)
            nxt[at] = np.where(fits, end, -1)
            for k in _LINE_TEXT_FIELDS:
                hit = number[at] == k
                bounds[k][0][todo[at[hit]]], bounds[k][1][todo[at[hit]]] = body[hit], end[hit]
        for wt, size in ((wire.FIXED64, 8), (wire.FIXED32, 4)):
            at = np.flatnonzero(wire_type == wt)
            nxt[at] = p[at] + size
        bad |= (nxt < 0) | (nxt > stop)
        ok[todo[bad]] = False
        pos[todo] = np.where(bad, stop, nxt)
        todo = todo[~bad & (nxt < stop)]
    texts = {}
    for k, (s, e) in bounds.items():
        codes, values = wire.string_codes(data, s, e)
        texts[k] = values[codes]
    return ok, ints, texts


def _check_times(plane, line, timestamp_ns, offset_ps, duration_ps):
    """Raise WireError when a line's times cannot be real: negative durations, or a
    timestamp, offset or duration past `_TIME_LIMIT_PS` (int64 sums would overflow)."""
    where = f"line {line!r} of plane {plane.name!r}"
    if abs(timestamp_ns) * 1000 > _TIME_LIMIT_PS:
        raise wire.WireError(f"{where} starts at {timestamp_ns} ns: not a time a profile holds")
    if not len(offset_ps):
        return
    if int(duration_ps.min()) < 0:
        n = int((duration_ps < 0).sum())
        raise wire.WireError(f"{where} has {n} event(s) of negative duration ({int(duration_ps.min())} ps)")
    far = max(int(duration_ps.max()), int(offset_ps.max()), -int(offset_ps.min()))
    if far > _TIME_LIMIT_PS:
        raise wire.WireError(f"{where} has events {far} ps long or away: not times a profile holds")


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


# Times are int64 picoseconds. Every start (the line's timestamp plus an event's offset)
# and every end (plus its duration) must fit: a file whose times cannot is damaged.
_TIME_LIMIT_PS = 2**61  # 26 days: three such terms still add up inside int64
_LINE_INT_FIELDS = (_LINE_ID, _LINE_TIMESTAMP_NS, _LINE_DURATION_PS, _LINE_DISPLAY_ID)
_LINE_TEXT_FIELDS = (_LINE_NAME, _LINE_DISPLAY_NAME)


def _parse_line(plane, buf, start, end):
    fields = {}
    runs = []
    data = plane.space.data
    narrow = plane.space.size < _INT32_POSITIONS
    i = start
    while i < end:
        if buf[i] == _EVENT_TAG:
            found, i = wire.find_records(buf, data, i, end, _EVENT_TAG, narrow=narrow)
            runs.append(found)
            continue
        number, wt, value, s, e = wire.field_at(buf, i, end)
        i = e
        if number in _LINE_INT_FIELDS and wt != wire.VARINT or number in _LINE_TEXT_FIELDS and wt != wire.LENGTH:
            raise wire.WireError(f"a line of plane {plane.name!r} has field {number} of wire type {wt}: not an XLine")
        if wt == wire.VARINT:
            fields[number] = _signed(value)
        elif wt == wire.LENGTH:
            fields[number] = bytes(buf[s:e]).decode("utf-8", "replace")
    if not runs:  # a line without events (a file may hold a million): shared empty columns
        return _line(plane, fields, **_NO_EVENTS)
    record_pos = runs[0] if len(runs) == 1 else np.concatenate(runs)
    heads = wire.event_heads(data, record_pos, end, narrow)
    if heads is not None:
        metadata_id, start_ps, duration_ps, stats_at, record_pos = heads
        return _line(
            plane,
            fields,
            start_ps=start_ps,
            event_duration_ps=duration_ps,
            metadata_id=metadata_id,
            record_pos=record_pos,
            stats_at=stats_at,
        )
    ev = wire.decode_head(data, record_pos, (_EVENT_METADATA_ID, _EVENT_OFFSET_PS, _EVENT_DURATION_PS), end=end)
    # Offset from each event's tag to its stats (after fields 1-3): small, so
    # stored narrow; stats decoding starts there instead of re-reading 1-3.
    stats_at = _narrow(ev.rest, np.uint16)
    start_ps = ev.value(_EVENT_OFFSET_PS)  # the line's timestamp is added by _line
    duration_ps = ev.value(_EVENT_DURATION_PS)
    metadata_id = ev.value(_EVENT_METADATA_ID)
    del ev  # its other event-sized arrays go before the narrow copies below are made
    return _line(
        plane,
        fields,
        start_ps=start_ps,
        event_duration_ps=duration_ps,
        metadata_id=_narrow(metadata_id),
        record_pos=_narrow(record_pos, fits=narrow),
        stats_at=stats_at,
    )


def _read_only(dtype):
    out = np.zeros(0, dtype)
    out.flags.writeable = False
    return out


# One set of columns for every line without events (read-only, as the column cache's).
_NO_EVENTS = {
    "start_ps": _read_only(np.int64),
    "event_duration_ps": _read_only(np.int64),
    "metadata_id": _read_only(np.int32),
    "record_pos": _read_only(np.int32),
    "stats_at": _read_only(np.uint16),
}


def _line(plane, fields, start_ps, event_duration_ps, **columns):
    """The Line of a plane from its fields and its event columns (`start_ps`: the events'
    offsets, made absolute here once their times are checked)."""
    timestamp_ns = int(fields.get(_LINE_TIMESTAMP_NS, 0))
    name = str(fields.get(_LINE_NAME, ""))
    _check_times(plane, name, timestamp_ns, start_ps, event_duration_ps)
    if len(start_ps):
        start_ps += timestamp_ns * 1000
    return Line(
        plane=plane,
        id=int(fields.get(_LINE_ID, 0)),
        name=name,
        display_id=int(fields.get(_LINE_DISPLAY_ID, 0)),
        display_name=str(fields.get(_LINE_DISPLAY_NAME, "")),
        timestamp_ns=timestamp_ns,
        duration_ps=int(fields.get(_LINE_DURATION_PS, 0)),
        start_ps=start_ps,
        event_duration_ps=event_duration_ps,
        **columns,
    )


#: Record positions are kept as int32 in files smaller than this: a position plus its
#: stats offset (`stats_at`, below 2**16) or a record's few header bytes still fit.
_INT32_POSITIONS = 2**31 - 2**17


def _narrow(values, dtype=np.int32, fits=None):
    """`values` (int64) as `dtype` when they fit (`fits`, else checked): event-sized
    columns of a 50 M event file are 200 MB smaller each at int32, 300 MB at uint16."""
    if fits is None:
        info = np.iinfo(dtype)
        fits = not len(values) or (int(values.min()) >= info.min and int(values.max()) <= info.max)
    return values.astype(dtype) if fits else values


def _codes_dtype(n):
    """The integer type pandas keeps Categorical codes in for `n` categories."""
    return np.int8 if n < 2**7 - 1 else np.int16 if n < 2**15 - 1 else np.int32 if n < 2**31 - 1 else np.int64


def _categorical(codes, categories):
    """A Categorical from codes already in range (-1: missing): no validation pass, no strings per row."""
    dtype = pd.CategoricalDtype(pd.Index(categories, dtype=object))
    return pd.Categorical.from_codes(
        codes.astype(_codes_dtype(len(categories)), copy=False), dtype=dtype, validate=False
    )


def _per_line(labels, counts):
    """A Categorical with `labels[i]` repeated `counts[i]` times (sorted categories)."""
    categories, inverse = np.unique(np.asarray(labels, dtype=object).astype(str), return_inverse=True)
    codes = np.repeat(inverse.astype(_codes_dtype(len(categories))), counts)
    return _categorical(codes, categories)


def _name_codes(selected, total):
    """The `name` column of `selected` [(space, plane, line, first, end)]: a Categorical of
    the names used, built from each plane's metadata id -> name table, not from strings.

    Two passes over the ids: one counts which ids occur (names no event uses are left
    out, as a column of strings would), one looks up every event's code in a table."""
    planes = {}  # id(plane) -> (plane, [lines])
    for _, plane, line, _, _ in selected:
        planes.setdefault(id(plane), (plane, []))[1].append(line)
    used_names, used_ids = [], {}
    for key, (plane, lines) in planes.items():
        ids, codes, categories = plane._name_lookup
        dense = len(ids) and 0 <= ids[0] and ids[-1] < 1 << 22  # small ids: counted, not sorted
        if dense:
            seen = np.zeros(int(ids[-1]) + 1, bool)
            for line in lines:
                seen[np.bincount(line.metadata_id, minlength=len(seen)) > 0] = True
            used = seen[ids]
        else:
            used = np.isin(ids, np.concatenate([line.metadata_id for line in lines]))
        used_ids[key] = (ids[used], codes[used], dense)
        used_names.append(np.asarray(categories, dtype=object)[codes[used]])
    union = np.unique(np.concatenate(used_names + [np.zeros(0, object)]))
    out = np.empty(total, np.int32)
    at = 0
    for _, plane, line, _, _ in selected:
        ids, codes, dense = used_ids[id(plane)]
        to_union = np.searchsorted(union, np.asarray(plane._name_lookup[2], dtype=object)[codes]).astype(np.int32)
        mid = line.metadata_id
        part = out[at : at + len(mid)]
        at += len(mid)
        if dense:  # every id of the plane's events is in its metadata (see Plane.event_metadata)
            table = np.full(int(plane._name_lookup[0][-1]) + 1, -1, np.int32)
            table[ids] = to_union
            np.take(table, mid, out=part)
        else:
            pos = np.clip(np.searchsorted(ids, mid), 0, max(len(ids) - 1, 0))
            part[:] = np.where(ids[pos] == mid, to_union[pos], -1) if len(ids) else -1
    return _categorical(out, union)


def event_frame(spaces, plane=None, line=None):
    """Events of `spaces` as a DataFrame: host, plane, line, name (Categoricals), start_ps
    (absolute), duration_ps, metadata_id (int64). `plane` / `line` keep events of the plane
    and line (name or display name) so named; lines without events are left out.

    Columns of the events of one host, when they are its events in file order (all of
    them, one plane, one line), share the host's arrays (`XSpaceFile.event_columns`):
    nothing is copied, and a write to the DataFrame copies first (copy-on-write).
    Categoricals are built from codes (per-line repeats, metadata-id tables), never from
    a string per event.
    """
    selected = []  # (space, plane, line, first row, end row)
    for space in spaces:
        _, rows = space.event_columns()
        for p in space.planes:
            if plane is not None and p.name != plane:
                continue
            for ln in p.lines:
                if line is not None and line not in (ln.name, ln.display_name):
                    continue
                if len(ln):
                    selected.append((space, p, ln, *rows[id(ln)]))
    if not selected:
        empty = {k: pd.Series(dtype=object) for k in ("host", "plane", "line", "name")}
        return pd.DataFrame({**empty, **{k: pd.Series(dtype=np.int64) for k, _ in _EVENT_COLUMNS}})
    counts = np.array([end - first for *_, first, end in selected], dtype=np.int64)
    total = int(counts.sum())
    columns = {
        "host": _per_line([s.host for s, *_ in selected], counts),
        "plane": _per_line([p.name for _, p, *_ in selected], counts),
        "line": _per_line([ln.title for _, _, ln, *_ in selected], counts),
        "name": _name_codes(selected, total),
    }
    one_run = len({id(s) for s, *_ in selected}) == 1 and all(
        selected[i][3] == selected[i - 1][4] for i in range(1, len(selected))
    )
    for column, _ in _EVENT_COLUMNS:
        if one_run:  # a slice of the host's Series: shared, and tracked by copy-on-write
            series = selected[0][0].event_columns()[0][column]
            columns[column] = series.iloc[selected[0][3] : selected[-1][4]].reset_index(drop=True)
        else:
            columns[column] = np.concatenate(
                [space.event_columns()[0][column].to_numpy()[a:b] for space, _, _, a, b in selected]
            )
    return pd.DataFrame(columns, copy=False)
