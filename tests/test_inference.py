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
from tests.test_tpu_steps import make_tpu_profiles
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
    folder = tmp_path / "plugins" / "profile" / "run"
    folder.mkdir(parents=True)
    path = folder / "tpu_host.xplane.pb"
    path.write_bytes(space.SerializeToString())
    tables = xprof_oracle.tool_data([path], "inference_profile")
    profile = load_run(tmp_path).inference_profile()
    assert profile.models == [r["c"][0]["v"] for r in tables[0]["rows"]] == ["served:2"]
    mine = profile.per_model["served:2"]
    _same_table(tables[1], mine.requests, REQUEST_IDS)
    _same_table(tables[2], mine.batches, BATCH_IDS)
