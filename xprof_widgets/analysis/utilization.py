"""XProf's TPU utilization tools from hardware counters: the utilization viewer
(`utilization_viewer`, `xplane_to_utilization_viewer.cc`) and kernel utilization
(`kernel_utilization`): how busy each unit of a TPU chip was, from the counters libtpu
sampled.

The TPU runtime samples hardware counters into lines of each device plane: a line per
sample (`_counters_`, or `counters_<kernel>` for the counters of one kernel), an event per
counter with its value in `counter_value` and its hardware id in `performance_counter_id`
(the event's, else its metadata's; without one, the event's metadata id). XProf reads
them on the chips it knows, `TPU v6 Lite` (v6e) and `TPU v7x` (two dies, each with its
TensorCore, HBM and two SparseCores: `v7x_metrics`), and turns a sample's counters into
utilization metrics: each an achieved count against a peak the chip could have reached in
the sample's cycles, on a node (TensorCore or SparseCore) and in a unit
(`tpu_generic_utilization_utils.cc`):

* TensorCore (only where the sample counted cycles): scalar unit, vector ALUs, VPU, vector
  memory stores and loads, the matrix units (none / one / two busy, their average, each
  unit's and each precision's cycles, matpush), the transpose units (XLUs);
* HBM bytes read and written against the chip's bandwidth over the cycles, with the read
  and write shares; ICI bytes read and written against the link's;
* SparseCore, per core, always: its tiles' scalar and vector issue slots and its
  sequencer's.

**Utilization viewer**: every metric of every sample line, as XProf lists them (the last
value of a counter sampled twice in a line counts). **Kernel utilization**: per device and
counter line ("kernel": the line's name after `counters_`; `_counters_` and `counters_0`
take the first XLA op's name), the counters summed over the line, the matrix unit
utilization (average busy over its peak), its cycles by precision, and every other metric
with a peak as a percentage (at most 100), summed over nodes; where the sample has no
cycle count, the kernel's duration (the line's longest event, else the longest op of the
kernel's name, else that first op's) at the chip's clock stands for it.

A run without counter samples on a chip XProf knows has no rows, and says why. The
counter ids are the registers' addresses (`tpu_counter_ids_v6e.h`, `_v7x.h`): groups of
counters at fixed strides (`_V6E`, `_V7X`). Where a profile holds several files, XProf reads the first
host's only (the utilization viewer) or none (kernel utilization refuses several): here
every host is read, in a `host` column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from .core.planes import TPU_PLANE_PREFIX
from .core.runlike import RunLike

V6E = "TPU v6 Lite"
V7X = "TPU v7x"
#: Chips whose counters XProf reads (`device_type_string`), with their clock (Hz) and HBM
#: bandwidth (bytes/s).
CHIPS = {V6E: (1.75e9, 1525.5 * 2**30), V7X: (1.9e9, 3433.0 * 2**30)}
#: XProf's ICI read (and write) bandwidth of a link, bytes/s, over cycles at 1 GHz.
ICI_PEAK_BYTES_PER_S = 294947368421.0526
_U64 = (1 << 64) - 1

VIEWER_COLUMNS = ["host", "device", "sample", "node", "name", "achieved", "peak", "unit"]
KERNEL_COLUMNS = [
    "host",
    "device_id",
    "device_type",
    "kernel",
    "duration_us",
    "mxu_utilization",
    "mxu_is_anomaly",
    "bf16_percent",
    "int8_percent",
    "int4_percent",
    "fp8_percent",
]
METRIC_COLUMNS = ["host", "device_id", "kernel_row", "metric", "percent"]
NO_SAMPLES = (
    "no hardware counter samples on a TPU v6e or v7x (`TPU v6 Lite`, `TPU v7x`) device plane: XProf's utilization "
    "tools read counters libtpu samples (events with `counter_value` and `performance_counter_id`) "
    "when the profile asks for hardware counters"
)
NO_DEVICE_ID = "its TPU planes carry no `device_id` stat, which XProf's utilization viewer needs"


# --- the v6e counters: register addresses, in groups at fixed strides ------------------------


def _tc(offset):
    return 3257466888 + offset  # TensorCore statistics; CYCLES at offset 0


def _hbm(stack, controller, kind, channel):
    """An HBM counter: `kind` is its offset from the read responses' (RD_RESP)."""
    return 3019980856 + stack * 33554432 + controller * 2097152 + kind + channel * 8


