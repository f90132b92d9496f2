/* The per-record loops that numpy cannot make fast, as plain C: finding and reading the
 * events of a profile and their stats (io/wire.py), laying out the trace viewer's rows
 * (analysis/trace.py) and finding each event's nesting parent (analysis/grouping.py).
 *
 * Optional: `hatch_build.py` compiles this file into a shared library when a C
 * compiler is at hand, and `xprof_widgets/io/native.py` loads it with ctypes.
 * Without it, the numpy code each function names does the same work, and gives the
 * same results (tests/test_native.py compares them). No Python API is used: the
 * functions read and write caller-owned numpy arrays, and ctypes releases the
 * GIL while they run.
 *
 * Hostile files: every read stays inside `data[0:size]` (the caller's buffer,
 * PADDING zero bytes past the message included) and every length is checked
 * against the message's end before it is followed. A function that meets a
 * byte it cannot read as the format says returns a negative number; the caller
 * then runs the numpy code over the same bytes, which raises the error (with
 * its message) that the file deserves.
 */
#include <stdint.h>
#include <string.h>

/* Errors: the caller looks again with the numpy code. */
#define XW_BAD (-1)
/* A step whose events span too long a time for `xw_step_walk`'s keys: the caller sorts. */
#define XW_WIDE (-2)
/* More rows to write than the caller made room for: it counts them, then asks again. */
#define XW_FULL (-3)

/* The per-record and per-element helpers of the loops below, inlined where the compiler
 * allows it: a call per stat, its results passed out through pointers, was most of a
 * walk's time (the host threads' `tf_op` walk of a 45 MB file: 48 -> 28 ms). */
#if defined(__GNUC__) || defined(__clang__)
#define XW_HOT static inline __attribute__((always_inline))
#else
#define XW_HOT static inline
#endif

/* native.py loads this library only when this is its own ABI number: a library built
 * from an older version of this file is not called with the arguments of a newer one. */
int32_t xw_abi(void) { return 18; }

/* The varint at data[i:limit): its value in *out, its end returned; -1 when it
 * runs to `limit` or past 10 bytes. */
XW_HOT int64_t varint(const uint8_t *data, int64_t i, int64_t limit, uint64_t *out) {
    uint64_t result = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (i >= limit) return XW_BAD;
        uint8_t b = data[i++];
        result |= (uint64_t)(b & 0x7F) << shift;
        if (b < 0x80) {
            *out = result;
            return i;
        }
    }
    return XW_BAD;
}

/* The field whose tag starts at data[p] (p < stop), any number and wire type: its number
 * in *number, where its value starts in *body and where the field ends in *end (a
 * LENGTH's payload is [*body, *end)). XW_BAD when it cannot be read inside [p, stop) or
 * has a group wire type (none in a profile's messages). */
XW_HOT int skip_field(const uint8_t *data, int64_t p, int64_t stop, uint64_t *number, int64_t *body, int64_t *end) {
    uint8_t first = data[p];
    if ((first & 0x87) == 2 && data[p + 1] < 0x80) { /* usual: a short LENGTH field (an event's stat) */
        *number = first >> 3;
        *body = p + 2;
        *end = p + 2 + data[p + 1];
        return *end <= stop ? 0 : XW_BAD;
    }
    uint64_t tag, value;
    int64_t q = varint(data, p, stop, &tag);
    if (q < 0) return XW_BAD;
    *number = tag >> 3;
    *body = q;
    switch (tag & 7) {
    case 0: /* VARINT */
        q = varint(data, q, stop, &value);
        if (q < 0) return XW_BAD;
        *end = q;
        return 0;
    case 1: /* FIXED64 */
        if (stop - q < 8) return XW_BAD;
        *end = q + 8;
        return 0;
    case 2: /* LENGTH */
        q = varint(data, q, stop, &value);
        if (q < 0 || value > (uint64_t)(stop - q)) return XW_BAD;
        *body = q;
        *end = q + (int64_t)value;
        return 0;
    case 5: /* FIXED32 */
        if (stop - q < 4) return XW_BAD;
        *end = q + 4;
        return 0;
    default:
        return XW_BAD;
    }
}

/* `wire.scan_run` without a limit: the positions of a run of LENGTH records whose
 * one-byte tag is `tag`, from `start` until `end` or a record boundary holding another
 * byte. Writes at most `cap` positions to `out` (or, where `out32` is not NULL, to
 * `out32` as int32: the caller knows they fit) and the position after the last record
 * read to `*stop` (where to carry on when `cap` was reached). Returns how many were
 * written, or XW_BAD (a length runs past `end`, a varint cannot be read). */
int64_t xw_find_records(const uint8_t *data, int64_t size, int64_t start, int64_t end, uint8_t tag,
                        int64_t *out, int32_t *out32, int64_t cap, int64_t *stop) {
    int64_t i = start, n = 0;
    if (end > size) return XW_BAD;
    while (i < end && data[i] == tag) {
        if (n == cap) break;
        uint64_t length;
        int64_t j;
        if (i + 1 < end && data[i + 1] < 0x80) {
            length = data[i + 1];
            j = i + 2;
        } else {
            j = varint(data, i + 1, end, &length);
            if (j < 0) return XW_BAD;
        }
        if (length > (uint64_t)(end - j)) return XW_BAD;
        if (out32)
            out32[n++] = (int32_t)i;
        else
            out[n++] = i;
        i = j + (int64_t)length;
    }
    *stop = i;
    return n;
}

/* The head of one LENGTH record whose tag is at data[at] (its payload inside `end`), in
 * `wire.decode_head`'s fast layout: fields `numbers[0..count)` (ascending, below 16) read
 * in that order where present, each a VARINT of at most 7 bytes, into values[k * stride]
 * and, unless `present` is NULL, present[k * stride] (0 and 0 where absent); *rest gets
 * where the fields not read start (from `at`). Returns 1 when the record is in that
 * layout: each of those fields once, in order, and none of their numbers in the rest of
 * the record (walked to its end: protobuf lets fields come in any order and again, the
 * last value winning); 0 when it is not (the caller's general decoder reads it); XW_BAD
 * when its tag or payload is not inside `end`. */
