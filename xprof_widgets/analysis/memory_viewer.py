"""Memory Viewer: device memory use of one compiled XLA module.

Computes, from an `xla.HloProto` (HLO module + buffer assignment), the same
numbers as XProf 2.24.2's memory viewer tool: the heap size after every step
of XLA's heap-simulator trace, the peak, and the buffers live at the peak.

The method, in short:

* Every buffer allocation has a category: Parameter (entry computation
  parameter), Output (may be live out), Thread-local, Constant, else
  Temporary. Parameter, Output and Constant allocations live for the whole
  program ("indefinite"); XProf 2.24.2 leaves thread-local ones out of the
  indefinite and total allocation sizes.
* One heap-simulator trace is replayed for the memory space (colour) asked
  for: ALLOC adds a logical buffer's padded and unpadded size, FREE removes
  the buffer once the last user of its canonical buffer is gone, SHARE_WITH
  reuses a canonical buffer (adding it again only if it had been freed).
  The heap size is recorded before every event and once at the end.
* The indefinite allocations are added on top: each contributes its
  allocation size to every heap size, and (for HBM, colour 0) its largest
  logical buffer to the list of buffers at the peak.

Sizes are integer bytes throughout; XProf reports MiB (bytes / 2**20).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from xprof_widgets.errors import ProfileError
from xprof_widgets.io.hlo import parse_hlo_proto

_MAX_BUFFER_BYTES = 2**62  # past this a size is no real buffer, and int64 sums of them overflow

#: Buffers smaller than this (bytes) are merged into one row, as XProf does.
SMALL_BUFFER_BYTES = 16 * 1024

_ALLOC, _FREE, _SHARE_WITH = 0, 1, 2

# Bytes per element of each xla.PrimitiveType number; sub-byte types in bits.
_ELEMENT_BITS = {
    1: 8,  # PRED
    2: 8,
    3: 16,
    4: 32,
    5: 64,  # S8..S64
    6: 8,
    7: 16,
    8: 32,
    9: 64,  # U8..U64
    10: 16,
    11: 32,
    12: 64,
    16: 16,  # F16 F32 F64 BF16
    15: 64,
    18: 128,  # C64 C128
    19: 8,
    20: 8,
    23: 8,
    24: 8,
    25: 8,
    28: 8,
    29: 8,
    33: 8,  # 8-bit floats
    21: 4,
    22: 4,
    26: 2,
    27: 2,
    30: 1,
    31: 1,
    32: 4,  # sub-byte types
}
_TUPLE, _OPAQUE, _TOKEN = 13, 14, 17
_POINTER_BYTES = 8

_TYPE_NAMES = {
    1: "pred",
    2: "s8",
    3: "s16",
    4: "s32",
    5: "s64",
    6: "u8",
    7: "u16",
    8: "u32",
    9: "u64",
    10: "f16",
    11: "f32",
    12: "f64",
    13: "tuple",
    14: "opaque",
    15: "c64",
    16: "bf16",
    17: "token",
    18: "c128",
    19: "f8e5m2",
    20: "f8e4m3fn",
    21: "s4",
    22: "u4",
    23: "f8e4m3b11fnuz",
    24: "f8e5m2fnuz",
    25: "f8e4m3fnuz",
    26: "s2",
    27: "u2",
    28: "f8e4m3",
    29: "f8e3m4",
    30: "s1",
    31: "u1",
    32: "f4e2m1fn",
    33: "f8e8m0fnu",
    34: "buffer",
}

_COLUMNS = [
    "logical_buffer_id",
    "instruction_name",
    "category",
    "allocation_type",
    "size_bytes",
    "unpadded_size_bytes",
    "padding_bytes",
    "expansion",
    "shape",
    "tf_op_name",
    "op_code",
    "source",
    "program_order_index",
    "size_rank",
    "span_start",
    "span_end",
    "color_index",
]


# --------------------------------------------------------------------------
# Shapes


def unpadded_shape_bytes(shape) -> int:
    """Bytes of an `xla.ShapeProto` in its default (untiled, unpadded) layout.

    A tuple counts one 8-byte pointer per element; a token counts 0 bytes and
    an opaque value one pointer.
    """
    kind = shape.element_type
    if kind == _TUPLE:
        return _POINTER_BYTES * len(shape.tuple_shapes)
    if kind == _TOKEN:
        return 0
    if kind == _OPAQUE:
        return _POINTER_BYTES
    bits = _ELEMENT_BITS.get(kind, 0)
    count = 1
    for d in shape.dimensions:
        count *= int(d)
    if bits >= 8:
        return count * (bits // 8)
    return (count * bits + 7) // 8


def _layout_string(layout) -> str:
    text = ",".join(str(d) for d in layout.minor_to_major)
    extras = []
    for tile in layout.tiles:
        dims = ",".join("*" if d == -9223372036854775808 else str(d) for d in tile.dimensions)
        extras.append(f"({dims})")
    parts = []
    if extras:
        parts.append("T" + "".join(extras))
    if layout.element_size_in_bits:
        parts.append(f"E({layout.element_size_in_bits})")
    if layout.memory_space:
        parts.append(f"S({layout.memory_space})")
    if parts:
        text += ":" + "".join(parts)
    return "{" + text + "}"


def shape_string(shape) -> str:
    """XLA's human-readable shape with layout, e.g. `f32[256,1024]{1,0}`."""
    kind = shape.element_type
    if kind == _TUPLE:
        return "(" + ", ".join(shape_string(s) for s in shape.tuple_shapes) + ")"
    name = _TYPE_NAMES.get(kind, "invalid")
    if kind in (_TOKEN, _OPAQUE):
        return f"{name}[]"
    dims = []
    dynamic = list(shape.is_dynamic_dimension)
    for i, d in enumerate(shape.dimensions):
        dims.append(("<=" if i < len(dynamic) and dynamic[i] else "") + str(d))
    text = f"{name}[{','.join(dims)}]"
    if shape.HasField("layout"):
        layout = _layout_string(shape.layout)
        if shape.dimensions or layout != "{}":
            text += layout
    return text


