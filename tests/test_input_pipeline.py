"""Input pipeline analysis against XProf 2.24.2's input_pipeline_analyzer.json."""

import json

import numpy as np
import pandas as pd
import pytest

from xprof_widgets.analysis.core import steps as S
from xprof_widgets.analysis.core.tpu_steps import NO_TPU_STEPS_REASON
from xprof_widgets.analysis.input_pipeline import NO_STEPS_REASON, input_pipeline
from xprof_widgets.io import native

from .conftest import REFERENCE, corpus_run
from .xprof_tables import STEP_BREAKDOWN

CPU_RUNS = [
    ("jax_mlp_cpu", "2026_11_22_03_11_56"),
    ("jax_transformer_cpu", "2026_11_22_03_13_20"),
    ("tf_keras_cpu", "2026_11_22_03_16_08"),
    ("tf_keras_cpu", "2026_11_22_03_16_48"),
]


def _load(name, session):
    run = corpus_run(name, session)
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
    theirs = np.array([r[1:10] for r in _rows(ref[1])], float)
    np.testing.assert_allclose(res.steps[STEP_BREAKDOWN].to_numpy(float), theirs, atol=1e-6)
    np.testing.assert_allclose(res.steps[STEP_BREAKDOWN].sum(axis=1), res.steps["step_time_ms"], atol=1e-6)


def test_verdict_text(cpu):
    name, res, ref = cpu
    assert res.recommendation.startswith(ref[1]["p"]["input_conclusion"])


def _assert_host_breakdown(res, ref):
    """The host-side breakdown as XProf prints it (µs, 3 decimals)."""
    p = ref[2]["p"]
    for ours, theirs in [
        ("enqueue", "enqueue_us"),
        ("preprocessing", "preprocessing_us"),
        ("advanced_file_read", "advanced_file_read_us"),
        ("demanded_file_read", "demanded_file_read_us"),
        ("unclassified", "unclassified_nonequeue_us"),
    ]:
        assert f"{res.host_breakdown_us[ours]:.3f}" == p[theirs]


def test_host_breakdown_and_input_ops(cpu):
    _, res, ref = cpu
    _assert_host_breakdown(res, ref)
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


@pytest.mark.parametrize(
    "name,session",
    [
        ("amd_jax_gemm_mi300", "2026_02_20_13_54_10"),
        ("amd_jax_elementwise_mi300", "2026_02_20_13_54_27"),
        ("amd_jax_conv_mi300", "2026_02_20_13_53_59"),
        ("nvidia_jax_no_steps_h200", "2026_11_26_01_22_22"),
    ],
)
def test_jax_gpu_without_step_markers(name, session):
    """JAX on AMD GPUs and an NVIDIA H200, no StepTraceAnnotation: no steps, XProf's
    conclusion, no input ops."""
    run, ref = _load(name, session)
    res = input_pipeline(run)
    assert res.steps.empty and res.reason == NO_STEPS_REASON
    assert res.recommendation == ref[1]["p"]["input_conclusion"]
    assert len(res.input_ops) == len(_rows(ref[2]))
    _assert_host_breakdown(res, ref)


def test_tpu_inference_has_no_steps():
    run, ref = _load("tpu_v6e_inference", "2025_tpu_inference")
    res = input_pipeline(run)
    assert res.steps.empty
    # TPU steps are the TensorCores' (`Steps` lines), which an inference run has none of.
    assert res.reason == NO_TPU_STEPS_REASON
    assert res.recommendation == ref[1]["p"]["input_conclusion"]


def _xprof_sweep(events):
    """XProf's `ToNonOverlappedEvents`, boundary by boundary (the oracle): [(type, begin, end)]."""
    bounds = sorted([(s, 1, -t) for t, s, e in events] + [(e, 0, -t) for t, s, e in events])
    count, top, out = {}, 0, []
    for (time, is_start, neg), nxt in zip(bounds, bounds[1:]):
        t = -neg
        if is_start:
            count[t] = count.get(t, 0) + 1
            top = max(top, t)
        else:
            count[t] = count.get(t, 0) - 1
            if t == top and count[t] == 0:
                top = max([k for k, c in count.items() if k < t and c > 0], default=0)
        out.append((top, time, nxt[0]))
    return out


