"""TPU training steps (XProf's TPU step table, its averages, the input pipeline's TPU view)
against XProf 2.24.2 itself, on TPU training profiles made from the real TPU v6e run by
`tools/make_tpu_profiles.py` (a `Steps` line per TensorCore, infeed and outfeed ops, step
markers shorter than their ops): no real TPU training profile is available to ship.

XProf's arithmetic of idle time is unsigned: where the ops credited to a step take longer
than the step, XProf shows TensorCore compute 0 and idle the whole step. We show the right
value there; `test_where_xprof_wraps_around` says which steps and checks both numbers.
"""

import importlib.util
import json

import numpy as np
import pytest

import xprof_widgets as xw
from tests import xprof_oracle
from tests.conftest import REPO
from xprof_widgets.analysis.core import tpu_steps

VARIANTS = ("training", "infeed", "overrun", "host_steps", "host_input", "sparsecore")
_spec = importlib.util.spec_from_file_location("make_tpu_profiles", REPO / "tools" / "make_tpu_profiles.py")
make_tpu_profiles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_tpu_profiles)


def write_space(root, space, host="tpu_host"):
    """`space` as a logdir's one host file: ROOT/plugins/profile/run/HOST.xplane.pb (its path)."""
    folder = root / "plugins" / "profile" / "run"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{host}.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def xprof_step_table(path):
    """XProf's TPU step table of a file (its input pipeline's DataTable with TPU columns)."""
    tables = xprof_oracle.tool_data([path], "input_pipeline_analyzer")
    return next(t for t in tables if any(c["id"] == "tcComputeTimeMs" for c in t.get("cols", [])))


#: XProf's step table column -> ours.
STEP_COLUMNS = {
    "tcComputeTimeMs": "tc_compute_ms",
    "scv0ComputeTimeMs": "scv0_compute_ms",
    "scv0InfeedTimeMs": "scv0_infeed_ms",
    "tcInfeedTimeMs": "tc_infeed_ms",
    "tcOutfeedTimeMs": "tc_outfeed_ms",
    "tcIdleTimeMs": "tc_idle_ms",
    "hostTransferTimeMs": "host_transfer_ms",
    "infeedPercentAverage": "infeed_percent_average",
    "infeedPercentMin": "infeed_percent_min",
    "infeedPercentMax": "infeed_percent_max",
}


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """{variant: (logdir, our Run, XProf's TPU step table (its input pipeline's DataTable),
    XProf's overview page)}."""
    root = tmp_path_factory.mktemp("tpu")
    out = {}
    for v in VARIANTS:
        path = make_tpu_profiles.write(v, root / v)
        table = xprof_step_table(path)
        overview = xprof_oracle.tool_data([path], "overview_page")
        out[v] = (root / v, xw.load_run(root / v), table, overview)
    return out


def _xprof_rows(table):
    ids = [c["id"] for c in table["cols"]]
    rows = [[c.get("v") for c in r["c"]] for r in table["rows"]]
    return {i: np.array([r[k] for r in rows]) for k, i in enumerate(ids)}


def _cores(run):
    return tpu_steps.tpu_step_cores(run.xspace(run.hosts[0]))


def xprof_compute_ms(cores):
    """XProf 2.24.2's TensorCore compute per step, its unsigned 64-bit arithmetic included:
    per core idle = step - op time (mod 2^64), the wait for the host = infeed + outfeed +
    host send / recv + idle (mod 2^64), compute = step - wait, 0 where the wait is longer
    than the step; the step's compute is the least over cores."""
    out = {}
    for row in cores.itertuples():
        idle = (int(row.duration_ps) - int(row.op_time_ps)) % 2**64
        wait = (int(row.infeed_ps) + int(row.outfeed_ps) + int(row.host_send_ps) + int(row.host_recv_ps) + idle) % 2**64
        compute = int(row.duration_ps) - wait if int(row.duration_ps) >= wait else 0
        out[row.step_num] = min(out.get(row.step_num, compute), compute)
    return {k: v / 1e9 for k, v in out.items()}