def _subshape_last_index(shape, shape_index):
    """The subshape XProf displays: only the last shape index, one level deep."""
    if shape_index:
        i = shape_index[-1]
        if 0 <= i < len(shape.tuple_shapes):
            return shape.tuple_shapes[i]
    return shape


def _subshape(shape, shape_index):
    """The subshape at a full shape index (stops where the index runs out)."""
    for i in shape_index:
        if 0 <= i < len(shape.tuple_shapes):
            shape = shape.tuple_shapes[i]
        else:
            break
    return shape


# --------------------------------------------------------------------------
# Source locations


def _stack_frames(index, frame_id) -> str:
    lines = []
    n_frames = len(index.stack_frames)
    guard = 0
    while 0 < frame_id <= n_frames and guard <= n_frames:
        guard += 1
        frame = index.stack_frames[frame_id - 1]
        frame_id = frame.parent_frame_id
        file_name, line, column = "", -1, -1
        loc_id = frame.file_location_id
        if 0 < loc_id <= len(index.file_locations):
            loc = index.file_locations[loc_id - 1]
            line, column = loc.line, loc.column
            if 0 < loc.file_name_id <= len(index.file_names):
                file_name = index.file_names[loc.file_name_id - 1]
        lines.append(f"{file_name}:{line}:{column}")
    return "\n".join(lines)


def _source_info(instruction, stack_index):
    """(file, line, stack) of an instruction, as XProf picks them."""
    meta = instruction.metadata
    stack = _stack_frames(stack_index, meta.stack_frame_id)
    if meta.source_file:
        return meta.source_file, meta.source_line, stack
    if stack:
        first = stack.split("\n", 1)[0].split(":")
        if len(first) >= 2:
            try:
                line = int(first[1])
            except ValueError:
                line = 0
            return first[0], line, stack
    return "", 0, ""