def _step_breakdown(events, begin, end):
    """Our breakdown of one step (group 7) from [(type, begin, end)]: {type: ps}, well-formed."""
    t, s, e = (np.array(c, np.int64) for c in zip(*events))
    ev = {"group": np.full(len(t), 7), "start": s, "end": e, "type": t}
    bd = S._breakdown(ev, pd.DataFrame({"group_id": [7], "begin_ps": [begin], "end_ps": [end]})).loc[7]
    return {int(k): int(v) for k, v in bd.drop("well_formed").items() if v}, bool(bd["well_formed"])


def test_zero_length_event_in_a_gap_counts_the_gap():
    """XProf sorts a zero-length event's end before its start: in a gap, its type stays on."""
    hc, wait = S.HOST_COMPUTE, S.HOST_WAIT_INPUT
    # Host op 0-10, a zero-length event at 15 (e.g. a pool worker's StartRegion), op 40-50:
    # host compute 0-10 and 15-50, unknown 10-15 and 50-60.
    assert _step_breakdown([(hc, 0, 10), (hc, 15, 15), (hc, 40, 50)], 0, 60) == ({hc: 45, S.UNKNOWN_TIME: 15}, True)
    # The same event inside a running op changes nothing.
    assert _step_breakdown([(hc, 0, 20), (hc, 15, 15), (hc, 40, 50)], 0, 60) == ({hc: 30, S.UNKNOWN_TIME: 30}, True)
    # Nothing of its type after it in the group: the gap stays unknown.
    assert _step_breakdown([(hc, 0, 10), (hc, 15, 15)], 0, 60) == ({hc: 10, S.UNKNOWN_TIME: 50}, True)
    # A higher type: stays on until an event of that type or higher has ended (here the one at 30-35).
    assert _step_breakdown([(hc, 0, 10), (wait, 15, 15), (hc, 20, 25), (wait, 30, 35), (hc, 40, 50)], 0, 60) == (
        {wait: 20, hc: 20, S.UNKNOWN_TIME: 20},
        True,
    )
    # A step whose only host compute is one zero-length event has no host compute span: not well formed.
    assert _step_breakdown([(hc, 15, 15)], 0, 60)[1] is False


def test_sweep_equals_xprof_boundary_walk():
    rng = np.random.default_rng(5)
    types = [S.HOST_COMPUTE, S.HOST_TO_HOST, S.HOST_TO_DEVICE, S.HOST_WAIT_INPUT, S.DEVICE_COMPUTE_32]
    for _ in range(400):
        n_groups = rng.integers(1, 4)
        group, start, end, kind = [], [], [], []
        for g in range(n_groups):
            n = rng.integers(1, 20)
            s = rng.integers(0, 30, n)
            group += [10 * g] * n
            start += list(s)
            end += list(s + np.where(rng.random(n) < 0.4, 0, rng.integers(1, 10, n)))
            kind += list(rng.choice(types, n))
        group, start, end, kind = (np.array(c, np.int64) for c in (group, start, end, kind))
        mark = int(rng.choice(types))
        spans, marked = S._sweep(group, start, end, kind, mark)
        for g in np.unique(group):
            want = _xprof_sweep(list(zip(kind[group == g], start[group == g], end[group == g])))
            at = spans["group"] == g
            got = zip(spans["label"][at], spans["begin"][at], spans["end"][at])
            assert sorted(w for w in want if w[2] > w[1]) == sorted(
                (int(a), int(b), int(c)) for a, b, c in got if c > b
            )
            assert (g in marked) == any(w[0] == mark for w in want)


def test_breakdown_in_chunks_equals_one_sweep(monkeypatch):
    """Steps swept a few at a time (SWEEP_CHUNK) add up to the same breakdown as one sweep
    (the numpy sweep's chunks: the compiled walk takes a step at a time)."""
    monkeypatch.setattr(native, "available", lambda: False)
    rng = np.random.default_rng(11)
    types = [S.HOST_COMPUTE, S.HOST_TO_HOST, S.HOST_TO_DEVICE, S.HOST_WAIT_INPUT]
    n = 3000
    group = rng.choice([3, 5, 8, 13, 21, 34, 55, 89], n)  # 89: no step of its own
    start = rng.integers(0, 1000, n)
    ev = {
        "group": group,
        "start": start,
        "end": start + np.where(rng.random(n) < 0.2, 0, rng.integers(1, 50, n)),
        "type": np.where(rng.random(n) < 0.05, -1, rng.choice(types, n)),
    }
    steps = pd.DataFrame({"group_id": [3, 5, 8, 13, 21, 34, 55], "begin_ps": 100, "end_ps": 900})
    whole = S._breakdown(ev, steps)
    assert whole["well_formed"].any() and len(whole.columns) > 3
    for chunk in (1, 100, 500):
        monkeypatch.setattr(S, "SWEEP_CHUNK", chunk)
        pd.testing.assert_frame_equal(S._breakdown(ev, steps), whole)


