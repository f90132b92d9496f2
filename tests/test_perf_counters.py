"""XProf's performance counters tool against XProf 2.24.2 itself: every sample of a TPU run
whose TensorCores recorded hardware counters (made from the real v6e file by
`tools/make_tpu_profiles.py counters`, a `_counters_` line per core), and none, with the
reason, on every corpus run; `run.tools` offers it exactly where XProf lists it."""

import numpy as np
import pytest

import xprof_widgets as xw
from tests import xprof_oracle
from tests.conftest import corpus_run, first_sessions, host_copies, session_files
from tests.test_tpu_steps import make_tpu_profiles
from xprof_widgets.io import schema


@pytest.fixture(scope="module")
def counters(tmp_path_factory):
    root = tmp_path_factory.mktemp("counters")
    path = make_tpu_profiles.write("counters", root)
    return path, xw.load_run(root)


def test_every_counter_sample_equals_xprof(counters):
    path, run = counters
    d = xprof_oracle.tool_data([path], "perf_counters")
    assert [c["id"] for c in d["cols"]] == [
        "Host",
        "Chip",
        "Kernel",
        "Sample",
        "Counter",
        "Value",
        "Description",
        "Set",
    ]
    theirs = [[c.get("v") for c in r["c"]] for r in d["rows"]]
    hexes = [r["c"][5]["f"] for r in d["rows"]]
    ours = run.perf_counters()
    # 4 cores, 11 samples (10 in `_counters_`, one of a kernel), every counter in each.
    assert len(ours) == len(theirs) == 4 * 11 * len(make_tpu_profiles.COUNTERS)
    for (_, r), t, h in zip(ours.iterrows(), theirs, hexes):
        assert [r["host"], r["chip"], r["kernel"], r["sample"], r["counter"], r["description"], r["set"]] == [
            t[0],
            t[1],
            t[2],
            t[3],
            t[4],
            t[6],
            t[7],
        ]
        assert int(r["value"]) == pytest.approx(t[5]) and r["value_hex"] == h
    assert "perf_counters" in run.tools and "perf_counters" in xprof_oracle.tool_names([path])


def test_the_widget_shows_the_samples_and_their_sums(counters):
    _, run = counters
    w = xw.PerfCountersWidget(run)
    t = run.perf_counters()
    assert f'data-testid="counter-samples" data-rows="{len(t)}"' in w.html
    hbm = next(c for c in t["counter"] if "hbm" in c)
    sums = t[t["counter"] == hbm].groupby("chip")["value"].sum()
    assert all(f"<td class=num>{v:,.0f}</td>" in w.html for v in sums.astype(float))
    w.counter = "HBM"
    assert f'data-testid="counter-samples" data-rows="{int(t.counter.str.contains("hbm").sum())}"' in w.html


RUNS = first_sessions()


@pytest.mark.parametrize("name,session", RUNS, ids=[f"{n}/{s}" for n, s in RUNS])
def test_no_counters_on_the_corpus(name, session):
    run = corpus_run(name, session)
    paths = session_files(name, session)
    t = run.perf_counters()
    assert t.empty and "counter_value" in t.attrs["reason"]
    assert ("perf_counters" in run.tools) == ("perf_counters" in xprof_oracle.tool_names(paths)) is False
    d = xprof_oracle.tool_data(paths, "perf_counters")
    assert not d.get("rows")
    assert np.all(
        t.columns == ["host", "chip", "kernel", "sample", "counter", "value", "value_hex", "description", "set"]
    )


def test_mxu_and_hbm_utilization_equal_xprof(counters, tmp_path):
    """The overview's MXU and HBM utilisation: the host plane's stats as XProf reads them, the
    mean over hosts as XProf combines them (a second host at 80 %: 58.75 %)."""
    path, run = counters
    p = xprof_oracle.tool_data([path], "overview_page")[0]["p"]
    ov = run.overview()
    assert f"{ov.mxu_utilization_percent:.1f}%" == p["mxu_utilization_percent"] == "37.5%"
    assert f"{ov.hbm_utilization_percent:.1f}%" == p["hbm_utilization_percent"]
    two = host_copies(path, tmp_path, ["h0", "h1"])
    space = schema.XSpace()
    space.ParseFromString(two[1].read_bytes())
    host = next(p for p in space.planes if p.name == "/host:CPU")
    mxu = next(k for k, m in host.stat_metadata.items() if m.name == "matrix_unit_utilization_percent")
    next(s for s in host.stats if s.metadata_id == mxu).double_value = 80.0
    two[1].write_bytes(space.SerializeToString())
    p2 = xprof_oracle.tool_data(two, "overview_page")[0]["p"]
    ov2 = xw.load_run(tmp_path).overview()
    assert f"{ov2.mxu_utilization_percent:.1f}%" == p2["mxu_utilization_percent"] == "58.8%"
    assert f"{ov2.hbm_utilization_percent:.1f}%" == p2["hbm_utilization_percent"]
    assert "MXU / HBM utilization" in xw.OverviewWidget(run).html
    assert xw.sample_run().overview().mxu_utilization_percent is None  # not a TPU run
