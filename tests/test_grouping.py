"""Event grouping (steps) against XProf 2.24.2's own numbers."""

import json

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis import trace as T
from xprof_widgets.analysis.core import grouping as G
from xprof_widgets.analysis.core import intervals as I

from . import xprof_oracle as oracle
from .conftest import PROFILES, REFERENCE, profile_files


def _space(name):
    return xw.load_run(str(PROFILES / name)).xspace()


def _ref_step_table(name, run):
    tables = json.loads((REFERENCE / name / run / "input_pipeline_analyzer.json").read_text())
    table = next(t for t in tables if [c.get("id") for c in t.get("cols", [])][:1] == ["stepnum"])
    return pd.DataFrame([{"step_name": r["c"][0]["v"], "step_ms": r["c"][-1]["v"]} for r in table["rows"]])


@pytest.mark.parametrize(
    "name, run, n_steps",
    [
        ("tf_keras_cpu", "2026_11_22_03_16_48", 20),
        ("jax_mlp_cpu", "2026_11_22_03_11_56", 20),
        ("jax_transformer_cpu", "2026_11_22_03_13_20", 30),
    ],
)
def test_steps_match_input_pipeline_analyzer(name, run, n_steps):
    steps = G.step_events(_space(name))
    assert len(steps) == n_steps
    assert steps["group_id"].tolist() == list(range(n_steps))
    assert steps["step_num"].tolist() == list(range(n_steps))  # StepTraceAnnotation step_num
    assert (steps["step_name"] == "train " + steps["step_num"].astype(str)).all()
    # XProf's step table leaves out the first and last step; the rest are our
    # roots, same names, and the step time is the root's duration.
    ref = _ref_step_table(name, run)
    merged = ref.merge(steps, on="step_name", how="left")
    assert merged["group_id"].notna().all()
    assert len(ref) == n_steps - 2
    np.testing.assert_allclose(merged["duration_ps"] / 1e9, merged["step_ms"], atol=1e-6)


def test_tf_keras_first_run_both_runs():
    """The other tf_keras_cpu run (30 steps, no allocator events)."""
    space = xw.load_run(str(PROFILES / "tf_keras_cpu" / "plugins" / "profile" / "2026_11_22_03_16_08")).xspace()
    steps = G.step_events(space)
    ref = _ref_step_table("tf_keras_cpu", "2026_11_22_03_16_08")
    assert len(steps) == 30 and len(ref) == 28
    merged = ref.merge(steps, on="step_name", how="left")
    np.testing.assert_allclose(merged["duration_ps"] / 1e9, merged["step_ms"], atol=1e-6)


def test_group_ids_shape_and_roots():
    space = _space("tf_keras_cpu")
    groups = G.group_ids(space)
    for plane in space.planes:
        for i, line in enumerate(plane.lines):
            g = groups[(plane.name, i)]
            assert g.dtype == np.int64 and len(g) == len(line)
            assert g.min(initial=-1) >= -1
    steps = G.step_events(space)
    for s in steps.itertuples():
        assert groups[(s.plane, s.line)][s.event] == s.group_id
    # Everything nested in a step's root on the python thread is in its group.
    line = space.plane("/host:CPU").lines[steps["line"].iloc[0]]
    g = groups[("/host:CPU", steps["line"].iloc[0])]
    for s in steps.itertuples():
        inside = (line.start_ps >= s.start_ps) & (line.start_ps + line.event_duration_ps <= s.start_ps + s.duration_ps)
        assert (g[inside] == s.group_id).all()


