"""`Trace.flows()`: the arrows of XProf's trace (host launch -> kernel, producer ->
consumer), against XProf 2.24.2's own flow events.

XProf writes a flow's events in its streaming trace JSON (`trace_viewer@`, resolution 0:
every event) with the same `bind_id`, `flow_out` / `flow_in` and `cat`, and leaves the
pairing to its trace viewer. Its default viewer (the catapult one it ships,
`xprof/static/trace_viewer_index.js`; its Trace Viewer v2 is opt-in: `?use_trace_viewer_v2`)
pairs them in `createFlowSlices_`: the events by `ts` (then the JSON's order), an event with
`flow_out` a producer, with `flow_in` (or neither) a consumer, with both a step; each
consumer gets an arrow from the flow id's producer (a CUDA graph launch to every kernel of
the graph), a second producer right after a first is ignored, a step is the producer once
it has its arrow. `xprof_flows` replays that on XProf's JSON; both are compared as sets of
(category, from event, to event), an event being (section, track, name, start ps). On
every corpus run they are equal: XProf draws no arrow that `flows()` does not, nor the
reverse.
"""

import glob
import html
import json
import re
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis import trace as T
from xprof_widgets.analysis.core import flows as F
from xprof_widgets.io import schema
from xprof_widgets.io.logdir import host_of
from xprof_widgets.io.xspace import read_xspace

from . import xprof_oracle as oracle
from .conftest import CORPUS_LOGDIRS, PROFILES, corpus_run

_NS = 1000


def xprof_flows(path):
    """XProf's connections in the trace of one file: {(category, from, to)}, each end
    (section, track, name, start ps), its flow's events ordered and paired as `flows()`
    does (module doc)."""
    r = oracle._xprof()
    tmp = tempfile.mkdtemp(prefix="xprof_oracle_")
    try:
        copy = shutil.copy(path, tmp)
        data, _ = r.xspace_to_tool_data([copy], "trace_viewer@", {"trace_viewer_options": {"resolution": 0}})
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    events = json.loads(data)["traceEvents"]
    sections, tracks = {}, {}
    for e in events:
        if e.get("ph") == "M" and e["name"] == "process_name":  # "HOST PLANE"
            sections[e["pid"]] = e["args"]["name"].split(" ", 1)[-1]
        elif e.get("ph") == "M" and e["name"] == "thread_name":
            tracks[(e["pid"], e["tid"])] = e["args"]["name"]
    flow_events = []
    for seq, e in enumerate(events):
        if "bind_id" in e and e.get("ph") == "X":
            end = (sections[e["pid"]], tracks[(e["pid"], e["tid"])], e["name"], round(e["ts"] * 1e6))
            flow_events.append((e["ts"], seq, e, end))
    flow_events.sort(key=lambda x: x[:2])  # catapult: by ts, then the JSON's order
    producer, produced, out = {}, {}, set()
    for _, _, e, end in flow_events:
        fid, cat = e["bind_id"], e.get("cat", "")
        if e.get("flow_out") and not e.get("flow_in"):  # a producer
            if fid in producer and produced[fid]:
                continue  # "Flow producer ... already seen"
            producer[fid], produced[fid] = end, True
            continue
        if fid not in producer:
            continue  # "Flow consumer ... does not have a flow producer" (a step too)
        out.add((cat, producer[fid], end))
        produced[fid] = False
        if e.get("flow_out"):  # a step: the producer from now on
            producer[fid], produced[fid] = end, True
    return out


def ours(trace, frame=None):
    """`flows()` as the set `xprof_flows` makes."""
    f = trace.flows() if frame is None else frame
    sec, name = trace.tracks["section"].to_numpy(), trace.tracks["name"].to_numpy()

    def end(side):
        t = f[f"{side}_track"].to_numpy()
        return zip(sec[t], name[t], f[f"{side}_name"].astype(str), f[f"{side}_start_ps"].astype(int))

    return set(zip(f["category"].astype(str), end("from"), end("to")))


