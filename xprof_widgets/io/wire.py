"""Protocol-buffer wire format, decoded column-wise with numpy.

An XSpace holds a few planes and lines but millions of events. Parsing events
into message objects costs about 0.7 µs each in Python (7 s for 10 M), so the
events are read straight from the bytes instead:

1. `walk` steps through the few structural fields (planes, lines, metadata),
   checking wire types and bounds so a bad file fails with a clear message.
2. `scan_run` finds where each event of a line starts. Length-prefixed records
   can only be found one after another; this is the one sequential step, a
   tight loop that touches two bytes per event.
3. `decode_fields` decodes the fields of all those records at once, one numpy
   pass per field position (an event has a handful of fields).

Positions are byte offsets into one `uint8` array holding the whole file,
padded with zeros so that vectorised reads may run a few bytes past a record.

Where the install compiled `_wire.c` (`native.available()`), `find_records`,
`decode_head` and the events' stats of `decode_keyed_by_key` run its C loops for
the usual layouts and hand everything else back to the code here (docs/reading.md).
"""

import os
from array import array
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from . import native

VARINT, FIXED64, LENGTH, FIXED32 = 0, 1, 2, 5
PADDING = 16  # zero bytes after the data: a 10-byte varint read never runs off


class WireError(ValueError):
    """The bytes are not the protobuf message we expected (message says where)."""


def padded(data):
    """`data` as a uint8 array followed by PADDING zero bytes (bytes, length)."""
    size = len(data)
    buf = bytearray(size + PADDING)
    buf[:size] = data
    return buf, size


def read_varint(buf, i, end):
    """One varint at byte `i`: (value, next position)."""
    result = shift = 0
    while True:
        if i >= end:
            raise WireError(f"truncated varint at byte {i}")
        b = buf[i]
        i += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, i
        shift += 7
        if shift > 63:
            raise WireError(f"varint longer than 10 bytes at byte {i}")


def walk(buf, start, end):
    """Yield (field number, wire type, value, start, end) for each field of a message.

    For VARINT the value is the integer; for LENGTH, `start:end` is the payload;
    for fixed fields, `start:end` holds the raw little-endian bytes.
    """
    i = start
    while i < end:
        field = field_at(buf, i, end)
        yield field
        i = field[4]


def field_at(buf, i, end):
    """The field whose tag is at byte `i` (< end), as `walk` yields it; where the next one
    starts is its end (a VARINT's value ends where its bytes do). No generator: a caller
    reading one field of each of a million small messages (empty planes) notices."""
    tag_at = i
    tag, i = read_varint(buf, i, end)
    number, wire_type = tag >> 3, tag & 7
    if number == 0:
        raise WireError(f"field number 0 at byte {tag_at}")
    if wire_type == VARINT:
        value, j = read_varint(buf, i, end)
        return number, wire_type, value, i, j
    if wire_type == LENGTH:
        length, i = read_varint(buf, i, end)
        if i + length > end:
            raise WireError(f"truncated: field {number} at byte {tag_at} needs {length} bytes, {end - i} left")
        return number, wire_type, None, i, i + length
    if wire_type in (FIXED64, FIXED32):
        width = 8 if wire_type == FIXED64 else 4
        if i + width > end:
            raise WireError(f"truncated fixed-width field {number} at byte {tag_at}")
        return number, wire_type, None, i, i + width
    raise WireError(f"wire type {wire_type} (field {number}) at byte {tag_at}")


def scan_run(buf, i, end, tag_byte, out, limit=None):
    """Append to `out` the position of each record in a run of LENGTH fields.

    The run is consecutive records that all start with the one-byte tag
    `tag_byte`; returns the position after the last one (or the first record
    position at or past `limit`, if given).
    """
    append = out.append
    limit = end if limit is None else min(limit, end)
    while i < limit and buf[i] == tag_byte:
        append(i)
        length = buf[i + 1]
        if length < 0x80:
            i += 2 + length
        else:
            length, j = read_varint(buf, i + 1, end)
            i = j + length
    if i > end:
        raise WireError(f"truncated: record at byte {out[-1]} runs past byte {end}")
    return i


CHUNK_BYTES = 1 << 12  # bytes of a run each parallel walker starts in
#: Walkers stepped together: a run is walked 16 MB at a time, so the walkers' tables stay
#: tens of MB however long the run (all at once, a 600 MB line needed GBs of fresh
#: memory, and the page faults of fresh memory cost more than the walking).
BLOCK_CHUNKS = 1 << 12


def find_records(buf, data, start, end, tag_byte, narrow=False):
    """Positions of the records in a run of LENGTH fields with one-byte tag `tag_byte`.

    The run starts at `start` and ends at `end` or at the first record boundary
    whose byte is another tag. Returns (int64 positions, end of the run); with `narrow`
    (the caller knows positions fit int32), the compiled walk writes int32 ones.

    Finding length-prefixed records is a chain: each one's length says where
    the next starts. Small runs are walked with `scan_run`. Large runs are cut
    into blocks of BLOCK_CHUNKS chunks of CHUNK_BYTES, walked block after block; in a
    block, one walker per chunk steps through its chunk,
    all walkers at once in numpy, so the Python loop runs (records / walkers)
    times, not once per record. A walker may start off the true chain (on a
    byte inside a record); when it lands on a byte that is not the tag it
    resynchronises at the next tag byte, and it soon falls onto the true chain.
    The result is checked: chunk j's walk must contain the position where
    chunk j-1's walk left off; chunks where it does not are walked exactly.
    """
    if native.available():
        found = native.find_records(data, start, end, tag_byte, narrow)
        if found is not None:
            return found
    pieces, here = [], start
    while True:  # a block of BLOCK_CHUNKS chunks at a time, each carrying on from the last
        limit = min(end, here + BLOCK_CHUNKS * CHUNK_BYTES)
        if limit - here < 16 * CHUNK_BYTES:
            out = array("q")
            here = scan_run(buf, here, end, tag_byte, out, limit=limit)
            found = _positions(out)
        else:
            found, here = _walk_block(buf, data, here, limit, end, tag_byte)
        pieces.append(found)
        if here < limit or here >= end or buf[here] != tag_byte:  # the run ended
            return (pieces[0] if len(pieces) == 1 else np.concatenate(pieces)), here


