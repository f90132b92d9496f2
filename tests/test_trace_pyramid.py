"""The trace's bucket pyramid, built level by level when a query first needs one, is the
pyramid built whole from the finest level up: same levels, same buckets, same choice."""

import numpy as np
import pytest

from xprof_widgets.analysis import trace as T

from .conftest import CORPUS_LOGDIRS, corpus_run

NAMES = sorted(CORPUS_LOGDIRS)


def _whole(tr):
    """Every level, finest first, as built before levels were lazy (finest up; the sparse
    finest ones dropped)."""
    g_start, g_end, row_off, t0 = tr._start, tr._end, tr._row_off, tr.start_ps
    n = len(g_start)
    span = int(g_end.max()) - t0 + 1
    rows = len(row_off) - 1
    shift = max(0, (T.EVENTS_PER_BUCKET * span // n).bit_length() - 1)
    head = np.zeros(n, dtype=bool)
    head[row_off[:-1]] = True
    levels = [T._Level(shift, *T._finest(g_start, g_end, head, t0, shift, 0))]
    top = max(shift, span.bit_length())
    while levels[-1].shift < top and len(levels[-1].first) > rows:
        levels.append(T._coarser(levels[-1], g_start, g_end, row_off[:-1], t0))
        if len(levels) == 2 and len(levels[0].first) > n // 2:
            levels.pop(0)
    return levels


def _chosen(levels, pixel):
    best = None
    for level in levels:
        if (1 << level.shift) <= pixel:
            best = level
    return best


def _same(a, b):
    if a is None or b is None:
        return a is None and b is None
    return a.shift == b.shift and all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ("first", "long", "top"))


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("order", ["coarse first", "fine first"])
def test_lazy_levels_are_the_whole_pyramid(name, order):
    tr = corpus_run(name).trace()
    if not tr.event_count:
        pytest.skip("no events")
    whole = _whole(tr)
    top = max(level.shift for level in whole) + 3
    pixels = [(1 << s) + extra for s in range(top) for extra in (0, (1 << s) // 3)]
    if order == "coarse first":
        pixels.reverse()
    # A fresh pyramid over the same events: levels come from the events or from finer ones.
    lazy = T._Pyramid(tr._start, tr._end, tr._row_off, tr.start_ps)
    for pixel in pixels:
        assert _same(lazy.level_for(pixel), _chosen(whole, pixel)), pixel


def test_levels_are_built_only_for_windows_read_from_them():
    tr = corpus_run("jax_transformer_cpu").trace()
    lazy = T.Trace.__new__(T.Trace)
    lazy.__dict__.update(tr.__dict__)
    lazy._pyramid = T._Pyramid(tr._start, tr._end, tr._row_off, tr.start_ps)
    span = tr.end_ps - tr.start_ps
    small = lazy.query(tr.start_ps + span // 2, tr.start_ps + span // 2 + span // 100_000, 2000)
    assert len(small) and lazy._pyramid.built() == []  # a few events: read from the events
    whole = lazy.query(None, None, 2000)
    assert [level.shift for level in lazy._pyramid.built()] == [
        min(int(span / 2000).bit_length() - 1, lazy._pyramid.coarsest)
    ]
    assert whole.equals(tr.query(None, None, 2000))


def _copy_with_fresh_pyramid(tr):
    lazy = T.Trace.__new__(T.Trace)
    lazy.__dict__.update(tr.__dict__)
    lazy._pyramid = T._Pyramid(tr._start, tr._end, tr._row_off, tr.start_ps)
    lazy._levels_thread = None
    return lazy


def test_levels_built_in_the_background_are_the_whole_pyramid(monkeypatch):
    """After a big trace's first view its other levels are built on a thread: from the
    events at the finest level windows of FINE_RAW_LIMIT / 8 events read, each coarser from
    the next finer; each is the level the whole pyramid has at its shift."""
    tr = corpus_run("jax_transformer_cpu").trace()
    expected = tr.query(None, None, 2000)
    monkeypatch.setattr(T, "BACKGROUND_LEVELS_EVENTS", 0)
    lazy = _copy_with_fresh_pyramid(tr)
    first = lazy.query(None, None, 2000)
    lazy._levels_thread.join(timeout=60)
    assert not lazy._levels_thread.is_alive() and not lazy._pyramid.building
    whole = {level.shift: level for level in _whole(tr)}
    built = lazy._pyramid.built()
    span = tr.end_ps - tr.start_ps + 1
    low = built[0].shift
    assert low == lazy._pyramid.finest or tr.event_count * 2000 * (1 << (low - 1)) < span * (T.FINE_RAW_LIMIT // 8)
    assert [level.shift for level in built] == list(range(low, lazy._pyramid.coarsest + 1))
    for level in built:
        assert _same(level, whole.get(level.shift)), level.shift
    assert first.equals(expected)
    thread = lazy._levels_thread
    lazy.query(None, None, 2000)  # one thread per trace
    assert lazy._levels_thread is thread


def test_a_query_reads_a_finer_level_while_levels_are_built():
    """While the background builds levels, a query whose level is not built yet reads one
    up to READ_FINER steps finer instead of waiting: the same boxes."""
    tr = corpus_run("jax_transformer_cpu").trace()
    span = tr.end_ps - tr.start_ps
    rng = np.random.default_rng(3)
    windows = [
        (tr.start_ps + int(f * span), width)
        for f, width in zip(rng.uniform(0, 0.5, 30), span // rng.integers(1, 40, 30))
    ]
    lazy = _copy_with_fresh_pyramid(tr)
    lazy._pyramid.building = True  # as while `build_all` runs (it is not started here)
    for start, width in windows:
        pixel = width / 2000
        shift = min(int(pixel).bit_length() - 1, lazy._pyramid.coarsest)
        finer = max(lazy._pyramid.finest, shift - T.READ_FINER)
        lazy._pyramid.level(finer)  # only a finer level is built
        got = lazy.query(start, start + width, 2000)
        assert got.equals(tr.query(start, start + width, 2000)), (start, width)


@pytest.mark.parametrize("shift", [0, 3, 20, 30, 31, 36, 44])
def test_finest_buckets_pick_the_first_longest_short_event(shift):
    """A bucket's top is its first longest event shorter than the bucket (the packed
    (duration, -position) max where both fit, else a max then a search): random rows,
    durations with ties, short and long ones, at bucket widths below and past 2**31 ps."""
    rng = np.random.default_rng(shift)
    for n in (1, 7, 300, 5000):
        width = 1 << shift
        start = np.sort(rng.integers(0, 50 * width + 50, n)).astype(np.int64)
        dur = rng.choice([0, 1, max(width // 2, 1), max(width - 1, 0), width, 3 * width], n).astype(np.int64)
        head = rng.random(n) < 0.05
        first, long_, top = T._finest(start, start + dur, head, 0, shift, 10)
        key = start >> shift
        new = head.copy()
        new[0] = True
        new[1:] |= key[1:] != key[:-1]
        heads = np.flatnonzero(new)
        assert np.array_equal(first, heads + 10)
        at, best = T._first_max(np.where(dur < width, dur, -1), heads)
        assert np.array_equal(top, np.where(best >= 0, at + 10, -1))
        ends = np.append(heads[1:], n)
        for b, (lo, hi) in enumerate(zip(heads, ends)):
            longs = np.flatnonzero(dur[lo:hi] >= width)
            assert long_[b] == (lo + longs[-1] + 10 if len(longs) else -1)