def _allocator_events(space, groups):
    plane = space.plane("/host:CPU")
    frames = []
    for i, line in enumerate(plane.lines):
        names = np.asarray(line.names().astype(object))
        idx = np.flatnonzero(np.isin(names, ["MemoryAllocation", "MemoryDeallocation"]))
        if not len(idx):
            continue
        st = line.stats(names=["addr", "bytes_allocated"], events=idx)
        frames.append(
            pd.DataFrame(
                {
                    "t": line.start_ps[idx] - line.timestamp_ns * 1000,  # XProf's time offset
                    "addr": st["addr"].to_numpy().astype(np.uint64),
                    "alloc": names[idx] == "MemoryAllocation",
                    "heap": st["bytes_allocated"].to_numpy().astype(np.int64),
                    "group": groups[("/host:CPU", i)][idx],
                }
            )
        )
    ev = pd.concat(frames, ignore_index=True).sort_values("t", kind="stable").reset_index(drop=True)
    # XProf's memory profile fill rule: no group -> the last group before + 1.
    g = ev["group"].to_numpy()
    pos = np.maximum.accumulate(np.where(g != -1, np.arange(len(g)), -1))
    ev["step"] = np.where(g != -1, g, np.where(pos >= 0, g[np.maximum(pos, 0)], -1) + 1)
    return ev


def test_memory_profile_steps():
    space = _space("tf_keras_cpu")
    ev = _allocator_events(space, G.group_ids(space))
    ref = json.loads((REFERENCE / "tf_keras_cpu" / "2026_11_22_03_16_48" / "memory_profile.json").read_text())
    ref = ref["memoryProfilePerAllocator"]["bfc_cpu_allocator_for_gpu"]
    # The peak: XProf says step 13. The event itself (on a tf.data thread) is
    # in no group; the fill rule then gives it 13 (last group before it: 12).
    peak_t = int(ref["profileSummary"]["peakStatsTimePs"])
    peak = ev[
        (ev["t"] == peak_t)
        & ev["alloc"]
        & (ev["heap"] == int(ref["profileSummary"]["peakStats"]["heapAllocatedBytes"]))
    ]
    assert len(peak) == 1
    assert peak["group"].iloc[0] == -1
    assert peak["step"].iloc[0] == 13
    # Every snapshot of XProf's sampled timeline: same step.
    snaps = pd.DataFrame(
        [
            {
                "t": int(s["timeOffsetPs"]),
                "addr": np.uint64(int(s["activityMetadata"].get("address", 0))),
                "alloc": s["activityMetadata"]["memoryActivity"] == "ALLOCATION",
                "ref_step": int(s["activityMetadata"].get("stepId", 0)),
            }
            for s in ref["sampledTimelineSnapshots"]
        ]
    )
    m = snaps.merge(ev.drop_duplicates(["t", "addr", "alloc"]), on=["t", "addr", "alloc"], how="left")
    assert m["step"].notna().all()
    assert (m["step"] == m["ref_step"]).all()
    # Not all from the fill rule: allocations on the step's own threads
    # (python, tf_Compute) are grouped; tf.data threads' are not, in XProf too.
    assert (m["group"] >= 0).sum() > 50
    assert (ev["group"] >= 0).sum() > 1000


def test_file_group_ids_kept():
    """tf_gpu_multiworker carries group_id stats: XProf does not regroup, nor do we."""
    space = _space("tf_gpu_multiworker")
    assert G.is_grouped(space)
    groups = G.group_ids(space)
    plane = space.plane("/host:CPU")
    n_with = 0
    for i, line in enumerate(plane.lines):
        st = line.stats(names=["group_id"])
        g = groups[("/host:CPU", i)]
        if "group_id" in st:
            has = st["group_id"].notna().to_numpy()
            assert (g[has] == st["group_id"].to_numpy()[has].astype(np.int64)).all()
            assert (g[~has] == -1).all()
            n_with += has.sum()
    assert n_with > 1000
    assert G.step_events(space).empty
    # This 2020 profile predates root (`_r`) stats and has no TF loop: today's
    # algorithm finds no root in it, so a recomputation groups nothing.
    recomputed = G.group_ids(space, recompute=True)
    assert all((g == -1).all() for g in recomputed.values())


def test_ungrouped_tpu_profile():
    """The TPU path of XProf (step lines of TPU planes) is not reimplemented; no roots on the host."""
    space = _space("tpu_v6e_inference")
    assert not G.is_grouped(space)
    assert G.step_events(space).empty  # XProf: "No step marker observed"


