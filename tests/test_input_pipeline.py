"""Input pipeline analysis against XProf 2.24.2's input_pipeline_analyzer.json."""

import json

import numpy as np
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis.input_pipeline import NO_STEPS_REASON, input_pipeline

from .conftest import PROFILES, REFERENCE

CPU_RUNS = [
    ("jax_mlp_cpu", "2026_11_22_03_11_56"),
    ("jax_transformer_cpu", "2026_11_22_03_13_20"),
    ("tf_keras_cpu", "2026_11_22_03_16_08"),
    ("tf_keras_cpu", "2026_11_22_03_16_48"),
]
# XProf's step table columns -> ours.
BREAKDOWN = ["device_compute_ms", "device_to_device_ms", "device_collectives_ms", "host_compute_ms",
             "kernel_launch_ms", "input_ms", "output_ms", "compilation_ms", "all_others_ms"]


def _load(name, session):
    run = xw.load_run(PROFILES / name / "plugins" / "profile" / session)
    ref = json.loads((REFERENCE / name / session / "input_pipeline_analyzer.json").read_text())
    return run, ref


def _rows(table):
    return [[c.get("v") if c else None for c in r["c"]] for r in table.get("rows", [])]


@pytest.fixture(scope="module", params=CPU_RUNS, ids=lambda p: f"{p[0]}/{p[1]}")
def cpu(request):
    run, ref = _load(*request.param)
    return request.param[0], input_pipeline(run), ref


def test_steps_and_step_times(cpu):
    _, res, ref = cpu
    rows = _rows(ref[1])
    assert res.reason == ""
    assert list(res.steps["step_name"]) == [r[0] for r in rows]
    np.testing.assert_allclose(res.steps["step_time_ms"], [r[11] for r in rows], atol=1e-6)
    p = ref[1]["p"]
    assert f"{res.avg_step_time_ms:.1f}" == p["steptime_ms_average"]
    assert res.avg_step_time_ms == pytest.approx(np.mean([r[11] for r in rows]), rel=1e-9)
    assert f"{res.min_step_time_ms:.1f}" == p["steptime_ms_minimum"]
    assert f"{res.max_step_time_ms:.1f}" == p["steptime_ms_maximum"]
    assert f"{res.std_step_time_ms:.1f}" == p["steptime_ms_standard_deviation"]


def test_breakdown_columns(cpu):
    name, res, ref = cpu
    if name == "jax_transformer_cpu":
        pytest.xfail("XProf counts XLA:CPU pool-thread work (threadpool regions) as host compute in "
                     "steps 1, 4-6, 9-11 and not in 2, 3, 7, 8, 12; our groups equal its trace viewer's "
                     "(no regions); with regions on we count them in every step (grouping._REGIONS)")
    theirs = np.array([r[1:10] for r in _rows(ref[1])], float)
    np.testing.assert_allclose(res.steps[BREAKDOWN].to_numpy(float), theirs, atol=1e-6)
    np.testing.assert_allclose(res.steps[BREAKDOWN].sum(axis=1), res.steps["step_time_ms"], atol=1e-6)


def test_verdict_text(cpu):
    name, res, ref = cpu
    if name == "jax_transformer_cpu":
        pytest.xfail("all-others % depends on the breakdown (see test_breakdown_columns)")
    assert res.recommendation.startswith(ref[1]["p"]["input_conclusion"])


def test_host_breakdown_and_input_ops(cpu):
    _, res, ref = cpu
    p = ref[2]["p"]
    for ours, theirs in [("enqueue", "enqueue_us"), ("preprocessing", "preprocessing_us"),
                         ("advanced_file_read", "advanced_file_read_us"),
                         ("demanded_file_read", "demanded_file_read_us"),
                         ("unclassified", "unclassified_nonequeue_us")]:
        assert f"{res.host_breakdown_us[ours]:.3f}" == p[theirs]
    rows = _rows(ref[2])
    assert len(res.input_ops) == len(rows)
    for (_, op), r in zip(res.input_ops.iterrows(), rows):
        assert op["op_name"] == r[0]
        assert op["count"] == r[1]
        assert op["time_us"] / 1e3 == pytest.approx(r[2], abs=1e-6)
        assert op["time_percent"] / 100 == pytest.approx(r[3], rel=1e-9)
        assert op["self_time_us"] / 1e3 == pytest.approx(r[4], abs=1e-6)
        assert op["self_time_percent"] / 100 == pytest.approx(r[5], rel=1e-9)
        assert op["category"] == r[6]


def test_tf_keras_input_percent():
    run, ref = _load("tf_keras_cpu", "2026_11_22_03_16_08")
    res = input_pipeline(run)
    assert res.verdict == "device"
    assert f"{res.input_percent:.1f}" == "0.3"
    rows = _rows(ref[1])
    total = sum(r[11] for r in rows)
    assert res.input_percent == pytest.approx(100 * sum(r[6] for r in rows) / total, rel=1e-9)


def test_gpu_input_ops_summed_over_hosts():
    run, ref = _load("tf_gpu_multiworker", "2020_12_23_gpu_multi_worker")
    res = input_pipeline(run)
    # A GPU run's steps are the device steps (steps.gpu_device_steps): XProf's one step "0".
    assert res.reason == "" and list(res.steps["step_name"]) == ["0"]
    assert res.steps["step_time_ms"].iloc[0] == pytest.approx(21.310352, abs=1e-6)
    assert f"{res.host_breakdown_us['preprocessing']:.3f}" == ref[2]["p"]["preprocessing_us"]
    rows = _rows(ref[2])
    assert list(res.input_ops["op_name"]) == [r[0] for r in rows]
    assert list(res.input_ops["count"]) == [r[1] for r in rows]


def test_tpu_inference_has_no_steps():
    run, ref = _load("tpu_v6e_inference", "2025_tpu_inference")
    res = input_pipeline(run)
    assert res.steps.empty
    assert res.reason == NO_STEPS_REASON
    assert "StepTraceAnnotation" in res.reason
    assert res.recommendation == ref[1]["p"]["input_conclusion"]
