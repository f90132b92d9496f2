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
