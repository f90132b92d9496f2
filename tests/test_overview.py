"""Overview page against XProf 2.24.2's overview_page.json, every run."""

import json

import numpy as np
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.overview import TOP_OPS_SHOWN, framework_op, overview

from .conftest import PROFILES, REFERENCE

RUNS = [
    ("jax_mlp_cpu", "2026_11_22_03_11_56"),
    ("jax_transformer_cpu", "2026_11_22_03_13_20"),
    ("tf_keras_cpu", "2026_11_22_03_16_08"),
    ("tf_keras_cpu", "2026_11_22_03_16_48"),
    ("tf_gpu_multiworker", "2020_12_23_gpu_multi_worker"),
    ("tpu_v6e_inference", "2025_tpu_inference"),
]
# XProf's overview_page.json: a list of DataTables.
TOP_OPS, STEPS, RUN_ENV, RECOMMENDATION = 0, 1, 2, 3



def _rows(table):
    return [[c.get("v") if c else None for c in r["c"]] for r in table.get("rows", [])]


@pytest.fixture(scope="module", params=RUNS, ids=lambda p: f"{p[0]}/{p[1]}")
def page(request):
    name, session = request.param
    run = xw.load_run(PROFILES / name / "plugins" / "profile" / session)
    ref = json.loads((REFERENCE / name / session / "overview_page.json").read_text())
    return name, overview(run), ref


def test_run_environment(page):
    _, res, ref = page
    env = ref[RUN_ENV]["p"]
    assert res.host_count == int(env["host_count"])
    assert res.device_type == env["device_type"]
    assert res.device_core_count == int(env["device_core_count"])


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
    run = xw.load_run(PROFILES / "tpu_v6e_inference")
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
    lat = overview(xw.load_run(PROFILES / "jax_mlp_cpu")).module_latency
    assert lat.empty and list(lat.columns)[:2] == ["module", "executions"]
