"""GPU device steps against XProf 2.24.2's step table of tf_gpu_multiworker."""

import json

import numpy as np

from xprof_widgets.analysis.steps import gpu_device_steps

from .conftest import REFERENCE, corpus_run
from .xprof_tables import STEP_BREAKDOWN

NAME, SESSION = "tf_gpu_multiworker", "2020_12_23_gpu_multi_worker"


def test_gpu_steps_match_xprof():
    run = corpus_run(NAME, SESSION)
    for file in ("input_pipeline_analyzer.json", "overview_page.json"):
        ref = json.loads((REFERENCE / NAME / SESSION / file).read_text())
        rows = [[c.get("v") if c else None for c in r["c"]] for r in ref[1]["rows"]]
        steps = gpu_device_steps(run.xspace(run.hosts[0]))
        assert list(steps["step_name"]) == [r[0] for r in rows]
        np.testing.assert_allclose(steps["step_time_ms"], [r[-1] for r in rows], atol=1e-6)
        np.testing.assert_allclose(
            steps[STEP_BREAKDOWN].to_numpy(float), np.array([r[1:10] for r in rows], float), atol=1e-6
        )
        np.testing.assert_allclose(steps[STEP_BREAKDOWN].sum(axis=1), steps["step_time_ms"], atol=1e-6)
