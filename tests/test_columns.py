"""`columns.Groups` reduces as pandas' groupby does (the analyses replaced their named
aggregations with it), on random keys with missing values, in both group orders, and on
integer and boolean keys (numbered by tables over their range, not hashed)."""

import numpy as np
import pandas as pd
import pytest

from xprof_widgets.analysis.core import columns
from xprof_widgets.analysis.core.columns import Groups
from xprof_widgets.io import native


@pytest.fixture(params=["compiled", "numpy"])
def grouping(request, monkeypatch):
    """Each test of the groups twice: by the compiled counting sort (`native.groups`) and by
    the numpy code (without the library)."""
    if request.param == "compiled" and not native.available():
        pytest.skip(f"the compiled loops are not built here: {native.why_not()}")
    if request.param == "numpy":
        monkeypatch.setattr(native, "available", lambda: False)
    return request.param


def _plain(column):
    s = pd.Series(column).astype(object)
    return s.where(s.notna(), None).tolist()


@pytest.mark.parametrize(
    "keys",
    [["a"], ["b"], ["a", "b"], ["i"], ["u"], ["i", "b"], ["k", "u"], ["u", "i", "k"], ["k", "i"], ["i", "k", "u"]],
)
@pytest.mark.parametrize("sort", [False, True])
def test_groups_reduce_as_pandas_groupby(keys, sort, grouping):
    rng = np.random.default_rng(len(keys) + 2 * sort)
    for trial in range(60):
        n = int(rng.integers(0, 50)) if trial % 6 else int(rng.integers(0, 5000))
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
                # Integers of a small range (ranked by a table), or a wide one (hashed).
                "i": rng.integers(-3, 3, n) * (1 if trial % 3 else 2**40),
                "u": rng.integers(0, 5000 if trial % 2 else 7, n).astype(np.uint16),
                "k": rng.random(n) < 0.3,
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


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("use_na_sentinel", [True, False])
def test_factorize_is_pandas_factorize(sort, use_na_sentinel):
    """`columns.factorize` (object columns by their objects' addresses first) gives what
    pandas gives: equal strings that are different objects, missing values of several
    kinds (None, NaN objects), numbers pandas counts as one value (1, 1.0, True), rows
    below and above the address path's threshold."""
    rng = np.random.default_rng(7)
    names = ["fusion.1", "gemm", "", "éé", None, float("nan"), 1, 1.0, True, 2.5]
    for n in (0, 5, 300, 5000):
        picks = rng.integers(0, len(names), n)
        values = np.empty(n, dtype=object)
        for k, p in enumerate(picks.tolist()):
            v = names[p]
            # Half of the strings and NaNs as objects of their own, equal in value.
            values[k] = (v + ".")[:-1] if isinstance(v, str) and k % 2 else float("nan") if v != v else v
        got_codes, got_uniques = columns.factorize(values, sort=sort, use_na_sentinel=use_na_sentinel)
        codes, uniques = pd.factorize(values, sort=sort, use_na_sentinel=use_na_sentinel)
        np.testing.assert_array_equal(got_codes, codes)
        assert list(map(repr, got_uniques)) == list(map(repr, uniques))
    # A strided view and a column that is not object dtype take the same path as pandas'.
    values = np.array(["a", "b", "a", "c"] * 100, dtype=object)[::3]
    np.testing.assert_array_equal(columns.factorize(values)[0], pd.factorize(values)[0])
    ints = rng.integers(0, 9, 1000)
    np.testing.assert_array_equal(columns.factorize(ints, sort=sort)[0], pd.factorize(ints, sort=sort)[0])