def _walk_block(buf, data, start, limit, end, tag_byte):
    """`find_records` for the records that start in `start:limit` (the message ends at
    `end`): (their positions, the position after the last one)."""
    bounds = np.arange(start, limit, CHUNK_BYTES, dtype=np.int64)
    limits = np.append(bounds[1:], limit)
    pos = bounds.copy()
    pos[1:] = _next_tag(data, bounds[1:], limits[1:], tag_byte)
    steps, breaks = [], []
    live = np.flatnonzero(pos < limits)
    while live.size:
        p = pos[live]
        steps.append((live, p))
        length, width = varints(data, p + 1)
        # A length past the message (a walker off the chain reads any bytes; a damaged
        # file may hold 2**63 or more) leaves the chunk: clamped before it is added, so
        # that no walker wraps around to a position behind it.
        nxt = p + 1 + width + np.minimum(length, np.uint64(end + 1)).astype(np.int64)
        inside = nxt < limits[live]
        off = inside & (data[np.minimum(nxt, end)] != tag_byte)
        if off.any():  # not on a tag: inside a record, or the run ended here
            breaks.append((live[off], p[off], nxt[off]))
            nxt[off] = _next_tag(data, nxt[off], limits[live][off], tag_byte)
        pos[live] = nxt
        live = live[nxt < limits[live]]
    # Walkers' positions in file order: by walker, then by step.
    grid = np.full((len(steps), len(bounds)), -1, dtype=np.int64)
    for row, (w, q) in enumerate(steps):
        grid[row, w] = q
    del steps
    flat = grid.T.ravel()
    del grid
    real = flat >= 0
    visited = flat[real]
    walker = np.repeat(np.arange(len(bounds)), real.reshape(len(bounds), -1).sum(axis=1))
    del flat, real
    exits = pos
    if breaks:
        break_walker, break_from, break_to = (np.concatenate(x) for x in zip(*breaks))
        order = np.argsort(break_walker, kind="stable")
        break_walker, break_from, break_to = break_walker[order], break_from[order], break_to[order]
    else:
        break_walker = break_from = break_to = np.zeros(0, np.int64)
    n = len(bounds)
    first = np.searchsorted(walker, np.arange(n + 1))  # walker j: visited[first[j]:first[j+1]]
    bfirst = np.searchsorted(break_walker, np.arange(n + 1))

    def on_walk(chunks, entries):
        """Whether each chunk's walker visited the given entry position."""
        at = np.minimum(np.searchsorted(visited, entries), len(visited) - 1)
        return (visited[at] == entries) & (walker[at] == chunks)

    # Chunk j is on the true chain if its walk contains the position where the
    # chain enters it: chunk j-1's exit, or, when a record spans a whole chunk,
    # the entry carried over from before it.
    entry = _entries(start, exits, limits)
    ok = on_walk(np.arange(n), entry) | (entry >= limits)
    ok[0] = True
    pieces, j, here = [], 0, start
    while j < n:
        if here != entry[j]:  # after an exact walk: carry its exit forward
            suffix = _entries(here, exits[j:], limits[j:])
            changed = np.flatnonzero(suffix != entry[j:]) + j
            entry[j:] = suffix
            ok[changed] = on_walk(changed, entry[changed]) | (entry[changed] >= limits[changed])
        if here >= limits[j]:  # one record spans this whole chunk
            j += 1
            continue
        if ok[j]:
            # Chunks j .. r-1 are on the chain: take them all at once.
            nxt_bad = np.flatnonzero(~ok[j + 1 :])
            r = j + 1 + int(nxt_bad[0]) if nxt_bad.size else n
            e = entry[j:r]
            seg, seg_walker = visited[first[j] : first[r]], walker[first[j] : first[r]]
            bw = break_walker[bfirst[j] : bfirst[r]]
            ended = (break_from[bfirst[j] : bfirst[r]] >= e[bw - j]) & (e[bw - j] < limits[bw])
            if ended.any():  # a walker on the chain met another tag: the run ends
                stop = int(break_to[bfirst[j] : bfirst[r]][ended].min())
                pieces.append(seg[(seg >= e[seg_walker - j]) & (seg < stop)])
                return np.concatenate(pieces), stop
            pieces.append(seg[seg >= e[seg_walker - j]])
            last = r - 1
            here = int(entry[last]) if entry[last] >= limits[last] else int(exits[last])
            j = r
        else:  # no walker met the chain in chunk j: walk it exactly
            out = array("q")
            stop = scan_run(buf, here, end, tag_byte, out, limit=int(limits[j]))
            pieces.append(_positions(out))
            if stop < limits[j]:
                return np.concatenate(pieces), stop
            here, j = stop, j + 1
    return np.concatenate(pieces), _check_end(here, end)


def _entries(first_entry, exits, limits):
    """Where the chain enters each chunk, given where it enters the first.

    Chunk i+1 is entered at chunk i's exit, unless chunk i is spanned by one
    record (entered at or past its limit): then the entry carries over.
    """
    entry = np.concatenate([[first_entry], exits[:-1]]).astype(np.int64)
    while True:
        exit_eff = np.where(entry >= limits, entry, exits)
        carried = np.concatenate([[first_entry], exit_eff[:-1]])
        if np.array_equal(carried, entry):
            return entry
        entry = carried


def _positions(out):
    return np.frombuffer(out, dtype=np.int64).copy() if len(out) else np.zeros(0, np.int64)


def _check_end(stop, end):
    if stop > end:
        raise WireError(f"truncated: a record runs past byte {end}")
    return stop


def _next_tag(data, pos, limits, tag_byte, window=64):
    """For each position, the first byte at or after it equal to `tag_byte` (else its limit)."""
    pos = pos.copy()
    todo = np.arange(len(pos))
    while todo.size:
        win = data[np.minimum(pos[todo, None] + np.arange(window), len(data) - 1)] == tag_byte
        hit = win.any(axis=1)
        pos[todo[hit]] += win[hit].argmax(axis=1)
        pos[todo[~hit]] += window
        todo = todo[~hit]
        done = pos[todo] >= limits[todo]
        todo = todo[~done]
    return np.minimum(pos, limits)


def varints(data, pos):
    """Decode the varint at each position: (uint64 values, byte lengths)."""
    pos = np.asarray(pos, dtype=np.int64)
    b = data[pos]
    more = b >= 0x80
    if not more.any():  # tags and short lengths: one byte each
        return b.astype(np.uint64), np.ones(len(pos), dtype=np.int64)
    values = (b & 0x7F).astype(np.uint64)
    lengths = np.ones(len(pos), dtype=np.int64)
    todo = np.flatnonzero(more)
    p = pos[todo]
    for shift in range(7, 70, 7):
        p += 1
        b = data[p]
        values[todo] |= (b & 0x7F).astype(np.uint64) << np.uint64(shift)
        lengths[todo] += 1
        more = b >= 0x80
        if not more.any():
            return values, lengths
        todo, p = todo[more], p[more]
    raise WireError(f"varint longer than 10 bytes at byte {p[0] - 9}")


def skip_fields(data, pos, stops, strict=True):
    """The field whose tag is at each position (pos < stops), any number and wire type:
    (field numbers as int64, wire types, where each field's value starts, where each
    field ends). A LENGTH field's payload is [value start, end). A group (no profile message
    has one) or a field that runs past its stop raises WireError; with `strict` False it is
    marked in a fifth array, `bad` (its number then 0, its end its stop), instead."""
    pos = np.asarray(pos, dtype=np.int64)
    stops = np.asarray(stops, dtype=np.int64)
    tag, size = data[pos], data[pos + 1]
    if ((tag & 0x87) == LENGTH).all() and (size < 0x80).all():  # usual: short LENGTH fields
        tag, body, size = tag.astype(np.uint64), pos + 2, size.astype(np.uint64)
        wire_type = np.full(len(pos), LENGTH, dtype=np.int64)
        bad = np.zeros(len(pos), bool)
    else:
        tag, width = varints(data, pos)
        body = pos + width
        wire_type = (tag & np.uint64(7)).astype(np.int64)
        size = np.zeros(len(pos), dtype=np.uint64)
        bad = ~np.isin(wire_type, (VARINT, FIXED64, LENGTH, FIXED32))
        for wt in np.flatnonzero(np.bincount(wire_type, minlength=8)).tolist():
            m = np.flatnonzero(wire_type == wt)
            if wt == VARINT:
                size[m] = varints(data, body[m])[1].astype(np.uint64)
            elif wt in (FIXED64, FIXED32):
                size[m] = 8 if wt == FIXED64 else 4
            elif wt == LENGTH:
                length, w = varints(data, body[m])
                body[m] += w
                size[m] = length
    # Compared unsigned, before adding: a length near 2**64 must not wrap around.
    room = np.maximum(stops - body, 0).astype(np.uint64)
    bad |= (size > room) | (body > stops)
    if bad.any():
        at = int(pos[np.argmax(bad)])
        if strict:
            wt = int(wire_type[np.argmax(bad)])
            if wt not in (VARINT, FIXED64, LENGTH, FIXED32):
                raise WireError(f"wire type {wt} (a group) at byte {at}: not in a profile")
            raise WireError(f"truncated: the field at byte {at} runs past its record")
        size[bad], body[bad] = 0, stops[bad]
    number = np.where(bad, 0, (tag >> np.uint64(3)).astype(np.int64))
    out = (number, wire_type, body, body + size.astype(np.int64))
    return out if strict else (*out, bad)


