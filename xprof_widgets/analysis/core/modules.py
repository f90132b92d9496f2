"""The run's compiled HLO modules as a table (`Run.modules`), and which one the module tools
show first: the largest by what its buffers allocate, as XProf's memory viewer lists them."""

from __future__ import annotations

import pandas as pd

from ...errors import ProfileError
from ...io.hlo import parse_hlo_proto


def list_modules(hlo_protos: dict) -> pd.DataFrame:
    """One row per module: `module` (`name(program_id)`), `name`, `program_id`,
    `instructions` (count), `total_allocation_bytes` and
    `indefinite_allocation_bytes` (memory space 0, bytes), sorted by total
    allocation, largest first. Undecodable modules are listed with
    `error` set. The first row is `default_module`'s choice.
    """
    rows = []
    for key, data in hlo_protos.items():
        name, _, rest = key.rpartition("(")
        try:
            program_id = int(rest.rstrip(")"))
        except ValueError:
            name, program_id = key, None
        row = {
            "module": key,
            "name": name or key,
            "program_id": program_id,
            "instructions": 0,
            "total_allocation_bytes": 0,
            "indefinite_allocation_bytes": 0,
            "error": "",
        }
        try:
            hlo = parse_hlo_proto(data, key)
        except ProfileError as exc:
            row["error"] = exc.problem
            rows.append(row)
            continue
        row["instructions"] = sum(len(c.instructions) for c in hlo.hlo_module.computations)
        total = indefinite = 0
        for a in hlo.buffer_assignment.buffer_allocations:
            if a.color != 0:
                continue
            total += a.size
            if a.is_entry_computation_parameter or a.is_constant or a.maybe_live_out:
                indefinite += a.size
        row["total_allocation_bytes"] = total
        row["indefinite_allocation_bytes"] = indefinite
        rows.append(row)
    frame = pd.DataFrame(
        rows,
        columns=[
            "module",
            "name",
            "program_id",
            "instructions",
            "total_allocation_bytes",
            "indefinite_allocation_bytes",
            "error",
        ],
    )
    if len(frame):
        frame = frame.sort_values(
            ["total_allocation_bytes", "instructions", "module"], ascending=[False, False, True], kind="stable"
        ).reset_index(drop=True)
    return frame


def default_module(hlo_protos: dict) -> str | None:
    """The module to show first: the largest by total allocation (memory space
    0), ties broken by instruction count then name; None if there are none."""
    frame = list_modules(hlo_protos)
    frame = frame[frame["error"] == ""]
    return None if frame.empty else str(frame["module"].iloc[0])