@pytest.mark.parametrize("sort", [False, True])
def test_groups_are_the_same_where_combined_keys_are_hashed_not_tabled(monkeypatch, sort, grouping):
    """Combined keys of a wide range are hashed (`factorize`) instead of ranked by a table
    over the range: the same groups in the same order, rows in the same order."""
    rng = np.random.default_rng(11 + sort)
    keys = [rng.integers(0, 40, 3000), rng.random(3000) < 0.5, rng.integers(-5, 5, 3000).astype(np.int16)]
    keys[1] = np.where(rng.random(3000) < 0.1, None, keys[1]).astype(object)  # (some missing)
    tabled = Groups(*keys, sort=sort)
    dense = columns._dense
    monkeypatch.setattr(
        columns, "_dense", lambda values, size, sort: dense(values, 4 * len(values) + 4097 + size, sort)
    )
    hashed = Groups(*keys, sort=sort)
    assert np.array_equal(tabled.codes, hashed.codes) and np.array_equal(tabled.order, hashed.order)
    assert (tabled.codes >= 0).sum() < 3000  # (rows with a missing key in no group)


def test_by_category_runs_the_rule_once_a_name_per_categories_object():
    """A plane's lines share their names' categories: the rule runs once a name for all of
    them, a new categories object (another plane) gets its own table, and code -1 (an event
    without a name) reads the `missing` value."""
    calls = []

    def rule(name):
        calls.append(name)
        return len(name)

    plane = pd.Categorical.from_codes([0, 1, -1, 1], categories=["ab", "xyz"])
    other_line = pd.Categorical.from_codes([1, 1], dtype=plane.dtype)  # same categories object
    kept: dict = {}
    table = columns.by_category(kept, plane, rule, -1, np.int64)
    assert table[np.asarray(plane.codes)].tolist() == [2, 3, -1, 3]
    assert columns.by_category(kept, other_line, rule, -1, np.int64) is table
    assert calls == ["ab", "xyz"]
    other_plane = pd.Categorical.from_codes([0], categories=["ab", "xyz"])  # equal, not the same
    assert other_plane.categories is not plane.categories
    assert columns.by_category(kept, other_plane, rule, -1, np.int64).tolist() == [2, 3, -1]
    assert calls == ["ab", "xyz", "ab", "xyz"]


@pytest.mark.parametrize("kind", ["small", "wide", "object"])
def test_by_pair_asks_each_distinct_pair_once_and_maps_every_row(kind):
    """`by_pair` on integers of small ranges (tables, no grouping), of wide ones and on
    objects (grouped): one call per distinct pair among `where`'s rows, with that pair's
    values, and each row gets its pair's answer; rows outside `where` the empty value."""
    rng = np.random.default_rng(["small", "wide", "object"].index(kind))
    for trial in range(40):
        n = int(rng.integers(0, 300))
        first = rng.integers(-1, 4, n) * (2**40 if kind == "wide" else 1)
        second = rng.integers(0, 6, n)
        if kind == "object":
            second = np.array([f"op{v}" if v else None for v in second], dtype=object)
        where = rng.random(n) < 0.7 if trial % 2 else None
        calls = []

        def rule(a, b, calls=calls):
            calls.append((a, b))
            return f"{a}:{b}"

        out = columns.by_pair(first, second, rule, where=where)
        rows = range(n) if where is None else np.flatnonzero(where)
        assert sorted(map(repr, calls)) == sorted(map(repr, {(first[i], second[i]) for i in rows}))
        expected = [f"{first[i]}:{second[i]}" if where is None or where[i] else None for i in range(n)]
        assert out.tolist() == expected
        flags = columns.by_pair(first, second, lambda a, b: a >= 0, where=where, dtype=bool)
        assert flags.tolist() == [bool(first[i] >= 0 and (where is None or where[i])) for i in range(n)]


