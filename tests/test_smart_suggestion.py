"""XProf's smart suggestions against XProf 2.24.2 itself: its open-source build runs one rule,
BarrierCoresRule (TensorCores waiting at `barrier-cores` for at least 10 % of each step).
On a made three-host TPU run where they wait 15 %, 15 % and 5 % (`tools/make_tpu_profiles.py
barriers`, the last host a straggler) our suggestion's text equals XProf's, letter for
letter; on every corpus run and the other made TPU runs neither says anything."""

import pytest

import xprof_widgets as xw
from tests import xprof_oracle
from tests.conftest import corpus_run, first_sessions, session_files
from tests.test_tpu_steps import make_tpu_profiles
from xprof_widgets.analysis.smart_suggestion import _stragglers, barrier_cores_suggestion


@pytest.fixture(scope="module")
def barriers(tmp_path_factory):
    root = tmp_path_factory.mktemp("barriers")
    make_tpu_profiles.write("barriers", root)
    return sorted(root.glob("plugins/profile/run/*.xplane.pb")), xw.load_run(root)


def test_barrier_cores_rule_equals_xprof(barriers):
    paths, run = barriers
    theirs = xprof_oracle.tool_data(paths, "smart_suggestion", {"refresh_suggestion": "true"})["suggestions"]
    ours = run.smart_suggestions()
    assert [s["ruleName"] for s in theirs] == ours["rule_name"].tolist() == ["BarrierCoresRule"]
    assert ours["suggestion_text"].iloc[0] == theirs[0]["suggestionText"]
    assert ours.attrs["barrier_cores_percent"] == pytest.approx(11.66, abs=0.05)
    assert [h for h, _ in ours.attrs["stragglers"]] == ["tpu-worker-2"]
    # The overview page shows it under XProf's conclusion.
    w = xw.OverviewWidget(run)
    assert 'data-rule="BarrierCoresRule"' in w.html and "Host <b>tpu-worker-2</b>" in w.html


def test_stragglers_as_xprof_finds_them():
    """XProf's own test: four hosts at 50, 50, 50 and 10 % name the last (MAD 0: any other
    value is an outlier); fewer than three hosts name none."""
    assert _stragglers({"host0": 50.0, "host1": 50.0, "host2": 50.0, "host3": 10.0}) == [("host3", 10.0)]
    assert _stragglers({"a": 50.0, "b": 10.0}) == []
    text = barrier_cores_suggestion(12.34, [("<b>x</b>", 1.0)])
    assert "12.3% of each step time" in text and "&lt;b&gt;x&lt;/b&gt;" in text  # names escaped


RUNS = first_sessions()


@pytest.mark.parametrize("name,session", RUNS, ids=[f"{n}/{s}" for n, s in RUNS])
def test_no_suggestion_where_xprof_has_none(name, session):
    paths = session_files(name, session)
    assert xprof_oracle.tool_data(paths, "smart_suggestion")["suggestions"] == []
    assert corpus_run(name, session).smart_suggestions().empty


@pytest.mark.parametrize("variant", ["infeed", "pod"])
def test_no_suggestion_on_made_runs_without_barrier_waits(tmp_path, variant):
    make_tpu_profiles.write(variant, tmp_path)
    paths = sorted(tmp_path.glob("plugins/profile/run/*.xplane.pb"))
    assert xprof_oracle.tool_data(paths, "smart_suggestion")["suggestions"] == []
    assert xw.load_run(tmp_path).smart_suggestions().empty
