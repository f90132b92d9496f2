"""XProf 2.24.2 itself, run on a profile: the referee of the GPU tests.

XProf's converters (`pip install xprof==2.24.2`, in the `test` extra) read a copy of
the files (they write caches beside them). `op_stats` returns the OpStats XProf builds
once per run and every tool reads (its op metrics: occurrences, times, FLOPs, bytes,
memory breakdown per op), so a test can compare op by op, not only what a table shows.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import tempfile

import pytest


def _xprof():
    try:
        from xprof.convert import raw_to_tool_data
    except ImportError:  # pragma: no cover - the test extra installs it
        if os.environ.get("CI") == "true":
            raise
        pytest.skip("XProf is not installed (pip install -e '.[test]')")
    return raw_to_tool_data


def python():
    """An interpreter with XProf, for tests that run it in a process of its own: this
    one (the test extra installs XProf)."""
    import sys

    _xprof()
    return sys.executable


def _copy(paths):
    tmp = tempfile.mkdtemp(prefix="xprof_oracle_")
    for i, p in enumerate(paths):
        name = os.path.basename(str(p))
        if not name.endswith(".xplane.pb"):
            name = f"host{i}.xplane.pb"
        shutil.copy(p, os.path.join(tmp, name))
    return tmp, sorted(glob.glob(os.path.join(tmp, "*.xplane.pb")))


def tool_names(paths):
    """XProf's tool list for these .xplane.pb files (`xspace_to_tool_names`)."""
    r = _xprof()
    tmp, files = _copy(paths)
    try:
        return r.xspace_to_tool_names(files)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def tool_data(paths, tool, params=None):
    """XProf's output of `tool` for these .xplane.pb files, parsed from JSON."""
    r = _xprof()
    tmp, files = _copy(paths)
    try:
        r.xspace_to_tool_names(files)
        data, _ = r.xspace_to_tool_data(files, tool, params or {})
        return json.loads(data) if data else None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def op_stats(paths):
    """XProf's combined OpStats proto for these files (the cache its tools share)."""
    r = _xprof()
    from xprof.protobuf import op_stats_pb2

    tmp, files = _copy(paths)
    try:
        r.xspace_to_tool_names(files)
        r.xspace_to_tool_data(files, "hlo_stats", {})
        cached = glob.glob(os.path.join(tmp, "ALL_HOSTS.op_stats*.pb"))
        if not cached:
            raise RuntimeError("XProf wrote no OpStats cache")
        stats = op_stats_pb2.OpStats()
        with open(cached[0], "rb") as f:
            stats.ParseFromString(f.read())
        return stats
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def op_costs(stats):
    """{(program_id, op name): (occurrences, flops, model_flops, bytes_accessed, hbm_read,
    hbm_write)} from an OpStats' device op metrics."""
    out = {}
    for m in stats.device_op_metrics_db.metrics_db:
        read = sum(
            b.bytes_accessed for b in m.memory_accessed_breakdown if b.memory_space == 1 and b.operation_type == 1
        )
        write = sum(
            b.bytes_accessed for b in m.memory_accessed_breakdown if b.memory_space == 1 and b.operation_type == 2
        )
        out[(m.hlo_module_id, m.name)] = (m.occurrences, m.flops, m.model_flops, m.bytes_accessed, read, write)
    return out


def _trace_events(paths):
    """XProf's non-streaming trace of the first file: (plane, line, event) of each complete
    ("X") or instant ("i") event, tracks named as its metadata events name them."""
    tr = tool_data(list(paths)[:1], "trace_viewer")
    names = {}
    for e in tr["traceEvents"]:
        if e.get("ph") == "M" and e.get("name") in ("process_name", "thread_name"):
            names[(e["pid"], e.get("tid") if e["name"] == "thread_name" else None)] = e["args"]["name"]
    for e in tr["traceEvents"]:
        if e.get("ph") in ("X", "i"):
            yield names.get((e["pid"], None), str(e["pid"])), names.get((e["pid"], e.get("tid")), str(e.get("tid"))), e


def trace_counts(paths):
    """XProf's non-streaming trace of the first file: {"plane :: line": event count}."""
    counts = {}
    for plane, line, _ in _trace_events(paths):
        key = f"{plane} :: {line}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def trace_spans(paths):
    """XProf's non-streaming trace of the first file: {(plane, line): [(name, start_ns,
    duration_ns)]} of its complete events (it writes microseconds with three decimals)."""
    spans = {}
    for plane, line, e in _trace_events(paths):
        if e["ph"] == "X":
            spans.setdefault((plane, line), []).append((e["name"], round(e["ts"] * 1e3), round(e.get("dur", 0) * 1e3)))
    return spans


def streaming_trace(paths, resolution=2000):
    """XProf's streaming trace viewer's first view of these files (`trace_viewer@`, what its
    UI asks for), parsed from JSON: its counter series ("C") are only here."""
    r = _xprof()
    tmp, files = _copy(paths)
    try:
        data, _ = r.xspace_to_tool_data(files, "trace_viewer@", {"trace_viewer_options": {"resolution": resolution}})
        return json.loads(data)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