@pytest.mark.parametrize("variant", VARIANTS)
def test_tpu_step_table_equals_xprof(made, variant):
    """Every step, every column of XProf's TPU step table, on the steps where XProf's
    arithmetic holds (all of them in the infeed run; see test_where_xprof_wraps_around)."""
    _, run, table, _ = made[variant]
    steps = run.overview().steps
    x = _xprof_rows(table)
    assert len(steps) == len(x["stepnum"]) == {"host_steps": 99, "host_input": 68}.get(variant, 100)
    assert steps["step_num"].tolist() == [int(s) for s in x["stepnum"]]
    if variant == "host_input":
        # The tf.data waits join the host's steps (XProf's grouping, ours alike: 68 steps
        # from 31); no infeed op, so each step's TensorCore idle time up to the host's wait
        # counts as input (XProf's MayFixTpuStepAnalysis).
        assert (steps["tc_infeed_ms"] > 0).sum() >= 60 and steps["step_num"].iloc[0] == 31
    elif variant == "host_steps":
        # Host steps (StepTraceAnnotation) reach the device's through the launches: the steps
        # take the host's group ids (0-98); the device step no host step reaches is dropped.
        assert steps["step_num"].tolist() == list(range(99))
    else:  # no host step reaches them: numbered in lock step after the host's groups (none)
        assert steps["step_num"].tolist() == list(range(100))
    ok = ~steps["ops_past_step_end"].to_numpy()
    if variant == "infeed":
        assert ok.all()
    if variant == "sparsecore":
        # Each core waits for the SparseCore's infeed beyond its outfeed; the step shows the
        # longest wait (the last core's) as SparseCoreV0 compute, XProf's input share 0.
        assert (steps["scv0_compute_ms"] > 2.0).all() and (steps["scv0_infeed_ms"] == 0).all()
    for theirs, ours in STEP_COLUMNS.items():
        want = x[theirs].astype(float)
        if theirs == "infeedPercentMax":
            # XProf's maximum over no infeed is the smallest double (its running maximum
            # starts there), not 0.
            want = np.where(want < 1e-300, 0.0, want)
        np.testing.assert_allclose(steps[ours].to_numpy(float)[ok], want[ok], rtol=1e-9, atol=1e-6, err_msg=theirs)
    assert run.input_pipeline().reason == ""


@pytest.mark.parametrize("variant", VARIANTS)
def test_tpu_summary_equals_xprof(made, variant):
    """XProf's step-time summary and TPU averages (its table properties, rounded as it
    writes them), the input conclusion, and the overview's average step time."""
    _, run, table, overview = made[variant]
    p = table["p"]
    ip = run.input_pipeline()
    for key in ("steptime_ms_average", "steptime_ms_standard_deviation", "steptime_ms_minimum", "steptime_ms_maximum"):
        ours = {"average": ip.avg_step_time_ms, "standard_deviation": ip.std_step_time_ms}.get(
            key.removeprefix("steptime_ms_"),
            ip.min_step_time_ms if key.endswith("minimum") else ip.max_step_time_ms,
        )
        assert ours == pytest.approx(float(p[key]), abs=0.005), key
    for key in ("infeed_percent_average", "infeed_percent_minimum", "infeed_percent_maximum"):
        assert ip.tpu[key] == pytest.approx(float(p[key]), abs=0.05), key
    for key in ("tc_active_ms_average", "active_steptime_ms_average"):
        assert ip.tpu[key] == pytest.approx(float(p[key]), abs=0.005), key
    averaged = ("tc_outfeed_ms_average", "host_transfer_ms_average", "scv0_compute_ms_average")
    if not ip.steps["ops_past_step_end"].any():  # (idle, and input taken from idle, differ there)
        averaged += ("tc_compute_ms_average", "tc_idle_ms_average", "tc_infeed_ms_average")
    for key in averaged:
        assert ip.tpu[key] == pytest.approx(float(p[key]), abs=0.005), key
    assert ip.tpu["input_statement"] == p["input_conclusion"]
    assert ip.tpu["output_statement"] == p["output_conclusion"]
    assert ip.recommendation.endswith(p["summary_nextstep"])
    ov = run.overview()
    assert ov.avg_step_time_ms == pytest.approx(float(overview[1]["p"]["steptime_ms_average"]), abs=0.005)
    assert f"{ov.device_duty_cycle_percent:.1f}%" == overview[0]["p"]["device_duty_cycle_percent"]


