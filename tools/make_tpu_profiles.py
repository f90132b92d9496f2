#!/usr/bin/env python3
"""Make TPU training profiles from the one real TPU profile we have (a JAX inference run
on a TPU v6e-4, `tests/data/profiles/tpu_v6e_inference`), the way libtpu writes them.

No real TPU training profile is public in a size we can ship, so these files are the real
v6e run with what a training run adds, written as the runtime writes it (learned from
XProf's `xplane_to_step_events.cc`, XLA's `group_events.cc` and XProf's own C++ tests that
build TPU planes by hand, e.g. `xplane_to_op_stats_test.cc` `TpuMultiDeviceStepDbTest`):

* a `Steps` line on every TensorCore plane (`/device:TPU:N`): one event per training step,
  named by its step number, with its device-clock span in `device_offset_ps` /
  `device_duration_ps` as the ops beside it have. Step k covers the k-th execution of the
  program `jit_f` and the time the core waits before and after it;
* `infeed` and `outfeed` ops on the `XLA Ops` line (event metadata with `hlo_category`
  "infeed" / "outfeed", as XLA's TPU backend names them), in the waits of each step;
* steps whose last op runs past the step's end (a Steps event cut short), where XProf's
  unsigned arithmetic goes wrong;
* host steps: `jax.profiler.StepTraceAnnotation("train", step_num=k)` around each call of
  the step program on the Python thread (`train` events with `_r` and `step_num`), which
  reach the device's steps through the launches' producer / consumer links;
* a pod: two hosts, each a file naming its host, with collectives, send / recv, host
  transfers and megacore fusions in each step;
* hardware counter samples (a `_counters_` line per TensorCore);
* `barrier-cores` waits (XLA TraceMe line) on three hosts, one waiting less than the others;
* serving: the real inference run (no Steps line) with each call of the program wrapped in
  a request, `TraceAnnotation("Request", _r=-1, request_id=k)`, as a server marks them;
* host input: host steps with a tf.data wait (`IteratorGetNext`) at the start of each, and
  no infeed op on the device (XProf then counts part of the TensorCores' idle time as input).
* SparseCores: two `/device:TPU:N SparseCore M` planes beside each TensorCore, with their
  own steps, modules and ops (`add_sparsecore_planes`).
* serving details: the two models' batches with TF Serving's batching parameters (a
  `/host:tfstreamz` plane) and the TPU runtime's tensor conversions (`Linearize`,
  `Delinearize`, `TransferBufferFromDevice-FastPath` with shapes and layouts).

Everything else (the ops, their FLOPs and bytes, the modules, the host threads, the HLO
protos) is the real file's. XProf 2.24.2 is the referee of every number we compute on
them (tests/test_tpu_steps.py).

    python tools/make_tpu_profiles.py OUT_DIR [--variant training|infeed|overrun|pod|host_steps|all]

writes OUT_DIR/<variant>/plugins/profile/run/tpu_host.xplane.pb.
"""

from __future__ import annotations

