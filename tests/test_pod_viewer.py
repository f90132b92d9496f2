"""The pod viewer against XProf 2.24.2's own (`pod_viewer`, run on the same files): every
(step, core) row, its host, total time, nine categories and bottleneck, on every corpus run
(CPU, GPU, two-host GPU, TPU inference) and on the TPU training runs made from the real v6e
file (`tools/make_tpu_profiles.py`), the two-host TPU pod among them."""

import numpy as np
import pytest

from tests import xprof_oracle
from tests.conftest import corpus_run, first_sessions, session_files
from tests.test_tpu_steps import make_tpu_profiles
from xprof_widgets import load_run
from xprof_widgets.analysis.core.pod_stats import POD_CATEGORIES
from xprof_widgets.analysis.pod_viewer import slowest_cores


def _xprof_rows(paths):
    """XProf's pod viewer as rows (step, core, host, total µs, bottleneck, 9 categories µs),
    sorted by step and core; and its device type."""
    d = xprof_oracle.tool_data(paths, "pod_viewer")
    rows = []
    for m in d.get("podStatsSequence", {}).get("podStatsMap", []):
        for core, r in m.get("podStatsPerCore", {}).items():
            parts = [r.get("stepBreakdownUs", {}).get(str(i), 0.0) for i in range(1, 10)]
            rows.append((m.get("stepNum", 0), int(core), r["hostName"], r["totalDurationUs"], r["bottleneck"], parts))
    names = [e["name"] for e in d["stepBreakdownEvents"]]
    return sorted(rows, key=lambda x: x[:2]), names, d.get("deviceType", "")


def _compare(run, paths, skip=()):
    """Assert our pod viewer equals XProf's, row by row (rows in `skip`, (step, core), only
    keyed and timed alike); returns the number of rows."""
    theirs, names, device = _xprof_rows(paths)
    ours = run.pod_viewer()
    assert names == list(POD_CATEGORIES) == ours.attrs["categories"]
    assert ours.attrs["device_type"] == device
    assert len(ours) == len(theirs)
    for x, (_, r) in zip(theirs, ours.iterrows()):
        assert (x[0], x[1], x[2]) == (r.step_num, r.core_id, r.host)
        assert r.total_duration_us == pytest.approx(x[3], abs=1e-3)
        assert (r.chip_id, r.node_id) == (0, 0)
        if (x[0], x[1]) in skip:
            continue
        np.testing.assert_allclose(r[list(POD_CATEGORIES)].to_numpy(float), x[5], atol=1e-3, err_msg=str(x[:2]))
        assert r.bottleneck == x[4]
    assert ours.attrs["channels"].empty and ours.attrs["all_reduce_ops"].empty
    assert bool(ours.attrs["reason"]) == ours.empty
    return len(ours)


RUNS = first_sessions()


@pytest.mark.parametrize("name,session", RUNS, ids=[f"{n}/{s}" for n, s in RUNS])
def test_pod_viewer_equals_xprof_on_the_corpus(name, session):
    run = corpus_run(name, session)
    paths = session_files(name, session)
    n = _compare(run, paths)
    if name in ("jax_mlp_cpu", "tf_gpu_multiworker", "nvidia_jax_mlp_h200"):
        assert n > 0  # steps on CPU, two GPU hosts (core ids 1 and 1001), an H200


@pytest.mark.parametrize("variant", ["pod", "infeed", "sparsecore"])
def test_pod_viewer_equals_xprof_on_tpu_training(made, variant):
    """TPU: every TensorCore's step, its infeed + host recv as input, outfeed + host send as
    output, all-reduce as collectives, send / recv and megacore fusion as device to device,
    idle as all others; the two-host pod numbers its cores host x 1000 + plane id."""
    root, run, _, _ = made[variant]
    paths = sorted(root.glob("plugins/profile/run/*.xplane.pb"))
    # (Where a core's ops outrun its step XProf's idle wraps: see the test below.)
    cores = run.stats().pod_steps[0].tpu
    past = {(int(r.step_num), int(r.core_id)) for r in cores[cores["op_time_ps"] > cores["duration_ps"]].itertuples()}
    n = _compare(run, paths, skip=past)
    pod = run.pod_viewer()
    if variant == "sparsecore":  # the SparseCoreV0 infeed is input, its outfeed output
        assert (pod["Input"] > 0).all() and (pod["Output"] > 0).all() and len(past) < 10
    assert n == 100 * 4 * len(paths)
    if variant == "pod":
        assert sorted(pod["core_id"].unique()) == [2, 10, 18, 26, 1002, 1010, 1018, 1026]
        assert set(pod["host"]) == set(make_tpu_profiles.POD_HOSTS)
        assert (pod["Device collective communication"] > 0).all() and (pod["Device to device"] > 0).all()
    slow = slowest_cores(pod)
    assert len(slow) == 100 and (slow["total_duration_us"].to_numpy() >= 0).all()