def test_prev_enclosing():
    # [0,10) contains [1,5) contains [2,3); [6,9) in [0,10); [11,12) alone.
    start = np.array([0, 1, 2, 6, 11])
    end = np.array([10, 5, 3, 9, 12])
    assert I.prev_enclosing(end).tolist() == [-1, 0, 1, 0, -1]
    rng = np.random.default_rng(0)
    end = rng.integers(0, 50, 500)
    got = I.prev_enclosing(end)
    want = [max([j for j in range(i) if end[j] >= end[i]], default=-1) for i in range(len(end))]
    assert got.tolist() == want
    assert len(start)  # start only documents the example


@pytest.mark.parametrize("chunk", [1, 2, 7, 64, 499])
def test_prev_enclosing_in_pieces(chunk):
    """Piece by piece (and the events left over, recursively) == one piece, on nested,
    overlapping, tied, ascending and descending ends."""
    rng = np.random.default_rng(chunk)
    for case in range(60):
        end = rng.integers(-5, int(rng.integers(2, 300)), int(rng.integers(1, 2000)))
        if case % 4 == 1:
            end = np.sort(end)
        elif case % 4 == 2:
            end = np.sort(end)[::-1].copy()
        assert I.prev_enclosing(end, chunk).tolist() == I._prev_enclosing_piece(end).tolist()


@pytest.mark.parametrize("name", ["tf_keras_cpu", "jax_mlp_cpu"])
def test_every_event_against_xprof_trace_viewer(name, tmp_path):
    """Per event: our group id == the `group_id` XProf's trace viewer shows (needs XProf 2.24.2)."""
    import shutil
    import subprocess

    run = xw.load_run(str(PROFILES / name))
    src = sorted((PROFILES / name / "plugins" / "profile").glob("*/*.xplane.pb"))[-1]
    shutil.copy(src, tmp_path / src.name)
    code = (
        "import sys; from xprof.convert import raw_to_tool_data as r\n"
        f"out = r.xspace_to_tool_data([{str(tmp_path / src.name)!r}], 'trace_viewer', {{}})\n"
        "d = out[0] if isinstance(out, tuple) else out\n"
        f"open({str(tmp_path / 'tv.json')!r}, 'wb').write(d if isinstance(d, bytes) else d.encode())\n"
    )
    subprocess.run([oracle.python(), "-c", code], check=True, capture_output=True, timeout=300)
    trace = json.loads((tmp_path / "tv.json").read_text())["traceEvents"]
    threads = {e["tid"]: e["args"]["name"] for e in trace if e.get("name") == "thread_name"}
    ref = pd.DataFrame(
        [
            {
                "thread": threads.get(e["tid"]),
                "ts": round(e["ts"] * 1e6),
                "dur": round(e.get("dur", 0) * 1e6),
                "ref": int(e.get("args", {}).get("group_id", -1)),
            }
            for e in trace
            if e.get("ph") == "X"
        ]
    )
    space = run.xspace()
    groups = G.group_ids(space)
    ours = pd.concat(
        [
            pd.DataFrame(
                {
                    "thread": line.title,
                    "ts": line.start_ps,
                    "dur": line.event_duration_ps,
                    "ours": groups[(plane.name, i)],
                }
            )
            for plane in space.planes
            for i, line in enumerate(plane.lines)
            if len(line)
        ],
        ignore_index=True,
    )
    ours["ts"] += ref["ts"].min() - ours["ts"].min()  # the trace starts at the first event
    for df in (ours, ref):
        df["k"] = df.groupby(["thread", "ts", "dur"]).cumcount()
    m = ref.merge(ours, on=["thread", "ts", "dur", "k"], how="inner")
    assert len(m) > 0.5 * len(ref)  # the rest: XProf's synthetic threadpool regions
    assert (m["ref"] >= 0).sum() > 1000
    assert (m["ours"] == m["ref"]).all()


