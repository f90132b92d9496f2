"""XProf's megascale stats (`megascale_stats`, `xspace_to_dcn_slack_analysis.cc`,
`process_megascale_dcn.cc`): the collectives a multi-slice TPU program runs over the data
center network (DCN), each with how long it had to complete and how long the TensorCore
waited on it.

A multi-slice program sends and receives across slices through host transfers: for each
collective a `send` / `send-done` / `recv` / `recv-done` of one rendezvous (the HLO
frontend attribute `_xla_host_transfer_rendezvous`, with its kind in
`_xla_megascale_transfer_type`; a `-done` without it is found through its channel). XProf
reads the ops of TensorCore 0 (the `XLA Ops` line of `/device:TPU:0`, ops of category
"host send" / "host recv" inside a program of the `XLA Modules` line, found in that
program's HLO by their display name) in time order, and for each collective instance,
from its `send` to its `recv-done`:

* **slack**: the time from the send's start to the recv-done's start the TensorCore spent
  on other work: that time less every host send / recv op (of any collective) that ran in
  it: how late the data could have come without a stall;
* **stall**: the time of the collective's own ops (send through recv-done);
* **observed duration**: from the send's start to the recv-done's end;
* each op's time (send, send-done, recv, recv-done);
* **data transmitted**: what the collective moves over DCN, from the recv-done's bytes and
  the group size in the send's `dcn_collective_info` (all-reduce 2(g-1)/g of it, all-gather
  and all-to-all (g-1)/g, reduce-scatter g-1 times, one-to-one g times);
* **required bandwidth**: those bytes over the slack, in Gbit/s.

A row per rendezvous: the averages over its instances (whole microseconds, as XProf keeps
them), the occurrences, and the aggregated stall (average x occurrences). The run's table
(`host=None`) combines the hosts' averages weighted by occurrences (XProf's "ALL_HOSTS").

A host counts when its `/host:CPU` plane names `MegaScale:` events (the DCN transport's
TraceMes). Where we differ from XProf 2.24.2, on purpose:

* **Recv stall** is the recv ops' average time. XProf divides it by 10^6 once more (its
  column reads 0 unless a recv lasts a second).
* A host without `MegaScale:` events is left out; XProf then shows no table for any host.
* The row order is by rendezvous name (XProf's is a hash map's, different per process).

Times here are picoseconds unless a name says otherwise.
"""

from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .core.availability import NO_MEGASCALE, has_megascale
from .core.runlike import RunLike

TPU0 = "/device:TPU:0"
_U64 = (1 << 64) - 1
#: XProf's required bandwidth where the slack is 0 (INT_MAX).
NO_SLACK_BANDWIDTH = 2147483647.0
COLUMNS = [
    "rendezvous_name",
    "recv_op_name",
    "send_op_name",
    "transfer_type",
    "slack_time_ms",
    "observed_duration_ms",
    "send_stall_ms",
    "send_done_stall_ms",
    "recv_stall_ms",
    "recv_done_stall_ms",
    "stall_duration_ms",
    "total_stall_ms",
    "occurrences",
    "net_tx_bytes",
    "required_bandwidth_gbps",
]
_AVERAGED = ("slack", "observed", "stall", "send", "send_done", "recv", "recv_done")


def _u64(value) -> int:
    return int(value) & _U64


def _group_size(info: bytes | None) -> int:
    """The replica group size of a `DcnCollectiveInfoProto`: 1 for one-to-one groups, else
    the endpoints of the first endpoint group; 0 without one."""
    from ..io import wire

    if not isinstance(info, (bytes, bytearray)) or not info:
        return 0
    try:
        first_group = None
        for number, wire_type, _v, start, end in wire.walk(info, 0, len(info)):
            if number == 3 and wire_type == wire.LENGTH:
                return 1
            if number == 2 and wire_type == wire.LENGTH and first_group is None:
                first_group = (start, end)
        if first_group is None:
            return 0
        start, end = first_group
        return sum(1 for f in wire.walk(info, start, end) if f[0] == 1 and f[1] == wire.LENGTH)
    except wire.WireError:
        return 0


def _transmitted(size: int, group: int, kind: str) -> int:
    """Bytes a collective moves over DCN (XProf's `GetTransmittedDataSize`)."""
    if group == 0:
        return 0
    if kind == "ONE_TO_ONE":
        return _u64(group * size)
    if kind == "ALL_GATHER":
        return _u64(((group - 1) * size) / group)
    if kind == "ALL_REDUCE":
        return _u64(2 * ((group - 1) / group) * size)
    if kind == "ALL_TO_ALL":
        return _u64(((group - 1) / group) * size)
    if kind == "REDUCE_SCATTER":
        return _u64(size * (group - 1))
    return 0