@pytest.mark.skipif(not native.available(), reason="the compiled loops were not built")
def test_compiled_breakdown_equals_the_numpy_sweep(monkeypatch):
    """The compiled walk (`xw_step_walk`) and the vectorised `_sweep` give every step the
    same time per type and the same well-formed flag: nested, overlapping, zero-length and
    reversed events, types up to the last, steps clipping their events."""
    rng = np.random.default_rng(23)
    types = [S.HOST_COMPUTE, S.HOST_TO_HOST, S.HOST_TO_DEVICE, S.HOST_WAIT_INPUT, S.DEVICE_WAIT_HOST]
    for case in range(300):
        n = int(rng.integers(1, 200))
        groups = rng.choice([2, 4, 6, 9], int(rng.integers(1, 5)), replace=False)
        start = rng.integers(0, 100, n)
        length = np.where(rng.random(n) < 0.3, 0, rng.integers(1, 40, n))
        length[rng.random(n) < 0.02] *= -1  # an end before its start: the walk stays XProf's
        ev = {
            "group": rng.choice(groups, n),
            "start": start,
            "end": start + length,
            "type": np.where(rng.random(n) < 0.05, -1, rng.choice(types, n)),
        }
        steps = pd.DataFrame({"group_id": groups, "begin_ps": rng.integers(0, 30), "end_ps": rng.integers(60, 150)})
        mark = int(rng.choice(types))
        compiled = S._breakdown(ev, steps, mark)
        with monkeypatch.context() as m:
            m.setattr(native, "available", lambda: False)
            pd.testing.assert_frame_equal(compiled, S._breakdown(ev, steps, mark), obj=f"case {case}")


@pytest.mark.skipif(not native.available(), reason="the compiled loops were not built")
def test_compiled_breakdown_of_a_big_run(monkeypatch):
    """Steps of tens of thousands of events over a long time (the compiled walk's radix
    sort, several passes; its two threads), and a step whose events span more than its
    keys hold (2**52 ps: the numpy sweep then does the work): the numpy sweep's numbers."""
    rng = np.random.default_rng(5)
    types = np.array([S.HOST_COMPUTE, S.HOST_TO_HOST, S.HOST_TO_DEVICE, S.HOST_WAIT_INPUT, S.DEVICE_WAIT_HOST])
    n = 3 * S._TWO_THREADS
    groups = np.arange(1, 25) * 7
    start = rng.integers(0, 10**13, n)
    ev = {
        "group": np.sort(rng.choice(groups, n)),
        "start": start,
        "end": start + np.where(rng.random(n) < 0.1, 0, rng.integers(1, 10**9, n)),
        "type": np.where(rng.random(n) < 0.01, -1, rng.choice(types, n)).astype(np.int16),
    }
    steps = pd.DataFrame({"group_id": groups, "begin_ps": 10**11, "end_ps": 9 * 10**12})
    wide = {k: v.copy() for k, v in ev.items()}
    wide["end"][0] = wide["start"][0] + 2**53  # (group 7's events now span more than 2**52 ps)
    for case in (ev, wide):
        compiled = S._breakdown(case, steps)
        assert compiled["well_formed"].all() and len(compiled.columns) == len(types) + 2
        with monkeypatch.context() as m:
            m.setattr(native, "available", lambda: False)
            pd.testing.assert_frame_equal(compiled, S._breakdown(case, steps))


def test_jax_transformer_host_compute_per_step():
    """The steps where pool work shows as host compute are those where the zero-length StartRegion
    of the worker that ran the step's program falls after the step's last Python op."""
    run, ref = _load("jax_transformer_cpu", "2026_11_22_03_13_20")
    steps = input_pipeline(run).steps
    theirs = [r[4] for r in _rows(ref[1])]
    np.testing.assert_allclose(steps["host_compute_ms"], theirs, atol=1e-6)
    full = steps["host_compute_ms"] > 0.99 * steps["step_time_ms"]
    assert list(steps.loc[full, "step_name"][:6]) == ["train 1", "train 4", "train 5", "train 6", "train 9", "train 10"]
    assert (steps.loc[~full, "host_compute_ms"] < 13).all()