XW_HOT int record_head(const uint8_t *data, int64_t at, int64_t end, const int32_t *numbers, int32_t count,
                       uint64_t *values, uint8_t *present, int64_t stride, int64_t *rest) {
    if (at < 0 || at + 1 >= end) return XW_BAD;
    uint64_t length;
    int64_t s = varint(data, at + 1, end, &length);
    if (s < 0 || length > (uint64_t)(end - s)) return XW_BAD;
    int64_t e = s + (int64_t)length, p = s;
    int good = 1;
    for (int32_t k = 0; k < count; k++) {
        values[k * stride] = 0;
        if (present) present[k * stride] = 0;
        if (p >= e || data[p] != (uint8_t)(numbers[k] << 3)) continue;
        /* A VARINT of `numbers[k]`: at most 7 bytes, inside the payload. */
        uint64_t value = 0;
        int64_t q = p + 1, stop = p + 8 < e ? p + 8 : e;
        int done = 0;
        for (int shift = 0; q < stop; shift += 7) {
            uint8_t b = data[q++];
            value |= (uint64_t)(b & 0x7F) << shift;
            if (b < 0x80) {
                done = 1;
                break;
            }
        }
        if (present) present[k * stride] = 1;
        p = q;
        if (!done) { /* longer than 7 bytes, or cut by the payload's end */
            good = 0;
            break;
        }
        values[k * stride] = value;
    }
    /* The rest of the record must hold none of these fields again. */
    for (int64_t q = p; good && q < e;) {
        uint64_t number;
        int64_t body, next;
        if (skip_field(data, q, e, &number, &body, &next) < 0) {
            good = 0; /* the general decoder says what is wrong */
            break;
        }
        for (int32_t k = 0; k < count; k++)
            if (number == (uint64_t)numbers[k]) good = 0;
        q = next;
    }
    *rest = p - at;
    return good;
}

/* `wire.decode_head`'s fast layout, record by record (`record_head`). Record r's tag is
 * at pos[r]; values[k * n + r] and present[k * n + r] receive field k, rest[r] where the
 * fields not read start (from pos[r]), ok[r] whether the record is in that layout. A
 * record not `ok` is decoded again by the caller's general decoder. Returns how many
 * records are not ok, or XW_BAD (a record's payload runs past `end`). */
int64_t xw_decode_head(const uint8_t *data, int64_t size, const int64_t *pos, int64_t n, const int32_t *numbers,
                       int32_t count, int64_t end, uint64_t *values, uint8_t *present, int64_t *rest, uint8_t *ok) {
    int64_t odd = 0;
    if (count < 1 || end > size) return XW_BAD;
    for (int64_t r = 0; r < n; r++) {
        int good = record_head(data, pos[r], end, numbers, count, values + r, present + r, n, rest + r);
        if (good < 0) return XW_BAD;
        ok[r] = (uint8_t)good;
        odd += !good;
    }
    return odd;
}

/* How many of the n ids are not marked in `known` (size entries): negative, past its
 * end, or 0 there. The metadata ids of a plane's events against those its metadata
 * defines, in one pass: the usual answer, 0, needs no table of the ids used. */
int64_t xw_count_unknown(const int32_t *ids, int64_t n, const uint8_t *known, int64_t size) {
    int64_t unknown = 0;
    for (int64_t i = 0; i < n; i++) {
        int32_t id = ids[i];
        unknown += id < 0 || id >= size || !known[id];
    }
    return unknown;
}

/* An event's fields: metadata id, offset, duration. */
static const int32_t EVENT_HEAD[3] = {1, 2, 3};

/* The event columns of a line in one pass, straight into their narrow types: what
 * `xw_decode_head` gives for an event's fields 1-3 (metadata id, offset, duration), less
 * the event-sized temporaries its general form needs (uint64 values, flags and offsets per
 * field, then narrowed copies: fresh memory the size of the file again, which costs more
 * than the decoding). Record r's tag is at pos[r] (or pos_in32[r]: one of the two is
 * NULL); metadata_id[r], offset_ps[r], duration_ps[r] receive its fields (0 where
 * absent), stats_at[r] where its stats start (from its tag), and pos32[r] its tag's
 * position when pos32 is not NULL (the caller knows the positions fit). Returns 0 when
 * every record is in `record_head`'s fast layout with a metadata id below 2**31 and its
 * stats within 2**16 bytes of its tag, else how many are not (the caller then decodes
 * the line the general way), or XW_BAD (a payload runs past `end`). */
int64_t xw_event_heads(const uint8_t *data, int64_t size, const int64_t *pos, const int32_t *pos_in32, int64_t n,
                       int64_t end, int32_t *metadata_id, int64_t *offset_ps, int64_t *duration_ps,
                       uint16_t *stats_at, int32_t *pos32) {
    int64_t odd = 0;
    if (end > size || (pos == 0) == (pos_in32 == 0)) return XW_BAD;
    for (int64_t r = 0; r < n; r++) {
        int64_t at = pos ? pos[r] : (int64_t)pos_in32[r], rest;
        uint64_t values[3];
        int good = record_head(data, at, end, EVENT_HEAD, 3, values, 0, 1, &rest);
        if (good < 0) return XW_BAD;
        if (!good || values[0] > INT32_MAX || rest > UINT16_MAX) {
            odd++;
            continue;
        }
        metadata_id[r] = (int32_t)values[0];
        offset_ps[r] = (int64_t)values[1];
        duration_ps[r] = (int64_t)values[2];
        stats_at[r] = (uint16_t)rest;
        if (pos32) pos32[r] = (int32_t)at;
    }
    return odd;
}

/* The field at data[p] (p < stop) in the rest of a record that holds a repeated LENGTH
 * field with one-byte tag `tag_byte`: 1 when it is an element of that field (its payload
 * in [*body, *end)), 0 when it is another field (skipped: *end is where the next field
 * starts; the elements may come in several runs, split by other fields, as protobuf
 * allows), XW_BAD. */
XW_HOT int run_element(const uint8_t *data, int64_t p, int64_t stop, uint8_t tag_byte, int64_t *body, int64_t *end) {
    if (data[p] == tag_byte) {
        uint64_t length;
        int64_t b;
        if (p + 2 <= stop && data[p + 1] < 0x80) { /* a one-byte length: the usual */
            length = data[p + 1];
            b = p + 2;
        } else {
            b = varint(data, p + 1, stop, &length);
        }
        if (b < 0 || length > (uint64_t)(stop - b)) return XW_BAD;
        *body = b;
        *end = b + (int64_t)length;
        return 1;
    }
    uint64_t number;
    return skip_field(data, p, stop, &number, body, end) < 0 ? XW_BAD : 0;
}

