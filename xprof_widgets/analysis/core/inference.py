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

* **Each request's breakdown** (`inference_stats.cc` `GenerateRequestDetailedBreakdown`,
  `RequestEventsToDetails`; XProf's inference profile): its device compute, transfers,
  host preprocessing (request start to its first `tpu::System::Execute`), host runtime
  (that execute to its program's launch), host postprocessing (its last
  `CompleteCallbacks`, else its programs' end, to its end), idle (none of these), each
  instant counted once for the highest kind.

Not reimplemented: TF Serving's session requests (`BatchingSessionRun`, `TfrtModelRun`,
`ServingModelRun`, `SessionRun`), batches (`ProcessBatch`), model ids, transfers seen only
as `tpu::System::Transfer...=>IssueEvent` / `Done` pairs, requests of a grouped file.
Times are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from .grouping import group_ids, is_grouped, of_line, step_events
from .planes import HOST_PLANE, TPU_PLANE_PREFIX
from .steps import _sweep

REQUEST_COLUMNS = [
    "request_id",
    "model_id",
    "begin_ps",
    "end_ps",
    "latency_ps",
    "device_ps",
    "transfer_ps",
    "host_preprocess_ps",
    "host_runtime_ps",
    "h2d_ps",
    "d2h_ps",
    "host_postprocess_ps",
    "idle_ps",
]
LATENCY_COLUMNS = ["percentile", "host_ms", "device_ms", "communication_ms", "total_ms"]
#: XProf's percentiles of the inference latency table (after its "Avg" row).
PERCENTILES = (50.0, 75.0, 90.0, 99.0, 99.9)
_TRANSFERS = ("ReadHbm", "TransferD2HRequest", "WriteHbm", "TransferH2DRequest", "TransferPreprocessedH2DRequest")


#: XProf's event types of a request's breakdown (`event_span.h`), higher winning where they
#: overlap: device compute, device to host, host to device, runtime, postprocess, preprocess.
DEVICE, D2H, H2D, RUNTIME, POSTPROCESS, PREPROCESS = 140, 130, 80, 50, 30, 20
_D2H = ("ReadHbm", "TransferD2HRequest")
_H2D = ("WriteHbm", "TransferH2DRequest", "TransferPreprocessedH2DRequest")
_EXECUTE = ("tpu::System::Execute",)
_LAUNCH = ("DoEnqueueProgram", "DoEnqueueContinuationProgram")
_CALLBACK = ("CompleteCallbacks",)


def no_requests() -> pd.DataFrame:
    """`host_requests`' table without rows."""
    return pd.DataFrame({c: pd.Series(dtype=object if c == "model_id" else np.int64) for c in REQUEST_COLUMNS})


