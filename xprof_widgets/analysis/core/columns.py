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
