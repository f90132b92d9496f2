"""Training steps as XProf finds them, with the time breakdown of each step.

XProf (`xplane_to_step_events.cc`, `event_span.cc`,
`step_events_to_steps_db.cc`) turns the grouped host events of each step
(`group_id`, see `grouping`) into a step table:

1. **Step time**: the longest *step marker* of the group. Markers are events
   named `train...`, `test...` or `TraceContext...` without a `/` (explicit
   markers, e.g. `jax.profiler.StepTraceAnnotation("train", step_num=i)`) and
   the group's root event (implicit marker: grouping gives it a step name).
2. **Events**: every other grouped host event that is real computation (not
   `EagerExecute*`, `EagerLocalExecute*`, `EagerKernelExecute*`,
   `FunctionRun*`) gets a type: `MemcpyHToD` / `InfeedEnqueue*` ops are
   host-to-device, `MemcpyHToH` host-to-host, `IteratorGetNext*` waiting for
   input, anything else host compute. XProf's host converter never sees a
   device here (kernel launch is a GPU-only type).
3. **Breakdown**: overlapping events are resolved by priority (waiting for
   input > host-to-device > host-to-host > host compute), each instant of the
   step counted once under the highest type active then; time covered by no
   event is "all others" (XProf's unknown time). Events are clipped to the
   step's span.
4. **Steps kept**: only well-formed steps (with a step marker and some host
   compute, for a CPU-only run), sorted by group id; with more than 5 of
   them the first and the last are dropped as probably partial.

The priority sweep is done without a loop over events: the time of type t is
|union of events of types >= t| - |union of types > t|, per step, and a
union's length is a sort plus a running maximum.

Not reimplemented: GPU and TPU device steps (device events, the `Step`
line), `input_pipeline_stage_name` stats (newer tf.data root stages),
and a host that has several hosts' steps (XProf combines hosts by step).
Times are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .grouping import HOST_PLANE, group_ids, step_events

# XProf's `EventType` priorities (higher wins where events overlap).
UNKNOWN_TIME = 0
HOST_COMPUTE = 10
HOST_COMPILE = 60
HOST_TO_HOST = 70
HOST_TO_DEVICE = 80
HOST_PREPARE = 90
DEVICE_COLLECTIVES = 100
HOST_WAIT_INPUT = 110
DEVICE_TO_DEVICE = 120
DEVICE_TO_HOST = 130
DEVICE_COMPUTE_32 = 140
DEVICE_COMPUTE_16 = 150
DEVICE_WAIT_DEVICE = 160
DEVICE_WAIT_HOST = 170

#: With more steps than this XProf drops the first and the last (partial) step.
DROP_PARTIAL_STEPS_ABOVE = 5

#: Breakdown columns of the step table (ms), XProf's `PerGenericStepDetails`:
#: column -> event types summed into it.
BREAKDOWN_COLUMNS = {
    "device_compute_ms": (DEVICE_COMPUTE_16, DEVICE_COMPUTE_32),
    "device_to_device_ms": (DEVICE_TO_DEVICE, DEVICE_WAIT_DEVICE),
    "device_collectives_ms": (DEVICE_COLLECTIVES,),
    "host_compute_ms": (HOST_COMPUTE,),
    "kernel_launch_ms": (HOST_PREPARE,),
    "input_ms": (HOST_WAIT_INPUT, HOST_TO_DEVICE, DEVICE_WAIT_HOST),
    "output_ms": (DEVICE_TO_HOST,),
    "compilation_ms": (HOST_COMPILE,),
    "all_others_ms": (UNKNOWN_TIME,),
}
#: The breakdown columns as people read them.
BREAKDOWN_LABELS = {
    "device_compute_ms": "Device compute",
    "device_to_device_ms": "Device to device",
    "device_collectives_ms": "Collectives",
    "host_compute_ms": "Host compute",
    "kernel_launch_ms": "Kernel launch",
    "input_ms": "Input",
    "output_ms": "Output",
    "compilation_ms": "Compilation",
    "all_others_ms": "All others",
}
#: The parts of the input column, kept apart for the summary.
INPUT_PARTS = {
    "wait_input_ms": (HOST_WAIT_INPUT,),
    "host_to_device_ms": (HOST_TO_DEVICE, DEVICE_WAIT_HOST),
    # The parts of device compute, for the overview's 16/32-bit precision.
    "device_compute_16bit_ms": (DEVICE_COMPUTE_16,),
    "device_compute_32bit_ms": (DEVICE_COMPUTE_32,),
}

STEP_COLUMNS = (["step_number", "step_name", "group_id", "begin_ps", "step_time_ms"]
                + list(BREAKDOWN_COLUMNS) + list(INPUT_PARTS))

_EXPLICIT_MARKER = re.compile(r"^(train|test|TraceContext)[^/]*$")
_NOT_REAL_COMPUTE = ("EagerExecute", "EagerLocalExecute", "EagerKernelExecute", "FunctionRun")
_PS_PER_MS = 1e9


def is_step_marker_name(names):
    """True where a name is an explicit host step marker (`train...`, `test...`,
    `TraceContext...`, no `/`). `names`: array-like of str."""
    return np.array([bool(_EXPLICIT_MARKER.match(n)) for n in names], dtype=bool)


def _op_type(name):
    """The type of a TF op name `scope/name:Type` (or the name itself)."""
    return name.rsplit(":", 1)[-1] if ":" in name else name


def host_event_type(names):
    """XProf's event type of host events by name (`ClassifyCpuEvent` for a
    host without device). Names that are markers or not real compute are -1
    (not counted). `names`: array-like of str; returns int64 array."""
    out = np.empty(len(names), dtype=np.int64)
    for i, n in enumerate(names):  # over distinct names, not events
        if _EXPLICIT_MARKER.match(n) or n.startswith(_NOT_REAL_COMPUTE):
            out[i] = -1
        elif n.lower().startswith("memcpyhtod") or _op_type(n).startswith("InfeedEnqueue"):
            out[i] = HOST_TO_DEVICE
        elif n.lower().startswith("memcpyhtoh"):
            out[i] = HOST_TO_HOST
        elif n.lower().startswith("iteratorgetnext"):
            out[i] = HOST_WAIT_INPUT
        else:
            out[i] = HOST_COMPUTE
    return out


def _host_events(space, roots):
    """Grouped host events as columns: group, start, end (ps), type, marker."""
    plane = next((p for p in space.planes if p.name == HOST_PLANE), None)
    groups = group_ids(space)
    cols = {k: [] for k in ("group", "start", "end", "type", "marker")}
    if plane is None:
        return {k: np.zeros(0, np.int64) for k in cols}
    roots = roots[roots["plane"] == HOST_PLANE] if len(roots) else roots
    for li, line in enumerate(plane.lines):
        gid = groups.get((HOST_PLANE, li))
        if gid is None or not len(line):
            continue
        idx = np.flatnonzero(gid >= 0)
        if not len(idx):
            continue
        names = line.names()
        cats = np.asarray(names.categories, dtype=object)
        codes = np.asarray(names.codes)[idx]
        ev_type = host_event_type(cats)[codes]
        marker = is_step_marker_name(cats)[codes]
        # The root carries the step name: an implicit marker.
        r_event = roots["event"][roots["line"] == li].to_numpy(np.int64) if len(roots) else np.zeros(0, np.int64)
        pos = np.searchsorted(idx, r_event)
        ok = pos < len(idx)
        ok[ok] = idx[pos[ok]] == r_event[ok]
        marker[pos[ok]] = True
        start = line.start_ps[idx]
        cols["group"].append(gid[idx])
        cols["start"].append(start)
        cols["end"].append(start + line.event_duration_ps[idx])
        cols["type"].append(np.where(marker, -1, ev_type))
        cols["marker"].append(marker)
    return {k: (np.concatenate(v) if v else np.zeros(0, np.int64)) for k, v in cols.items()}


def union_length(group, start, end):
    """Length of the union of intervals per group: {group: ps} as a Series.

    Vectorised: sort by (group, start); an interval adds what it reaches past
    the furthest end of the earlier intervals of its group.
    """
    if not len(group):
        return pd.Series(dtype=np.int64)
    order = np.lexsort((start, group))
    g, s, e = group[order], start[order], end[order]
    reach = pd.Series(e).groupby(g).cummax().to_numpy()
    prev = np.empty_like(reach)
    prev[0] = np.iinfo(np.int64).min
    prev[1:] = reach[:-1]
    first = np.ones(len(g), bool)
    first[1:] = g[1:] != g[:-1]
    prev[first] = np.iinfo(np.int64).min
    added = np.clip(e - np.maximum(s, prev), 0, None)
    return pd.Series(added).groupby(g).sum()


def _breakdown(ev, steps):
    """Time per event type per step (ps): DataFrame indexed by group id."""
    span = steps.set_index("group_id")[["begin_ps", "end_ps"]]
    keep = (ev["type"] >= 0) & np.isin(ev["group"], span.index.to_numpy())
    g = ev["group"][keep]
    lo = span["begin_ps"].reindex(g).to_numpy()
    hi = span["end_ps"].reindex(g).to_numpy()
    s = np.maximum(ev["start"][keep], lo)
    e = np.minimum(ev["end"][keep], hi)
    t = ev["type"][keep]
    inside = e > s
    g, s, e, t = g[inside], s[inside], e[inside], t[inside]
    types = np.unique(t)
    # covered[k]: union of events of types >= types[k]
    covered = [union_length(g[t >= ty], s[t >= ty], e[t >= ty]).reindex(span.index, fill_value=0)
               for ty in types]
    out = pd.DataFrame(index=span.index)
    for k, ty in enumerate(types):
        above = covered[k + 1] if k + 1 < len(types) else 0
        out[int(ty)] = covered[k] - above
    total = covered[0] if len(types) else 0
    out[UNKNOWN_TIME] = (span["end_ps"] - span["begin_ps"]) - total
    # Well-formed (CPU only): the step has host compute (XProf: the type
    # appears in the step's breakdown at all).
    has = pd.Series(False, index=span.index)
    hc = ev["group"][ev["type"] == HOST_COMPUTE]
    has[np.intersect1d(hc, span.index.to_numpy())] = True
    out["well_formed"] = has
    return out


def host_steps(space, drop_partial=True) -> pd.DataFrame:
    """The steps of one host (CPU-only run), as XProf's step database.

    One row a step, sorted by group id. Columns: step_number (the group id,
    XProf's step number), step_name (e.g. "train 3", what XProf shows),
    group_id, begin_ps (absolute), step_time_ms, then the breakdown in ms:
    device_compute_ms, device_to_device_ms, device_collectives_ms,
    host_compute_ms, kernel_launch_ms, input_ms (wait for input +
    host-to-device), output_ms, compilation_ms, all_others_ms, and the parts
    of input: wait_input_ms, host_to_device_ms. The breakdown columns add up
    to step_time_ms.
    """
    roots = step_events(space)
    ev = _host_events(space, roots)
    if not len(ev["group"]) or not ev["marker"].any():
        return pd.DataFrame(columns=STEP_COLUMNS)
    m = ev["marker"]
    marks = pd.DataFrame({"group_id": ev["group"][m], "begin_ps": ev["start"][m], "end_ps": ev["end"][m]})
    marks["dur"] = marks["end_ps"] - marks["begin_ps"]
    # The longest marker (the first of equal ones, as XProf's strict >).
    steps = marks.sort_values(["group_id", "dur"], ascending=[True, False], kind="stable")
    steps = steps.drop_duplicates("group_id").reset_index(drop=True)
    steps = steps[steps["dur"] > 0]
    bd = _breakdown(ev, steps)
    steps = steps.set_index("group_id").join(bd)
    steps = steps[steps["well_formed"]]
    if drop_partial and len(steps) > DROP_PARTIAL_STEPS_ABOVE:
        steps = steps.iloc[1:-1]
    names = roots.set_index("group_id")["step_name"] if len(roots) else pd.Series(dtype=object)
    return _step_table(steps, [names.get(g, str(g)) for g in steps.index])


def _step_table(steps, step_names):
    """The public step table from per-step time (ps) by event type: names, times and breakdown (ms)."""
    out = pd.DataFrame({
        "step_number": steps.index.to_numpy(np.int64),
        "step_name": step_names,
        "group_id": steps.index.to_numpy(np.int64),
        "begin_ps": steps["begin_ps"].to_numpy(np.int64),
        "step_time_ms": steps["dur"].to_numpy(np.float64) / _PS_PER_MS,
    })
    for col, types in {**BREAKDOWN_COLUMNS, **INPUT_PARTS}.items():
        ps = sum((steps[t].fillna(0).to_numpy(np.float64) for t in types if t in steps), np.zeros(len(steps)))
        out[col] = ps / _PS_PER_MS
    return out


# --- GPU device steps (XProf's `ConvertDeviceTraceXPlaneToStepEvents`) ---

_STEP_INFO_LINE_ID = -559038737  # XProf's derived "Steps" line of a GPU plane


def _is_16bit(name, shapes):
    """XProf's precision rule: the tensor shapes decide when the kernel has them,
    else its name (half / fp16 in it)."""
    if shapes:
        return "half" in shapes
    return "half" in name or "fp16" in name


def gpu_event_type(names, shapes=None):
    """XProf's `ClassifyGpuEvent` by kernel name (and tensor shapes): memcpy
    HToD / DToH / DToD, `nccl...` collectives, else compute (16-bit by
    `_is_16bit`). Names such as `MemcpyH2D` do not
    match XProf's spellings and count as compute, as in XProf. Returns int64."""
    shapes = [""] * len(names) if shapes is None else shapes
    out = np.empty(len(names), dtype=np.int64)
    for i, (n, sh) in enumerate(zip(names, shapes)):  # over distinct (name, shape)
        low = n.lower()
        if low.startswith("memcpyhtod"):
            out[i] = HOST_TO_DEVICE
        elif low.startswith("memcpydtoh"):
            out[i] = DEVICE_TO_HOST
        elif low.startswith("memcpydtod"):
            out[i] = DEVICE_TO_DEVICE
        elif low.startswith("nccl"):
            out[i] = DEVICE_COLLECTIVES
        elif _is_16bit(low, str(sh or "").lower()):
            out[i] = DEVICE_COMPUTE_16
        else:
            out[i] = DEVICE_COMPUTE_32
    return out


def gpu_device_steps(space, drop_partial=True) -> pd.DataFrame:
    """The steps of one host with GPUs, as XProf's step database for GPU.

    A step is a group id with a marker on a GPU plane's "Steps" line; its
    time is the longest marker of the group over the GPUs. Its events are the
    kernels and memcpys (raw stream lines, with `correlation_id` and
    `group_id`) of all GPUs, typed by `gpu_event_type`, clipped to the step
    and resolved by priority as in `host_steps`; uncovered time is "all
    others". Host events do not enter (XProf ignores them when there is a
    device). Same columns as `host_steps` (ms); step_name is the group id.
    """
    marks, ev = [], {k: [] for k in ("group", "start", "end", "type")}
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU:"):
            continue
        for line in plane.lines:
            if not len(line):
                continue
            if line.id == _STEP_INFO_LINE_ID:
                g = line.stats(names=["group_id"]).get("group_id")
                if g is None:
                    continue
                ok = g.notna().to_numpy()
                marks.append(pd.DataFrame({"group_id": g[ok].to_numpy(np.int64),
                                           "begin_ps": line.start_ps[ok],
                                           "end_ps": line.start_ps[ok] + line.event_duration_ps[ok]}))
            elif line.id >= 0:  # derived lines repeat the kernels
                st = line.stats(names=["group_id", "correlation_id", "shape"])
                if "group_id" not in st or "correlation_id" not in st:
                    continue
                ok = (st["group_id"].notna() & st["correlation_id"].notna()).to_numpy()
                if not ok.any():
                    continue
                names = np.asarray(line.names(), dtype=object)[ok]
                shapes = (st["shape"][ok].astype(str).to_numpy(object) if "shape" in st
                          else np.full(ok.sum(), "", dtype=object))
                key = pd.MultiIndex.from_arrays([names, shapes])
                distinct, inverse = np.unique(key.codes[0] * (len(key.levels[1]) + 1) + key.codes[1],
                                              return_inverse=True)
                first = np.unique(inverse, return_index=True)[1]
                types = gpu_event_type(names[first], shapes[first])[inverse]
                ev["group"].append(st["group_id"][ok].to_numpy(np.int64))
                ev["start"].append(line.start_ps[ok])
                ev["end"].append(line.start_ps[ok] + line.event_duration_ps[ok])
                ev["type"].append(types)
    if not marks or not ev["group"]:
        return pd.DataFrame(columns=STEP_COLUMNS)
    ev = {k: np.concatenate(v) for k, v in ev.items()}
    marks = pd.concat(marks, ignore_index=True)
    marks["dur"] = marks["end_ps"] - marks["begin_ps"]
    steps = marks.sort_values(["group_id", "dur"], ascending=[True, False], kind="stable")
    steps = steps.drop_duplicates("group_id").reset_index(drop=True)
    steps = steps[(steps["dur"] > 0) & steps["group_id"].isin(np.unique(ev["group"]))]
    bd = _breakdown(ev, steps).drop(columns="well_formed")
    steps = steps.set_index("group_id").join(bd)
    if drop_partial and len(steps) > DROP_PARTIAL_STEPS_ABOVE:
        steps = steps.iloc[1:-1]
    return _step_table(steps, [str(g) for g in steps.index])
