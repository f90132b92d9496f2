"""Column helpers: a per-value Python rule over a column of many events and few values."""

from __future__ import annotations

import ctypes
from collections.abc import Callable

import numpy as np
import pandas as pd

from ...io import native


def factorize(values, *, sort=False, use_na_sentinel=True):
    """`pd.factorize(np.asarray(values), sort=sort, use_na_sentinel=use_na_sentinel)`: the
    same (codes, uniques). An object column of many rows and few distinct values (a kernel's
    or an op's name per event, taken from a table of names) is factorized by its objects'
    addresses first, then only one object per address by value: hashing and comparing
    Python objects costs about 100 ns a row (1-5 ms a column of 20,000 kernels), their
    addresses a few. Values equal as pandas hashes them are one value either way."""
    values = np.asarray(values)
    if values.dtype != object or len(values) < _BY_ADDRESS:
        return pd.factorize(values, sort=sort, use_na_sentinel=use_na_sentinel)
    values = np.ascontiguousarray(values)  # (holds the objects while their addresses are read)
    addresses = np.frombuffer((ctypes.c_char * values.nbytes).from_address(values.ctypes.data), dtype=np.uintp)
    by_address, _ = pd.factorize(addresses)  # codes 0, 1, ... in order of first appearance
    first = np.flatnonzero(np.diff(np.maximum.accumulate(by_address), prepend=-1) > 0)
    codes, uniques = pd.factorize(values[first], sort=sort, use_na_sentinel=use_na_sentinel)
    return codes[by_address], uniques


#: Rows from which `factorize` reads an object column's addresses (below, pandas' own call
#: costs less than the extra steps).
_BY_ADDRESS = 256


def by_value(values, rule: Callable[[object], object], dtype=object) -> np.ndarray:
    """`rule(v)` for each v of `values` (an array or column), called once per distinct value:
    a line of 100,000 kernels names a few hundred ops, and a Python call per kernel is most
    of a tool's time. Values equal as pandas hashes them count as one (None and NaN; 1, 1.0
    and True): for rules over text, which give every non-text value the same answer. (A
    few values: the rule is called for each.)"""
    values = np.asarray(values, dtype=object)
    if len(values) <= _FEW:  # (a line of a kernel or two: pandas' factorize costs 40 µs a call)
        out = np.empty(len(values), dtype=dtype)
        for k, v in enumerate(values):
            out[k] = rule(v)
        return out
    codes, uniques = factorize(values, use_na_sentinel=False)
    out = np.empty(len(uniques), dtype=dtype)
    for k, v in enumerate(uniques):
        out[k] = rule(v)
    return out[codes]


_FEW = 4


def by_category(kept: dict, categorical, rule: Callable[[object], object], missing, dtype=object) -> np.ndarray:
    """`rule(c)` for each category c of `categorical` (a pandas Categorical: a line's event
    names), then `missing` last, so that `table[categorical.codes]` gives each row's value
    (code -1, no name: `missing`). `kept` holds the table per categories object, checked
    by identity: the lines of a plane share their names' categories, so the rule runs once
    a name per plane, not per line."""
    categories = categorical.categories
    entry = kept.get(id(categories))
    if entry is None or entry[0] is not categories:
        table = np.empty(len(categories) + 1, dtype=dtype)
        for k, c in enumerate(categories):
            table[k] = rule(c)
        table[-1] = missing
        entry = kept[id(categories)] = (categories, table)
    return entry[1]


def by_pair(first, second, rule: Callable[[object, object], object], *, where=None, dtype=object, shape=()):
    """`rule(a, b)` for each row's pair (first[i], second[i]) (a program id and an op name),
    called once per distinct pair; with `where` (a row mask) only for the pairs of those
    rows, the other rows getting the dtype's empty value (None, 0, False). `shape`: the
    shape of one result (a tuple of costs: `(5,)`). Pairs equal as pandas hashes them
    count as one (see `by_value`)."""
    where = None if where is None else np.asarray(where, bool)
    pair, size, at = _small_pairs(first, second, where)
    if pair is None:  # (any other keys: grouped)
        g = Groups(first, second, dropna=False)  # a missing value is one value here
        pair, size = g.codes, g.n
        rows = g.order if where is None else g.order[where[g.order]]  # (by pair, in row order)
        runs = np.flatnonzero(np.diff(pair[rows], prepend=-1))
        at = np.full(size, -1, np.int64)
        at[pair[rows[runs]]] = rows[runs]  # each pair's first row
    out = np.zeros((size, *shape), dtype=dtype)
    if np.dtype(dtype) == object:
        out.fill(None)
    a, b = np.asarray(first), np.asarray(second)
    for k in np.flatnonzero(at >= 0):
        out[k] = rule(a[at[k]], b[at[k]])
    rows = out[pair]
    if where is not None:
        rows[~where] = None if np.dtype(dtype) == object else 0
    return rows