/* The end of the payload of the LENGTH record whose one-byte tag is at data[tag] (its
 * payload's start in *body), read inside data[0:limit); XW_BAD where the tag is outside,
 * the length does not read or the payload runs past `limit`. */
XW_HOT int64_t record_end(const uint8_t *data, int64_t tag, int64_t limit, int64_t *body) {
    int64_t p = tag + 1;
    if (tag < 0 || p >= limit) return XW_BAD;
    uint64_t length;
    int64_t q;
    if (data[p] < 0x80) {
        length = data[p];
        q = p + 1;
    } else {
        q = varint(data, p, limit, &length);
        if (q < 0) return XW_BAD;
    }
    if (length > (uint64_t)(limit - q)) return XW_BAD; /* unsigned: a huge length never wraps */
    *body = q;
    return q + (int64_t)length;
}

/* The keyed record (an XStat) whose payload is [s, e): its key in *k and, where its layout
 * is the usual one (key first, then the value, which ends the record: a VARINT, a FIXED64
 * of 8 bytes or a LENGTH whose bytes end the record), the value's field number (kinds[its
 * tag]) in *num, its raw bits in *bits (0 for a LENGTH) and, for a LENGTH, where its bytes
 * start in *text (else 0). Returns 1 for the usual layout, 0 for another (the outputs but
 * the key are then not to be read), XW_BAD where the head does not read. The head (0x08,
 * the key's varint, the value's tag) is read as the numpy code reads it, past the
 * element's end when the element is short. */
XW_HOT int usual_element(const uint8_t *data, int64_t size, int64_t s, int64_t e, const int8_t *kinds, uint64_t *k,
                         int8_t *num, uint64_t *bits, int64_t *text) {
    int64_t v0;
    if (s + 2 < size && data[s + 1] < 0x80) { /* a one-byte key: the usual */
        *k = data[s + 1];
        v0 = s + 3;
    } else {
        v0 = varint(data, s + 1, size, k);
        if (v0 < 0 || v0 >= size) return XW_BAD;
        v0 += 1; /* past the value's tag */
    }
    uint8_t tag = data[v0 - 1];
    int64_t sz = e - v0;
    int good = 0;
    *num = kinds[tag];
    *bits = 0;
    *text = 0;
    if (data[s] != 0x08 || *num == 0) return 0;
    if ((tag & 7) == 0 && sz >= 1 && sz <= 10) { /* VARINT: its last byte ends the record */
        good = 1;
        for (int64_t j = 0; j < sz; j++) {
            uint8_t b = data[v0 + j];
            *bits |= (uint64_t)(b & 0x7F) << (7 * j);
            if ((b < 0x80) != (j == sz - 1)) good = 0;
        }
    } else if ((tag & 7) == 1 && sz == 8) { /* FIXED64 */
        memcpy(bits, data + v0, 8);       /* little-endian hosts (x86, ARM) */
        good = 1;
    } else if ((tag & 7) == 2) { /* LENGTH: its bytes end the record */
        uint64_t length;
        int64_t t;
        if (v0 < size && data[v0] < 0x80) { /* a one-byte length: the usual */
            length = data[v0];
            t = v0 + 1;
        } else {
            t = varint(data, v0, v0 + 10 < size ? v0 + 10 : size, &length);
            if (t < 0) return XW_BAD;
        }
        good = e >= t && length == (uint64_t)(e - t);
        *text = t;
    }
    return good;
}

/* The elements of one record's run [p, stop), owned by owner_id, written from row `out`
 * on (see `xw_keyed_stats`): the new row count, XW_BAD, or XW_FULL past `cap`. */
XW_HOT int64_t keyed_run(const uint8_t *data, int64_t size, int64_t p, int64_t stop, uint8_t tag_byte,
                         int64_t owner_id, const int8_t *kinds, const uint8_t *keys, int64_t nkeys, int64_t out,
                         int64_t cap, int64_t *owner, uint64_t *key, int8_t *number, uint64_t *raw,
                         int64_t *rec_start, int64_t *rec_stop, int64_t *text_start, uint8_t *ok) {
    int64_t s, e;
    while (p < stop) {
        int r = run_element(data, p, stop, tag_byte, &s, &e);
        if (r < 0) return r;
        p = e;
        if (r == 0) continue; /* another field */
        if (owner == NULL) {
            out++;
            continue;
        }
        uint64_t k, bits;
        int8_t num;
        int64_t text;
        int good = usual_element(data, size, s, e, kinds, &k, &num, &bits, &text);
        if (good < 0) return XW_BAD;
        /* Only an element in the usual layout is known to hold key k (another may set
         * its key again further on). */
        if (keys != NULL && good && !(k < (uint64_t)nkeys && keys[k])) continue;
        if (out == cap) return XW_FULL;
        owner[out] = owner_id;
        key[out] = k;
        number[out] = good ? num : 0;
        raw[out] = good ? bits : 0;
        rec_start[out] = s;
        rec_stop[out] = e;
        text_start[out] = good ? text : 0;
        ok[out] = (uint8_t)good;
        out++;
    }
    return out;
}

/* `wire.repeated_run` and `wire._keyed_block` in one pass, for the stats of events.
 *
 * Record i's rest, data[starts[i]:stops[i]), holds the elements of the repeated LENGTH
 * field whose tag is `tag_byte` (an event's stats), among other fields; each element is a keyed record
 * (XStat: key in field 1, then one value field), owned by owner_offset + i. With
 * `owner` NULL, returns how many elements there are (nothing decoded). Else decodes at
 * most `cap` of them, in (owner, file) order, and returns how many it wrote:
 * owner, key, the element's payload [rec_start, rec_stop), and where its layout is the
 * usual one (ok; see `usual_element`), the value's field number (0 when not ok), its raw
 * bits and, for LENGTH, where its bytes start (text_start). An element in the usual
 * layout whose key is not wanted (keys[key] == 0, or key >= nkeys; keys NULL: all wanted)
 * is not written (one in another layout is: its key is known once the caller has walked
 * it). Returns XW_BAD where the numpy code must look, XW_FULL past `cap`. */
