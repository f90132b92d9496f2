"""XProf's kernel stats database: one report per distinct GPU kernel launch.

XProf (`xplane_to_kernel_stats_db.cc` `ConvertDeviceTraceXPlaneToKernelReports`,
`kernel_stats_utils.cc`, the kernel part of `xplane_to_op_stats.cc`, and
`op_stats_combiner.cc` for several hosts) makes one report per distinct kernel launch:

* a kernel is an event of a `/device:GPU:N` plane (a line that is not one of XProf's
  derived lines) with a non-empty `kernel_details` stat and a duration (a launch shorter
  than 1 ns counts, as 0 ns);
* `kernel_details` gives the launch: `regs:`, `static_shared:`, `dynamic_shared:`,
  `block:x,y,z`, `grid:x,y,z` (1,1,1 unless given as three integers), `occ_pct:`;
* the op: a `tf_op` stat gives the framework op's name; a kernel whose `hlo_op` (its
  last `::` part) names an instruction of its `program_id`'s module takes that
  instruction's framework op instead (the name of `op_name:op_type` of its metadata);
* "uses TensorCore" comes from the kernel's name, with the patterns of the plane's
  vendor: NVIDIA's (`h884`, `hmma`, `xmma_gemm`, ...) or, in XProf 2.24.2, AMD's (`mfma`,
  `wmma`, `gemm_fusion`, `Custom_Cijk_`, `_MI<m>x<n>x<k>`); none without a vendor;
* "op is TensorCore eligible": the op's name is one XProf lists (`Conv2D`, `/MatMul`,
  `BatchMatMul`, ... and, in 2.24.2, any name with `dot_general` or
  `conv_general_dilated`), or a two-operand einsum `equation`, or (framework op only)
  the kernel uses TensorCores.

Reports are keyed by kernel name, grid, block, registers, shared memory, the two
TensorCore flags and the op name (the occupancy is the first launch's); per host they
are sorted by total duration, longest first, ties by that key, the top 1000 kept. Hosts'
lists are concatenated (the same kernel on two hosts is two rows) and sorted again.
Durations are whole nanoseconds, as XProf counts them; the average is the total
divided by the launches in whole nanoseconds.

The AMD rules and the JAX eligibility are not in XProf's public sources of 2.23; they
were found by running XProf 2.24.2 on made-up kernels (tests/test_kernel_stats.py checks
them the same way).
"""

from __future__ import annotations

import re
from functools import partial

import numpy as np
import pandas as pd

from .columns import Groups, by_category
from .command_buffers import add_summaries, attributed_codes, host_graph_summary
from .planes import KERNEL_STATS, TPU_PLANE_PREFIX, gpu_planes, is_derived_id
from .tf_op import hlo_op_name, parse_tf_op, tf_op_fullname

#: XProf shows at most this many kernels (kernel_stats_utils.cc kMaxNumOfKernels).
MAX_KERNELS = 1000

NO_GPU = "the profile has no GPU plane (`/device:GPU:N`): kernel statistics are for GPU kernels"
NO_KERNELS = (
    "no event on the GPU planes carries a `kernel_details` stat (launch parameters), so there are "
    "no kernels to list; the GPU tracer wrote only memory copies, or the profile comes from a "
    "backend that does not record kernel launches"
)
TPU_PLANES = "the profile has TPU planes; XProf reads kernel statistics from GPU planes only when there are none"

