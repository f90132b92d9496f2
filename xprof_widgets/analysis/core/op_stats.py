"""Device op metrics per HLO op and XProf's HLO op statistics.

XProf (`xplane_to_op_metrics_db.cc`, `op_metrics_db_utils.cc`) builds one
op-metrics database per TPU core from the "XLA Ops" line, keyed by
(program_id, symbol_id) from each event's metadata, then combines cores by
(program_id, op name) and adds an IDLE row for the time no op ran. This module
does the same with numpy group-bys over events; the only Python loops are over
distinct ops (event metadata), never over events.

On GPUs (`ConvertDeviceTraceXPlaneToOpMetricsDb`) the ops are the kernels that
name an XLA op (`hlo_op`, `program_id`) or a TF op (`tf_op`): one occurrence per
kernel, consecutive kernels of one op and step as one entry, FLOPs and bytes from
XLA's GPU cost analysis of the HloProto (`hlo_cost`, XProf's own source of them)
times the kernels, IDLE per GPU the span of its events less their time; peaks from
`gpu_device`. Every number equals XProf 2.24.2's (tests/test_gpu_ops.py).

Beyond XProf, a CPU-only profile falls back to XLA:CPU thunks on `/host:CPU` (JAX
on CPU): FLOPs and bytes from XLA's CPU cost rules (`flops_estimated`), and with no
known peak for the processor, utilisations are NaN.
"""

from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from ...io import column_cache
from .cache import derived, per_run
from .columns import Groups, by_pair
from .command_buffers import COMMAND_BUFFER_PREFIX, attributed_codes, graph_note
from .device_time import device_timespans
from .gpu_device import gpu_peaks, peak_stat
from .intervals import children_time
from .planes import HOST_PLANE, gpu_planes, is_derived_line, tensor_core_planes
from .runlike import RunLike
from .tf_op import hlo_op_name, parse_tf_op, stat_ids

IDLE = "IDLE"
_OP_LINE = "XLA Ops"
_HBM = 1  # MemorySpace id XProf uses for off-chip memory
_READ, _WRITE = 1, 2

