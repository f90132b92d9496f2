"""Column helpers: a per-value Python rule over a column of many events and few values."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd


def by_value(values, rule: Callable[[object], object], dtype=object) -> np.ndarray:
    """`rule(v)` for each v of `values` (an array or column), called once per distinct value:
    a line of 100,000 kernels names a few hundred ops, and a Python call per kernel is most
    of a tool's time. Values equal as pandas hashes them count as one (None and NaN; 1, 1.0
    and True): for rules over text, which give every non-text value the same answer."""
    codes, uniques = pd.factorize(np.asarray(values, dtype=object), use_na_sentinel=False)
    out = np.empty(len(uniques), dtype=dtype)
    for k, v in enumerate(uniques):
        out[k] = rule(v)
    return out[codes]


def by_pair(first, second, rule: Callable[[object, object], object], *, where=None, dtype=object, shape=()):
    """`rule(a, b)` for each row's pair (first[i], second[i]) (a program id and an op name),
    called once per distinct pair; with `where` (a row mask) only for the pairs of those
    rows, the other rows getting the dtype's empty value (None, 0, False). `shape`: the
    shape of one result (a tuple of costs: `(5,)`). Pairs equal as pandas hashes them
    count as one (see `by_value`)."""
    pair, pairs = pd.factorize(pd.MultiIndex.from_arrays([np.asarray(first), np.asarray(second)]))
    out = np.zeros((len(pairs), *shape), dtype=dtype)
    if np.dtype(dtype) == object:
        out.fill(None)
    for k in range(len(pairs)) if where is None else np.unique(pair[where]):
        out[k] = rule(*pairs[k])
    rows = out[pair]
    if where is not None:
        rows[~np.asarray(where, bool)] = None if np.dtype(dtype) == object else 0
    return rows