def _events(space, groups):
    """One row an event: plane, line id, start, duration, name, group id, and a rank among equals."""
    df = pd.concat(
        [
            pd.DataFrame(
                {
                    "plane": plane.name,
                    "line": line.id,
                    "ts": line.start_ps,
                    "dur": line.event_duration_ps,
                    "name": np.asarray(line.names().astype(object)),
                    "g": groups(plane, i, line),
                }
            )
            for plane in space.planes
            for i, line in enumerate(plane.lines)
            if len(line)
        ],
        ignore_index=True,
    )
    df["k"] = df.groupby(["plane", "line", "ts", "dur", "name"]).cumcount()
    return df


@pytest.mark.parametrize(
    "name, run",
    [
        ("jax_mlp_cpu", "2026_11_22_03_11_56"),
        ("jax_transformer_cpu", "2026_11_22_03_13_20"),
        ("tf_keras_cpu", "2026_11_22_03_16_08"),
        ("tf_keras_cpu", "2026_11_22_03_16_48"),
    ],
)
def test_every_event_against_xprof_grouped_space(name, run, tmp_path):
    """Per event, zero-length ones too: our group id == the `group_id` stat XProf writes.

    XProf's internal `_xplane.pb` tool returns the space it has preprocessed
    and grouped (`PreprocessSingleHostXSpace`), so this sees what its step
    converters see, beyond what the trace viewer shows (it hides the
    ThreadpoolListener markers). Its only extra events are the synthetic
    threadpool regions, all ungrouped (XProf 2.24.2 gives them no context).
    """
    import shutil
    import subprocess

    from xprof_widgets.io.xspace import read_xspace

    src = next((PROFILES / name / "plugins" / "profile" / run).glob("*.xplane.pb"))
    shutil.copy(src, tmp_path / src.name)
    out = tmp_path / "grouped.bin"
    code = (
        "from xprof.convert import _pywrap_profiler_plugin as p\n"
        f"d, ok = p.xspace_to_tools_data([{str(tmp_path / src.name)!r}], '_xplane.pb', {{}})\n"
        f"open({str(out)!r}, 'wb').write(d)\n"
    )
    subprocess.run([oracle.python(), "-c", code], check=True, capture_output=True, timeout=300)
    space = xw.load_run(str(PROFILES / name / "plugins" / "profile" / run)).xspace()
    groups = G.group_ids(space)
    ours = _events(space, lambda plane, i, line: groups[(plane.name, i)])

    def file_groups(plane, i, line):
        t = line.stat_table(names=["group_id"])
        return np.where(t.present("group_id"), t.int_column("group_id"), -1)

    ref = _events(read_xspace(out), file_groups)
    m = ref.merge(ours, on=["plane", "line", "ts", "dur", "name", "k"], how="left", suffixes=("_ref", "_ours"))
    extra = m["g_ours"].isna()
    assert (m.loc[extra, "name"] == T.REGION).all()
    assert (m.loc[extra, "g_ref"] == -1).all()
    assert len(m) - extra.sum() == len(ours)
    assert (m.loc[~extra, "g_ref"] == m.loc[~extra, "g_ours"]).all()
    assert (m["g_ref"] >= 0).sum() > 1000
    # is_eager: XProf puts the stat on TF op runs and kernel executions (0 or 1); ours marks the 1s.
    nodes = G._Nodes(space, keep_all=True)  # every event a node: each target marked
    targets = G._eager_targets(nodes)
    bounds = np.searchsorted(nodes.line, np.arange(len(nodes.lines) + 1))
    target_mask = {}
    for k, key in enumerate(nodes.lines):
        mask = np.zeros(len(space.plane(key[0]).lines[key[1]]), bool)
        mask[nodes.event_of(np.arange(bounds[k], bounds[k + 1]))] = targets[bounds[k] : bounds[k + 1]]
        target_mask[key] = mask
    eager = G.eager_events(space)
    ours_e = _events(
        space, lambda plane, i, line: np.where(target_mask[(plane.name, i)], eager[(plane.name, i)].astype(int), -1)
    )

    def file_eager(plane, i, line):
        t = line.stat_table(names=[G.IS_EAGER])
        return np.where(t.present(G.IS_EAGER), (t.int_column(G.IS_EAGER) != 0).astype(int), -1)

    me = _events(read_xspace(out), file_eager).merge(
        ours_e, on=["plane", "line", "ts", "dur", "name", "k"], suffixes=("_ref", "_ours")
    )
    assert len(me) == len(ours_e)
    assert (me["g_ref"] == me["g_ours"]).all()
    if name.startswith("tf"):
        assert (me["g_ref"] == 0).sum() > 1000  # TF op runs, none eager (EagerExecute is_func 0 runs no TF op)
    if name.startswith("jax"):
        # The zero-length StartRegion markers of pool workers join the step that scheduled them.
        starts = m[m["name"] == T.START_REGION]
        assert (starts["g_ref"] >= 0).any() and (starts["g_ref"] == starts["g_ours"]).all()


