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

* **Tensor patterns** (`GenerateTensorDetails`): the host's `Linearize`, `Delinearize` and
  `TransferBufferFromDevice-FastPath` events (the TPU runtime turning tensors into the
  device's layout and back) of a request's group, else of a batch's: their
  "NAME SHAPE LAYOUT" (the events' own `shape` / `layout` stats) sorted and joined by
  "<br>", none where one lacks either; their durations summed.
* **Batching parameters** (`ParseTfstreamzForBatchingParameter`): the second of exactly two
  snapshots of the `/host:tfstreamz` plane's first line, its
  `/tensorflow/serving/batching/PARAM{model_name=M, ...}` stats (integers: int64 values
  only), for the model ids `M` and `M:<version>` of the host's requests.

Also TF Serving's session requests (`BatchingSessionRun`, `TfrtModelRun`, `ServingModelRun`,
`SessionRun`) and their batches (`ProcessBatch`), with model ids. Not reimplemented:
transfers seen only as `tpu::System::Transfer...=>IssueEvent` / `Done` pairs, requests of a
grouped file. Times are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .cache import derived
from .grouping import group_ids, group_links, is_grouped, of_line, of_line_at, step_events
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
#: Beyond XProf's breakdown: the request's size, its wait for its batch, its batch formation
#: time, and the padded sizes of its batches (of its model).
_EXTRA_COLUMNS = ["size", "delay_ps", "formation_ps", "bucket_sizes", "tensor_pattern", "tensor_ps"]
_PROGRAM = re.compile(r"\((\d+)\)$")
LATENCY_COLUMNS = ["percentile", "host_ms", "device_ms", "communication_ms", "total_ms"]
#: XProf's percentiles of the inference latency table (after its "Avg" row).
PERCENTILES = (50.0, 75.0, 90.0, 99.0, 99.9)
_TRANSFERS = ("ReadHbm", "TransferD2HRequest", "WriteHbm", "TransferH2DRequest", "TransferPreprocessedH2DRequest")


#: XProf's event types of a request's breakdown (`event_span.h`), higher winning where they
#: overlap: device compute, device to host, host to device, runtime, postprocess, preprocess.
DEVICE, D2H, H2D, RUNTIME, BATCH_FORMATION, POSTPROCESS, PREPROCESS = 140, 130, 80, 50, 40, 30, 20
_D2H = ("ReadHbm", "TransferD2HRequest")
_H2D = ("WriteHbm", "TransferH2DRequest", "TransferPreprocessedH2DRequest")
_EXECUTE = ("tpu::System::Execute",)
_LAUNCH = ("DoEnqueueProgram", "DoEnqueueContinuationProgram")
_CALLBACK = ("CompleteCallbacks",)


def no_requests() -> pd.DataFrame:
    """`host_requests`' table without rows."""
    return pd.DataFrame(
        {
            c: pd.Series(dtype=object if c in ("model_id", "bucket_sizes", "tensor_pattern") else np.int64)
            for c in [*REQUEST_COLUMNS, *_EXTRA_COLUMNS]
        }
    )


def host_requests(space) -> pd.DataFrame:
    """The inference requests of one host file (`host_inference`'s first table)."""
    return host_inference(space)[0]


_PROCESS_BATCH = ("ProcessBatch", "OrbaxServing::ProcessBatch")
#: XProf's request event types, the first the file has winning (else user-defined roots).
_REQUEST_TYPES = (("BatchingSessionRun",), ("TfrtModelRun",), ("ServingModelRun",), ("SessionRun", "RunGraph"))
_MODEL_EVENTS = ("SessionRun", "TfrtModelRun", "ServingModelRun")
_SCHEDULE = ("ScheduleWithSplit", "ScheduleWithoutSplit", "ScheduleWithEagerSplit", "ASBSQueue::Schedule")
_PADDING = ("ConcatInputTensors", "OrbaxServing::ConcatInputBuffers", "MergeInputTensors", "BrainSessionRun")
_EXECUTE_ALL = (
    "tpu::System::Execute",
    "TpuPartitionedCall::ExecuteLocal",
    "TpuPartitionedCall::ExecuteRemote",
    "TpuPartitionedCall::InitializeVarOnTpu",
)
_U64 = 1 << 64
BATCH_COLUMNS = [
    "batch_id",
    "model_id",
    "begin_ps",
    "end_ps",
    "latency_ps",
    "padding",
    "size",
    "efficiency",
    "delay_ps",
    "device_ps",
    "program_ids",
    "tensor_pattern",
    "tensor_ps",
]


def no_batches() -> pd.DataFrame:
    """`host_inference`'s batch table without rows."""
    return pd.DataFrame(
        {
            c: pd.Series(dtype=object if c in ("model_id", "program_ids", "tensor_pattern") else np.int64)
            for c in BATCH_COLUMNS
        }
    )


def _host_events(space, groups, also=()):
    """The host plane's events with a group: DataFrame (group, name, begin, end, model_id,
    size, padding, padded, r), in line then event order (XProf's iteration)."""
    plane = space.plane(HOST_PLANE)
    frames = []
    if plane is None:
        return None
    names_wanted = ["model_id", "batching_input_task_size", "padding_amount", "batch_size_after_padding"]
    read = [*_MODEL_EVENTS, *_SCHEDULE, *_PADDING, *also]
    for li, line in plane.busy_lines:
        g = of_line(groups, plane, li, -1)
        mine = np.flatnonzero(g >= 0)
        if not len(mine):
            continue
        b = line.start_ps.astype(np.int64)[mine]
        shown = line.names()
        cats = np.asarray(shown.categories.astype(object))
        codes = np.asarray(shown.codes)[mine]
        names = np.where(codes >= 0, cats[np.maximum(codes, 0)] if len(cats) else None, None)
        frame = pd.DataFrame(
            {"group": g[mine], "name": names, "begin": b, "end": b + line.event_duration_ps.astype(np.int64)[mine]}
        )
        # The events whose stats are read, decided per name (a line holds few names).
        wanted = np.isin(cats, read) | np.array([str(c).startswith("ModelServerRequest_") for c in cats], dtype=bool)
        special = (codes >= 0) & wanted[np.maximum(codes, 0)] if len(cats) else np.zeros(len(codes), bool)
        for col in names_wanted:
            frame[col] = None
        if special.any():
            st = line.stat_columns(names=names_wanted, events=mine[special])
            for col in names_wanted:
                if col in st:
                    frame.loc[special, col] = list(st[col])
        frames.append(frame)
    return pd.concat(frames, ignore_index=True) if frames else None


def host_inference(space) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The inference requests and batches of one host file (`_host_inference`), computed
    once per file."""
    return derived(space, "inference", lambda: _host_inference(space))


def _host_inference(space) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The inference requests and batches of one host file (see the module doc):
    (requests: REQUEST_COLUMNS and size, delay_ps, formation_ps, bucket_sizes (the padded
    sizes of its batches of its own model); batches: BATCH_COLUMNS). Empty where no request
    root is found."""
    if is_grouped(space):
        return no_requests(), no_batches()
    roots = step_events(space)
    if roots.empty:
        return no_requests(), no_batches()
    groups = group_ids(space)
    rnames = roots["name"].astype(str)
    # User-defined roots: root level -1, or 1 named ModelServerRequest_...
    user = roots[
        (roots["root_level"] == -1) | ((roots["root_level"] == 1) & rnames.str.startswith("ModelServerRequest_"))
    ]
    plane = space.plane(HOST_PLANE)
    present = set(plane.metadata_names[1].tolist()) if plane is not None else set()
    if user.empty and not present & {n for kinds in _REQUEST_TYPES for n in kinds}:
        return no_requests(), no_batches()  # (no request root nor request event: nothing to read)
    host = _host_events(space, groups, also=sorted(set(user["name"].astype(str))))
    if host is None:
        return no_requests(), no_batches()
    links = group_links(space)
    children: dict[int, list[int]] = {}
    parents: dict[int, list[int]] = {}
    for p, c in zip(links["parent"].tolist(), links["child"].tolist()):
        children.setdefault(p, []).append(c)
        parents.setdefault(c, []).append(p)
    names = host["name"]
    batch_rows = host[names.isin(_PROCESS_BATCH)]
    batch_groups = set(batch_rows["group"].tolist())
    user_groups = user["group_id"].astype(np.int64).tolist()
    # Model ids by group: the model events', then the user roots' own.
    model_of: dict[int, str] = {}
    has_model = host["model_id"].notna()
    for g, m in zip(
        host.loc[has_model & names.isin(_MODEL_EVENTS), "group"],
        host.loc[has_model & names.isin(_MODEL_EVENTS), "model_id"],
    ):
        model_of[int(g)] = str(m)
    user_set = set(user_groups)
    root_names = set(rnames[rnames.index.isin(user.index)].tolist())
    for g, m, n in zip(host.loc[has_model, "group"], host.loc[has_model, "model_id"], host.loc[has_model, "name"]):
        if int(g) in user_set and n in root_names:
            model_of[int(g)] = str(m)
    # The requests: events of the first request type the file has, then the user roots.
    present = set(names.unique().tolist())
    kinds = next((k for k in _REQUEST_TYPES if present & set(k)), ())
    batching = kinds == ("BatchingSessionRun",)
    order: list[int] = []
    seen: set[int] = set()
    for g in host.loc[names.isin(kinds), "group"].tolist() + user_groups:
        if g in batch_groups or g in seen:
            continue
        seen.add(g)
        order.append(int(g))
    if not order:
        return no_requests(), no_batches()
    models: list[str] = []  # XProf's model database, in order of first use
    request_model: dict[int, str] = {}
    for g in order:
        kids = sorted(children.get(g, []))
        if batching:
            model = model_of.get(kids[0], "") if kids else ""
        elif g in user_set and g not in model_of:
            found = {model_of.get(k, "") for k in kids}
            model = found.pop() if len(found) == 1 else ""
        else:
            model = model_of.get(g, "")
        request_model[g] = model
        if model and model not in models:
            models.append(model)
    wanted = set(order)
    mine = host[host["group"].isin(wanted)]
    span = mine.groupby("group").agg(begin=("begin", "min"), end=("end", "max"))
    begin = span["begin"].to_dict()
    end = span["end"].to_dict()
    size = {}
    for g, v in zip(
        mine.loc[mine["name"].isin(_SCHEDULE), "group"],
        mine.loc[mine["name"].isin(_SCHEDULE), "batching_input_task_size"],
    ):
        if v is not None and not pd.isna(v):
            size[int(g)] = int(v)
    # The batches: each ProcessBatch event's own span; padding from its group's events.
    batches: dict[int, dict] = {}
    for g, b, e in zip(batch_rows["group"].tolist(), batch_rows["begin"].tolist(), batch_rows["end"].tolist()):
        batches[int(g)] = {"begin": int(b), "end": int(e), "padding": 0, "size": 0}
    pads = host[names.isin(_PADDING) & host["group"].isin(batch_groups)]
    for kind in _PADDING:
        of_kind = pads[pads["name"] == kind]
        for g, pa, sz in zip(of_kind["group"], of_kind["padding_amount"], of_kind["batch_size_after_padding"]):
            if pa is not None and sz is not None and not pd.isna(pa) and not pd.isna(sz):
                batches[int(g)].update(padding=int(pa), size=int(sz))
    # Device time of groups, and the spans and times XProf reads per source group.
    related = {g: [g, *sorted(children.get(g, []))] for g in order}
    keys = set().union(*related.values()) | batch_groups
    typed: dict[int, list] = {}
    device_spans: dict[int, list] = {}
    programs: dict[int, set] = {}
    for plane in space.planes:
        if not plane.name.startswith(TPU_PLANE_PREFIX):
            continue
        for li, line in plane.busy_lines:
            if line.name != "XLA Modules":
                continue
            g = of_line(groups, plane, li, -1)
            at = np.flatnonzero(np.isin(g, list(keys)))
            if not len(at):
                continue
            b = line.start_ps.astype(np.int64)[at]
            e = b + line.event_duration_ps.astype(np.int64)[at]
            mods = np.asarray(line.names().astype(object))[at]
            for gid, bb, ee, name in zip(g[at].tolist(), b.tolist(), e.tolist(), mods.tolist()):
                typed.setdefault(gid, []).append((bb, ee, DEVICE))
                device_spans.setdefault(gid, []).append((bb, ee))
                program = _PROGRAM.search(str(name))
                if program:
                    programs.setdefault(gid, set()).add(int(program.group(1)))
    stamps: dict[int, dict] = {}
    in_keys = host[host["group"].isin(keys)]
    for gid, name, b, e in zip(
        in_keys["group"].tolist(), in_keys["name"].tolist(), in_keys["begin"].tolist(), in_keys["end"].tolist()
    ):
        if name in _D2H or name in _H2D:
            typed.setdefault(gid, []).append((b, e, D2H if name in _D2H else H2D))
        d = stamps.setdefault(gid, {})
        if name in _EXECUTE_ALL:
            d["exec"] = b
        elif name in _LAUNCH:
            d["launch"] = min(d.get("launch", b), b)
        elif name in _CALLBACK:
            d["callback"] = b
        elif name in _SCHEDULE:
            d["schedule"] = b
        elif name in _PADDING:
            d["concat"] = b
    # Delays (XProf's: a request's "first" and "last" batch are both its smallest batch id).
    delay = {}
    for g in order:
        if g not in begin:
            continue
        known = [k for k in sorted(children.get(g, [])) if k in batches]
        delay[g] = 0
        if known:
            first = batches[known[0]]
            delay[g] = (first["begin"] - begin[g]) % _U64
            if end[g] < first["end"]:
                end[g] = first["end"]
    batch_model: dict[int, str] = {}
    for bid, bd in batches.items():
        reqs = sorted(parents.get(bid, []))
        mine_r = [r for r in reqs if r in begin]
        bd["delay"] = (bd["begin"] - min(begin[r] for r in mine_r)) % _U64 if mine_r else 0
        lead = reqs[0] if reqs else None
        batch_model[bid] = (
            request_model[lead] if lead is not None and lead in request_model else (models[0] if models else "")
        )
    ids = [g for g in order if g in begin and end[g] > begin[g]]
    if not ids:
        return no_requests(), no_batches()
    # Each request's breakdown: its own spans and its batches', then the host's parts.
    spans: list[tuple[int, int, int, int]] = []
    for g in ids:
        execs, concats, callbacks = [], [], []
        for key in related[g]:
            spans.extend((g, b, e, t) for b, e, t in typed.get(key, ()))
            d = stamps.get(key, {})
            if "exec" in d:
                execs.append(d["exec"])
                if "launch" in d:
                    spans.append((g, d["exec"], max(d["launch"], d["exec"]), RUNTIME))
            if "concat" in d:
                concats.append(d["concat"])
            if "callback" in d:
                callbacks.append(d["callback"])
        if execs:
            spans.append((g, begin[g], max(min(execs), begin[g]), PREPROCESS))
        if callbacks:
            post = max(callbacks)
            spans.append((g, post, max(end[g], post), POSTPROCESS))
        else:
            ends = [e for key in related[g] for _, e, t in typed.get(key, ()) if t == DEVICE]
            post = max(ends, default=0)
            if post:
                spans.append((g, post, max(end[g], post), POSTPROCESS))
        own = stamps.get(g, {})
        if "schedule" in own and concats:
            spans.append((g, own["schedule"], max(min(concats), own["schedule"]), BATCH_FORMATION))
    cols = np.array(spans, dtype=np.int64).reshape(-1, 4)
    cols = cols[np.argsort(cols[:, 0], kind="stable")]
    swept, _ = _sweep(cols[:, 0], cols[:, 1], cols[:, 2], cols[:, 3], -1)
    per = pd.DataFrame({"g": swept["group"], "label": swept["label"], "ps": swept["end"] - swept["begin"]})
    per = per.groupby(["g", "label"])["ps"].sum().unstack(fill_value=0)

    def part(kind):
        return per[kind].reindex(ids, fill_value=0).to_numpy(np.int64) if kind in per else np.zeros(len(ids), np.int64)

    requests = pd.DataFrame(
        {
            "request_id": ids,
            "model_id": [request_model[g] for g in ids],
            "begin_ps": [begin[g] for g in ids],
            "end_ps": [end[g] for g in ids],
            "device_ps": part(DEVICE),
            "h2d_ps": part(H2D),
            "d2h_ps": part(D2H),
            "host_preprocess_ps": part(PREPROCESS),
            "host_runtime_ps": part(RUNTIME),
            "host_postprocess_ps": part(POSTPROCESS),
            "idle_ps": part(0),
            "formation_ps": part(BATCH_FORMATION),
            "size": [size.get(g, 0) for g in ids],
            "delay_ps": [int(delay.get(g, 0)) for g in ids],
            "bucket_sizes": [
                tuple(
                    batches[k]["size"]
                    for k in sorted(children.get(g, []))
                    if k in batches and batch_model[k] == request_model[g]
                )
                for g in ids
            ],
        }
    )
    tensors = _tensor_details(space, groups, set(order), set(batches))
    requests["tensor_pattern"] = [tensors.get(g, ("", 0))[0] for g in ids]
    requests["tensor_ps"] = [tensors.get(g, ("", 0))[1] for g in ids]
    requests["latency_ps"] = requests["end_ps"] - requests["begin_ps"]
    requests["transfer_ps"] = requests["h2d_ps"] + requests["d2h_ps"]
    rows = []
    for bid in sorted(batches):
        bd = batches[bid]
        device = _union(device_spans.get(bid, []))
        eff = (bd["size"] - bd["padding"]) / bd["size"] if bd["size"] else 0.0
        rows.append(
            (
                bid,
                batch_model[bid],
                bd["begin"],
                bd["end"],
                bd["end"] - bd["begin"],
                bd["padding"],
                bd["size"],
                eff,
                int(bd["delay"]),
                device,
                tuple(sorted(programs.get(bid, ()))),
                *tensors.get(bid, ("", 0)),
            )
        )
    out_batches = pd.DataFrame(rows, columns=BATCH_COLUMNS) if rows else no_batches()
    return requests[[*REQUEST_COLUMNS, *_EXTRA_COLUMNS]], out_batches


#: The TPU runtime's host events that move a tensor into the device's layout and back.
TENSOR_EVENTS = ("Linearize", "Delinearize", "TransferBufferFromDevice-FastPath")


def _tensor_details(space, groups, requests: set, batches: set) -> dict:
    """{group: (tensor pattern, time ps)} of the requests' and batches' tensor events (see
    the module doc): an event counts for its own group where that is a request's, else a
    batch's; a group with an event lacking `shape` or `layout` has no pattern."""
    plane = space.plane(HOST_PLANE)
    parts: dict[int, list] = {}
    time: dict[int, int] = {}
    broken: set[int] = set()
    if plane is None or not set(plane.metadata_names[1].tolist()) & set(TENSOR_EVENTS):
        return {}
    for li, line in plane.busy_lines:
        shown = line.names()
        cats = np.asarray(shown.categories.astype(object))
        wanted = np.isin(cats, TENSOR_EVENTS)
        if not wanted.any():
            continue
        codes = np.asarray(shown.codes)
        at = np.flatnonzero((codes >= 0) & wanted[np.maximum(codes, 0)])
        g = of_line_at(groups, plane, li, at, -1)
        mine = np.isin(g, list(requests | batches))
        at, g = at[mine], g[mine]
        if not len(at):
            continue
        st = line.stat_columns(names=["shape", "layout"], events=at, metadata=False)  # (their own stats)
        shape = st.get("shape", np.full(len(at), None, object))
        layout = st.get("layout", np.full(len(at), None, object))
        dur = line.event_duration_ps.astype(np.int64)[at]
        for gid, name, sh, lay, d in zip(g.tolist(), cats[codes[at]].tolist(), shape, layout, dur.tolist()):
            if sh is None or lay is None or pd.isna(sh) or pd.isna(lay):
                broken.add(gid)
                continue
            parts.setdefault(gid, []).append(f"{name} {sh} {lay}")
            time[gid] = time.get(gid, 0) + d
    return {g: ("<br>".join(sorted(p)), time[g]) for g, p in parts.items() if g not in broken}


TFSTREAMZ_PLANE = "/host:tfstreamz"
_BATCHING = "/tensorflow/serving/batching/"
#: TF Serving's batching parameters XProf shows (`BatchingParameters`), by metric name.
BATCHING_PARAMS = (
    "num_batch_threads",
    "batch_timeout_micros",
    "max_batch_size",
    "max_enqueued_batches",
    "allowed_batch_sizes",
)


def host_batching_params(space) -> dict:
    """{model id: {parameter: value}} of one host file (see the module doc): the model ids of
    its requests that TF Serving's batching metrics name; a parameter it did not record is 0
    (the allowed batch sizes ""). Once per file."""
    return derived(space, "batching_params", lambda: _host_batching_params(space))


def _host_batching_params(space) -> dict:
    plane = space.plane(TFSTREAMZ_PLANE)
    if plane is None or not plane.lines or len(plane.lines[0]) != 2:
        return {}
    ids = {str(m) for m in host_inference(space)[0]["model_id"].tolist() if m}
    if not ids:
        return {}
    line = plane.lines[0]
    metrics = sorted((sid, name) for sid, name in plane.stat_names.items() if str(name).startswith(_BATCHING))
    table = line.stat_table(names={name for _, name in metrics}, events=[1])  # the second snapshot
    by_model: dict[str, dict] = {}
    for _, name in metrics:  # (in the writer's order: a later op's value wins)
        rest = name[len(_BATCHING) :]
        param = next((p for p in BATCHING_PARAMS if rest.startswith(p)), None)
        model = _model_label(rest)
        if param is None or model is None:
            continue
        value: int | str
        if param == "allowed_batch_sizes":
            _, values = table.strings(name)
            if not len(values):
                continue
            value = str(values[0])
        else:
            events, ints, uint = table.own_ints(name)
            if not len(events):
                continue
            value = 0 if uint[0] else int(ints[0])  # (XProf reads int64 values only)
        params = by_model.setdefault(model, {p: ("" if p == "allowed_batch_sizes" else 0) for p in BATCHING_PARAMS})
        params[param] = value
    out = {}
    for model_id in sorted(ids):
        name, _, version = model_id.rpartition(":")
        if not name:
            name = model_id
        elif not _is_int(version):
            continue  # (XProf: an id it cannot parse matches no model)
        if name in by_model:
            out[model_id] = dict(by_model[name])
    return out


def _model_label(rest: str) -> str | None:
    """The `model_name` label of a metric point's `{label=value, ...}`, None without one."""
    lo, hi = rest.find("{"), rest.rfind("}")
    if lo < 0 or hi < lo:
        return None
    for label in rest[lo + 1 : hi].split(", "):
        kv = label.split("=")
        if len(kv) == 2 and kv[0] == "model_name":
            return kv[1]
    return None


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _union(spans) -> int:
    """Total length of the union of (begin, end) spans."""
    total, cur_b, cur_e = 0, None, None
    for b, e in sorted(spans):
        if cur_e is None or b > cur_e:
            if cur_e is not None:
                total += cur_e - cur_b
            cur_b, cur_e = b, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_b
    return total


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
