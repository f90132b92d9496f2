"""`columns.Groups` reduces as pandas' groupby does (the analyses replaced their named
aggregations with it), on random keys with missing values, in both group orders."""

import numpy as np
import pandas as pd
import pytest

from xprof_widgets.analysis.core.columns import Groups


def _plain(column):
    s = pd.Series(column).astype(object)
    return s.where(s.notna(), None).tolist()


@pytest.mark.parametrize("keys", [["a"], ["b"], ["a", "b"]])
@pytest.mark.parametrize("sort", [False, True])
def test_groups_reduce_as_pandas_groupby(keys, sort):
    rng = np.random.default_rng(len(keys) + 2 * sort)
    for _ in range(60):
        n = int(rng.integers(0, 50))
        a = rng.integers(0, 4, n).astype(float)
        a[rng.random(n) < 0.1] = np.nan
        b = np.array([None if rng.random() < 0.1 else "xyz"[int(rng.integers(0, 3))] for _ in range(n)], dtype=object)
        o = np.array([None if rng.random() < 0.4 else str(int(rng.integers(0, 3))) for _ in range(n)], dtype=object)
        df = pd.DataFrame(
            {
                "a": a,
                "b": b,
                "v": rng.integers(-5, 5, n).astype(np.int64),
                "o": o,
                "f": np.where(rng.random(n) < 0.4, np.nan, rng.random(n)),
                "t": rng.random(n) < 0.5,
            }
        )
        want = (
            df.groupby(keys, sort=sort)
            .agg(
                v=("v", "sum"),
                v_max=("v", "max"),
                v_min=("v", "min"),
                o=("o", "first"),
                o_last=("o", "last"),
                f=("f", "first"),
                f_last=("f", "last"),
                f_sum=("f", "sum"),
                f_max=("f", "max"),
                f_min=("f", "min"),
                t=("t", "any"),
                t_sum=("t", "sum"),
                size=("v", "size"),
                o_distinct=("o", "nunique"),
            )
            .reset_index()
        )
        g = Groups(*(df[k] for k in keys), sort=sort)
        got = g.frame(
            {k: df[k] for k in keys},
            v=g.sum(df["v"]),
            v_max=g.max(df["v"]),
            v_min=g.min(df["v"]),
            o=g.first(df["o"]),
            o_last=g.last(df["o"]),
            f=g.first(df["f"]),
            f_last=g.last(df["f"]),
            f_sum=g.sum(df["f"]),
            f_max=g.max(df["f"]),
            f_min=g.min(df["f"]),
            t=g.any(df["t"]),
            t_sum=g.sum(df["t"]),
            size=g.size(),
            o_distinct=g.nunique(df["o"]),
        )
        assert list(got.columns) == list(want.columns)
        for column in want.columns:
            if column.startswith("f_"):  # float sums: equal to rounding
                np.testing.assert_allclose(
                    got[column].to_numpy(float), want[column].to_numpy(float), rtol=1e-12, equal_nan=True
                )
                continue
            assert _plain(got[column]) == _plain(want[column]), column


def test_groups_sum_stays_exact_past_float_precision():
    big = np.array([2**60, 1, 2**60, 3], dtype=np.int64)
    g = Groups(np.array([0, 0, 1, 1]))
    assert g.sum(big).tolist() == [2**60 + 1, 2**60 + 3]
