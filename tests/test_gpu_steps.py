"""GPU device steps against XProf 2.24.2's step tables: TensorFlow on 8 GPUs (a file grouped
when it was written) and JAX 0.11 on an H200, CUDA graphs on and off (files XProf groups and
derives a Steps line for before its step analysis, as `gpu_device_steps` does)."""

import json

import numpy as np
import pytest

from xprof_widgets.analysis.core.steps import gpu_device_steps

from .conftest import REFERENCE, corpus_run
from .xprof_tables import STEP_BREAKDOWN

RUNS = [
    ("tf_gpu_multiworker", "2020_12_23_gpu_multi_worker"),
    ("nvidia_jax_mlp_h200", "2026_11_26_01_22_22"),
    ("nvidia_jax_mlp_no_graphs_h200", "2026_11_26_01_30_16"),
    ("nvidia_jax_scan_h200", "2026_11_26_01_49_05"),
    ("nvidia_jax_scan_no_graphs_h200", "2026_11_26_01_49_10"),
]


@pytest.mark.parametrize("name,session", RUNS)
def test_gpu_steps_match_xprof(name, session):
    run = corpus_run(name, session)
    for file in ("input_pipeline_analyzer.json", "overview_page.json"):
        ref = json.loads((REFERENCE / name / session / file).read_text())
        rows = [[c.get("v") if c else None for c in r["c"]] for r in ref[1]["rows"]]
        steps = gpu_device_steps(run.xspace(run.hosts[0]))
        assert rows  # 1 step on the 8 GPUs, 6 on the H200 (XProf drops the first and last of 8)
        assert list(steps["step_name"]) == [r[0] for r in rows]
        np.testing.assert_allclose(steps["step_time_ms"], [r[-1] for r in rows], atol=1e-6)
        np.testing.assert_allclose(
            steps[STEP_BREAKDOWN].to_numpy(float), np.array([r[1:10] for r in rows], float), atol=1e-6
        )
        np.testing.assert_allclose(steps[STEP_BREAKDOWN].sum(axis=1), steps["step_time_ms"], atol=1e-6)
