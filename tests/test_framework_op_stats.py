"""Framework op statistics against XProf 2.24.2: both of its framework_op_stats tables
(with and without IDLE) row by row and column by column for every corpus run, and
profiles made here (host op stacks, tf_op stats, eager marks, GPU kernels, two hosts)
run through XProf itself."""

import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.core.cache import kept
from xprof_widgets.analysis.core.host_ops import IDLE, host_op_db
from xprof_widgets.analysis.framework_op_stats import COLUMNS, NO_OP_TIME, framework_op_stats, task_type

from . import xprof_oracle as oracle
from .conftest import PROFILES, corpus_run, host_copies
from .xprof_tables import RUNS, assert_rows_equal, reference, table, write_hand_made_run

#: XProf's column id for the host's cumulative fraction is capitalised; ours is not.
RENAME = {"Host_cumulative_total_self_time_percent": "host_cumulative_total_self_time_percent"}


def _check(df, ref, what):
    ids, rows, props = ref
    assert ids[0] == "rank" and [r[0] for r in rows] == list(range(1, len(rows) + 1))
    assert list(df.columns) == [RENAME.get(c, c) for c in ids], what
    assert_rows_equal(df, ids, rows, rename=RENAME, what=what)
    assert df.attrs["task_type"] == props["task_type"], what
    assert df.attrs["architecture_type"] == props["architecture_type"], what


@pytest.mark.parametrize("logdir,session", RUNS, ids=lambda v: v)
@pytest.mark.parametrize("exclude_idle", [False, True], ids=["with_idle", "without_idle"])
def test_framework_op_stats_equal_xprof(logdir, session, exclude_idle):
    """Every row (XProf's order: device ops, then host ops, each by self time) and every
    column: times, fractions of device and host time, FLOP rates, bandwidth, intensity,
    bound-by, TensorCore share (GPU runs only, as XProf), eager; XProf's table properties.
    IDLE rows as XProf has them: the host's (0 µs on JAX CPU runs, whose host threads run
    no framework op), the devices'."""
    ref = reference(logdir, session, "framework_op_stats", index=1 if exclude_idle else 0)
    run = corpus_run(logdir, session)
    df = framework_op_stats(run, exclude_idle=exclude_idle)
    _check(df, ref, f"{logdir}/{session}")
    if not exclude_idle:
        assert (df["operation"] == IDLE).sum() == (df["type"] == IDLE).sum() >= 1
    elif df.empty:
        assert df.attrs["reason"] == NO_OP_TIME


def test_gpu_tensorcore_share_and_top_500():
    """By hand: the conv op's TensorCore share is its Cijk (matrix core) kernel time over
    all its kernels' (kernel_stats); tf_gpu_multiworker lists 500 host ops of many more
    (XProf's cut), IDLE among them, and without IDLE the other 499."""
    conv = framework_op_stats(corpus_run("amd_jax_conv_mi300")).set_index("operation")
    share = conv.loc["jit(forward_3d_conv)/conv_general_dilated", "gpu_tensorcore_utilization"]
    assert share == pytest.approx(11852.414 / (14344.14 + 11852.414 + 679.202))
    run = corpus_run("tf_gpu_multiworker")
    hosts = framework_op_stats(run)
    assert (hosts["host_or_device"] == "Host").sum() == 500
    assert len(host_op_db(run.xspaces())[0]) > 500
    assert (framework_op_stats(run, exclude_idle=True)["host_or_device"] == "Host").sum() == 499


def test_task_type_rules():
    assert task_type(["gradient_tape/model/dense/MatMul"], ["MatMul"]) == "Training"
    assert task_type(["gradients_2/x/Relu"], ["Relu"]) == "Training"
    assert task_type(["gradient/x/Relu", "model/gradient_tape"], ["Relu", "Identity"]) == "Inference"
    assert task_type(["jit(f)/transpose(jvp(g))/dot_general"], ["dot_general"]) == "Training"
    assert task_type(["jit(f)/transpose[permutation=(1, 0)]"], ["transpose"]) == "Inference"