int64_t xw_keyed_stats(const uint8_t *data, int64_t size, const int64_t *starts, const int64_t *stops, int64_t n,
                       uint8_t tag_byte, int64_t owner_offset, const int8_t *kinds, const uint8_t *keys,
                       int64_t nkeys, int64_t cap, int64_t *owner, uint64_t *key, int8_t *number, uint64_t *raw,
                       int64_t *rec_start, int64_t *rec_stop, int64_t *text_start, uint8_t *ok) {
    int64_t out = 0;
    for (int64_t i = 0; i < n; i++) {
        if (starts[i] < 0 || stops[i] > size - 16) return XW_BAD; /* the padding past the message stays unread */
        out = keyed_run(data, size, starts[i], stops[i], tag_byte, owner_offset + i, kinds, keys, nkeys, out, cap,
                        owner, key, number, raw, rec_start, rec_stop, text_start, ok);
        if (out < 0) return out;
    }
    return out;
}

/* Where the stats of event i run, read from the events' own columns: its LENGTH record
 * has its tag at pos32[i] (or pos64[i]: one of the two is NULL) and its stats run from
 * at[i] bytes after it to the record's end. The run's end, its start in *start; XW_BAD
 * where the record does not read, or runs into the padding past the message. */
XW_HOT int64_t event_run(const uint8_t *data, int64_t size, const int32_t *pos32, const int64_t *pos64,
                         const uint16_t *at, int64_t i, int64_t *start) {
    int64_t tag = pos32 ? (int64_t)pos32[i] : pos64[i], body;
    int64_t stop = record_end(data, tag, size, &body);
    if (stop < 0) return XW_BAD;
    *start = tag + at[i];
    if (stop > *start && stop > size - 16) return XW_BAD; /* the padding stays unread */
    return stop;
}

/* `xw_keyed_stats` of the stats of events, read from the events' own columns (see
 * `event_run`), owned by owner_offset + i. One pass: no array of the bounds, and events
 * without stats (most of a Python tracer's line) cost a look at their record's length.
 * With `owner` NULL, returns how many elements there are; else XW_FULL when more than
 * `cap` are to be written (the caller counts, then asks again). */
int64_t xw_event_stats(const uint8_t *data, int64_t size, const int32_t *pos32, const int64_t *pos64,
                       const uint16_t *at, int64_t n, uint8_t tag_byte, int64_t owner_offset, const int8_t *kinds,
                       const uint8_t *keys, int64_t nkeys, int64_t cap, int64_t *owner, uint64_t *key,
                       int8_t *number, uint64_t *raw, int64_t *rec_start, int64_t *rec_stop, int64_t *text_start,
                       uint8_t *ok) {
    int64_t out = 0;
    if ((pos32 == 0) == (pos64 == 0)) return XW_BAD;
    for (int64_t i = 0; i < n; i++) {
        int64_t start, stop = event_run(data, size, pos32, pos64, at, i, &start);
        if (stop < 0) return XW_BAD;
        if (stop <= start) continue; /* no stats */
        out = keyed_run(data, size, start, stop, tag_byte, owner_offset + i, kinds, keys, nkeys, out, cap, owner,
                        key, number, raw, rec_start, rec_stop, text_start, ok);
        if (out < 0) return out;
    }
    return out;
}

/* The stats of events read from a line's columns (see `event_run`) straight into arrays
 * per key (`wire._split_events`), in two passes over the same events. Only elements in
 * the usual layout (see `usual_element`) of wanted keys (keys[k], k < nkeys; keys NULL:
 * all) are read; the others are skipped. With `ptrs` NULL, counts: adds each element to
 * counts[k] and, for a LENGTH value, to texts[k]. Else writes each at row cursor[k]++
 * (below counts[k]: the end of this block's rows) of key k's arrays, whose addresses ptrs
 * holds, five per key: owners (int32, or int64 where owner_wide), value field numbers
 * (int8), raw bits (uint64: 0 for a LENGTH value), and where a LENGTH value's bytes start
 * and end (int64; NULL where the key has no LENGTH value: counted none). XW_BAD where an
 * element is in another layout or its key is kmax or more (the caller reads the events
 * the other way), or the bytes need the numpy code's look. */
int64_t xw_split_stats(const uint8_t *data, int64_t size, const int32_t *pos32, const int64_t *pos64,
                       const uint16_t *at, int64_t n, uint8_t tag_byte, int64_t owner_offset, const int8_t *kinds,
                       const uint8_t *keys, int64_t nkeys, int64_t kmax, int64_t *counts, int64_t *texts,
                       int64_t owner_wide, const int64_t *ptrs, int64_t *cursor) {
    if ((pos32 == 0) == (pos64 == 0)) return XW_BAD;
    int64_t written = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t p, stop = event_run(data, size, pos32, pos64, at, i, &p);
        if (stop < 0) return XW_BAD;
        int64_t s, e;
        while (p < stop) { /* (no stats: stop <= p) */
            int r = run_element(data, p, stop, tag_byte, &s, &e);
            if (r < 0) return r;
            p = e;
            if (r == 0) continue; /* another field */
            uint64_t k, bits;
            int8_t num;
            int64_t text;
            int good = usual_element(data, size, s, e, kinds, &k, &num, &bits, &text);
            if (good != 1) return XW_BAD; /* another layout: read the other way */
            if (keys != NULL && !(k < (uint64_t)nkeys && keys[k])) continue;
            if (k >= (uint64_t)kmax) return XW_BAD;
            if (ptrs == NULL) {
                counts[k]++;
                if (text) texts[k]++;
                continue;
            }
            const int64_t *mine = ptrs + 5 * k;
            int64_t row = cursor[k]++;
            /* (Never past the rows counted: the bytes are the same, but a write stays inside.) */
            if (row >= counts[k] || mine[0] == 0 || (text && mine[3] == 0)) return XW_BAD;
            if (owner_wide)
                ((int64_t *)(intptr_t)mine[0])[row] = owner_offset + i;
            else
                ((int32_t *)(intptr_t)mine[0])[row] = (int32_t)(owner_offset + i);
            ((int8_t *)(intptr_t)mine[1])[row] = num;
            ((uint64_t *)(intptr_t)mine[2])[row] = bits;
            if (text) {
                ((int64_t *)(intptr_t)mine[3])[row] = text;
                ((int64_t *)(intptr_t)mine[4])[row] = e;
            }
            written++;
        }
    }
    return written;
}

/* --- the trace viewer's rows (analysis/trace.py `_open_count`, `_rows`) --- */

