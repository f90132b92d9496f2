"""Inference requests as XProf finds them, and the overview's inference latency table.

XProf (`inference_stats.cc` `BuildRequestEventsMap`, `compute_inference_latency.cc`,
`op_stats_to_overview_page.cc`) on a run that trains nothing (no XLA program computes a
gradient):

* **Requests**: the groups (`grouping.step_events`) whose root is a host event with root
  level -1 (`jax.profiler.TraceAnnotation("Request", _r=-1)`, a server's request) or a
  `ModelServerRequest_...` event with root level 1. A request spans its group's host events:
  from the earliest start to the latest end of every host-plane event of the group.
* **Its device time**: the union of the group's `XLA Modules` events on the device planes
  (the programs it launched, reached through the launches' producer / consumer links);
  host-device transfers (`ReadHbm`, `TransferD2HRequest`, `WriteHbm`, `TransferH2DRequest`,
  `TransferPreprocessedH2DRequest` events of the group, where they do not overlap device
  compute) are its communication time; host time is the rest of its latency.
* **The table**: the requests sorted by latency; rows "Avg" (the means) and 50, 75, 90,
  99 and 99.9 % (the request at index int(p / 100 x n)): host, device, communication and
  total time (ms).

Not reimplemented: TF Serving's session requests (`BatchingSessionRun`, `TfrtModelRun`,
`ServingModelRun`, `SessionRun`), batches (`ProcessBatch`), requests without a group, and
XProf's inference profile tool (per-request breakdown into preprocessing, runtime,
postprocessing).
Times are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .device_time import device_timespans
from .grouping import group_ids, is_grouped, of_line, step_events
from .planes import HOST_PLANE, TPU_PLANE_PREFIX

REQUEST_COLUMNS = ["request_id", "model_id", "begin_ps", "end_ps", "latency_ps", "device_ps", "transfer_ps"]
LATENCY_COLUMNS = ["percentile", "host_ms", "device_ms", "communication_ms", "total_ms"]
#: XProf's percentiles of the inference latency table (after its "Avg" row).
PERCENTILES = (50.0, 75.0, 90.0, 99.0, 99.9)
_TRANSFERS = ("ReadHbm", "TransferD2HRequest", "WriteHbm", "TransferH2DRequest", "TransferPreprocessedH2DRequest")


def _union(begin, end):
    """Length of the union of spans, and the spans merged: (total, merged begins, ends)."""
    if not len(begin):
        return 0, begin, end
    order = np.argsort(begin, kind="stable")
    b, e = begin[order], end[order]
    reach = np.maximum.accumulate(e)
    new = np.ones(len(b), bool)
    new[1:] = b[1:] > reach[:-1]
    starts = b[new]
    ends = np.maximum.reduceat(e, np.flatnonzero(new))
    return int((ends - starts).sum()), starts, ends


def _overlap(begin, end, merged_begin, merged_end):
    """Time of spans [begin, end) inside the merged (sorted, disjoint) spans."""
    total = 0
    for b, e in zip(begin.tolist(), end.tolist()):
        i = np.searchsorted(merged_end, b, side="right")
        while i < len(merged_begin) and merged_begin[i] < e:
            total += min(e, merged_end[i]) - max(b, merged_begin[i])
            i += 1
    return total


def no_requests() -> pd.DataFrame:
    """`host_requests`' table without rows."""
    return pd.DataFrame({c: pd.Series(dtype=object if c == "model_id" else np.int64) for c in REQUEST_COLUMNS})


def host_requests(space) -> pd.DataFrame:
    """The inference requests of one host file (see the module doc): request_id (the group),
    model_id, begin_ps / end_ps (its host events), latency_ps, device_ps, transfer_ps. Empty
    where no request root is found."""
    empty = no_requests()
    if is_grouped(space):
        return empty
    roots = step_events(space)
    if roots.empty:
        return empty
    names = roots["name"].astype(str)
    request = (roots["root_level"] == -1) | ((roots["root_level"] == 1) & names.str.startswith("ModelServerRequest_"))
    roots = roots[request]
    if roots.empty:
        return empty
    wanted = roots["group_id"].to_numpy(np.int64)
    groups = group_ids(space)
    begin = dict.fromkeys(wanted.tolist(), np.iinfo(np.int64).max)
    end = dict.fromkeys(wanted.tolist(), np.iinfo(np.int64).min)
    device: dict[int, list] = {g: [] for g in wanted.tolist()}
    transfer: dict[int, list] = {g: [] for g in wanted.tolist()}
    for plane in space.planes:
        on_host = plane.name == HOST_PLANE
        on_device = plane.name.startswith(TPU_PLANE_PREFIX)
        if not (on_host or on_device):
            continue
        for li, line in plane.busy_lines:
            if on_device and line.name != "XLA Modules":
                continue
            g = of_line(groups, plane, li, -1)
            mine = np.flatnonzero(np.isin(g, wanted))
            if not len(mine):
                continue
            if on_host:
                b = line.start_ps.astype(np.int64)[mine]
                e = b + line.event_duration_ps.astype(np.int64)[mine]
                frame = pd.DataFrame({"g": g[mine], "b": b, "e": e}).groupby("g").agg(b=("b", "min"), e=("e", "max"))
                for gid, row in frame.iterrows():
                    begin[gid] = min(begin[gid], int(row.b))
                    end[gid] = max(end[gid], int(row.e))
                names_ = np.asarray(line.names().astype(object))[mine]
                moving = np.isin(names_, _TRANSFERS)
                for gid, bb, ee in zip(g[mine][moving], b[moving], e[moving]):
                    transfer[int(gid)].append((bb, ee))
            else:
                db, dd = device_timespans(line)
                for gid, bb, ee in zip(g[mine], db[mine], db[mine] + dd[mine]):
                    device[int(gid)].append((bb, ee))
    rows = []
    for gid in wanted.tolist():
        if begin[gid] > end[gid]:
            continue
        d = np.array(device[gid], dtype=np.int64).reshape(-1, 2)
        dev_ps, mb, me = _union(d[:, 0], d[:, 1])
        t = np.array(transfer[gid], dtype=np.int64).reshape(-1, 2)
        moved, tb, te = _union(t[:, 0], t[:, 1])
        moved -= _overlap(tb, te, mb, me)  # device compute first, as XProf's priorities
        rows.append((gid, "", begin[gid], end[gid], end[gid] - begin[gid], dev_ps, moved))
    out = pd.DataFrame(rows, columns=REQUEST_COLUMNS)
    return out[out["latency_ps"] > 0].reset_index(drop=True)


def inference_latency(requests: pd.DataFrame) -> pd.DataFrame:
    """XProf's inference latency table (see the module doc) of requests (`host_requests`'
    rows, every host's): rows "Avg", "50.0%", ..., "99.9%"; empty without requests."""
    if requests.empty:
        return pd.DataFrame(columns=LATENCY_COLUMNS)
    r = requests.sort_values("latency_ps", kind="stable")
    total = r["latency_ps"].to_numpy(np.float64) / 1e9
    device = r["device_ps"].to_numpy(np.float64) / 1e9
    comm = r["transfer_ps"].to_numpy(np.float64) / 1e9
    host = total - device - comm
    n = len(r)
    rows = [("Avg", host.mean(), device.mean(), comm.mean(), total.mean())]
    for p in PERCENTILES:
        i = min(int(p / 100 * n), n - 1)
        rows.append((f"{p:.1f}%", host[i], device[i], comm[i], total[i]))
    return pd.DataFrame(rows, columns=LATENCY_COLUMNS)
