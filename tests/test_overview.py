"""Overview page against XProf 2.24.2's overview_page.json, every run."""

import json
import shutil
import subprocess

import numpy as np
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.core import grouping as G
from xprof_widgets.analysis.core.host_ops import host_op_metrics, stack_self_time
from xprof_widgets.analysis.core.op_stats import framework_op
from xprof_widgets.analysis.overview import (
    EAGER_REPORT_PERCENT,
    STEP_TIME_COMPONENTS,
    TOP_OPS_SHOWN,
    eager_recommendation,
    overview,
)
from xprof_widgets.io import schema
from xprof_widgets.io.xspace import read_xspace

from . import xprof_oracle as oracle
from . import xprof_tables
from .conftest import REFERENCE, add_stat, corpus_run

RUNS = xprof_tables.RUNS  # every run with XProf's references
# XProf's overview_page.json: a list of DataTables.
TOP_OPS, STEPS, RUN_ENV, RECOMMENDATION = 0, 1, 2, 3


def _rows(table):
    return [[c.get("v") if c else None for c in r["c"]] for r in table.get("rows", [])]


@pytest.fixture(scope="module", params=RUNS, ids=lambda p: f"{p[0]}/{p[1]}")
def page(request):
    name, session = request.param
    run = corpus_run(name, session)
    ref = json.loads((REFERENCE / name / session / "overview_page.json").read_text())
    return name, overview(run), ref


def test_run_environment(page):
    _, res, ref = page
    env = ref[RUN_ENV]["p"]
    assert res.host_count == int(env["host_count"])
    assert res.device_type == env["device_type"]
    assert res.device_core_count == int(env["device_core_count"])
    # XProf's ModelTracker over the HLO modules' metadata (TF without XLA: no modules, false).
    assert res.is_training == (env["is_training"] == "true")


def test_step_time(page):
    name, res, ref = page
    rows = _rows(ref[STEPS])
    p = ref[STEPS]["p"]
    if not rows:
        assert res.steps.empty and res.reason
        assert res.avg_step_time_ms == 0.0
        return
    assert res.reason == ""
    assert list(res.steps["step_name"]) == [r[0] for r in rows]
    np.testing.assert_allclose(res.steps["step_time_ms"], [r[-1] for r in rows], atol=1e-6)
    assert f"{res.avg_step_time_ms:.1f}" == p["steptime_ms_average"]
    assert f"{res.min_step_time_ms:.1f}" == p["steptime_ms_minimum"]
    assert f"{res.max_step_time_ms:.1f}" == p["steptime_ms_maximum"]
    assert f"{res.std_step_time_ms:.1f}" == p["steptime_ms_standard_deviation"]


def test_step_time_components(page):
    """XProf's performance summary: each step-time component's average and sample standard
    deviation over the steps (its `<component>_ms_avg` / `_sdv`, one decimal). With one
    step XProf prints "-nan" (zero components) or 0.0: ours is NaN, undefined."""
    _, res, ref = page
    p = ref[STEPS]["p"]
    parts = res.step_time_components()
    if res.steps.empty:
        assert parts.empty
        return
    assert list(parts.index) == [c[0] for c in STEP_TIME_COMPONENTS]
    for name, row in parts.iterrows():
        assert f"{row.avg_ms:.1f}" == p[f"{name}_ms_avg"], name
        if len(res.steps) > 1:
            assert f"{row.sdv_ms:.1f}".replace("-0.0", "0.0") == p[f"{name}_ms_sdv"].replace("-0.0", "0.0"), name
        else:
            assert np.isnan(row.sdv_ms) and p[f"{name}_ms_sdv"] in ("-nan", "nan", "0.0")


def test_performance_summary_on_the_page():
    run = corpus_run("jax_transformer_cpu")
    w = xw.OverviewWidget(run)
    parts = w.result.step_time_components()
    assert 'data-testid="step-summary"' in w.html
    assert (
        f'data-component="host_compute_time"><td>Host compute</td><td class=num>{parts.avg_ms["host_compute_time"]:,.1f}'
        in w.html
    )
    assert f"<td class=num>{parts.sdv_ms['other_time']:,.1f}</td></tr>" in w.html