@pytest.mark.parametrize("sort", [False, True])
@pytest.mark.parametrize("wide", [False, True])
def test_integer_keys_combined_by_offsets_group_as_by_ranks(sort, wide, grouping):
    """Several integer keys of a small range are combined by their offsets from their least
    values (no ranks), the combination so far numbered by a table wherever the next key
    would take it past a table's size (`wide`: 6 keys of 40 values over 4,000 rows, 3
    such steps): the same groups in the same order as by ranks and hashing (a float key
    among them: the others ranked, it factorized)."""
    rng = np.random.default_rng(5 + sort + 2 * wide)
    if wide:
        keys = [rng.integers(0, 40, 4000) for _ in range(6)]
    else:
        keys = [rng.integers(3, 9, 4000).astype(np.int8), rng.random(4000) < 0.3, rng.integers(0, 40, 4000) * 3]
    by_offsets = Groups(*keys, sort=sort)
    by_ranks = Groups(*keys[:-1], keys[-1].astype(float), sort=sort)
    assert np.array_equal(by_offsets.codes, by_ranks.codes)
    assert np.array_equal(by_offsets.order, by_ranks.order) and by_offsets.n == by_ranks.n > 100
    frame = pd.DataFrame({f"k{i}": k for i, k in enumerate(keys)})
    expected = frame.groupby(list(frame.columns), sort=sort).ngroup().to_numpy()
    assert np.array_equal(by_offsets.codes, expected)


@pytest.mark.skipif(not native.available(), reason=f"the compiled loops are not built here: {native.why_not()}")
@pytest.mark.parametrize("sort", [False, True])
def test_compiled_groups_equal_the_numpy_groups(monkeypatch, sort):
    """The counting sort (`xw_groups`) gives what the numpy code gives: the same codes (-1
    for a row with a missing key), the same rows in the same order, the same group bounds,
    on keys of every kind (small and wide integer ranges, uint64 ids, booleans, objects
    with missing values, a float with NaN), one to five of them, 0 to 20,000 rows."""
    rng = np.random.default_rng(31 + sort)
    for trial in range(80):
        n = int(rng.integers(0, 40)) if trial % 4 else int(rng.integers(0, 20000))
        pool = [
            rng.integers(0, 5, n),
            rng.integers(-3, 3, n) * 2**40,
            rng.integers(0, 2**63, n, dtype=np.uint64) | np.uint64(2**63)
            if trial % 5 == 0
            else rng.integers(0, 9, n, dtype=np.uint64) + np.uint64(2**62),
            rng.random(n) < 0.3,
            np.array([None if rng.random() < 0.1 else "ab"[int(rng.integers(0, 2))] for _ in range(n)], dtype=object),
            np.where(rng.random(n) < 0.1, np.nan, rng.integers(0, 3, n).astype(float)),
            rng.integers(0, 7 * n + 5000, n).astype(np.int32),
        ]
        keys = [pool[k] for k in rng.choice(len(pool), size=int(rng.integers(1, 6)))]
        dropna = bool(trial % 3)
        compiled = Groups(*keys, sort=sort, dropna=dropna)
        with monkeypatch.context() as m:
            m.setattr(native, "available", lambda: False)
            plain = Groups(*keys, sort=sort, dropna=dropna)
        assert compiled.codes.dtype == plain.codes.dtype == np.int64
        assert np.array_equal(compiled.codes, plain.codes), trial
        assert np.array_equal(compiled.order, plain.order), trial
        assert np.array_equal(compiled.starts, plain.starts) and np.array_equal(compiled.sizes, plain.sizes)
        assert compiled.n == plain.n


@pytest.mark.skipif(not native.available(), reason=f"the compiled loops are not built here: {native.why_not()}")
def test_compiled_groups_refuse_a_code_out_of_range():
    """`native.groups` answers None for a code past the table or below -1 (it never writes
    outside the arrays it was given); -1 rows are in no group."""
    assert native.groups(np.array([0, 3], np.int64), 3, False) is None
    assert native.groups(np.array([0, -2], np.int64), 3, False) is None
    code = np.array([2, -1, 0, 2], np.int64)
    starts, order = native.groups(code, 3, False)
    assert code.tolist() == [0, -1, 1, 0] and starts.tolist() == [0, 2, 3] and order.tolist() == [0, 3, 2]
    code = np.array([2, -1, 0, 2], np.int64)
    starts, order = native.groups(code, 3, True)
    assert code.tolist() == [1, -1, 0, 1] and starts.tolist() == [0, 1, 3] and order.tolist() == [2, 0, 3]