# --- made by hand, against XProf itself -----------------------------------------------------


@pytest.mark.parametrize("hosts", [1, 2])
def test_hand_made_run_equals_xprof(tmp_path, hosts):
    """tests/xprof_tables.py's profile: nested host ops, an op that overlaps another
    without nesting (dropped by XProf's op stack), an op name with two types (the first
    one's), `tf_op` stats on other events, tf.data and memcpy ops, user TraceMes (not
    ops), an empty thread; GPU kernels of XLA ops (FLOPs from the cost model), TF ops,
    TensorCore kernels; one host or two combined."""
    _, paths = write_hand_made_run(tmp_path)
    paths = paths[:hosts]
    refs = oracle.tool_data(paths, "framework_op_stats")
    run = xw.load_run(paths)
    for index, exclude_idle in ((0, False), (1, True)):
        _check(framework_op_stats(run, exclude_idle=exclude_idle), table(refs[index]), f"{hosts} hosts")


def test_eager_ops_equal_xprof(tmp_path):
    """The hand-made eager profile of test_overview: host ops eager when any run is, a
    device op eager as its last kernel; XProf's both tables."""
    from .test_overview import _eager_space

    folder = tmp_path / "plugins" / "profile" / "hand"
    folder.mkdir(parents=True)
    path = folder / "eager.xplane.pb"
    path.write_bytes(_eager_space().SerializeToString())
    refs = oracle.tool_data([path], "framework_op_stats")
    run = xw.load_run(str(folder))
    for index, exclude_idle in ((0, False), (1, True)):
        df = framework_op_stats(run, exclude_idle=exclude_idle)
        _check(df, table(refs[index]), "eager")
    assert set(df.loc[df["eager"] == "Eager", "operation"]) == {
        "dense/MatMul",
        "inner2/Mul",
        "dense/MatMul/ReadVariableOp",
    }
    assert kept(run.stats(), "gpu_tf_ops")  # (a device op ran eagerly: the marks were read)


def test_xla_programs_marks_need_no_gpu_op_database():
    """No kernel of an XLA program runs eagerly: every device op is "Function" without the
    GPU op database (`RunStats.gpu_tf_ops`), which this tool then never builds."""
    run = corpus_run("nvidia_jax_mlp_h200")
    df = framework_op_stats(run)
    assert (df["host_or_device"] == "Device").sum() >= 4  # (three framework ops and IDLE)
    assert set(df.loc[df["host_or_device"] == "Device", "eager"]) == {"Function"}
    assert not kept(run.stats(), "gpu_tf_ops") and not kept(run.stats(), "gpu_ops")
    assert not run.stats().gpu_tf_ops["is_eager"].any()  # (what it would have said)


def test_two_tpu_hosts_equal_xprof(tmp_path):
    src = next((PROFILES / "tpu_v6e_inference" / "plugins" / "profile").glob("*/*.xplane.pb"))
    paths = host_copies(src, tmp_path, ["h1", "h2"])
    refs = oracle.tool_data(paths, "framework_op_stats")
    _check(framework_op_stats(xw.load_run(paths)), table(refs[0]), "two TPU hosts")


def test_columns_without_gpu():
    df = framework_op_stats(corpus_run("tf_keras_cpu"))
    assert list(df.columns) == [c for c in COLUMNS if c != "gpu_tensorcore_utilization"]
    assert set(df["host_or_device"]) == {"Host"} and df.attrs["device_type"] == "CPU"


