"""The trace model (`run.trace()`): layout against XProf's, rows, window queries
against a brute-force answer, event details, search."""

import json
import re

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis import trace as T

from .conftest import PROFILES, REFERENCE

SMALL = ["jax_mlp_cpu", "tf_keras_cpu", "tf_gpu_multiworker", "tpu_v6e_inference"]
ALL = SMALL + ["jax_transformer_cpu"]

# Lines XProf derives when it loads a TPU profile (xprof/utils/derived_timeline.cc):
# they are not in the file, and not reproduced here.
DERIVED_BY_XPROF = ("Steps", "Framework Ops", "Framework Name Scope", "Source code", "Host Offload Ops")

_RUNS = {}


def _run(name, run_dir=None):
    key = (name, run_dir)
    if key not in _RUNS:
        path = PROFILES / name if run_dir is None else PROFILES / name / "plugins" / "profile" / run_dir
        _RUNS[key] = xw.load_run(path)
    return _RUNS[key]


def _trace(name, run_dir=None):
    return _run(name, run_dir).trace()


def _shown_names(plane, metadata_id):
    """Each event's name as XProf shows it: the metadata's display name, else its name."""
    md = plane.event_metadata
    shown = np.where(md["display_name"] != "", md["display_name"], md["name"]).astype(str)
    return pd.Series(shown, index=md["id"]).reindex(metadata_id).fillna("").to_numpy(dtype=str)


def _reference_runs():
    for name in ALL:
        for refdir in sorted((REFERENCE / name).iterdir()):
            yield pytest.param(name, refdir.name, id=f"{name}-{refdir.name}")


# --- layout -------------------------------------------------------------------------


@pytest.mark.parametrize("name, run_dir", list(_reference_runs()))
def test_track_counts_equal_xprofs(name, run_dir):
    """Per-track event counts equal those of XProf's trace (trace_viewer_summary.json).

    The file's own counts differ from XProf's on many lines, for two rules XProf
    applies (and so do we, `tracks.events` against `tracks.file_events`):
    it drops the allocator / tf.data bookkeeping events (`IsInternalEvent`:
    MemoryAllocation, MemoryDeallocation, *Produce, *Consume), and its
    preprocessing adds a ThreadpoolListener::Region per StopRegion after a
    StartRegion (jax_mlp_cpu tf_XLAEigen: 2298 in the file + 630 regions = 2928;
    TPU main/3116817: 2461 - 39 allocator events = 2422). What remains:
    * XProf lines absent here: the TPU lines it derives at load time (not in the file);
    * lines here absent from XProf's summary: `Async XLA Ops`, which its
      non-streaming converter skips (xplane_to_trace_events.cc) and its
      streaming viewer shows; and lines whose every event is internal.
    """
    ref = json.loads((REFERENCE / name / run_dir / "trace_viewer_summary.json").read_text())["event_counts_by_track"]
    tr = _trace(name, run_dir)
    ours = {f"{t.section} :: {t.name}": t.events for t in tr.tracks.itertuples()}
    for key, count in ref.items():
        line = key.split(" :: ", 1)[1]
        if key in ours:
            assert ours[key] == count, key
        else:
            assert line.startswith(DERIVED_BY_XPROF), key
    for key in set(ours) - set(ref):
        assert key.endswith(" :: " + T.ASYNC_OPS_LINE), key
    assert sum(ours[k] for k in ref if k in ours) == sum(c for k, c in ref.items() if k in ours)


@pytest.mark.parametrize("name", SMALL)
def test_track_counts_follow_the_rules(name):
    """events = the line's events - internal events + regions, counted from the file independently."""
    tr = _trace(name)
    space = tr.space
    for t in tr.tracks.itertuples():
        plane = space.planes[t.plane]
        line = plane.lines[t.line]
        names = np.asarray(line.names().astype(object), dtype=object)
        internal = int(np.isin(names, list(T.INTERNAL_EVENTS)).sum())
        md_names = set(plane.event_metadata["name"])
        regions = 0
        if T.START_REGION in md_names and T.STOP_REGION in md_names:
            c = line.stats(names=["_c"])
            has_c = ~pd.isna(c["_c"]).to_numpy() if "_c" in c else np.zeros(len(line), bool)
            opened = np.cumsum((names == T.START_REGION) & has_c) > 0
            regions = int(((names == T.STOP_REGION) & opened).sum())
        assert t.file_events == len(line)
        assert t.events == len(line) - internal + regions, (t.section, t.name)