class _Instructions:
    """A module's instructions by lower-case name (the first in module order), and what the
    analysis reads of each: opcode, channel id, rendezvous, transfer type, bytes."""

    def __init__(self, module):
        self._by_name: dict = {}
        for comp in module.computations.values():
            for instr in comp.instructions:
                self._by_name.setdefault(instr.name.lower(), instr)
        self._seen: dict = {}

    def find(self, display_name):
        key = display_name[1:] if display_name.startswith("%") else display_name
        key = key.lower()
        if key not in self._seen:
            instr = self._by_name.get(key)
            if instr is None:
                self._seen[key] = None
            else:
                attrs = instr.proto.frontend_attributes.map
                shape = instr.shape
                size = sum(s.byte_size() for s in shape.tuple_shapes) if shape.is_tuple else shape.byte_size()
                self._seen[key] = (
                    instr.opcode,
                    int(instr.proto.channel_id),
                    attrs.get("_xla_host_transfer_rendezvous"),
                    attrs.get("_xla_megascale_transfer_type", ""),
                    size,
                )
        return self._seen[key]


def _containing(modules_spans):
    """XProf's forward-only search for the module event holding an op (tsl's
    XEventContextTracker): a function (begin_ps, end_ps) -> module index or None, called
    with ops in line order."""
    cursor = [-1]

    def find(begin, end):
        starts, ends = modules_spans
        c = cursor[0]
        if c >= 0 and starts[c] <= begin and end <= ends[c]:
            return c
        for i in range(c + 1, len(starts)):
            if starts[i] > end:
                return None
            if ends[i] < begin:
                continue
            cursor[0] = i
            return i if starts[i] <= begin and end <= ends[i] else None
        return None

    return find


_MODULE_KEY = re.compile(r"^(.*)\((\d+)\)$")


def host_records(run: RunLike, space) -> list[dict]:
    """XProf's collective instances (DcnSlackAnalysis records) of one host file, in the order
    they complete; [] without megascale data."""
    from .core.xla_ops import program_modules

    if not has_megascale(space):
        return []
    plane = space.plane(TPU0)
    if plane is None:
        return []
    module_lines = [line for line in plane.lines if line.name == "XLA Modules"]
    op_lines = [line for line in plane.lines if line.name == "XLA Ops"]
    if not module_lines or not op_lines:
        return []
    programs = program_modules(run)
    pid_of = {key: pid for pid, key in programs.names.items()}
    mline = module_lines[0]
    module_starts = mline.start_ps.astype(np.int64)
    spans = (module_starts, module_starts + mline.event_duration_ps.astype(np.int64))
    module_names = np.asarray(mline.names().astype(object))
    instructions: dict = {}
    metadata = plane.message.event_metadata
    state: dict = {}
    by_channel: dict = {}
    groups: dict = {}
    records: list = []
    for line in op_lines:
        if not len(line):
            continue
        ids = line.metadata_id.astype(np.int64)
        uniq = np.unique(ids)
        category = plane.metadata_stats(uniq, names=["hlo_category"]).get("hlo_category")
        if category is None:
            continue
        wanted = {
            int(m)
            for m, c in zip(uniq.tolist(), category)
            if isinstance(c, str) and ("host send" in c or "host recv" in c)
        }
        if not wanted:
            continue
        at = np.flatnonzero(np.isin(ids, list(wanted)))
        begins = line.start_ps.astype(np.int64)
        durations = line.event_duration_ps.astype(np.int64)
        origin_ps = int(line.timestamp_ns) * 1000
        find = _containing(spans)
        for i in at.tolist():
            begin, duration = int(begins[i]), int(durations[i])
            m = find(begin, begin + duration)
            if m is None:
                continue
            pid = pid_of.get(module_names[m])
            if pid not in instructions:
                module = programs.module(pid) if pid is not None else None
                instructions[pid] = _Instructions(module) if module is not None else None
            table = instructions[pid]
            md = metadata.get(int(ids[i]))
            if table is None or md is None:
                continue
            found = table.find(md.display_name)
            if found is None:
                continue
            opcode, channel, rendezvous, kind, size = found
            if rendezvous:
                by_channel[channel] = rendezvous
            else:
                rendezvous = by_channel.get(channel)
                if rendezvous is None:
                    continue
            offset_ps = begin - origin_ps
            ts_ns = int(float(line.timestamp_ns) + offset_ps / 1e3)
            dur_ns = duration / 1e3
            s = state.setdefault(rendezvous, _new_state())
            s["stall_ns"] = _u64(s["stall_ns"] + dur_ns)
            if opcode == "send":
                s.update(
                    start_ns=ts_ns,
                    kind=kind or "",
                    overlap_ns=0,
                    stall_ns=_u64(dur_ns),
                    send_name=md.display_name,
                    send=duration,
                )
                if rendezvous not in groups:
                    info = plane.metadata_stats(np.array([int(ids[i])]), names=["dcn_collective_info"])
                    value = info.get("dcn_collective_info")
                    groups[rendezvous] = _group_size(value[0] if value is not None else None)
                s["group"] = groups[rendezvous]
            elif opcode == "recv":
                s["recv"] = duration
            elif opcode == "send-done":
                s["send_done"] = duration
            elif opcode == "recv-done":
                s["recv_done"] = duration
                if s["start_ns"] != 0:
                    end_ns = int(ts_ns + dur_ns)
                    records.append(
                        {
                            "rendezvous": rendezvous,
                            "kind": s["kind"],
                            "send_start_us": _u64(s["start_ns"] / 1e3),
                            "recv_done_end_us": _u64(end_ns / 1e3),
                            "slack_us": _u64(_u64(ts_ns - s["start_ns"] - s["overlap_ns"]) / 1e3),
                            "bytes": _transmitted(size, s["group"], s["kind"]),
                            "stall_us": _u64(s["stall_ns"] / 1e3),
                            "recv_name": md.display_name,
                            "send_name": s["send_name"],
                            "send_ps": s["send"],
                            "send_done_ps": s["send_done"],
                            "recv_ps": s["recv"],
                            "recv_done_ps": s["recv_done"],
                        }
                    )
            overlap = _u64(dur_ns)
            for other in state.values():
                other["overlap_ns"] = _u64(other["overlap_ns"] + overlap)
    return records


