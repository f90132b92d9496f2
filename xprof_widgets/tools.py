"""The tool registry: every tool once, with XProf's name for it.

`run.tools`, `run.tool_status()`, ProfileWidget's tool list and the package's widget
names all read `TOOLS`; adding a tool is one entry here (its label, its widget) and its
rule in `analysis/core/availability.py` (the cheap check of whether a run has data for it
and, if not, why; a host summary carries those).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from .analysis.core.availability import STATUS


@dataclass(frozen=True)
class Tool:
    """One tool: `name` (XProf's), `label` (shown to people), `widget` (class name in
    xprof_widgets) and `module` (where it lives), `per_host` (it shows one host of a
    run), `status(run)` -> (has data, why not)."""

    name: str
    label: str
    widget: str
    module: str
    per_host: bool
    status: Callable


TOOLS = [
    Tool(name, label, widget, f".widgets.{module}", per_host, STATUS[name])
    for name, label, widget, module, per_host in [
        ("overview_page", "Overview", "OverviewWidget", "overview", True),
        ("input_pipeline_analyzer", "Input pipeline", "InputPipelineWidget", "input_pipeline", True),
        ("op_profile", "HLO op profile", "OpProfileWidget", "op_profile", False),
        ("hlo_stats", "HLO op stats", "HloStatsWidget", "hlo_stats", False),
        ("trace_viewer", "Trace viewer", "TraceViewerWidget", "trace_viewer", True),
        ("memory_profile", "Memory profile", "MemoryProfileWidget", "memory_profile", True),
        ("memory_viewer", "Memory viewer", "MemoryViewerWidget", "memory_viewer", False),
        ("graph_viewer", "Graph viewer", "GraphViewerWidget", "graph_viewer", False),
        ("kernel_stats", "Kernel stats", "KernelStatsWidget", "kernel_stats", False),
        ("framework_op_stats", "Framework op stats", "FrameworkOpStatsWidget", "framework_op_stats", False),
        ("roofline_model", "Roofline model", "RooflineWidget", "roofline", False),
        ("pod_viewer", "Pod viewer", "PodViewerWidget", "pod_viewer", False),
        ("megascale_stats", "Megascale stats", "MegascaleStatsWidget", "megascale", True),
        ("perf_counters", "Performance counters", "PerfCountersWidget", "perf_counters", False),
        ("utilization_viewer", "Utilization viewer", "UtilizationViewerWidget", "utilization", False),
        ("kernel_utilization", "Kernel utilization", "KernelUtilizationWidget", "utilization", False),
        ("inference_profile", "Inference profile", "InferenceProfileWidget", "inference_profile", False),
    ]
]
BY_NAME = {t.name: t for t in TOOLS}
#: Widgets that are not tools of a run.
OTHER_WIDGETS = {
    "OpDetailsCard": ".widgets.op_details",
    "ProfileWidget": ".widgets.profile",
    "CaptureWidget": ".widgets.capture",
    "CompareWidget": ".widgets.compare",
}
WIDGETS = {**{t.widget: t.module for t in TOOLS}, **OTHER_WIDGETS}