_NVIDIA_TC_PATTERNS = (
    "16816",
    "c1688",
    "conv1x1",
    "conv2d_c1_k1",
    "dgrad_1x1_stride_2x2",
    "direct_group",
    "first_layer_wgrad_kernel",
    "h1688",
    "h884",
    "hmma",
    "i16832",
    "i8816",
    "s884",
    "s1688",
    "xmma_gemm",
    "xmma_implicit_gemm",
    "xmma_sparse_conv",
    "xmma_sparse_gemm",
    "xmma_warp_specialized_implicit_gemm",
)
_AMD_TC = re.compile(r"mfma|wmma|gemm_fusion|Custom_Cijk_|_MI[0-9]+x[0-9]+x[0-9]+")
_NVIDIA_TC = re.compile("|".join(re.escape(p) for p in _NVIDIA_TC_PATTERNS))
_TC_OP_ENDS = (
    "Conv2D",
    "Conv2DBackpropFilter",
    "Conv2DBackpropInput",
    "Conv3D",
    "DepthwiseConv2dNative",
    "DepthwiseConv2dNativeBackpropFilter",
    "DepthwiseConv2dNativeBackpropInput",
    "/MatMul",
    "FusedMatMul",
    "/CudnnRNN",
    "XlaDot",
    "XlaDotV2",
)
_TC_OP_CONTAINS = (
    "BatchMatMul",
    "CudnnRNNV",
    "CudnnRNNForward",
    "CudnnRNNBackprop",
    "dot_general",
    "conv_general_dilated",
)
_UINT = re.compile(r"\s*\+?[0-9]+\s*")


def uses_tensor_core(kernel_name: str, vendor) -> bool:
    """Whether XProf 2.24.2 says a kernel uses TensorCores (matrix cores), from its name and
    the plane's `device_vendor` ("Nvidia" or "AMD"; any other: never)."""
    if vendor == "Nvidia":
        return bool(_NVIDIA_TC.search(kernel_name))
    if vendor == "AMD":
        return bool(_AMD_TC.search(kernel_name))
    return False


def op_tensor_core_eligible(op_name: str) -> bool:
    """XProf's list of ops that can run on TensorCores (`IsOpTensorCoreEligible`, with the
    JAX ops of 2.24.2)."""
    return op_name.endswith(_TC_OP_ENDS) or any(p in op_name for p in _TC_OP_CONTAINS)


def einsum_tensor_core_eligible(equation: str) -> bool:
    """A two-operand einsum (`ab,bc->ac`) can use TensorCores."""
    parts = equation.split("->") if equation else []
    return len(parts) == 2 and len(parts[0].split(",")) == 2


def _uint32(text):
    if not _UINT.fullmatch(text):
        return None
    v = int(text)
    return v if v < 2**32 else None


def parse_kernel_details(details: str) -> dict:
    """Launch parameters from a `kernel_details` stat, as XProf's ParseKernelLaunchParams:
    registers_per_thread, static_shmem_bytes, dynamic_shmem_bytes, block (3 ints),
    grid (3 ints), occupancy_pct. Unrecognised or malformed tokens are skipped."""
    out = {
        "registers_per_thread": 0,
        "static_shmem_bytes": 0,
        "dynamic_shmem_bytes": 0,
        "block": (1, 1, 1),
        "grid": (1, 1, 1),
        "occupancy_pct": 0.0,
    }
    keys = {
        "regs": "registers_per_thread",
        "static_shared": "static_shmem_bytes",
        "dynamic_shared": "dynamic_shmem_bytes",
    }
    for token in re.split(r"[ \n]", details):
        kv = token.split(":")
        if len(kv) != 2:
            continue
        key, value = kv
        if key in keys:
            v = _uint32(value)
            if v is not None:
                out[keys[key]] = v
        elif key in ("block", "grid"):
            dims = [_uint32(x) for x in value.split(",")]
            if len(dims) == 3 and all(d is not None for d in dims):
                out[key] = tuple(dims)
        elif key == "occ_pct":
            try:
                out["occupancy_pct"] = float(value)
            except ValueError:
                pass
    return out


def _name_uses_tc(name, vendor):
    return uses_tensor_core(str(name), vendor)


class _Texts:
    """A text column of many lines' events built from each line's string codes: per event
    a code into the values seen so far (0: "", the value of an event without the stat),
    made one Categorical at the end, equal strings merged. No str object per event: a
    host holds 100,000 kernels of a few hundred distinct names and details."""

    def __init__(self):
        self._codes: list = []
        self._values: list = [np.array([""], dtype=object)]
        self._size = 1

    def add_values(self, codes, values):
        """Events' codes (-1: no value, "") into `values`, a line's own table of texts."""
        codes = np.asarray(codes, dtype=np.int64)  # (a Categorical's codes may be int8)
        self._codes.append(np.where(codes < 0, 0, codes + self._size))
        self._values.append(np.asarray(values, dtype=object))
        self._size += len(values)

    def add_stat(self, table, name, keep):
        """Stat `name` of a line's events `keep` (positions), as `StatTable.str_column`."""
        codes, values = table.str_codes(name)
        self.add_values(codes[keep], values)

    def codes(self):
        """(per event a code into the distinct texts, the distinct texts: object array)."""
        values = np.concatenate(self._values)
        merged, distinct = pd.factorize(values)
        codes = np.concatenate(self._codes) if self._codes else np.zeros(0, np.int64)
        return merged[codes], np.asarray(distinct, dtype=object)


