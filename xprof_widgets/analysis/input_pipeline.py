"""XProf's input pipeline analyzer (`input_pipeline_analyzer`): the step analysis of
`core.input_analysis` as its own tool. XProf's overview converter shows part of the same
analysis (`ConvertOpStatsToInputPipelineAnalysis`), so it lives in the core both read."""

from __future__ import annotations

from .core.input_analysis import NO_STEPS_REASON, InputPipelineResult
from .core.run_stats import RunStats, as_stats, input_pipeline_result
from .core.runlike import RunLike


def input_pipeline(source: RunStats | RunLike) -> InputPipelineResult:
    """XProf's input pipeline analysis of a run's statistics (`core.run_stats.RunStats`; a
    run: its stats read in this process): the steps of its step database (one host's, or
    the steps all hosts share) with their breakdown, the input ops of every host summed.
    CPU-only runs get host steps; GPU runs the device steps (`steps.gpu_device_steps`); TPU
    device steps are not reimplemented (input ops only, with a `reason`)."""
    return input_pipeline_result(as_stats(source))


__all__ = ["NO_STEPS_REASON", "InputPipelineResult", "input_pipeline"]