def test_top_ops(page):
    _, res, ref = page
    rows = _rows(ref[TOP_OPS])
    assert len(res.top_ops) == len(rows) <= TOP_OPS_SHOWN
    if not rows:
        return
    theirs = np.array(rows, dtype=object)
    assert list(res.top_ops["operation"]) == list(theirs[:, 3])
    assert list(res.top_ops["category"]) == list(theirs[:, 2])
    np.testing.assert_allclose(res.top_ops["self_time_fraction"], theirs[:, 0].astype(float), rtol=1e-9)
    np.testing.assert_allclose(res.top_ops["cumulative_time_fraction"], theirs[:, 1].astype(float), rtol=1e-9)
    np.testing.assert_allclose(res.top_ops["flop_rate_gflops"], theirs[:, 4].astype(float), rtol=1e-9)


def test_op_placement(page):
    _, res, ref = page
    p = ref[TOP_OPS]["p"]
    assert f"{res.op_placement['host_percent']:.1f}%" == p["host_tf_op_percent"]
    assert f"{res.op_placement['device_percent']:.1f}%" == p["device_tf_op_percent"]


def test_eager_percent(page):
    _, res, ref = page
    p = ref[TOP_OPS]["p"]
    assert f"{res.host_op_time_eager_percent:.1f}%" == p["host_op_time_eager_percent"]
    assert f"{res.device_op_time_eager_percent:.1f}%" == p["device_op_time_eager_percent"]


def test_tpu_duty_cycle_and_idle(page):
    _, res, ref = page
    p = ref[TOP_OPS]["p"]
    if ref[STEPS]["p"]["hardware_type"] != "TPU":
        assert res.device_duty_cycle_percent is None and res.device_idle_percent is None
        return
    assert f"{res.device_duty_cycle_percent:.1f}%" == p["device_duty_cycle_percent"]
    assert f"{res.device_idle_percent:.1f}%" == p["device_idle_time_percent"]
    assert f"{res.host_idle_percent:.1f}%" == p["host_idle_time_percent"]


def test_precision(page):
    name, res, ref = page
    p = ref[TOP_OPS]["p"]
    if "device_compute_16bit_percent" in p:  # XProf shows one decimal: "30.5%"
        assert f"{res.precision['16bit_percent']:.1f}%" == p["device_compute_16bit_percent"]
        assert f"{res.precision['32bit_percent']:.1f}%" == p["device_compute_32bit_percent"]
    else:
        assert res.precision is None


def test_recommendation(page):
    name, res, ref = page
    rec = ref[RECOMMENDATION]["p"]
    assert res.bottleneck == rec["bottleneck"]
    assert res.recommendation.startswith(rec["statement"])


def test_framework_op_names():
    assert framework_op("model/dense/MatMul:MatMul", "dot.1") == ("model/dense/MatMul", "MatMul")
    assert framework_op("jit(f)/jit(main)/add:", "fusion") == ("jit(f)/jit(main)/add", "add")
    assert framework_op("", "copy-done.4") == ("copy-done.4", "Unknown")


def test_module_latency_tpu_inference():
    """Ours (XProf's latency table is empty here): each module's executions over the 4 cores' XLA Modules lines."""
    run = corpus_run("tpu_v6e_inference")
    lat = overview(run).module_latency
    durations = {}
    for plane in run.xspace().planes:
        for line in plane.lines:
            if plane.name.startswith("/device:TPU:") and line.name == "XLA Modules":
                for name, d in zip(line.names().astype(object), line.event_duration_ps):
                    durations.setdefault(name, []).append(d / 1e9)
    assert set(lat["module"]) == set(durations)
    assert lat["module"].iloc[0] == max(durations, key=lambda k: sum(durations[k]))  # most total time first
    for row in lat.itertuples(index=False):
        d = np.array(durations[row.module])
        assert row.executions == len(d)
        assert row.mean_ms == pytest.approx(d.mean())
        assert row.p50_ms == pytest.approx(np.median(d))
        assert row.p99_ms == pytest.approx(np.percentile(d, 99))
        assert row.max_ms == pytest.approx(d.max())
    top = lat.iloc[0]
    assert top["module"].startswith("jit_f(") and top["executions"] == 400  # 100 calls on each of 4 cores


def test_module_latency_empty_without_device_modules():
    lat = overview(corpus_run("jax_mlp_cpu")).module_latency
    assert lat.empty and list(lat.columns)[:2] == ["module", "executions"]


# --- eager execution, on a space made by hand ---------------------------------------------

_NS = 1000  # ps


