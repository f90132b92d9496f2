"""Device op metrics per HLO op and XProf's HLO op statistics.

XProf (`xplane_to_op_metrics_db.cc`, `op_metrics_db_utils.cc`) builds one
op-metrics database per TPU core from the "XLA Ops" line, keyed by
(program_id, symbol_id) from each event's metadata, then combines cores by
(program_id, op name) and adds an IDLE row for the time no op ran. This module
does the same with numpy group-bys over events; the only Python loops are over
distinct ops (event metadata), never over events.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

IDLE = "IDLE"
_OP_LINE = "XLA Ops"
_HBM = 1  # MemorySpace id XProf uses for off-chip memory
_READ, _WRITE = 1, 2
_GIB_PER_GB = 1e9 / 2**30

# Columns of the op metrics table (one row per HLO op, all cores summed).
_SUM_COLUMNS = [
    "occurrences", "time_ps", "self_time_ps", "children_time_ps", "flops", "model_flops",
    "bytes_accessed", "hbm_read_bytes", "hbm_write_bytes", "hbm_bytes", "on_chip_read_bytes",
    "on_chip_write_bytes", "cmem_read_bytes", "cmem_write_bytes", "vmem_read_bytes",
    "vmem_write_bytes",
]


def _varints(buf, pos, end):
    """Yields (field number, wire type, value or (start, stop)) of a protobuf message."""
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wt = key >> 3, key & 7
        if wt == 0:
            v, pos = _varint(buf, pos)
            yield field, wt, v
        elif wt == 2:
            n, pos = _varint(buf, pos)
            yield field, wt, (pos, pos + n)
            pos += n
        elif wt == 1:
            pos += 8
        elif wt == 5:
            pos += 4
        else:
            return


def _varint(buf, pos):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def parse_memory_access_breakdown(data) -> list:
    """Decodes a `memory_access_breakdown` stat (xprof MemoryAccessBreakdown).

    Returns a list of (operation_type, memory_space, bytes) with operation type
    0 unknown, 1 read, 2 write and memory space 1 = HBM (others are on chip).
    """
    if not isinstance(data, (bytes, bytearray)) or not data:
        return []
    out = []
    try:
        for field, wt, val in _varints(data, 0, len(data)):
            if field != 1 or wt != 2:
                continue
            entry = {1: 0, 2: 0, 3: 0}
            for f, w, v in _varints(data, val[0], val[1]):
                if w == 0:
                    entry[f] = v
            out.append((entry[1], entry[2], entry[3]))
    except IndexError:
        return []
    return out


def _breakdown_columns(values) -> pd.DataFrame:
    """Per-occurrence bytes by memory space / direction for each breakdown stat."""
    rows = []
    for v in values:
        entries = parse_memory_access_breakdown(v)
        r = dict.fromkeys(
            ["hbm_read_bytes", "hbm_write_bytes", "hbm_bytes", "on_chip_read_bytes", "on_chip_write_bytes",
             "cmem_read_bytes", "cmem_write_bytes", "vmem_read_bytes", "vmem_write_bytes"], 0)
        for op, space, n in entries:
            if space == _HBM:
                r["hbm_bytes"] += n
                if op == _READ:
                    r["hbm_read_bytes"] += n
                elif op == _WRITE:
                    r["hbm_write_bytes"] += n
            else:
                if op == _READ:
                    r["on_chip_read_bytes"] += n
                elif op == _WRITE:
                    r["on_chip_write_bytes"] += n
                kind = {2: "cmem", 3: "vmem"}.get(space)
                if kind and op in (_READ, _WRITE):
                    r[f"{kind}_{'read' if op == _READ else 'write'}_bytes"] += n
        r["has_breakdown"] = bool(entries)
        rows.append(r)
    return pd.DataFrame(rows)


def _children_time(begin, end):
    """Time of direct nested children per event (ps), events as in XProf's
    ancestor stack: a parent includes a child when it starts no later and ends
    no earlier. Vectorised by peeling one nesting level per pass."""
    n = len(begin)
    children = np.zeros(n, dtype=np.int64)
    if n == 0:
        return children
    order = np.lexsort((-end, begin))
    b, e = begin[order], end[order]
    remaining = np.arange(n)
    parent_level = None
    while len(remaining):
        ee = e[remaining]
        prev_max = np.maximum.accumulate(np.concatenate([[np.iinfo(np.int64).min], ee[:-1]]))
        top = ee > prev_max  # not included in an earlier event of this set
        level = remaining[top]
        if parent_level is not None and len(level):
            p = parent_level[np.searchsorted(parent_level, level, side="right") - 1]
            np.add.at(children, order[p], (e[level] - b[level]))
        parent_level = level
        remaining = remaining[~top]
    return children


def _plane_op_metrics(plane):
    """(ops DataFrame keyed by program_id/symbol_id, total_time_ps) for one core."""
    try:
        line = plane.line(_OP_LINE)
    except (KeyError, ValueError):
        line = None
    if line is None or len(line) == 0:
        return None, 0
    st = line.stats(names=["device_offset_ps", "device_duration_ps"])
    begin = line.start_ps.astype(np.int64)
    dur = line.event_duration_ps.astype(np.int64)
    if "device_offset_ps" in st and "device_duration_ps" in st:
        off = pd.to_numeric(st["device_offset_ps"], errors="coerce").to_numpy(dtype=float)
        dd = pd.to_numeric(st["device_duration_ps"], errors="coerce").to_numpy(dtype=float)
        ok = ~(np.isnan(off) | np.isnan(dd))
        begin = np.where(ok, np.nan_to_num(off), begin).astype(np.int64)
        dur = np.where(ok, np.nan_to_num(dd), dur).astype(np.int64)
    end = begin + dur
    total_time = int(end.max() - begin.min())
    children = _children_time(begin, end)
    ev = pd.DataFrame({"metadata_id": line.metadata_id, "occurrences": 1, "time_ps": dur,
                       "children_time_ps": children})
    per_md = ev.groupby("metadata_id", sort=True).sum()
    ids = per_md.index.to_numpy(dtype=np.int64)
    names = ["program_id", "symbol_id", "hlo_category", "tf_op", "flops", "model_flops", "bytes_accessed",
             "memory_access_breakdown", "deduplicated_name", "source", "source_stack"]
    md_stats = plane.metadata_stats(ids, names)
    md = plane.event_metadata.loc[ids]
    df = pd.DataFrame({"metadata_id": ids}, index=per_md.index)
    disp = md["display_name"].to_numpy(dtype=object)
    full = md["name"].to_numpy(dtype=object)
    has_disp = np.array([bool(x) for x in disp])
    df["name"] = np.where(has_disp, disp, full)
    df["expression"] = np.where(has_disp, full, "")
    for k in names:
        df[k] = md_stats[k] if k in md_stats else None
    df = df.join(per_md)
    df["self_time_ps"] = df["time_ps"] - df["children_time_ps"]
    pid = pd.to_numeric(df["program_id"], errors="coerce")
    sym = pd.to_numeric(df["symbol_id"], errors="coerce")
    df = df[pid.notna() & sym.notna() & (sym != 0)].copy()
    if df.empty:
        return None, total_time
    df["program_id"] = df["program_id"].astype(np.uint64)
    df["symbol_id"] = df["symbol_id"].astype(np.int64)
    for k in ("flops", "model_flops", "bytes_accessed"):
        df[k] = pd.to_numeric(df[k], errors="coerce").fillna(0).astype(np.float64)
    # Several metadata can share one (program, symbol): XProf merges them, the
    # first one's metadata winning.
    firsts = df.groupby(["program_id", "symbol_id"], sort=False).first()
    sums = df.groupby(["program_id", "symbol_id"], sort=False)[
        ["occurrences", "time_ps", "self_time_ps", "children_time_ps"]].sum()
    out = firsts.drop(columns=sums.columns).join(sums).reset_index()
    occ = out["occurrences"].to_numpy(dtype=np.float64)
    out["flops"] = out["flops"] * occ
    model = out["model_flops"] * occ
    out["model_flops"] = np.where(model > 0, model, out["flops"])
    out["bytes_accessed"] = out["bytes_accessed"] * occ
    bd = _breakdown_columns(out["memory_access_breakdown"].tolist())
    for c in bd.columns:
        out[c] = bd[c].to_numpy() * (occ if c != "has_breakdown" else 1)
    return out, total_time


def chip_peaks(run) -> dict:
    """Peaks of the first TPU core, as XProf's PerfEnv has them.

    Keys: peak_flops (FLOP/s), peak_hbm_bw, peak_on_chip_read_bw,
    peak_on_chip_write_bw, peak_cmem_read_bw, peak_cmem_write_bw,
    peak_vmem_read_bw, peak_vmem_write_bw (bytes/s, decimal GB based).
    """
    planes = _device_planes(run)
    stats = planes[0].stats if planes else {}
    g = lambda k: float(stats.get(k, 0.0) or 0.0)  # noqa: E731
    return {
        "peak_flops": g("peak_teraflops_per_second") * 1e12,
        "peak_hbm_bw": g("peak_hbm_bw_gigabytes_per_second") * 1e9,
        "peak_on_chip_read_bw": g("peak_sram_rd_bw_gigabytes_per_second") * 1e9,
        "peak_on_chip_write_bw": g("peak_sram_wr_bw_gigabytes_per_second") * 1e9,
        "peak_cmem_read_bw": g("peak_cmem_rd_bw_gigabytes_per_second") * 1e9,
        "peak_cmem_write_bw": g("peak_cmem_wr_bw_gigabytes_per_second") * 1e9,
        "peak_vmem_read_bw": g("peak_vmem_rd_bw_gigabytes_per_second") * 1e9,
        "peak_vmem_write_bw": g("peak_vmem_wr_bw_gigabytes_per_second") * 1e9,
    }


def _device_planes(run):
    space = run.xspace()
    return [p for p in space.planes if p.name.startswith("/device:TPU:") and "SparseCore" not in p.name]


class DeviceOpMetrics:
    """Device op metrics of a run, all TPU cores combined (XProf's
    `device_op_metrics_db`).

    `ops`: DataFrame, one row per HLO op (program_id, name, expression,
    category, provenance, deduplicated_name, occurrences, time_ps,
    self_time_ps (ps), flops, model_flops (FLOPs over all occurrences),
    bytes_accessed, hbm_read_bytes, hbm_write_bytes, on_chip_read_bytes,
    on_chip_write_bytes (bytes)); `total_time_ps` (sum over cores of first op
    start to last op end), `total_op_time_ps` (sum of self times),
    `idle_time_ps`; `program_names` {program_id: "name(id)"}; `peaks`
    (see `chip_peaks`); `reason` says why `ops` is empty.
    """

    def __init__(self, ops, total_time_ps, total_op_time_ps, program_names, peaks, reason=""):
        self.ops = ops
        self.total_time_ps = int(total_time_ps)
        self.total_op_time_ps = int(total_op_time_ps)
        self.idle_time_ps = max(0, self.total_time_ps - self.total_op_time_ps)
        self.program_names = program_names
        self.peaks = peaks
        self.reason = reason

    @property
    def empty(self):
        return self.ops.empty


def _program_names(run):
    names = {}
    for key in getattr(run, "hlo_protos", {}) or {}:
        if key.endswith(")") and "(" in key:
            try:
                names[int(key[key.rindex("(") + 1:-1])] = key
            except ValueError:
                pass
    return names


def device_op_metrics(run) -> DeviceOpMetrics:
    """Per-HLO-op metrics over all TPU cores of `run` (see DeviceOpMetrics)."""
    per_core, total = [], 0
    for plane in _device_planes(run):
        ops, t = _plane_op_metrics(plane)
        if ops is None:
            continue
        per_core.append(ops)
        total += max(t, int(ops["self_time_ps"].sum()))
    peaks = chip_peaks(run)
    if not per_core:
        return DeviceOpMetrics(pd.DataFrame(columns=["program_id", "name"] + _SUM_COLUMNS), 0, 0,
                               _program_names(run), peaks,
                               reason="no device (TPU) XLA ops in this profile; XProf shows an empty op profile")
    allops = pd.concat(per_core, ignore_index=True)
    sums = [c for c in _SUM_COLUMNS if c in allops]
    firsts = allops.groupby(["program_id", "name"], sort=False).first()
    summed = allops.groupby(["program_id", "name"], sort=False)[sums].sum()
    ops = firsts.drop(columns=[c for c in sums if c in firsts]).join(summed).reset_index()
    ops = ops.rename(columns={"hlo_category": "category", "tf_op": "provenance"})
    ops["category"] = ops["category"].fillna("").astype(str)
    ops["provenance"] = ops["provenance"].fillna("").astype(str)
    ops["deduplicated_name"] = ops["deduplicated_name"].fillna("").astype(str)
    ops["has_breakdown"] = ops["has_breakdown"].astype(bool)
    ops["normalized_time_ps"] = ops["time_ps"]
    op_time = int(ops["self_time_ps"].sum())
    return DeviceOpMetrics(ops, total, op_time, _program_names(run), peaks)


_HLO_STATS_COLUMNS = [
    "rank", "program_id", "program", "category", "hlo_op_name", "expression", "framework_op", "occurrences",
    "total_time_ps", "avg_time_ps", "self_time_ps", "avg_self_time_ps", "self_time_fraction",
    "cumulative_self_time_fraction", "flop_rate_gflops", "model_flop_rate_gflops", "memory_bw_gibs",
    "hbm_bw_gibs", "cmem_read_bw_gibs", "cmem_write_bw_gibs", "operational_intensity", "bound_by",
]


def hlo_stats(run) -> pd.DataFrame:
    """XProf's HLO op statistics: one row per HLO op, by self time descending.

    Columns: rank, program_id, program ("name(id)"), category, hlo_op_name,
    expression (HLO text), framework_op, occurrences, total_time_ps,
    avg_time_ps, self_time_ps, avg_self_time_ps (ps), self_time_fraction and
    cumulative_self_time_fraction (of all device time, idle included, 0-1),
    flop_rate_gflops and model_flop_rate_gflops (GFLOP/s), memory_bw_gibs
    (all bytes accessed), hbm_bw_gibs, cmem_read_bw_gibs, cmem_write_bw_gibs
    (GiB/s, as XProf's table), operational_intensity (FLOP/byte), bound_by
    ("Compute", "HBM", ... or "Unknown"). Empty (with `attrs["reason"]`) when
    the profile has no device ops.
    """
    db = device_op_metrics(run)
    if db.empty:
        out = pd.DataFrame(columns=_HLO_STATS_COLUMNS)
        out.attrs["reason"] = db.reason
        return out
    ops = db.ops[db.ops["occurrences"] > 0].copy()
    ops = ops.iloc[np.lexsort((np.arange(len(ops)), -ops["self_time_ps"].to_numpy()))]
    t_ns = ops["time_ps"].to_numpy(dtype=float) / 1e3
    with np.errstate(divide="ignore", invalid="ignore"):
        div = lambda a, b: np.where(b > 0, a / np.where(b > 0, b, 1), 0.0)  # noqa: E731
        flop_rate = div(ops["flops"].to_numpy(float), t_ns)
        model_rate = div(ops["model_flops"].to_numpy(float), t_ns)
        mem_bw = div(ops["bytes_accessed"].to_numpy(float), t_ns) * _GIB_PER_GB
        hbm_bytes = np.where(ops["has_breakdown"], ops["hbm_bytes"], ops["bytes_accessed"]).astype(float)
        hbm_bw = div(hbm_bytes, t_ns) * _GIB_PER_GB
        cmem_r = div(ops["cmem_read_bytes"].to_numpy(float), t_ns) * _GIB_PER_GB
        cmem_w = div(ops["cmem_write_bytes"].to_numpy(float), t_ns) * _GIB_PER_GB
        intensity = div(ops["flops"].to_numpy(float), ops["bytes_accessed"].to_numpy(float))
    p = db.peaks
    utils = np.stack([
        div(flop_rate, np.full_like(flop_rate, p["peak_flops"] / 1e9)),
        div(hbm_bw, np.full_like(hbm_bw, p["peak_hbm_bw"] / 1e9 * _GIB_PER_GB)),
        np.where(ops["cmem_read_bytes"] > 0, div(cmem_r, np.full_like(cmem_r, p["peak_cmem_read_bw"] / 1e9 * _GIB_PER_GB)), 0),
        np.where(ops["cmem_write_bytes"] > 0, div(cmem_w, np.full_like(cmem_w, p["peak_cmem_write_bw"] / 1e9 * _GIB_PER_GB)), 0),
    ])
    labels = np.array(["Unknown", "Compute", "HBM", "CMEM Read", "CMEM Write"], dtype=object)
    best = np.where(utils.max(axis=0) > 0, utils.argmax(axis=0) + 1, 0)
    self_ps = ops["self_time_ps"].to_numpy(dtype=np.int64)
    frac = self_ps / db.total_time_ps if db.total_time_ps else np.zeros(len(ops))
    occ = ops["occurrences"].to_numpy(dtype=np.int64)
    pid = ops["program_id"].to_numpy()
    out = pd.DataFrame({
        "rank": np.arange(1, len(ops) + 1),
        "program_id": pid,
        "program": [db.program_names.get(int(x), "main") for x in pid],
        "category": ops["category"].to_numpy(),
        "hlo_op_name": ops["name"].to_numpy(),
        "expression": np.where(ops["expression"] == "", ops["name"], ops["expression"]),
        "framework_op": ops["provenance"].to_numpy(),
        "occurrences": occ,
        "total_time_ps": ops["time_ps"].to_numpy(dtype=np.int64),
        "avg_time_ps": ops["time_ps"].to_numpy(float) / occ,
        "self_time_ps": self_ps,
        "avg_self_time_ps": self_ps / occ,
        "self_time_fraction": frac,
        "cumulative_self_time_fraction": np.cumsum(frac),
        "flop_rate_gflops": flop_rate,
        "model_flop_rate_gflops": model_rate,
        "memory_bw_gibs": mem_bw,
        "hbm_bw_gibs": hbm_bw,
        "cmem_read_bw_gibs": cmem_r,
        "cmem_write_bw_gibs": cmem_w,
        "operational_intensity": intensity,
        "bound_by": labels[best],
    })
    out.attrs["reason"] = ""
    return out
