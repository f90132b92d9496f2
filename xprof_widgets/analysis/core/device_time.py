"""Device time per host file that the overview reads: the TPU duty cycle and the executions
of XLA modules (XProf's `xplane_to_op_stats.cc`, `ComputeTpuDutyCycle`-like, and the "XLA
Modules" lines)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ...io.wire import WireError, walk
from .planes import sparse_core_planes, tensor_core_planes

#: HLO categories XProf leaves out of a TensorCore's busy time.
_OFF_DUTY = {"infeed", "outfeed", "host send", "host send-done", "host recv", "host recv-done", "megacore fusion"}


def device_timespans(line):
    """(begin_ps, duration_ps) int64 arrays of a device line's events on the device's clock,
    as XProf's `GetDeviceEventTimespan`: an event's `device_offset_ps` and
    `device_duration_ps` stats where it has both (whole numbers), else its own times."""
    begin = line.start_ps.astype(np.int64)
    dur = line.event_duration_ps.astype(np.int64)
    st = line.stats(names=["device_offset_ps", "device_duration_ps"])
    if "device_offset_ps" in st and "device_duration_ps" in st:
        off = pd.to_numeric(st["device_offset_ps"], errors="coerce").to_numpy(dtype=float)
        dd = pd.to_numeric(st["device_duration_ps"], errors="coerce").to_numpy(dtype=float)
        ok = ~(np.isnan(off) | np.isnan(dd))
        begin = np.where(ok, np.nan_to_num(off), begin).astype(np.int64)
        dur = np.where(ok, np.nan_to_num(dd), dur).astype(np.int64)
    return begin, dur


def _union_length(start, end):
    if not len(start):
        return 0
    order = np.argsort(start, kind="stable")
    s, e = start[order], end[order]
    reach = np.maximum.accumulate(e)
    prev = np.concatenate([[np.iinfo(np.int64).min], reach[:-1]])
    return int(np.clip(e - np.maximum(s, prev), 0, None).sum())


def tpu_duty_cycle(space):
    """(busy_ps, idle_ps) of the TPU chips of one file, as XProf's `DutyCycleCombiner`: per
    chip (a core's `core_details` stat names its `local_chip_id`; a core without one is a chip
    of its own), the union of its cores' busy time (TensorCore ops but the off-duty ones,
    every SparseCore op) and, idle, the rest of the span from the chip's first module or op
    to its last."""
    chips: dict = {}
    cores = [(p, "XLA Ops", "XLA Modules") for p in tensor_core_planes(space)]
    cores += [(p, "Sparse Core Ops", "Sparse Core Modules") for p, _ in sparse_core_planes(space)]
    for plane, ops_name, modules_name in cores:
        lo, hi, parts = None, None, []
        for line in plane.lines:
            if line.name not in (ops_name, modules_name) or not len(line):
                continue
            start = line.start_ps
            end = start + line.event_duration_ps
            lo = start.min() if lo is None else min(lo, start.min())
            hi = end.max() if hi is None else max(hi, end.max())
            if line.name == "XLA Ops":
                cat = line.stats(names=["hlo_category"]).get("hlo_category")
                # Compared as they are: a bytes value (a damaged file) is no category,
                # where turning it into str would fail to decode.
                off = cat.isin(list(_OFF_DUTY)).to_numpy() if cat is not None else np.zeros(len(line), bool)
                parts.append((start[~off], end[~off]))
            elif line.name == ops_name:
                parts.append((start, end))
        if lo is None:
            continue
        chip = _local_chip_id(plane)
        key = ("chip", chip) if chip is not None else ("plane", id(plane))
        have = chips.setdefault(key, [lo, hi, []])
        have[0], have[1] = min(have[0], lo), max(have[1], hi)
        have[2].extend(parts)
    busy = idle = 0
    for lo, hi, parts in chips.values():
        active = _union_length(
            np.concatenate([p[0] for p in parts]) if parts else np.zeros(0, np.int64),
            np.concatenate([p[1] for p in parts]) if parts else np.zeros(0, np.int64),
        )
        busy += active
        idle += int(hi - lo) - active
    return busy, idle


def _local_chip_id(plane) -> int | None:
    """The `local_chip_id` (field 4, 0 when absent) of a plane's `core_details` stat (a
    serialized `CoreDetails`), None without one or where it does not parse."""
    value = plane.stats.get("core_details")
    if not isinstance(value, (bytes, bytearray)):
        return None
    chip = 0
    try:
        for number, kind, v, _, _ in walk(value, 0, len(value)):
            if number == 4 and kind == 0:
                chip = v
    except WireError:
        return None
    return chip


def module_executions(space) -> pd.DataFrame:
    """Every execution of an XLA module on a device line "XLA Modules" of one file: module, ms."""
    names, durations = [], []
    for plane in space.planes:
        if not plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            if line.name == "XLA Modules" and len(line):
                names.append(np.asarray(line.names().astype(object)))
                durations.append(line.event_duration_ps)
    if not names:
        return no_module_executions()
    return pd.DataFrame({"module": np.concatenate(names), "ms": np.concatenate(durations) / 1e9})


def no_module_executions() -> pd.DataFrame:
    """`module_executions`' table with no row."""
    return pd.DataFrame({"module": pd.Series(dtype=object), "ms": pd.Series(dtype=np.float64)})
