"""HLO modules stored in an XSpace.

XLA writes each compiled module's `xla.HloProto` (HLO graph plus buffer
assignment) into the XSpace plane named `/host:metadata`: one XEventMetadata
per module, carrying a stat whose XStatMetadata is named `Hlo Proto` with the
serialized proto as `bytes_value`. Modules are named like XProf does,
`name(program_id)`, e.g. `jit_step(30)`.
"""

from __future__ import annotations

import hashlib
import re
import threading

from google.protobuf.message import DecodeError

from xprof_widgets.errors import ProfileError
from xprof_widgets.io import schema

METADATA_PLANE = "/host:metadata"
HLO_PROTO_STAT = "Hlo Proto"
PROGRAM_ID_STAT = "program_id"

_NAMED_WITH_ID = re.compile(r"^.+\(\d+\)$")

HloProto = schema.message_class("xla.HloProto")


def _module_key(event_metadata, program_id, hlo_bytes):
    """`name(program_id)` for one module's event metadata."""
    name = event_metadata.name or event_metadata.display_name
    if name and _NAMED_WITH_ID.match(name):
        return name
    if program_id is None:
        # XProf keys the metadata by program id; read it as unsigned.
        program_id = event_metadata.id & 0xFFFFFFFFFFFFFFFF
    if not name:
        try:
            name = HloProto.FromString(hlo_bytes).hlo_module.name
        except DecodeError:
            name = "module"
    return f"{name}({program_id})"


def hlo_protos_from_xspace(xspace) -> dict[str, bytes]:
    """Serialized `xla.HloProto` bytes of every module in an XSpace message.

    Keys are XProf's module names `name(program_id)`; values are the raw bytes
    (parse them with `parse_hlo_proto`). An XSpace without a `/host:metadata`
    plane gives an empty dict.
    """
    result: dict[str, bytes] = {}
    for plane in xspace.planes:
        if plane.name != METADATA_PLANE:
            continue
        stat_names = {k: m.name for k, m in plane.stat_metadata.items()}
        for _, event_metadata in sorted(plane.event_metadata.items()):
            hlo_bytes = None
            program_id = None
            for stat in event_metadata.stats:
                stat_name = stat_names.get(stat.metadata_id)
                if stat_name == HLO_PROTO_STAT and stat.WhichOneof("value") == "bytes_value":
                    hlo_bytes = stat.bytes_value
                elif stat_name == PROGRAM_ID_STAT:
                    kind = stat.WhichOneof("value")
                    if kind in ("uint64_value", "int64_value"):
                        program_id = getattr(stat, kind) & 0xFFFFFFFFFFFFFFFF
            if hlo_bytes is None:
                continue
            result[_module_key(event_metadata, program_id, hlo_bytes)] = hlo_bytes
    return result


def parse_hlo_proto(data: bytes, name: str = "HloProto"):
    """Parse serialized `xla.HloProto` bytes into a message.

    `name` (a module name or file path) is used in the error message. Raises
    `ProfileError` when the bytes are not a valid HloProto.
    """
    if isinstance(data, HloProto):
        return data
    try:
        return HloProto.FromString(bytes(data))
    except (DecodeError, TypeError, ValueError) as exc:
        raise ProfileError(name, f"not a valid xla.HloProto ({exc})") from None


def call_cycle(module_proto) -> list[str] | None:
    """The names of computations that call each other in a cycle (the first found, its
    first name again at the end), or None. XLA's call graph is acyclic (a `while` calls
    its body, a fusion its fused computation, never back): a module with a cycle is not a
    valid module, and every walk over its calls would go round for good."""
    calls = {}
    names = {}
    for comp in module_proto.computations:
        names[comp.id] = comp.name
        calls[comp.id] = sorted({c for i in comp.instructions for c in i.called_computation_ids})
    state = dict.fromkeys(calls, 0)  # 0 unseen, 1 on the current path, 2 done
    for root in calls:
        if state[root]:
            continue
        path, stack = [root], [iter(calls[root])]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif nxt in calls and state[nxt] == 1:
                cycle = path[path.index(nxt) :] + [nxt]
                return [names.get(c, str(c)) for c in cycle]
            elif nxt in calls and state[nxt] == 0:
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(calls[nxt]))
    return None


#: Serialized modules found sound lately, by name and digest (the last _KEPT_CHECKS): the
#: hosts of a pod hold the same modules, and a parse to check each costs a millisecond
#: or more per module and host.
_CHECKED: dict = {}
_CHECKED_LOCK = threading.Lock()
_KEPT_CHECKS = 64