# --------------------------------------------------------------------------
# Model of the buffer assignment


class _Allocation:
    __slots__ = ("proto", "index", "size", "color", "trace_id", "category", "indefinite")

    def __init__(self, proto):
        self.proto = proto
        self.index = proto.index
        self.size = proto.size
        self.color = proto.color
        self.trace_id = None
        if proto.is_entry_computation_parameter:
            self.category = "Parameter"
        elif proto.maybe_live_out:
            self.category = "Output"
        elif proto.is_thread_local:
            self.category = "Thread-local"
        elif proto.is_constant:
            self.category = "Constant"
        else:
            self.category = "Temporary"
        # XProf 2.24.2 (like XLA's indefinite-allocation total) does not count
        # thread-local allocations as live for the whole program.
        self.indefinite = bool(proto.is_entry_computation_parameter or proto.is_constant or proto.maybe_live_out)


class _Buffer:
    __slots__ = (
        "proto",
        "id",
        "size",
        "color",
        "allocation",
        "instruction",
        "unpadded",
        "span",
        "refs",
        "canonical",
        "closed",
    )

    def __init__(self, proto, allocation, instruction):
        self.proto = proto
        self.id = proto.id
        self.size = proto.size
        self.color = proto.color
        self.allocation = allocation
        self.instruction = instruction
        index = list(proto.defined_at.shape_index)
        self.unpadded = unpadded_shape_bytes(_subshape(instruction.shape, index))
        self.span = None  # [start, end] heap-simulator step indices
        self.refs = 0
        self.canonical = None
        self.closed = False

    def root(self):
        node = self
        while node.canonical is not None:
            node = node.canonical
        return node

    def name_with_index(self):
        index = list(self.proto.defined_at.shape_index)
        if not index:
            return self.instruction.name
        return f"{self.instruction.name}{{{','.join(str(i) for i in index)}}}"


class _Assignment:
    def __init__(self, hlo):
        self.hlo = hlo
        by_id = {}
        for computation in hlo.hlo_module.computations:
            for instruction in computation.instructions:
                by_id[instruction.id] = instruction
        protos = {b.id: b for b in hlo.buffer_assignment.logical_buffers}
        self.allocations: list[_Allocation] = []
        self.buffers: dict[int, _Buffer] = {}
        for alloc_proto in hlo.buffer_assignment.buffer_allocations:
            allocation = _Allocation(alloc_proto)
            self.allocations.append(allocation)
            for assigned in alloc_proto.assigned:
                proto = protos.get(assigned.logical_buffer_id)
                if proto is None:
                    continue
                instruction = by_id.get(proto.defined_at.instruction_id)
                if instruction is None:
                    continue
                self.buffers[proto.id] = _Buffer(proto, allocation, instruction)
        self.traces = hlo.buffer_assignment.heap_simulator_traces
        for i, trace in enumerate(self.traces):
            if not trace.events:
                continue
            buffer = self.buffers.get(trace.events[0].buffer_id)
            if buffer is not None:
                buffer.allocation.trace_id = i

    def allocations_of(self, color):
        return [a for a in self.allocations if a.color == color]

    def trace_for(self, color) -> int:
        """Index of the heap-simulator trace for a colour, -1 if none."""
        for allocation in self.allocations_of(color):
            if not allocation.indefinite and allocation.trace_id is not None:
                return allocation.trace_id
        best, best_count = -1, 0
        for i, trace in enumerate(self.traces):
            count = 0
            for event in trace.events:
                buffer = self.buffers.get(event.buffer_id)
                if buffer is not None and buffer.color == color:
                    count += 1
            if count > best_count:
                best, best_count = i, count
        return best

    def indefinite_buffers(self, color):
        """(allocation, its largest logical buffer) of each indefinite allocation."""
        result = []
        for allocation in self.allocations_of(color):
            if not allocation.indefinite:
                continue
            best, best_size = None, 0
            for assigned in allocation.proto.assigned:
                buffer = self.buffers.get(assigned.logical_buffer_id)
                if buffer is not None and buffer.size > best_size:
                    best, best_size = buffer, buffer.size
            if best is not None:
                result.append((allocation, best))
        return result