def test_the_examples_of_the_brief():
    tr = _trace("jax_mlp_cpu")
    t = tr.tracks.set_index("name").loc["tf_XLAEigen/-8162776476874972113"]
    assert (t.file_events, t.events) == (2298, 2928)
    tr = _trace("tpu_v6e_inference")
    t = tr.tracks.set_index("name").loc["main/3116817"]
    assert (t.file_events, t.events) == (2461, 2422)
    assert "Overlay" not in set(tr.tracks["name"])  # no events: no track (XProf skips empty lines)


@pytest.mark.parametrize("name", SMALL)
def test_sections_and_track_order(name):
    """Devices first (by XProf's pid: 1 + plane id), the host last; threads by display id as uint32."""
    tr = _trace(name)
    tracks = tr.tracks
    assert tracks["pid"].is_monotonic_increasing
    for _, group in tracks.groupby("pid"):
        assert group["tid"].is_monotonic_increasing
    sections = list(dict.fromkeys(tracks["section"]))
    assert sections[-1] == "/host:CPU"
    assert all(s.startswith("/device:") for s in sections[:-1])
    kept = {p.name for p in tr.space.planes if p.name.startswith(("/device:", "/host:CPU")) and any(map(len, p.lines))}
    assert set(sections) == kept
    assert tr.event_count == tracks["events"].sum()


# --- rows ------------------------------------------------------------------------------


def _packed_rows(start, end):
    """XProf's trace viewer packer: each event in the first row whose last event has ended."""
    rows, out = [], np.empty(len(start), dtype=np.int64)
    for i, (s, e) in enumerate(zip(start.tolist(), end.tolist())):
        r = next((r for r, last in enumerate(rows) if last <= s), len(rows))
        if r == len(rows):
            rows.append(0)
        rows[r] = e
        out[i] = r
    return out


@pytest.mark.parametrize("name", SMALL)
def test_rows(name):
    """No two events of a row overlap; rows are XProf's packing where events nest properly;
    the extra rows hold only events that start inside an earlier event and outlive it."""
    tr = _trace(name)
    for t in tr.tracks.itertuples():
        ev = tr.events(t.Index)
        s, e, row = ev["start_ps"].to_numpy(), ev["end_ps"].to_numpy(), ev["row"].to_numpy()
        assert (np.diff(s) >= 0).all()
        by_row = np.lexsort((s, row))
        same = row[by_row][1:] == row[by_row][:-1]
        assert not (same & (s[by_row][1:] < e[by_row][:-1])).any(), (t.section, t.name)
        assert row.max() + 1 == t.rows
        nested = row < t.nesting_rows
        if t.nesting_rows == t.rows:
            np.testing.assert_array_equal(row, _packed_rows(s, e))
        for i in np.flatnonzero(~nested):
            earlier = np.flatnonzero((s[:i] <= s[i]) & (e[:i] > s[i]) & (e[:i] < e[i]))
            assert len(earlier), (t.section, t.name, i)


def test_rows_of_improperly_nested_events():
    """jax's step annotation ("train") starts inside a Python frame and outlives it:
    it goes to the extra row, and the frames after it keep their nesting rows."""
    tr = _trace("jax_mlp_cpu")
    python = int(tr.tracks.index[tr.tracks["name"] == "python"][0])
    t = tr.tracks.loc[python]
    assert t.rows == t.nesting_rows + 1
    ev = tr.events(python)
    extra = ev[ev["row"] >= t.nesting_rows]
    assert set(extra["name"]) == {"train"}
    assert len(extra) == (ev["name"] == "train").sum() - (ev.loc[ev["name"] == "train", "row"] < t.nesting_rows).sum()


def test_open_count_with_ties_and_zero_lengths():
    start = np.array([0, 0, 0, 5, 5, 5, 10, 10], dtype=np.int64)
    dur = np.array([20, 10, 0, 3, 0, 0, 0, 5], dtype=np.int64)
    order = np.lexsort((-dur, start))
    start, dur = start[order], dur[order]
    out_s, out_e = np.empty(8, np.int64), np.empty(8, np.int64)
    order, row, extra = T._rows(start, dur, out_s, out_e)
    rows = np.empty(8, np.int64)
    rows[order] = row
    np.testing.assert_array_equal(rows, _packed_rows(start, start + dur))
    assert extra == 0


# --- the viewport query -------------------------------------------------------------------


_EVENTS = {}


