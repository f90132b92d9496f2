"""The overview's inference latency table (XProf's "Inference Session Latency Breakdown")
against XProf 2.24.2 itself: on the real TPU v6e inference run with each call of its
program marked as a request (`TraceAnnotation("Request", _r=-1)`, made by
`tools/make_tpu_profiles.py serving`) every row and column equals XProf's; on every corpus
run (no request markers) both are empty."""

import json

import numpy as np
import pytest

from tests import xprof_oracle
from tests.conftest import AVAILABLE, CORPUS_LOGDIRS, REFERENCE, corpus_run
from tests.test_tpu_steps import make_tpu_profiles, write_space
from xprof_widgets import load_run
from xprof_widgets.analysis.core.inference import inference_latency

COLUMNS = {"hostTimeMs": "host_ms", "deviceTimeMs": "device_ms", "communicationTimeMs": "communication_ms"}


def _table(overview_json):
    t = overview_json[4]
    ids = [c["id"] for c in t["cols"]]
    return [dict(zip(ids, [c.get("v") for c in r["c"]])) for r in t.get("rows", [])]


def test_inference_latency_equals_xprof(tmp_path):
    path = make_tpu_profiles.write("serving", tmp_path)
    theirs = _table(xprof_oracle.tool_data([path], "overview_page"))
    ours = load_run(tmp_path).overview().inference_latency
    assert [r["percentile"] for r in theirs] == ours["percentile"].tolist() == [
        "Avg", "50.0%", "75.0%", "90.0%", "99.0%", "99.9%",
    ]  # fmt: skip
    for r, (_, o) in zip(theirs, ours.iterrows()):
        for k, col in {**COLUMNS, "totalTimeMs": "total_ms"}.items():
            assert o[col] == pytest.approx(r[k], rel=1e-9, abs=1e-6), (r["percentile"], k)
    requests = load_run(tmp_path).stats().requests
    assert len(requests) == 99  # each call after compilation; its group reaches one program run


def test_percentiles_pick_xprofs_index():
    """The request at int(p / 100 x n) of those sorted by latency: with 10 requests 99 % and
    99.9 % are both the last; the Avg row is the means."""
    import pandas as pd

    r = pd.DataFrame({"latency_ps": np.arange(1, 11) * 10**9, "device_ps": np.arange(1, 11) * 10**8, "transfer_ps": 0})
    t = inference_latency(r.sample(frac=1, random_state=0))
    assert t["total_ms"].tolist() == [5.5, 6.0, 8.0, 10.0, 10.0, 10.0]
    assert t["device_ms"].iloc[0] == pytest.approx(0.55) and t["host_ms"].iloc[1] == pytest.approx(5.4)


RUNS = [(n, s.name) for n in CORPUS_LOGDIRS if n in AVAILABLE for s in sorted((REFERENCE / n).glob("*"))[:1]]


@pytest.mark.parametrize("name,session", RUNS, ids=[f"{n}/{s}" for n, s in RUNS])
def test_no_requests_on_the_corpus(name, session):
    ref = json.loads((REFERENCE / name / session / "overview_page.json").read_text())
    assert _table(ref) == []
    assert corpus_run(name, session).overview().inference_latency.empty


#: XProf's inference profile request table column -> ours.
PROFILE_COLUMNS = {
    "latency_ms": "latency_ms",
    "host_preprocessing": "host_preprocessing_ms",
    "host_runtime": "host_runtime_ms",
    "data_transfer_h2d": "data_transfer_h2d_ms",
    "data_transfer_d2h": "data_transfer_d2h_ms",
    "device_compute": "device_compute_ms",
    "host_postprocess": "host_postprocess_ms",
    "idle time": "idle_ms",
}


def test_inference_profile_equals_xprof(tmp_path):
    """XProf's inference profile tool on the same run: the requests it samples (percentile,
    request id), each one's latency and breakdown, the Average row, the average latency and
    the throughput as it writes them; the widget shows them."""
    import xprof_widgets as xw

    path = make_tpu_profiles.write("serving", tmp_path)
    tables = xprof_oracle.tool_data([path], "inference_profile")
    assert tables[0]["p"]["hasBatching"] == "false" and [r["c"][0]["v"] for r in tables[0]["rows"]] == ["ALL"]
    t = tables[1]
    ids = [c["id"] for c in t["cols"]]
    theirs = [dict(zip(ids, [c.get("v") for c in r["c"]])) for r in t["rows"]]
    run = load_run(tmp_path)
    profile = run.inference_profile()
    ours = profile.requests
    assert len(ours) == len(theirs) == 4  # 50.505, 75.758, 90.909 of 99 requests, and Average
    for x, (_, o) in zip(theirs, ours.iterrows()):
        assert (o["percentile"], o["request_id"]) == (x["percentile"], x["request_id"])
        for k, col in PROFILE_COLUMNS.items():
            assert o[col] == pytest.approx(x[k], rel=1e-12, abs=1e-9), (x["percentile"], k)
    assert f"{profile.average_latency_ms:.3f}" == t["p"]["averageLatencyMs"]
    assert f"{profile.throughput:.1f}" == t["p"]["throughput"]
    assert "inference_profile" in run.tools and "pod_viewer" not in run.tools
    w = xw.InferenceProfileWidget(run)
    assert 'data-testid="inference-requests" data-rows="4"' in w.html and set(w.figures) == {"requests"}