BLOCK_COLUMNS = [
    "logical_buffer_id",
    "name",
    "allocation",
    "category",
    "offset_bytes",
    "size_bytes",
    "unpadded_size_bytes",
    "start_step",
    "end_step",
    "shape",
    "tf_op_name",
]


def _allocation_blocks(assignment: _Assignment, color: int) -> pd.DataFrame:
    """XProf's buffer allocation timeline (`ConvertAllocationTimeline`): the allocations of
    the colour that are not live for the whole program and have a heap-simulator trace,
    stacked (each at the sum of the sizes before it), each a container row (logical buffer
    id -1, the whole trace long) and a row per logical buffer assigned to it with a
    lifespan: its offset in the stack (the allocation's + its own in it), size and
    steps. Call after the replay (which sets the lifespans)."""
    kept = [a for a in assignment.allocations_of(color) if not a.indefinite and a.trace_id is not None]
    steps = max((len(assignment.traces[a.trace_id].events) for a in kept), default=0)
    rows: list[tuple] = []
    base = 0
    for allocation in kept:
        cat = allocation.category
        rows.append((-1, cat, allocation.index, cat, base, allocation.size, allocation.size, 0, steps, "", ""))
        for assigned in allocation.proto.assigned:
            buffer = assignment.buffers.get(assigned.logical_buffer_id)
            if buffer is None or buffer.span is None:
                continue  # (XProf 2.24.2 draws the buffers that share another's memory too)
            instruction = buffer.instruction
            shape = _subshape_last_index(instruction.shape, list(buffer.proto.defined_at.shape_index))
            rows.append(
                (
                    buffer.id,
                    buffer.name_with_index(),
                    allocation.index,
                    cat,
                    base + assigned.offset,
                    buffer.size,
                    buffer.unpadded,
                    buffer.span[0],
                    buffer.span[1],
                    shape_string(shape),
                    instruction.metadata.op_name,
                )
            )
        base += allocation.size
    frame = pd.DataFrame(rows, columns=BLOCK_COLUMNS)
    integers = ["logical_buffer_id", "allocation", "offset_bytes", "size_bytes", "unpadded_size_bytes"]
    return frame.astype(dict.fromkeys([*integers, "start_step", "end_step"], np.int64))


# --------------------------------------------------------------------------
# Heap-simulator replay


@dataclass
class _Replay:
    heap: list = field(default_factory=list)
    unpadded: list = field(default_factory=list)
    instruction_names: list = field(default_factory=list)
    peak: int = 0
    peak_unpadded: int = 0
    peak_position: int = 0
    peak_buffers: list = field(default_factory=list)
    peak_display: dict = field(default_factory=dict)
    seen: dict = field(default_factory=dict)