def _all_events(tr):
    """Every event of the trace in one frame: track, index, row, start_ps, end_ps, name (str)."""
    if id(tr) not in _EVENTS:
        frames = [tr.events(t).reset_index().assign(track=t) for t in tr.tracks.index]
        ev = pd.concat(frames, ignore_index=True)
        _EVENTS[id(tr)] = ev.assign(name=ev["name"].astype(str), dur=ev["end_ps"] - ev["start_ps"])
    return _EVENTS[id(tr)]


def _in_window(ev, ws, we):
    return ev[(ev["start_ps"] < we) & ((ev["end_ps"] > ws) | (ev["start_ps"] >= ws))]


def _brute(tr, ws, we, resolution):
    """The boxes the query promises, from all events, row by row, in pandas."""
    px = (we - ws) / resolution
    ev = _in_window(_all_events(tr), ws, we).assign(count=1).sort_values(["track", "row", "start_ps"])
    single = ev[ev["dur"] >= px]
    short = ev[ev["dur"] < px].copy()
    new_row = (short["row"] != short["row"].shift()) | (short["track"] != short["track"].shift())
    gap = (short["start_ps"] - short["end_ps"].shift()).fillna(np.inf)
    short["run"] = (new_row | (gap >= px)).cumsum()
    g = short.groupby("run", sort=True)
    size = g.size().to_numpy()
    longest = short.loc[g["dur"].idxmax()]  # the first of equals
    merged = pd.DataFrame({
        "track": g["track"].first().to_numpy(), "row": g["row"].first().to_numpy(),
        "start_ps": g["start_ps"].first().to_numpy(), "end_ps": g["end_ps"].last().to_numpy(), "count": size,
        "index": np.where(size == 1, longest["index"].to_numpy(), -1), "name": longest["name"].to_numpy(),
    })
    cols = ["track", "row", "start_ps", "end_ps", "count", "index", "name"]
    out = pd.concat([single[cols], merged[cols]], ignore_index=True)
    return out.sort_values(["track", "row", "start_ps"], kind="stable", ignore_index=True)


def _windows(tr, n, seed):
    rng = np.random.default_rng(seed)
    span = tr.end_ps - tr.start_ps
    yield None, None
    for _ in range(n):
        width = int(span / 10 ** rng.uniform(0, 4)) + 1
        start = tr.start_ps + int(rng.uniform(-0.1, 1) * span)
        yield start, start + width


@pytest.mark.parametrize("name", SMALL)
@pytest.mark.parametrize("path", ["events", "pyramid"])
def test_query_equals_brute_force(name, path):
    """Every event >= 1 px once as itself, the rest merged into runs with sub-pixel gaps,
    named after their longest event: equal to a brute-force answer, from the events or
    from the bucket pyramid, on random windows and resolutions."""
    tr = _trace(name)
    rng = np.random.default_rng(1)
    for start, end in _windows(tr, 12, seed=len(name)):
        resolution = int(rng.choice([37, 800, 2000]))
        q = tr.query(start, end, resolution, raw_limit=T.RAW_LIMIT if path == "events" else 0)
        ws = tr.start_ps if start is None else start
        we = tr.end_ps + 1 if end is None else end
        expected = _brute(tr, ws, we, resolution)
        got = q.astype({"name": str, "track": np.int64, "row": np.int64, "count": np.int64, "index": np.int64})
        pd.testing.assert_frame_equal(got, expected.astype(got.dtypes.to_dict()), check_dtype=False)


@pytest.mark.parametrize("name", SMALL)
def test_query_invariants(name):
    tr = _trace(name)
    rows_total = int(tr.tracks["rows"].sum())
    for start, end in _windows(tr, 4, seed=7):
        for resolution in (50, 2000):
            q = tr.query(start, end, resolution)
            assert len(q) <= 2 * rows_total * (resolution + 1)
            ws = tr.start_ps if start is None else start
            we = tr.end_ps + 1 if end is None else end
            px = (we - ws) / resolution
            ev = _in_window(_all_events(tr), ws, we)
            # counts add up per row to the events in the window
            pd.testing.assert_series_equal(q.groupby(["track", "row"])["count"].sum(),
                                           ev.groupby(["track", "row"]).size(), check_names=False, check_dtype=False,
                                           check_index_type=False)
            # every event >= 1 px is there, once, as itself
            wide = ev[ev["dur"] >= px].set_index(["track", "index"])
            real = q[q["index"] >= 0].astype({"track": np.int64, "index": np.int64}).set_index(["track", "index"])
            assert real.index.is_unique
            got = real.loc[wide.index]
            np.testing.assert_array_equal(got["start_ps"], wide["start_ps"])
            np.testing.assert_array_equal(got["end_ps"], wide["end_ps"])
            assert (got["count"] == 1).all()