# Per logdir: the connections XProf 2.24.2 draws in its trace of each host file, added up.
XPROF_COUNTS = {
    "jax_mlp_cpu": 1908,
    "jax_transformer_cpu": 20261,
    "tf_keras_cpu": 39949,  # two runs
    "tf_gpu_multiworker": 0,  # grouped files: XProf adds no flow (core/flows.py)
    "tpu_v6e_inference": 2189,
    "amd_jax_gemm_mi300": 186,
    "amd_jax_elementwise_mi300": 205,
    "amd_jax_conv_mi300": 430,
    "nvidia_jax_mlp_h200": 1745,
    "nvidia_jax_no_steps_h200": 296,
    "nvidia_jax_mlp_no_graphs_h200": 1739,
    "nvidia_jax_scan_h200": 1404,
    "nvidia_jax_scan_no_graphs_h200": 1404,
    # Graphs on: the cuGraphLaunch to every kernel of its graph, memsets and cuDNN's kernels
    # among them (XProf's default trace viewer: a flow's producer to each consumer, see the
    # module doc); as many arrows as with graphs off.
    "nvidia_jax_conv_h200": 282,
    "nvidia_jax_conv_no_graphs_h200": 282,
    "nvidia_jax_remat_h200": 624,
    "nvidia_jax_remat_no_graphs_h200": 624,
}


@pytest.mark.parametrize(
    "name",
    [pytest.param(n, marks=pytest.mark.slow) if n == "jax_transformer_cpu" else n for n in CORPUS_LOGDIRS],
)
def test_flows_equal_xprofs(name):
    """Every connection in the trace of every host file of the logdir (every run), as
    XProf 2.24.2 makes it. tf_gpu_multiworker has none in either: its files are grouped
    already (`group_id` stats), and XProf adds flows only inside
    `if (step_grouping && !IsXSpaceGrouped(*space))` of `PreprocessSingleHostXSpace`
    (xprof/convert/preprocess_single_host_xplane.cc), though they hold correlation ids and
    producer / consumer stats (`core/flows.py` follows it)."""
    compared = 0
    for path in sorted(glob.glob(str(PROFILES / name / "plugins/profile/*/*.xplane.pb"))):
        run = corpus_run(name, Path(path).parent.name)
        trace = run.trace(host_of(path)) if len(run.hosts) > 1 else run.trace()
        theirs = xprof_flows(path)
        mine = ours(trace)
        assert len(mine) == len(trace.flows())  # no two connections alike
        assert mine == theirs, (sorted(mine - theirs, key=str)[:5], sorted(theirs - mine, key=str)[:5])
        compared += len(mine)
    assert compared == XPROF_COUNTS.get(name, 0)


