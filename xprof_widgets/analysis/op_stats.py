"""Device op metrics per HLO op and XProf's HLO op statistics.

XProf (`xplane_to_op_metrics_db.cc`, `op_metrics_db_utils.cc`) builds one
op-metrics database per TPU core from the "XLA Ops" line, keyed by
(program_id, symbol_id) from each event's metadata, then combines cores by
(program_id, op name) and adds an IDLE row for the time no op ran. This module
does the same with numpy group-bys over events; the only Python loops are over
distinct ops (event metadata), never over events.

Beyond XProf, profiles without TPU ops fall back to events that carry an
`hlo_op` stat: GPU kernels of XLA programs (several kernels per op summed;
untested against real data) and XLA:CPU thunks on `/host:CPU` (JAX on CPU).
Those events have no FLOP or byte counts, so both are estimated from the
module's HloProto (`flops_estimated`), and with no known peak for the
processor, utilisations are NaN.
"""

from __future__ import annotations

import math

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

    `source` is "tpu" (XProf's computation), "gpu" (XLA kernels with an
    `hlo_op` stat) or "cpu" (XLA:CPU thunks on the host). For "gpu" and
    "cpu", `ops` also has `flops_estimated` (FLOPs and bytes derived from the
    HloProto), `opcode` and `hlo_module`; peaks are NaN (unknown), there is
    no idle time (total = summed op self time), and `notes` says so.
    """

    def __init__(self, ops, total_time_ps, total_op_time_ps, program_names, peaks, reason="",
                 source="tpu", notes=""):
        self.ops = ops
        self.total_time_ps = int(total_time_ps)
        self.total_op_time_ps = int(total_op_time_ps)
        self.idle_time_ps = max(0, self.total_time_ps - self.total_op_time_ps)
        self.program_names = program_names
        self.peaks = peaks
        self.reason = reason
        self.source = source
        self.notes = notes

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
    """Per-HLO-op metrics of `run` (see DeviceOpMetrics): over all TPU cores
    as XProf; failing those, over GPU kernels, then XLA:CPU thunks, that
    carry an `hlo_op` stat."""
    per_core, total = [], 0
    for plane in _device_planes(run):
        ops, t = _plane_op_metrics(plane)
        if ops is None:
            continue
        per_core.append(ops)
        total += max(t, int(ops["self_time_ps"].sum()))
    peaks = chip_peaks(run)
    if not per_core:
        space = run.xspace()
        gpu = [p for p in space.planes if p.name.startswith("/device:GPU:")]
        host = [p for p in space.planes if p.name == _HOST_PLANE]
        for source, planes in (("gpu", gpu), ("cpu", host)):
            db = _hlo_event_op_metrics(run, planes, source) if planes else None
            if db is not None:
                return db
        what = "GPU kernels" if gpu else "host events"
        return DeviceOpMetrics(pd.DataFrame(columns=["program_id", "name"] + _SUM_COLUMNS), 0, 0,
                               _program_names(run), peaks,
                               reason=("no device (TPU) XLA ops in this profile, and no " + what + " carry an "
                                       "`hlo_op` stat (not XLA-compiled); XProf shows an empty op profile"))
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


# --- Ops from events that carry an `hlo_op` stat (GPU kernels, XLA:CPU thunks) ---

_HOST_PLANE = "/host:CPU"
# XProf's derived GPU lines repeat the kernels' time; only raw stream lines count.
_DERIVED_LINES = {"XLA Modules", "XLA Ops", "TensorFlow Ops", "TensorFlow Name Scope", "Source code",
                  "Steps", "Framework Ops", "Framework Name Scope", "XLA TraceMe", "Launch Stats",
                  "SparseCore Ops", "SparseCore Modules"}
ELEMENTWISE_OPCODES = frozenset({
    "abs", "add", "and", "atan2", "cbrt", "ceil", "clamp", "compare", "complex", "convert", "cos", "divide",
    "exp", "expm1", "floor", "imag", "is-finite", "log", "log1p", "maximum", "minimum", "multiply", "negate",
    "not", "or", "popcnt", "power", "real", "remainder", "round-nearest-afz", "round-nearest-even", "rsqrt",
    "select", "shift-left", "shift-right-arithmetic", "shift-right-logical", "sign", "sin", "sqrt",
    "subtract", "tan", "tanh", "xor", "constant", "logistic", "erf",
})
_REDUCTIONS = {"reduce", "reduce-window", "all-reduce", "reduce-scatter"}
# Control-flow thunks contain other thunks, which are counted on their own.
_CONTAINERS = {"while", "call", "conditional", "async-start", "async-done"}
_BYTES_PER_ELEMENT = {
    "PRED": 1, "S8": 1, "U8": 1, "S16": 2, "U16": 2, "F16": 2, "BF16": 2, "S32": 4, "U32": 4, "F32": 4,
    "S64": 8, "U64": 8, "F64": 8, "C64": 8, "C128": 16,
}
_SUB_BYTE_BITS = {"S1": 1, "U1": 1, "S2": 2, "U2": 2, "S4": 4, "U4": 4, "F4E2M1FN": 4}


def _hlo_event_op_metrics(run, planes, source):
    """DeviceOpMetrics from the events of `planes` that carry `hlo_op`, or None.

    Times come from the events (ps), all kernels of an op summed; self time
    subtracts events nested on the same line (a `while` thunk around its
    body's thunks). `kernels` counts events, `occurrences` executions (see
    below). FLOPs and bytes are estimated per execution from the HloProto
    (see `_hlo_op_info`) and multiplied by the executions.
    """
    frames = []
    for plane in planes:
        for line in plane.lines:
            if line.name in _DERIVED_LINES or len(line) == 0:
                continue
            st = line.stats(names=["hlo_op", "hlo_module", "program_id"])
            if "hlo_op" not in st:
                continue
            idx = np.flatnonzero(st["hlo_op"].notna().to_numpy())
            if len(idx) == 0:
                continue
            begin = line.start_ps[idx].astype(np.int64)
            dur = line.event_duration_ps[idx].astype(np.int64)
            col = lambda k: st[k].to_numpy()[idx] if k in st else np.full(len(idx), None)  # noqa: E731
            frames.append(pd.DataFrame({
                "name": col("hlo_op").astype(str), "hlo_module": col("hlo_module"),
                "program_id": pd.to_numeric(pd.Series(col("program_id")), errors="coerce").to_numpy(),
                "event_name": np.asarray(line.names(), dtype=object)[idx],
                "kernels": 1, "time_ps": dur, "children_time_ps": _children_time(begin, begin + dur),
            }))
    if not frames:
        return None
    ev = pd.concat(frames, ignore_index=True)
    ev["hlo_module"] = ev["hlo_module"].fillna("").astype(str)
    names = _program_names(run)
    if ev["program_id"].isna().any():
        # Kernels may name their module without its id: take the id of the
        # only module of that name, else -1.
        base = {k: v[:v.rindex("(")] for k, v in names.items()}
        counts = pd.Series(list(base.values()), dtype=object).value_counts()
        by_module = {m: k for k, m in base.items() if counts[m] == 1}
        missing = ev["program_id"].isna()
        ev.loc[missing, "program_id"] = ev.loc[missing, "hlo_module"].map(by_module).fillna(-1)
    ev["program_id"] = ev["program_id"].astype(np.int64)
    g = ev.groupby(["program_id", "name"], sort=False)
    ops = g[["kernels", "time_ps", "children_time_ps"]].sum()
    ops["hlo_module"] = g["hlo_module"].first()
    # One execution of an op launches each of its kernels once: executions
    # are the count of its most frequent event name (thunks: one per event).
    per_name = ev.groupby(["program_id", "name", "event_name"], sort=False).size()
    ops["occurrences"] = per_name.groupby(level=[0, 1], sort=False).max()
    ops = ops.reset_index()
    ops["self_time_ps"] = ops["time_ps"] - ops["children_time_ps"]
    for pid, mod in ops.loc[~ops["program_id"].isin(list(names)), ["program_id", "hlo_module"]].drop_duplicates(
            "program_id").itertuples(index=False):
        names[int(pid)] = f"{mod}({pid})" if pid >= 0 else (mod or "main")
    info = _hlo_op_info(run, ops)
    ops = ops.merge(info, on=["program_id", "name"], how="left")
    ops["in_hlo"] = ops["in_hlo"].fillna(False).astype(bool)
    ops["flops_estimated"] = ops["flops_estimated"].fillna(False).astype(bool)
    for k in ("category", "expression", "provenance", "deduplicated_name", "opcode"):
        ops[k] = ops[k].fillna("").astype(str)
    ops.loc[ops["category"] == "", "category"] = "unknown"
    occ = ops["occurrences"].to_numpy(dtype=np.float64)
    ops["flops"] = ops["flops_per_occurrence"].fillna(0).to_numpy(float) * occ
    ops["model_flops"] = ops["flops"]
    ops["bytes_accessed"] = ops["bytes_per_occurrence"].fillna(0).to_numpy(float) * occ
    ops = ops.drop(columns=["flops_per_occurrence", "bytes_per_occurrence"])
    for c in _SUM_COLUMNS:
        if c not in ops:
            ops[c] = 0
    ops["has_breakdown"] = False
    ops["normalized_time_ps"] = ops["time_ps"]
    op_time = int(ops["self_time_ps"].sum())
    nan = float("nan")
    peaks = dict.fromkeys(chip_peaks(run), nan)
    peak_note = "The processor's peak FLOP/s and bandwidth are unknown, so utilisations are NaN."
    if source == "gpu":
        devices = getattr(run, "devices", None)
        gpus = devices[devices.kind == "GPU"] if devices is not None else []
        if len(gpus) and not np.isnan(gpus.peak_flops.iloc[0]):
            # The GPU's FP32 peak (SMs x clock x lanes of its compute capability) and HBM bandwidth.
            peaks["peak_flops"] = float(gpus.peak_flops.iloc[0])
            peaks["peak_hbm_bw"] = float(gpus.peak_hbm_bw.iloc[0])
            peak_note = ("Utilisations use the GPU's FP32 peak derived from its SMs, clock and compute "
                         "capability (tensor cores not counted) and its memory bandwidth.")
    what = "XLA GPU kernels (several kernels per HLO op summed)" if source == "gpu" else "XLA:CPU thunks on the host"
    notes = (f"Ops from {what}, not an XProf tool. FLOPs and bytes are estimated from the HloProto "
             "(dot: 2*M*N*K, convolution: 2*output*kernel/output-features, elementwise: 1 per output "
             f"element, reduce: 1 per input element; bytes: operands + result), see `flops_estimated`. {peak_note} "
             "Time fractions are of the summed op self time (ops on several threads/streams overlap, so "
             "there is no idle time).")
    return DeviceOpMetrics(ops, op_time, op_time, names, peaks, source=source, notes=notes)


def _elements(shape):
    if shape.tuple_shapes:
        return sum(_elements(s) for s in shape.tuple_shapes)
    return math.prod(shape.dimensions)


def _shape_bytes(shape, type_names):
    if shape.tuple_shapes:
        return sum(_shape_bytes(s, type_names) for s in shape.tuple_shapes)
    t = type_names.get(shape.element_type, "")
    n = math.prod(shape.dimensions)
    if t in _SUB_BYTE_BITS:
        return (n * _SUB_BYTE_BITS[t] + 7) // 8
    return n * _BYTES_PER_ELEMENT.get(t, 0)


def _shape_text(shape, type_names):
    if shape.tuple_shapes:
        return "(" + ", ".join(_shape_text(s, type_names) for s in shape.tuple_shapes) + ")"
    text = f"{type_names.get(shape.element_type, '?').lower()}[{','.join(map(str, shape.dimensions))}]"
    if shape.HasField("layout") and shape.dimensions:
        text += "{" + ",".join(map(str, shape.layout.minor_to_major)) + "}"
    return text


def dot_flops(instr, lhs_shape) -> int:
    """FLOPs of one HLO dot: 2 x output elements x contracted size
    (= 2*M*N*K, batch included), as XLA's HloCostAnalysis counts them."""
    k = math.prod(lhs_shape.dimensions[d] for d in instr.dot_dimension_numbers.lhs_contracting_dimensions)
    return 2 * _elements(instr.shape) * k


