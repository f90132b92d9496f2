"""The tool registry: every tool once, with XProf's name for it.

`run.tools`, `run.tool_status()`, ProfileWidget's tool list and the package's widget
names all read `TOOLS`; adding a tool is one entry here (its analysis, its widget, and
the cheap rule that says whether a run has data for it and, if not, why).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

NO_HLO_MODULES = (
    "no HLO modules in the profile: the program was compiled before tracing started, "
    "or the framework does not record them (JAX and TensorFlow/XLA do)"
)
NO_EVENTS = "the profile holds no events"
NO_GPU_KERNELS = (
    "no GPU kernel launches in the profile (no `/device:GPU:N` plane with events carrying a "
    "`kernel_details` stat): kernel statistics are for GPU runs"
)
NO_FRAMEWORK_OPS = "the profile has no host thread plane (`/host:CPU`) and no GPU or TPU plane"
NO_ACCELERATOR = "no GPU or TPU in the profile: XProf's roofline model is for accelerators"
NO_DEVICE_OPS = (
    "no XLA ops ran on a device or a CPU thread in this profile (no TPU `XLA Ops` line, no GPU "
    "kernel naming an `hlo_op` or a `tf_op`, no XLA:CPU thunk)"
)


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


def _has_events(run):
    ok = any(len(line) for s in run.xspaces() for p in s.planes for line in p.lines)
    return ok, "" if ok else NO_EVENTS


def _has_modules(run):
    ok = bool(run.hlo_protos)
    return ok, "" if ok else NO_HLO_MODULES


def _has_device_ops(run):
    """Cheap: a TPU `XLA Ops` line with events, or GPU / host lines whose stats name an
    XLA op (read from the stat metadata, no event decoded)."""
    for space in run.xspaces():
        for plane in space.planes:
            names = set(plane.stat_names.values())
            busy = any(len(line) for line in plane.lines)
            if not busy:
                continue
            if plane.name.startswith("/device:TPU:") and any(
                line.name == "XLA Ops" and len(line) for line in plane.lines
            ):
                return True, ""
            if plane.name.startswith("/device:GPU:") and names & {"hlo_op", "tf_op"}:
                return True, ""
            if plane.name == "/host:CPU" and "hlo_op" in names and run.hlo_protos:
                return True, ""
    return False, NO_DEVICE_OPS


def _memory_profile(run):
    from .analysis.memory_profile import status

    return status(run)


def _has_gpu_kernels(run):
    """Cheap: a GPU plane with events whose stat metadata names `kernel_details`."""
    for space in run.xspaces():
        for plane in space.planes:
            if (
                plane.name.startswith("/device:GPU:")
                and "kernel_details" in set(plane.stat_names.values())
                and any(len(line) for line in plane.lines)
            ):
                return True, ""
    return False, NO_GPU_KERNELS


def _has_framework_ops(run):
    ok = any(
        (p.name == "/host:CPU" and p.lines) or p.name.startswith(("/device:GPU:", "/device:TPU:"))
        for s in run.xspaces()
        for p in s.planes
    )
    return ok, "" if ok else NO_FRAMEWORK_OPS


def _has_accelerator(run):
    ok = any(p.name.startswith(("/device:GPU:", "/device:TPU:")) for s in run.xspaces() for p in s.planes)
    return ok, "" if ok else NO_ACCELERATOR


TOOLS = [
    Tool("overview_page", "Overview", "OverviewWidget", ".widgets.overview", True, _has_events),
    Tool(
        "input_pipeline_analyzer", "Input pipeline", "InputPipelineWidget", ".widgets.input_pipeline", True, _has_events
    ),
    Tool("op_profile", "HLO op profile", "OpProfileWidget", ".widgets.op_profile", False, _has_device_ops),
    Tool("trace_viewer", "Trace viewer", "TraceViewerWidget", ".widgets.trace_viewer", True, _has_events),
    Tool("memory_profile", "Memory profile", "MemoryProfileWidget", ".widgets.memory_profile", True, _memory_profile),
    Tool("memory_viewer", "Memory viewer", "MemoryViewerWidget", ".widgets.memory_viewer", False, _has_modules),
    Tool("graph_viewer", "Graph viewer", "GraphViewerWidget", ".widgets.graph_viewer", False, _has_modules),
    Tool("kernel_stats", "Kernel stats", "KernelStatsWidget", ".widgets.kernel_stats", False, _has_gpu_kernels),
    Tool(
        "framework_op_stats",
        "Framework op stats",
        "FrameworkOpStatsWidget",
        ".widgets.framework_op_stats",
        False,
        _has_framework_ops,
    ),
    Tool("roofline_model", "Roofline model", "RooflineWidget", ".widgets.roofline", False, _has_accelerator),
]
#: Analyses with XProf's tool name but no widget of their own (shown inside another).
TABLES = [
    Tool("hlo_stats", "HLO op stats", "OpProfileWidget", ".widgets.op_profile", False, _has_device_ops),
]
BY_NAME = {t.name: t for t in TOOLS + TABLES}
#: Widgets that are not tools of a run.
OTHER_WIDGETS = {
    "OpDetailsCard": ".widgets.op_details",
    "ProfileWidget": ".widgets.profile",
    "CaptureWidget": ".widgets.capture",
    "CompareWidget": ".widgets.compare",
}
WIDGETS = {**{t.widget: t.module for t in TOOLS}, **OTHER_WIDGETS}


def tool_status(run):
    """[(XProf's tool name, has data, why not)] for every tool, in TOOLS order."""
    return [(t.name, *t.status(run)) for t in TOOLS + TABLES]
