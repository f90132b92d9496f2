"""What XProf says about one HLO instruction, read from the module's HloProto.

XProf's op statistics name each HLO op by its category (`HloInstruction::ToCategory`:
"loop fusion", "data formatting", "convolution window-dilated", ...), its HLO text,
the framework op it came from, its deduplicated group and its source line
(xprof/utils/hlo_module_map.cc `HloInstructionWrapper`). `ProgramModules` holds a
run's modules by program id, parsed and costed once each, on first use.
"""

from __future__ import annotations

import os
import threading

from ...errors import ProfileError
from ...io.hlo import hlo_module
from ...io.hlo_text import instruction_text
from .cache import per_run
from .hlo_cost import module_costs
from .tf_op import has_gradients, tf_op_fullname

_DATA_FORMATTING = frozenset({"transpose", "copy", "reshape", "dynamic-reshape"})
_FUSION_CATEGORY = {
    "kLoop": "loop fusion",
    "kInput": "input fusion",
    "kOutput": "output fusion",
    "kCustom": "custom fusion",
}


def category(instr) -> str:
    """XProf's category of an HLO instruction (HloInstruction::ToCategory)."""
    op = instr.opcode
    if op == "fusion":
        return _FUSION_CATEGORY.get(instr.fusion_kind, "fusion")
    if op == "convolution":
        dims = instr.proto.window.dimensions
        text = "convolution"
        if any(d.base_dilation != 1 for d in dims):
            text += " base-dilated"
        if any(d.window_dilation != 1 for d in dims):
            text += " window-dilated"
        return text
    if op in _DATA_FORMATTING:
        return "data formatting"
    if instr.is_elementwise():
        return "non-fusion elementwise"
    return op


def provenance(instr) -> str:
    """The framework op (`op_name:op_type`) from the instruction's metadata."""
    return tf_op_fullname(instr.metadata.op_type, instr.metadata.op_name)


def op_full_name(instr) -> str:
    """`op_name:op_type` as XProf's trace names the framework op of a kernel."""
    return f"{instr.metadata.op_name}:{instr.metadata.op_type}"


def source_text(instr) -> str:
    """`file.py:12` (basename and line), or "" without a source file."""
    md = instr.metadata
    return f"{os.path.basename(md.source_file)}:{md.source_line}" if md.source_file else ""


def source_info(instr, module) -> tuple:
    """(file, line, stack) as XProf's op details show: the metadata's source file and
    line, and the stack of frames ("file:line:col" per line, innermost first); line -1
    when unknown."""
    md = instr.metadata
    stack = _stack(module.proto.stack_frame_index, md.stack_frame_id) if md.stack_frame_id else ""
    if md.source_file:
        return md.source_file, int(md.source_line), stack
    if stack:
        first = stack.split("\n", 1)[0].split(":")
        if len(first) >= 2:
            try:
                return first[0], int(first[1]), stack
            except ValueError:
                return first[0], -1, stack
    return "", -1, ""


def _stack(index, frame_id):
    lines, seen = [], set()
    while frame_id and frame_id not in seen and 0 < frame_id <= len(index.stack_frames):
        seen.add(frame_id)
        frame = index.stack_frames[frame_id - 1]
        loc_id = frame.file_location_id
        if not 0 < loc_id <= len(index.file_locations):
            break
        loc = index.file_locations[loc_id - 1]
        name = index.file_names[loc.file_name_id - 1] if 0 < loc.file_name_id <= len(index.file_names) else ""
        lines.append(f"{name}:{loc.line}:{loc.column}\n")
        frame_id = frame.parent_frame_id
    return "".join(lines)


def expression(instr) -> str:
    """The HLO text XProf shows for the instruction."""
    return instruction_text(instr)


def program_id_of(key) -> int | None:
    """The program id of a module named `name(program_id)`."""
    key = str(key)
    if key.endswith(")") and "(" in key:
        try:
            return int(key[key.rindex("(") + 1 : -1])
        except ValueError:
            return None
    return None


