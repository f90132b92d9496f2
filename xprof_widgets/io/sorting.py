"""A stable order of many positions by small integer keys, without position-sized int64
temporaries (numpy's `argsort` returns int64 and its callers then narrow it: two fresh
arrays of the full length, which on tens of millions of events cost more in page faults
than the sort itself).

Used for the trace viewer's rows (positions: events, keys: their nesting depth) and for
a line's stats by stat id (`xspace.StatTable`).
"""

from __future__ import annotations

import numpy as np

#: Positions per block: the block's own argsort and bincount stay a few MB.
BLOCK = 1 << 21


def order_by_key(keys, taken_out=None, order=None):
    """(order, counts): the positions `0..len(keys)` in order of `keys` (non-negative small
    ints), positions of equal key as they come (stable); `counts[k]`: how many have key k.

    `taken_out` (an index array) leaves those positions out of the order (their keys are
    not counted). `order`, if given, is the array written to (its first part is
    returned); else one is made, int32 when positions fit. A counting sort block by
    block: each block sorted by key (numpy's radix sort on small ints) and copied to
    where its keys begin in the whole.
    """
    n = len(keys)
    order = np.empty(n, np.int32 if n < 2**31 else np.int64) if order is None else order
    k = keys
    top = int(k.max(initial=0)) + 1
    if taken_out is not None:  # the positions taken out: a last key of their own, then cut off
        k = keys.astype(np.int16 if top < np.iinfo(np.int16).max else np.int32)
        k[taken_out] = top
    blocks = range(0, n, BLOCK)
    counts = np.zeros((len(blocks), top + 1), np.int64)
    for b, c in enumerate(blocks):
        counts[b] = np.bincount(k[c : c + BLOCK], minlength=top + 1)
    per_key = counts.sum(axis=0)
    key_at = np.concatenate([[0], np.cumsum(per_key)[:-1]])  # where each key begins in the order
    at = key_at + np.cumsum(counts, axis=0) - counts  # where each block's part of each key goes
    narrow = k.dtype.itemsize > 2 and top < 2**16  # numpy's radix sort: 8 and 16 bit keys
    for b, c in enumerate(blocks):
        part = k[c : c + BLOCK]
        local = np.argsort(part.astype(np.uint16) if narrow else part, kind="stable")
        first = 0
        for r in np.flatnonzero(counts[b]).tolist():
            m = int(counts[b, r])
            if r < top:  # (key `top`: the positions taken out)
                dest = int(at[b, r])
                np.add(local[first : first + m], c, out=order[dest : dest + m], casting="unsafe")
            first += m
    kept = n - int(per_key[top])
    return order[:kept], per_key[:top]