/* For each event of a track sorted by start, how many earlier events are still open at
 * its start: #{j < i : start[j] + dur[j] > start[i]}. The ends of the open events are
 * kept in a min-heap (`heap`: room for n; only as much as are open at once is touched).
 * Writes int16 depths; returns the deepest, or XW_BAD when one reaches `limit` (the
 * caller uses wider types then). */
int64_t xw_open_count(const int64_t *start, const int64_t *dur, int64_t n, int64_t *heap, int16_t *depth,
                      int64_t limit) {
    int64_t size = 0, top = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t s = start[i];
        while (size > 0 && heap[0] <= s) { /* pop the earliest end */
            int64_t last = heap[--size], at = 0;
            for (;;) {
                int64_t child = 2 * at + 1;
                if (child >= size) break;
                if (child + 1 < size && heap[child + 1] < heap[child]) child++;
                if (heap[child] >= last) break;
                heap[at] = heap[child];
                at = child;
            }
            heap[at] = last;
        }
        if (size >= limit) return XW_BAD;
        depth[i] = (int16_t)size;
        if (size > top) top = size;
        int64_t e = s + dur[i], at = size++; /* push this event's end */
        while (at > 0 && heap[(at - 1) / 2] > e) {
            heap[at] = heap[(at - 1) / 2];
            at = (at - 1) / 2;
        }
        heap[at] = e;
    }
    return top;
}

/* Row-major layout of a track's events: the events not `taken` (NULL: none), by row
 * (`row[i]` < rows), then as they come. Writes their positions to `order`, their starts
 * and ends (start + dur) to out_start / out_end, and, for every two neighbours of a row
 * that overlap, the earlier one's position to `bad`. `counts` (rows zeros) is scratch.
 * Returns the number of overlaps (XW_BAD for a row outside 0..rows); *placed receives how
 * many events were laid out. */
int64_t xw_row_major(const int16_t *row, int64_t n, const uint8_t *taken, int64_t rows, int64_t *counts,
                     const int64_t *start, const int64_t *dur, int32_t *order, int64_t *out_start, int64_t *out_end,
                     int32_t *bad, int64_t *placed) {
    for (int64_t i = 0; i < n; i++)
        if (row[i] < 0 || row[i] >= rows) return XW_BAD;
    for (int64_t i = 0; i < n; i++)
        if (taken == NULL || !taken[i]) counts[row[i]]++;
    int64_t at = 0;
    for (int64_t r = 0; r < rows; r++) { /* where each row begins */
        int64_t c = counts[r];
        counts[r] = at;
        at += c;
    }
    *placed = at;
    for (int64_t i = 0; i < n; i++) {
        if (taken != NULL && taken[i]) continue;
        int64_t p = counts[row[i]]++;
        order[p] = (int32_t)i;
        out_start[p] = start[i];
        out_end[p] = start[i] + dur[i];
    }
    int64_t found = 0, begin = 0;
    for (int64_t r = 0; r < rows; r++) { /* counts[r] is now where row r ends */
        for (int64_t p = begin + 1; p < counts[r]; p++)
            if (out_start[p] < out_end[p - 1]) bad[found++] = order[p - 1];
        begin = counts[r];
    }
    return found;
}

/* --- record payloads (wire.py `record_payloads`) --- */

/* The payload [start[i], stop[i]) of the LENGTH record whose tag is at pos[i] (a one-byte
 * tag, as wire.py's). XW_BAD where a position is outside the data, a length does not read
 * or a payload runs past `limit` (<= n_data): the numpy code then names the bytes. */
int64_t xw_record_payloads(const uint8_t *data, int64_t n_data, const int64_t *pos, int64_t n, int64_t limit,
                           int64_t *start, int64_t *stop) {
    if (limit > n_data) return XW_BAD;
    for (int64_t i = 0; i < n; i++) {
        stop[i] = record_end(data, pos[i], limit, &start[i]);
        if (stop[i] < 0) return XW_BAD;
    }
    return 0;
}

/* The events that carry stats (xspace.py `_live_runs`), from the line's own columns: the
 * LENGTH record of event r has its tag at pos32[r] (or pos64[r]: one of the two is NULL)
 * and its stats start at[r] bytes after it; it carries stats when they end after they
 * start (the payload's end). Writes r, that start and that end of each such event, in
 * order, to live, starts and stops (room for n each) and returns how many; no array the
 * size of the line is made, where most events of a Python tracer's line carry none.
 * XW_BAD as `xw_record_payloads`. */
int64_t xw_live_runs(const uint8_t *data, int64_t n_data, const int32_t *pos32, const int64_t *pos64,
                     const uint16_t *at, int64_t n, int64_t *live, int64_t *starts, int64_t *stops) {
    int64_t found = 0;
    if ((pos32 == 0) == (pos64 == 0)) return XW_BAD;
    for (int64_t i = 0; i < n; i++) {
        int64_t tag = pos32 ? (int64_t)pos32[i] : pos64[i], body;
        int64_t stop = record_end(data, tag, n_data, &body), start = tag + at[i];
        if (stop < 0) return XW_BAD;
        if (stop > start) {
            live[found] = i;
            starts[found] = start;
            stops[found] = stop;
            found++;
        }
    }
    return found;
}

/* --- nesting (analysis/grouping.py `_prev_enclosing`) --- */

/* For each i, the largest j < i with end[j] >= end[i], or -1: on a line sorted by start,
 * the parent XProf's stack walk finds. A stack of the events whose end no later event
 * has reached yet (`stack`: room for n; only as deep as it grows is touched). With
 * `duration` (else NULL), `end` holds the starts and each end is start + duration: no
 * array of the ends is made. */
int64_t xw_prev_enclosing(const int64_t *end, const int64_t *duration, int64_t n, int32_t *stack, int32_t *parent) {
    int64_t size = 0;
    if (n >= INT32_MAX) return XW_BAD;
    for (int64_t i = 0; i < n; i++) {
        int64_t e = duration ? end[i] + duration[i] : end[i];
        while (size > 0) {
            int64_t j = stack[size - 1];
            if ((duration ? end[j] + duration[j] : end[j]) >= e) break;
            size--;
        }
        parent[i] = size > 0 ? stack[size - 1] : -1;
        stack[size++] = (int32_t)i;
    }
    return 0;
}