#: `host_kernel_events`' columns, in order; of them, the texts (Categoricals there, codes and
#: distinct texts in `_kernel_event_columns`).
_EVENT_COLUMNS = (
    *("name", "duration_ns", "details", "tf_op", "equation", "hlo_op"),
    *("is_xla", "program_id", "has_program_id", "uses_tc"),
)
_EVENT_TEXTS = ("name", "details", "tf_op", "equation", "hlo_op")


def host_kernel_events(run, space):
    """The kernel events of a host's GPU planes, in XProf's order (plane, line, event):
    DataFrame with name, duration_ns, details, tf_op, equation, hlo_op (Categoricals of
    str, "" where the event has none), is_xla (has an `hlo_op` string), program_id
    (uint64), has_program_id and uses_tc (`uses_tensor_core` of its name and the plane's
    `device_vendor`, asked once per name of the plane); None without any. A kernel run in
    a CUDA graph has the op it was attributed as its `hlo_op` when the run attributes them
    (`command_buffers.attributed_ops`)."""
    found = _kernel_event_columns(run, space)
    if found is None:
        return None
    columns, texts = found
    text = {k: pd.Categorical.from_codes(c, categories=pd.Index(v, dtype=object)) for k, (c, v) in texts.items()}
    return pd.DataFrame({k: text[k] if k in text else columns[k] for k in _EVENT_COLUMNS})


def _kernel_event_columns(run, space):
    """`host_kernel_events` as numpy columns: ({column: array} of the non-text columns,
    {text column: (codes, distinct texts)}), or None. Columns are joined once per host, not
    made into a frame per line (a host may hold 20,000 GPU planes of a kernel each), and
    texts stay codes (`_Texts`): the kernel reports group by the codes, and a DataFrame of
    Categoricals (10 ms for 100,000 kernels) is made only where one is asked for."""
    from .grouping import gpu_stats_ahead

    gpu_stats_ahead(space)  # (the file's GPU lines decoded from the last on a thread)
    parts = []
    texts = {k: _Texts() for k in _EVENT_TEXTS}
    for plane in gpu_planes(space):
        vendor = None
        for li, line in plane.busy_lines:
            if is_derived_id(line.id):
                continue
            st = line.stat_table(names=KERNEL_STATS)
            if "kernel_details" not in st:
                continue
            dur_ps = line.event_duration_ps.astype(np.int64)
            details, detail_values = st.str_codes("kernel_details")
            written = np.array([v != "" for v in detail_values], dtype=bool)
            keep = np.flatnonzero((dur_ps > 0) & (details >= 0) & np.append(written, False)[details])
            if not len(keep):
                continue
            dur_ns = dur_ps // 1000  # XProf stores each launch's duration in whole ns
            if vendor is None:
                vendor = (plane.stats.get("device_vendor"),)
                tensor_core: dict = {}  # a plane's names -> uses_tc by code (by_category)
                rule = partial(_name_uses_tc, vendor=vendor[0])
            names = line.names()
            name_codes = np.asarray(names.codes)[keep]
            uses_tc = by_category(tensor_core, names, rule, rule(""), bool)
            table = line.name_table()
            texts["name"].add_values(np.where(name_codes < 0, len(table) - 1, name_codes), table)
            texts["details"].add_values(details[keep], detail_values)
            texts["tf_op"].add_stat(st, "tf_op", keep)
            texts["equation"].add_stat(st, "equation", keep)
            hlo, hlo_values = st.str_codes("hlo_op")
            is_xla = hlo >= 0  # (a string, before any op of a CUDA graph is given)
            hlo, hlo_values = attributed_codes(run, space, plane, li, hlo, hlo_values)
            texts["hlo_op"].add_values(hlo[keep], hlo_values)
            parts.append(
                {
                    "duration_ns": dur_ns[keep],
                    "is_xla": is_xla[keep],
                    "program_id": st.int_column("program_id", dtype=np.uint64)[keep],
                    "has_program_id": st.present("program_id")[keep],
                    "uses_tc": uses_tc[name_codes],
                }
            )
    if not parts:
        return None
    columns = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    return columns, {k: t.codes() for k, t in texts.items()}