class _V6E:
    CYCLES = _tc(0)
    SCALAR_ALU = (_tc(80), _tc(88))
    VECTOR_ALU = tuple(_tc(248 + 8 * k) for k in range(4))
    VST = _tc(280)
    VLD = (_tc(296), _tc(304))
    # VPU operations: FADD, FMUL, MISC, INT, FMAC, four slots each.
    VPU_OPS = tuple(_tc(1688 + 32 * kind + 8 * k) for kind in range(5) for k in range(4))
    MXU_BUSY = (_tc(512), _tc(520), _tc(528))  # none, one, two busy
    # Matmul pushes per MXU u: (F32, BF16, F8, I8, I4 from vector registers; BF16, I8, I4 from LMR).
    VREG_F32 = (_tc(384), _tc(392))
    VREG_BF16 = (_tc(400), _tc(408))
    VREG_F8 = (_tc(416), _tc(424))
    VREG_I8 = (_tc(432), _tc(440))
    VREG_I4 = (_tc(448), _tc(456))
    LMR_BF16 = (_tc(464), _tc(472))
    LMR_I8 = (_tc(480), _tc(488))
    LMR_I4 = (_tc(496), _tc(504))
    MATPUSH = (_tc(552), _tc(560))
    XLU_BUSY = (_tc(648), _tc(656), _tc(664))  # none, one, two busy
    # Per XLU u: packed, rotate-permute, rotate-permute-set, transpose instructions.
    XLU_INSTRUCTIONS = ((_tc(632), _tc(584), _tc(600), _tc(616)), (_tc(640), _tc(592), _tc(608), _tc(624)))
    # HBM: 2 stacks x 16 controllers x 2 pseudo-channels; read responses, write and partial
    # write requests (32-byte beats).
    HBM_READ = tuple(_hbm(h, c, 0, ps) for h in range(2) for c in range(16) for ps in range(2))
    HBM_WRITE = tuple(
        _hbm(h, c, kind, ps)
        for h in range(2)
        for c in range(16)
        for kind in (-32, -16)  # WR_REQ, PARTIAL_WRITE_REQ
        for ps in range(2)
    )
    ICI_READ = (2953257136, 2953257192)  # 128-byte flits
    ICI_WRITE = (2953257248, 2953257304)
    # SparseCores s = 0, 1: 16 tiles each (TEC and vector issue), and a sequencer (SCS).
    _SC_TILE, _SCS = 3490185224, 3532193800
    SC_STRIDE, TILE_STRIDE = 44040192, 2097152
    TILE = {  # offsets from a tile's CYCLES
        "CYCLES": 0,
        "TEC_SCALAR_ISSUE": 480,
        "TEC_S0_INSTRUCTION": 496,
        "TEC_S1_INSTRUCTION": 504,
        "TEC_SMISC_INSTRUCTION": 512,
        "VECTOR_ISSUE": 952,
        "V0_INSTRUCTION": 960,
        "V1_INSTRUCTION": 968,
        "V2_INSTRUCTION": 976,
        "VLD_INSTRUCTION": 984,
        "VST_INSTRUCTION": 992,
        "VRES_INSTRUCTION": 1000,
        "VEX_INSTRUCTION": 1008,
    }
    SCS = {"CYCLES": 0, "SCALAR_ISSUE": 8, "S0_INSTRUCTION": 24, "S1_INSTRUCTION": 32, "SMISC_INSTRUCTION": 40}

    @classmethod
    def tile(cls, s, t, name):
        return cls._SC_TILE + s * cls.SC_STRIDE + t * cls.TILE_STRIDE + cls.TILE[name]

    @classmethod
    def scs(cls, s, name):
        return cls._SCS + s * cls.SC_STRIDE + cls.SCS[name]