/* Per event its node: the kept events are nodes base, base + 1, ... in order; an event
 * not kept takes the node of the nearest kept event up its chain of parents
 * (`xw_prev_enclosing`'s), else -1. A parent comes before its child, so one pass in order
 * finds each answer from its parent's. XW_BAD for a parent not before its child or a
 * node id past INT32_MAX. */
int64_t xw_nearest_kept(const int32_t *parent, const uint8_t *kept, int64_t n, int64_t base, int32_t *out) {
    int64_t node = base;
    if (n >= INT32_MAX || base < 0) return XW_BAD;
    for (int64_t i = 0; i < n; i++) {
        int32_t p = parent[i];
        if (p < -1 || p >= i) return XW_BAD;
        if (kept[i]) {
            if (node >= INT32_MAX) return XW_BAD;
            out[i] = (int32_t)node++;
        } else {
            out[i] = p < 0 ? -1 : out[p];
        }
    }
    return 0;
}

/* --- the grouping's graph (analysis/core/grouping.py `_Graph`) --- */

/* Edges (src[e] -> dst[e]), node ids in [0, n), as CSR by source: the edges leaving node
 * u are out[ptr[u]:ptr[u + 1]], in their order in the input (a stable counting sort).
 * XW_BAD for an id out of range. */
int64_t xw_csr(const int32_t *src, const int32_t *dst, int64_t m, int64_t n, int64_t *ptr, int32_t *out) {
    memset(ptr, 0, (size_t)(n + 1) * sizeof(int64_t));
    for (int64_t e = 0; e < m; e++) {
        if (src[e] < 0 || src[e] >= n || dst[e] < 0 || dst[e] >= n) return XW_BAD;
        ptr[src[e] + 1]++;
    }
    for (int64_t u = 0; u < n; u++) ptr[u + 1] += ptr[u];
    for (int64_t e = 0; e < m; e++) out[ptr[src[e]]++] = dst[e]; /* ptr[u]: where u's edges end */
    for (int64_t u = n; u > 0; u--) ptr[u] = ptr[u - 1];
    ptr[0] = 0;
    return 0;
}

/* Each node takes the smallest label of the nodes it is reachable from (itself included):
 * `label` in place, INT32_MAX for "no label". `seeds`: the labelled nodes by ascending
 * label. A seed's walk stops at nodes an earlier (smaller) seed reached: everything past
 * them has that seed's label or a smaller one already. Each node is visited once.
 * `seen` (n bytes, zeroed) and `stack` (room for n) are scratch. */
int64_t xw_min_label(const int64_t *ptr, const int32_t *out, int64_t n, const int32_t *seeds, int64_t k,
                     int32_t *label, uint8_t *seen, int32_t *stack) {
    for (int64_t i = 0; i < k; i++) {
        int32_t s = seeds[i];
        if (s < 0 || s >= n) return XW_BAD;
        if (seen[s]) continue;
        int32_t value = label[s];
        int64_t top = 0;
        seen[s] = 1;
        stack[top++] = s;
        while (top > 0) {
            int32_t u = stack[--top];
            for (int64_t e = ptr[u]; e < ptr[u + 1]; e++) {
                int32_t v = out[e];
                if (seen[v]) continue;
                seen[v] = 1;
                label[v] = value;
                stack[top++] = v;
            }
        }
    }
    return 0;
}

/* seen[v] = 1 for every node reachable from one of `seeds` by one edge or more (a seed
 * itself only when so reachable: it is walked from, not marked). `seen` (n bytes, zeroed)
 * is the result; `stack` (room for n: a seed leaves it before anything is pushed, and a
 * node is pushed only when marked) is scratch. */
int64_t xw_reach(const int64_t *ptr, const int32_t *out, int64_t n, const int32_t *seeds, int64_t k,
                 uint8_t *seen, int32_t *stack) {
    for (int64_t i = 0; i < k; i++) {
        if (seeds[i] < 0 || seeds[i] >= n) return XW_BAD;
        int64_t top = 0;
        stack[top++] = seeds[i];
        while (top > 0) {
            int32_t u = stack[--top];
            for (int64_t e = ptr[u]; e < ptr[u + 1]; e++) {
                int32_t v = out[e];
                if (!seen[v]) {
                    seen[v] = 1;
                    stack[top++] = v;
                }
            }
        }
    }
    return 0;
}

/* One hop of `xw_nearest_source` from the `count` nodes of `from`: a node not labelled
 * before this hop (`step`) takes the smallest label of those with an edge to it, and is
 * listed once: in `ctx` when it is a context node (from `split` on), else in `next`. */
static void xw_hop(const int64_t *ptr, const int32_t *out, const int32_t *from, int64_t count, int32_t step,
                   int64_t split, int32_t *label, int32_t *stamp, int32_t *next, int64_t *reached, int32_t *ctx,
                   int64_t *contexts) {
    for (int64_t i = 0; i < count; i++) {
        int32_t u = from[i];
        for (int64_t e = ptr[u]; e < ptr[u + 1]; e++) {
            int32_t v = out[e];
            if (label[v] != INT32_MAX && stamp[v] != step) continue; /* labelled before this hop */
            if (stamp[v] != step) {
                stamp[v] = step;
                if (v >= split) ctx[(*contexts)++] = v;
                else next[(*reached)++] = v;
            }
            if (label[u] < label[v]) label[v] = label[u];
        }
    }
}

/* Per node, the index of the nearest of `sources` it descends from (grouping.py
 * `_nearest_source`): rounds of one hop from all sources at once; in a round a node not
 * labelled yet takes the smallest label of the frontier nodes with an edge to it. Nodes
 * from `n` on are context nodes, crossed within the round they are reached in (a second
 * step from them, to nodes still unlabelled after the first step). `label` (room for
 * total) gets INT32_MAX where no source reaches; `stamp`, `frontier`, `next`, `ctx`
 * (room for total each) are scratch. */