_KEY = [
    "kernel_name",
    "grid_0",
    "grid_1",
    "grid_2",
    "block_0",
    "block_1",
    "block_2",
    "registers_per_thread",
    "static_shmem_bytes",
    "dynamic_shmem_bytes",
    "is_kernel_using_tensor_core",
    "is_op_tensor_core_eligible",
    "op_name",
]


def _host_reports(run, space, modules):
    """One host's kernel reports (XProf's KernelReportMap over its GPU planes), sorted
    and cut to the top MAX_KERNELS, with the host's kernels run in CUDA graphs and their
    ops in `attrs["graph_kernels"]` (`command_buffers.GraphAttribution.kernels`). None
    when the host has no kernel."""
    found = _kernel_event_columns(run, space)
    if found is None:
        return None
    ev, texts = found
    text = ("tf_op", "equation", "hlo_op")
    codes = {c: texts[c][0] for c in _EVENT_TEXTS}
    categories = {c: texts[c][1] for c in _EVENT_TEXTS}
    cols = ["tf_op", "equation", "is_xla", "program_id", "has_program_id", "hlo_op", "uses_tc"]
    column = {c: codes[c] if c in codes else ev[c] for c in cols}
    # One pass over the kernels: grouped by all that a report's key comes from (the name,
    # the launch text, what the framework op comes from); the rest is done per group.
    fine = Groups(codes["name"], codes["details"], *(column[c] for c in cols), dropna=False)
    at = fine.order[fine.starts]  # each group's first kernel (groups in order of it)
    # The framework op and its eligibility, per distinct combination (never per kernel).
    by_combo = Groups(*(column[c][at] for c in cols), dropna=False)
    combo_first = at[by_combo.order[by_combo.starts]]
    firsts = [categories[c][codes[c][combo_first]] if c in text else column[c][combo_first] for c in cols]
    names, flags = [], []
    for t, eq, is_xla, pid, has_pid, hlo, uses in zip(*firsts):
        name = parse_tf_op(t)[1] if t else ""
        ok = bool(t) and (einsum_tensor_core_eligible(eq) or op_tensor_core_eligible(name) or uses)
        instr = modules.instruction(int(pid), hlo_op_name(hlo)) if is_xla and has_pid else None
        if instr is not None:
            name = parse_tf_op(tf_op_fullname(instr.metadata.op_type, instr.metadata.op_name))[1]
            ok = op_tensor_core_eligible(name) or ok
        names.append(name)
        flags.append(ok)
    op_code, op_names = pd.factorize(np.asarray(names, dtype=object))
    op_code = op_code[by_combo.codes]  # (per group of kernels)
    eligible = np.asarray(flags, dtype=bool)[by_combo.codes]
    # Launch details parsed once per distinct text; the report's key fields numbered per
    # distinct value (texts differing in occupancy only are one key).
    code = codes["details"]
    launch = [parse_kernel_details(d) for d in categories["details"]]
    fields = ("registers_per_thread", "static_shmem_bytes", "dynamic_shmem_bytes")
    launch_key = pd.factorize(
        pd.Series([(*v["grid"], *v["block"], *(v[k] for k in fields)) for v in launch], dtype=object)
    )[0]
    uses_tc = ev["uses_tc"].astype(bool, copy=False)
    # The reports: the groups of kernels by the report's key (a report's first group holds
    # its first kernel: groups are in order of their first kernels).
    g = Groups(codes["name"][at], launch_key[code[at]], op_code, eligible, uses_tc[at])
    lead = g.order[g.starts]
    first = at[lead]
    first_launch = [launch[k] for k in code[first].tolist()]
    duration = ev["duration_ns"]
    reports = pd.DataFrame(
        {
            "kernel_name": categories["name"][codes["name"][first]],
            **{
                f"{k}_{i}": np.array([v[k][i] for v in first_launch], dtype=np.int64)
                for k in ("grid", "block")
                for i in range(3)
            },
            **{k: np.array([v[k] for v in first_launch], dtype=np.int64) for k in fields},
            "is_kernel_using_tensor_core": uses_tc[first],
            "is_op_tensor_core_eligible": eligible[lead],
            "op_name": np.asarray(op_names, dtype=object)[op_code[lead]],
            "occurrences": g.sum(fine.size()),
            "total_duration_ns": g.sum(fine.sum(duration)),
            "min_duration_ns": g.min(fine.min(duration)),
            "max_duration_ns": g.max(fine.max(duration)),
            "occupancy_pct": np.array([v["occupancy_pct"] for v in first_launch], dtype=np.float64),
        }
    )
    out = _sorted_top(reports)
    out.attrs["graph_kernels"] = host_graph_summary(run, space)
    return out