def test_pod_viewer_where_xprof_wraps_around(made):
    """Where a core's ops take longer than its step, XProf's unsigned idle time wraps and it
    shows device compute larger than the step itself; we show compute = the step less the
    other categories (idle 0). Every other row is XProf's."""
    root, run, _, _ = made["overrun"]
    cores = run.stats().pod_steps[0].tpu
    past = cores[cores["op_time_ps"] > cores["duration_ps"]]
    skip = {(int(r.step_num), int(r.core_id)) for r in past.itertuples()}
    assert len(skip) >= 10
    _compare(run, sorted(root.glob("plugins/profile/run/*.xplane.pb")), skip=skip)
    theirs = {x[:2]: x for x in _xprof_rows(sorted(root.glob("plugins/profile/run/*.xplane.pb")))[0]}
    pod = run.pod_viewer().set_index(["step_num", "core_id"])
    for r in past.itertuples():
        x = theirs[(r.step_num, r.core_id)]
        assert x[5][0] == pytest.approx(r.op_time_ps / 1e6, abs=1e-3)  # XProf: compute = all op time,
        assert x[5][0] > x[3]  # more than the step
        ours = pod.loc[(r.step_num, r.core_id)]
        assert ours["Device compute"] == pytest.approx(ours.total_duration_us) and ours["All others"] == 0


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """{variant: (logdir, Run, None, None)} of the made TPU runs this file reads."""
    root = tmp_path_factory.mktemp("tpu_pod")
    out = {}
    for v in ("pod", "infeed", "overrun", "sparsecore"):
        make_tpu_profiles.write(v, root / v)
        out[v] = (root / v, load_run(root / v), None, None)
    return out


@pytest.mark.parametrize("name,session", RUNS, ids=[f"{n}/{s}" for n, s in RUNS])
def test_pod_viewer_is_a_tool_exactly_when_it_has_rows(name, session):
    """`run.tools` offers the pod viewer exactly where it has rows (its cheap rule reads
    names only); otherwise the tool status says why, in words."""
    run = corpus_run(name, session)
    status = run.tool_status().set_index("tool").loc["pod_viewer"]
    assert bool(status.available) == (not run.pod_viewer().empty) == ("pod_viewer" in run.tools)
    if not status.available:
        assert "StepTraceAnnotation" in status.reason and "Steps" in status.reason


def test_hosts_summarized_apart_equal_one_process(made, tmp_path):
    """A pod read host by host on workers (each host's stats, then combined as XProf combines
    them) shows the same pod viewer, TPU step table and inference latency as one process
    reading every file."""
    import pandas as pd

    from tests.test_pod import INSTANT
    from xprof_widgets.analysis.overview import overview
    from xprof_widgets.analysis.pod_viewer import pod_viewer

    root, _, _, _ = made["pod"]
    alone = load_run(root)
    pooled = load_run(root, executor=INSTANT)
    assert pooled.pooled
    pd.testing.assert_frame_equal(pooled.pod_viewer(), pod_viewer(alone))
    pd.testing.assert_frame_equal(pooled.overview().steps, overview(alone).steps)
    assert len(pooled.overview().steps) == 100
    make_tpu_profiles.write("serving", tmp_path / "a")  # one host: requests in-process and pooled alike
    one = load_run(tmp_path / "a")
    assert len(one.overview().inference_latency) == 6


def test_pod_viewer_with_input_taken_from_idle(tmp_path):
    """Host steps with tf.data waits and no infeed op: XProf counts part of each core's idle
    time as input (its MayFixTpuStepAnalysis) in the pod viewer too. Equal row for row, but
    for the step where a core's ops outrun the step (there XProf's ratio reads its wrapped
    idle time)."""
    path = make_tpu_profiles.write("host_input", tmp_path)
    run = load_run(tmp_path)
    cores = run.stats().pod_steps[0].tpu
    past = set(cores.loc[cores["op_time_ps"] > cores["duration_ps"], "step_num"].tolist())
    skip = {(int(s), int(c)) for s, c in zip(cores["step_num"], cores["core_id"]) if s in past}
    assert len(past) == 1
    _compare(run, [path], skip=skip)
    assert (run.pod_viewer()["Input"] > 0).sum() >= 200  # of 272 rows