int64_t xw_nearest_source(const int64_t *ptr, const int32_t *out, int64_t n, int64_t total, const int32_t *sources,
                          int64_t k, int32_t *label, int32_t *stamp, int32_t *frontier, int32_t *next, int32_t *ctx) {
    int64_t size = 0;
    int32_t step = 0;
    for (int64_t v = 0; v < total; v++) {
        label[v] = INT32_MAX;
        stamp[v] = -1;
    }
    for (int64_t i = 0; i < k; i++) {
        int32_t s = sources[i];
        if (s < 0 || s >= total || k >= INT32_MAX) return XW_BAD;
        label[s] = (int32_t)i;
    }
    for (int64_t i = 0; i < k; i++) { /* distinct sources */
        int32_t s = sources[i];
        if (stamp[s] != -2) {
            stamp[s] = -2;
            frontier[size++] = s;
        }
    }
    while (size > 0) {
        int64_t reached = 0, contexts = 0;
        if (step > INT32_MAX - 4) return XW_BAD;
        /* A hop from the frontier, then (the round goes on through them) from the context
         * nodes it reached; those stay out of the next frontier. */
        xw_hop(ptr, out, frontier, size, ++step, n, label, stamp, next, &reached, ctx, &contexts);
        if (contexts > 0) xw_hop(ptr, out, ctx, contexts, ++step, total, label, stamp, next, &reached, NULL, NULL);
        int32_t *swap = frontier;
        frontier = next;
        next = swap;
        size = reached;
    }
    return 0;
}

/* --- groups of rows (analysis/core/columns.py `Groups`) --- */

/* Rows grouped by their codes: code[i] in [0, size), or -1 for a row in no group. The
 * groups are numbered in order of their first row (`sorted`: in order of their codes) and
 * code[] is rewritten in place to those numbers (-1 kept). Writes start[0..groups] (group
 * g's rows are order[start[g]:start[g + 1]]; room for min(n, size) + 1) and order (the
 * rows of each group together, ascending within one: a stable counting sort). `table`:
 * room for size. Returns the number of groups, XW_BAD for a code out of range. Two passes
 * over the rows and one over the table, where the numpy code made a dozen arrays of n. */
int64_t xw_groups(int64_t *code, int64_t n, int64_t size, int32_t sorted, int64_t *table, int64_t *start,
                  int64_t *order) {
    int64_t groups = 0;
    for (int64_t v = 0; v < size; v++) table[v] = -1;
    for (int64_t i = 0; i < n; i++) {
        int64_t k = code[i];
        if (k < -1 || k >= size) return XW_BAD;
        if (k >= 0 && table[k] < 0) table[k] = sorted ? 0 : groups++;
    }
    if (sorted)
        for (int64_t v = 0; v < size; v++)
            if (table[v] == 0) table[v] = groups++;
    for (int64_t g = 0; g <= groups; g++) start[g] = 0;
    for (int64_t i = 0; i < n; i++) {
        if (code[i] < 0) continue;
        code[i] = table[code[i]];
        start[code[i] + 1]++;
    }
    for (int64_t g = 0; g < groups; g++) start[g + 1] += start[g];
    /* Placed from each group's start with start[g + 1] as g's cursor (shifted by one
     * first): when all are placed, start[g + 1] is back at g's end. */
    for (int64_t g = groups; g > 0; g--) start[g] = start[g - 1];
    start[0] = 0;
    for (int64_t i = 0; i < n; i++)
        if (code[i] >= 0) order[start[code[i] + 1]++] = i;
    return groups;
}

/* --- step breakdown (analysis/core/steps.py `_breakdown`) --- */

/* The events of each step together, for `xw_step_walk`: a counting sort by `row[i]`
 * (-1: the event takes no part; else below `rows`). Writes offset[0..rows] (row r's
 * events are order[offset[r]:offset[r + 1]]) and order (event indexes, ascending within
 * a row). Returns the events placed, XW_BAD for a row out of range. */
int64_t xw_rows_order(const int64_t *row, int64_t n, int64_t rows, int64_t *offset, int32_t *order) {
    if (n > INT32_MAX) return XW_BAD;
    for (int64_t r = 0; r <= rows; r++) offset[r] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = row[i];
        if (r < 0) continue;
        if (r >= rows) return XW_BAD;
        offset[r + 1]++;
    }
    for (int64_t r = 0; r < rows; r++) offset[r + 1] += offset[r];
    /* Placed from each row's end, back to front: no cursor array, the order stays ascending. */
    int64_t placed = offset[rows];
    for (int64_t r = rows; r > 0; r--) offset[r] = offset[r - 1];
    offset[0] = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t r = row[i];
        if (r >= 0) order[offset[r + 1]++] = (int32_t)i;
    }
    return placed;
}

/* Keys of one step's boundaries sorted ascending (LSD radix sort, 11 bits a pass, passes
 * only over the bits `top` has; `tmp` as long as `keys`). Returns where they are. */
static uint64_t *xw_sort_keys(uint64_t *keys, uint64_t *tmp, int64_t m, uint64_t top) {
    if (m <= 48) { /* insertion sort: a small step */
        for (int64_t i = 1; i < m; i++) {
            uint64_t v = keys[i];
            int64_t j = i - 1;
            while (j >= 0 && keys[j] > v) {
                keys[j + 1] = keys[j];
                j--;
            }
            keys[j + 1] = v;
        }
        return keys;
    }
    int64_t count[2048];
    for (int shift = 0; shift < 64 && (top >> shift) != 0; shift += 11) {
        memset(count, 0, sizeof(count));
        for (int64_t i = 0; i < m; i++) count[(keys[i] >> shift) & 2047]++;
        if (count[(keys[0] >> shift) & 2047] == m) continue; /* one digit for all: in order */
        int64_t sum = 0;
        for (int d = 0; d < 2048; d++) {
            int64_t c = count[d];
            count[d] = sum;
            sum += c;
        }
        for (int64_t i = 0; i < m; i++) tmp[count[(keys[i] >> shift) & 2047]++] = keys[i];
        uint64_t *swap = keys;
        keys = tmp;
        tmp = swap;
    }
    return keys;
}

/* XProf's `ToNonOverlappedEvents` walk for the steps `r0 <= r < r1`, its per-step time by
 * type summed as it goes. A step's events are order[offset[r]:offset[r + 1]] (see
 * `xw_rows_order`); event i runs from start[i] to end[i], of type type[i] in [0, ntypes),
 * ntypes at most 1024. Its boundaries (each event's start and end) become one 64-bit key
 * each, (time - the step's first time) << 11 | the boundary's place at one time (ends
 * before starts, higher types first), sorted by `xw_sort_keys` in `keys` / `tmp` (room
 * for twice the step's events each). The walk: a tracker fresh at the step's first
 * boundary (a maximum of 0, UNKNOWN_TIME; `count`, room for ntypes, back to zero) counts
 * events per type and keeps a maximum: a start raises it to its type; an end of the
 * maximum's type that takes its count to zero lowers it to the highest type still
 * counted (0 if none). Each boundary but the step's last labels the span to the next with
 * the maximum after it: the span, clipped to the step's [lo, hi], adds to
 * per[r * ncols + col[label]]; a label equal to `mark` sets marked[r] (XProf keys the
 * breakdown by every label, even an empty span's). Only rows [r0, r1) are written: calls
 * on other rows may run at the same time. XW_BAD for an index, type or column out of
 * range; XW_WIDE for a step whose events span 2**52 ps or more (its keys would not fit). */