def test_inference_profile_samples_as_xprof():
    """At most 60 requests: every one, at 100 x i / n; more: those in XProf's windows."""
    from xprof_widgets.analysis.inference_profile import _sampled

    assert [round(p, 3) for _, p in _sampled(4)] == [0.0, 25.0, 50.0, 75.0]
    assert [i for i, _ in _sampled(99)] == [50, 75, 90]
    assert [i for i, _ in _sampled(1000)] == [
        *range(500, 510), *range(750, 760), *range(900, 910), *range(990, 995), 999,
    ]  # fmt: skip


@pytest.mark.parametrize("name,session", RUNS, ids=[f"{n}/{s}" for n, s in RUNS])
def test_no_inference_profile_on_the_corpus(name, session):
    run = corpus_run(name, session)
    p = run.inference_profile()
    assert p.requests.empty and "root level -1" in p.reason and "inference_profile" not in run.tools


# --- batching servers: batches, per-model tables ------------------------------------------------

REQUEST_IDS = {
    **PROFILE_COLUMNS,
    "percentile": "percentile",
    "request_id": "request_id",
    "batching_request_size": "request_size",
    "host_batch_formation": "batching_delay_ms",  # (XProf's id; it holds the request's wait for its batch)
    "throughput": "throughput",
}
BATCH_IDS = {
    "percentile": "percentile",
    "batch_id": "batch_id",
    "latency": "latency_ms",
    "padding_amount": "padding_amount",
    "batch_size_after_padding": "batch_size_after_padding",
    "batching_efficiency": "batching_efficiency",
    "batching_delay_us": "batching_delay_ms",  # (in ms, whatever XProf's id says)
    "throughput": "throughput",
    "device_compute": "device_compute_ms",
    "program_id": "program_ids",
}


def _same_table(theirs, ours, ids):
    cols = [c["id"] for c in theirs["cols"]]
    rows = [dict(zip(cols, [c.get("v") for c in r["c"]])) for r in theirs["rows"]]
    assert len(rows) == len(ours)
    assert set(cols) - {"trace_viewer_url"} <= set(ids)  # every column XProf shows is compared
    for x, (_, o) in zip(rows, ours.iterrows()):
        for k, mine in ids.items():
            if k not in x:
                continue
            if isinstance(x[k], float):
                assert o[mine] == pytest.approx(x[k], rel=1e-12, abs=1e-9), (x["percentile"], k)
            else:
                assert o[mine] == x[k], (x["percentile"], k)


@pytest.mark.parametrize("variant", ["batches", "batches_models"])
def test_batches_and_models_equal_xprof(tmp_path, variant):
    """A server that batches its requests, made from the real v6e run
    (`tools/make_tpu_profiles.py batches`: TF Serving's `BatchingSessionRun` requests, the
    model id on a session run in each batch; `batches_models`: user-defined requests of two
    models): XProf's model list, and per model its request table (the sampled requests,
    a row per padded batch size, Average; sizes, waits for the batch, throughputs) and its
    batch table (sampled batches, per size, Aggregated; padding, efficiency, delay, device
    time, program ids), every cell, and each table's average latency and throughput."""
    import xprof_widgets as xw

    path = make_tpu_profiles.write(variant, tmp_path)
    tables = xprof_oracle.tool_data([path], "inference_profile")
    profile = load_run(tmp_path).inference_profile()
    models = [r["c"][0]["v"] for r in tables[0]["rows"]]
    assert profile.models == models == (["tf_model:1"] if variant == "batches" else ["model_a", "model_b"])
    assert tables[0]["p"]["hasBatching"] == "true" and profile.has_batching
    assert len(tables) == 1 + 2 * len(models)
    for k, model in enumerate(models):
        mine = profile.per_model[model]
        requests, batches = tables[1 + 2 * k], tables[2 + 2 * k]
        _same_table(requests, mine.requests, REQUEST_IDS)
        _same_table(batches, mine.batches, BATCH_IDS)
        assert requests["p"] == {
            "averageLatencyMs": f"{mine.average_latency_ms:.3f}",
            "throughput": f"{mine.throughput:.1f}",
        }
        assert batches["p"] == {
            "averageLatencyMs": f"{mine.batch_average_latency_ms:.3f}",
            "hasBatchingParam": "false",
            "throughput": f"{mine.batch_throughput:.1f}",
        }
        assert any(p.startswith("Batch size ") for p in mine.requests["percentile"])
    # Every batch of the run, each request's wait for it and its size.
    assert len(profile.all_batches) == 99 and (profile.all_batches["size"] > 0).all()
    w = xw.InferenceProfileWidget(tmp_path)
    assert 'data-testid="inference-batches"' in w.html and w.model == models[0]
    if len(models) > 1:
        w.model = models[1]
        assert f'data-rows="{len(profile.per_model[models[1]].batches)}"' in w.html