import argparse
import bisect
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: The training loop's program in the real run (100 executions per core).
STEP_PROGRAM = "jit_f("
VARIANTS = (
    "training",
    "infeed",
    "overrun",
    "pod",
    "host_steps",
    "counters",
    "barriers",
    "serving",
    "host_input",
    "megascale",
    "batches",
    "batches_models",
    "sparsecore",
    "sparsecore_planes",
    "serving_details",
)
#: The barriers variant's hosts and the share of each step their TensorCores wait at
#: `barrier-cores` (the last host waits less: a straggler the others wait for).
BARRIER_HOSTS = (("tpu-worker-0", 0.15), ("tpu-worker-1", 0.15), ("tpu-worker-2", 0.05))
#: The counters variant's hardware counters, as libtpu samples them on a TPU v6e (`TPU v6
#: Lite`): (register, its id, count per cycle of the sample). The
#: ids are the registers' (`tpu_counter_ids_v6e.h`, as XProf reads them); the idle MXU
#: count is what the others leave of the cycles.
_TC = "VF_CHIP_TC_TCS_TC_MISC_TCS_STATS_TCS_STATS_COUNTERS_UNPRIVILEGED_COUNT_"
COUNTERS = (
    (_TC + "CYCLES", 3257466888, 1.0),
    (_TC + "SCALAR_ALU_INSTRUCTION_0", 3257466968, 0.31),
    (_TC + "VECTOR_ALU_INSTRUCTION_0", 3257467136, 0.55),
    (_TC + "VPU_VALU_FMAC_OPS_1", 3257468712, 0.42),
    (_TC + "VST_INSTRUCTION", 3257467168, 0.12),
    (_TC + "VLD_INSTRUCTION_0", 3257467184, 0.4),
    (_TC + "MXU_BUSY_0", 3257467400, None),
    (_TC + "MXU_BUSY_1", 3257467408, 0.3),
    (_TC + "MXU_BUSY_2", 3257467416, 0.45),
    (_TC + "MATMUL_VREG_BF16_MXU_0", 3257467288, 0.05),
    (_TC + "MATMUL_LMR_BF16_MXU_1", 3257467360, 0.09),
    (_TC + "MATMUL_VREG_I8_MXU_0", 3257467320, 0.004),
    (_TC + "XLU_BUSY_1", 3257467544, 0.1),
    (_TC + "TRANSPOSE_XLU_0", 3257467504, 0.02),
    ("VF_CHIP_HBM_0_HBMC_0_CMN_HI_FREQ_STATS_COUNTERS_UNPRIVILEGED_RD_RESP_PS0", 3019980856, 0.8),
    ("VF_CHIP_HBM_1_HBMC_7_CMN_HI_FREQ_STATS_COUNTERS_UNPRIVILEGED_WR_REQ_PS1", 3068215328, 0.3),
    ("VF_CHIP_OCI_ICR_PERF_COUNTERS_FIFO_STATS_COUNTERS_UNPRIVILEGED_BN_RD_REQ_0_INSERTION_COUNT", 2953257136, 0.01),
    ("VF_CHIP_SC_0_SCT_0_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_CYCLES", 3490185224, 1.0),
    ("VF_CHIP_SC_0_SCT_3_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_VECTOR_ISSUE", 3496477632, 0.2),
    ("VF_CHIP_SC_1_SCS_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_CYCLES", 3576233992, 1.0),
    ("VF_CHIP_SC_1_SCS_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_SCALAR_ISSUE", 3576234000, 0.15),
)
#: What libtpu says of each counter (`performance_counter_description`, `..._sets`): the
#: hardware's own words, as XProf 2.24.2 also shows them for the counters it knows.
DESCRIPTIONS = {
    _TC + "CYCLES": (
        ("This counter increments once per clock cycle the entire time that this  group of counters is enabled."),
        "cycle_counter_window",
    ),
    _TC + "SCALAR_ALU_INSTRUCTION_0": (
        (
            "This counter counts scalar issue of bundles containing any instruction in the sN"
            " slot. (Instructions only count if their predication evaluates to true.)"
        ),
        "activity issue",
    ),
    _TC + "VECTOR_ALU_INSTRUCTION_0": (
        (
            "This counter increments when an instruction in the vector alu slot (vN) issues. "
            "(Instructions only count if their predication evaluates to true.)"
        ),
        "activity issue",
    ),
    _TC + "VPU_VALU_FMAC_OPS_1": (
        "VPU multiply-accumulate operations, slot 1",
        "tc_vpu",
    ),
    _TC + "VST_INSTRUCTION": (
        (
            "This counter increments when a vmem store instruction issues. (This does not "
            "count instructions such as Set IAR which use the vector store slot but are not "
            "vector stores.) (Instructions only count if their predication evaluates to "
            "true.)"
        ),
        "activity memory_activity",
    ),
    _TC + "VLD_INSTRUCTION_0": (
        (
            "This counter increments when a vmem load instruction in vld slot (vldN) issues. "
            "(This does not count instructions such as Read IAR which use vector load slot "
            "but are not vector loads.) (Instructions only count if their predication "
            "evaluates to true.)"
        ),
        "activity memory_activity",
    ),
    _TC + "MXU_BUSY_0": (
        (
            "These three counters increment for every cycle that: Counter0: No mxus  "
            "Counter1: Exactly 1 mxu  Counter2: Exactly 2 mxus are executing a matmul."
        ),
        "activity cycles",
    ),
    _TC + "MXU_BUSY_1": (
        (
            "These three counters increment for every cycle that: Counter0: No mxus  "
            "Counter1: Exactly 1 mxu  Counter2: Exactly 2 mxus are executing a matmul."
        ),
        "activity cycles",
    ),
    _TC + "MXU_BUSY_2": (
        (
            "These three counters increment for every cycle that: Counter0: No mxus  "
            "Counter1: Exactly 1 mxu  Counter2: Exactly 2 mxus are executing a matmul."
        ),
        "activity cycles",
    ),
    _TC + "MATMUL_VREG_BF16_MXU_0": (
        (
            "This counter increments when a vmatmul (Matrix Multiply) instruction issues with"
            " an LHS data type of BF16 sourced from a Vreg.(Instructions only count if their "
            "predication evaluates to true.) Counts instructions targeting mxuN."
        ),
        "activity issue",
    ),
    _TC + "MATMUL_LMR_BF16_MXU_1": (
        (
            "This counter increments when a vmatmul (Matrix Multiply) instruction issues with"
            " an LHS data type of BF16 sourced from the LMR.(Instructions only count if their"
            " predication evaluates to true.) Counts instructions targeting mxuN."
        ),
        "activity issue",
    ),
    _TC + "MATMUL_VREG_I8_MXU_0": (
        (
            "This counter increments when a vmatmul (Matrix Multiply) instruction issues with"
            " an LHS data type of S8 or U8 sourced from a Vreg.(Instructions only count if "
            "their predication evaluates to true.) Counts instructions targeting mxuN."
        ),
        "activity issue",
    ),
    _TC + "XLU_BUSY_1": (
        (
            "These three counters increment for every cycle that: Counter0: No xlus  "
            "Counter1: Exactly 1 xlu  Counter2: Exactly 2 xlus are busy."
        ),
        "activity cycles",
    ),
    _TC + "TRANSPOSE_XLU_0": (
        (
            "This counter increments when a Transpose instruction issues. (Instructions only "
            "count if their predication evaluates to true.)"
        ),
        "activity issue",
    ),
    "VF_CHIP_HBM_0_HBMC_0_CMN_HI_FREQ_STATS_COUNTERS_UNPRIVILEGED_RD_RESP_PS0": (
        (
            "This counter is incremented on a read response returned by Pseudo Channel 0.The "
            "increment is 1 per 32B beat."
        ),
        "data_transfer",
    ),
    "VF_CHIP_HBM_1_HBMC_7_CMN_HI_FREQ_STATS_COUNTERS_UNPRIVILEGED_WR_REQ_PS1": (
        (
            "This counter is incremented on a write request received at Pseudo Channel 1.The "
            "increment is 1 per 32B beat. Partial writes are not included."
        ),
        "data_transfer",
    ),
    "VF_CHIP_OCI_ICR_PERF_COUNTERS_FIFO_STATS_COUNTERS_UNPRIVILEGED_BN_RD_REQ_0_INSERTION_COUNT": (
        "Insertion counter: incremented by 1 at each insertion to queue",
        "insertion queue_stats",
    ),
    "VF_CHIP_SC_0_SCT_0_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_CYCLES": (
        ("This counter increments once per clock cycle the entire time that SCT stat counters are enabled."),
        "cycle_counter_window",
    ),
    "VF_CHIP_SC_0_SCT_3_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_VECTOR_ISSUE": (
        (
            "This counter increments whenever an instruction bundle undergoes vector issue. "
            "(Instructions only count if their predicate evaluates to true)."
        ),
        "activity issue vector",
    ),
    "VF_CHIP_SC_1_SCS_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_CYCLES": (
        ("This counter increments once per clock cycle the entire time that this group of counters is enabled."),
        "cycle_counter_window scalar",
    ),
    "VF_CHIP_SC_1_SCS_SC_STATS_COUNTERS_UNPRIVILEGED_COUNT_SCALAR_ISSUE": (
        (
            "This counter increments whenever an instruction bundle undergoes scalar issue. "
            "(Instructions only count if their predicate evaluates to true)."
        ),
        "activity issue scalar",
    ),
}
#: The v6e TensorCore clock: counters count its cycles.
CLOCK_PER_PS = 1.75e-3
#: A Pallas kernel whose counters libtpu sampled on their own (a `counters_<kernel>` line).
COUNTED_KERNEL = ("flash_attention", 2_000_000_000)
#: The pod variant's other waits and collectives, in each step's wait before its program:
#: (category, HLO, ms on core 0; each later core takes a tenth more).
POD_OPS = (
    ("all-reduce", "%all-reduce.7 = f32[1024]{0} all-reduce(f32[1024]{0} %grad), to_apply=%add", 1.1),
    ("send", "%send.1 = (f32[256]{0}, u32[], token[]) send(f32[256]{0} %x, token[] %t), channel_id=3", 0.37),
    ("recv-done", "%recv-done.1 = (f32[256]{0}, token[]) recv-done((f32[256]{0}, u32[], token[]) %r)", 0.23),
    (
        "host send",
        "%send.2 = (f32[64]{0}, u32[], token[]) send(f32[64]{0} %y, token[] %t), is_host_transfer=true",
        0.41,
    ),
    ("host recv", "%recv.2 = (f32[64]{0}, u32[], token[]) recv(token[] %t), is_host_transfer=true", 0.29),
    ("megacore fusion", "%fusion.99 = f32[8]{0} fusion(f32[8]{0} %z), kind=kLoop, calls=%megacore", 0.53),
)

#: Waits added before and after each step's program in the infeed variant (ps).
INFEED_GAP_PS = 40_000_000_000  # 40 ms
OUTFEED_GAP_PS = 12_000_000_000  # 12 ms


def _schema():
    sys.path.insert(0, str(HERE.parent))
    from xprof_widgets.io import schema

    return schema


def real_path() -> Path:
    """The real TPU v6e profile the variants are made from (shipped in tests/data)."""
    found = sorted((HERE.parent / "tests/data/profiles/tpu_v6e_inference").rglob("*.xplane.pb"))
    if not found:
        raise FileNotFoundError("tests/data/profiles/tpu_v6e_inference has no .xplane.pb")
    return found[0]