def _conv_flops(instr, rhs_shape):
    """2 x output elements x kernel elements per output feature (padding and
    dilation ignored)."""
    dims = list(rhs_shape.dimensions)
    kout = dims[instr.convolution_dimension_numbers.kernel_output_feature_dimension] if dims else 0
    return 2 * _elements(instr.shape) * (math.prod(dims) // kout) if kout else 0


def _instr_flops(instr, comp_by_id, shapes):
    """(FLOPs of one execution, whether any count was estimated) of an HLO
    instruction; fusions sum their fused instructions."""
    op = instr.opcode
    if op == "dot" and instr.operand_ids:
        return dot_flops(instr, shapes[instr.operand_ids[0]]), True
    if op == "convolution" and len(instr.operand_ids) > 1:
        return _conv_flops(instr, shapes[instr.operand_ids[1]]), True
    if op in ELEMENTWISE_OPCODES and op != "constant":
        return _elements(instr.shape), True
    if op in _REDUCTIONS and instr.operand_ids:
        return _elements(shapes[instr.operand_ids[0]]), True
    if op == "fusion":
        total, est = 0, False
        for cid in instr.called_computation_ids:
            comp = comp_by_id.get(cid)
            if comp is None:
                continue
            inner = {i.id: i.shape for i in comp.instructions}
            for i in comp.instructions:
                f, e = _instr_flops(i, comp_by_id, inner)
                total, est = total + f, est or e
        return total, True
    return 0, False


def _fusion_category(instr, comp_by_id):
    """XProf's names: fusions with a dot or convolution are "convolution
    fusion"; others "<kind> fusion" from `fusion_kind` (kLoop: "loop")."""
    stack, seen = list(instr.called_computation_ids), set()
    while stack:
        cid = stack.pop()
        if cid in seen or cid not in comp_by_id:
            continue
        seen.add(cid)
        for i in comp_by_id[cid].instructions:
            if i.opcode in ("dot", "convolution"):
                return "convolution fusion"
            stack.extend(i.called_computation_ids)
    kind = instr.fusion_kind[1:].lower() if instr.fusion_kind.startswith("k") else ""
    return f"{kind} fusion" if kind else "fusion"


def _expression(instr, names, comp_by_id, type_names):
    """HLO text of one instruction, as `HloInstruction::ToString` prints it
    (attributes limited to fusion kind/calls, dot dimensions and custom-call
    target)."""
    args = ", ".join(f"%{names.get(o, o)}" for o in instr.operand_ids)
    text = f"%{instr.name} = {_shape_text(instr.shape, type_names)} {instr.opcode}({args})"
    if instr.opcode == "fusion":
        text += f", kind={instr.fusion_kind}"
    if instr.opcode == "dot":
        d = instr.dot_dimension_numbers
        for label, v in (("lhs_batch_dims", d.lhs_batch_dimensions), ("lhs_contracting_dims", d.lhs_contracting_dimensions),
                         ("rhs_batch_dims", d.rhs_batch_dimensions), ("rhs_contracting_dims", d.rhs_contracting_dimensions)):
            if v:
                text += f", {label}={{{','.join(map(str, v))}}}"
    if instr.custom_call_target:
        text += f', custom_call_target="{instr.custom_call_target}"'
    called = [comp_by_id[c].name for c in instr.called_computation_ids if c in comp_by_id]
    if called:
        key = "calls" if instr.opcode in ("fusion", "call", "custom-call") else "to_apply"
        if instr.opcode == "while" and len(called) == 2:
            text += f", condition=%{called[0]}, body=%{called[1]}"
        else:
            text += f", {key}=" + ", ".join(f"%{c}" for c in called)
    return text


def _hlo_op_info(run, ops):
    """Per (program_id, name) of `ops`, from its module's HloProto: opcode,
    category, expression, provenance (op_name metadata), deduplicated_name,
    flops_per_occurrence (FLOPs), bytes_per_occurrence (operand and result
    bytes), flops_estimated and in_hlo. Loops over distinct ops only."""
    from ..io.hlo import parse_hlo_proto

    wanted = {}
    for pid, name in zip(ops["program_id"], ops["name"]):
        wanted.setdefault(int(pid), set()).add(name)
    by_pid = {}
    for key, data in (getattr(run, "hlo_protos", {}) or {}).items():
        try:
            by_pid[int(key[key.rindex("(") + 1:-1])] = data
        except ValueError:
            continue
    rows = []
    for pid, names in wanted.items():
        if pid not in by_pid:
            continue
        try:
            hlo = parse_hlo_proto(by_pid[pid])
        except Exception:  # a bad HLO proto only loses the op details
            continue
        module = hlo.hlo_module
        enum = type(module).DESCRIPTOR.fields_by_name["computations"].message_type.fields_by_name[
            "instructions"].message_type.fields_by_name["shape"].message_type.fields_by_name["element_type"].enum_type
        type_names = {v.number: v.name for v in enum.values}
        comp_by_id = {c.id: c for c in module.computations}
        for comp in module.computations:
            instrs = [i for i in comp.instructions if i.name in names]
            if not instrs:
                continue
            shapes = {i.id: i.shape for i in comp.instructions}
            id_names = {i.id: i.name for i in comp.instructions}
            for i in instrs:
                flops, est = _instr_flops(i, comp_by_id, shapes)
                if i.opcode in _CONTAINERS:
                    nbytes = 0
                else:
                    nbytes = _shape_bytes(i.shape, type_names) + sum(
                        _shape_bytes(shapes[o], type_names) for o in i.operand_ids if o in shapes)
                if i.opcode == "fusion":
                    cat = _fusion_category(i, comp_by_id)
                elif i.opcode in ELEMENTWISE_OPCODES:
                    cat = "non-fusion elementwise"
                else:
                    cat = i.opcode
                rows.append({
                    "program_id": pid, "name": i.name, "opcode": i.opcode, "category": cat,
                    "expression": _expression(i, id_names, comp_by_id, type_names),
                    "provenance": i.metadata.op_name, "deduplicated_name": i.metadata.deduplicated_name,
                    "flops_per_occurrence": float(flops), "bytes_per_occurrence": float(nbytes),
                    "flops_estimated": est or nbytes > 0, "in_hlo": True,
                })
    cols = ["program_id", "name", "opcode", "category", "expression", "provenance", "deduplicated_name",
            "flops_per_occurrence", "bytes_per_occurrence", "flops_estimated", "in_hlo"]
    info = pd.DataFrame(rows, columns=cols).drop_duplicates(["program_id", "name"])
    info["program_id"] = info["program_id"].astype(np.int64)
    return info


_HLO_STATS_COLUMNS = [
    "rank", "program_id", "program", "category", "hlo_op_name", "expression", "framework_op", "occurrences",
    "total_time_ps", "avg_time_ps", "self_time_ps", "avg_self_time_ps", "self_time_fraction",
    "cumulative_self_time_fraction", "flop_rate_gflops", "model_flop_rate_gflops", "memory_bw_gibs",
    "hbm_bw_gibs", "cmem_read_bw_gibs", "cmem_write_bw_gibs", "operational_intensity", "bound_by",
    "flops_estimated",
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
    ("Compute", "HBM", ... or "Unknown"), flops_estimated (FLOPs and bytes
    derived from the HloProto, not measured). Empty (with `attrs["reason"]`)
    when the profile has no device ops.

    Without TPU ops, rows come from GPU kernels or XLA:CPU thunks with an
    `hlo_op` stat (see `device_op_metrics`): fractions are of the summed op
    self time, hbm_bw_gibs is NaN and bound_by "Unknown" (no known peaks);
    `attrs["notes"]` says so.
    """
    db = device_op_metrics(run)
    if db.empty:
        out = pd.DataFrame(columns=_HLO_STATS_COLUMNS)
        out.attrs["reason"] = db.reason
        out.attrs["notes"] = db.notes
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
        "flops_estimated": ops["flops_estimated"].to_numpy(dtype=bool) if "flops_estimated" in ops
        else np.zeros(len(ops), dtype=bool),
    })
    if db.source != "tpu":
        out["hbm_bw_gibs"] = np.nan  # no HBM: bytes are in memory_bw_gibs
    out.attrs["reason"] = ""
    out.attrs["notes"] = db.notes
    return out