@pytest.mark.parametrize("kind", ["TfrtModelRun", "ServingModelRun"])
def test_tfrt_and_pathways_requests_equal_xprof(tmp_path, kind):
    """TF Serving's other request types (TFRT's `TfrtModelRun`, Pathways' `ServingModelRun`),
    the model id on the request itself, in the batching run: XProf's tables, every cell."""
    space = make_tpu_profiles.make("batches")
    host = next(p for p in space.planes if p.name == "/host:CPU")
    model_stat = next(i for i, s in host.stat_metadata.items() if s.name == "model_id")
    request = next(k for k, md in host.event_metadata.items() if md.name == "BatchingSessionRun")
    host.event_metadata[request].name = kind
    for md in host.event_metadata.values():
        if md.name == "SessionRun":  # (the batch's session run gives no model here)
            md.name = "BatchRun"
    for line in host.lines:
        for e in line.events:
            if e.metadata_id == request:
                e.stats.add(metadata_id=model_stat).str_value = "served:2"
    path = write_space(tmp_path, space)
    tables = xprof_oracle.tool_data([path], "inference_profile")
    profile = load_run(tmp_path).inference_profile()
    assert profile.models == [r["c"][0]["v"] for r in tables[0]["rows"]] == ["served:2"]
    mine = profile.per_model["served:2"]
    _same_table(tables[1], mine.requests, REQUEST_IDS)
    _same_table(tables[2], mine.batches, BATCH_IDS)


#: XProf's batch table properties of TF Serving's batching parameters -> ours.
PARAM_KEYS = {
    "num_batch_threads": "batchingParamNumBatchThreads",
    "batch_timeout_micros": "batchingParamBatchTimeoutMicros",
    "max_batch_size": "batchingParamMaxBatchSize",
    "max_enqueued_batches": "batchingParamMaxEnqueuedBatches",
    "allowed_batch_sizes": "batchingParamAllowedBatchSizes",
}


def _xprof_patterns(table):
    """{pattern: (count, percentile text)} of XProf's tensor pattern table (its row order
    differs from one process to the next: compared by pattern)."""
    return {r["c"][1]["v"]: (int(r["c"][2]["v"]), r["c"][3]["v"]) for r in table["rows"]}


def _our_patterns(frame):
    from xprof_widgets.analysis.inference_profile import TENSOR_PERCENTILES

    if frame is None:
        return None
    return {
        r["tensor_pattern"]: (
            int(r["count"]),
            "<br>".join(f"{p:.2f}%: {r[f'p{p:g}_ms']:f}ms" for p in TENSOR_PERCENTILES),
        )
        for r in frame.to_dict("records")
    }


def _compare_serving_details(paths, profile):
    """XProf's per-model batching parameters (batch table properties) and tensor patterns
    (the table after each model's request and batch tables), ours alike; (params, patterns)
    of the first model."""
    tables = xprof_oracle.tool_data(paths, "inference_profile")
    models = [r["c"][0]["v"] for r in tables[0]["rows"]]
    assert profile.models == models
    per = (len(tables) - 1) // len(models)
    assert per == 3  # requests, batches, tensor patterns
    for k, model in enumerate(models):
        mine = profile.per_model[model]
        batches, patterns = tables[2 + per * k], tables[3 + per * k]
        p = batches["p"]
        if p["hasBatchingParam"] == "true":
            assert {k: str(v) for k, v in mine.batching_params.items()} == {k: p[v] for k, v in PARAM_KEYS.items()}
        else:
            assert mine.batching_params is None and not any(k.startswith("batchingParam") for k in p)
        assert _our_patterns(mine.tensor_patterns) == _xprof_patterns(patterns)
        _same_table(tables[1 + per * k], mine.requests, REQUEST_IDS)
        _same_table(batches, mine.batches, BATCH_IDS)
    # XProf's own page flag says "no patterns" (its page then shows no table; we show them).
    assert tables[0]["p"]["hasTensorPattern"] == "false"
    return profile.per_model[models[0]]