def _small_pairs(first, second, where):
    """For `by_pair` where both columns are integers of small ranges (`_ranks`): (each row's
    pair number, how many numbers, per number a row of that pair (of `where`'s rows), -1
    where none); (None, 0, None) otherwise. Tables over the ranges: no hashing, no sort."""
    a, b = _ranks(first), _ranks(second)
    if a is None or b is None or a[1] * b[1] > 4 * len(a[0]) + 4096:
        return None, 0, None
    pair, size = a[0] * b[1] + b[0], a[1] * b[1]
    rows = np.arange(len(pair)) if where is None else np.flatnonzero(where)
    at = np.full(size, -1, np.int64)
    at[pair[rows]] = rows  # (a row of each pair: its values are the pair's, exactly)
    return pair, size, at


def _codes(key, sort, dropna):
    """(codes, how many values) of a key column, as `factorize` numbers them."""
    col, uniques = factorize(key, sort=sort, use_na_sentinel=dropna)
    return col, len(uniques)


def _offsets(key):
    """(each row's value less the column's least, the range's width) for a column of
    integers (or booleans) of a small range; None for any other column."""
    return _shifted(_span(key))


def _shifted(span):
    """`_offsets` of a column's `_span` (None: None)."""
    if span is None:
        return None
    values, lo, width = span
    return np.subtract(values, lo, dtype=np.int64), width


def _span(key):
    """(the column's values, their least, the range's width) for a column of integers (or
    booleans) of a small range (uint64 ids viewed as int64); None for any other column.
    No array of the offsets: `Groups` adds the values into its codes as they are."""
    values = np.asarray(key)
    if values.dtype.kind not in "iub" or not len(values):
        return None
    if values.dtype.kind == "u" and values.dtype.itemsize == 8:  # (ids: below 2**63 as int64)
        if int(values.max()) >= 2**63:
            return None
        values = values.view(np.int64)
    lo, hi = int(values.min()), int(values.max())
    if hi - lo >= min(2**20, 4 * len(values) + 4096):
        return None
    return values, lo, hi - lo + 1


def _ranks(key):
    """(each row's rank among the column's distinct values, how many there are) for a column
    of integers (or booleans) of a small range, by a table over that range: no hashing, the
    values' order. None for any other column (then `factorize` numbers it)."""
    return _ranks_of(_offsets(key))


def _ranks_of(span):
    """`_ranks` of a column's `_offsets` (None: None)."""
    if span is None:
        return None
    shifted, width = span
    used = np.zeros(width, bool)
    used[shifted] = True
    rank = np.cumsum(used) - 1
    return rank[shifted], int(rank[-1]) + 1


def _dense(values, size, sort):
    """(`pd.factorize(values, sort=sort)` codes or each value's rank among the distinct
    values, how many there are, whether they are ranks) of non-negative integers below
    `size`: ranks by a table over that range where it is small (no hashing), else hashed."""
    if size > 4 * len(values) + 4096:
        codes, distinct = pd.factorize(values, sort=sort)
        return codes, len(distinct), False
    used = np.zeros(size, bool)
    used[values] = True
    rank = np.cumsum(used) - 1
    return rank[values], (int(rank[-1]) + 1 if size else 0), True


#: `Groups` numbers the combination of its keys so far by a table (`_dense`) once the next
#: key would take it past this many values: a table that stays in cache, where one over the
#: rows' full range (4 per row) took a page fault per 4 KiB and a pass over memory.
_SMALL_TABLE = 1 << 16