def test_the_host_op_database_built_ahead_decodes_the_gpu_stats_first(tmp_path, monkeypatch):
    """The framework op stats build the host op database ahead, on a thread that first
    decodes the GPU kernels' stats the tool reads first (`grouping.gpu_stats_first`): on
    that thread, last line first, before the database, starting no other thread for them;
    the tool's own thread finds them decoded. The tool's numbers are those of a tool that
    decodes them itself."""
    import threading

    from xprof_widgets.analysis.core import grouping
    from xprof_widgets.analysis.core import run_stats as rs
    from xprof_widgets.analysis.core.planes import gpu_planes
    from xprof_widgets.io import xspace

    src = next((PROFILES / "nvidia_jax_mlp_h200" / "plugins" / "profile").glob("*/*.xplane.pb"))
    events = []
    decode = xspace.Line.stat_table

    def stat_table(line, names=None, events_=None):
        if line.plane.name.startswith(grouping.GPU_PLANE_PREFIX) and line._kept_stats is None:
            events.append((threading.current_thread().name, id(line)))
        return decode(line, names, events_)

    built = rs.BUILDERS["host_op_db"]

    def host_op_db(run):
        events.append((threading.current_thread().name, "host_op_db"))
        return built(run)

    monkeypatch.setattr(xspace.Line, "stat_table", stat_table)
    monkeypatch.setitem(rs.BUILDERS, "host_op_db", host_op_db)
    monkeypatch.setattr(xspace, "SMALL_LINE", 0)  # (every GPU line decoded ahead: this run has 2)
    run = xw.load_run(host_copies(src, tmp_path, ["h1"])[0])
    stats = run.stats()
    stats.build_ahead("host_op_db", first=grouping.gpu_stats_first)
    for thread in threading.enumerate():
        if thread.name == "xprof-widgets host_op_db":
            thread.join(60)
    lines = [id(line) for plane in gpu_planes(run.xspaces()[0]) for _, line in plane.busy_lines]
    # (This thread waited: the GPU lines are the other's, last first, before the database,
    # which then reads its own.)
    assert len(lines) >= 2 and events.index(("xprof-widgets host_op_db", "host_op_db")) == len(lines)
    assert events[: len(lines)] == [("xprof-widgets host_op_db", i) for i in reversed(lines)]
    assert {e[0] for e in events} == {"xprof-widgets host_op_db"}  # no other thread started
    assert all(line._kept_stats is not None for p in gpu_planes(run.xspaces()[0]) for _, line in p.busy_lines)
    monkeypatch.undo()
    fresh = framework_op_stats(xw.load_run(host_copies(src, tmp_path / "b", ["h1"])[0]))
    pd.testing.assert_frame_equal(framework_op_stats(stats), fresh)


def test_a_part_built_ahead_is_built_once_and_its_error_reaches_the_caller(monkeypatch):
    """`RunStats.build_ahead` builds a part on a thread (the host op database, while the
    framework op stats and the overview build the device's): a caller that asks for it
    meanwhile gets that same value, built once; an error on the thread is not lost, the
    caller meets it."""
    import threading
    import time

    from xprof_widgets.analysis.core import run_stats as rs

    calls, started = [], threading.Event()

    def slow(run):
        calls.append(threading.current_thread().name)
        started.set()
        time.sleep(0.2)
        return ("db", run)

    monkeypatch.setitem(rs.BUILDERS, "host_op_db", slow)
    stats = rs.RunStats("a run")
    stats.build_ahead("host_op_db")
    assert started.wait(5)
    assert stats.host_op_db == ("db", "a run") and calls == ["xprof-widgets host_op_db"]
    stats.build_ahead("host_op_db")  # built already: nothing started
    assert stats.host_op_db == ("db", "a run") and len(calls) == 1

    def broken(run):
        calls.append("broken")
        raise xw.ProfileError("f.xplane.pb", "is broken")

    monkeypatch.setitem(rs.BUILDERS, "host_op_db", broken)
    stats = rs.RunStats("a run")
    stats.build_ahead("host_op_db")
    with pytest.raises(xw.ProfileError, match="is broken"):
        _ = stats.host_op_db
    assert calls.count("broken") in (1, 2)  # (the thread's, then the caller's own unless it waited)
    rs.RunStats(None, host_op_db=None).build_ahead("host_op_db")  # no run: nothing to build