@pytest.mark.parametrize("variant", ("training", "overrun"))
def test_where_xprof_wraps_around(made, variant):
    """Where the ops credited to a step take longer than the step (ops that overlap on the
    real file's XLA Ops line; in the overrun run also an op that starts where its step ends,
    and markers cut 1 ms short), XProf's idle time wraps around: it shows compute 0 and the
    whole step idle. We show compute = the least over cores of the step less the wait for
    the host, idle at least 0. Everywhere XProf's own arithmetic, replayed on our per-core
    numbers, gives exactly what XProf shows."""
    _, run, table, _ = made[variant]
    steps = run.overview().steps.set_index("step_num")
    x = _xprof_rows(table)
    cores = _cores(run)
    theirs = xprof_compute_ms(cores)
    past = steps.index[steps["ops_past_step_end"]]
    assert len(past) >= 3
    np.testing.assert_allclose([theirs[int(s)] for s in x["stepnum"]], x["tcComputeTimeMs"].astype(float), atol=1e-6)
    xp = dict(zip(x["stepnum"].astype(int), x["tcComputeTimeMs"].astype(float)))
    xi = dict(zip(x["stepnum"].astype(int), x["tcIdleTimeMs"].astype(float)))
    for s in past:
        row = steps.loc[s]
        assert xp[s] == 0.0 and xi[s] == pytest.approx(row.step_time_ms, abs=1e-6)
        c = cores[cores["step_num"] == s]
        wait = c["infeed_ps"] + c["outfeed_ps"] + c["host_send_ps"] + c["host_recv_ps"]
        idle = (c["duration_ps"] - c["op_time_ps"]).clip(lower=0)
        assert row.tc_compute_ms == pytest.approx(float((c["duration_ps"] - wait - idle).min()) / 1e9)
        assert row.tc_idle_ms == pytest.approx(
            max(row.step_time_ms - row.tc_compute_ms - row.tc_infeed_ms - row.tc_outfeed_ms, 0)
        )


def test_inference_run_has_no_tpu_steps():
    """The real v6e inference run: no Steps line, so no steps (XProf: none either), and the
    reason says why in words."""
    run = xw.load_run(make_tpu_profiles.real_path())
    ip = run.input_pipeline()
    assert ip.steps.empty
    assert "Steps" in ip.reason and "inference" in ip.reason
    assert run.overview().steps.empty


def test_an_op_touching_a_step_end_belongs_to_that_step():
    """XLA's GroupLine: the first step whose span overlaps the event, end points included."""
    begin = np.array([0, 10, 20])
    end = np.array([10, 20, 30])
    ev_begin = np.array([-5, 0, 5, 10, 20, 30, 31, 12])
    ev_end = np.array([-1, 3, 10, 12, 25, 35, 40, 12])
    assert tpu_steps.overlapping_step(begin, end, ev_begin, ev_end).tolist() == [-1, 0, 0, 0, 1, 2, -1, 1]


def test_made_profiles_are_the_real_file_plus_steps(made):
    """The made runs keep the real file's ops and programs: the same HLO op statistics as
    the real run, only with the step lines (and the infeed run's new ops) added."""
    real = xw.load_run(make_tpu_profiles.real_path())
    _, training, _, _ = made["training"]
    a = real.hlo_stats().set_index(["program_id", "hlo_op_name"]) if "hlo_op_name" in real.hlo_stats() else None
    if a is None:
        a = real.hlo_stats()
        b = training.hlo_stats()
        assert len(a) == len(b)
    else:
        b = training.hlo_stats().set_index(["program_id", "hlo_op_name"])
        assert a.index.equals(b.index)
    assert json.dumps(sorted(real.modules)) == json.dumps(sorted(training.modules))