def _new_state():
    return {
        "start_ns": 0,
        "kind": "",
        "overlap_ns": 0,
        "stall_ns": 0,
        "send_name": "",
        "group": 0,
        "send": 0,
        "send_done": 0,
        "recv": 0,
        "recv_done": 0,
    }


def summarize(records: list[dict]) -> dict:
    """Per rendezvous: {name: (occurrences, {quantity: average in whole µs}, last record)}
    (XProf's SummarizeDcnSlackAnalysis; recv averaged as the other ops are)."""
    sums: dict = {}
    for r in records:
        entry = sums.setdefault(r["rendezvous"], [0, dict.fromkeys(_AVERAGED, 0), None])
        entry[0] += 1
        total = entry[1]
        total["slack"] += r["slack_us"]
        total["stall"] += r["stall_us"]
        total["observed"] += r["recv_done_end_us"] - r["send_start_us"]
        for key in ("send", "send_done", "recv", "recv_done"):
            total[key] = _u64(total[key] + r[f"{key}_ps"] / 1e6)
        entry[2] = r
    return {
        name: (occ, {k: _u64(v / occ) for k, v in total.items()}, last) for name, (occ, total, last) in sums.items()
    }


def _combined(summaries: list[dict]) -> dict:
    """Hosts' summaries as one (XProf's DcnSlackAnalysisCombiner): averages weighted by
    occurrences, the last host's names, kind and bytes."""
    out: dict = {}
    for summary in summaries:
        for name, (occ, averages, last) in summary.items():
            entry = out.setdefault(name, [0, dict.fromkeys(_AVERAGED, 0), None])
            entry[0] += occ
            for k in _AVERAGED:
                entry[1][k] = _u64(entry[1][k] + averages[k] * occ)
            entry[2] = last
    return {name: (occ, {k: _u64(v / occ) for k, v in sums.items()}, last) for name, (occ, sums, last) in out.items()}


def _table(summary: dict) -> pd.DataFrame:
    rows = []
    for name in sorted(summary):
        occ, a, last = summary[name]
        slack = a["slack"]
        data = last["bytes"]
        bandwidth = NO_SLACK_BANDWIDTH if slack == 0 else (float(data) / float(slack)) * (8e-9 / 1e-6)
        rows.append(
            (
                name,
                last["recv_name"],
                last["send_name"],
                last["kind"],
                slack / 1e3,
                a["observed"] / 1e3,
                a["send"] / 1e3,
                a["send_done"] / 1e3,
                a["recv"] / 1e3,
                a["recv_done"] / 1e3,
                a["stall"] / 1e3,
                _u64(a["stall"] * occ) / 1e3,
                occ,
                data,
                bandwidth,
            )
        )
    return pd.DataFrame(rows, columns=COLUMNS)


def megascale_stats(run: RunLike, host: str | None = None) -> pd.DataFrame:
    """XProf's megascale stats table of one host of the run (its name as in `run.hosts`), or
    of all hosts combined (`host=None`): a row per rendezvous (see the module doc).
    `.attrs["reason"]` says why it is empty; `.attrs["hosts"]` names the hosts read."""
    pairs = run.host_spaces() if host is None else [(host, run.xspace(host))]
    summaries, hosts = [], []
    for name, space in pairs:
        records = host_records(run, space)
        if records:
            summaries.append(summarize(records))
            hosts.append(name)
    out = _table(_combined(summaries) if summaries else {})
    out.attrs["reason"] = "" if len(out) else NO_MEGASCALE
    out.attrs["hosts"] = hosts
    return out