def _rest_clear(data, pos, stops, numbers):
    """Whether [pos, stops) of each record holds none of the fields `numbers` (walked field
    by field to the record's end, every wire type skipped); a record whose rest cannot be
    walked is not clear (the general decoder says what is wrong with it)."""
    clear = np.ones(len(pos), bool)
    top = max(numbers)
    wanted = np.zeros(top + 2, bool)
    wanted[list(numbers)] = True
    todo = np.flatnonzero(pos < stops)
    p, stop = pos[todo], stops[todo]
    while todo.size:
        number, _, _, nxt, bad = skip_fields(data, p, stop, strict=False)
        hit = wanted[np.clip(number, 0, top + 1)] | bad
        clear[todo[hit]] = False
        more = (nxt < stop) & ~hit
        todo, p, stop = todo[more], nxt[more], stop[more]
    return clear


def fixed(data, pos, width):
    """Little-endian fixed-width values at each position, as uint64 or uint32."""
    raw = data[np.asarray(pos, dtype=np.int64)[:, None] + np.arange(width)]
    return np.ascontiguousarray(raw).view("<u8" if width == 8 else "<u4").ravel()


def record_payloads(data, record_pos, end=None):
    """(payload start, payload end) of LENGTH records given their tag positions.

    One pass over the first length byte of all (the usual one-byte lengths), the varint
    walk only for the longer ones."""
    record_pos = np.asarray(record_pos, dtype=np.int64)
    limit = len(data) if end is None else end
    if native.available() and limit <= len(data) and data.dtype == np.uint8 and data.flags.c_contiguous:
        found = native.record_payloads(data, record_pos, limit)
        if found is not None:
            return found
    first = data[record_pos + 1]
    start = record_pos + 2
    stop = start + first
    long = np.flatnonzero(first >= 0x80)
    if len(long):
        length, width = varints(data, record_pos[long] + 1)
        start[long] = record_pos[long] + 1 + width
        # Compared unsigned before it is added: a length of 2**63 or more never wraps.
        room = np.maximum(limit - start[long], 0).astype(np.uint64)
        if (length > room).any():
            raise WireError(f"truncated: a record runs past byte {limit}")
        stop[long] = start[long] + length.astype(np.int64)
    if len(stop) and stop.max() > limit:
        raise WireError(f"truncated: a record runs past byte {limit}")
    return start, stop


class Fields:
    """Decoded fields of many records of one message type.

    `scalar[n]` is a uint64 array (raw bits, one per record, 0 where absent) for
    each scalar field number `n` asked for; `present[n]` says where it was set.
    `ranges[n]` is (owner record index, payload start, payload end) for every
    occurrence of LENGTH field `n`, in file order.
    """

    def __init__(self, count):
        self.count = count
        self.scalar = {}
        self.present = {}
        self.ranges = {}
        self.rest = None  # where each record's undecoded fields start (see decode_records)

    def value(self, number, dtype=np.int64):
        """Field `number` as `dtype` (int64 for proto int64, float64 for double)."""
        raw = self.scalar.get(number)
        if raw is None:
            return np.zeros(self.count, dtype=dtype)
        return raw.view(dtype) if np.dtype(dtype).itemsize == 8 else raw.astype(dtype)


def decode_strings(data, starts, stops, decode=lambda b: b.decode("utf-8", "replace")):
    """Decode the byte ranges `starts[i]:stops[i]` into an object array of str."""
    codes, values = string_codes(data, starts, stops, decode)
    return values[codes]


_FEW_STRINGS = 8


def string_codes(data, starts, stops, decode=lambda b: b.decode("utf-8", "replace")):
    """The byte ranges `starts[i]:stops[i]` as (codes, values): range i decodes to
    `values[codes[i]]`, and each distinct byte string is decoded once.

    Names repeat (op names, shapes, region types), so equal ranges are found
    first, vectorised: ranges are grouped by length, each group's bytes viewed
    as fixed-size records and made unique; a few ranges, in a dict. (Two byte strings
    may decode to equal values, e.g. through "replace": `values` is then not unique.)
    """
    starts = np.asarray(starts, dtype=np.int64)
    lengths = np.asarray(stops, dtype=np.int64) - starts
    if len(lengths) and (lengths.min() < 0 or starts.min() < 0 or int((starts + lengths).max()) > len(data)):
        raise WireError("a string's length runs outside its record")
    if len(starts) <= _FEW_STRINGS:  # (a tiny line: numpy's grouping costs 50 µs a call)
        seen: dict = {}
        codes = np.array(
            [
                seen.setdefault(bytes(data[a:b]), len(seen))
                for a, b in zip(starts.tolist(), (starts + lengths).tolist())
            ],
            dtype=np.int64,
        )
        out = np.empty(len(seen), dtype=object)
        out[:] = [decode(raw) for raw in seen]
        return codes, out
    codes = np.zeros(len(starts), dtype=np.int64)
    values = []
    order = np.argsort(lengths, kind="stable")
    bounds = np.flatnonzero(np.diff(lengths[order])) + 1
    for group in np.split(order, bounds):
        if not len(group):
            continue
        size = int(lengths[group[0]])
        if size == 0:
            codes[group] = len(values)
            values.append(decode(b""))
            continue
        rows = np.ascontiguousarray(data[starts[group][:, None] + np.arange(size)])
        uniq, inverse = np.unique(rows.view(f"V{size}").ravel(), return_inverse=True)
        codes[group] = len(values) + inverse.ravel()
        values.extend(decode(u.tobytes()) for u in uniq)
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return codes, out


BLOCK_RECORDS = 1 << 16  # records per task on the thread pool: small blocks stay in cache


def decode_fields(data, starts, stops, scalars=(), lengths=()):
    """Decode many records of one message type at once.

    `starts`/`stops` bound each record's payload. `scalars` are the VARINT or
    fixed-width field numbers to keep, `lengths` the LENGTH field numbers whose
    payload ranges to keep; other fields are skipped. Each loop pass decodes
    the next field of every record that still has one. Protobuf writers put
    fields in number order, so a record is left once the highest field number
    asked for is passed (the rest, e.g. an event's stats, is skipped).
    """
    return _decode(data, np.asarray(starts, dtype=np.int64), np.asarray(stops, dtype=np.int64), scalars, lengths)


def decode_records(data, record_pos, scalars=(), lengths=(), end=None, rest=False):
    """`decode_fields` for LENGTH records given by the positions of their tags.

    Payload bounds are found block by block, so the whole input never needs
    a second pair of position arrays. With `rest`, `.rest` holds, per record,
    the byte offset from its tag to the first field not decoded (e.g. where an
    event's stats begin), so a later pass can start there.
    """
    return _decode(data, np.asarray(record_pos, dtype=np.int64), None, scalars, lengths, end, rest)