class _Plane:
    """Helpers to add metadata and events to one TensorCore plane."""

    def __init__(self, plane):
        self.plane = plane
        self.stat_ids = {m.name: i for i, m in plane.stat_metadata.items()}
        self.lines = {line.name: line for line in plane.lines}

    def _stat(self, event, name):
        sid = self.stat_ids.get(name)
        for s in event.stats:
            if s.metadata_id == sid:
                return s.uint64_value or s.int64_value
        return None

    def stat_id(self, name):
        if name not in self.stat_ids:
            sid = max(self.plane.stat_metadata, default=0) + 1
            self.plane.stat_metadata[sid].id = sid
            self.plane.stat_metadata[sid].name = name
            self.stat_ids[name] = sid
        return self.stat_ids[name]

    def metadata(self, name, category=None, program_id=None, shape=""):
        """New event metadata `name`; an op (`category` given) carries what libtpu puts on
        every op of a program: its category, program and symbol ids, FLOPs and bytes."""
        mid = max(self.plane.event_metadata, default=0) + 1
        md = self.plane.event_metadata[mid]
        md.id = mid
        md.name = name
        if category is None:
            return mid
        self._symbols = getattr(self, "_symbols", 1_000_000) + 1
        for key, kind, value in (
            ("hlo_category", "str_value", category),
            ("program_id", "uint64_value", program_id),
            ("symbol_id", "uint64_value", self._symbols),
            ("flops", "int64_value", 0),
            ("model_flops", "int64_value", 0),
            ("bytes_accessed", "int64_value", 4 * 128 * 1024),
            ("raw_bytes_accessed", "int64_value", 4 * 128 * 1024),
            ("shape_with_layout", "str_value", shape),
        ):
            s = md.stats.add()
            s.metadata_id = self.stat_id(key)
            setattr(s, kind, value)
        return mid

    def program_id(self, prefix):
        """The program id of the module named `prefix...` on this core (XLA Modules events
        are named `name(program_id)`)."""
        for md in self.plane.event_metadata.values():
            if md.name.startswith(prefix) and md.name.endswith(")"):
                return int(md.name[md.name.rindex("(") + 1 : -1])
        raise ValueError(f"no module named {prefix}...")

    def add_event(self, line, metadata_id, span):
        """An event over `span` = (host start, host end, device start, device end), ps: its
        offset on the host clock, its `device_offset_ps` / `device_duration_ps` stats on the
        device's, as libtpu writes every device event."""
        host_start, host_end, device_start, device_end = span
        e = line.events.add()
        e.metadata_id = metadata_id
        e.offset_ps = host_start - line.timestamp_ns * 1000
        e.duration_ps = host_end - host_start
        for name, value in (("device_offset_ps", device_start), ("device_duration_ps", device_end - device_start)):
            s = e.stats.add()
            s.metadata_id = self.stat_id(name)
            s.uint64_value = value
        return e

    def shift(self, starts, ends, gap_in, gap_out):
        """Move every device event by `gap_in` per step program started at or before it
        and `gap_out` per one ended at or before it: a wait before and after each."""

        def moved(t):
            return t + gap_in * bisect.bisect_right(starts, t) + gap_out * bisect.bisect_right(ends, t)

        for line in self.plane.lines:
            base = line.timestamp_ns * 1000
            for e in line.events:
                t = base + e.offset_ps
                d = moved(t) - t
                if not d:
                    continue
                e.offset_ps += d
                sid = self.stat_ids.get("device_offset_ps")
                for s in e.stats:
                    if s.metadata_id == sid:
                        s.uint64_value += d

    def program_spans(self):
        """(host start, host end, device start, device end) ps of each execution of the step
        program, in order: the module event's host span, and the device span of its ops
        (host and device clocks drift apart over a run; each op has its own offset)."""
        mods = self.lines["XLA Modules"]
        base = mods.timestamp_ns * 1000
        hosts = sorted(
            (base + e.offset_ps, base + e.offset_ps + e.duration_ps)
            for e in mods.events
            if self.plane.event_metadata[e.metadata_id].name.startswith(STEP_PROGRAM)
        )
        ops = self.lines["XLA Ops"]
        base = ops.timestamp_ns * 1000
        dev = sorted(
            (base + e.offset_ps, self._stat(e, "device_offset_ps"), self._stat(e, "device_duration_ps"))
            for e in ops.events
        )
        starts = [h for h, _, _ in dev]
        spans = []
        for h0, h1 in hosts:
            inside = dev[bisect.bisect_left(starts, h0) : bisect.bisect_right(starts, h1)]
            spans.append((h0, h1, min(d for _, d, _ in inside), max(d + n for _, d, n in inside)))
        return spans

    def add_steps(self, spans, first_step=0):
        """The `Steps` line: step `first_step + k` over spans[k] (both clocks, see `add_event`)."""
        line = self.plane.lines.add()
        line.id = max(x.id for x in self.plane.lines) + 1
        line.name = "Steps"
        line.timestamp_ns = self.lines["XLA Ops"].timestamp_ns
        for k, span in enumerate(spans):
            self.add_event(line, self.metadata(str(first_step + k)), span)
        self.lines["Steps"] = line
        return line


def tensor_core_planes(space):
    return [p for p in space.planes if p.name.startswith("/device:TPU:") and p.name[len("/device:TPU:") :].isdigit()]


def make(variant: str, src: Path | None = None, barrier_share: float = 0.15):
    """The XSpace of one variant (see the module doc), from the real file `src`
    (`barrier_share`: the barriers variant's share of each step at barrier-cores)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}")
    if variant == "megascale":  # (one slice; `write` makes two)
        space = make("training", src)
        add_megascale(space)
        return space
    if variant == "sparsecore":
        space = make("training", src)
        _add_sparsecore_v0(space)
        return space
    if variant == "sparsecore_planes":
        space = make("training", src)
        add_sparsecore_planes(space)
        return space
    schema = _schema()
    if variant in ("batches", "batches_models", "serving_details"):
        space = schema.XSpace()
        space.ParseFromString(Path(src or real_path()).read_bytes())
        _add_batches(space, tf_serving=variant == "batches")
        if variant == "serving_details":
            # model_a's parameters from two batch ops (the later op's max batch size, 64,
            # wins), and a model the profile does not run.
            add_tfstreamz(
                space,
                batching_metrics("model_a", "op1", 2, 1000, 32, 10, "8,16,32")
                + [(f"{_BATCHING}max_batch_size{{model_name=model_a, op_name=op2}}", 64)]
                + batching_metrics("other_model", "op", 8, 5, 4, 1, "4"),
            )
            add_tensor_events(space)
        return space
    space = schema.XSpace()
    space.ParseFromString(Path(src or real_path()).read_bytes())
    if variant == "serving":  # the real inference run, each call of the program a request
        _add_host_steps(space, name="Request", root_level=-1, stat="request_id")
        return space
    for core, plane in enumerate(tensor_core_planes(space)):
        tc = _Plane(plane)
        spans = tc.program_spans()
        if variant in ("infeed", "pod", "barriers"):
            tc.shift([h0 for h0, *_ in spans], [h1 for _, h1, *_ in spans], INFEED_GAP_PS, OUTFEED_GAP_PS)
            spans = tc.program_spans()
            ops = tc.lines["XLA Ops"]
            pid = tc.program_id(STEP_PROGRAM)
            infeed = tc.metadata(
                "%infeed.1 = (f32[128,1024]{1,0}, token[]) infeed(token[] %after-all)",
                "infeed",
                pid,
                "(f32[128,1024]{1,0}, token[])",
            )
            outfeed = tc.metadata(
                "%outfeed.1 = token[] outfeed(f32[128]{0} %loss, token[] %after-all.1)", "outfeed", pid, "token[]"
            )
            pod_ops = [tc.metadata(hlo, cat, pid, "f32[]") for cat, hlo, _ in POD_OPS]
            barrier = next(i for i, m in plane.event_metadata.items() if m.name == "barrier-cores")
            steps = []
            for k, (h0, h1, d0, d1) in enumerate(spans):
                # Input arrives at a pace that differs by core and step: the slowest core
                # sets the step's infeed time, the others idle for the rest of the wait.
                wait = INFEED_GAP_PS * (50 + 8 * core + 3 * (k % 5)) // 100
                tc.add_event(ops, infeed, (h0 - wait, h0, d0 - wait, d0))
                out = OUTFEED_GAP_PS * (40 + 10 * ((k + core) % 3)) // 100
                tc.add_event(ops, outfeed, (h1, h1 + out, d1, d1 + out))
                if variant == "barriers":
                    # libtpu's `barrier-cores` wait, on the XLA TraceMe line, at the program's
                    # start: the TensorCores waiting for each other (device clock in its stats).
                    n = int(barrier_share * (h1 - h0 + INFEED_GAP_PS + OUTFEED_GAP_PS))
                    tc.add_event(tc.lines["XLA TraceMe"], barrier, (h0, h0 + n, d0, d0 + n))
                if variant == "pod":
                    at_h, at_d = h0 - INFEED_GAP_PS + 500_000_000, d0 - INFEED_GAP_PS + 500_000_000
                    for md, (_, _, ms) in zip(pod_ops, POD_OPS):
                        n = int(ms * 1e9 * (1 + core / 10))
                        tc.add_event(ops, md, (at_h, at_h + n, at_d, at_d + n))
                        at_h, at_d = at_h + n + 10_000_000, at_d + n + 10_000_000
                steps.append((h0 - INFEED_GAP_PS, h1 + OUTFEED_GAP_PS, d0 - INFEED_GAP_PS, d1 + OUTFEED_GAP_PS))
            # libtpu writes a line's events by host time, as the real file has them.
            ops.events.sort(key=lambda e: e.offset_ps)
            tc.lines["XLA TraceMe"].events.sort(key=lambda e: e.offset_ps)
        elif variant in ("training", "host_steps", "counters", "host_input"):
            # Step k: from the start of the k-th program to halfway to the next one.
            steps = [
                (h0, (h1 + nxt[0]) // 2, d0, (d1 + nxt[2]) // 2)
                for (h0, h1, d0, d1), nxt in zip(spans, [*spans[1:], None])
                if nxt is not None
            ] + [spans[-1]]
        else:
            # Steps back to back: each step ends where the next program starts, so the next
            # step's first op touches it (XProf credits it to the earlier step) ...
            steps = [
                (h0, nxt[0], d0, nxt[2]) if nxt is not None else (h0, h1, d0, d1)
                for (h0, h1, d0, d1), nxt in zip(spans, [*spans[1:], None])
            ]
            # ... and every tenth step's marker ends 1 ms before its last op (on every core:
            # the step takes the longest marker of any core).
            cut = 1_000_000_000
            steps = [(a, b - cut, c, d - cut) if k % 10 == 3 else (a, b, c, d) for k, (a, b, c, d) in enumerate(steps)]
        tc.add_steps(steps)
        if variant == "counters":
            _add_counters(tc, core, spans)
    if variant in ("host_steps", "host_input"):
        _add_host_steps(space)
    if variant == "host_input":
        _add_host_input(space)
    if variant == "counters":  # a run that asked for hardware measures
        _set_host_utilization(space, 37.5, 61.25)
    return space


def _add_host_input(space):
    """A host input pipeline's wait in each step: a TF `IteratorGetNext` op (what a tf.data
    iterator's `get_next` records) at the start of each `train` step on the Python thread,
    2 ms plus 1 ms more every fifth step."""
    host = next(p for p in space.planes if p.name == "/host:CPU")
    main = next(line for line in host.lines if line.name.startswith("main/"))
    train = next(i for i, m in host.event_metadata.items() if m.name == "train")
    mid = max(host.event_metadata) + 1
    host.event_metadata[mid].id = mid
    host.event_metadata[mid].name = "IteratorGetNext"
    steps = [e for e in main.events if e.metadata_id == train]
    for k, e in enumerate(steps):
        main.events.add(metadata_id=mid, offset_ps=e.offset_ps + 1, duration_ps=(2 + (k % 5 == 0)) * 1_000_000_000)
    main.events.sort(key=lambda x: (x.offset_ps, -x.duration_ps))


def _set_host_utilization(space, mxu, hbm):
    """The host plane's `matrix_unit_utilization_percent` / `hbm_utilization_percent` stats,
    the TPU runtime's measures over the capture (the real file has the first, 0)."""
    host = next(p for p in space.planes if p.name == "/host:CPU")
    ids = {m.name: i for i, m in host.stat_metadata.items()}
    for name, value in (("matrix_unit_utilization_percent", mxu), ("hbm_utilization_percent", hbm)):
        if name not in ids:
            ids[name] = max(host.stat_metadata, default=0) + 1
            host.stat_metadata[ids[name]].id = ids[name]
            host.stat_metadata[ids[name]].name = name
        stat = next((s for s in host.stats if s.metadata_id == ids[name]), None) or host.stats.add()
        stat.metadata_id = ids[name]
        stat.double_value = value