def test_query_bounded_by_pixels_not_events():
    """818,906 events: the whole-profile answer is bounded by rows x pixels, and reading
    the pyramid gives the same boxes as reading every event."""
    tr = _trace("jax_transformer_cpu")
    for resolution in (100, 1000):
        fast = tr.query(resolution=resolution)
        slow = tr.query(resolution=resolution, raw_limit=10**9)
        assert len(fast) <= 2 * int(tr.tracks["rows"].sum()) * (resolution + 1)
        assert fast["count"].sum() == tr.event_count
        pd.testing.assert_frame_equal(fast, slow)
    # every level of the pyramid against the events themselves, names included
    rng = np.random.default_rng(5)
    span = tr.end_ps - tr.start_ps
    for zoom in range(12):
        width = span >> zoom
        start = tr.start_ps + int(rng.uniform(0, span - width))
        resolution = int(rng.integers(200, 3000))
        pd.testing.assert_frame_equal(tr.query(start, start + width, resolution, raw_limit=0),
                                      tr.query(start, start + width, resolution, raw_limit=10**9))


def test_query_tracks_and_empty_windows():
    tr = _trace("tpu_v6e_inference")
    q = tr.query(tracks=[0, 1])
    assert set(q["track"]) == {0, 1}
    assert tr.query(tracks=[]).empty
    assert tr.query(tr.end_ps + 10, tr.end_ps + 20).empty
    assert tr.query(tr.start_ps + 10, tr.start_ps).empty
    assert list(q.columns) == T.QUERY_COLUMNS


# --- details and search --------------------------------------------------------------------


@pytest.mark.parametrize("name", SMALL)
def test_event_details_equal_the_file(name):
    tr = _trace(name)
    rng = np.random.default_rng(3)
    tracks = tr.tracks.iloc[np.unique(np.linspace(0, len(tr.tracks) - 1, 10).astype(int))]
    for t in tracks.itertuples():
        ev = tr.events(t.Index)
        line = tr.space.planes[t.plane].lines[t.line]
        shown = _shown_names(line.plane, line.metadata_id)
        for index in rng.choice(len(ev), size=min(3, len(ev)), replace=False).tolist():
            d = tr.event(t.Index, index)
            assert (d["start_ps"], d["end_ps"], d["row"], d["name"]) == (
                ev.at[index, "start_ps"], ev.at[index, "end_ps"], ev.at[index, "row"], ev.at[index, "name"])
            if d["synthetic"]:
                assert d["name"] == T.REGION and d["stats"]["_ct"] == T.THREADPOOL_CONTEXT
                continue
            src = int(np.flatnonzero((line.start_ps == d["start_ps"]) & (line.event_duration_ps == d["duration_ps"])
                                     & (shown == d["name"]))[0])
            expected = line.stats(events=[src]).iloc[0]
            expected = {k: (v.item() if hasattr(v, "item") else v) for k, v in expected.items()
                        if not (v is None or v is pd.NA or (isinstance(v, float) and np.isnan(v)))}
            assert d["stats"] == expected


def test_event_details_cpu_thunk():
    """XLA:CPU thunks carry hlo_op / hlo_module / program_id: op `dot.1` of module `jit_step(30)`."""
    tr = _trace("jax_mlp_cpu")
    m = tr.search("^dot.1$", regex=True)
    assert len(m) == 20
    d = tr.event(m["track"].iloc[0], m["index"].iloc[0])
    assert (d["hlo_op"], d["program"], d["program_id"]) == ("dot.1", "jit_step(30)", 30)
    assert d["stats"]["hlo_module"] == "jit_step" and d["stats"]["program_id"] == 30


def test_event_details_tpu_op_and_module():
    """On TPU the XLA Ops event is the op; the XLA Modules event around it is the module."""
    tr = _trace("tpu_v6e_inference")
    tracks = tr.tracks
    ops = int(tracks.index[(tracks["section"] == "/device:TPU:0") & (tracks["name"] == "XLA Ops")][0])
    modules = int(tracks.index[(tracks["section"] == "/device:TPU:0") & (tracks["name"] == "XLA Modules")][0])
    mod = tr.events(modules)
    for index in (0, 3, 500, 1503):
        d = tr.event(ops, index)
        assert d["hlo_op"] == d["name"] and d["long_name"].startswith(f"%{d['name']} = ")
        around = mod[(mod["start_ps"] <= d["start_ps"]) & (mod["end_ps"] > d["start_ps"])]
        assert d["program"] == around["name"].iloc[0]
        assert d["program"].endswith(f"({d['program_id']})")
    assert tr.event(modules, 0)["program"] == mod["name"].iloc[0]