def test_flows_h200_launches_reach_kernels():
    """JAX on an H200: every kernel and copy on the GPU stream is the end of a `gpu_launch`
    flow from a host launch (`cuGraphLaunch` to the first kernel of its graph, that kernel
    to the next ...); a window keeps the connections with an end in it."""
    trace = corpus_run("nvidia_jax_mlp_h200").trace()
    f = trace.flows()
    launch = f[f["category"] == "gpu_launch"]
    gpu = trace.tracks["section"].str.startswith("/device:GPU")
    to_gpu = gpu.to_numpy()[launch["to_track"].to_numpy()]
    assert to_gpu.all()
    from_host = launch[~gpu.to_numpy()[launch["from_track"].to_numpy()]]
    assert any(n.startswith("cuGraphLaunch") for n in from_host["from_name"].astype(str))
    assert len(from_host) >= 100
    # The window: the connections whose from or to event overlaps it.
    mid = int(f["to_start_ps"].median())
    lo, hi = mid, mid + 10**8
    win = trace.flows(lo, hi)
    expect = ((f["from_start_ps"] <= hi) & (f["from_end_ps"] >= lo)) | (
        (f["to_start_ps"] <= hi) & (f["to_end_ps"] >= lo)
    )
    assert 0 < len(win) == int(expect.sum()) < len(f)
    # Each end is the event `event()` describes, in the row `query` draws it.
    r = f.iloc[len(f) // 2]
    ev = trace.event(int(r["to_track"]), int(r["to_index"]))
    assert (ev["name"], ev["start_ps"], ev["row"]) == (str(r["to_name"]), r["to_start_ps"], r["to_row"])


# --- hand-made files: the rule case by case, and XProf on the same file -----------------


def _space(grouped=False):
    """A host and a GPU plane made by hand with every kind of flow end (and, `grouped`,
    a `group_id` stat on each plane: a file XProf does not group again)."""
    space = schema.XSpace(hostnames=["synthetic"])
    planes = {}
    for pid, name in ((1, "/host:CPU"), (2, "/device:GPU:0")):
        p = space.planes.add(id=pid, name=name)
        for sid, stat in enumerate(("correlation_id", "_p", "_pt", "_c", "_ct", "flow", "is_async"), start=1):
            p.stat_metadata[sid].id, p.stat_metadata[sid].name = sid, stat
        planes[name] = p
        if grouped:
            p.stat_metadata[99].id, p.stat_metadata[99].name = 99, "group_id"
    sid = {s: i for i, s in enumerate(("correlation_id", "_p", "_pt", "_c", "_ct", "flow", "is_async"), start=1)}

    def line(plane, lid, name, events):
        p = planes[plane]
        ln = p.lines.add(id=lid, name=name, timestamp_ns=0)
        for ev_name, start_ns, dur_ns, stats in events:
            mid = next((m for m, md in p.event_metadata.items() if md.name == ev_name), len(p.event_metadata) + 1)
            p.event_metadata[mid].id, p.event_metadata[mid].name = mid, ev_name
            ev = ln.events.add(metadata_id=mid, offset_ps=start_ns * _NS, duration_ps=dur_ns * _NS)
            for k, v in stats:
                stat = ev.stats.add(metadata_id=sid[k])
                if k in ("correlation_id", "flow") and v >= 0:
                    stat.uint64_value = v
                else:
                    stat.int64_value = abs(v)

    flow = (7 << 58) | (4242 << 2) | 2  # a file's own flow: out, id 4242, category tfrt_rt (7)
    line(
        "/host:CPU",
        1,
        "python",
        [
            ("cudaLaunchKernel", 100, 10, [("correlation_id", 11)]),
            ("cuGraphLaunch", 200, 10, [("correlation_id", 12)]),
            ("cudaMemcpyAsync", 300, 10, [("correlation_id", 13)]),  # no device event: no arrow
            ("Produce", 400, 10, [("_pt", 2), ("_p", 77)]),
            ("ProduceOdd", 420, 10, [("_pt", 99), ("_p", 78)]),  # unknown type: generic ""
            ("Both", 440, 10, [("_pt", 2), ("_p", 79), ("_ct", 2), ("_c", 77)]),  # the consumer flow wins
            ("Signed", 460, 10, [("correlation_id", -21)]),  # an int64 correlation_id reads 0
            ("Own", 480, 10, [("flow", flow)]),
            ("Async", 500, 10, [("_pt", 2), ("_p", 80), ("is_async", 1)]),  # `is_async` changes nothing
            ("MemoryAllocation", 520, 5, [("_pt", 2), ("_p", 81)]),  # internal: not drawn
        ],
    )
    line(
        "/host:CPU",
        2,
        "worker",
        [
            ("Consume", 600, 10, [("_ct", 2), ("_c", 77)]),
            ("ConsumeOdd", 610, 10, [("_ct", 0), ("_c", 78)]),
            ("ConsumeBoth", 620, 10, [("_ct", 2), ("_c", 79)]),
            ("Zero", 630, 10, [("correlation_id", -22)]),  # int64 too: the same flow 0 as "Signed"
            ("OwnIn", 640, 10, [("flow", (7 << 58) | (4242 << 2) | 1)]),
            ("AsyncIn", 650, 10, [("_ct", 2), ("_c", 80)]),
            ("FreeIn", 660, 10, [("_ct", 2), ("_c", 81)]),
        ],
    )
    line(
        "/device:GPU:0",
        3,
        "Stream #7",
        [
            ("kernel_a", 150, 20, [("correlation_id", 11)]),
            ("graph_k1", 250, 20, [("correlation_id", 12)]),
            ("graph_k2", 270, 20, [("correlation_id", 12)]),
            ("graph_k3", 290, 20, [("correlation_id", 12)]),
        ],
    )
    return space


def _trace(tmp_path, grouped=False):
    space = _space(grouped)
    path = tmp_path / "synthetic.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return T.Trace(read_xspace(str(path))), path


def test_flow_rule_by_hand(tmp_path):
    """The rule case by case (core/flows.py, `trace.flow_arrows`): launches to kernels, a
    graph launch to every kernel of its graph, producer to each consumer, an event both
    producer and consumer kept as a consumer, unknown types generic, an int64
    `correlation_id` read as 0 (its flow's consumer "Zero" starts before its producer
    "Signed": no arrow, as XProf's viewer), the file's own `flow` stats, internal events
    left out."""
    trace, _ = _trace(tmp_path)
    got = {(c, a[2], b[2]) for c, a, b in ours(trace)}
    assert got == {
        ("gpu_launch", "cudaLaunchKernel", "kernel_a"),
        ("gpu_launch", "cuGraphLaunch", "graph_k1"),
        ("gpu_launch", "cuGraphLaunch", "graph_k2"),
        ("gpu_launch", "cuGraphLaunch", "graph_k3"),
        ("tf_exec", "Produce", "Both"),  # "Both" is a consumer of 77 only, between the two by start
        ("tf_exec", "Produce", "Consume"),
        ("tf_exec", "Async", "AsyncIn"),
        ("", "ProduceOdd", "ConsumeOdd"),
        ("tfrt_rt", "Own", "OwnIn"),
    }
    f = trace.flows()
    assert list(f.columns) == T.FLOW_COLUMNS
    assert f["flow_id"].nunique() == 6  # kernel_a, the graph, 77, 78, 80, 4242
    assert list(f["from_start_ps"]) == sorted(f["from_start_ps"])
    # A window: the connections with an end in it.
    assert {str(n) for n in trace.flows(265 * _NS, 268 * _NS)["to_name"]} == {"graph_k1"}
    assert trace.flows(900 * _NS, 1000 * _NS).empty


@pytest.mark.parametrize("grouped", [False, True])
def test_flow_rule_is_xprofs(tmp_path, grouped):
    """XProf 2.24.2 on the hand-made file draws the same connections; on the file grouped
    already, only the one of the file's own `flow` stats."""
    trace, path = _trace(tmp_path, grouped)
    mine = ours(trace)
    assert mine == xprof_flows(path)
    assert len(mine) == (1 if grouped else 9)


def test_no_flows(tmp_path):
    """A trace without flow stats has an empty frame with the columns."""
    space = schema.XSpace(hostnames=["x"])
    p = space.planes.add(id=1, name="/host:CPU")
    p.event_metadata[1].id, p.event_metadata[1].name = 1, "a"
    ln = p.lines.add(id=1, name="t", timestamp_ns=0)
    ln.events.add(metadata_id=1, offset_ps=0, duration_ps=10)
    path = tmp_path / "x.xplane.pb"
    path.write_bytes(space.SerializeToString())
    trace = T.Trace(read_xspace(str(path)))
    f = trace.flows()
    assert f.empty and list(f.columns) == T.FLOW_COLUMNS
    assert np.issubdtype(f["from_start_ps"].dtype, np.integer)


# --- the widget -------------------------------------------------------------------------


def test_widget_draws_and_lists_a_kernels_flows(monkeypatch):
    """A tap on a kernel lists the launch it came from ("Incoming flow", a link that selects
    it) and pushes its arrow in the rows the two are drawn in; the link selects the launch,
    whose "Outgoing flow" is the kernel. "Flows" draws the view's arrows, at most
    FLOWS_SHOWN, and says how many."""
    from xprof_widgets.widgets import trace_viewer as TV

    run = corpus_run("nvidia_jax_mlp_no_graphs_h200")
    trace = run.trace()
    w = xw.TraceViewerWidget(run)
    pushed = {}
    monkeypatch.setattr(w, "push_columns", lambda source, cols, mode="replace": pushed.__setitem__(source, cols))
    f = trace.flows()
    r = f[
        (f["category"] == "gpu_launch")
        & trace.tracks["section"].str.startswith("/device:GPU").to_numpy()[f["to_track"].to_numpy()]
    ].iloc[0]
    kernel = float(r["to_track"] * 2**32 + r["to_index"])
    w.selected = {"figure": "timeline", "source": "events", "id": kernel, "ids": [kernel]}
    assert w.selected_event["name"] == str(r["to_name"])
    row = re.search(r'<tr data-testid="flow-in">(.*?)</tr>', w.html).group(1)
    assert "Incoming flow (gpu_launch)" in row and html.escape(str(r["from_name"])) in row
    launch = int(r["from_track"]) * 2**32 + int(r["from_index"])
    assert f"&quot;id&quot;: {launch}" in row  # the link selects the launch
    arrows = pushed["event_flows"]
    assert len(arrows["x0"]) == 1
    assert arrows["x0"][0] == r["from_start_ps"] / 1e9 and arrows["x1"][0] == r["to_start_ps"] / 1e9
    assert arrows["y0"][0] == w._row0[int(r["from_track"])] + r["from_row"]
    assert arrows["y1"][0] == w._row0[int(r["to_track"])] + r["to_row"]
    # The link: the launch selected, its outgoing flow the kernel.
    w.selected = {"figure": "timeline", "source": "events", "id": launch, "ids": [launch]}
    assert w.selected_event["name"] == str(r["from_name"])
    assert '<tr data-testid="flow-out">' in w.html and html.escape(str(r["to_name"])) in w.html
    # "Flows": every flow of the view, capped.
    assert "flows" not in pushed
    w.on_request("flows", {"value": True})
    assert w.show_flows and len(pushed["flows"]["x0"]) == TV.FLOWS_SHOWN
    total = len(trace.flows(*w.window_ps))
    assert pushed["flow_note"]["text"][0] == f"{total:,} flows in view, {TV.FLOWS_SHOWN} drawn"
    content, _ = w.on_request("view", {"x_start": r["to_start_ps"] / 1e9, "x_end": r["to_start_ps"] / 1e9 + 0.01})
    assert len(content["also"]["flows"]["x0"]) == len(trace.flows(*w.window_ps)) <= TV.FLOWS_SHOWN
    w.on_request("flows", {"value": False})
    assert len(pushed["flows"]["x0"]) == 0 and 'data-testid="flows-toggle">' in w.html


def test_widget_flow_link_shows_an_event_out_of_view():
    """Selecting an event out of the view (a flow's other end) centres the view on it."""
    run = corpus_run("nvidia_jax_mlp_h200")
    trace = run.trace()
    w = xw.TraceViewerWidget(run)
    f = trace.flows()
    r = f.iloc[len(f) // 2]
    w.show_range(trace.start_ps, trace.start_ps + 10**6)
    event = float(r["to_track"] * 2**32 + r["to_index"])
    w.selected = {"figure": "timeline", "source": "events", "id": event, "ids": [event]}
    start, end = w.window_ps
    middle = (r["to_start_ps"] + r["to_end_ps"]) // 2
    assert abs((start + end) / 2 - middle) <= 1 and end - start == max(10**6, 2 * (r["to_end_ps"] - r["to_start_ps"]))


def test_flow_arrows_as_catapult_pairs_them():
    """`flow_arrows` on one flow per case, ends in time order (P producer, C consumer, S
    step, N no direction: a consumer): catapult's `createFlowSlices_` as XProf ships it."""
    kinds = {"P": F.OUT, "C": F.IN, "S": F.MID, "N": F.NONE}
    cases = {
        "PCCC": {(0, 1), (0, 2), (0, 3)},  # a graph launch to each kernel
        "CPC": {(1, 2)},  # a consumer before any producer: none
        "PPC": {(0, 2)},  # a second producer right after the first: ignored
        "PCPC": {(0, 1), (2, 3)},  # a producer after a consumer: the new one
        "PSC": {(0, 1), (1, 2)},  # a step: its arrow, then the producer
        "SPC": {(1, 2)},  # a step without a producer: nothing
        "PNC": {(0, 1), (0, 2)},
        "CC": set(),
    }
    for pattern, want in cases.items():
        entry = np.array([kinds[k] for k in pattern], np.int8)
        src, dst = T.flow_arrows(np.zeros(len(pattern), np.int64), entry)
        assert set(zip(src.tolist(), dst.tolist())) == want, pattern
    # Several flows side by side: each its own.
    entry = np.array([F.OUT, F.IN, F.IN, F.IN, F.OUT, F.IN], np.int8)
    src, dst = T.flow_arrows(np.array([0, 0, 1, 1, 2, 2]), entry)
    assert set(zip(src.tolist(), dst.tolist())) == {(0, 1), (4, 5)}
