"""HLO modules stored in an XSpace.

XLA writes each compiled module's `xla.HloProto` (HLO graph plus buffer
assignment) into the XSpace plane named `/host:metadata`: one XEventMetadata
per module, carrying a stat whose XStatMetadata is named `Hlo Proto` with the
serialized proto as `bytes_value`. Modules are named like XProf does,
`name(program_id)`, e.g. `jit_step(30)`.
"""

from __future__ import annotations

import re

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