int64_t xw_step_walk(const int32_t *order, const int64_t *offset, int64_t r0, int64_t r1, const int64_t *start,
                     const int64_t *end, const int16_t *type, int64_t n, const int64_t *lo, const int64_t *hi,
                     int64_t rows, const int64_t *col, int64_t ntypes, int64_t ncols, int64_t mark, uint64_t *keys,
                     uint64_t *tmp, int64_t room, int64_t *count, int64_t *per, uint8_t *marked) {
    if (ntypes <= 0 || ntypes > 1024 || r0 < 0 || r1 > rows) return XW_BAD;
    for (int64_t t = 0; t < ntypes; t++)
        if (col[t] < 0 || col[t] >= ncols) return XW_BAD;
    for (int64_t r = r0; r < r1; r++) {
        int64_t a = offset[r], b = offset[r + 1];
        if (a == b) continue;
        if (a < 0 || b < a || 2 * (b - a) > room) return XW_BAD;
        int64_t first = INT64_MAX, last = INT64_MIN;
        for (int64_t k = a; k < b; k++) {
            int64_t i = order[k];
            if (i < 0 || i >= n) return XW_BAD;
            int64_t s = start[i], e = end[i]; /* (an end before its start is walked as XProf does) */
            if (s < first) first = s;
            if (e < first) first = e;
            if (s > last) last = s;
            if (e > last) last = e;
            if (type[i] < 0 || type[i] >= ntypes) return XW_BAD;
        }
        uint64_t span = (uint64_t)last - (uint64_t)first;
        if (span >= ((uint64_t)1 << 52)) return XW_WIDE;
        int64_t m = 0;
        for (int64_t k = a; k < b; k++) {
            int64_t i = order[k];
            uint64_t ty = (uint64_t)type[i];
            /* At one time: ends (1023 - type: the higher type first) before starts (2047 - type). */
            keys[m++] = ((uint64_t)(start[i] - first) << 11) | (2047 - ty);
            keys[m++] = ((uint64_t)(end[i] - first) << 11) | (1023 - ty);
        }
        uint64_t *sorted = xw_sort_keys(keys, tmp, m, (span << 11) | 2047);
        for (int64_t t = 0; t < ntypes; t++) count[t] = 0;
        int64_t top = 0; /* a fresh tracker */
        for (int64_t k = 0; k < m; k++) {
            uint64_t place = sorted[k] & 2047;
            int64_t ty;
            if (place >= 1024) {
                ty = (int64_t)(2047 - place);
                count[ty]++;
                if (ty > top) top = ty;
            } else {
                ty = (int64_t)(1023 - place);
                count[ty]--;
                if (ty == top && count[ty] == 0) {
                    top = 0;
                    for (int64_t j = ty - 1; j > 0; j--) {
                        if (count[j] > 0) {
                            top = j;
                            break;
                        }
                    }
                }
            }
            if (k + 1 == m) break; /* the step's last boundary: no span */
            if (top == mark) marked[r] = 1;
            int64_t t0 = first + (int64_t)(sorted[k] >> 11), t1 = first + (int64_t)(sorted[k + 1] >> 11);
            int64_t x = t0 > lo[r] ? t0 : lo[r];
            int64_t y = t1 < hi[r] ? t1 : hi[r];
            if (y > x) per[r * ncols + col[top]] += y - x;
        }
    }
    return 0;
}

/* --- a host's events by step group (analysis/core/steps.py `_host_events`) --- */

/* The events of one line that belong to a group, in order, as the columns of
 * `_host_events`: group, start, end (start + duration), type and marker. Event i's group
 * is group[i] (near NULL), else that of its node near[i] (group[near[i]]; -1: none), of
 * ngroup; it belongs to one when that is >= 0. Its name code c (code8 or code32, the other
 * NULL; -1: no name, read as the tables' last entry; else below ntable - 1) gives its type
 * kind[c] and whether its name marks a step, is_marker[c]; the events at `roots`
 * (ascending) are markers too; a marker's type is -1. `room`: the out arrays' length;
 * with out_group NULL, only counts the events that belong to a group. Returns the events
 * written (or counted); XW_BAD for a node or code out of range or too little room. */
int64_t xw_grouped_events(const int64_t *group, int64_t ngroup, const int32_t *near, const int8_t *code8,
                          const int32_t *code32, const int64_t *start, const int64_t *duration, int64_t n,
                          const int16_t *kind, const uint8_t *is_marker, int64_t ntable, const int64_t *roots,
                          int64_t nroots, int64_t *out_group, int64_t *out_start, int64_t *out_end,
                          int16_t *out_type, uint8_t *out_marker, int64_t room) {
    int64_t m = 0, k = 0;
    if (ntable < 1 || (code8 == 0) == (code32 == 0) || (near == 0 && ngroup < n)) return XW_BAD;
    for (int64_t i = 0; i < n; i++) {
        int64_t g;
        if (near == 0) {
            g = group[i];
        } else {
            int64_t j = near[i];
            if (j >= ngroup) return XW_BAD;
            g = j < 0 ? -1 : group[j];
        }
        if (g < 0) continue;
        if (out_group == 0) {
            m++;
            continue;
        }
        int64_t c = code8 ? code8[i] : code32[i];
        if (c < 0)
            c = ntable - 1;
        else if (c >= ntable - 1)
            return XW_BAD;
        if (m >= room) return XW_BAD;
        while (k < nroots && roots[k] < i) k++;
        int mark = is_marker[c] || (k < nroots && roots[k] == i);
        out_group[m] = g;
        out_start[m] = start[i];
        out_end[m] = start[i] + duration[i];
        out_type[m] = mark ? (int16_t)-1 : kind[c];
        out_marker[m] = (uint8_t)mark;
        m++;
    }
    return m;
}