def _add_counters(tc, core, spans):
    """The plane stats `global_chip_id` and `device_id` (not on the last core: XProf's
    utilization viewer skips such a plane, and its kernel utilization reads the id from the
    plane's name), a `_counters_` line with one sample of every counter at the end of each
    of the first ten step programs, and a `counters_flash_attention` line with one sample
    of a Pallas kernel (its first event as long as the kernel). An instant event per
    counter, named by its register, with `counter_value`, `performance_counter_id`,
    `performance_counter_description` and `performance_counter_sets`; counts are the
    program's cycles at the v6e clock times each counter's rate (a tenth more per core)."""
    plane = tc.plane
    for name in ("global_chip_id", "device_id")[: 2 if core < 3 else 1]:
        stat = plane.stats.add()
        stat.metadata_id = tc.stat_id(name)
        stat.uint64_value = core
    ids = {name: tc.metadata(name) for name, *_ in COUNTERS}
    origin = tc.lines["XLA Ops"].timestamp_ns
    line = _counter_line(plane, "_counters_", origin)
    for h0, h1, _, _ in spans[:10]:
        _add_sample(tc, line, ids, core, int((h1 - h0) * CLOCK_PER_PS), h1 - origin * 1000)
    kernel, length_ps = COUNTED_KERNEL
    line = _counter_line(plane, f"counters_{kernel}", origin)
    h0 = spans[0][0]
    _add_sample(tc, line, ids, core, int(length_ps * CLOCK_PER_PS), h0 - origin * 1000, first_ps=length_ps)


def _counter_line(plane, name, origin_ns):
    line = plane.lines.add()
    line.id = max(x.id for x in plane.lines) + 1
    line.name = name
    line.timestamp_ns = origin_ns
    return line


def _add_sample(tc, line, ids, core, cycles, at_ps, first_ps=0):
    """One sample of every counter at `at_ps` (the first event `first_ps` long)."""
    busy = {rate: int(cycles * rate * (1 + core / 10)) for *_, rate in COUNTERS if rate is not None}
    for k, (name, cid, rate) in enumerate(COUNTERS):
        text, sets = DESCRIPTIONS[name]
        if rate is None:  # no MXU busy: the cycles the others leave
            value = cycles - busy[0.3] - busy[0.45]
        else:
            value = cycles if rate == 1.0 else busy[rate]
        e = line.events.add(metadata_id=ids[name], offset_ps=at_ps, duration_ps=first_ps if k == 0 else 0)
        for key, kind, v in (
            ("counter_value", "uint64_value", value),
            ("performance_counter_id", "uint64_value", cid),
            ("performance_counter_description", "str_value", text),
            ("performance_counter_sets", "str_value", sets),
        ):
            st = e.stats.add()
            st.metadata_id = tc.stat_id(key)
            setattr(st, kind, v)


def _add_host_steps(space, name="train", root_level=1, stat="step_num"):
    """`jax.profiler.StepTraceAnnotation("train", step_num=k)` around each call of the step
    program on the Python thread: an event named "train" with `_r` = 1 and `step_num` = k
    (what JAX's TraceMe writes), spanning the k-th top-level `PjitFunction(f)` call after
    compilation (calls shorter than a second). A server's requests instead:
    `TraceAnnotation("Request", _r=-1, request_id=k)` (`name`, `root_level`, `stat`)."""
    host = next(p for p in space.planes if p.name == "/host:CPU")
    main = next(line for line in host.lines if line.name.startswith("main/"))
    ids = {m.name: i for i, m in host.event_metadata.items()}
    calls = sorted(
        (e.offset_ps, e.offset_ps + e.duration_ps)
        for e in main.events
        if e.metadata_id == ids.get("PjitFunction(f)") and e.duration_ps < 1_000_000_000_000
    )
    top = []
    for b, e in calls:  # the outermost calls only
        if not top or b >= top[-1][1]:
            top.append((b, e))
    stat_ids = {m.name: i for i, m in host.stat_metadata.items()}
    for key in ("_r", stat):
        if key not in stat_ids:
            sid = max(host.stat_metadata, default=0) + 1
            host.stat_metadata[sid].id = sid
            host.stat_metadata[sid].name = key
            stat_ids[key] = sid
    mid = max(host.event_metadata, default=0) + 1
    host.event_metadata[mid].id = mid
    host.event_metadata[mid].name = name
    for k, (b, e) in enumerate(top):
        ev = main.events.add(metadata_id=mid, offset_ps=b - 1_000_000, duration_ps=e - b + 2_000_000)
        ev.stats.add(metadata_id=stat_ids["_r"], int64_value=root_level)
        ev.stats.add(metadata_id=stat_ids[stat], int64_value=k)
    main.events.sort(key=lambda x: (x.offset_ps, -x.duration_ps))