def event_heads(data, record_pos, end, narrow_positions):
    """An XEvent's fields 1-3 (metadata id, offset, duration) and where its stats start,
    for the event records at `record_pos` (int64, or int32 as `find_records` gives them
    with `narrow`), written straight into the line's narrow columns
    by the compiled loop: (metadata_id int32, offset_ps int64, duration_ps int64, stats_at
    uint16, record_pos: int32 where `narrow_positions`, else as given). None without the
    compiled loops, or where a record is in another layout or does not fit those types:
    `decode_head` then reads the line. The same values as `decode_head`, without its
    event-sized uint64 and flag arrays and the narrowed copies made from them: fresh memory
    as large as the line's records, whose page faults cost more than the decoding."""
    if not native.available():
        return None
    given32 = record_pos.dtype == np.int32  # (then `narrow_positions` holds: kept as they are)
    record_pos = np.ascontiguousarray(record_pos, dtype=np.int32 if given32 else np.int64)
    count = len(record_pos)
    out = (
        np.empty(count, np.int32),
        np.empty(count, np.int64),
        np.empty(count, np.int64),
        np.empty(count, np.uint16),
        np.empty(count, np.int32) if narrow_positions and not given32 else None,
    )
    stop = len(data) if end is None else end

    def block(c):
        part = slice(c, c + BLOCK_RECORDS)
        mine = tuple(None if x is None else x[part] for x in out)
        return native.event_heads(data, record_pos[part], stop, mine)

    if not all(_map_blocks(count, block)):
        return None
    return out if out[4] is not None else (*out[:4], record_pos)


def decode_head(data, record_pos, numbers, end=None):
    """`decode_records(data, record_pos, scalars=numbers, end=end, rest=True)` for records
    whose first fields are VARINT fields `numbers` (ascending, below 16, each may be
    absent: protobuf leaves out zeros), e.g. an event's metadata id, offset and duration.

    Each field is read with one unaligned 64-bit load; its varint's end is the first
    byte without the high bit, found with bit arithmetic, not byte by byte. The rest of
    each record is walked to its end: it must hold none of `numbers` again. Records in
    any other layout (fields out of order or repeated, other wire types, varints longer
    than 8 bytes such as negative numbers) are decoded by the general decoder, read to
    their end as protobuf reads them (any order, the last value of a field winning), and
    their `rest` is where their payload starts (the fields not asked for may be anywhere).
    """
    record_pos = np.asarray(record_pos, dtype=np.int64)
    count = len(record_pos)
    out = Fields(count)
    for n in numbers:
        out.scalar[n] = np.zeros(count, dtype=np.uint64)
        out.present[n] = np.zeros(count, dtype=bool)
    out.rest = np.zeros(count, dtype=np.int64)
    words = _words(data)

    def block(c):
        part = slice(c, c + BLOCK_RECORDS)
        if native.available():
            got = native.decode_head(data, record_pos[part], numbers, len(data) if end is None else end)
            if got is not None:
                values, present, rest, ok = got
                for k, n in enumerate(numbers):
                    out.scalar[n][part], out.present[n][part] = values[k], present[k]
                out.rest[part] = rest
                odd = np.flatnonzero(~ok)
                if len(odd):
                    s, e = record_payloads(data, record_pos[part][odd], end)
                    _decode_odd(c + odd, s, e)
                return
        s, e = record_payloads(data, record_pos[part], end)
        p = s.copy()
        ok = np.ones(len(s), bool)
        for n in numbers:
            w = words[p]
            has = ((w & np.uint64(0xFF)) == ((n << 3) | VARINT)) & (p < e)
            value, size = _leading_varint(w >> np.uint64(8))
            ok &= ~has | (size > 0)
            out.scalar[n][part] = np.where(has, value, 0)
            out.present[n][part] = has
            p = p + np.where(has, 1 + size, 0)
        ok &= p <= e
        # The rest must hold none of these fields again (one that cannot be walked goes to
        # the general decoder, which says what is wrong).
        usual = np.flatnonzero(ok)
        ok[usual] = _rest_clear(data, p[usual], e[usual], numbers)
        out.rest[part] = np.minimum(p, e) - record_pos[part]
        odd = np.flatnonzero(~ok)
        if len(odd):  # the general decoder for these
            _decode_odd(c + odd, s[odd], e[odd])

    def _decode_odd(rows, s, e):
        tmp = Fields(len(rows))
        for n in numbers:
            tmp.scalar[n] = np.zeros(len(rows), dtype=np.uint64)
            tmp.present[n] = np.zeros(len(rows), dtype=bool)
        _decode_block(data, s, e, numbers, (), tmp, 0, to_end=True)
        for n in numbers:
            out.scalar[n][rows], out.present[n][rows] = tmp.scalar[n], tmp.present[n]
        out.rest[rows] = s - record_pos[rows]

    _map_blocks(count, block)
    return out


def _leading_varint(w):
    """(value, byte length) of the varint in the low bytes of `w`; length 0 if it is
    longer than the 7 bytes `w` holds (the caller falls back)."""
    stops = ~w & np.uint64(0x0080808080808080)  # bytes that end a varint
    lowest = stops & (~stops + np.uint64(1))
    size = (np.frexp(lowest.astype(np.float64))[1].astype(np.int64) + 1) // 8  # bit 8k+7 -> k+1 bytes
    size[stops == 0] = 0
    return _pack7(w & _LOW_BYTES[size]), size


def _map_blocks(count, block, size=None):
    """`block(c)` for each block start c of `count` records (`size`, else BLOCK_RECORDS,
    each), in order; on the thread pool when there is more than one block."""
    cuts = range(0, count, size or BLOCK_RECORDS)
    if len(cuts) <= 1:
        return [block(c) for c in cuts]
    with ThreadPoolExecutor(max_workers=min(len(cuts), os.cpu_count() or 1)) as pool:
        return list(pool.map(block, cuts))


def repeated_run(data, starts, stops, number):
    """Payload ranges of a repeated LENGTH field `number` (< 16) that opens each record's rest.

    `starts[i]:stops[i]` is the part of record i from where the field's run
    begins (e.g. an event's stats, after the fields read at open). Returns
    `(owner, start, stop)` ordered by owner, then as in the file: what
    `decode_fields(data, starts, stops, lengths=(number,)).ranges[number]`
    gives, with less work per element (the tag is one known byte). Blocks of
    records go to the thread pool. Other fields among the elements (a layout protobuf
    allows, writers do not produce: the elements split into several runs) are skipped,
    each record's part walked to its end.
    """
    starts = np.asarray(starts, dtype=np.int64)
    stops = np.asarray(stops, dtype=np.int64)

    def block(c):
        part = slice(c, c + BLOCK_RECORDS)
        return _repeated_block(data, starts[part], stops[part], number, c)

    found = _map_blocks(len(starts), block)
    if not found:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    return tuple(np.concatenate(x) for x in zip(*found))