class Groups:
    """Rows grouped by equal keys, as `DataFrame.groupby(keys, sort=sort)` groups them:
    groups in order of first appearance (`sort=True`: in key order), rows whose key is
    missing (None, NaN) in no group (`dropna=False`: missing is a key value). The
    reductions are numpy's over the rows in group order: pandas' named aggregations cost
    a millisecond or more per column and call, most of a tool's time on a profile of
    thousands of ops.

    `first`/`last` skip missing values, as pandas' do (a group without any: None for
    objects, NaN for floats); so do `sum` (NaN counts 0), `min` and `max` (NaN only where
    the group has nothing else); `sum` of integers stays exact in int64.
    """

    def __init__(self, *keys, sort=False, dropna=True):
        codes, size = None, 1
        ranked = False  # whether the codes are of one key, in its values' order (`_ranks`)
        # Integer keys of a small range are numbered by a table over it, not hashed: where
        # every key is one, by their offsets, combined key by key (the combination so far
        # numbered by a table over its range, in order, wherever the next key would take
        # it past _SMALL_TABLE values: 9 keys of a few values each over 100,000 kernels
        # are 9 cheap steps and two small tables); else each by its ranks.
        spans = [_span(key) for key in keys]
        combined = len(keys) > 1 and None not in spans
        table = 4 * len(spans[0][0]) + 4096 if combined else 0
        missing = None  # (offsets are never missing)
        for key, span in zip(keys, spans):
            if combined:  # (each key's values added into the codes as they are, less their least)
                col, lo, width = span
                ranked = True
            else:
                found = _ranks_of(_shifted(span))
                ranked, lo = found is not None, 0
                col, width = found if ranked else _codes(key, sort, dropna)
            width += 1  # + 1: missing, coded -1, kept apart as -1 below
            if codes is None:
                codes, size = np.subtract(col, lo, dtype=np.int64), width
                if not combined:
                    missing = col < 0
                continue
            if not combined:
                missing |= col < 0
            elif size * width > min(table, _SMALL_TABLE) and size <= table:
                codes, size, _ = _dense(codes, size, True)
            if size * width >= 2**62:
                codes, seen = pd.factorize(codes, sort=sort)
                size = len(seen)
            codes *= width  # (in place: `codes` is this object's own from the first key on)
            codes += col
            if lo:
                codes -= lo
            size *= width
        if codes is None:
            raise ValueError("Groups needs one key column or more")
        n = len(codes)
        if missing is not None and not missing.any():
            missing = None
        if native.available():
            self._grouped(codes, size, sort, missing)
            return
        missing = np.zeros(n, bool) if missing is None else missing
        # Groups numbered in key order first (`ranks`: a table), then, unless sorted,
        # renumbered in order of first appearance with the rows' order already grouped:
        # one stable sort. (Keys of a wide range: hashed, numbered as wanted at once.)
        rows = np.flatnonzero(~missing) if missing.any() else None
        renumber = len(keys) > 1 or rows is not None or (ranked and not sort)
        if renumber:
            ranks, groups, renumber = _dense(codes if rows is None else codes[rows], size, sort)
        else:  # (one key numbered as wanted already, none missing)
            ranks, groups = codes, int(codes.max()) + 1 if n else 0
        # A stable sort of 16-bit codes is a radix sort: 4-5 times one of int64 codes.
        narrow = np.int16 if groups < 2**15 else np.int32 if groups < 2**31 else np.int64
        order = np.argsort(ranks.astype(narrow, copy=False), kind="stable")
        sorted_ranks = ranks[order]
        if rows is not None:
            order = rows[order]
        change = np.concatenate([[True], sorted_ranks[1:] != sorted_ranks[:-1]]) if len(order) else order > 0
        starts = np.flatnonzero(change)
        sizes = np.diff(np.append(starts, len(order)))
        if renumber and not sort and len(starts):
            # Groups by their first rows (the stable sort keeps each group's rows in order),
            # their blocks of `order` moved to match.
            by_first = np.argsort(order[starts])  # (distinct rows: no stable sort needed)
            new_of_rank = np.empty(len(starts), np.int64)
            new_of_rank[by_first] = np.arange(len(starts), dtype=np.int64)
            ranks = new_of_rank[ranks]
            sizes = sizes[by_first]
            moved = np.concatenate([[0], np.cumsum(sizes)[:-1]])
            order = order[np.repeat(starts[by_first] - moved, sizes) + np.arange(len(order))]
            starts = moved
        if rows is None:
            self.codes = ranks.astype(np.int64, copy=False)
        else:
            self.codes = np.full(n, -1, np.int64)
            self.codes[rows] = ranks
        # per row: its group, -1 none; rows group by group, in row order within a group
        self.order = order
        self.starts = starts
        self.sizes = sizes
        self.n = len(starts)

    def _grouped(self, codes, size, sort, missing):
        """The groups of the rows' combined `codes` (below `size`; `missing`: rows in no
        group, or None) by the compiled counting sort (`native.groups`), set on this
        object. A range of more codes than a table of about the rows' number holds is
        first numbered by hashing."""
        kept = None
        if missing is not None:
            codes[missing] = -1
            kept = np.flatnonzero(~missing)
        if size > 4 * len(codes) + 4096:
            found, seen = pd.factorize(codes if kept is None else codes[kept], sort=sort)
            if kept is None:
                codes = found.astype(np.int64, copy=False)
            else:
                codes[kept] = found
            size = len(seen)
        codes = np.ascontiguousarray(codes, dtype=np.int64)  # (its own: renumbered in place)
        grouped = native.groups(codes, max(size, 1), sort)
        if grouped is None:  # (codes are below `size` by construction: a bug if not)
            raise RuntimeError(f"Groups: codes outside [0, {size})")
        bounds, self.order = grouped
        self.codes = codes
        self.starts = bounds[:-1]
        self.sizes = np.diff(bounds)
        self.n = len(self.starts)

    def size(self):
        return self.sizes.astype(np.int64)

    def first(self, values, skipna=True):
        return self._at(values, self.starts, skipna, last=False)

    def last(self, values, skipna=True):
        return self._at(values, self.starts + self.sizes - 1, skipna, last=True)

    def _at(self, values, at, skipna, last):
        values = np.asarray(values)
        ordered = values[self.order]
        if not skipna or values.dtype.kind not in "Of":
            return ordered[at]
        valid = np.flatnonzero(~pd.isna(ordered))
        if len(valid) == len(ordered):
            return ordered[at]
        if last:
            k = np.searchsorted(valid, at, side="right") - 1
            ok = k >= 0
            ok[ok] = valid[k[ok]] >= self.starts[ok]
        else:
            k = np.searchsorted(valid, at)
            ok = k < len(valid)
            ok[ok] = valid[k[ok]] < (self.starts + self.sizes)[ok]
        out = np.full(len(at), None if values.dtype.kind == "O" else np.nan, dtype=values.dtype)
        out[ok] = ordered[valid[k[ok]]]
        return out

    def _reduce(self, ufunc, values):
        ordered = np.asarray(values)[self.order]
        if not len(ordered):
            return ordered[:0]
        return ufunc.reduceat(ordered, self.starts)

    def sum(self, values):
        values = np.asarray(values)
        if values.dtype == bool:
            values = values.astype(np.int64)
        elif values.dtype == object:  # numbers in an object column (a concat with an empty frame)
            values = np.asarray(pd.to_numeric(values))
        if values.dtype.kind == "f":
            values = np.where(np.isnan(values), 0.0, values)
        return self._reduce(np.add, values)

    def max(self, values):
        values = np.asarray(values)
        return self._reduce(np.fmax if values.dtype.kind == "f" else np.maximum, values)

    def min(self, values):
        values = np.asarray(values)
        return self._reduce(np.fmin if values.dtype.kind == "f" else np.minimum, values)

    def any(self, values):
        return self._reduce(np.logical_or, np.asarray(values, dtype=bool)).astype(bool)

    def nunique(self, values):
        """Distinct values per group, missing ones not counted (pandas' `nunique`)."""
        col, uniques = factorize(values)
        keep = (col >= 0) & (self.codes >= 0)
        width = len(uniques) + 1
        pairs = self.codes[keep] * width + col[keep]
        if self.n * width <= 4 * len(pairs) + 4096:  # (a table of the pairs: no sort)
            seen = np.zeros(self.n * width, bool)
            seen[pairs] = True
            return seen.reshape(self.n, width).sum(axis=1, dtype=np.int64)
        return np.bincount(np.unique(pairs) // width, minlength=self.n).astype(np.int64)

    def frame(self, keys=None, **columns):
        """A DataFrame of one row per group: `keys` ({name: key column}) at each group's
        first row, then `columns` ({name: per-group values})."""
        first_rows = self.order[self.starts]
        data = {k: np.asarray(v)[first_rows] for k, v in (keys or {}).items()}
        data.update(columns)
        return pd.DataFrame(data)