def test_batching_params_and_tensor_patterns_equal_xprof(tmp_path):
    """TF Serving's batching parameters (`/host:tfstreamz`: model_a's from two batch ops, the
    later op's winning; a model the run does not serve) and the TPU runtime's tensor
    conversions (`tools/make_tpu_profiles.py serving_details`: per batch a Linearize and a
    Delinearize, every third a fast-path transfer, every fifth request its own Linearize, a
    batch and some requests with an event without layout, which then have no pattern): every
    parameter and every pattern's count and percentiles equal XProf's, per model."""
    path = make_tpu_profiles.write("serving_details", tmp_path)
    run = load_run(tmp_path)
    first = _compare_serving_details([path], run.inference_profile())
    assert first.batching_params["max_batch_size"] == 64 and first.batching_params["allowed_batch_sizes"] == "8,16,32"
    assert len(first.tensor_patterns) >= 5 and first.tensor_patterns["count"].sum() > 40
    assert run.inference_profile().per_model["model_b"].batching_params is None
    import xprof_widgets as xw

    w = xw.InferenceProfileWidget(run)
    assert 'data-testid="batching-params"' in w.html and 'data-testid="tensor-patterns"' in w.html
    assert "Linearize (s32[1,16]) {1,0}" in w.html


def test_serving_details_of_two_hosts_equal_xprof(tmp_path):
    """Two hosts: the parameters on one only (the first host to have a model's wins), the
    patterns of both pooled by pattern; both file orders."""
    for order in (0, 1):
        root = tmp_path / str(order)
        run_dir = root / "plugins" / "profile" / "run"
        run_dir.mkdir(parents=True)
        with_params = make_tpu_profiles.make("serving_details")
        without = make_tpu_profiles.make("batches_models")
        make_tpu_profiles.add_tensor_events(without, every_request=3)
        spaces = [with_params, without] if order == 0 else [without, with_params]
        paths = []
        for name, space in zip(("host-a", "host-b"), spaces):
            del space.hostnames[:]
            space.hostnames.append(name)
            paths.append(run_dir / f"{name}.xplane.pb")
            paths[-1].write_bytes(space.SerializeToString())
        first = _compare_serving_details(paths, load_run(root).inference_profile())
        assert first.batching_params["num_batch_threads"] == 2


def test_batching_params_need_two_snapshots_and_int64_values(tmp_path):
    """XProf reads the second of exactly two snapshots; a uint64 integer reads 0; a metric
    without a model_name label is no model's."""
    from xprof_widgets.analysis.core.inference import host_batching_params
    from xprof_widgets.io.xspace import read_xspace

    cases = {"one": 1, "three": 3, "two": 2}
    for name, snapshots in cases.items():
        space = make_tpu_profiles.make("batches")
        metrics = make_tpu_profiles.batching_metrics("tf_model", "op", 4, 5000, 16, 100, "1,2,4")
        metrics.append(("/tensorflow/serving/batching/max_batch_size{op_name=x}", 7))
        plane = make_tpu_profiles.add_tfstreamz(space, metrics, snapshots=snapshots)
        if name == "two":  # the timeout as a uint64
            sid = next(i for i, m in plane.stat_metadata.items() if "batch_timeout_micros" in m.name)
            for st in plane.lines[0].events[1].stats:
                if st.metadata_id == sid:
                    st.uint64_value = 5000
        path = write_space(tmp_path / name, space, "h")
        ours = host_batching_params(read_xspace(path))
        p = xprof_oracle.tool_data([path], "inference_profile")[2]["p"]
        if snapshots != 2:
            assert ours == {} and p["hasBatchingParam"] == "false"
        else:
            assert ours["tf_model:1"]["batch_timeout_micros"] == 0 and ours["tf_model:1"]["max_batch_size"] == 16
            assert {k: str(v) for k, v in ours["tf_model:1"].items()} == {k: p[v] for k, v in PARAM_KEYS.items()}


@pytest.mark.parametrize("kind", ["TfrtModelRun", "ServingModelRun", "BatchingSessionRun"])
def test_unbatched_serving_requests_equal_xprof(tmp_path, kind):
    """TF Serving's request events of a server that does not batch (the serving run's
    requests named as TFRT, Pathways and TF Serving's session name them): XProf's request
    table, every cell."""
    space = make_tpu_profiles.make("serving")
    host = next(p for p in space.planes if p.name == "/host:CPU")
    request = next(k for k, md in host.event_metadata.items() if md.name == "Request")
    host.event_metadata[request].name = kind
    path = write_space(tmp_path, space)
    tables = xprof_oracle.tool_data([path], "inference_profile")
    profile = load_run(tmp_path).inference_profile()
    assert profile.models == [r["c"][0]["v"] for r in tables[0]["rows"]] == ["ALL"] and not profile.has_batching
    assert len(tables) == 2 and len(profile.all_requests) == 99
    _same_table(tables[1], profile.per_model["ALL"].requests, REQUEST_IDS)