#: SparseCore tile rows (XProf's names, spacing as it writes them on v6e) and their counters.
_SC_TILE_ROWS = (
    ("TEC Scalar Issue", "TEC_SCALAR_ISSUE"),
    ("TEC Scalar Issue: S0 slot", "TEC_S0_INSTRUCTION"),
    ("TEC Scalar Issue: S1 slot", "TEC_S1_INSTRUCTION"),
    ("TEC Scalar Issue: Smisc slot", "TEC_SMISC_INSTRUCTION"),
    ("SC Vector Issue", "VECTOR_ISSUE"),
    ("SC Vector Issue:V0 Slot", "V0_INSTRUCTION"),
    ("SC Vector Issue: V1 Slot", "V1_INSTRUCTION"),
    ("SC Vector Issue: V2 Slot", "V2_INSTRUCTION"),
    ("SC Vector Issue: VLD Slot", "VLD_INSTRUCTION"),
    ("SC Vector Issue: VST Slot", "VST_INSTRUCTION"),
    ("SC Vector Issue:VEX Slot", "VEX_INSTRUCTION"),
    ("SC Vector Issue:VRES Slot", "VRES_INSTRUCTION"),
)
_SCS_ROWS = (
    ("SCS Scalar Issue", "SCALAR_ISSUE"),
    ("SCS: S0 Slot", "S0_INSTRUCTION"),
    ("SCS: S1 Slot", "S1_INSTRUCTION"),
    ("SCS: Smisc Slot", "SMISC_INSTRUCTION"),
)