def check_hlo_proto(data: bytes, name: str = "HloProto") -> None:
    """Raise ProfileError for bytes that are not an HloProto (`parse_hlo_proto`) or hold a
    module no walk could finish (`check_module`). Bytes checked lately are not parsed again."""
    key = (name, hashlib.blake2b(data, digest_size=16).digest())
    if key in _CHECKED:
        return
    check_module(parse_hlo_proto(data, name).hlo_module, name)
    with _CHECKED_LOCK:  # (a widget may read a run on a thread while a tool runs)
        _CHECKED[key] = True
        while len(_CHECKED) > _KEPT_CHECKS:
            del _CHECKED[next(iter(_CHECKED))]


def check_module(module_proto, name: str = "HloModule") -> None:
    """Raise ProfileError for a module no walk over its calls could finish (`call_cycle`)."""
    cycle = call_cycle(module_proto)
    if cycle:
        raise ProfileError(
            name, f"not a valid HLO module: computations call each other in a cycle ({' -> '.join(cycle)})"
        )


# --- The HLO graph: instructions linked to their operands, users and computations ----------

# Bits per element of each PrimitiveType (xla/primitive_util.h); the bytes an element
# takes are these rounded up to whole bytes, unless the layout packs sub-byte types.
_ELEMENT_BITS = {
    "PRED": 8,
    "S1": 1,
    "S2": 2,
    "S4": 4,
    "S8": 8,
    "S16": 16,
    "S32": 32,
    "S64": 64,
    "U1": 1,
    "U2": 2,
    "U4": 4,
    "U8": 8,
    "U16": 16,
    "U32": 32,
    "U64": 64,
    "F16": 16,
    "BF16": 16,
    "F32": 32,
    "F64": 64,
    "C64": 64,
    "C128": 128,
    "F4E2M1FN": 4,
    "F8E5M2": 8,
    "F8E4M3": 8,
    "F8E4M3FN": 8,
    "F8E4M3B11FNUZ": 8,
    "F8E3M4": 8,
    "F8E5M2FNUZ": 8,
    "F8E4M3FNUZ": 8,
    "F8E8M0FNU": 8,
}
_TYPE_NAMES = {
    v.number: v.name
    for v in schema.message_class("xla.ShapeProto").DESCRIPTOR.fields_by_name["element_type"].enum_type.values
}


