"""Whether a run has data for each tool, and if not, why: cheap rules that read plane and
stat names, never stats (`tools.TOOLS` attaches them to the widgets; `tool_status` is
what a host summary carries). The reasons are said to people: what is missing and how to
record it.
"""

from __future__ import annotations

import numpy as np

from .planes import GPU_PLANE_PREFIX, HOST_PLANE, TPU_PLANE_PREFIX

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


ALLOCATION, DEALLOCATION = "MemoryAllocation", "MemoryDeallocation"
NO_EVENTS_REASON = (
    "no allocator events (MemoryAllocation/MemoryDeallocation) on the host plane: TensorFlow "
    "records them for GPU and TPU allocators; on CPU set TF_CPU_ALLOCATOR_USE_BFC=true before "
    "starting TensorFlow. JAX CPU runs do not record them (use run.memory_viewer for XLA buffers)"
)


def has_events(run):
    ok = any(len(line) for s in run.xspaces() for p in s.planes for line in p.lines)
    return ok, "" if ok else NO_EVENTS


def has_modules(run):
    ok = bool(run.hlo_protos)
    return ok, "" if ok else NO_HLO_MODULES


def has_device_ops(run):
    """Cheap: a TPU `XLA Ops` line with events, or GPU / host lines whose stats name an
    XLA op (read from the stat metadata, no event decoded)."""
    for space in run.xspaces():
        for plane in space.planes:
            if not any(len(line) for line in plane.lines):
                continue
            names = set(plane.stat_names.values())
            if plane.name.startswith(TPU_PLANE_PREFIX) and any(
                line.name == "XLA Ops" and len(line) for line in plane.lines
            ):
                return True, ""
            if plane.name.startswith(GPU_PLANE_PREFIX) and names & {"hlo_op", "tf_op"}:
                return True, ""
            if plane.name == HOST_PLANE and "hlo_op" in names and run.hlo_protos:
                return True, ""
    return False, NO_DEVICE_OPS


def has_allocator_events(run, host=None):
    """(available, reason): whether `host`'s host plane (default: the first) has allocator
    events. Reads event names only (no stats), so it is cheap."""
    plane = run.xspace(host).plane(HOST_PLANE)
    if plane is not None and any(_allocator_line(line) for line in plane.lines):
        return True, ""
    return False, NO_EVENTS_REASON


def allocator_codes(names):
    """The codes of the allocation and deallocation names in a Categorical of event names
    (-1 where the name is not among its categories)."""
    return names.categories.get_indexer([ALLOCATION, DEALLOCATION])


def _allocator_line(line):
    if not len(line):
        return False
    names = line.names()
    codes = allocator_codes(names)
    codes = codes[codes >= 0]
    return bool(len(codes)) and bool(np.isin(names.codes, codes).any())


def has_gpu_kernels(run):
    """Cheap: a GPU plane with events whose stat metadata names `kernel_details`."""
    for space in run.xspaces():
        for plane in space.planes:
            if (
                plane.name.startswith(GPU_PLANE_PREFIX)
                and plane.has_stat("kernel_details")
                and any(len(line) for line in plane.lines)
            ):
                return True, ""
    return False, NO_GPU_KERNELS


def has_framework_ops(run):
    ok = any(
        (p.name == HOST_PLANE and p.lines) or p.name.startswith((GPU_PLANE_PREFIX, TPU_PLANE_PREFIX))
        for s in run.xspaces()
        for p in s.planes
    )
    return ok, "" if ok else NO_FRAMEWORK_OPS


def has_accelerator(run):
    ok = any(p.name.startswith((GPU_PLANE_PREFIX, TPU_PLANE_PREFIX)) for s in run.xspaces() for p in s.planes)
    return ok, "" if ok else NO_ACCELERATOR


NO_POD_STEPS = (
    "no steps: XProf's pod viewer shows each step on each core. On TPU the TensorCores' `Steps` lines "
    "give them (a training loop's; inference runs have none); elsewhere step markers do: wrap each step "
    "in jax.profiler.StepTraceAnnotation('train', step_num=i) (JAX) or "
    "tf.profiler.experimental.Trace('train', step_num=i, _r=1) (TensorFlow)"
)
#: Names and stats that mark steps off TPU (a cheap sign, read from metadata: XProf's step
#: markers `train...` / `test...` / `TraceContext`, roots `_r`, TF executor loops `iter_num`,
#: a GPU plane's derived `Steps` line): with none of them no step is found.
_STEP_STATS = ("_r", "iter_num", "step_num", "group_id")
_STEP_NAMES = ("train", "test", "TraceContext", "SessionRun", "FunctionRun", "RunGraph", "ExecutorState::Process")