def _repeated_block(data, starts, stops, number, offset):
    """`repeated_run` on one block of records (owners from `offset`)."""
    tag_byte = (number << 3) | LENGTH
    todo = np.flatnonzero(starts < stops)
    p, stop = starts[todo], stops[todo]
    steps = []  # (owners, payload starts, payload ends) of the k-th element of each record
    count = np.zeros(len(starts), dtype=np.int64)  # elements per record
    while todo.size:
        tag = data[p]
        other = tag != tag_byte
        while other.any():  # other fields: skipped (rare), until an element or the end
            at = np.flatnonzero(other)
            p[at] = skip_fields(data, p[at], stop[at])[3]
            more = p < stop
            todo, p, stop = todo[more], p[more], stop[more]
            if not todo.size:
                break
            tag = data[p]
            other = tag != tag_byte
        if not todo.size:
            break
        size = data[p + 1]
        if (size < 0x80).all():  # usual: payloads under 128 bytes, one-byte lengths
            body = p + 2
            end = body + size
        else:
            size, width = varints(data, p + 1)
            body = p + 1 + width
            end = body + size.astype(np.int64)
        if (end > stop).any() or (end < body).any():
            at = todo[np.argmax((end > stop) | (end < body))]
            raise WireError(f"truncated: field runs past the record at byte {starts[at]}")
        # Element number count[r] of each record r here.
        steps.append((todo, count[todo].copy(), body, end))
        count[todo] += 1
        more = end < stop
        todo, p, stop = todo[more], end[more], stop[more]
    # Element k of record r goes to first[r] + k: the output is in (owner, file) order, no sort.
    first = np.cumsum(count) - count
    total = int(count.sum())
    # Positions as int32 where the data allows (half the bytes scattered and read after).
    pos_type = np.int32 if len(data) < 2**31 - 2**17 else np.int64
    owner = np.empty(total, dtype=np.int32 if offset + len(starts) < 2**31 else np.int64)
    start = np.empty(total, dtype=pos_type)
    stop = np.empty(total, dtype=pos_type)
    for owners, k, body, end in steps:
        at = first[owners] + k
        owner[at], start[at], stop[at] = owners + offset, body, end
    return owner, start, stop


class KeyRecords:
    """The records of one key, from `decode_keyed_by_key`, in the order they came: `owner`
    (int32, or int64 past 2**31 owners), `number` (int8: the value's field, 0 none), `raw`
    (uint64: a scalar's bits) and, if any of them has a LENGTH value, `text_start` and
    `text_stop` (int64 payload ranges, 0 where a record has none); else both None."""

    __slots__ = ("owner", "number", "raw", "text_start", "text_stop")

    def __init__(self, owner, number, raw, text_start=None, text_stop=None):
        self.owner, self.number, self.raw = owner, number, raw
        self.text_start, self.text_stop = text_start, text_stop

    def __len__(self):
        return len(self.owner)

    @classmethod
    def joined(cls, parts):
        """`parts` (KeyRecords) end to end, as one (the part itself when there is one); a
        part without LENGTH values gets 0 ranges where another has some."""
        if len(parts) == 1:
            return parts[0]
        cols = [np.concatenate([getattr(p, f) for p in parts]) for f in ("owner", "number", "raw")]
        if any(p.text_start is not None for p in parts):
            for f in ("text_start", "text_stop"):
                cols.append(
                    np.concatenate(
                        [np.zeros(len(p), np.int64) if p.text_start is None else getattr(p, f) for p in parts]
                    )
                )
        return cls(*cols)


def decode_keyed_by_key(
    data, starts, stops, scalars, lengths, repeated=None, owner=None, keys=None, heads=None, density=1.0
):
    """Decode records that hold a key (varint field 1) and one value, one of several
    fields (a protobuf `oneof`, e.g. XStat's metadata id and value), split by key:
    {key: `KeyRecords`}.

    `scalars` are the value field numbers of VARINT or FIXED64 type, `lengths`
    those of LENGTH type (all below 16). `starts[i]:stops[i]` bound record i, owned
    by `owner[i]` (default i); with `repeated` (a field number), they bound a run of
    that repeated LENGTH field instead (what `repeated_run` reads), its elements are
    the records and the run's index their owner.

    Writers put field 1 first and the value last, so a value's varint ends at
    the record's end: its length is known, and its bytes are read eight at a
    time (one unaligned 64-bit load) and their 7-bit groups packed with a few
    shifts, instead of byte by byte. Records in another layout (fields in
    another order, extra fields, no value) are read field by field (`walk`);
    where a record sets the value twice, the last one wins, as in protobuf.
    `keys` (a bool array indexed by key), where given, names the keys wanted:
    the others' values are not decoded (their records may still come back when
    their layout is not the usual one; a caller that filters drops them).

    `heads` (with `repeated`, `starts` and `stops` None): (record positions, offsets)
    of LENGTH records (an event's) whose run starts `offset` bytes after the record's tag
    and ends with the record; the bounds are found block by block, so no array of every
    record's bounds is made. `density`: about what fraction of those records hold a run
    (a Python tracer's line: a tenth): blocks of fewer runs hold more records.

    What a table of stats by name wants, made as the records are decoded: each
    block of records is decoded and sorted by key on the thread pool (small, in
    cache) and the pieces of a key joined once, so no array of every record (nor
    an order of them all) is ever made.
    """
    if repeated is None:
        owner = np.arange(len(starts)) if owner is None else np.asarray(owner)
        owner = owner.astype(np.int32 if len(owner) == 0 or owner.max() < 2**31 else np.int64, copy=False)
    if heads is not None and repeated is not None and native.available():
        found = _split_events(data, heads, scalars, lengths, repeated, keys, density)
        if found is not None:
            return found
    blocks = _keyed_blocks(data, starts, stops, scalars, lengths, repeated, owner, keys, heads, density)
    return {key: KeyRecords.joined([b.pop(key) for b in blocks if key in b]) for key in sorted(set().union(*blocks))}


def _value_kinds(scalars, lengths):
    """Tag byte -> the field number of a value in the usual layout (0: none), for the
    value fields `scalars` (VARINT or FIXED64) and `lengths` (LENGTH)."""
    kinds = np.zeros(256, np.int8)
    for n in scalars:
        kinds[(n << 3) | VARINT] = kinds[(n << 3) | FIXED64] = n
    for n in lengths:
        kinds[(n << 3) | LENGTH] = n
    return kinds


def _wanted(keys):
    """`keys` (a bool array by key, or None: all) as the compiled loops take it."""
    return None if keys is None else np.ascontiguousarray(keys, dtype=bool).view(np.uint8)


def _step(repeated, density):
    """Records a block: runs hold a few records each (`repeated`); where about `density` of
    the records hold a run, blocks hold more, about as many runs a block."""
    if repeated is None:
        return BLOCK_RECORDS
    return int(_least_step() / min(max(density, 1 / 64), 1.0))