def _sorted_top(reports):
    """XProf's order: total duration descending, then the key ascending; top MAX_KERNELS."""
    # (One stable lexsort of codes: pandas' sort on 14 columns costs milliseconds a host.)
    keys = []
    for k in reversed(_KEY):
        column = reports[k].to_numpy()
        keys.append(pd.factorize(column, sort=True)[0] if column.dtype == object else column)
    order = np.lexsort([*keys, -reports["total_duration_ns"].to_numpy(np.int64)])
    return reports.iloc[order[:MAX_KERNELS]].reset_index(drop=True)


def combine_kernel_reports(reports):
    """The reports of several hosts (`all_hosts_reports` of each, in host order; None for a
    host left out) as the reports of them all: every host's reports sorted and cut again (a
    report in the top of all hosts is in the top of its own host), or why none."""
    frames = [r for r in reports if isinstance(r, pd.DataFrame)]
    if frames:
        return frames[0] if len(frames) == 1 else _combined(frames)
    reasons = {r for r in reports if isinstance(r, str)}
    if reasons <= {NO_GPU}:
        return NO_GPU
    return NO_KERNELS if NO_KERNELS in reasons else TPU_PLANES


def _combined(frames):
    """Hosts' reports sorted and cut together, their graph kernels added up."""
    graphs = add_summaries(f.attrs.get("graph_kernels", add_summaries([])) for f in frames)
    out = _sorted_top(pd.concat(frames, ignore_index=True))
    out.attrs = {"graph_kernels": graphs}
    return out


def all_hosts_reports(run):
    """XProf's kernel stats database of `run` (all hosts combined, sorted, cut), durations
    in ns, with every host's file read in this process: DataFrame with the report key
    (kernel_name, grid_0..2, block_0..2, registers_per_thread, static_shmem_bytes,
    dynamic_shmem_bytes, is_kernel_using_tensor_core, is_op_tensor_core_eligible,
    op_name), occurrences, total_duration_ns, min_duration_ns, max_duration_ns,
    occupancy_pct. A str (why there is none) when the run has no kernel. A part of
    `run_stats.RunStats` (`kernels`), built once per run."""
    from .xla_ops import program_modules

    spaces = run.xspaces()
    is_tpu = [any(p.name.startswith(TPU_PLANE_PREFIX) for p in s.planes) for s in spaces]
    if not any(gpu_planes(s) for s in spaces):
        result = NO_GPU
    else:
        modules = program_modules(run)
        # A host with TPU planes: XProf reads those, which have no kernels.
        hosts = [r for r in (_host_reports(run, s, modules) for s, t in zip(spaces, is_tpu) if not t) if r is not None]
        if not hosts:
            result = TPU_PLANES if all(t for s, t in zip(spaces, is_tpu) if gpu_planes(s)) else NO_KERNELS
        else:
            result = hosts[0] if len(hosts) == 1 else _combined(hosts)
    return result