#: The pod variant's hosts: the same TPU host's file under each name, as a two-host job.
POD_HOSTS = ("tpu-worker-0", "tpu-worker-1")


# --- SparseCoreV0 infeed -------------------------------------------------------------------

#: A wait opened after each step's program, inside its step, for the SparseCore's infeed.
SCV0_GAP_PS = 6_000_000_000


def _add_sparsecore_v0(space):
    """Each step's program followed, inside its step (lengthened by SCV0_GAP_PS), by a
    SparseCoreV0 infeed (category `sparsecorev0 infeed`, 1 ms more 0.7 ms per core and 0.15
    ms per step k % 4) and its outfeed (`sparsecorev0 outfeed`, 0.5 ms more 0.1 ms per step
    k % 3), on every TensorCore: the cores wait for the SparseCore, longest on the last."""
    for c, plane in enumerate(tensor_core_planes(space)):
        tc = _Plane(plane)
        spans = tc.program_spans()
        tc.shift([h0 for h0, *_ in spans], [h1 for _, h1, *_ in spans], 0, SCV0_GAP_PS)
        sid = tc.stat_ids["device_duration_ps"]
        for e in tc.lines["Steps"].events:
            e.duration_ps += SCV0_GAP_PS
            for st in e.stats:
                if st.metadata_id == sid:
                    st.uint64_value += SCV0_GAP_PS
        ops = tc.lines["XLA Ops"]
        pid = tc.program_id(STEP_PROGRAM)
        infeed = tc.metadata(
            '%sc-infeed.1 = f32[128,64]{1,0} custom-call(), custom_call_target="SparseCoreV0Infeed"',
            "sparsecorev0 infeed",
            pid,
            "f32[128,64]{1,0}",
        )
        outfeed = tc.metadata(
            '%sc-outfeed.1 = token[] custom-call(f32[128,64]{1,0} %g), custom_call_target="SparseCoreV0Outfeed"',
            "sparsecorev0 outfeed",
            pid,
            "token[]",
        )
        spans = tc.program_spans()
        for k in range(len(tc.lines["Steps"].events)):
            h1, d1 = spans[k][1], spans[k][3]
            out_ps = 500_000_000 + 100_000_000 * (k % 3)
            in_ps = 1_000_000_000 + 700_000_000 * c + 150_000_000 * (k % 4)
            hs, ds = h1 + 100_000_000, d1 + 100_000_000
            tc.add_event(ops, infeed, (hs, hs + in_ps, ds, ds + in_ps))
            gap = in_ps + 10_000_000
            tc.add_event(ops, outfeed, (hs + gap, hs + gap + out_ps, ds + gap, ds + gap + out_ps))
        ops.events.sort(key=lambda e: e.offset_ps)


# --- SparseCore planes ------------------------------------------------------------------------


def add_sparsecore_planes(space, per_core=2, with_steps=True, grouped=False, longer_step=None):
    """Beside each TensorCore plane `/device:TPU:N`, `per_core` SparseCore planes
    `/device:TPU:N SparseCore m`, as libtpu writes a v5p / v6e chip's SparseCores: the
    TensorCore's `core_details` stat (XProf reads `is_sparse_core` from the plane's name),
    and lines `Sparse Core Modules`, `Sparse Core Ops` and (`with_steps`) `Sparse Core Steps`.
    Per TensorCore step k the SparseCore's step runs from 10 % to 90 % of it (the first
    SparseCore of TensorCore 0 runs 2 ms past the TensorCore's marker in step `longer_step`),
    its module over the same span, and two ops: an outer one over (30 + 5 m + k % 3) % of the
    step from its first fifth, an inner one nested in its first third. `grouped`: every
    event of the file carries XProf's `group_id` (step k), as in a file XProf has already
    grouped: the TensorCores' events that first overlap step k (host clock, ends included)."""
    cores = tensor_core_planes(space)
    if grouped:
        _pregroup(cores)
        for plane in space.planes:  # (every host and device plane names the stat, as XProf's output)
            if plane.name.startswith(("/host:", "/device:")):
                _Plane(plane).stat_id("group_id")
    next_id = max(p.id for p in space.planes) + 1
    for n, tc_plane in enumerate(cores):
        tc = _Plane(tc_plane)
        details = next(s for s in tc_plane.stats if tc_plane.stat_metadata[s.metadata_id].name == "core_details")
        steps = tc.lines["Steps"]
        origin = steps.timestamp_ns
        spans = [_span(tc, steps, e) for e in steps.events]
        pid = tc.program_id(STEP_PROGRAM)
        for m in range(per_core):
            plane = space.planes.add()
            plane.id, plane.name = next_id, f"{tc_plane.name} SparseCore {m}"
            next_id += 1
            sc = _Plane(plane)
            s = plane.stats.add()
            s.metadata_id, s.bytes_value = sc.stat_id("core_details"), details.bytes_value
            names = ["Sparse Core Modules", "Sparse Core Ops"] + (["Sparse Core Steps"] if with_steps else [])
            for i, name in enumerate(names, 1):
                line = plane.lines.add()
                line.id, line.name, line.timestamp_ns = i, name, origin
            sc.lines = {line.name: line for line in plane.lines}
            outer = sc.metadata("%gather.1 = f32[4096,128]{1,0} gather(...)", "sparse core op", pid, "f32[4096,128]")
            inner = sc.metadata("%sort.2 = s32[4096]{0} sort(...)", "sparse core op", pid, "s32[4096]")
            module = sc.metadata(f"sc_{STEP_PROGRAM}{pid})")

            def add(line, md, span, k, sc=sc):
                e = sc.add_event(sc.lines[line], md, span)
                if grouped:
                    g = e.stats.add()
                    g.metadata_id, g.int64_value = sc.stat_id("group_id"), k

            for k, (h0, _, d0, d1) in enumerate(spans):
                size = d1 - d0
                a, b = size // 10, size * 9 // 10
                if longer_step == k and n == 0 and m == 0:
                    a, b = 0, size + 2_000_000_000
                if with_steps:
                    add("Sparse Core Steps", sc.metadata(str(k)), (h0 + a, h0 + b, d0 + a, d0 + b), k)
                add("Sparse Core Modules", module, (h0 + a, h0 + b, d0 + a, d0 + b), k)
                oa = a + (b - a) // 5
                ob = oa + (b - a) * (30 + 5 * m + k % 3) // 100
                add("Sparse Core Ops", outer, (h0 + oa, h0 + ob, d0 + oa, d0 + ob), k)
                ib = oa + (ob - oa) // 3
                add("Sparse Core Ops", inner, (h0 + oa, h0 + ib, d0 + oa, d0 + ib), k)


def _span(tc, line, e):
    """(host start, host end, device start, device end) ps of event `e` of `line`."""
    begin = line.timestamp_ns * 1000 + e.offset_ps
    dev = tc._stat(e, "device_offset_ps")
    return begin, begin + e.duration_ps, dev, dev + tc._stat(e, "device_duration_ps")


def _pregroup(cores):
    """XProf's `group_id` on every TensorCore event: step k on the k-th `Steps` event and on
    the events of the other lines that first overlap it (host clock, end points included)."""
    for plane in cores:
        tc = _Plane(plane)
        gid = tc.stat_id("group_id")
        steps = tc.lines["Steps"]
        spans = [_span(tc, steps, e)[:2] for e in steps.events]
        ends = [b for _, b in spans]
        for k, e in enumerate(steps.events):
            s = e.stats.add()
            s.metadata_id, s.int64_value = gid, k
        for line in plane.lines:
            if line.name == "Steps":
                continue
            base = line.timestamp_ns * 1000
            for e in line.events:
                a = base + e.offset_ps
                i = bisect.bisect_left(ends, a)
                if i < len(spans) and spans[i][0] <= a + e.duration_ps:
                    s = e.stats.add()
                    s.metadata_id, s.int64_value = gid, i