def _eager_space():
    """Host threads and one GPU stream, times in ns. Eager: ops under an `EagerExecute` with
    `is_func` 0, nearest first; a kernel by its launch. By hand (self times):

    host  main      dense/MatMul 40 (eager; its ReadVariableOp 10 and a launch nested),
                    Relu 50 (no EagerExecute above), a `thunk` with tf_op dense/MatMul 20
          executor  BiasAdd 100, dense/MatMul 20: run by FunctionRun under is_func 1
          nested    Add 10 (nearest EagerExecute is_func 1), Mul 20 (nearest is_func 0),
                    Sub 40 (EagerExecute without is_func), A 100 and B (same end: XProf's
                    op stack drops B)
    An op is eager when any execution is: dense/MatMul's 80 all count.
    Host: (80 + 10 + 20) / (80 + 10 + 50 + 100 + 10 + 20 + 40 + 100) = 110 / 410.
    GPU   MatMul kernel 30 (eager), BiasAdd 10, Relu 20: 30 / 60.
    """
    space = schema.XSpace(hostnames=["eager"])

    def plane(pid, name, stat_names):
        p = space.planes.add(id=pid, name=name)
        ids = {k: i + 1 for i, k in enumerate(stat_names)}
        for k, i in ids.items():
            p.stat_metadata[i].id, p.stat_metadata[i].name = i, k
        md = {}

        def line(lid, lname, events):
            ln = p.lines.add(id=lid, display_id=lid, name=lname, timestamp_ns=1_000_000)
            for name, s, e, stats in events:
                if name not in md:
                    md[name] = len(md) + 1
                    p.event_metadata[md[name]].id, p.event_metadata[md[name]].name = md[name], name
                ev = ln.events.add(metadata_id=md[name], offset_ps=s * _NS, duration_ps=(e - s) * _NS)
                for k, v in stats.items():
                    add_stat(ev.stats, ids[k], v)

        return line

    host = plane(1, "/host:CPU", ["is_func", "_p", "_pt", "_c", "_ct", "correlation_id", "tf_op"])
    host(
        1,
        "main",
        [
            ("EagerExecute", 0, 100, {"is_func": 0}),
            ("dense/MatMul:MatMul", 10, 60, {}),
            ("dense/MatMul/ReadVariableOp:ReadVariableOp", 20, 30, {}),
            ("cudaLaunchKernel", 40, 45, {"correlation_id": 1}),
            ("EagerExecute", 200, 500, {"is_func": 1}),
            ("FunctionRun", 210, 490, {"_pt": 1, "_p": 77}),
            ("Relu:Relu", 600, 650, {}),
            ("cudaLaunchKernel", 610, 615, {"correlation_id": 3}),
            ("thunk", 700, 720, {"tf_op": "dense/MatMul:MatMul"}),
        ],
    )
    host(
        2,
        "executor",
        [
            ("ExecutorState::Process", 220, 480, {"_ct": 1, "_c": 77}),
            ("model/dense_1/BiasAdd:BiasAdd", 230, 330, {}),
            ("cudaLaunchKernel", 240, 245, {"correlation_id": 2}),
            ("dense/MatMul:MatMul", 340, 360, {}),
        ],
    )
    host(
        3,
        "nested",
        [
            ("EagerExecute", 800, 900, {"is_func": 0}),
            ("EagerExecute", 810, 890, {"is_func": 1}),
            ("inner/Add:AddV2", 820, 830, {}),
            ("EagerExecute", 1000, 1100, {"is_func": 1}),
            ("EagerExecute", 1010, 1090, {"is_func": 0}),
            ("inner2/Mul:Mul", 1020, 1040, {}),
            ("EagerExecute", 1200, 1300, {}),
            ("inner3/Sub:Sub", 1210, 1250, {}),
            ("q/A:Abs", 1400, 1500, {}),
            ("q/B:Neg", 1450, 1500, {}),
        ],
    )
    gpu = plane(2, "/device:GPU:0", ["correlation_id", "tf_op"])
    gpu(
        7,
        "Stream #7",
        [
            ("volta_sgemm", 50, 80, {"correlation_id": 1, "tf_op": "dense/MatMul:MatMul"}),
            ("bias_kernel", 250, 260, {"correlation_id": 2, "tf_op": "model/dense_1/BiasAdd:BiasAdd"}),
            ("relu_kernel", 620, 640, {"correlation_id": 3, "tf_op": "Relu:Relu"}),
        ],
    )
    return space


