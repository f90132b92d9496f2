/* The two loops of reading a profile that numpy cannot make fast, as plain C.
 *
 * Optional: `hatch_build.py` compiles this file into a shared library when a C
 * compiler is at hand, and `xprof_widgets/io/native.py` loads it with ctypes.
 * Without it, `wire.py`'s numpy code does the same work, and gives the same
 * results (tests/test_native.py compares them). No Python API is used: the
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

/* native.py loads this library only when this is its own ABI number: a library built
 * from an older version of this file is not called with the arguments of a newer one. */
int32_t xw_abi(void) { return 1; }

/* The varint at data[i:limit): its value in *out, its end returned; -1 when it
 * runs to `limit` or past 10 bytes. */
static int64_t varint(const uint8_t *data, int64_t i, int64_t limit, uint64_t *out) {
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

/* `wire.scan_run` without a limit: the positions of a run of LENGTH records whose
 * one-byte tag is `tag`, from `start` until `end` or a record boundary holding another
 * byte. Writes at most `cap` positions to `out` and the position after the last
 * record read to `*stop` (where to carry on when `cap` was reached). Returns how many
 * were written, or XW_BAD (a length runs past `end`, a varint cannot be read). */
int64_t xw_find_records(const uint8_t *data, int64_t size, int64_t start, int64_t end, uint8_t tag,
                        int64_t *out, int64_t cap, int64_t *stop) {
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
        out[n++] = i;
        i = j + (int64_t)length;
    }
    *stop = i;
    return n;
}

/* `wire.decode_head`'s fast layout, record by record. Record r's tag is at pos[r]:
 * its payload follows its length. Fields `numbers[0..count)` (ascending, below 16) are
 * read in that order where present, each a VARINT of at most 7 bytes; values[k * n + r]
 * and present[k * n + r] receive field k (0 and 0 where absent), rest[r] where the
 * fields not read start (from pos[r]), ok[r] whether the record is in that layout:
 * each of those fields once, in order, nothing of the same numbers after them. A
 * record not `ok` is decoded again by the caller's general decoder. Returns how many
 * records are not ok, or XW_BAD (a record's payload runs past `end`). */
int64_t xw_decode_head(const uint8_t *data, int64_t size, const int64_t *pos, int64_t n, const int32_t *numbers,
                       int32_t count, int64_t end, uint64_t *values, uint8_t *present, int64_t *rest, uint8_t *ok) {
    int64_t odd = 0;
    int32_t last = numbers[count - 1];
    if (end > size) return XW_BAD;
    for (int64_t r = 0; r < n; r++) {
        int64_t at = pos[r];
        if (at < 0 || at + 1 >= end) return XW_BAD;
        uint64_t length;
        int64_t s = varint(data, at + 1, end, &length);
        if (s < 0 || length > (uint64_t)(end - s)) return XW_BAD;
        int64_t e = s + (int64_t)length, p = s;
        int good = 1;
        for (int32_t k = 0; k < count; k++) {
            int64_t slot = (int64_t)k * n + r;
            values[slot] = 0;
            present[slot] = 0;
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
            present[slot] = 1;
            if (!done) { /* longer than 7 bytes, or cut by the payload's end */
                good = 0;
                p = q;
                break;
            }
            values[slot] = value;
            p = q;
        }
        if (good && p < e && !present[(int64_t)(count - 1) * n + r]) {
            /* What follows must be a later field than those read. */
            uint8_t next = data[p];
            good = next >= 0x80 || (next >> 3) > last;
        }
        rest[r] = p - at;
        ok[r] = (uint8_t)good;
        odd += !good;
    }
    return odd;
}