def has_steps(run):
    """Cheap: a TensorCore plane with a `Steps` line with events (a TPU host's steps are its
    TensorCores'); off TPU, a step marker's name or a root / loop stat in some plane's
    metadata (the pod viewer then has rows, or says why not)."""
    for space in run.xspaces():
        tpu = [p for p in space.planes if p.name.startswith(TPU_PLANE_PREFIX)]
        if tpu:
            if any(line.name == "Steps" and len(line) for p in tpu for line in p.lines):
                return True, ""
            continue
        for plane in space.planes:
            if not plane.lines:
                continue
            if any(plane.has_stat(name) for name in _STEP_STATS):
                return True, ""
            if any(m.name.startswith(_STEP_NAMES) for m in plane.message.event_metadata.values()):
                return True, ""
    return False, NO_POD_STEPS


NO_COUNTER_SAMPLES = (
    "no hardware counter samples on a TPU plane (events with a `counter_value` stat): the TPU "
    "runtime records them only when the profile asks for hardware counters"
)


def has_counter_samples(run):
    """XProf's rule (`xplane_to_tool_names.cc`): a TPU plane with an event carrying
    `counter_value`; cheap: its stat metadata names it and a line has events."""
    for space in run.xspaces():
        for plane in space.planes:
            if plane.name.startswith(TPU_PLANE_PREFIX) and plane.has_stat("counter_value"):
                if any(len(line) for line in plane.lines):
                    return True, ""
    return False, NO_COUNTER_SAMPLES


NO_MEGASCALE = (
    "no multi-slice (DCN) collectives: XProf's megascale stats need a host plane naming "
    "`MegaScale:` events (libtpu's DCN transport) and host send / recv ops with a "
    "`_xla_host_transfer_rendezvous` on TensorCore 0"
)


def has_megascale(space) -> bool:
    """XProf's rule for a host file: its host plane has event metadata named `MegaScale:...`."""
    plane = space.plane(HOST_PLANE)
    return plane is not None and any(m.name.startswith("MegaScale:") for m in plane.message.event_metadata.values())


def has_megascale_events(run):
    """XProf's rule (`xplane_to_tool_names.cc`): the first host file has `MegaScale:` events."""
    if has_megascale(run.xspace(run.readable_hosts[0])):
        return True, ""
    return False, NO_MEGASCALE


NO_REQUESTS = (
    "no inference requests: a server marks each request as an event with root level -1 "
    "(`jax.profiler.TraceAnnotation('Request', _r=-1)`) or a `ModelServerRequest_...` event"
)


def has_requests(run):
    """A host event with root level -1 or a `ModelServerRequest_` event (reads the `_r`
    stats of the few events that have one)."""
    for space in run.xspaces():
        plane = space.plane(HOST_PLANE)
        if plane is None:
            continue
        if any(m.name.startswith("ModelServerRequest_") for m in plane.message.event_metadata.values()):
            return True, ""
        if not plane.has_stat("_r"):
            continue
        for _, line in plane.busy_lines:
            _, values = line.stat_table(names=["_r"]).ints("_r")
            if (values == -1).any():
                return True, ""
    return False, NO_REQUESTS


#: XProf's tool names, in the order of its tool list, with the rule that says whether a run
#: has data for each.
STATUS = {
    "overview_page": has_events,
    "input_pipeline_analyzer": has_events,
    "op_profile": has_device_ops,
    "hlo_stats": has_device_ops,
    "trace_viewer": has_events,
    "memory_profile": has_allocator_events,
    "memory_viewer": has_modules,
    "graph_viewer": has_modules,
    "kernel_stats": has_gpu_kernels,
    "framework_op_stats": has_framework_ops,
    "roofline_model": has_accelerator,
    "pod_viewer": has_steps,
    "megascale_stats": has_megascale_events,
    "perf_counters": has_counter_samples,
    # XProf lists both with the performance counters (its rule is the same).
    "utilization_viewer": has_counter_samples,
    "kernel_utilization": has_counter_samples,
    "inference_profile": has_requests,
}


def tool_status(run):
    """[(XProf's tool name, has data, why not)] for every tool, in STATUS order."""
    return [(name, *rule(run)) for name, rule in STATUS.items()]