def _tc_line(plane, name):
    return next(line for line in plane.lines if line.name == name)


def _odd(kind):
    """A made TPU training space, damaged or odd in one way (`kind`)."""
    space = make_tpu_profiles.make("infeed" if kind == "grouped without values" else "training")
    planes = [p for p in space.planes if p.name.startswith("/device:TPU:")]
    for p in planes:
        ids = {m.name: k for k, m in p.stat_metadata.items()}
        steps = _tc_line(p, "Steps")
        if kind == "shuffled steps":
            events = list(steps.events)
            events.reverse()
            del steps.events[:]
            steps.events.extend(events)
        elif kind == "text durations":
            for e in steps.events:
                for st in e.stats:
                    if st.metadata_id == ids["device_duration_ps"]:
                        st.ClearField("uint64_value")
                        st.str_value = "x"
        elif kind == "no ops":
            del _tc_line(p, "XLA Ops").events[:]
        elif kind == "grouped without values":
            k = max(p.stat_metadata) + 1
            p.stat_metadata[k].id = k
            p.stat_metadata[k].name = "group_id"
        elif kind == "zero-length steps":
            for e in steps.events:
                e.duration_ps = 0
                for st in e.stats:
                    if st.metadata_id == ids["device_duration_ps"]:
                        st.uint64_value = 0
    if kind == "grouped without values":
        for p in space.planes:
            if "group_id" not in {m.name for m in p.stat_metadata.values()}:
                k = max(p.stat_metadata, default=0) + 1
                p.stat_metadata[k].id = k
                p.stat_metadata[k].name = "group_id"
    return space


@pytest.mark.parametrize(
    "kind,steps",
    [
        ("shuffled steps", 100),  # read in time order, as written
        ("text durations", 100),  # a step's device span from its own times
        ("no ops", 0),
        ("grouped without values", 0),  # XProf reads a grouped file's groups: none here
        ("zero-length steps", 0),
    ],
)
def test_odd_tpu_files(tmp_path, kind, steps):
    """Damaged or odd TPU files: the steps that can be found, else none and a sentence why
    (the Steps line is there, no step has ops on every core); every TPU tool answers."""
    write_space(tmp_path, _odd(kind), "h")
    run = xw.load_run(tmp_path)
    ov = run.overview()
    assert len(ov.steps) == steps and len(run.pod_viewer()) == 4 * steps
    if not steps:
        assert ov.reason.startswith("no TPU steps: the TensorCores' `Steps` lines hold no step")
        assert run.pod_viewer().attrs["reason"] == ov.reason
        assert "Steps" in xw.PodViewerWidget(run).html
    assert run.smart_suggestions().empty


def test_a_file_of_sparse_core_planes_alone_is_not_a_tpu_hosts():
    """One rule tells a TPU host's file (its TensorCore planes): the steps, the step
    database and the pod viewer agree on a file whose only TPU planes are SparseCores'."""
    from xprof_widgets.analysis.core import input_analysis, planes, pod_stats
    from xprof_widgets.io.xspace import read_xspace

    space = make_tpu_profiles.make("training")
    for plane in space.planes:
        if plane.name.startswith("/device:TPU:"):
            plane.name = plane.name + " SparseCore 0"
    import tempfile
    from pathlib import Path

    folder = Path(tempfile.mkdtemp()) / "plugins" / "profile" / "run"
    folder.mkdir(parents=True)
    (folder / "host.xplane.pb").write_bytes(space.SerializeToString())
    f = read_xspace(folder / "host.xplane.pb")
    assert not planes.has_tensor_cores(f)
    assert pod_stats.host_pod_steps(f).tpu is None
    steps, _ = input_analysis.host_step_table(f)
    assert "tc_compute_ms" not in steps.columns
    run = xw.load_run(folder.parent.parent.parent)
    assert not run.stats().has_tpu