#: (plane, line index) -> names of the events marked eager, by hand.
_EAGER_BY_HAND = {
    ("/host:CPU", 0): ["dense/MatMul:MatMul", "dense/MatMul/ReadVariableOp:ReadVariableOp"],
    ("/host:CPU", 2): ["inner2/Mul:Mul"],
    ("/device:GPU:0", 0): ["volta_sgemm"],
}
_HOST_EAGER, _DEVICE_EAGER = 100 * 110 / 410, 100 * 30 / 60


@pytest.fixture()
def eager_run(tmp_path):
    folder = tmp_path / "plugins" / "profile" / "hand"
    folder.mkdir(parents=True)
    (folder / "eager.xplane.pb").write_bytes(_eager_space().SerializeToString())
    return xw.load_run(str(folder))


def _marked(space, eager):
    return {
        key: list(np.asarray(space.plane(key[0]).lines[key[1]].names().astype(object))[mask])
        for key, mask in eager.items()
        if mask.any()
    }


def test_eager_marks_by_hand(eager_run):
    space = eager_run.xspace()
    assert _marked(space, G.eager_events(space)) == _EAGER_BY_HAND


def test_eager_percent_by_hand(eager_run):
    res = overview(eager_run)
    assert res.host_op_time_eager_percent == pytest.approx(_HOST_EAGER)
    assert res.device_op_time_eager_percent == pytest.approx(_DEVICE_EAGER)
    assert res.recommendation.endswith(
        "26.8% of Op time on the host used eager execution. 50.0% of Op time on the device used eager "
        "execution. Performance could be improved with tf.function."
    )
    assert res.op_placement["host_percent"] == pytest.approx(100 * 10 / 13)  # XProf: "76.9%"
    ops = host_op_metrics(eager_run.xspace()).set_index("name")
    assert "q/B" not in ops.index  # dropped by the op stack, as in XProf
    assert ops.loc["dense/MatMul", "occurrences"] == 3 and ops.loc["dense/MatMul", "self_time_ps"] == 80 * _NS
    assert ops["is_eager"].to_dict() == {
        "dense/MatMul": True,
        "dense/MatMul/ReadVariableOp": True,
        "Relu": False,
        "model/dense_1/BiasAdd": False,
        "inner/Add": False,
        "inner2/Mul": True,
        "inner3/Sub": False,
        "q/A": False,
    }


def test_eager_widget(eager_run):
    w = xw.OverviewWidget(eager_run)
    assert 'data-stat="eager_percent">26.8 % / 50.0 %<' in w.html
    assert "used eager execution" in w.html


def test_eager_recommendation_threshold():
    assert eager_recommendation(EAGER_REPORT_PERCENT, EAGER_REPORT_PERCENT) == ""
    assert eager_recommendation(12.34, 0.0) == (
        "12.3% of Op time on the host used eager execution. Performance could be improved with tf.function."
    )