# Bytes by memory of an op's memory access breakdown.
_MEMORY_COLUMNS = [
    "hbm_read_bytes",
    "hbm_write_bytes",
    "hbm_bytes",
    "on_chip_read_bytes",
    "on_chip_write_bytes",
    "cmem_read_bytes",
    "cmem_write_bytes",
    "vmem_read_bytes",
    "vmem_write_bytes",
]
# Columns of the op metrics table (one row per HLO op, all cores summed).
SUM_COLUMNS = [
    "occurrences",
    "time_ps",
    "self_time_ps",
    "children_time_ps",
    "flops",
    "model_flops",
    "bytes_accessed",
    *_MEMORY_COLUMNS,
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
        r = dict.fromkeys(_MEMORY_COLUMNS, 0)
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


def _column_at(st, idx, name):
    """Stat `name` of events `idx` of a line's stat columns (`Line.stat_columns`; None where
    the line lacks it)."""
    return np.asarray(st[name][idx], dtype=object) if name in st else np.full(len(idx), None)


def _plane_op_metrics(plane):
    """(ops DataFrame keyed by program_id/symbol_id, total_time_ps) for one core."""
    try:
        line = plane.line(_OP_LINE)
    except (KeyError, ValueError):
        line = None
    if line is None or len(line) == 0:
        return None, 0
    begin, dur = device_timespans(line)
    end = begin + dur
    total_time = int(end.max() - begin.min())
    children = children_time(begin, end)
    ev = pd.DataFrame({"metadata_id": line.metadata_id, "occurrences": 1, "time_ps": dur, "children_time_ps": children})
    per_md = ev.groupby("metadata_id", sort=True).sum()
    ids = per_md.index.to_numpy(dtype=np.int64)
    names = [
        "program_id",
        "symbol_id",
        "hlo_category",
        "tf_op",
        "flops",
        "model_flops",
        "bytes_accessed",
        "memory_access_breakdown",
        "deduplicated_name",
        "source",
        "source_stack",
    ]
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
    # TPU program ids are 64-bit hashes: read exactly (uint64), a double among them (a
    # damaged file) only when whole, finite and not negative.
    pid = pd.to_numeric(df["program_id"], errors="coerce")
    sym = pd.to_numeric(df["symbol_id"], errors="coerce")
    if pid.dtype.kind == "f":
        pid = pid.where(np.isfinite(pid) & (pid >= 0) & (pid < 2**64))
    if sym.dtype.kind == "f":
        sym = sym.where(np.isfinite(sym) & (sym.abs() < 2**63))
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
        ["occurrences", "time_ps", "self_time_ps", "children_time_ps"]
    ].sum()
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
    g = lambda k: peak_stat(stats, k)  # noqa: E731  (unknown, 0, where not a sane peak)
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
    """The TPU tensor-core planes of every host, in host order (XProf combines them all)."""
    return [p for space in run.xspaces() for p in tensor_core_planes(space)]


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

    `source` is "tpu" or "gpu" (XProf's computations; GPU ops also carry
    `opcode`, `num_cores` (GPUs it ran on), `source_file`, `source_line`,
    `stack_frame`) or "cpu" (XLA:CPU thunks on the host, beyond XProf: `ops` also
    has `flops_estimated`, `opcode` and `hlo_module`; peaks are NaN (unknown),
    there is no idle time (total = summed op self time), and `notes` says so).
    """

    def __init__(self, ops, total_time_ps, total_op_time_ps, program_names, peaks, reason="", source="tpu", notes=""):
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
    for key in run.hlo_protos or {}:
        if key.endswith(")") and "(" in key:
            try:
                names[int(key[key.rindex("(") + 1 : -1])] = key
            except ValueError:
                pass
    return names


def framework_op(provenance, hlo_name):
    """(name, category) of the framework op an HLO op comes from, as XProf's TF-op
    database keys it (`CreateTfMetricsDbFromDeviceOpMetricsDb`): the parsed provenance's
    name and type ("Unknown" without a type); no provenance: (HLO name, "Unknown").
    Vectorised over distinct values by the caller. Arguments are str.
    """
    if not provenance:
        return hlo_name, "Unknown"
    _, name, kind = parse_tf_op(provenance)
    return name, kind or "Unknown"


def device_framework_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """XProf's database of the framework ops that ran on the device
    (`CreateTfMetricsDbFromDeviceOpMetricsDb`), from HLO op rows (`DeviceOpMetrics.ops`):
    a row per framework op (`framework_op`), in the order first seen; its type is its
    first HLO op's, its occurrences the most of any of its HLO ops', its times, FLOPs and
    bytes summed. Columns: name, type, occurrences, time_ps, self_time_ps, flops,
    model_flops, bytes_accessed."""
    mapped: dict = {}  # over distinct ops, never events; columns, no frame: a few ops
    key = [
        mapped[p] if p in mapped else mapped.setdefault(p, framework_op(*p))
        for p in zip(ops["provenance"].astype(str).tolist(), ops["name"].astype(str).tolist())
    ]
    names = np.array([k[0] for k in key], dtype=object)
    kinds = np.array([k[1] for k in key], dtype=object)
    amounts = ("flops", "model_flops", "bytes_accessed")
    g = Groups(names)
    return g.frame(
        {"name": names},
        type=g.first(kinds),
        occurrences=g.max(ops["occurrences"].to_numpy(np.int64)),
        **{c: g.sum(ops[c].to_numpy(np.int64)) for c in ("time_ps", "self_time_ps")},
        **{c: g.sum(ops[c].to_numpy(np.float64)) for c in amounts},
    )


@per_run
def device_op_metrics(run: RunLike) -> DeviceOpMetrics:
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
        gpu = gpu_planes(space)
        if gpu:
            return _gpu_op_metrics(run)
        host = [p for p in space.planes if p.name == HOST_PLANE]
        db = _hlo_event_op_metrics(run, host, "cpu") if host and not gpu else None
        if db is not None:
            return db
        what = "GPU kernels" if gpu else "host events"
        return DeviceOpMetrics(
            pd.DataFrame(columns=["program_id", "name"] + SUM_COLUMNS),
            0,
            0,
            _program_names(run),
            peaks,
            reason=(
                "no device (TPU) XLA ops in this profile, and no " + what + " carry an "
                "`hlo_op` stat (not XLA-compiled); XProf shows an empty op profile"
            ),
        )
    allops = pd.concat(per_core, ignore_index=True)
    sums = [c for c in SUM_COLUMNS if c in allops]
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


# --- GPU kernels: XProf's device op database (xplane_to_op_metrics_db.cc) ---------------

GPU_RUN_COLUMNS = [
    "order",
    "device",
    "xla",
    "program_id",
    "name",
    "tf_op",
    "event_name",
    "occurrences",
    "time_ps",
    "is_eager",
]


def gpu_kernel_runs(run, space):
    """XProf's GPU op database of one file, before aggregation: one row per op entry
    (`ConvertDeviceTraceXPlaneToOpMetricsDb`), in XProf's order, and each GPU plane's
    busy span. Computed once per file (the op metrics and the GPU op database of the
    overview both read it); `is_eager` from `grouping.eager_events`.

    Kernel events of the `/device:GPU:*` planes (derived lines left out): an XLA op is
    an event whose `hlo_op` (its last `::` part) names an instruction of its
    `program_id`'s module, else it is skipped; consecutive events of one op and one step
    (`group_id`; an event without one never joins) are one entry of the first event's
    op, `occurrences` its kernels. Any other event with a `tf_op` stat is a TF op entry
    `name/kernel`. Returns (DataFrame with GPU_RUN_COLUMNS, [span_ps per plane]), the
    span from the first event start to the last event end over all lines, read from
    the events' offsets as XProf does. Kernels run in CUDA graphs name their command
    buffer, not their op: they take the op `command_buffers.attributed_ops` found when the
    run attributes them (beyond XProf). `attrs["command_buffer_kernels"]`: how many
    kernels were skipped for naming an XLA command buffer (a CUDA graph) rather than
    their op.
    """
    key = ("gpu_kernel_runs", run.attribute_cuda_graphs)
    return derived(space, key, lambda: _cached_gpu_kernel_runs(run, space))


#: The name `gpu_kernel_runs` has in the column cache; a new number when what it computes changes.
_RUNS_CACHE = "gpu-kernel-runs-1"
_RUNS_STRINGS = ("name", "tf_op", "event_name")


def _cached_gpu_kernel_runs(run, space):
    """`_gpu_kernel_runs`, restored from the column cache where an earlier process kept it
    for this file as it is now (the grouping pass and the kernels' stats it reads cost most
    of a GPU tool's time on tens of MB), else computed and kept."""
    if not gpu_planes(space):
        return _gpu_kernel_runs(run, space)
    name = f"{_RUNS_CACHE}-{'graphs' if run.attribute_cuda_graphs else 'plain'}"
    found = column_cache.load_derived(space, name)
    if found is not None:
        restored = _restored_runs(*found)
        if restored is not None:
            return restored
    out = _gpu_kernel_runs(run, space)
    column_cache.store_derived_later(space, name, lambda: _saved_runs(*out))
    return out


def _saved_runs(frame, spans):
    """(meta, arrays) of `_gpu_kernel_runs`' result: numbers as they are, each text column
    as codes into its distinct values (in the meta; None: code -1)."""
    arrays, strings = {}, {}
    for col in GPU_RUN_COLUMNS:
        values = frame[col].to_numpy()
        if col in _RUNS_STRINGS:
            arrays[col], strings[col] = column_cache.text_codes(values)
        else:
            arrays[col] = np.asarray(values, dtype=np.float64 if col == "order" else np.int64)
    meta = {
        "rows": len(frame),
        "strings": strings,
        "spans": [int(x) for x in spans],
        "command_buffer_kernels": int(frame.attrs.get("command_buffer_kernels", 0)),
    }
    return meta, arrays


def _restored_runs(meta, arrays):
    """`_saved_runs`' inverse; None where what was kept does not fit together."""
    try:
        n = int(meta["rows"])
        if set(arrays) != set(GPU_RUN_COLUMNS) or any(len(a) != n for a in arrays.values()):
            return None
        columns = {}
        for col in GPU_RUN_COLUMNS:
            a = np.asarray(arrays[col])
            if col in _RUNS_STRINGS:
                columns[col] = column_cache.text_values(a, meta["strings"][col])
                if columns[col] is None:
                    return None
            elif col in ("xla", "is_eager"):
                columns[col] = a.astype(bool)
            else:
                columns[col] = a.copy()
        frame = _runs_frame(columns)
        frame.attrs["command_buffer_kernels"] = int(meta["command_buffer_kernels"])
        return frame, [int(x) for x in meta["spans"]]
    except (KeyError, TypeError, ValueError):
        return None


def _gpu_kernel_runs(run, space):
    from .grouping import eager_events, forward_filled_group_ids, gpu_stats_ahead, of_line
    from .xla_ops import program_modules

    planes = gpu_planes(space)
    if not planes:
        return pd.DataFrame(columns=GPU_RUN_COLUMNS), []
    gpu_stats_ahead(space)
    modules = program_modules(run)
    eager = eager_events(space)
    frames, spans, offset = [], [], 0
    in_buffers = 0  # kernels skipped for naming their command buffer
    for d, plane in enumerate(planes):
        lines = [(li, line) for li, line in plane.busy_lines if not is_derived_line(line)]
        lo, hi = None, 0
        for _, line in lines:
            rel = line.start_ps.astype(np.int64) - np.int64(line.timestamp_ns) * 1000
            end = rel + line.event_duration_ps.astype(np.int64)
            lo = int(rel.min()) if lo is None else min(lo, int(rel.min()))
            hi = max(hi, int(end.max()))
        spans.append(hi - lo if hi and lo is not None else 0)
        group_of = forward_filled_group_ids(space, plane)
        for li, line in lines:
            n = len(line)
            # Texts as codes into each line's few distinct values (a line holds 100,000
            # kernels of a few hundred ops), strings only per entry at the end.
            st = line.stat_table(names=["hlo_op", "tf_op"])
            # Kernels of CUDA graphs given their ops.
            hlo, hlo_values = attributed_codes(run, space, plane, li, *st.str_codes("hlo_op"))
            tf, tf_values = st.str_codes("tf_op")
            program = line.stat_columns(names=["program_id"]).get("program_id")
            pid = stat_ids(program) if program is not None else np.full(n, np.nan)
            is_hlo = hlo >= 0  # a string, even "": then found nowhere
            is_tf = ~is_hlo & np.array([v != "" for v in tf_values] + [False], dtype=bool)[tf]
            idx = np.flatnonzero(is_hlo | is_tf)
            if not len(idx):
                offset += n
                continue
            # Per distinct value: its op's name ("" for a TF op, -1 code).
            op_names = np.array([hlo_op_name(v) for v in hlo_values] + [""], dtype=object)
            codes = hlo[idx]
            pids = pid[idx]
            # No program id (or not a number): -1, found nowhere. (Whole numbers: grouped by
            # a table over their range, not hashed.)
            pids = np.where(np.isnan(pids), -1.0, pids).astype(np.int64)
            # (Bound per line: the codes are this line's.)
            found = lambda p, c, op=op_names: p >= 0 and modules.instruction(int(p), op[c]) is not None  # noqa: E731
            keep = ~is_hlo[idx] | by_pair(pids, codes, found, where=is_hlo[idx], dtype=bool)
            # Kernels of a command buffer: their op is the buffer, no instruction of the program.
            buffer = np.array([str(v).startswith(COMMAND_BUFFER_PREFIX) for v in op_names], dtype=bool)
            in_buffers += int(buffer[codes[~keep]].sum())
            idx, codes, pids = idx[keep], codes[keep], pids[keep]
            if not len(idx):
                offset += n
                continue
            # One number per distinct name: ops of different values may share a name.
            same_name = pd.factorize(op_names)[0]
            names = same_name[codes]
            xla = is_hlo[idx]
            group = group_of[li][idx]
            # A new entry where the op or step changes (an event without a step compares
            # unequal to any), or a TF op comes between.
            prev_xla = np.concatenate([[False], xla[:-1]])
            prev_name = np.concatenate([[-1], names[:-1]])
            prev_group = np.concatenate([[-2], group[:-1]])
            new = ~xla | ~prev_xla | (names != prev_name) | (group != prev_group) | (group < 0)
            # Entries are runs of consecutive kernels: each one's first and last kernel
            # (positions on the line), no grouping sort. (The first kernel starts one.)
            starts = np.flatnonzero(new)
            first, last = idx[starts], idx[np.append(starts[1:], len(idx)) - 1]
            entry_xla = xla[starts]
            # (Columns per line, one DataFrame per file: a host may hold thousands of lines.)
            frames.append(
                {
                    "xla": entry_xla,
                    "program_id": pids[starts],
                    "name": op_names[codes[starts]],
                    "tf_op": np.append(np.asarray(tf_values, dtype=object), None)[tf[first]],
                    "event_name": line.name_table(np.nan)[np.asarray(line.names().codes)[first]],
                    "occurrences": np.diff(np.append(starts, len(idx))),
                    "time_ps": np.add.reduceat(line.event_duration_ps[idx].astype(np.int64), starts),
                    "is_eager": of_line(eager, plane, li, False)[first],
                    # An XLA entry enters XProf's database when the next op arrives: after
                    # its last event.
                    "order": np.where(entry_xla, offset + last + 0.5, offset + first),
                    "device": np.full(len(first), d, np.int64),
                }
            )
            offset += n
    if not frames:
        out = pd.DataFrame(columns=GPU_RUN_COLUMNS)
    else:
        runs = {k: np.concatenate([f[k] for f in frames]) for k in frames[0]}
        order = np.argsort(runs["order"], kind="stable")
        if len(order) and (np.diff(order) != 1).any():  # (in order already where lines come in time order)
            runs = {k: v[order] for k, v in runs.items()}
        xla = runs["xla"].astype(bool)
        pid = np.asarray(runs["program_id"], dtype=np.float64)
        runs["program_id"] = np.where(xla & ~np.isnan(pid), pid, 0).astype(np.int64)
        runs["tf_op"] = np.where(xla, None, runs["tf_op"]).astype(object)
        out = _runs_frame(runs)
    out.attrs["command_buffer_kernels"] = in_buffers
    return out, spans


def _runs_frame(columns):
    """The DataFrame of `gpu_kernel_runs` from its columns, the texts as objects (str or
    None): pandas would check every row to make them its str dtype, 20 ms a file of
    100,000 entries."""
    return pd.DataFrame(
        {k: pd.Series(columns[k], dtype=object) if k in _RUNS_STRINGS else columns[k] for k in GPU_RUN_COLUMNS},
        copy=False,  # (a block per column: not stacked into one of each dtype, a copy)
    )


_GPU_COST_COLUMNS = ["flops", "model_flops", "bytes_accessed", "hbm_read_bytes", "hbm_write_bytes"]


def _gpu_op_metrics(run):
    """DeviceOpMetrics of the GPU kernels of every file, XProf's numbers. Without any
    kernel of an XLA or TF op it has no ops, only the devices' time (all idle), and
    a reason."""
    from .xla_ops import category, expression, program_modules, provenance, source_info

    modules = program_modules(run)
    frames, total, op_time, first_plane = [], 0, 0, None
    in_buffers = 0
    for space in run.xspaces():
        runs, spans = gpu_kernel_runs(run, space)
        in_buffers += runs.attrs.get("command_buffer_kernels", 0)
        planes = gpu_planes(space)
        if first_plane is None and planes:
            first_plane = planes[0]
        device = runs["device"].to_numpy(np.int64)
        on_plane = device < len(spans)
        busy = np.zeros(len(spans), np.int64)  # (the planes' kernel time, exact in int64)
        np.add.at(busy, device[on_plane], runs["time_ps"].to_numpy(np.int64)[on_plane])
        for d, span in enumerate(spans):
            t = int(busy[d])
            total += max(span, t)
            op_time += t
        if len(runs):
            frames.append(runs.assign(file=len(frames)))
    peaks = dict.fromkeys(chip_peaks(run), 0.0)
    if first_plane is not None:
        p = gpu_peaks(first_plane.stats)
        peaks.update(
            peak_flops=p["peak_flops"],
            peak_hbm_bw=p["peak_hbm_bw"],
            peak_on_chip_read_bw=p["peak_on_chip_read_bw"],
            peak_on_chip_write_bw=p["peak_on_chip_write_bw"],
        )
    if not frames:
        return DeviceOpMetrics(
            pd.DataFrame(
                columns=["program_id", "name", "category", "provenance", "expression", "deduplicated_name"]
                + SUM_COLUMNS
            ),
            total,
            0,
            dict(modules.names),
            peaks,
            source="gpu",
            reason=graph_note(run)
            or "no GPU kernel names an XLA op (`hlo_op` stat) or a TF op (`tf_op` stat), so XProf shows only idle time",
        )
    runs = pd.concat(frames, ignore_index=True)
    # Costs per entry: the first event's instruction, once per kernel (XProf's EnterOp).
    xla = runs["xla"].to_numpy(bool)

    def cost(program_id, name):  # per distinct XLA op: from its program's cost model
        c = modules.costs(int(program_id), "gpu")
        return c.of(name) if c is not None else (0, 0, 0, 0, 0)

    tf_names = {v: parse_tf_op(v) for v in set(runs.loc[~runs["xla"], "tf_op"].dropna())}
    names = runs["name"].to_numpy(dtype=object).copy()
    tf = np.flatnonzero(~xla)  # TF ops: few on XLA programs, each named after its TF op and kernel
    names[tf] = [
        f"{tf_names[t][1]}/{e}" for t, e in zip(runs["tf_op"].to_numpy()[tf], runs["event_name"].to_numpy()[tf])
    ]
    program_id = runs["program_id"].to_numpy(np.int64)
    # (Columns, one DataFrame at the end: a pod's worker builds this for every host.)
    g = Groups(program_id, names)
    first_rows = g.order[g.starts]
    # An XLA entry's (program, name) is its op's key: its costs asked once per op.
    op_costs = np.zeros((g.n, 5))
    for k in np.flatnonzero(g.any(xla)):
        op_costs[k] = cost(program_id[first_rows[k]], names[first_rows[k]])
    occurrences = runs["occurrences"].to_numpy(np.int64)
    # An op's costs times the kernels of its XLA entries (every XLA entry of a group has
    # the op's costs): the sum of XProf's per-entry products (whole numbers), one rounding.
    xla_kernels = g.sum(np.where(xla, occurrences, 0)).astype(np.float64)
    flops, model, nbytes, read, write = (op_costs[:, k] * xla_kernels for k in range(5))
    model = np.where(op_costs[:, 1] > 0, model, flops)  # XProf: no model FLOPs -> the device FLOPs
    sums = {
        "occurrences": g.sum(occurrences),
        "time_ps": g.sum(runs["time_ps"].to_numpy(np.int64)),
        **dict(zip(_GPU_COST_COLUMNS, (flops, model, nbytes, read, write))),
    }
    op_xla, op_tf = g.first(xla), g.first(runs["tf_op"].to_numpy())
    rows = []
    for pid, name, is_xla, tf_op in zip(program_id[first_rows], names[first_rows], op_xla, op_tf):
        if is_xla:
            instr = modules.instruction(int(pid), name)
            file, line, stack = source_info(instr, modules.module(int(pid)))
            rows.append(
                (
                    category(instr),
                    expression(instr),
                    provenance(instr),
                    instr.metadata.deduplicated_name,
                    instr.opcode,
                    file,
                    line,
                    stack,
                )
            )
        else:
            cat, _, kind = parse_tf_op(tf_op)
            rows.append((kind or "unknown", "", tf_op, "", "", "", -1, ""))
    meta_names = ["category", "expression", "provenance", "deduplicated_name", "opcode"]
    meta_names += ["source_file", "source_line", "stack_frame"]
    meta = dict(zip(meta_names, (list(c) for c in zip(*rows)))) if rows else {k: [] for k in meta_names}
    meta["category"] = [c if c != "" else "unknown" for c in meta["category"]]
    device = runs["file"].to_numpy() * 10**6 + runs["device"].to_numpy()
    hbm = sums["hbm_read_bytes"] + sums["hbm_write_bytes"]
    columns = {
        "program_id": program_id[first_rows],
        "name": names[first_rows],
        "xla": op_xla,
        **sums,
        "is_eager": g.any(runs["is_eager"].to_numpy(bool)),
        "num_cores": g.nunique(device),
        **{k: np.asarray(v, dtype=np.int64 if k == "source_line" else object) for k, v in meta.items()},
        "self_time_ps": sums["time_ps"],
        "children_time_ps": np.zeros(g.n, np.int64),
        "normalized_time_ps": np.zeros(g.n, np.int64),
        "hbm_bytes": hbm,
        "has_breakdown": hbm > 0,
    }
    for c in SUM_COLUMNS:
        columns.setdefault(c, np.zeros(g.n, np.int64))
    columns["flops_estimated"] = np.zeros(g.n, bool)
    ops = pd.DataFrame(columns, copy=False)  # (a block per column, not stacked: a copy)
    notes = graph_note(run, int(occurrences.sum()) + in_buffers)
    return DeviceOpMetrics(ops, total, op_time, dict(modules.names), peaks, source="gpu", notes=notes)


# --- XLA:CPU thunks on the host (JAX on CPU; beyond XProf, which has no op profile there) ---

# Control-flow thunks contain other thunks, which are counted on their own.
_CONTAINERS = {"while", "call", "conditional", "async-start", "async-done"}


def _hlo_event_op_metrics(run, planes, source):
    """DeviceOpMetrics from the events of `planes` that carry `hlo_op`, or None.

    Times come from the events (ps), all kernels of an op summed; self time
    subtracts events nested on the same line (a `while` thunk around its
    body's thunks). `kernels` counts events, `occurrences` executions (see
    below). FLOPs and bytes come from XLA's cost analysis of the HloProto
    (`hlo_cost`, XLA:CPU's rules) per execution, multiplied by the executions.
    """
    frames = []
    for plane in planes:
        for _, line in plane.busy_lines:
            if is_derived_line(line):
                continue
            # Columns, not a DataFrame, of the events with an `hlo_op` only: a few thousand
            # thunks among millions of events (a Python tracer's calls).
            idx = np.flatnonzero(line.stat_table(names=["hlo_op"]).present("hlo_op"))
            if len(idx) == 0:
                continue
            st = line.stat_columns(names=["hlo_op", "hlo_module", "program_id"], events=idx)
            if "hlo_op" not in st:
                continue
            has = np.flatnonzero(~pd.isna(st["hlo_op"]))  # (of `idx`)
            idx = idx[has]
            if len(idx) == 0:
                continue
            begin = line.start_ps[idx].astype(np.int64)
            dur = line.event_duration_ps[idx].astype(np.int64)
            col = functools.partial(_column_at, st, has)
            frames.append(
                pd.DataFrame(
                    {
                        "name": col("hlo_op").astype(str),
                        "hlo_module": col("hlo_module"),
                        "program_id": pd.to_numeric(pd.Series(col("program_id")), errors="coerce").to_numpy(),
                        "event_name": np.asarray(line.names()[idx], dtype=object),
                        "kernels": 1,
                        "time_ps": dur,
                        "children_time_ps": children_time(begin, begin + dur),
                    }
                )
            )
    if not frames:
        return None
    ev = pd.concat(frames, ignore_index=True)
    ev["hlo_module"] = ev["hlo_module"].fillna("").astype(str)
    names = _program_names(run)
    if ev["program_id"].isna().any():
        # Kernels may name their module without its id: take the id of the only
        # module of that name, else -1.
        base = {k: v[: v.rindex("(")] for k, v in names.items()}
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
    for pid, mod in (
        ops.loc[~ops["program_id"].isin(list(names)), ["program_id", "hlo_module"]]
        .drop_duplicates("program_id")
        .itertuples(index=False)
    ):
        names[int(pid)] = f"{mod}({pid})" if pid >= 0 else (mod or "main")
    info = _hlo_op_info(run, ops, mode=source)
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
    for c in SUM_COLUMNS:
        if c not in ops:
            ops[c] = 0
    ops["has_breakdown"] = False
    ops["normalized_time_ps"] = ops["time_ps"]
    op_time = int(ops["self_time_ps"].sum())
    nan = float("nan")
    peaks = dict.fromkeys(chip_peaks(run), nan)
    notes = (
        "Ops from XLA:CPU thunks on the host, not an XProf tool (XProf shows no op profile for a CPU run). "
        "FLOPs and bytes come from XLA's cost analysis of the HloProto with XLA:CPU's rules (one FLOP per "
        "element of an elementwise op, transcendentals not counted), see `flops_estimated`. The processor's "
        "peak FLOP/s and bandwidth are unknown, so utilisations are NaN. Time fractions are of the summed op "
        "self time (ops on several threads overlap, so there is no idle time)."
    )
    return DeviceOpMetrics(ops, op_time, op_time, names, peaks, source=source, notes=notes)


def _hlo_op_info(run, ops, mode="cpu"):
    """Per (program_id, name) of `ops`, from its module's HloProto: opcode,
    category, expression, provenance (op_name metadata), deduplicated_name,
    flops_per_occurrence (FLOPs), bytes_per_occurrence (bytes accessed) of XLA's cost
    analysis (`mode` "cpu" or "gpu"), flops_estimated and in_hlo. Loops over distinct
    ops only."""
    from .xla_ops import category, expression, program_modules

    modules = program_modules(run)
    rows = []
    for pid, name in set(zip(ops["program_id"].astype(np.int64), ops["name"])):
        instr = modules.instruction(int(pid), name)
        if instr is None:
            continue
        costs = modules.costs(int(pid), mode)
        _, model, nbytes, _, _ = costs.of(name) if costs is not None else (0, 0, 0, 0, 0)
        if instr.opcode in _CONTAINERS:
            model = nbytes = 0  # the thunks inside are counted on their own
        rows.append(
            {
                "program_id": int(pid),
                "name": name,
                "opcode": instr.opcode,
                "category": category(instr),
                "expression": expression(instr),
                "provenance": instr.metadata.op_name,
                "deduplicated_name": instr.metadata.deduplicated_name,
                "flops_per_occurrence": float(model),
                "bytes_per_occurrence": float(nbytes),
                "flops_estimated": bool(model or nbytes),
                "in_hlo": True,
            }
        )
    cols = [
        "program_id",
        "name",
        "opcode",
        "category",
        "expression",
        "provenance",
        "deduplicated_name",
        "flops_per_occurrence",
        "bytes_per_occurrence",
        "flops_estimated",
        "in_hlo",
    ]
    info = pd.DataFrame(rows, columns=cols)
    info["program_id"] = info["program_id"].astype(np.int64)
    return info