def _replay(assignment: _Assignment, trace_id: int, name: str) -> _Replay:
    out = _Replay()
    if trace_id < 0 or trace_id >= len(assignment.traces):
        return out
    events = assignment.traces[trace_id].events
    last_step = len(events) - 1
    heap = unpadded = 0
    live: list[int] = []  # canonical buffer ids in program order
    display: dict[int, int] = {}
    seen_allocations = set()
    buffers = assignment.buffers

    def grow(buffer, step):
        nonlocal heap, unpadded
        live.append(buffer.id)
        heap += buffer.size
        unpadded += buffer.unpadded
        if heap > out.peak:
            out.peak = heap
            out.peak_position = step
            out.peak_unpadded = unpadded
            out.peak_buffers = list(live)
            out.peak_display = dict(display)

    for step, event in enumerate(events):
        out.heap.append(heap)
        out.unpadded.append(unpadded)
        out.instruction_names.append(event.instruction_name)
        buffer = buffers.get(event.buffer_id)
        if buffer is None:
            continue
        out.seen[buffer.id] = buffer
        seen_allocations.add(buffer.allocation.index)
        kind = event.kind
        if kind == _ALLOC:
            buffer.root().refs += 1
            grow(buffer, step)
            buffer.span = [step, last_step]
            buffer.closed = False
        elif kind == _FREE:
            root = buffer.root()
            root.refs -= 1
            if root.refs < 0:
                raise ProfileError(name, f"buffer {buffer.id} is freed more than once")
            if root.refs == 0:
                if root.id in live:
                    live[:] = [b for b in live if b != root.id]
                heap -= root.size
                if heap < 0:
                    raise ProfileError(name, f"heap size became negative ({heap} bytes)")
                unpadded -= root.unpadded
                # The canonical buffer's lifespan ends the first time its
                # memory is released; reuse by a later sharer is drawn as the
                # sharer's own span (what XProf 2.24.2 reports).
                if root.span is not None and not root.closed:
                    root.span[1] = step
                    root.closed = True
            if buffer.canonical is not None and buffer.span is not None:
                buffer.span[1] = step
        elif kind == _SHARE_WITH:
            target = buffers.get(event.share_with_canonical_id)
            if target is None:
                continue
            buffer.canonical = target
            root = target.root()
            root.refs += 1
            if root.refs == 1:
                display[root.id] = buffer.id
                buffer.span = [step, last_step]
                grow(root, step)
        else:
            raise ProfileError(name, f"unknown heap-simulator event kind {kind}")

    out.heap.append(heap)
    out.unpadded.append(unpadded)
    out.instruction_names.append("")
    if len(seen_allocations) != 1:
        raise ProfileError(
            name,
            f"heap simulation should use a single buffer allocation, found {len(seen_allocations)}",
        )
    return out


# --------------------------------------------------------------------------
# XProf orders the buffers at the peak with C++ `std::sort` (not stable) by
# size, largest first. To give equal sizes the same order as XProf, this is a
# Python rendering of the GNU libstdc++ introsort algorithm (median-of-three
# quicksort down to runs of 16, then insertion sort). It runs on the buffers at
# the peak only (tens to hundreds of rows).

_SORT_THRESHOLD = 16


