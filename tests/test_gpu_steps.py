"""GPU device steps against XProf 2.24.2's step table of tf_gpu_multiworker."""

import json

import numpy as np

from xprof_widgets.analysis.steps import gpu_device_steps

from .conftest import REFERENCE, corpus_run

NAME, SESSION = "tf_gpu_multiworker", "2020_12_23_gpu_multi_worker"
BREAKDOWN = [
    "device_compute_ms",
    "device_to_device_ms",
    "device_collectives_ms",
    "host_compute_ms",
    "kernel_launch_ms",
    "input_ms",
    "output_ms",
    "compilation_ms",
    "all_others_ms",
]


def test_gpu_steps_match_xprof():
    run = corpus_run(NAME, SESSION)
    for file in ("input_pipeline_analyzer.json", "overview_page.json"):
        ref = json.loads((REFERENCE / NAME / SESSION / file).read_text())
        rows = [[c.get("v") if c else None for c in r["c"]] for r in ref[1]["rows"]]
        steps = gpu_device_steps(run.xspace(run.hosts[0]))
        assert list(steps["step_name"]) == [r[0] for r in rows]
        np.testing.assert_allclose(steps["step_time_ms"], [r[-1] for r in rows], atol=1e-6)
        np.testing.assert_allclose(
            steps[BREAKDOWN].to_numpy(float), np.array([r[1:10] for r in rows], float), atol=1e-6
        )
        np.testing.assert_allclose(steps[BREAKDOWN].sum(axis=1), steps["step_time_ms"], atol=1e-6)
