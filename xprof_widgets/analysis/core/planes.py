"""The planes and lines of an XSpace, in XProf's words: the one place that knows their names.

A profile holds a plane per device (`/device:GPU:N`, `/device:TPU:N`, the TPU's SparseCores
as `/device:TPU:N SparseCore M`), the host's threads (`/host:CPU`), the compiled programs
(`/host:metadata`) and more (openxla/xla `xla/tsl/profiler/utils/xplane_schema.{h,cc}`).
XProf derives lines of its own (XLA Modules, XLA Ops, Steps, ... with thread ids in tsl's
`kThreadIdDerivedMin..Max` block, or named so) before its tools run, and its op databases
skip them (`IsDerivedThreadId`).
"""

from __future__ import annotations

import re

from ...io.hlo import METADATA_PLANE
from .cache import derived

HOST_PLANE = "/host:CPU"
GPU_PLANE_PREFIX = "/device:GPU:"
TPU_PLANE_PREFIX = "/device:TPU:"
SPARSE_CORE = "SparseCore"
#: The stats of a GPU kernel that its reports (`kernels`) and the CUDA graph attribution
#: (`command_buffers`) read. The first of them to read a line asks for all, and so does
#: the grouping, ahead: a line keeps the last named stats decoded, and serves a later
#: call for some of them from those, so each GPU line's are decoded once.
KERNEL_STATS = ("kernel_details", "tf_op", "equation", "hlo_op", "program_id", "correlation_id", "cuda_graph_node_id")
#: JAX on GPUs: a scope range's id -> its parent's, as the plane's stats.
SCOPE_RANGE_PLANE = "/host:__ScopeRangeCallStack__"
#: The planes openxla/xla counts as a host's (`xplane_utils.cc` `IsHostPlane`).
XLA_HOST_PLANES = (HOST_PLANE, "Host CPUs", "/host:tfstreamz", "/host:metadata", "Syscalls", "/host:python-tracer")

# tsl's derived thread ids (`IsDerivedThreadId`, the 32-bit 0xdeadbeef block). Profiles
# written by the tracers hold none; re-saved ones may.
DERIVED_ID_MIN, DERIVED_ID_MAX = -559038737, -559038737 + 389
#: Lines XProf derives from others (their names; a GPU stream's get " - from #<id>").
DERIVED_LINES = frozenset(
    {
        "XLA Modules",
        "XLA Ops",
        "TensorFlow Ops",
        "TensorFlow Name Scope",
        "Source code",
        "Steps",
        "Framework Ops",
        "Framework Name Scope",
        "XLA TraceMe",
        "Launch Stats",
        "SparseCore Ops",
        "SparseCore Modules",
        "Command Buffers",
        "Async XLA Ops",
    }
)

__all__ = [
    "DERIVED_LINES",
    "GPU_PLANE_PREFIX",
    "HOST_PLANE",
    "METADATA_PLANE",
    "SCOPE_RANGE_PLANE",
    "TPU_PLANE_PREFIX",
    "gpu_planes",
    "host_plane",
    "is_derived_id",
    "is_derived_line",
    "plane_kind",
    "sparse_core_planes",
    "tensor_core_planes",
]


def is_derived_id(line_id) -> bool:
    """tsl's IsDerivedThreadId: a line id in XProf's own block (read as a 32-bit int)."""
    lid = ((int(line_id) + 2**31) % 2**32) - 2**31
    return DERIVED_ID_MIN <= lid <= DERIVED_ID_MAX


def is_derived_line(line) -> bool:
    """A line XProf derives from others (skipped by its op databases): by id or by name."""
    if is_derived_id(line.id):
        return True
    return (line.display_name or line.name).split(" - from #")[0] in DERIVED_LINES


def gpu_planes(space) -> list:
    """The `/device:GPU:N` planes of one file, in file order (found once per file: a file
    may hold a million planes, and every analysis asks)."""
    return derived(space, "gpu_planes", lambda: [p for p in space.planes if p.name.startswith(GPU_PLANE_PREFIX)])


def gpu_plane_index(space, plane) -> int:
    """The position of `plane` among `gpu_planes(space)` (its device ordinal as the host's
    launches name it); -1 when it is not one. One lookup: a file of 20,000 GPU planes
    asks for each."""
    index = derived(space, "gpu_plane_index", lambda: {id(p): i for i, p in enumerate(gpu_planes(space))})
    return index.get(id(plane), -1)


def tensor_core_planes(space) -> list:
    """The TPU TensorCore planes of one file (SparseCores left out), in file order (found once
    per file)."""
    return derived(
        space,
        "tensor_core_planes",
        lambda: [p for p in space.planes if p.name.startswith(TPU_PLANE_PREFIX) and SPARSE_CORE not in p.name],
    )


#: A SparseCore's plane (tsl's `kSparseCorePlaneRegex`): its TensorCore's plane name, its index.
SPARSE_CORE_PLANE = re.compile(r"(/device:TPU:[0-9]+) SparseCore ([0-9]+)$")


def sparse_core_planes(space) -> list:
    """[(plane, its TensorCore's plane name)] of the file's SparseCore planes
    (`/device:TPU:N SparseCore M`, as libtpu names a v5p / v6e chip's SparseCores), in file
    order (found once per file)."""

    def find():
        found = ((p, SPARSE_CORE_PLANE.match(p.name)) for p in space.planes)
        return [(p, m.group(1)) for p, m in found if m]

    return derived(space, "sparse_core_planes", find)


def has_tensor_cores(space) -> bool:
    """Whether a file is a TPU host's as XProf's analyses tell (its TensorCore planes:
    `tensor_core_planes`; a file of SparseCore or non-core planes alone is not): one rule for
    the steps, the step database and the pod viewer."""
    return bool(tensor_core_planes(space))


def host_plane(space):
    """The file's `/host:CPU` plane (the first of that name), or None."""
    return next((p for p in space.planes if p.name == HOST_PLANE), None)


def plane_kind(name: str) -> str | None:
    """ "TPU", "GPU" or "CPU" for a device or the host plane's name, else None."""
    if name.startswith(TPU_PLANE_PREFIX):
        return "TPU"
    if name.startswith(GPU_PLANE_PREFIX):
        return "GPU"
    if name == HOST_PLANE:
        return "CPU"
    return None