def _introsort_order(keys) -> list:
    """Positions of `keys` sorted descending as libstdc++'s std::sort does."""
    items = list(range(len(keys)))
    before = lambda i, j: keys[i] > keys[j]  # noqa: E731  (sort comparator)

    def median_to_first(result, a, b, c):
        A, B, C = items[a], items[b], items[c]
        if before(A, B):
            pick = b if before(B, C) else c if before(A, C) else a
        else:
            pick = a if before(A, C) else c if before(B, C) else b
        items[result], items[pick] = items[pick], items[result]

    def partition(lo, hi, pivot):
        while True:
            while before(items[lo], items[pivot]):
                lo += 1
            hi -= 1
            while before(items[pivot], items[hi]):
                hi -= 1
            if not lo < hi:
                return lo
            items[lo], items[hi] = items[hi], items[lo]
            lo += 1

    def loop(lo, hi, depth):
        while hi - lo > _SORT_THRESHOLD:
            if depth == 0:
                items[lo:hi] = sorted(items[lo:hi], key=lambda i: -keys[i])
                return
            depth -= 1
            median_to_first(lo, lo + 1, lo + (hi - lo) // 2, hi - 1)
            cut = partition(lo + 1, hi, lo)
            loop(cut, hi, depth)
            hi = cut

    def linear_insert(i):
        value = items[i]
        j = i - 1
        while j >= 0 and before(value, items[j]):
            items[j + 1] = items[j]
            j -= 1
        items[j + 1] = value

    def insertion_sort(lo, hi):
        for i in range(lo + 1, hi):
            if before(items[i], items[lo]):
                value = items[i]
                items[lo + 1 : i + 1] = items[lo:i]
                items[lo] = value
            else:
                linear_insert(i)

    n = len(items)
    if n > 1:
        loop(0, n, 2 * (n.bit_length() - 1))
        if n > _SORT_THRESHOLD:
            insertion_sort(0, _SORT_THRESHOLD)
            for i in range(_SORT_THRESHOLD, n):
                linear_insert(i)
        else:
            insertion_sort(0, n)
    return items


# --------------------------------------------------------------------------
# Public API


@dataclass
class MemoryViewerResult:
    """XProf's memory viewer numbers for one module and memory space.

    All sizes are integer bytes. `heap_sizes` / `unpadded_heap_sizes` are
    int64 arrays, one value per heap-simulator step (the size before each
    event, plus the final size), already raised by the indefinite
    allocations as XProf's chart shows them; `peak_position` is the step of
    the event that reached the peak (the peak value itself is at
    `heap_sizes[peak_position + 1]`, as in XProf).

    `buffers_at_peak` is a DataFrame in XProf's program order (indefinite
    allocations first, then heap buffers in allocation order, then one
    merged "small (<16384 bytes)" row), with columns:
    `logical_buffer_id`, `instruction_name` (with `{shape index}` if any),
    `category` (Parameter/Output/Thread-local/Constant/Temporary),
    `allocation_type` ("indefinite", "heap" or "small"), `size_bytes`,
    `unpadded_size_bytes`, `padding_bytes` (size − unpadded),
    `expansion` (size / unpadded, NaN if unpadded is 0), `shape`,
    `tf_op_name`, `op_code`, `source` ("file:line" or ""),
    `program_order_index`, `size_rank` (0 = largest), `span_start`,
    `span_end` (heap-simulator steps of the buffer's lifetime, <NA> when it
    has none, e.g. indefinite buffers) and `color_index` (XProf's colour
    number).

    `memory_spaces`: the colours the module's buffers use (0 always; names in
    `MEMORY_SPACE_NAMES`), the ones worth choosing. `allocation_blocks`: XProf's buffer
    allocation timeline (`_allocation_blocks`): each buffer's place in memory
    (`offset_bytes`, `size_bytes`) over its lifespan (`start_step` to `end_step`, heap
    simulator steps), under a container row per allocation (`logical_buffer_id` -1).

    `fragmentation` is XProf's "HLO temp fragmentation" ratio:
    (total allocation − peak heap) / (total allocation − indefinite), 0 when
    the denominator is 0.
    """

    module: str
    memory_space: int
    peak_heap_bytes: int
    peak_unpadded_heap_bytes: int
    heap_sizes: np.ndarray
    unpadded_heap_sizes: np.ndarray
    peak_position: int
    buffers_at_peak: pd.DataFrame
    total_allocation_bytes: int
    indefinite_allocation_bytes: int
    entry_parameters_bytes: int
    live_out_bytes: int
    non_reusable_bytes: int
    padding_overhead_bytes: int
    fragmentation: float
    hlo_instruction_names: list = field(default_factory=list)
    logical_buffer_spans: dict = field(default_factory=dict)
    module_name: str = ""
    entry_computation_name: str = ""
    memory_spaces: list = field(default_factory=lambda: [0])
    allocation_blocks: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=BLOCK_COLUMNS))

    @property
    def heap_temp_bytes(self) -> int:
        """Peak heap minus indefinite allocations (XProf's "HLO temp"), bytes."""
        return self.peak_heap_bytes - self.indefinite_allocation_bytes

    def buffers_by_size(self) -> pd.DataFrame:
        """`buffers_at_peak` ordered by size, largest first (XProf's by-size list)."""
        return self.buffers_at_peak.sort_values("size_rank").reset_index(drop=True)


