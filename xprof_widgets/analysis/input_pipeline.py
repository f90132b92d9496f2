"""XProf's input pipeline analyzer (`input_pipeline_analyzer`): the step analysis of
`core.input_analysis` as its own tool. XProf's overview converter shows part of the same
analysis (`ConvertOpStatsToInputPipelineAnalysis`), so it lives in the core both read."""

from __future__ import annotations

from .core.input_analysis import NO_STEPS_REASON, InputPipelineResult, input_pipeline

__all__ = ["NO_STEPS_REASON", "InputPipelineResult", "input_pipeline"]