class Shape:
    """An XLA shape: an array (`element_type`, `dimensions`, layout) or a tuple of shapes.

    `has_layout` is whether the proto carried a layout (XLA's cost analysis counts no bytes
    for a shape without one); `minor_to_major`, `element_size_in_bits` and `memory_space`
    come from it. Shapes are immutable and compared by value.
    """

    __slots__ = (
        "element_type",
        "dimensions",
        "tuple_shapes",
        "has_layout",
        "minor_to_major",
        "element_size_in_bits",
        "memory_space",
        "tiles",
        "_key",
    )

    def __init__(self, proto):
        self.element_type = _TYPE_NAMES.get(proto.element_type, "PRIMITIVE_TYPE_INVALID")
        self.dimensions = tuple(proto.dimensions)
        self.tuple_shapes = tuple(Shape(s) for s in proto.tuple_shapes) if self.element_type == "TUPLE" else ()
        self.has_layout = proto.HasField("layout")
        layout = proto.layout
        self.minor_to_major = tuple(layout.minor_to_major)
        self.element_size_in_bits = layout.element_size_in_bits
        self.memory_space = layout.memory_space
        self.tiles = tuple(tuple(t.dimensions) for t in layout.tiles)
        self._key = (
            self.element_type,
            self.dimensions,
            tuple(s._key for s in self.tuple_shapes),
            self.has_layout,
            self.minor_to_major,
            self.element_size_in_bits,
            self.memory_space,
            self.tiles,
        )

    @property
    def is_tuple(self):
        return self.element_type == "TUPLE"

    @property
    def is_array(self):
        return self.element_type not in ("TUPLE", "TOKEN", "OPAQUE_TYPE", "PRIMITIVE_TYPE_INVALID")

    @property
    def elements(self):
        """Elements of an array (1 for a scalar; XLA's ShapeUtil::ElementsIn)."""
        n = 1
        for d in self.dimensions:
            n *= d
        return n

    @property
    def elements_recursive(self):
        """Elements summed over a tuple's leaves (ShapeUtil::ElementsInRecursive)."""
        if self.is_tuple:
            return sum(s.elements_recursive for s in self.tuple_shapes)
        return self.elements if self.is_array else 0

    @property
    def element_bits(self):
        return _ELEMENT_BITS.get(self.element_type, 0)

    def leaves(self, index=()):
        """(shape, shape index) of every leaf, in order (ShapeUtil::ForEachLeafShape)."""
        if self.is_tuple:
            for i, s in enumerate(self.tuple_shapes):
                yield from s.leaves(index + (i,))
        else:
            yield self, index

    def subshapes(self, index=()):
        """(shape, shape index) of this shape and every subshape, pre-order
        (ShapeUtil::ForEachSubshape)."""
        yield self, index
        for i, s in enumerate(self.tuple_shapes):
            yield from s.subshapes(index + (i,))

    def layout_complete(self):
        """Whether every array in the shape has a layout (LayoutUtil::HasLayout)."""
        if self.is_tuple:
            return all(s.layout_complete() for s in self.tuple_shapes)
        return self.has_layout or not self.is_array

    def byte_size(self, pointer_size=8):
        """Bytes of the shape as XLA's ShapeUtil::ByteSizeOf(shape, 8): a tuple is its
        table of pointers, an array its elements (sub-byte types take a byte each unless
        the layout gives `element_size_in_bits`)."""
        if self.is_tuple:
            return pointer_size * len(self.tuple_shapes)
        if self.element_type == "TOKEN":
            return 0
        if self.element_type == "OPAQUE_TYPE":
            return pointer_size
        if self.element_size_in_bits:
            return -(-self.elements * self.element_size_in_bits // 8)
        return self.elements * ((self.element_bits + 7) // 8)

    def equal_ignoring_element_type(self, other):
        """Same dimensions and layout, any element type (ShapeUtil::EqualIgnoringElementType)."""
        return self._key[1:] == other._key[1:] and self.is_tuple == other.is_tuple

    def __eq__(self, other):
        return isinstance(other, Shape) and self._key == other._key

    def __hash__(self):
        return hash(self._key)

    def __repr__(self):
        return f"Shape({self.element_type}{list(self.dimensions)})"


class HloInstruction:
    """One instruction of an HloModule: `name`, `opcode`, `shape` (Shape), `operands`
    and `users` (HloInstructions, users in the order they were added), `computation`
    (its HloComputation), `called` (the HloComputations it calls) and `proto` (the
    HloInstructionProto, for attributes)."""

    __slots__ = (
        "name",
        "opcode",
        "shape",
        "operands",
        "users",
        "computation",
        "called",
        "proto",
        "control_predecessors",
        "id",
        "__weakref__",
    )

    def __init__(self, proto, computation):
        self.proto = proto
        self.name = proto.name
        self.opcode = proto.opcode
        self.id = proto.id
        self.shape = Shape(proto.shape)
        self.computation = computation
        self.operands = []
        self.users = []
        self.called = []
        self.control_predecessors = []

    @property
    def is_fused(self):
        return self.computation.is_fusion

    @property
    def fusion_kind(self):
        return self.proto.fusion_kind

    @property
    def fused_computation(self):
        return self.called[0] if self.opcode == "fusion" and self.called else None

    @property
    def metadata(self):
        return self.proto.metadata

    def is_elementwise(self):
        """XLA's HloInstruction::IsElementwise() for the whole instruction."""
        op = self.opcode
        if op == "bitcast-convert":
            return self.operands and self.shape.element_bits == self.operands[0].shape.element_bits
        if op in ELEMENTWISE_OPCODES or op in ("constant", "rng"):
            return True
        if op == "map":
            dims = list(self.proto.dimensions)
            return not dims or dims == list(range(len(self.shape.dimensions)))
        if op == "fusion" and self.fused_computation is not None:
            return all(i.opcode == "parameter" or i.is_elementwise() for i in self.fused_computation.instructions)
        return False

    def __repr__(self):
        return f"<HloInstruction %{self.name} = {self.opcode}>"


class HloComputation:
    """A computation: `name`, `id`, `instructions` (in the proto's order), `root`,
    `is_fusion` (the body of a fusion instruction)."""

    def __init__(self, proto):
        self.proto = proto
        self.name = proto.name
        self.id = proto.id
        self.is_fusion = False
        self.instructions = [HloInstruction(p, self) for p in proto.instructions]
        by_id = {i.id: i for i in self.instructions}
        self.root = by_id.get(proto.root_id, self.instructions[-1] if self.instructions else None)
        for instr in self.instructions:
            for oid in instr.proto.operand_ids:
                op = by_id.get(oid)
                if op is None:
                    raise ValueError(f"instruction {instr.name} of {self.name} has an unknown operand id {oid}")
                instr.operands.append(op)
                op.users.append(instr)
            instr.control_predecessors = [by_id[c] for c in instr.proto.control_predecessor_ids if c in by_id]

    def parameters(self):
        """Parameters by parameter number."""
        params = [i for i in self.instructions if i.opcode == "parameter"]
        return sorted(params, key=lambda i: i.proto.parameter_number)

    def post_order(self):
        """Instructions, operands before users, as XLA's MakeInstructionPostOrder: a
        depth-first walk from each instruction without users, in instruction order."""
        order, state = [], {}
        for instr in self.instructions:
            if not instr.users:
                post_order_from(instr, state, order)
        return order

    def visit_order(self):
        """The order XLA's HloComputation::Accept visits instructions in: from each
        unreachable root (no users, not the root), then from the root."""
        order, state = [], {}
        for instr in self.instructions:
            if not instr.users and instr is not self.root:
                post_order_from(instr, state, order)
        if self.root is not None:
            post_order_from(self.root, state, order)
        return order

    def __repr__(self):
        return f"<HloComputation {self.name}: {len(self.instructions)} instructions>"


def post_order_from(root, state, order):
    """Appends the not yet visited instructions reachable from `root` in post order:
    operands in operand order, then control predecessors (XLA's iterative DFS)."""
    stack = [root]
    while stack:
        node = stack[-1]
        s = state.get(node.id)
        if s == 2:
            stack.pop()
            continue
        if s == 1:
            stack.pop()
            state[node.id] = 2
            order.append(node)
            continue
        state[node.id] = 1
        children = [c for c in node.operands + node.control_predecessors if state.get(c.id) != 2]
        stack.extend(reversed(children))


class HloModule:
    """An HLO module with its instructions linked: `name`, `computations` (by id),
    `entry`, `instruction(name)` (any computation, fused ones included) and
    `proto` (the HloModuleProto). Raises ProfileError for a malformed graph."""

    def __init__(self, module_proto, label="HloModule"):
        self.proto = module_proto
        self.name = module_proto.name
        try:
            self.computations = {c.id: HloComputation(c) for c in module_proto.computations}
        except ValueError as exc:
            raise ProfileError(label, f"not a valid HLO module ({exc})") from None
        check_module(module_proto, label)
        by_name = {}
        for comp in self.computations.values():
            for instr in comp.instructions:
                instr.called = [
                    self.computations[c] for c in instr.proto.called_computation_ids if c in self.computations
                ]
                if instr.opcode == "fusion":
                    for c in instr.called:
                        c.is_fusion = True
                by_name.setdefault(instr.name, instr)
        self._by_name = by_name
        self.entry = self.computations.get(module_proto.entry_computation_id)
        if self.entry is None and module_proto.computations:
            self.entry = list(self.computations.values())[-1]

    def instruction(self, name):
        """The instruction named `name` (the first found), or None."""
        return self._by_name.get(name)

    @property
    def instructions(self):
        """Every instruction of every computation, by name."""
        return self._by_name

    def __repr__(self):
        return f"<HloModule {self.name}: {len(self.computations)} computations>"


def hlo_module(data, label="HloModule") -> HloModule:
    """An HloModule (linked graph) from serialized `xla.HloProto` bytes or a parsed proto."""
    return HloModule(parse_hlo_proto(data, label).hlo_module, label)


# Opcodes XLA treats as elementwise (HloInstruction::IsOpElementwise).
ELEMENTWISE_OPCODES = frozenset(
    (
        "abs acos acosh asin asinh atanh round-nearest-afz round-nearest-even ceil count-leading-zeros "
        "convert bitcast-convert copy cosine cosh erf exponential exponential-minus-one floor imag is-finite "
        "log log-plus-one not negate popcnt real reduce-precision rsqrt logistic sign sine sinh sqrt cbrt tan "
        "tanh add atan2 compare complex divide maximum minimum multiply mulhi power remainder subtract and or "
        "xor shift-left shift-right-arithmetic shift-right-logical stochastic-convert select clamp"
    ).split()
)