#: XProf's names of the memory spaces (buffer colours) its memory viewer offers.
MEMORY_SPACE_NAMES = {0: "HBM", 1: "VMEM", 2: "Sflag", 3: "CMEM", 4: "SMEM", 5: "Host", 6: "SparseCore"}


def memory_space_name(color: int) -> str:
    """XProf's name of a memory space (`MEMORY_SPACE_NAMES`), else "memory space N"."""
    return MEMORY_SPACE_NAMES.get(int(color), f"memory space {int(color)}")


def _source_text(file_name, line):
    if not file_name:
        return ""
    return f"{file_name}:{line}" if line else file_name


def memory_viewer(hlo_proto, memory_space: int = 0, module_name: str | None = None) -> MemoryViewerResult:
    """Compute XProf's memory viewer for one module.

    `hlo_proto` is an `xla.HloProto` message or its serialized bytes;
    `memory_space` is the buffer colour (0 = HBM / main memory, 1 = VMEM on
    TPU ...); `module_name` (XProf's `name(program_id)`) labels the result and
    error messages. Raises `ProfileError` on undecodable bytes or an
    inconsistent heap-simulator trace. Sizes in the result are bytes.
    """
    label = module_name or "HloProto"
    hlo = parse_hlo_proto(hlo_proto, label)
    if module_name is None:
        module_name = hlo.hlo_module.name
        label = module_name
    color = int(memory_space)
    assignment = _Assignment(hlo)
    spaces = sorted({0} | {int(a.color) for a in assignment.allocations})
    if color not in spaces and all(b.color != color for b in assignment.buffers.values()):
        names = ", ".join(f"{c} ({memory_space_name(c)})" for c in spaces)
        raise ValueError(f"{label}: no memory space {color}; its buffers use {names}")
    replay = _replay(assignment, assignment.trace_for(color), label)

    stack_index = hlo.hlo_module.stack_frame_index
    rows = []
    small_total = 0
    small_unpadded = 0
    small_count = 0

    def add(buffer: _Buffer, allocation_type: str):
        nonlocal small_total, small_unpadded, small_count
        if buffer.size < SMALL_BUFFER_BYTES:
            small_total += buffer.size
            small_unpadded += buffer.unpadded
            small_count += 1
            return
        instruction = buffer.instruction
        shape = _subshape_last_index(instruction.shape, list(buffer.proto.defined_at.shape_index))
        file_name, line, _ = _source_info(instruction, stack_index)
        rows.append(
            {
                "logical_buffer_id": buffer.id,
                "instruction_name": buffer.name_with_index(),
                "category": buffer.allocation.category,
                "allocation_type": allocation_type,
                "size_bytes": buffer.size,
                "unpadded_size_bytes": buffer.unpadded,
                "shape": shape_string(shape),
                "tf_op_name": instruction.metadata.op_name,
                "op_code": instruction.opcode,
                "source": _source_text(file_name, line),
            }
        )

    indefinite_bytes_on_chart = 0
    for allocation, buffer in assignment.indefinite_buffers(color):
        indefinite_bytes_on_chart += allocation.size
        if color == 0:
            add(buffer, "indefinite")
    complete = True
    for buffer_id in replay.peak_buffers:
        shown = assignment.buffers.get(replay.peak_display.get(buffer_id, buffer_id))
        if shown is None:
            complete = False
            break
        add(shown, "heap")
    if small_total and complete:
        rows.append(
            {
                "logical_buffer_id": -1,
                "instruction_name": f"small (<{SMALL_BUFFER_BYTES} bytes)",
                "category": "",
                "allocation_type": "small",
                "size_bytes": small_total,
                "unpadded_size_bytes": small_unpadded,
                "shape": "",
                "tf_op_name": "",
                "op_code": "",
                "source": f"{small_count} buffers",
            }
        )

    spans = {b.id: (b.span[0], b.span[1]) for b in replay.seen.values() if b.span is not None}
    frame = pd.DataFrame(
        rows,
        columns=[
            c
            for c in _COLUMNS
            if c
            not in (
                "padding_bytes",
                "expansion",
                "program_order_index",
                "size_rank",
                "span_start",
                "span_end",
                "color_index",
            )
        ],
    )
    n = len(frame)
    for column in ("size_bytes", "unpadded_size_bytes"):
        bad = [v for v in frame[column] if not 0 <= int(v) <= _MAX_BUFFER_BYTES]
        if bad:
            raise ProfileError(
                module_name or "HloProto",
                f"has a buffer of {bad[0]:,} bytes: not a size a compiled module has (a damaged module)",
            )
    sizes = frame["size_bytes"].to_numpy(dtype=np.int64) if n else np.zeros(0, np.int64)
    unpadded = frame["unpadded_size_bytes"].to_numpy(dtype=np.int64) if n else np.zeros(0, np.int64)
    frame["size_bytes"] = sizes
    frame["unpadded_size_bytes"] = unpadded
    frame["padding_bytes"] = sizes - unpadded
    with np.errstate(divide="ignore", invalid="ignore"):
        frame["expansion"] = np.where(unpadded > 0, sizes / np.maximum(unpadded, 1), np.nan)
    frame["program_order_index"] = np.arange(n, dtype=np.int64)
    order = np.asarray(_introsort_order(sizes.tolist()), dtype=np.int64)
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    frame["size_rank"] = rank
    ids = frame["logical_buffer_id"].to_numpy(dtype=np.int64) if n else np.zeros(0, np.int64)
    frame["span_start"] = pd.array([spans[i][0] if i in spans else None for i in ids], dtype="Int64")
    frame["span_end"] = pd.array([spans[i][1] if i in spans else None for i in ids], dtype="Int64")
    frame["color_index"] = np.arange(n, dtype=np.int64)
    frame = frame[_COLUMNS]

    heap = np.asarray(replay.heap, dtype=np.int64) + indefinite_bytes_on_chart
    heap_unpadded = np.asarray(replay.unpadded, dtype=np.int64) + indefinite_bytes_on_chart

    allocations = assignment.allocations_of(color)
    total = sum(a.size for a in allocations if not a.proto.is_thread_local)
    indefinite = sum(a.size for a in allocations if a.indefinite)
    parameters = sum(a.size for a in allocations if a.proto.is_entry_computation_parameter)
    live_out = sum(a.size for a in allocations if a.proto.maybe_live_out)
    non_reusable = sum(a.size for a in allocations if a.proto.is_thread_local or a.proto.is_tuple)
    peak = replay.peak + indefinite_bytes_on_chart
    peak_unpadded = replay.peak_unpadded + indefinite_bytes_on_chart
    temp_with_fragmentation = total - indefinite
    fragmentation = (total - peak) / temp_with_fragmentation if temp_with_fragmentation else 0.0

    return MemoryViewerResult(
        module=module_name,
        memory_space=color,
        peak_heap_bytes=int(peak),
        peak_unpadded_heap_bytes=int(peak_unpadded),
        heap_sizes=heap,
        unpadded_heap_sizes=heap_unpadded,
        peak_position=int(replay.peak_position),
        buffers_at_peak=frame,
        total_allocation_bytes=int(total),
        indefinite_allocation_bytes=int(indefinite),
        entry_parameters_bytes=int(parameters),
        live_out_bytes=int(live_out),
        non_reusable_bytes=int(non_reusable),
        padding_overhead_bytes=int(peak - peak_unpadded),
        fragmentation=float(fragmentation),
        hlo_instruction_names=replay.instruction_names,
        logical_buffer_spans=spans,
        module_name=hlo.hlo_module.name,
        entry_computation_name=hlo.hlo_module.entry_computation_name,
        memory_spaces=sorted(set(spaces) | {color}),
        allocation_blocks=_allocation_blocks(assignment, color),
    )
