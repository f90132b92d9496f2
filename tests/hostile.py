"""Real profiles whose every name carries script: the input of the XSS tests.

`hostile_copy(run_folder, dest)` copies a real run with the same suffix, `PAYLOAD`
(markup that runs script if a page ever parses it as HTML: an attribute break-out
with an `onerror` handler, and a `</script>` break-out), appended to every name a
tool shows: event names and display names (ops, kernels, steps, tf.data iterators,
the modules of /host:metadata), host-thread line names, string stats that carry
names (`hlo_op`, `hlo_module`, `tf_op`, shapes, ...), and inside every HloProto the
module, computation and instruction names (with the buffer assignment's references
to them), so names still match each other and the tools still find their data. The
run folder and the host file get `FILE_PAYLOAD` (a file name cannot hold "/").
If the page runs any of it, `window.__xss` becomes 1.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from xprof_widgets.io import schema
from xprof_widgets.io.hlo import HLO_PROTO_STAT

PAYLOAD = "'\"><img src=x onerror=window.__xss=1></script><script>window.__xss=1</script>"
FILE_PAYLOAD = "'\"><img src=x onerror=window.__xss=1>"
# String stats that hold names (others hold structured values the tools parse).
NAME_STATS = {
    "hlo_op",
    "hlo_module",
    "tf_op",
    "long_name",
    "tensor_shape",
    "region_type",
    "shape",
    "allocator_name",
    "kernel_name",
    "name",
    "step_name",
    "source",
    "framework_name_scope",
}
# Events whose names the tools look for (allocator events): kept.
KEEP_EVENTS = {"MemoryAllocation", "MemoryDeallocation"}
_WITH_ID = re.compile(r"^(.*)\((\d+)\)$")
# Lines whose names say what they hold: kept, so the tools still recognise them.
KEEP_LINES = {
    "XLA Ops",
    "XLA Modules",
    "Steps",
    "Framework Ops",
    "Framework Name Scope",
    "Source code",
    "TensorFlow Ops",
    "TensorFlow Name Scope",
    "XLA TraceMe",
    "Launch Stats",
}


def _renamed(name: str) -> str:
    """`name` + PAYLOAD; a module's `name(program_id)` becomes `name PAYLOAD(program_id)`, and
    each level of a tf.data iterator path `Iterator::Root::Map[0]` its own, so that a parent's
    path stays the start of its children's."""
    if name.startswith("Iterator::"):
        levels = name.split("::")
        return "::".join(
            levels[:1]
            + [re.sub(r"(\[\d+\])?$", lambda m: PAYLOAD + m.group(0), level, count=1) for level in levels[1:]]
        )
    m = _WITH_ID.match(name)
    return f"{m.group(1)}{PAYLOAD}({m.group(2)})" if m else name + PAYLOAD


def _rename_hlo(data: bytes) -> bytes:
    proto = schema.message_class("xla.HloProto")()
    proto.ParseFromString(data)
    module = proto.hlo_module
    module.name += PAYLOAD
    if module.entry_computation_name:
        module.entry_computation_name += PAYLOAD
    for computation in module.computations:
        computation.name += PAYLOAD
        for instruction in computation.instructions:
            instruction.name += PAYLOAD
            for field in ("op_name", "op_type", "source_file"):
                if getattr(instruction.metadata, field):
                    setattr(instruction.metadata, field, getattr(instruction.metadata, field) + PAYLOAD)
    assignment = proto.buffer_assignment
    for buffer in assignment.logical_buffers:
        if buffer.defined_at.instruction_name:
            buffer.defined_at.instruction_name += PAYLOAD
    for alias in assignment.buffer_aliases:
        if alias.location.instruction_name:
            alias.location.instruction_name += PAYLOAD
    for trace in assignment.heap_simulator_traces:
        for event in trace.events:
            if event.instruction_name:
                event.instruction_name += PAYLOAD
            if event.computation_name:
                event.computation_name += PAYLOAD
    return proto.SerializeToString()


def _rename_stat(stat, names, ref_names):
    kind = stat.WhichOneof("value")
    name = names.get(stat.metadata_id, "")
    if kind == "str_value" and name in NAME_STATS:
        stat.str_value += PAYLOAD
    elif kind == "ref_value" and name in NAME_STATS:
        ref_names.add(stat.ref_value)
    elif kind == "bytes_value" and name == HLO_PROTO_STAT:
        stat.bytes_value = _rename_hlo(stat.bytes_value)


def hostile_space(data: bytes) -> bytes:
    """The XSpace `data` (serialized) with PAYLOAD appended to every name a tool shows."""
    space = schema.XSpace()
    space.ParseFromString(data)
    space.hostnames[:] = [h + FILE_PAYLOAD for h in space.hostnames]
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        ref_names = set()  # stat metadata used as the string value of a name stat
        for metadata in plane.event_metadata.values():
            if metadata.name not in KEEP_EVENTS:
                metadata.name = _renamed(metadata.name)
            if metadata.display_name:
                metadata.display_name = _renamed(metadata.display_name)
            for stat in metadata.stats:
                _rename_stat(stat, names, ref_names)
        for line in plane.lines:
            if plane.name.startswith("/host:") and line.name not in KEEP_LINES:
                line.name += PAYLOAD
                if line.display_name:
                    line.display_name += PAYLOAD
            for event in line.events:
                for stat in event.stats:
                    _rename_stat(stat, names, ref_names)
        for stat in plane.stats:
            _rename_stat(stat, names, ref_names)
        keys = {s.metadata_id for m in plane.event_metadata.values() for s in m.stats}
        keys |= {s.metadata_id for line in plane.lines for e in line.events for s in e.stats}
        keys |= {s.metadata_id for s in plane.stats}
        for ref in ref_names - keys:  # values only, never a stat's own name
            plane.stat_metadata[ref].name += PAYLOAD
    return space.SerializeToString()


def hostile_copy(run_folder: Path, dest: Path) -> Path:
    """A logdir at `dest` holding run `run_folder` made hostile; returns the new run folder."""
    run_folder = Path(run_folder)
    out = Path(dest) / "plugins" / "profile" / (run_folder.name + FILE_PAYLOAD)
    out.mkdir(parents=True)
    for f in sorted(run_folder.iterdir()):
        if f.name.endswith(".xplane.pb.gz"):
            data = gzip.decompress(f.read_bytes())
        elif f.name.endswith(".xplane.pb"):
            data = f.read_bytes()
        else:
            continue
        host = f.name.split(".xplane.pb")[0]
        (out / f"{host}{FILE_PAYLOAD}.xplane.pb").write_bytes(hostile_space(data))
    return out