def v6e_metrics(c: dict) -> list[tuple[int, str, float, float, str]]:
    """XProf's utilization metrics of one v6e sample, in its order: (node, name, achieved,
    peak, unit). `c`: {counter id: value}, absent counters 0."""

    def get(*ids):
        return sum(c.get(i, 0) for i in ids) & _U64

    k = _V6E
    out = []
    cyc = get(k.CYCLES)
    clock, hbm_peak = CHIPS[V6E]
    if cyc:

        def add(name, achieved, peak, unit):
            out.append((0, name, float(achieved), float(peak), unit))

        add("Scalar Unit", get(*k.SCALAR_ALU), cyc * 2, "instructions")
        add("Vector ALUs", get(*k.VECTOR_ALU), cyc * 4, "instructions")
        add("VPU Utilization", get(*k.VPU_OPS), cyc * 4, "instructions")
        add("Vmem Stores", get(k.VST), cyc, "instructions")
        add("Vmem Loads", get(*k.VLD), cyc * 2, "instructions")
        busy = [get(i) for i in k.MXU_BUSY]
        add("No MXU Busy", busy[0], cyc, "cycles")
        add("1 MXU Busy", busy[1], cyc, "cycles")
        add("2 MXU Busy", busy[2], cyc, "cycles")
        add("Avg MXU Busy", 0.5 * busy[1] + busy[2], cyc, "cycles")
        # Cycles of each precision on MXU u (F8 counts as BF16 on v6e).
        bf16 = [
            4 * get(k.LMR_BF16[u]) + 8 * get(k.VREG_F8[u]) + 8 * get(k.VREG_BF16[u]) + 4 * get(k.VREG_F32[u])
            for u in (0, 1)
        ]
        i8 = [2 * get(k.LMR_I8[u]) + 8 * get(k.VREG_I8[u]) for u in (0, 1)]
        i4 = [2 * get(k.LMR_I4[u]) + 8 * get(k.VREG_I4[u]) for u in (0, 1)]
        add("MXU0", (bf16[0] + i8[0] + i4[0]) & _U64, cyc, "cycles")
        add("MXU1", (bf16[1] + i8[1] + i4[1]) & _U64, cyc, "cycles")
        add("MXU BF16", sum(bf16) & _U64, cyc * 2, "cycles")
        add("MXU I8", sum(i8) & _U64, cyc * 2, "cycles")
        add("MXU I4", sum(i4) & _U64, cyc * 2, "cycles")
        add("MXU matpush", get(*k.MATPUSH), cyc * 2, "cycles")
        xbusy = [get(i) for i in k.XLU_BUSY]
        add("No XLU Busy", xbusy[0], cyc, "cycles")
        add("1 XLU Busy", xbusy[1], cyc, "cycles")
        add("2 XLUs Busy", xbusy[2], cyc, "cycles")
        add("Avg XLU Busy", 0.5 * xbusy[1] + xbusy[2], cyc, "cycles")
        add("XLU0", get(*k.XLU_INSTRUCTIONS[0]), cyc // 4, "instructions")  # 4 cycles an instruction
        add("XLU1", get(*k.XLU_INSTRUCTIONS[1]), cyc // 4, "instructions")
        seconds = cyc / clock
        read, write = (32 * get(*k.HBM_READ)) & _U64, (32 * get(*k.HBM_WRITE)) & _U64
        both = (read + write) & _U64
        add("HBM Rd+Wr - core 0", both, hbm_peak * seconds, "bytes")
        if both:
            add("HBM Read Ratio", read, both, "percent")
            add("HBM Write Ratio", write, both, "percent")
        ici_peak = ICI_PEAK_BYTES_PER_S * (cyc / 1e9)
        add("ICI (Read)", (128 * get(*k.ICI_READ)) & _U64, ici_peak, "bytes")
        add("ICI (Write)", (128 * get(*k.ICI_WRITE)) & _U64, ici_peak, "bytes")
    for s in (0, 1):
        tec = (get(k.tile(s, 0, "CYCLES")) * 16) & _U64
        for name, counter in _SC_TILE_ROWS:
            out.append((s, name, float(get(*(k.tile(s, t, counter) for t in range(16)))), float(tec), "instructions"))
        scs_cycles = get(k.scs(s, "CYCLES"))
        for name, counter in _SCS_ROWS:
            out.append((s, name, float(get(k.scs(s, counter))), float(scs_cycles), "instructions"))
    return out


# --- the v7x counters: two dies, each its own TensorCore, HBM and two SparseCores ------------

_DIE = 1 << 29  # every per-die register group is this far from die 0's


class _V7X:
    _TC, _PWR = 2791874568, 2847490056  # a die's TensorCore statistics (CYCLES), power manager (CYCLE_COUNT)
    # TensorCore statistics: offsets from a die's CYCLES.
    CYCLES = 0
    SCALAR_ALU = (80, 88)
    VECTOR_ALU = (248, 256, 264, 272)
    VST = (280,)
    VLD = (296, 304)
    VREG_F32 = (384, 392)
    VREG_BF16 = (400, 408)
    VREG_F8 = (416, 424)
    LMR_BF16 = (432, 440)
    MXU_BUSY = (448, 456, 464)
    MATPUSH = (488, 496)
    # Per XLU u: packed, rotate-permute, rotate-permute-set, transpose instructions.
    XLU_INSTRUCTIONS = ((568, 520, 536, 552), (576, 528, 544, 560))
    XLU_BUSY = (584, 592, 600)
    VPU_OPS = tuple(1688 + 32 * kind + 8 * k for kind in range(5) for k in range(4))
    TC_OFFSETS = (
        (CYCLES,)
        + SCALAR_ALU
        + VECTOR_ALU
        + VST
        + VLD
        + VREG_F32
        + VREG_BF16
        + VREG_F8
        + LMR_BF16
        + MXU_BUSY
        + MATPUSH
        + XLU_INSTRUCTIONS[0]
        + XLU_INSTRUCTIONS[1]
        + XLU_BUSY
        + VPU_OPS
    )
    PWR = {"CYCLE_COUNT": 0, "CLOCKS_SKIPPED": 8, "EXT_THROTTLE_CLOCKS_SKIPPED": 32, "LDIDT_DROOP_CLOCKS_SKIPPED": 56}
    # HBM: 4 stacks x 16 controllers x 2 pseudo-channels a die; write requests, partial
    # writes, read responses (32-byte beats).
    _HBM = 2705724440
    # ICI: four links' read and write requests (128-byte flits), on die 1.
    ICI_READ = tuple(3238449440 + i * 32768 for i in range(4))
    ICI_WRITE = tuple(3238449440 + i * 32768 + 56 for i in range(4))
    # SparseCores s = 0, 1 of each die: 16 tiles (scalar issue in SCTD, vector in SCTC), a sequencer.
    _SC_CORE = 27262976
    _SCTD, _SCTC, _SCS = 2792513544, 2809282576, 2817921032
    SCTD = {"CYCLES": 0, "TEC_SCALAR_ISSUE": 8, "TEC_S0_INSTRUCTION": 24, "TEC_S1_INSTRUCTION": 32}
    SCTD["TEC_SMISC_INSTRUCTION"] = 40
    SCTC = {
        "VECTOR_ISSUE": 0,
        "V0_INSTRUCTION": 8,
        "V1_INSTRUCTION": 16,
        "V2_INSTRUCTION": 24,
        "VLD_INSTRUCTION": 32,
        "VST_INSTRUCTION": 40,
        "VRES_INSTRUCTION": 48,
        "VEX_INSTRUCTION": 56,
    }

    @classmethod
    def tc(cls, die, offset):
        return cls._TC + die * _DIE + offset

    @classmethod
    def pwr(cls, die, name):
        return cls._PWR + die * _DIE + cls.PWR[name]

    @classmethod
    def hbm(cls, die, kind):
        """A die's HBM counters of a kind (offset from its write requests: 0, 16 partial, 32 read)."""
        return tuple(
            cls._HBM + die * _DIE + stack * 2**21 + controller * 2**17 + kind + channel * 8
            for stack in range(4)
            for controller in range(16)
            for channel in range(2)
        )

    @classmethod
    def tile(cls, die, core, tile, name):
        if name in cls.SCTD:
            return cls._SCTD + die * _DIE + core * cls._SC_CORE + tile * 2**20 + cls.SCTD[name]
        return cls._SCTC + die * _DIE + core * cls._SC_CORE + tile * 2**19 + cls.SCTC[name]

    @classmethod
    def scs(cls, die, core, name):
        return cls._SCS + die * _DIE + core * cls._SC_CORE + _V6E.SCS[name]


#: v7x spells its SparseCore rows with a space after every colon.
_V7X_TILE_ROWS = tuple((name.replace(":V", ": V"), counter) for name, counter in _SC_TILE_ROWS)


def v7x_metrics(c: dict) -> list[tuple[int, str, float, float, str]]:
    """`v6e_metrics` of a v7x sample: per die k its TensorCore (where its power manager
    counted cycles: the clock cycles skipped first; no integer precisions, FP8 instead), its
    HBM (where its TensorCore counted cycles) and the ICI (die 0's cycles, again per die);
    then the four SparseCores (node 2 x die + core)."""

    def get(*ids):
        return sum(c.get(i, 0) for i in ids) & _U64

    k = _V7X
    clock, hbm_peak = CHIPS[V7X]
    out = []

    def add(node, name, achieved, peak, unit):
        out.append((node, name, float(achieved), float(peak), unit))

    for die in (0, 1):

        def tc(*offsets, die=die):
            return get(*(k.tc(die, o) for o in offsets))

        cyc = get(k.pwr(die, "CYCLE_COUNT"))
        if cyc:
            add(die, "Clocks Skipped", get(k.pwr(die, "CLOCKS_SKIPPED")), cyc, "cycles")
            add(die, "Ext Throttle Clocks Skipped", get(k.pwr(die, "EXT_THROTTLE_CLOCKS_SKIPPED")), cyc, "cycles")
            add(die, "LDIDT Droop Clocks Skipped", get(k.pwr(die, "LDIDT_DROOP_CLOCKS_SKIPPED")), cyc, "cycles")
            add(die, "Scalar Unit", tc(*k.SCALAR_ALU), (cyc * 2) & _U64, "instructions")
            add(die, "Vector ALUs", tc(*k.VECTOR_ALU), (cyc * 4) & _U64, "instructions")
            add(die, "VPU Utilization", tc(*k.VPU_OPS), (cyc * 4) & _U64, "instructions")
            add(die, "Vmem Stores", tc(*k.VST), cyc, "instructions")
            add(die, "Vmem Loads", tc(*k.VLD), (cyc * 2) & _U64, "instructions")
            busy = [tc(o) for o in k.MXU_BUSY]
            add(die, "No MXU Busy", busy[0], cyc, "cycles")
            add(die, "1 MXU Busy", busy[1], cyc, "cycles")
            add(die, "2 MXU Busy", busy[2], cyc, "cycles")
            add(die, "Avg MXU Busy", 0.5 * busy[1] + busy[2], cyc, "cycles")
            bf16 = [(4 * tc(k.LMR_BF16[u]) + 8 * tc(k.VREG_BF16[u]) + 4 * tc(k.VREG_F32[u])) & _U64 for u in (0, 1)]
            fp8 = [(8 * tc(k.VREG_F8[u])) & _U64 for u in (0, 1)]
            add(die, "MXU0", (bf16[0] + fp8[0]) & _U64, cyc, "cycles")
            add(die, "MXU1", (bf16[1] + fp8[1]) & _U64, cyc, "cycles")
            add(die, "MXU BF16", sum(bf16) & _U64, (cyc * 2) & _U64, "cycles")
            add(die, "MXU E4M3 + E5M2", sum(fp8) & _U64, (cyc * 2) & _U64, "cycles")
            add(die, "MXU matpush", tc(*k.MATPUSH), (cyc * 2) & _U64, "cycles")
            xbusy = [tc(o) for o in k.XLU_BUSY]
            add(die, "No XLU Busy", xbusy[0], cyc, "cycles")
            add(die, "1 XLU Busy", xbusy[1], cyc, "cycles")
            add(die, "2 XLUs Busy", xbusy[2], cyc, "cycles")
            add(die, "Avg XLU Busy", 0.5 * xbusy[1] + xbusy[2], cyc, "cycles")
            for u in (0, 1):  # an instruction a cycle
                add(die, f"XLU{u}", tc(*k.XLU_INSTRUCTIONS[u]), cyc, "instructions")
        tc_cycles = tc(k.CYCLES)
        if tc_cycles:
            read = (32 * get(*k.hbm(die, 32))) & _U64
            write = (32 * get(*k.hbm(die, 0), *k.hbm(die, 16))) & _U64
            both = (read + write) & _U64
            add(0, f"HBM Rd+Wr - core {die}", both, hbm_peak * (tc_cycles / clock), "bytes")
            if both:
                add(die, "HBM Read Ratio", read, both, "percent")
                add(die, "HBM Write Ratio", write, both, "percent")
        ici_cycles = get(k.pwr(0, "CYCLE_COUNT"))
        if ici_cycles:
            peak = ICI_PEAK_BYTES_PER_S * (ici_cycles / 1e9)
            add(0, "ICI (Read)", (128 * get(*k.ICI_READ)) & _U64, peak, "bytes")
            add(0, "ICI (Write)", (128 * get(*k.ICI_WRITE)) & _U64, peak, "bytes")
    for die in (0, 1):
        for core in (0, 1):
            node = 2 * die + core
            tec = (get(k.tile(die, core, 0, "CYCLES")) * 16) & _U64
            for name, counter in _V7X_TILE_ROWS:
                add(node, name, get(*(k.tile(die, core, t, counter) for t in range(16))), tec, "instructions")
            scs_cycles = get(k.scs(die, core, "CYCLES"))
            for name, counter in _SCS_ROWS:
                add(node, name, get(k.scs(die, core, counter)), scs_cycles, "instructions")
    return out


#: Each chip's metrics, and the cycle counters kernel utilization fills from a kernel's
#: duration where the sample counted none.
_METRICS = {V6E: v6e_metrics, V7X: v7x_metrics}
_CYCLE_COUNTERS = {V6E: (_V6E.CYCLES,), V7X: (_V7X.pwr(0, "CYCLE_COUNT"), _V7X.pwr(1, "CYCLE_COUNT"))}


# --- reading the samples ------------------------------------------------------------------------


def _u64(value) -> int | None:
    """A `counter_value` as XProf reads it: a double clamped to [0, 2**64 - 1] and truncated
    (NaN: 0), an integer as its 64 bits; None where missing."""
    if value is None or value is pd.NA:
        return None
    if isinstance(value, (float, np.floating)):
        v = float(value)
        if math.isnan(v) or v <= 0:
            return 0
        return _U64 if v >= 2.0**64 else int(v)
    if isinstance(value, (int, np.integer)):
        return int(value) & _U64
    return 0  # a string or bytes value reads as 0


@dataclass
class _Line:
    """One line's counter samples: its id, name, {counter id: last value}, {id: sum}, and
    its longest event (ps)."""

    id: int
    name: str
    last: dict
    summed: dict
    longest_ps: int


def _chip_planes(space):
    """(plane, device type, device id or None) of the device planes XProf's utilization
    tools read: `/device:TPU:` planes of a chip they know."""
    for plane in space.planes:
        if not plane.name.startswith(TPU_PLANE_PREFIX):
            continue
        stats = plane.stats
        kind = stats.get("device_type_string")
        if kind not in CHIPS:
            continue
        device = stats.get("device_id")
        device = int(device) if isinstance(device, (int, np.integer)) and not isinstance(device, bool) else None
        yield plane, kind, device


def _sample_lines(plane) -> list[_Line]:
    """The plane's lines with counter samples, in plane order (events in time order)."""
    if not plane.has_stat("counter_value"):
        return []
    out = []
    for line in plane.lines:
        if not len(line):
            continue
        table = line.stat_table(names=["counter_value", "performance_counter_id"])
        if "counter_value" not in table:
            continue
        has = table.present("counter_value")
        columns = line.stat_columns(names=["counter_value", "performance_counter_id"])
        values = columns["counter_value"]
        ids = columns.get("performance_counter_id")
        order = np.lexsort((-line.event_duration_ps.astype(np.int64), line.start_ps.astype(np.int64)))
        last: dict[int, int] = {}
        summed: dict[int, int] = {}
        for i in order.tolist():
            if not has[i]:
                continue
            value = _u64(values[i])
            cid = _u64(ids[i]) if ids is not None else None
            if not cid:
                cid = int(line.metadata_id[i])
            if value is None or not cid:
                continue
            last[cid] = value
            summed[cid] = (summed.get(cid, 0) + value) & _U64
        if last:
            out.append(_Line(int(line.id), line.name, last, summed, int(line.event_duration_ps.max())))
    return out


def utilization_viewer(run: RunLike) -> pd.DataFrame:
    """XProf's utilization viewer table (see the module doc): one row per metric of every
    counter sample line: host, device (its `device_id`), sample (the line's id), node,
    name, achieved, peak, unit. `.attrs["reason"]` says why it is empty."""
    rows = []
    planes_without_id = False
    for host, space in run.host_spaces():
        for plane, kind, device in _chip_planes(space):
            lines = _sample_lines(plane)
            if device is None:
                planes_without_id |= bool(lines)
                continue
            for line in lines:
                for node, name, achieved, peak, unit in _METRICS[kind](line.last):
                    rows.append((host, device, line.id, node, name, achieved, peak, unit))
    out = pd.DataFrame(rows, columns=VIEWER_COLUMNS)
    out.attrs["reason"] = "" if len(out) else (NO_SAMPLES + (f"; {NO_DEVICE_ID}" if planes_without_id else ""))
    return out


# --- kernel utilization -------------------------------------------------------------------------

_KERNEL_LINES = ("PALLAS", "XLA OPS", "Pallas", "XLA Ops")


def _percent(achieved, peak) -> float:
    """std::round(achieved / peak * 10000) / 100: a percentage with two decimals, halves
    away from zero (as XProf rounds)."""
    v = achieved / peak * 10000.0
    whole = math.floor(v)
    if v - whole >= 0.5:
        whole += 1
    return whole / 100.0


def _first_op(plane):
    """(name of the first op in time on the plane's first kernel line that has a named one,
    its duration in µs, {op name: its longest duration in µs} over every kernel line), the
    names read as categories (a line of a million ops has a few hundred names)."""
    first, first_us, longest = None, 0.0, {}
    for line in plane.lines:
        if line.name not in _KERNEL_LINES or not len(line):
            continue
        names = line.names()
        codes = np.asarray(names.codes)
        cats = np.asarray(names.categories.astype(object))
        named = np.array([isinstance(c, str) and bool(c) for c in cats], dtype=bool)
        ok = (codes >= 0) & named[np.maximum(codes, 0)]
        if not ok.any():
            continue
        durations = line.event_duration_ps.astype(np.int64)
        best = pd.Series(durations[ok]).groupby(codes[ok]).max()
        for code, ps in best.items():
            us = int(ps) / 1000 / 1000.0
            name = cats[int(code)]
            if us > longest.get(name, -1.0):
                longest[name] = us
        if first is None:
            at = np.flatnonzero(ok)
            starts = line.start_ps.astype(np.int64)[at]
            earliest = at[starts == starts.min()]
            i = int(earliest[np.argmax(durations[earliest])])  # (at one start, the longest first)
            first, first_us = cats[codes[i]], int(durations[i]) / 1000 / 1000.0
    return first, first_us, longest


def _kernel_name(line_name, fallback):
    if line_name.startswith("counters_"):
        suffix = line_name[len("counters_") :]
        name = (fallback or "") if suffix == "0" else suffix
    elif line_name in ("_counters_", "counters"):
        name = fallback or ""
    else:
        name = ""
    return name or "default_kernel"


@dataclass
class KernelUtilization:
    """XProf's kernel utilization: `kernels`, one row per (host, device, counter line):
    host, device_id, device_type, kernel, duration_us, mxu_utilization (%), mxu_is_anomaly
    (above 100 %: counters that do not add up), and the matrix unit cycles by precision
    (bf16/int8/int4/fp8_percent); `metrics`, every other metric with a peak, as a percentage
    (at most 100) of each kernel (kernel_row: its row in `kernels`); `devices`, the devices
    read (host, device_id, device_type), kernels or not; `reason` why it is empty."""

    kernels: pd.DataFrame
    metrics: pd.DataFrame
    devices: pd.DataFrame
    reason: str = ""


def kernel_utilization(
    run: RunLike,
    kernel: str = "",
    duration_us: float | None = None,
    force_duration: bool = False,
    device_id: int | None = None,
) -> KernelUtilization:
    """XProf's kernel utilization of a run (see the module doc). `kernel`: only kernels
    whose name holds it; `duration_us`: the kernels' duration (default: each line's
    longest event, else its op's); `force_duration`: that duration's cycles even where the
    sample counted cycles; `device_id`: that device only (None or negative: all)."""
    kernel_rows: list[tuple] = []
    metric_rows: list[tuple] = []
    devices: list[tuple] = []
    for host, space in run.host_spaces():
        for plane, kind, device in _chip_planes(space):
            if device is None:
                device = _id_from_name(plane.name)
                if device is None:
                    continue
            if device_id is not None and device_id >= 0 and device != device_id:
                continue
            devices.append((host, device, kind))
            lines = _sample_lines(plane)
            if not lines:
                continue
            fallback, fallback_us, longest = _first_op(plane)
            clock = CHIPS[kind][0]
            for line in lines:
                name = _kernel_name(line.name, fallback)
                if kernel and kernel not in name:
                    continue
                us = (
                    float(duration_us)
                    if duration_us is not None and duration_us > 0
                    else line.longest_ps / 1000 / 1000.0
                )
                if us <= 0:
                    us = longest.get(name, fallback_us)
                counters = dict(line.summed)
                nominal = us * (clock / 1e6)
                for cycles in _CYCLE_COUNTERS[kind] if nominal > 0 else ():
                    if not counters.get(cycles) or force_duration:
                        counters[cycles] = min(int(nominal), _U64)
                figures = _kernel_figures(_METRICS[kind](counters), metric_rows, host, device, len(kernel_rows))
                kernel_rows.append((host, device, kind, name, us, *figures))
    kernels = pd.DataFrame(kernel_rows, columns=KERNEL_COLUMNS)
    metrics = pd.DataFrame(metric_rows, columns=METRIC_COLUMNS)
    reason = "" if len(kernels) else NO_SAMPLES
    return KernelUtilization(
        kernels, metrics, pd.DataFrame(devices, columns=["host", "device_id", "device_type"]), reason
    )


def _id_from_name(name):
    rest = name[len(TPU_PLANE_PREFIX) :]
    return int(rest) if rest.isdigit() else None


def _kernel_figures(metrics, metric_rows, host, device, row):
    """(mxu_utilization, mxu_is_anomaly, bf16, int8, int4, fp8 %) of a kernel's metrics; its
    other metrics appended to `metric_rows` (summed over nodes, by name)."""
    mxu_achieved = mxu_peak = 0.0
    precision = {"MXU BF16": 0.0, "MXU I8": 0.0, "MXU I4": 0.0, "MXU E4M3 + E5M2": 0.0}
    others: dict = {}
    for _node, name, achieved, peak, _unit in metrics:
        if name == "Avg MXU Busy":
            mxu_achieved += achieved
            mxu_peak += peak
        elif name in precision:
            precision[name] += achieved
        elif peak > 0:
            key = "HBM Bandwidth Utilization" if name.startswith("HBM Rd+Wr") else name
            a, p = others.get(key, (0.0, 0.0))
            others[key] = (a + achieved, p + peak)
    mxu = _percent(mxu_achieved, mxu_peak) if mxu_peak > 0 else 0.0
    total = sum(precision.values())
    shares = [_percent(v, total) if total > 0 else 0.0 for v in precision.values()]
    for key in sorted(others):
        a, p = others[key]
        metric_rows.append((host, device, row, key, min(100.0, _percent(a, p))))
    return (mxu, mxu > 100.0, *shares)
