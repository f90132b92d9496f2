"""XProf's performance counters tool (`perf_counters`, `xplane_to_perf_counters.cc`): every
hardware counter sample a TPU (or GPU) profile recorded, as a table.

The TPU runtime samples its hardware counters into lines of each device plane (a line a
sample): an event per counter, named by it, with its value in `counter_value` (and
`performance_counter_description`, `performance_counter_sets`). A row per such event of a
device plane that names its chip (`global_chip_id`, else `device_id`): the host (the
file's host name), the chip, the line's name ("kernel") and id ("sample"), the counter's
name in lower case, its value (and in hex, as XProf shows it), description and set. A
profile without counter events has no rows, and says why.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .core.planes import GPU_PLANE_PREFIX, TPU_PLANE_PREFIX
from .core.runlike import RunLike

COLUMNS = ["host", "chip", "kernel", "sample", "counter", "value", "value_hex", "description", "set"]
NO_COUNTERS = (
    "no hardware counter samples: XProf's performance counters are events with a `counter_value` "
    "stat on a TPU or GPU plane that names its chip (`global_chip_id` or `device_id`); the TPU "
    "runtime records them only when the profile asks for hardware counters"
)
_STATS = ["counter_value", "performance_counter_description", "performance_counter_sets"]


def _chip(plane):
    """The plane's chip id (`global_chip_id`, else `device_id`), or None."""
    stats = plane.stats
    for name in ("global_chip_id", "device_id"):
        value = stats.get(name)
        if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
            return int(value)
    return None


def _column(st, name, has, n):
    """A text stat of the rows kept ("" where missing or not text)."""
    if name not in st:
        return [""] * n
    return [v if isinstance(v, str) else "" for v in st[name][has]]


def perf_counters(run: RunLike) -> pd.DataFrame:
    """XProf's performance counter table of a run, every host in order (see the module
    doc); `.attrs["reason"]` says why it is empty."""
    frames = []
    for host, space in run.host_spaces():
        for plane in space.planes:
            if not plane.name.startswith((TPU_PLANE_PREFIX, GPU_PLANE_PREFIX)) or not plane.has_stat("counter_value"):
                continue
            chip = _chip(plane)
            if chip is None:
                continue
            for _, line in plane.busy_lines:
                st = line.stats(names=_STATS)
                if "counter_value" not in st:
                    continue
                value = pd.to_numeric(st["counter_value"], errors="coerce")
                has = value.notna().to_numpy()
                if not has.any():
                    continue
                raw = [int(v) & 0xFFFFFFFFFFFFFFFF for v in st["counter_value"][has]]
                n = len(raw)
                frames.append(
                    pd.DataFrame(
                        {
                            "host": host,
                            "chip": chip,
                            "kernel": line.name,
                            "sample": int(line.id),
                            "counter": [str(x).lower() for x in np.asarray(line.names().astype(object))[has]],
                            "value": np.array(raw, dtype=np.uint64),
                            "value_hex": [hex(v) for v in raw],
                            "description": _column(st, "performance_counter_description", has, n),
                            "set": _column(st, "performance_counter_sets", has, n),
                        }
                    )
                )
    out = pd.concat(frames, ignore_index=True)[COLUMNS] if frames else pd.DataFrame(columns=COLUMNS)
    out.attrs["reason"] = "" if len(out) else NO_COUNTERS
    return out