def test_row_codes_number_distinct_rows_densely():
    """Small-range columns combined directly, wide ones hashed, and the combination re-hashed
    when it would overflow: equal rows get one number, distinct rows distinct numbers, and
    the numbers are 0 to the count of distinct rows - 1 (in no set order)."""
    rng = np.random.default_rng(3)
    for case in range(20):
        n = int(rng.integers(1, 3000))
        columns = [
            rng.integers(-3, 4, n),  # small range
            rng.integers(0, 2**62, n) % int(rng.integers(1, 50)) * 2**40,  # wide range, few values
            rng.integers(0, 2**63 - 1, n) if case % 2 else rng.integers(0, 5, n),  # all distinct or small
        ]
        if case % 3 == 0:  # four ranges just under 2**20: their product overflows
            columns += [rng.choice([0, 2**20 - 2], n) for _ in range(4)]
        rows = list(zip(*(c.tolist() for c in columns)))
        codes = G._row_codes(*columns).tolist()
        code_of = dict(zip(rows, codes))
        assert [code_of[r] for r in rows] == codes  # equal rows, one number
        assert sorted(code_of.values()) == list(range(len(code_of)))  # distinct rows, distinct numbers


def test_join_edges_take_the_last_parent_of_each_key():
    """Edges from parents to children with equal stats (XProf's map from the keys to a
    parent: the last one written wins), against a plain walk, on one key and two."""
    rng = np.random.default_rng(3)

    class Nodes:
        stat: dict = {}

    for _ in range(300):
        n = int(rng.integers(1, 60))
        nodes = Nodes()
        keys = ["id", "iter_num"][: int(rng.integers(1, 3))]
        nodes.stat = {}
        for k in keys:
            has = np.flatnonzero(rng.random(n) < 0.8)
            nodes.stat[k] = G._Stat(has.astype(np.int64), rng.integers(0, 5, len(has)).astype(np.int64))
        parents = np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False))
        children = np.sort(rng.choice(n, int(rng.integers(0, n + 1)), replace=False))
        value = {k: dict(zip(s.events.tolist(), s.values.tolist())) for k, s in nodes.stat.items()}

        def key(node, value=value, keys=keys):
            return tuple(value[k].get(node) for k in keys)

        last = {}
        for p in parents.tolist():
            if None not in key(p):
                last[key(p)] = p
        want = sorted(((last[key(c)], c) for c in children.tolist() if key(c) in last), key=lambda e: (e[0], e[1]))
        got = G._join_edges(nodes, parents, children, keys)
        assert list(zip(*got.tolist())) == want