def _least_step():
    """Records a block of runs holds at least (where every record holds one)."""
    return max(BLOCK_RECORDS // 4, 1)


def one_block(count):
    """Whether `count` records holding runs (events, their stats) are one block whatever
    their density: no sample of the density is needed to size the blocks."""
    return count <= _least_step()


#: `_split_events` reads keys (stat metadata ids) below this many, where all are asked for.
SPLIT_KEYS = 4096


def _split_events(data, heads, scalars, lengths, repeated, keys, density):
    """`decode_keyed_by_key` of events' stats (`heads`) by the compiled loop written straight
    into arrays per key (`xw_split_stats`): the events' stats counted per key block by block,
    then each block's written at its rows. No array of every record (50 bytes each), no sort
    by key, no pieces joined: a Python tracer's line's allocator stats (815,200) came to
    8,300 page faults that way, 2,500 this way. None where a sample of the events says
    some but fewer than half of their stats are asked for (a line of more than one block),
    a stat is in another layout or has a key past SPLIT_KEYS, or the bytes need the numpy
    code's look (then the blocks read them)."""
    pos, at = heads
    count = len(pos)
    if not count:
        return {}
    kinds, wanted = _value_kinds(scalars, lengths), _wanted(keys)
    kmax = len(wanted) if wanted is not None else SPLIT_KEYS
    tag = (repeated << 3) | LENGTH
    step = _step(repeated, density)
    wide = count >= 2**31
    if wanted is not None and one_block(count) and not set(scalars) & set(lengths):
        # A line of one block and a few keys asked for (a GPU line's kernel stats): one
        # walk writing into rows for as many stats of each key as there are events.
        found = _split_in_one_walk(data, pos, at, tag, kinds, wanted, wide, lengths)
        if found is not None:
            return found
    if wanted is not None and not one_block(count):
        # Two walks over the stats pay where most of them are read (all of a line's, or the
        # memory profile's of allocator events); where a few keys are (the grouping's of a
        # Python tracer's line: a quarter), one walk into rows sorted after costs less.
        # A line of one block is counted, then written (or read in one walk, above): two
        # samples of scattered events cost about as much as a walk of its events in file
        # order. Where it holds none of the keys (most host threads' `tf_op`), the count
        # says so; a sample without any walks it too (a few rows found after all are
        # written in the second walk).
        sample = np.linspace(0, count - 1, min(count, 512)).astype(np.int64)
        seen = []
        for mask, width in ((wanted, kmax), (None, SPLIT_KEYS)):
            counts, texts = np.zeros(width, np.int64), np.zeros(width, np.int64)
            got = native.split_stats(data, pos[sample], at[sample], tag, 0, kinds, mask, width,
                                     counts, texts, wide, None, None)  # fmt: skip
            seen.append(int(counts.sum()) if got >= 0 else -1)
        if min(seen) < 0 or 0 < 2 * seen[0] < seen[1]:
            return None

    def counted(c):
        counts, texts = np.zeros(kmax, np.int64), np.zeros(kmax, np.int64)
        got = native.split_stats(data, pos[c : c + step], at[c : c + step], tag, c, kinds, wanted, kmax,
                                 counts, texts, wide, None, None)  # fmt: skip
        return (counts, texts) if got >= 0 else None

    per_block = _map_blocks(count, counted, step)
    if any(b is None for b in per_block):
        return None
    counts = np.stack([b[0] for b in per_block])
    totals, texts = counts.sum(axis=0), np.stack([b[1] for b in per_block]).sum(axis=0)
    present = np.flatnonzero(totals).tolist()
    if not present:  # (every stat in the usual layout, none of a wanted key)
        return {}
    owner_type = np.int64 if wide else np.int32
    ptrs = np.zeros((kmax, 5), np.int64)
    out = {}
    for k in present:
        n = int(totals[k])
        text = (np.zeros(n, np.int64), np.zeros(n, np.int64)) if texts[k] else (None, None)
        out[k] = KeyRecords(np.empty(n, owner_type), np.empty(n, np.int8), np.empty(n, np.uint64), *text)
        r = out[k]
        ptrs[k] = [a.ctypes.data if a is not None else 0 for a in (r.owner, r.number, r.raw, *text)]
    starts = np.cumsum(counts, axis=0) - counts  # each block's first row per key

    def filled(c):
        cursor = starts[c // step].copy()
        ends = cursor + counts[c // step]
        got = native.split_stats(data, pos[c : c + step], at[c : c + step], tag, c, kinds, wanted, kmax,
                                 ends, None, wide, ptrs, cursor)  # fmt: skip
        return got == counts[c // step].sum() and bool((cursor == starts[c // step] + counts[c // step]).all())

    if not all(_map_blocks(count, filled, step)):
        return None
    return {k: out[k] for k in present}


#: `_split_in_one_walk` reads at most this many keys (rows for each are made up front).
ONE_WALK_KEYS = 16


def _split_in_one_walk(data, pos, at, tag, kinds, wanted, wide, lengths):
    """`_split_events` of one block of events (`pos`, `at`) and a few `wanted` keys in one
    walk (`xw_split_stats` writing from row 0 of each key's arrays, as many rows as events:
    pages not written are never touched), where counting first walked them twice: the same
    records. None where the compiled loop declines (a stat in another layout, a key past
    the table, or more stats of a key than events: then they are counted first)."""
    count = len(pos)
    kmax = len(wanted)
    keys = np.flatnonzero(wanted).tolist()
    if len(keys) > ONE_WALK_KEYS:
        return None
    owner_type = np.int64 if wide else np.int32
    # Each key's five columns in one buffer, the 8-byte ones first (aligned): raw, text
    # start, text stop, owner, value field number; one address asked per key.
    widths = (8, 8, 8, np.dtype(owner_type).itemsize, 1)
    at_column = np.cumsum((0, *widths[:-1])) * count
    ptrs = np.zeros((kmax, 5), np.int64)
    rows = {}
    for k in keys:
        rows[k] = buffer = np.empty(sum(widths) * count, np.uint8)
        ptrs[k] = buffer.ctypes.data + at_column[[3, 4, 0, 1, 2]]  # (in `xw_split_stats`' order)
    ends = np.zeros(kmax, np.int64)
    ends[keys] = count
    cursor = np.zeros(kmax, np.int64)
    if native.split_stats(data, pos, at, tag, 0, kinds, wanted, kmax, ends, None, wide, ptrs, cursor) < 0:
        return None
    is_length = np.zeros(256, bool)
    is_length[list(lengths)] = True
    out = {}
    for k in keys:
        n = int(cursor[k])
        if not n:
            continue
        buffer = rows[k]
        raw, start, stop, owner, number = (
            buffer[a : a + n * w].view(t)
            for a, w, t in zip(at_column, widths, (np.uint64, np.int64, np.int64, owner_type, np.int8))
        )
        if 2 * n < count:  # (rows of a key that few events hold are copied out: the rest is let go)
            raw, start, stop, owner, number = (a.copy() for a in (raw, start, stop, owner, number))
        text = is_length[number]  # LENGTH values: their bounds written, others' not
        if text.any():
            start[~text] = 0
            stop[~text] = 0
            out[k] = KeyRecords(owner, number, raw, start, stop)
        else:
            out[k] = KeyRecords(owner, number, raw)
    return out


def _split_by_key(owner, key, number, raw, text):
    """One block's records by key: {key: `KeyRecords`}."""
    n = len(key)
    if n == 0:
        return {}
    small = key.max() < 2**16
    order = np.argsort(key.astype(np.uint16) if small else key, kind="stable")  # radix sort on 16 bits
    sorted_key = key[order]
    first = np.flatnonzero(np.concatenate([[True], sorted_key[1:] != sorted_key[:-1]]))
    bounds = np.append(first, n).tolist()
    owner, number, raw = owner[order], number[order], raw[order]
    rows, text_start, text_stop = text
    if len(rows):
        starts_ = np.zeros(n, np.int64)
        stops_ = np.zeros(n, np.int64)
        starts_[rows], stops_[rows] = text_start, text_stop
        has = np.zeros(n, bool)
        has[rows] = True
        starts_, stops_, has = starts_[order], stops_[order], has[order]
    out = {}
    for k, a, b in zip(sorted_key[first].tolist(), bounds[:-1], bounds[1:]):
        span = slice(a, b)
        texts = (starts_[span], stops_[span]) if len(rows) and has[span].any() else (None, None)
        out[k] = KeyRecords(owner[span], number[span], raw[span], *texts)
    return out


def _keyed_blocks(data, starts, stops, scalars, lengths, repeated, owner, keys=None, heads=None, density=1.0):
    """The blocks of `decode_keyed_by_key`, each decoded and split by key (`_split_by_key`)
    on the thread pool; their results in order. `owner`: the records' owners (no
    `repeated`), else None; `keys`, `heads`, `density`: see `decode_keyed_by_key`."""
    if heads is None:
        starts = np.asarray(starts, dtype=np.int64)
        stops = np.asarray(stops, dtype=np.int64)
        count = len(starts)
    else:
        count = len(heads[0])
    words = _words(data)
    kinds, wanted = _value_kinds(scalars, lengths), _wanted(keys)
    step = _step(repeated, density if heads is not None else 1.0)
    # `native.event_stats`' room for a block's elements, a guess (counted where it is short).
    room = 16 * _least_step() + 1024
    owner_type = np.int32 if count < 2**31 else np.int64

    def block(c):
        if heads is None:
            s, e = starts[c : c + step], stops[c : c + step]
        else:
            if repeated is not None and native.available():
                pos, at = heads[0][c : c + step], heads[1][c : c + step]
                got = native.event_stats(data, pos, at, (repeated << 3) | LENGTH, c, kinds, wanted, room)
                if got is not None:
                    return _split_by_key(*_native_keyed(data, got, scalars, lengths, owner_type))
            pos = np.asarray(heads[0][c : c + step], dtype=np.int64)
            _, e = record_payloads(data, pos)
            s = pos + heads[1][c : c + step]
        own = None if owner is None else owner[c : c + step]
        if repeated is not None and native.available():
            got = native.keyed_stats(data, s, e, (repeated << 3) | LENGTH, c, kinds, wanted)
            if got is not None:
                return _split_by_key(*_native_keyed(data, got, scalars, lengths, owner_type))
        if repeated is not None:
            found = _repeated_block(data, s, e, repeated, c)
            if found is None:  # an unusual layout: the general decoder
                found = decode_fields(data, s, e, lengths=(repeated,)).ranges[repeated]
                found = (found[0] + c, found[1], found[2])
            own, s, e = found
            own = own.astype(owner_type)
        kept, *decoded = _keyed_block(data, words, kinds, s, e, scalars, lengths, keys)
        return _split_by_key(own if kept is None else own[kept], *decoded)

    return _map_blocks(count, block, step)


def _words(data):
    """`data` as overlapping little-endian 64-bit words, one starting at every byte
    (`_words(data)[i]` is bytes i..i+7): an unaligned 8-byte load per element."""
    return np.ndarray(shape=(max(len(data) - 7, 0),), dtype="<u8", buffer=data, strides=(1,))


_LOW_BYTES = np.array([(1 << (8 * k)) - 1 for k in range(8)] + [(1 << 64) - 1], dtype=np.uint64)
_HIGH_BITS = np.uint64(0x8080808080808080)


def _pack7(w):
    """The 7-bit groups of the (up to 8) varint bytes in `w` (little-endian), packed."""
    w = w & np.uint64(0x7F7F7F7F7F7F7F7F)
    w = (w & np.uint64(0x007F007F007F007F)) | ((w & np.uint64(0x7F007F007F007F00)) >> np.uint64(1))
    w = (w & np.uint64(0x00003FFF00003FFF)) | ((w & np.uint64(0x3FFF00003FFF0000)) >> np.uint64(2))
    return (w & np.uint64(0x000000000FFFFFFF)) | ((w & np.uint64(0x0FFFFFFF00000000)) >> np.uint64(4))


def _keyed_block(data, words, kinds, s, e, scalars, lengths, keys=None):
    """One block of records decoded: (kept, key, number, raw, text), text = (record
    indices, payload starts, payload ends) of the LENGTH values. With `keys` (see
    `decode_keyed_by_key`) only the records of wanted keys, and those in another layout
    (their key is known once walked), are decoded: `kept` holds their indices in the
    block (None: all were)."""
    head = words[s]  # bytes: 0x08, key..., tag
    head_ok = (head & np.uint64(0xFF)) == 0x08
    key_byte = ((head >> np.uint64(8)) & np.uint64(0xFF)).astype(np.uint8)
    if (key_byte < 0x80).all():  # one-byte keys (ids below 128): no varint walk
        key = key_byte.astype(np.uint32)
        tag = ((head >> np.uint64(16)) & np.uint64(0xFF)).astype(np.uint8)
        v0 = s + 3
    else:
        key, width = varints(data, s + 1)
        tag = data[s + 1 + width]
        v0 = s + 2 + width
    ok = head_ok.copy()
    number = kinds[tag]
    wire_type = tag & 7
    size = e - v0
    w = words[v0]
    # VARINT: the value ends the record, so it has `size` bytes, the last one ending it.
    # Computed for every record (cheap vector arithmetic), kept where it applies.
    low = _LOW_BYTES[np.clip(size, 0, 8)]
    is_var = wire_type == VARINT
    ended = (w & _HIGH_BITS & low) == (_HIGH_BITS & (low >> np.uint64(8)))
    fixed64 = (wire_type == FIXED64) & (size == 8)
    ok &= (number != 0) & ((is_var & (size >= 1) & (size <= 8) & ended) | fixed64 | (wire_type == LENGTH))
    raw = np.where(is_var, _pack7(w & low), np.where(fixed64, w, np.uint64(0)))
    long = np.flatnonzero(is_var & (size > 8) & (size <= 10) & (number != 0))
    if len(long):  # 9 or 10 bytes (ids, negative int64): the 8 in `w`, then one or two more
        wl, ten, after = w[long], size[long] == 10, v0[long] + 8
        b8, b9 = data[after], data[after + 1]
        ended = np.where(ten, (b8 >= 0x80) & (b9 < 0x80), b8 < 0x80)
        raw[long] = (
            _pack7(wl)
            | ((b8 & 0x7F).astype(np.uint64) << np.uint64(56))
            | np.where(ten, (b9 & 0x01).astype(np.uint64) << np.uint64(63), np.uint64(0))
        )
        ok[long] = head_ok[long] & ((wl & _HIGH_BITS) == _HIGH_BITS) & ended
    text_rows = np.flatnonzero(ok & (wire_type == LENGTH))
    length, width = varints(data, v0[text_rows])
    text_start = v0[text_rows] + width
    text_stop = e[text_rows]  # a LENGTH value ends its record
    ok[text_rows] &= text_start + length.astype(np.int64) == text_stop
    number = np.where(ok, number, 0).astype(np.int8)
    fine = ok[text_rows]
    text = (text_rows[fine], text_start[fine], text_stop[fine])
    kept = None
    if keys is not None:
        # Only a record in the usual layout is known to hold the key read above (another
        # may set its key again further on): those of unwanted keys are left out.
        wanted = ~ok | (keys[np.minimum(key, len(keys) - 1)] & (key < len(keys)))
        if not wanted.all():
            kept = np.flatnonzero(wanted)
            new_row = np.cumsum(wanted) - 1
            keep_text = wanted[text[0]]
            text = (new_row[text[0][keep_text]], text[1][keep_text], text[2][keep_text])
            s, e, key, number, raw, ok = (x[kept] for x in (s, e, key, number, raw, ok))
    return (kept, *_walk_odd(data, s, e, key, number, raw, ok, text, scalars, lengths))


def _walk_odd(data, s, e, key, number, raw, ok, text, scalars, lengths):
    """(key, number, raw, text) of a decoded block, its records not `ok` (another layout)
    read field by field; `text` (record indices, starts, ends) of the LENGTH values read."""
    odd = np.flatnonzero(~ok)
    if len(odd):  # rare: read field by field
        key = key.astype(np.uint64)
        parts = [text]
        for i in odd.tolist():
            key[i], number[i], raw[i], a, b = _walk_keyed(data, int(s[i]), int(e[i]), scalars, lengths)
            if number[i] in lengths:
                parts.append(([i], [a], [b]))
        text_rows, text_start, text_stop = (np.concatenate(x).astype(np.int64) for x in zip(*parts))
        order = np.argsort(text_rows, kind="stable")
        text = (text_rows[order], text_start[order], text_stop[order])
    if key.dtype != np.uint32 and key.max(initial=0) < 2**32:
        key = key.astype(np.uint32)
    return key, number, raw, text


def _native_keyed(data, got, scalars, lengths, owner_type):
    """`native.keyed_stats`' records as `_split_by_key` takes them (what `_repeated_block`
    and `_keyed_block` make of the same bytes)."""
    owner, key, number, raw, rec_start, rec_stop, text_start, ok = got
    text_rows = np.flatnonzero(text_start)  # set for the LENGTH values read, 0 elsewhere
    text = (text_rows, text_start[text_rows], rec_stop[text_rows])
    decoded = _walk_odd(data, rec_start, rec_stop, key, number, raw, ok, text, scalars, lengths)
    return (owner.astype(owner_type), *decoded)


def _walk_keyed(data, s, e, scalars, lengths):
    """One record in any layout, field by field: (key, number, raw, text start, text end)."""
    key = number = raw = text_start = text_stop = 0
    for n, wt, value, a, b in walk(bytes(data[s:e]), 0, e - s):
        if n == 1 and wt == VARINT:
            key = value
        elif n in scalars:
            number, text_start, text_stop = n, 0, 0
            raw = value if wt == VARINT else int.from_bytes(bytes(data[s + a : s + b]), "little")
        elif n in lengths:
            number, raw, text_start, text_stop = n, 0, s + a, s + b
    return key, number, raw, text_start, text_stop


def _decode(data, starts, stops, scalars, lengths, end=None, want_rest=False):
    """Decode in blocks of BLOCK_RECORDS on a thread pool, into preallocated columns.

    Small blocks stay in cache and numpy releases the GIL in the work that
    matters, so both cores of a small machine work. `stops` None: `starts`
    are record tag positions.
    """
    count = len(starts)
    out = Fields(count)
    for n in scalars:
        out.scalar[n] = np.zeros(count, dtype=np.uint64)
        out.present[n] = np.zeros(count, dtype=bool)
    if want_rest:
        out.rest = np.zeros(count, dtype=np.int64)

    def block(c):
        part = slice(c, c + BLOCK_RECORDS)
        if stops is None:
            s, e = record_payloads(data, starts[part], end)
        else:
            s, e = starts[part], stops[part]
        ranges = _decode_block(data, s, e, scalars, lengths, out, c)
        if want_rest:
            out.rest[part] -= starts[part]  # _decode_block left absolute positions there
        return ranges

    found = _map_blocks(count, block)
    for n in lengths:
        parts = [f[n] for f in found if f[n] is not None]
        if parts:
            out.ranges[n] = tuple(np.concatenate(x) for x in zip(*parts))
        else:
            empty = np.zeros(0, dtype=np.int64)
            out.ranges[n] = (empty, empty, empty)
    return out


def _decode_block(data, starts, stops, scalars, lengths, out, offset, to_end=False):
    """Decode records into `out`'s columns from row `offset`; returns the LENGTH ranges found.
    Records are left once past the highest field wanted (writers put fields in number order)
    unless `to_end`: then read to their end, as protobuf reads any order."""
    scalar = {n: out.scalar[n][offset : offset + len(starts)] for n in scalars}
    present = {n: out.present[n][offset : offset + len(starts)] for n in scalars}
    found = {n: [] for n in lengths}
    last_wanted = max((*scalars, *lengths), default=0)
    repeated_last = last_wanted in lengths  # a repeated field may come again
    pos = starts.copy()
    rest = out.rest[offset : offset + len(starts)] if out.rest is not None else None
    if rest is not None:
        rest[:] = stops  # records with nothing left to decode
    todo = np.flatnonzero(pos < stops)
    while todo.size:
        p = pos[todo]
        if rest is not None:
            rest[todo] = p  # a record that stops before this field resumes here
        tag, width = varints(data, p)
        p += width
        number = (tag >> np.uint64(3)).astype(np.int64)
        wire_type = (tag & np.uint64(7)).astype(np.int64)
        nxt = np.empty_like(p)
        kinds = np.flatnonzero(np.bincount(wire_type, minlength=8))
        for wt in kinds:
            if len(kinds) == 1:  # usual: every record's next field has one type
                m, pm, owners, numbers = slice(None), p, todo, number
            else:
                m = wire_type == wt
                pm, owners, numbers = p[m], todo[m], number[m]
            if wt == VARINT:
                value, w = varints(data, pm)
                nxt[m] = pm + w
            elif wt == FIXED64 or wt == FIXED32:
                w = 8 if wt == FIXED64 else 4
                value = fixed(data, pm, w).astype(np.uint64)
                nxt[m] = pm + w
            elif wt == LENGTH:
                size, w = varints(data, pm)
                value = None
                body = pm + w
                # Compared unsigned before it is added: a length of 2**63 or more never wraps.
                if (size > np.maximum(stops[owners] - body, 0).astype(np.uint64)).any():
                    raise WireError(f"truncated: field runs past the record at byte {starts[owners[0]]}")
                nxt[m] = body + size.astype(np.int64)
                for n in found:
                    k = numbers == n
                    if k.any():
                        found[n].append((owners[k], body[k], body[k] + size[k].astype(np.int64)))
            else:
                raise WireError(f"wire type {wt} in record at byte {starts[owners[0]]}")
            if value is not None:
                lo, hi = numbers.min(), numbers.max()
                for n in scalars:
                    if n < lo or n > hi:
                        continue
                    if lo == hi:  # usual: all records are at the same field
                        scalar[n][owners] = value
                        present[n][owners] = True
                    else:
                        k = numbers == n
                        scalar[n][owners[k]] = value[k]
                        present[n][owners[k]] = True
        over = nxt > stops[todo]
        if over.any():
            raise WireError(f"truncated: field runs past the record at byte {starts[todo[over][0]]}")
        pos[todo] = nxt
        more = nxt < stops[todo]
        if not to_end:
            more &= (number < last_wanted) | ((number == last_wanted) & repeated_last)
        if rest is not None:
            done = ~more & (number <= last_wanted)  # read to the end of a wanted field
            rest[todo[done]] = nxt[done]
        todo = todo[more]
    ranges = {}
    for n, parts in found.items():
        if parts:
            owner, s, e = (np.concatenate(x) for x in zip(*parts))
            order = np.argsort(s, kind="stable")
            ranges[n] = (owner[order] + offset, s[order], e[order])
        else:
            ranges[n] = None
    return ranges


__all__ = [
    "WireError",
    "padded",
    "read_varint",
    "walk",
    "field_at",
    "scan_run",
    "varints",
    "fixed",
    "record_payloads",
    "decode_fields",
    "decode_records",
    "decode_head",
    "decode_strings",
    "string_codes",
    "decode_keyed_by_key",
    "KeyRecords",
    "repeated_run",
    "Fields",
]
