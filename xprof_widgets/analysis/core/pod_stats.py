"""Each host's steps per core, and how hosts combine them: what XProf's pod viewer and its
TPU step table over many hosts read.

XProf (`op_stats_to_pod_stats.cc`, `op_stats_combiner.cc`, `step_intersection.cc`):

* **Per host** (`host_pod_steps`): the steps of its step database, without dropping the
  first and last (the pod viewer's OpStats keeps every step), per core: on TPU each
  TensorCore's step (`tpu_steps.tpu_step_cores`), elsewhere one row a step for the whole
  host (XProf's core 1: "all events of a host in one stream").
* **Many hosts** (`combine_pod_steps`): the steps all workers share (XProf's step
  intersection, `steps.step_intersection`; a host without a device in a run with devices
  is a coordinator and takes no part), renumbered 0, 1, ... in the chief's order, each
  core's id made global: host index x 1000 + its id. One host keeps its own numbers.
* **The pod viewer's breakdown** (`pod_breakdown`, XProf 2.24.2): per core and step, the
  step time split into XProf's nine categories. Elsewhere than TPU they are the generic
  step breakdown (`steps.BREAKDOWN_COLUMNS`); on TPU, from the core's ops: input = infeed
  + host recv, output = outfeed + host send, collectives = all-reduce / all-to-all,
  device to device = send / recv and megacore fusion, all others = idle (the step less all
  op time, at least 0), device compute = the rest. The bottleneck is the largest category
  (of equals, the last by name, as XProf sorts them).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .planes import has_tensor_cores
from .steps import gpu_device_steps, host_steps, step_intersection
from .tpu_steps import CORE_COLUMNS, no_steps_reason, tpu_step_cores

#: XProf's step breakdown categories (`stepBreakdownEvents`: id 1-9), in its order, with the
#: generic step table's column each reads.
POD_CATEGORIES = {
    "Device compute": "device_compute_ms",
    "Device to device": "device_to_device_ms",
    "Device collective communication": "device_collectives_ms",
    "Host compute": "host_compute_ms",
    "Kernel launch": "kernel_launch_ms",
    "Input": "input_ms",
    "Output": "output_ms",
    "Compilation": "compilation_ms",
    "All others": "all_others_ms",
}
POD_COLUMNS = [
    "step_num",
    "core_id",
    "host",
    "chip_id",
    "node_id",
    "total_duration_us",
    "bottleneck",
    *POD_CATEGORIES,
    "begin_ps",
    "end_ps",
]
#: XProf's global core id: host index x this + the host's own core id.
MAX_CORES_PER_HOST = 1000
#: XProf's core id of a host's one stream of events off TPU (`kDefaultGpuLocalCoreId`).
HOST_CORE_ID = 1


@dataclass(frozen=True)
class HostPodSteps:
    """One host file's steps per core (see the module doc): hostname; tpu, its TensorCores'
    per-step rows (`tpu_steps.tpu_step_cores`, every step) or None off TPU; generic, the
    host's step table without dropping partial steps (`steps.host_steps` or
    `steps.gpu_device_steps`) or None on TPU; worker: whether it takes part in the step
    intersection (has a device, or nobody has); reason: why a TPU host has no steps ("")."""

    hostname: str
    tpu: pd.DataFrame | None
    generic: pd.DataFrame | None
    has_device: bool
    reason: str = ""

    def spans(self) -> pd.DataFrame:
        """One row a step: begin_ps and step_time_ms, in step order (for the intersection)."""
        if self.tpu is not None:
            first = self.tpu.drop_duplicates("step_num")
            return pd.DataFrame({"begin_ps": first["begin_ps"], "step_time_ms": first["duration_ps"] / 1e9})
        g = self.generic if self.generic is not None else pd.DataFrame(columns=["begin_ps", "step_time_ms"])
        return g[["begin_ps", "step_time_ms"]]

    def step_numbers(self) -> list[int]:
        if self.tpu is not None:
            return self.tpu["step_num"].drop_duplicates().tolist()
        return [] if self.generic is None else self.generic["step_number"].tolist()


def host_pod_steps(space) -> HostPodSteps:
    """`HostPodSteps` of one host file."""
    hostname = (space.hostnames[:1] or ["localhost"])[0]  # XProf's Hostname(space)
    tpu = has_tensor_cores(space)
    gpu = any(p.name.startswith("/device:GPU") for p in space.planes)
    if tpu:
        cores = tpu_step_cores(space).copy()
        return HostPodSteps(hostname, cores, None, True, "" if len(cores) else no_steps_reason(space))
    if gpu:
        return HostPodSteps(hostname, None, gpu_device_steps(space, drop_partial=False), True)
    return HostPodSteps(hostname, None, host_steps(space, drop_partial=False), False)


def combine_pod_steps(hosts: Sequence[HostPodSteps]) -> tuple[pd.DataFrame | None, pd.DataFrame | None]:
    """(TPU core rows, generic step rows) of the steps all workers share (see the module
    doc), with `host`, global `core_id` and the combined `step_num`; None for a kind no
    host has."""
    if not hosts:
        return None, None
    accelerated = any(h.has_device for h in hosts)
    workers = [h.has_device or not accelerated for h in hosts]
    if len(hosts) == 1:
        firsts, n = [0], len(hosts[0].step_numbers())
    else:
        firsts, n = step_intersection([h.spans() if w else None for h, w in zip(hosts, workers)])
    tpu_rows, generic_rows = [], []
    for i, (h, w) in enumerate(zip(hosts, workers)):
        if not w:
            continue
        numbers = h.step_numbers()[firsts[i] : firsts[i] + n]
        new = dict(zip(numbers, numbers if len(hosts) == 1 else range(n)))
        offset = 0 if len(hosts) == 1 else i * MAX_CORES_PER_HOST
        if h.tpu is not None:
            t = h.tpu[h.tpu["step_num"].isin(numbers)].copy()
            t["step_num"] = t["step_num"].map(new).astype(np.int64)
            t["core_id"] = t["core_id"].astype(np.int64) + offset
            t["host"] = h.hostname
            tpu_rows.append(t)
        elif h.generic is not None:
            g = h.generic[h.generic["step_number"].isin(numbers)].copy()
            g["step_num"] = g["step_number"].map(new).astype(np.int64)
            g["core_id"] = HOST_CORE_ID + offset
            g["host"] = h.hostname
            generic_rows.append(g)
    tpu = pd.concat(tpu_rows, ignore_index=True) if tpu_rows else None
    generic = pd.concat(generic_rows, ignore_index=True) if generic_rows else None
    if tpu is not None:
        tpu = tpu.sort_values(["step_num", "core_id"], kind="stable").reset_index(drop=True)
    return tpu, generic


def pod_breakdown(tpu: pd.DataFrame | None, generic: pd.DataFrame | None) -> pd.DataFrame:
    """XProf's pod viewer rows (`POD_COLUMNS`), one per (step, core), from
    `combine_pod_steps`' rows: the step's time on the core (µs), its split into XProf's
    categories (µs) and the largest of them; beyond XProf, begin_ps / end_ps, the step on that
    core as the trace viewer shows it (host clock). chip_id and node_id are 0, as XProf
    2.24.2 writes them."""
    frames = []
    if tpu is not None and "sparse_core" in tpu:  # XProf's pod viewer shows the TensorCores only
        tpu = tpu[~tpu["sparse_core"].to_numpy(bool)]
    if tpu is not None and len(tpu):
        c = {k: tpu[k].to_numpy(np.int64) for k in CORE_COLUMNS if k not in ("plane", "sparse_core")}
        step = c["duration_ps"]
        idle = np.maximum(step - c["op_time_ps"], 0)
        parts = {
            "Device to device": c["send_ps"] + c["recv_ps"] + c["megacore_fusion_ps"],
            "Device collective communication": c["all_reduce_ps"],
            "Input": c["infeed_ps"] + c["host_recv_ps"] + c["scv0_infeed_ps"],  # (SparseCoreV0's too)
            "Output": c["outfeed_ps"] + c["host_send_ps"] + c["scv0_outfeed_ps"],
            "All others": idle,
        }
        parts["Device compute"] = np.maximum(step - sum(parts.values()), 0)
        frame = pd.DataFrame({"step_num": c["step_num"], "core_id": c["core_id"], "host": tpu["host"].to_numpy()})
        frame["begin_ps"], frame["end_ps"] = c["trace_begin_ps"], c["trace_end_ps"]
        frame["total_duration_us"] = step / 1e6
        for name in POD_CATEGORIES:
            frame[name] = parts.get(name, np.zeros(len(step), np.int64)) / 1e6
        frames.append(frame)
    if generic is not None and len(generic):
        frame = generic[["step_num", "core_id", "host"]].copy()
        frame["total_duration_us"] = generic["step_time_ms"].to_numpy(np.float64) * 1e3
        frame["begin_ps"] = generic["begin_ps"].to_numpy(np.int64)
        frame["end_ps"] = frame["begin_ps"] + np.rint(generic["step_time_ms"].to_numpy(np.float64) * 1e9).astype(
            np.int64
        )
        for name, col in POD_CATEGORIES.items():
            frame[name] = generic[col].to_numpy(np.float64) * 1e3
        frames.append(frame)
    if not frames:
        return pd.DataFrame(columns=POD_COLUMNS)
    out = pd.concat(frames, ignore_index=True)
    out["chip_id"] = 0
    out["node_id"] = 0
    values = out[list(POD_CATEGORIES)].to_numpy(np.float64)
    names = np.array(list(POD_CATEGORIES), dtype=object)
    # XProf sorts (time, name) ascending and takes the last: of equal times, the last name.
    by_name = np.argsort(names)[::-1]
    out["bottleneck"] = names[by_name][np.argmax(values[:, by_name], axis=1)]
    return out.sort_values(["step_num", "core_id"], kind="stable").reset_index(drop=True)[POD_COLUMNS]


__all__ = [
    "POD_CATEGORIES",
    "POD_COLUMNS",
    "HostPodSteps",
    "combine_pod_steps",
    "host_pod_steps",
    "pod_breakdown",
]