def test_group_ids_of_some_events_of_a_line_equal_the_line_ids():
    """`of_line_at` (the memory profile's steps of a Python tracer line's allocator events)
    gives `of_line(...)[events]` without making the line's ids where they are made when
    asked; a line missing or of another length reads `fill`."""
    from xprof_widgets.analysis.core.grouping import group_ids, of_line, of_line_at

    from .conftest import VENDORED

    space = xw.load_run(VENDORED / "nvidia_jax_mlp_no_graphs_h200").xspace()
    groups = group_ids(space)
    rng = np.random.default_rng(3)
    lazy = 0
    for plane_name, li in list(groups):
        plane = space.plane(plane_name)
        events = rng.integers(0, len(plane.lines[li]), 500)
        was_lazy = groups.nodes_of((plane_name, li)) is not None
        got = of_line_at(groups, plane, li, events, -1)
        assert was_lazy == (groups.nodes_of((plane_name, li)) is not None)  # (not made)
        lazy += was_lazy
        want = of_line(groups, plane, li, -1)[events]
        assert got.dtype == np.int64 and got.tolist() == want.tolist()
    assert lazy >= 1
    host = space.plane("/host:CPU")
    li = host.busy_lines[0][0]
    assert of_line_at({}, host, li, np.arange(3), -7).tolist() == [-7, -7, -7]  # (a line the table lacks)


@pytest.mark.parametrize("path", profile_files(), ids=lambda p: f"{p.parts[-5]}/{p.parts[-2]}/{p.name}")
def test_a_file_without_roots_is_not_grouped_and_gets_what_the_pass_would_give(path):
    """`_groups_nothing` reads the planes' metadata only. Where it says the file has nothing
    to group, the whole pass (`_forest`, made here) gives every event -1, no step, no eager
    event, no link: the same as the mapping served without it, line for line. Where it
    says otherwise, the pass's groups are what the tests above compare with XProf's."""
    space = xw.load_run(str(path), cache=False).xspace()
    nodes, group, steps, eager, links = G._forest(space)
    full = G._split(nodes, group)
    if not G._groups_nothing(space):  # roots or EagerExecute: the pass runs (its groups are checked above)
        assert not isinstance(G.group_ids(space), G._NoGroups)
        return
    assert (group == -1).all() and steps.empty and len(eager) == 0 and links.value().empty
    quick, table, marks, no_links = G._ungrouped(space)
    assert set(quick) == set(full) and len(quick) == len(full)
    for key in full:
        assert quick.length(*key) == full.length(*key)
        assert (quick[key] == -1).all() and len(quick[key]) == len(full[key])
        assert quick.at(key, np.arange(min(3, quick.length(*key)))).tolist() == [-1] * min(3, quick.length(*key))
    assert list(table.columns) == list(G._step_table(nodes, steps).columns) and table.empty
    assert marks == {} and no_links.value().empty
    assert G.group_ids(space) is not None and isinstance(G.group_ids(space), G._NoGroups)


def test_files_with_step_markers_or_eager_ops_are_grouped():
    """The other side: a JAX run with `StepTraceAnnotation` (`_r`) and TF runs (executor
    loops, `EagerExecute`) are not taken for files without roots, and their groups exist."""
    for name in ("jax_mlp_cpu", "tf_keras_cpu"):
        space = _space(name)
        assert not G._groups_nothing(space)
        assert not G.step_events(space).empty


def test_gpu_read_ahead_is_marked_once_per_file(monkeypatch):
    """The GPU planes' `read_ahead` is set at the first grouping question and never again:
    every plane's forward fill asks for the groups, and a walk over all planes at each
    ask was quadratic (20,000 one-kernel planes: 80 s of a 6 s overview)."""
    space = _space("amd_jax_conv_mi300")
    calls = []
    mark = G._mark_read_ahead
    monkeypatch.setattr(G, "_mark_read_ahead", lambda s: calls.append(s) or mark(s))
    planes = [p for p in space.planes if p.name.startswith("/device:GPU:")]
    assert len(planes) > 1
    for plane in planes:
        G.forward_filled_group_ids(space, plane)
    G.group_ids(space)
    assert calls == [space]
    assert all(p.read_ahead == G._GPU_READ_AHEAD for p in planes)