# --- a server that batches its requests ----------------------------------------------------

#: Context types linking requests to their batch and the batch to its program call.
_TO_BATCH, _TO_PROGRAM = 7, 91
_US = 1_000_000


def _add_batches(space, tf_serving=True):
    """Each top-level call of the program as a batch of 1-3 requests, as TF Serving's batching
    records them: a `ProcessBatch` (XProf makes it a root of level 2) on a batch thread
    around the call (a consumer of its requests, a producer the call consumes, so its
    group reaches the program on the device), with a `ConcatInputTensors` (padding amount,
    padded size) inside; each request on a request thread (overlapping ones on other
    threads), with a `ScheduleWithoutSplit` producing to the batch (its size in
    `batching_input_task_size`); every tenth batch's first request split into the next batch
    too. `tf_serving`: requests are `BatchingSessionRun`s, the model id on a `SessionRun` in
    the batch ("tf_model:1"); else user-defined `Request`s (root level -1) of two models
    ("model_a", then "model_b" every other eight batches), the model id their own."""
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    host = _Plane(plane)
    main = next(line for line in plane.lines if line.name.startswith("main/"))
    call_id = next(i for i, m in plane.event_metadata.items() if m.name == "PjitFunction(f)")
    calls = sorted(
        (e.offset_ps, e.offset_ps + e.duration_ps, e)
        for e in main.events
        if e.metadata_id == call_id and e.duration_ps < 10**12
    )
    top = []
    for b, e, ev in calls:
        if not top or b >= top[-1][1]:
            top.append((b, e, ev))
    names: dict = {}

    def add(line, name, b, e, **stats):
        if name not in names:
            names[name] = host.metadata(name)
        ev = line.events.add(metadata_id=names[name], offset_ps=b, duration_ps=e - b)
        for key, value in stats.items():
            st = ev.stats.add(metadata_id=host.stat_id(key))
            if isinstance(value, str):
                st.str_value = value
            else:
                st.int64_value = value

    def new_line(name):
        line = plane.lines.add()
        line.id = max(x.id for x in plane.lines) + 1
        line.display_id, line.name, line.timestamp_ns = line.id, f"{name}/{line.id}", main.timestamp_ns
        return line

    batch_lines: list = []
    request_lines: list = []
    for k, (b, e, call) in enumerate(top):
        for key, value in (("_ct", _TO_PROGRAM), ("_c", k)):
            st = call.stats.add(metadata_id=host.stat_id(key))
            st.int64_value = value
        start, stop = b - 30 * _US, e + 20 * _US
        # A batch thread free at its start (consecutive batches overlap: several threads).
        free = next((x for x in batch_lines if x[1] <= start), None)
        if free is None:
            free = [new_line("batch_thread"), 0]
            batch_lines.append(free)
        batch_line, free[1] = free[0], stop
        sizes = [1 + (j + k) % 4 for j in range(1 + k % 3)]
        padded = 1 << (sum(sizes) - 1).bit_length()
        add(batch_line, "ProcessBatch", start, stop, _r=2, _ct=_TO_BATCH, _c=k, _pt=_TO_PROGRAM, _p=k)
        add(
            batch_line,
            "ConcatInputTensors",
            b - 25 * _US,
            b - 20 * _US,
            padding_amount=padded - sum(sizes),
            batch_size_after_padding=padded,
        )
        model = "tf_model:1" if tf_serving else ("model_b" if (k // 8) % 2 else "model_a")
        if tf_serving:
            add(batch_line, "SessionRun", b - 15 * _US, e + 10 * _US, model_id=model)
        for j, size in enumerate(sizes):
            r0 = start - (j + 1) * 400 * _US - (k % 5) * 50 * _US
            r1 = r0 + 300 * _US if j % 2 == 0 else stop + 2000 * _US
            slot = next((i for i, (_, last) in enumerate(request_lines) if last <= r0), None)
            if slot is None:
                request_lines.append([new_line("request_thread"), 0])
                slot = len(request_lines) - 1
            line = request_lines[slot][0]
            request_lines[slot][1] = r1
            if tf_serving:
                add(line, "BatchingSessionRun", r0, r1, _r=1)
            else:
                add(line, "Request", r0, r1, _r=-1, model_id=model)
            add(
                line,
                "ScheduleWithoutSplit",
                r0 + 20 * _US,
                r0 + 60 * _US,
                _pt=_TO_BATCH,
                _p=k,
                batching_input_task_size=size,
            )
            if j == 0 and k % 10 == 4 and k + 1 < len(top):
                add(line, "SplitInput", r0 + 70 * _US, r0 + 80 * _US, _pt=_TO_BATCH, _p=k + 1)
    for line in [main] + [x[0] for x in batch_lines + request_lines]:
        line.events.sort(key=lambda x: (x.offset_ps, -x.duration_ps))


#: TF Serving's batching metrics XProf reads (`/host:tfstreamz`), by model name.
_BATCHING = "/tensorflow/serving/batching/"


def add_tfstreamz(space, metrics, snapshots=2):
    """The `/host:tfstreamz` plane TF's profiler writes (`SerializeToXPlane`): line 0, a
    `TFStreamz Snapshot` event per snapshot (one at the start, one at the end of the
    profile), each holding a stat per metric point named `metric{label=value, ...}`: int64
    gauges as int64 values, string gauges as references. `metrics`: [(name, value)] of the
    last snapshot (the others hold 1 for every integer)."""
    host = next(p for p in space.planes if p.name == "/host:CPU")
    origin = min(line.timestamp_ns for line in host.lines if line.events)
    end = max(line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps for line in host.lines for e in line.events)
    plane = space.planes.add()
    plane.id, plane.name = max(p.id for p in space.planes) + 1, "/host:tfstreamz"
    tf = _Plane(plane)
    line = plane.lines.add()
    line.id, line.timestamp_ns = 0, origin
    snapshot = tf.metadata("TFStreamz Snapshot")
    for n in range(snapshots):
        ev = line.events.add(metadata_id=snapshot, duration_ps=200 * _US)
        ev.offset_ps = 0 if n == 0 else end - origin * 1000 + n * 1000 * _US
        for name, value in metrics:
            st = ev.stats.add(metadata_id=tf.stat_id(name))
            if isinstance(value, str):
                st.ref_value = tf.stat_id(value)
            else:
                st.int64_value = value if n == snapshots - 1 else 1
    return plane


def batching_metrics(model, op, threads, timeout_us, max_size, enqueued, allowed):
    """The batching metrics TF records for one batch op of `model` (`batch_kernels.cc`:
    num_batch_threads by model; `batch_resource_base.cc`: the others by model and op), and
    some XProf does not read."""

    def metric(param, with_op=True):
        return f"{_BATCHING}{param}{{model_name={model}" + (f", op_name={op}}}" if with_op else "}")

    return [
        (metric("num_batch_threads", False), threads),
        (metric("batch_timeout_micros"), timeout_us),
        (metric("max_batch_size"), max_size),
        (metric("max_enqueued_batches"), enqueued),
        (metric("allowed_batch_sizes"), allowed),
        (metric("configured_batch_padding_policy"), "PAD_UP"),
        (metric("enable_large_batch_splitting", False), "true"),
        ("/tensorflow/core/graph_runs", 99),
    ]


def add_tensor_events(space, every_request=5, broken_request=7, broken_batch=5):
    """The TPU runtime's tensor conversions on the host, with `shape` and `layout` stats: in
    each batch (on its batch thread, inside its `ProcessBatch`) a `Linearize` of the padded
    input before the program call and a `Delinearize` of the output after it (and every
    third a `TransferBufferFromDevice-FastPath`); in every `every_request`-th request a
    `Linearize` of its input; in every `broken_request`-th other request, and in batch
    `broken_batch`, one without a layout (XProf then shows no pattern for it)."""
    plane = next(p for p in space.planes if p.name == "/host:CPU")
    host = _Plane(plane)
    names: dict = {}

    def add(line, name, start, duration, shape, layout):
        if name not in names:
            names[name] = host.metadata(name)
        ev = line.events.add(metadata_id=names[name], offset_ps=start, duration_ps=duration)
        for key, value in (("shape", shape), ("layout", layout)):
            if value is not None:
                st = ev.stats.add(metadata_id=host.stat_id(key))
                st.str_value = value

    def named(e):
        return plane.event_metadata[e.metadata_id].name

    def stat(e, key):
        sid = host.stat_id(key)
        return next((s.int64_value for s in e.stats if s.metadata_id == sid), None)

    for line in [x for x in plane.lines if x.name.startswith("batch_thread/")]:
        events = list(line.events)
        for pb in (e for e in events if named(e) == "ProcessBatch"):
            k, lo, hi = stat(pb, "_c"), pb.offset_ps, pb.offset_ps + pb.duration_ps
            concat = next(e for e in events if named(e) == "ConcatInputTensors" and lo <= e.offset_ps < hi)
            padded, width = stat(concat, "batch_size_after_padding"), 256 if (k // 8) % 2 else 128
            add(line, "Linearize", lo + 16 * _US, (1 + k % 7) * _US, f"(f32[{padded},{width}])", "{1,0:T(8,128)}")
            add(line, "Delinearize", hi - 19 * _US, (2 + k % 5) * _US, f"(f32[{padded},10])", "{1,0:T(8,128)}")
            if k % 3 == 0:
                add(line, "TransferBufferFromDevice-FastPath", hi - 12 * _US, _US, f"(f32[{padded},10])", "{1,0}")
            if k == broken_batch:
                add(line, "TransferBufferFromDevice-FastPath", hi - 10 * _US, _US, f"(f32[{padded},10])", None)
    requests = sorted(
        (
            (e.offset_ps, line, e)
            for line in plane.lines
            if line.name.startswith("request_thread/")
            for e in line.events
            if named(e) in ("BatchingSessionRun", "Request")
        ),
        key=lambda x: x[0],
    )
    for i, (_, line, r) in enumerate(requests):
        if i % every_request == 0:
            add(line, "Linearize", r.offset_ps + 2 * _US, (3 + i % 4) * _US, "(s32[1,16])", "{1,0}")
        elif i % broken_request == 0:
            add(line, "Linearize", r.offset_ps + 2 * _US, 3 * _US, "(s32[1,16])", None)
    for line in plane.lines:
        line.events.sort(key=lambda x: (x.offset_ps, -x.duration_ps))


# --- multi-slice collectives (megascale) ----------------------------------------------------

#: The megascale variant's hosts: one per slice, the second's collectives a tenth slower.
MEGASCALE_HOSTS = ("tpu-slice-0", "tpu-slice-1")
#: Its program's id (the metadata plane's event id) and name.
MEGASCALE_PROGRAM = (777000000000000001, "megascale_step")
#: Its collectives across slices: (rendezvous, `_xla_megascale_transfer_type`, f32 elements
#: sent, how `dcn_collective_info` names the group: "groups" / "one_to_one" / None, group
#: size). The all-gather's -done ops carry no attributes (found through their channel).
MEGASCALE_COLLECTIVES = (
    ("all-reduce.1", "ALL_REDUCE", 262144, "groups", 4),
    ("all-gather.2", "ALL_GATHER", 3001, "groups", 3),
    ("one-to-one.3", "ONE_TO_ONE", 512, "one_to_one", 1),
    ("reduce-scatter.4", "REDUCE_SCATTER", 777, "groups", 2),
    ("all-to-all.5", "ALL_TO_ALL", 1000, "groups", 8),
    ("all-reduce.6", "ALL_REDUCE", 2048, None, 0),
    ("ragged.7", "RAGGED_ALL_TO_ALL", 100, "groups", 2),
)
_NO_DONE_ATTRIBUTES = {"all-gather.2"}


def _megascale_module():
    """The program's HloModuleProto (bytes) and {(rendezvous, opcode): instruction name}: a
    host-transfer send and recv per collective with its rendezvous and transfer type, as
    JAX lowers them (StableHLO, converted by XLA: send, send-done, recv, recv-done)."""
    from jax._src.lib import _jax  # (only this variant needs JAX, a test dependency)

    args, body, rets, types = [], [], [], []
    for i, (rdv, kind, n, _, _) in enumerate(MEGASCALE_COLLECTIVES):
        attrs = (
            f'mhlo.frontend_attributes = {{_xla_host_transfer_rendezvous = "{rdv}", '
            f'_xla_megascale_transfer_type = "{kind}"}}'
        )
        args.append(f"%arg{i}: tensor<{n}xf32>")
        body.append(f"%t{i} = stablehlo.create_token : !stablehlo.token")
        body.append(
            f'%s{i} = "stablehlo.send"(%arg{i}, %t{i}) {{channel_handle = #stablehlo.channel_handle'
            f"<handle = {2 * i + 1}, type = 2>, is_host_transfer = true, {attrs}}} : "
            f"(tensor<{n}xf32>, !stablehlo.token) -> !stablehlo.token"
        )
        body.append(
            f'%r{i}:2 = "stablehlo.recv"(%s{i}) {{channel_handle = #stablehlo.channel_handle'
            f"<handle = {2 * i + 2}, type = 3>, is_host_transfer = true, {attrs}}} : "
            f"(!stablehlo.token) -> (tensor<{n}xf32>, !stablehlo.token)"
        )
        rets.append(f"%r{i}#0")
        types.append(f"tensor<{n}xf32>")
    signature = f"@main({', '.join(args)}) -> ({', '.join(types)})"
    text = (
        f"module @{MEGASCALE_PROGRAM[1]} {{\n  func.func public {signature} {{\n    "
        + "\n    ".join(body)
        + f"\n    return {', '.join(rets)} : {', '.join(types)}\n  }}\n}}\n"
    )
    computation = _jax.mlir.mlir_module_to_xla_computation(text, use_tuple_args=False, return_tuple=True)
    module = _schema().message_class("xla.HloModuleProto")()
    module.ParseFromString(computation.as_serialized_hlo_module_proto())
    rendezvous_of = {2 * i + k: c[0] for i, c in enumerate(MEGASCALE_COLLECTIVES) for k in (1, 2)}
    names = {}
    for comp in module.computations:
        for instr in comp.instructions:
            if instr.opcode in ("send", "recv", "send-done", "recv-done"):
                rdv = rendezvous_of[instr.channel_id]
                names[(rdv, instr.opcode)] = instr.name
                if rdv in _NO_DONE_ATTRIBUTES and instr.opcode.endswith("-done"):
                    instr.ClearField("frontend_attributes")
    return module.SerializeToString(), names


def _varint(n):
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _field(number, payload):
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _collective_info(kind, size):
    """A `tensorflow.profiler.DcnCollectiveInfoProto`: a one-to-one group (field 3), or
    endpoint groups (field 2) of `size` endpoints then one (only the first is read)."""
    endpoint = _field(1, b"")  # an Endpoint, slice and device 0
    if kind == "one_to_one":
        return _field(3, _field(1, b"") + _field(2, b"\x08\x01"))
    return _field(2, endpoint * size) + _field(2, endpoint)


def _megascale_schedule(t0_ps, slower):
    """Per execution of the program: (start, end, [(rendezvous, opcode, start, duration)]),
    ps. The all-reduce and all-gather overlap (each one's slack leaves out the other's
    ops), a loop fusion and a host send of no instruction run among them (neither counts),
    the one-to-one runs back to back (no slack), and times have sub-ns parts (XProf
    truncates them)."""
    t, out = t0_ps, []
    us = 1_000_000
    for step in range(3):
        start, ops = t, []

        def op(rdv, opcode, gap, duration, ops=ops):
            nonlocal t
            t += gap
            ops.append((rdv, opcode, t, int(duration * slower)))
            t += int(duration * slower)

        op("all-reduce.1", "send", 5 * us + 123, 2 * us + 456_789 + step * 1_000_001)
        op("all-gather.2", "send", 700_250, 1 * us + 999)
        op("fusion", "fusion", 300_000, 4 * us)
        op("missing", "send", 200_000, 3 * us)
        op("all-reduce.1", "send-done", 3 * us + 1, 1 * us + 500)
        op("all-gather.2", "send-done", 250_000, 2 * us)
        op("all-reduce.1", "recv", 10 * us + 777, 1_500_000_000 + 999_999 * step)
        op("all-gather.2", "recv", 1 * us, 900_000)
        op("all-reduce.1", "recv-done", 2 * us + 3, 4 * us + 999_999)
        op("all-gather.2", "recv-done", 500, 7 * us + 1)
        for opcode, duration in (("send", 2 * us), ("send-done", us), ("recv", us), ("recv-done", 3 * us)):
            op("one-to-one.3", opcode, 9 * us if opcode == "send" else 0, duration)
        for rdv in ("reduce-scatter.4", "all-reduce.6", "ragged.7") + (("all-to-all.5",) if step < 2 else ()):
            op(rdv, "send", 11 * us + 17 * step, 1 * us + 333)
            op(rdv, "send-done", 6 * us, 2 * us + 250)
            op(rdv, "recv", 13 * us + 999, 2 * us)
            op(rdv, "recv-done", 1 * us + 1, 5 * us + 750 * step)
        t += 20 * us
        out.append((start, t, ops))
        t += 50 * us
    return out


def add_megascale(space, slower=1.0):
    """A multi-slice program run three times after the training steps on TensorCore 0, as
    libtpu records one: its HloProto on the metadata plane, the DCN transport's
    `MegaScale:` TraceMe names on the host plane, its `XLA Modules` events, and its host
    send / recv ops on `XLA Ops` (category "host send" / "host recv", display name the
    instruction's, `dcn_collective_info` on each send)."""
    module, names = _megascale_module()
    pid, program = MEGASCALE_PROGRAM
    planes = {p.name: p for p in space.planes}
    tpu0, meta, host = planes["/device:TPU:0"], planes["/host:metadata"], planes["/host:CPU"]
    md = meta.event_metadata[pid]
    md.id, md.name = pid, f"{program}({pid})"
    stat = md.stats.add()
    stat.metadata_id = next(i for i, m in meta.stat_metadata.items() if m.name == "Hlo Proto")
    stat.bytes_value = _field(1, module)  # HloProto.hlo_module
    for name in ("MegaScale: Communication Transport Send", "MegaScale: Communication Transport Receive"):
        mid = max(host.event_metadata) + 1
        host.event_metadata[mid].id = mid
        host.event_metadata[mid].name = name
    tc = _Plane(tpu0)

    def metadata(name, display, stats):
        mid = tc.metadata(name)
        tpu0.event_metadata[mid].display_name = display
        for key, kind, value in stats:
            st = tpu0.event_metadata[mid].stats.add()
            st.metadata_id = tc.stat_id(key)
            setattr(st, kind, value)
        return mid

    ids = {}
    for rdv, _, _, group_kind, size in MEGASCALE_COLLECTIVES:
        for opcode in ("send", "send-done", "recv", "recv-done"):
            instr = names[(rdv, opcode)]
            category = "host send" if opcode.startswith("send") else "host recv"
            stats = [("hlo_category", "str_value", category), ("program_id", "uint64_value", pid)]
            if opcode == "send" and group_kind:
                stats.append(("dcn_collective_info", "bytes_value", _collective_info(group_kind, size)))
            ids[(rdv, opcode)] = metadata(f"%{instr} = ...", instr, stats)
    ids[("fusion", "fusion")] = metadata("%fusion.9 = ...", "fusion.9", [("hlo_category", "str_value", "loop fusion")])
    ids[("missing", "send")] = metadata("%send.999 = ...", "send.999", [("hlo_category", "str_value", "host send")])
    modules, ops = tc.lines["XLA Modules"], tc.lines["XLA Ops"]
    end = max(line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps for line in tpu0.lines for e in line.events)
    program_md = tc.metadata(f"{program}({pid})")
    for start, stop, run_ops in _megascale_schedule((end // 10**9 + 1) * 10**9, slower):
        modules.events.add(
            metadata_id=program_md, offset_ps=start - modules.timestamp_ns * 1000, duration_ps=stop - start
        )
        for rdv, opcode, at, duration in run_ops:
            ops.events.add(metadata_id=ids[(rdv, opcode)], offset_ps=at - ops.timestamp_ns * 1000, duration_ps=duration)


def write(variant: str, out_dir: Path, src: Path | None = None, host: str = "tpu_host") -> Path:
    """Write one variant as a logdir: OUT_DIR/plugins/profile/run/HOST.xplane.pb (the pod
    variant: one file per host of `POD_HOSTS`, each naming its host; the first returned)."""
    run = Path(out_dir) / "plugins" / "profile" / "run"
    run.mkdir(parents=True, exist_ok=True)
    if variant == "megascale":
        for k, name in enumerate(MEGASCALE_HOSTS):
            space = make("training", src)
            add_megascale(space, slower=1 + k / 10)
            del space.hostnames[:]
            space.hostnames.append(name)
            (run / f"{name}.xplane.pb").write_bytes(space.SerializeToString())
        return run / f"{MEGASCALE_HOSTS[0]}.xplane.pb"
    if variant == "barriers":
        hosts = [name for name, _ in BARRIER_HOSTS]
        for name, share in BARRIER_HOSTS:
            space = make(variant, src, barrier_share=share)
            space.hostnames.append(name)
            (run / f"{name}.xplane.pb").write_bytes(space.SerializeToString())
        return run / f"{hosts[0]}.xplane.pb"
    space = make(variant, src)
    hosts = list(POD_HOSTS) if variant == "pod" else [host]
    for name in hosts:
        if variant == "pod":
            del space.hostnames[:]
            space.hostnames.append(name)
        (run / f"{name}.xplane.pb").write_bytes(space.SerializeToString())
    return run / f"{hosts[0]}.xplane.pb"


def repeat_device_time(space, times: int) -> None:
    """Make a longer run for benchmarks: every TPU plane's events (TensorCores' and
    SparseCores') `times` times over, each copy shifted by the span of all of them (host and
    device clocks alike), so steps, their ops and their SparseCores stay together
    (`shared/tools/tile_xplane.py` shifts each line by its own span, which parts a step from
    its ops)."""
    planes = [p for p in space.planes if p.name.startswith("/device:TPU:")]
    lines = [(p, line) for p in planes for line in p.lines if line.events]
    if not lines:
        return
    lo = min(line.timestamp_ns * 1000 + e.offset_ps for _, line in lines for e in line.events)
    hi = max(line.timestamp_ns * 1000 + e.offset_ps + e.duration_ps for _, line in lines for e in line.events)
    span = hi - lo + 1_000_000  # and 1 µs between copies
    for plane, line in lines:
        sid = _Plane(plane).stat_ids.get("device_offset_ps")
        originals = list(line.events)
        for k in range(1, times):
            for e in originals:
                c = line.events.add()
                c.CopyFrom(e)
                c.offset_ps += k * span
                for st in c.stats:
                    if st.metadata_id == sid:
                        st.uint64_value += k * span


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir")
    ap.add_argument("--variant", default="all", choices=(*VARIANTS, "all"))
    ap.add_argument("--src", default=None, help="the real TPU profile (default: the one in tests/data)")
    ap.add_argument("--times", type=int, default=1, help="repeat the device time N times (benchmarks)")
    args = ap.parse_args(argv)
    for v in VARIANTS if args.variant == "all" else (args.variant,):
        path = write(v, Path(args.out_dir) / v, args.src)
        if args.times > 1:
            for f in path.parent.glob("*.xplane.pb"):
                space = _schema().XSpace()
                space.ParseFromString(f.read_bytes())
                repeat_device_time(space, args.times)
                f.write_bytes(space.SerializeToString())
        print(path)


if __name__ == "__main__":
    main()