def test_eager_against_xprof(tmp_path):
    """XProf 2.24.2 on the same file: the overview's two percentages, and its grouped
    space (internal `_xplane.pb` tool) marks the same events; read back as a grouped
    file, its own marks give the same percentages."""
    work = tmp_path / "xprof"
    work.mkdir()
    path = work / "eager.xplane.pb"
    path.write_bytes(_eager_space().SerializeToString())
    code = (
        "import json; from xprof.convert import raw_to_tool_data as r\n"
        "from xprof.convert import _pywrap_profiler_plugin as p\n"
        f"f = {str(path)!r}; r.xspace_to_tool_names([f])\n"
        "out = r.xspace_to_tool_data([f], 'overview_page', {})\n"
        "d = out[0] if isinstance(out, tuple) else out\n"
        f"open({str(work / 'overview.json')!r}, 'wb').write(d if isinstance(d, bytes) else d.encode())\n"
        "g, ok = p.xspace_to_tools_data([f], '_xplane.pb', {})\n"
        f"open({str(work / 'grouped.bin')!r}, 'wb').write(g)\n"
    )
    subprocess.run([oracle.python(), "-c", code], check=True, capture_output=True, timeout=300)
    ref = json.loads((work / "overview.json").read_text())[TOP_OPS]["p"]
    assert ref["host_op_time_eager_percent"] == f"{_HOST_EAGER:.1f}%" == "26.8%"
    assert ref["device_op_time_eager_percent"] == f"{_DEVICE_EAGER:.1f}%" == "50.0%"
    # Op placement: 10 host op executions (B dropped by the op stack), 3 GPU TF ops.
    assert ref["host_tf_op_percent"] == f"{100 * 10 / 13:.1f}%"
    ours = overview(xw.load_run(str(path)))
    assert f"{ours.op_placement['host_percent']:.1f}%" == ref["host_tf_op_percent"]
    assert f"{ours.op_placement['device_percent']:.1f}%" == ref["device_tf_op_percent"]
    grouped = read_xspace(work / "grouped.bin")
    assert G.is_grouped(grouped)
    theirs = {}
    for plane in grouped.planes:
        for i, line in enumerate(plane.lines):
            theirs[(plane.name, i)] = line.stat_table(names=[G.IS_EAGER]).int_column(G.IS_EAGER) != 0
    assert _marked(grouped, theirs) == _EAGER_BY_HAND
    assert _marked(grouped, G.eager_events(grouped)) == _EAGER_BY_HAND  # a grouped file: its own marks
    folder = tmp_path / "grouped" / "plugins" / "profile" / "x"
    folder.mkdir(parents=True)
    shutil.copy(work / "grouped.bin", folder / "eager.xplane.pb")
    res = overview(xw.load_run(str(folder)))
    assert f"{res.host_op_time_eager_percent:.1f}%" == ref["host_op_time_eager_percent"]
    assert f"{res.device_op_time_eager_percent:.1f}%" == ref["device_op_time_eager_percent"]


def _op_stack(begin, end):
    """XProf's op stack, one activity at a time (the reference for `stack_self_time`)."""
    acts = sorted(
        [(b, 2 * i, i, False) for i, b in enumerate(begin)] + [(e, 2 * i + 1, i, True) for i, e in enumerate(end)]
    )
    stack, counted, children = [], [False] * len(begin), [0] * len(begin)
    for _, _, i, close in acts:
        if not close:
            stack.append(i)
        elif i in stack:
            while stack.pop() != i:
                pass
            counted[i] = True
            if stack:
                children[stack[-1]] += end[i] - begin[i]
    return np.array(counted), np.array(end) - np.array(begin) - np.array(children)


@pytest.mark.parametrize("seed", range(30))
def teststack_self_time_equals_op_stack(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 60))
    if seed >= 20:  # one after another (a thread's launches): gaps, shared ends, zero lengths
        gaps = rng.choice([0, 0, 1, 7], n)
        lengths = rng.choice([0, 1, 5, 30], n)
        begin = np.cumsum(gaps + np.concatenate([[0], lengths[:-1]]))
        end = begin + lengths
    elif seed % 2:  # properly nested: intervals cut from a tree, with shared ends
        begin, end = [], []

        def fill(lo, hi, depth):
            t = lo
            while t < hi and depth < 4 and rng.random() < 0.8:
                b = int(rng.integers(t, hi + 1))
                e = int(rng.integers(b, hi + 1))
                begin.append(b), end.append(e)
                fill(b, e, depth + 1)
                t = e + int(rng.integers(0, 3))

        fill(0, 1000, 0)
        if not begin:
            begin, end = [0], [1]
        order = np.lexsort((-np.array(end), np.array(begin)))
        begin, end = np.array(begin)[order], np.array(end)[order]
    else:
        begin = np.sort(rng.integers(0, 100, n))
        end = begin + rng.integers(0, 40, n)
    want_counted, want_self = _op_stack(list(begin), list(end))
    counted, self_ps = stack_self_time(np.asarray(begin, np.int64), np.asarray(end, np.int64))
    assert counted.tolist() == want_counted.tolist()
    assert self_ps[counted].tolist() == want_self[want_counted].tolist()


def teststack_self_time_cases():
    b, e = np.array([0, 10, 20, 60]), np.array([100, 50, 30, 90])  # properly nested
    counted, self_ps = stack_self_time(b, e)
    assert counted.all() and self_ps.tolist() == [30, 30, 10, 30]
    counted, self_ps = stack_self_time(np.array([0, 50]), np.array([100, 100]))  # same end: the inner one dropped
    assert counted.tolist() == [True, False] and self_ps[0] == 100
    counted, self_ps = stack_self_time(np.array([0, 50]), np.array([80, 120]))  # overlapping: the later one dropped
    assert counted.tolist() == [True, False] and self_ps[0] == 80