def host_requests(space) -> pd.DataFrame:
    """The inference requests of one host file (see the module doc): request_id (the group),
    model_id, begin_ps / end_ps (its host events), latency_ps, and its time by XProf's kinds
    (`inference_stats.cc` `RequestEventsToDetails`): device_ps (its programs on the TPU),
    transfer_ps (h2d_ps + d2h_ps), host_preprocess_ps (request start to its first
    `tpu::System::Execute`), host_runtime_ps (that execute to its program's launch,
    `DoEnqueueProgram`), host_postprocess_ps (its last `CompleteCallbacks`, else its
    programs' end, to the request's end) and idle_ps (none of these), each span counted once
    by priority. Empty where no request root is found."""
    if is_grouped(space):
        return no_requests()
    roots = step_events(space)
    if roots.empty:
        return no_requests()
    names = roots["name"].astype(str)
    request = (roots["root_level"] == -1) | ((roots["root_level"] == 1) & names.str.startswith("ModelServerRequest_"))
    wanted = roots.loc[request, "group_id"].to_numpy(np.int64)
    if not len(wanted):
        return no_requests()
    groups = group_ids(space)
    found = set(wanted.tolist())
    begin = dict.fromkeys(found, np.iinfo(np.int64).max)
    end = dict.fromkeys(found, np.iinfo(np.int64).min)
    spans: list[tuple[int, int, int, int]] = []  # (request, begin, end, type)
    execute: dict[int, int] = {}  # the last execute's start (XProf sets it, event after event)
    launch: dict[int, int] = {}  # the earliest launch
    callback: dict[int, int] = {}  # the last callback's start
    for plane in space.planes:
        on_host = plane.name == HOST_PLANE
        if not (on_host or plane.name.startswith(TPU_PLANE_PREFIX)):
            continue
        for li, line in plane.busy_lines:
            if not on_host and line.name != "XLA Modules":
                continue
            g = of_line(groups, plane, li, -1)
            mine = np.flatnonzero(np.isin(g, wanted))
            if not len(mine):
                continue
            b = line.start_ps.astype(np.int64)[mine]
            e = b + line.event_duration_ps.astype(np.int64)[mine]
            gm = g[mine]
            if not on_host:  # the request's programs on the device (host clock, as XProf)
                spans.extend(zip(gm.tolist(), b.tolist(), e.tolist(), [DEVICE] * len(mine)))
                continue
            frame = pd.DataFrame({"g": gm, "b": b, "e": e}).groupby("g").agg(b=("b", "min"), e=("e", "max"))
            for gid, row in frame.iterrows():
                begin[gid] = min(begin[gid], int(row.b))
                end[gid] = max(end[gid], int(row.e))
            kinds = np.asarray(line.names().astype(object))[mine]
            for gid, name, bb, ee in zip(gm.tolist(), kinds.tolist(), b.tolist(), e.tolist()):
                if name in _D2H or name in _H2D:
                    spans.append((gid, bb, ee, D2H if name in _D2H else H2D))
                elif name in _EXECUTE:
                    execute[gid] = bb
                elif name in _LAUNCH:
                    launch[gid] = min(launch.get(gid, bb), bb)
                elif name in _CALLBACK:
                    callback[gid] = bb
    ids = [gid for gid in wanted.tolist() if begin[gid] <= end[gid] and end[gid] > begin[gid]]
    if not ids:
        return no_requests()
    device_end: dict[int, int] = {}
    for gid, _, ee, kind in spans:
        if kind == DEVICE:
            device_end[gid] = max(device_end.get(gid, ee), ee)
    for gid in ids:
        if gid in execute:
            spans.append((gid, begin[gid], max(execute[gid], begin[gid]), PREPROCESS))
            if gid in launch:
                spans.append((gid, execute[gid], max(launch[gid], execute[gid]), RUNTIME))
        post = callback.get(gid, device_end.get(gid))
        if post is not None:
            spans.append((gid, post, max(end[gid], post), POSTPROCESS))
    keep = [x for x in spans if x[0] in set(ids)]
    cols = np.array(keep, dtype=np.int64).reshape(-1, 4)
    order = np.argsort(cols[:, 0], kind="stable")
    cols = cols[order]
    swept, _ = _sweep(cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], -1)
    length = swept["end"] - swept["begin"]
    per = pd.DataFrame({"g": swept["group"], "label": swept["label"], "ps": length})
    per = per.groupby(["g", "label"])["ps"].sum().unstack(fill_value=0)

    def part(kind):
        return per[kind].reindex(ids, fill_value=0).to_numpy(np.int64) if kind in per else np.zeros(len(ids), np.int64)

    out = pd.DataFrame(
        {
            "request_id": ids,
            "model_id": "",
            "begin_ps": [begin[g] for g in ids],
            "end_ps": [end[g] for g in ids],
            "device_ps": part(DEVICE),
            "h2d_ps": part(H2D),
            "d2h_ps": part(D2H),
            "host_preprocess_ps": part(PREPROCESS),
            "host_runtime_ps": part(RUNTIME),
            "host_postprocess_ps": part(POSTPROCESS),
            "idle_ps": part(0),
        }
    )
    out["latency_ps"] = out["end_ps"] - out["begin_ps"]
    out["transfer_ps"] = out["h2d_ps"] + out["d2h_ps"]
    return out[REQUEST_COLUMNS]


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