def test_event_of_a_synthetic_region():
    tr = _trace("jax_mlp_cpu")
    m = tr.search(T.REGION)
    assert len(m) == (tr.tracks["events"] - tr.tracks["file_events"]).sum()
    d = tr.event(m["track"].iloc[0], m["index"].iloc[0])
    assert d["synthetic"] and d["stats"]["_ct"] == T.THREADPOOL_CONTEXT and d["stats"]["_c"] is not None
    with pytest.raises(IndexError):
        tr.event(0, 10**9)


@pytest.mark.parametrize("name", SMALL)
def test_search_equals_brute_force(name):
    tr = _trace(name)
    for pattern, regex in (("fusion", False), ("DOT", False), ("^Iterator::", True), ("step", False), ("zz#", False)):
        m = tr.search(pattern, regex=regex)
        rx = re.compile(pattern if regex else re.escape(pattern), re.IGNORECASE)
        expected = sum(sum(1 for n in tr.events(t)["name"].astype(str) if rx.search(n)) for t in tr.tracks.index)
        assert len(m) == expected
        assert m["start_ps"].is_monotonic_increasing
        for row in m.head(3).itertuples():
            assert rx.search(tr.event(row.track, row.index)["name"])


def test_search_next_and_previous():
    tr = _trace("jax_mlp_cpu")
    m = tr.search("^train$", regex=True)
    assert len(m) == 20  # one step annotation per step
    first = m.next_match(tr.start_ps - 1)
    assert first["start_ps"] == m["start_ps"].min()
    second = m.next_match(first["start_ps"])
    assert second["start_ps"] > first["start_ps"]
    assert m.prev_match(second["start_ps"])["start_ps"] == first["start_ps"]
    assert m.prev_match(first["start_ps"]) is None and m.next_match(tr.end_ps) is None


def test_names_from_the_file():
    """Events' names are the metadata's display names (else names), as XProf shows them."""
    for name in ("tpu_v6e_inference", "jax_mlp_cpu"):
        tr = _trace(name)
        for t in tr.tracks.itertuples():
            if t.events != t.file_events:
                continue
            line = tr.space.planes[t.plane].lines[t.line]
            ev = tr.events(t.Index)
            order = np.lexsort((-line.event_duration_ps, line.start_ps))
            np.testing.assert_array_equal(ev["name"].astype(str).to_numpy(),
                                          _shown_names(line.plane, line.metadata_id)[order])


def test_run_trace_is_built_once_per_host():
    run = _run("tf_gpu_multiworker")
    assert run.trace() is run.trace() is run.trace(run.hosts[0])
    other = run.trace(run.hosts[1])
    assert other is not run.trace() and other.space.host == run.hosts[1]


# --- the widget on this model ------------------------------------------------------------


def test_trace_viewer_widget_state():
    run = xw.load_run(PROFILES / "tpu_v6e_inference")
    w = xw.TraceViewerWidget(run)
    assert set(w.figures) == {"timeline"} and f"{run.trace().event_count:,} events" in w.html
    content, cols = w.on_request("view", {"x_start": 0.0, "x_end": 10.0, "width_px": 800})
    assert content["boxes"] == len(cols["x0"]) and w.window_ps[0] == run.trace().start_ps
    # search outlines the matches and selects the first; its op card shows for an XLA op
    m = w.find("copy-done")
    assert len(m) and w.selected_event["hlo_op"].startswith("copy-done")
    assert 'data-testid="op-card"' in w.html and "copy-done" in w.html
    # a tap on an event selects it; a box selection measures its span
    q = run.trace().query(None, None, 800)
    first = q[q["index"] >= 0].iloc[0]
    w.selected = {"source": "events", "ids": [float(first.track * 2**32 + first["index"])], "index": 0}
    assert w.selected_event["index"] == first["index"]
    two = q[q["index"] >= 0].iloc[:2]
    w.selected = {"source": "events", "ids": [float(t * 2**32 + i) for t, i in zip(two.track, two["index"])]}
    assert 'data-testid="measure"' in w.html
    # names from the profile are escaped
    assert "<script" not in w.html