class ProgramModules:
    """A run's HLO modules by program id: `module(pid)` (io.hlo.HloModule, or None
    when there is none or it does not parse), `costs(pid, mode)` (hlo_cost.ModuleCosts),
    `names` ({program_id: "name(id)"}). Each is parsed and costed once, when asked."""

    def __init__(self, hlo_protos):
        self._protos = {}
        self.names = {}
        for key, data in (hlo_protos or {}).items():
            pid = program_id_of(key)
            if pid is not None:
                self._protos[pid] = (key, data)
                self.names[pid] = key
        self._modules = {}
        self._costs = {}
        self._training = None

    def __contains__(self, pid):
        return pid in self._protos

    def module(self, pid):
        if pid not in self._modules:
            entry = self._protos.get(pid)
            self._modules[pid] = None if entry is None else _parsed(*entry)["module"]
        return self._modules[pid]

    def may_hold(self, pid, text) -> bool:
        """Whether module `pid`'s serialized bytes hold `text` (UTF-8) somewhere: False says
        no name of the module holds it without parsing the module (a few ms each); True
        says it may (then parse it and look)."""
        entry = self._protos.get(pid)
        if entry is None:
            return False
        data = entry[1]
        return text.encode() in data if isinstance(data, (bytes, bytearray)) else True

    def instruction(self, pid, name):
        mod = self.module(pid)
        return mod.instruction(name) if mod is not None else None

    def is_training(self) -> bool:
        """XProf's run environment `is_training`: its ModelTracker over the metadata (op
        name and type) of every instruction of every module finds a gradient
        (`tf_op.has_gradients`). False without modules (TF without XLA)."""
        if self._training is None:
            self._training = any(
                has_gradients(
                    (i.proto.metadata.op_name, i.proto.metadata.op_type)
                    for c in mod.computations.values()
                    for i in c.instructions
                )
                for mod in (self.module(pid) for pid in self._protos)
                if mod is not None
            )
        return self._training

    def costs(self, pid, mode="gpu"):
        key = (pid, mode)
        if key not in self._costs:
            entry = self._protos.get(pid)
            found = None
            if entry is not None:
                parsed = _parsed(*entry)
                if parsed["module"] is not None:
                    if mode not in parsed["costs"]:
                        parsed["costs"][mode] = module_costs(parsed["module"], mode)
                    found = parsed["costs"][mode]
            self._costs[key] = found
        return self._costs[key]


#: Modules parsed (and costed) lately in this process, by their name and bytes: the hosts
#: of a pod, read one after another by a worker, run the same programs, and each module's
#: parse and cost analysis is most of a small host's summary. At most KEPT_MODULES kept,
#: of at most KEPT_BYTES serialized in all (the newest always): a host's programs must fit
#: (a JAX host runs tens; kept by count alone, eight of a host's sixteen were parsed again
#: for every host, each pushing out the next one asked for).
_PARSED: dict = {}
_PARSED_LOCK = threading.Lock()  # (a widget may read a run on a thread while a tool runs)
KEPT_MODULES = 256
KEPT_BYTES = 32 * 2**20


def _parsed(label, data) -> dict:
    """{"module": HloModule or None (a module that does not parse: its ops are not
    attributed, as in XProf), "costs": {mode: ModuleCosts}} of one serialized module."""
    key = (label, bytes(data))
    with _PARSED_LOCK:
        found = _PARSED.pop(key, None)  # (put back last: the most recent)
        if found is not None:
            _PARSED[key] = found
            return found
    try:
        mod = hlo_module(data, label)
    except ProfileError:
        mod = None
    with _PARSED_LOCK:
        found = _PARSED.setdefault(key, {"module": mod, "costs": {}})  # (another thread's, if first)
        kept = sum(len(k[1]) for k in _PARSED)
        while len(_PARSED) > 1 and (len(_PARSED) > KEPT_MODULES or kept > KEPT_BYTES):
            kept -= len(next(iter(_PARSED))[1])
            del _PARSED[next(iter(_PARSED))]
    return found


@per_run
def program_modules(run) -> ProgramModules:
    """The run's ProgramModules, built once per run."""
    return ProgramModules(run.hlo_protos or {})
