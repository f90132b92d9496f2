"""A GPU's name and peaks from the capability stats its profiler plane carries.

CUPTI and roctracer write on each `/device:GPU:N` plane: `device_vendor` ("Nvidia" or
"AMD"), `compute_cap_major` / `compute_cap_minor`, `core_count` (SMs or CUs),
`clock_rate` (kHz), `memory_bandwidth` (bytes/s), `memory_size`, and on AMD
`gpu_device_name` (the gfx target, e.g. "gfx942"). XProf 2.24.2 turns them into its
device type ("Nvidia GPU (Hopper)", "AMD GPU - gfx942") and the peaks its utilisations
divide by (xprof/utils/hardware_type_utils.cc, cuda_type_utils.cc, rocm_type_utils.cc;
PerfEnv in xprof/convert/xplane_to_op_stats.cc). This module does the same:

- peak FLOP/s = cores x clock x the most FLOPs per core and cycle among FP32 and FP16,
  on the vector/CUDA cores or the matrix/tensor cores (dense, no sparsity);
- peak memory bandwidth = the plane's `memory_bandwidth`;
- peak shared-memory (on-chip) bandwidth = cores x clock x bytes per cycle of the
  shared memory / LDS.

FLOPs per core per cycle (multiply-add = 2), from the vendors' documents:

| key | used (max) | from |
|---|---|---|
| NVIDIA 2.0 Fermi | 64 (FP32) | CUDA C++ Programming Guide, "Arithmetic Instructions" throughput table |
| NVIDIA 3.0 Kepler | 384 (FP32) | same |
| NVIDIA 5.0 Maxwell | 256 (FP32) | same |
| NVIDIA 6.0 Pascal P100 | 256 (FP16 on CUDA cores) | same; Tesla P100 whitepaper |
| NVIDIA 6.1 Pascal GP10x | 256 (FP32) | same |
| NVIDIA 7.0 Volta | 1024 (FP16 tensor cores) | Tesla V100 whitepaper (8 tensor cores x 64 FMA x 2) |
| NVIDIA 7.5 Turing | 1024 (FP16 tensor cores) | Turing architecture whitepaper |
| NVIDIA 8.0 Ampere A100 | 2048 (FP16 tensor cores) | A100 whitepaper (312 TFLOPS / 108 SMs / 1.41 GHz) |
| NVIDIA 8.6 Ampere GA10x | 1024 (FP16 tensor cores) | GA102 whitepaper |
| NVIDIA 8.9 Ada | 1024 (FP16 tensor cores) | Ada Lovelace whitepaper |
| NVIDIA 9.0 Hopper | 4096 (FP16 tensor cores) | H100 whitepaper (989 TFLOPS dense / 132 SMs / 1.83 GHz) |
| NVIDIA 10.0 Blackwell | 8192 (FP16 tensor cores) | Blackwell architecture technical brief |
| AMD gfx908 (MI100) | 1024 (FP16 matrix) | AMD CDNA whitepaper, table 1, FLOPS/clock/CU |
| AMD gfx90a (MI200) | 1024 (FP16 matrix) | AMD CDNA 2 whitepaper, table 1 |
| AMD gfx942 (MI300) | 2048 (FP16 matrix) | AMD CDNA 3 whitepaper, table 1 |
| AMD gfx950 (MI350/MI355) | 4096 (FP16 matrix) | AMD CDNA 4 whitepaper, table 1 |

A compute capability not in the table takes the nearest one below it (the oldest,
below Fermi), as XProf does; an AMD target not in the table has peak 0 (XProf shows
0 rather than a borrowed number), and so has a plane without a known vendor.
Shared memory: NVIDIA 32 banks x 8 bytes per cycle (x 4 / 2 on Fermi), AMD LDS 128
bytes per CU per cycle (CDNA 1-3) and 256 (CDNA 4).
"""

from __future__ import annotations

import bisect
import math
import re

# (compute capability key major*1000+minor*10, FLOPs per SM per cycle used as peak)
_NVIDIA_FLOPS_PER_SM_CYCLE = [
    (2000, 64),
    (3000, 384),
    (5000, 256),
    (6000, 256),
    (6010, 256),
    (7000, 1024),
    (7050, 1024),
    (8000, 2048),
    (8060, 1024),
    (8090, 1024),
    (9000, 4096),
    (10000, 8192),
]
_AMD_FLOPS_PER_CU_CYCLE = {"gfx908": 1024, "gfx90a": 1024, "gfx942": 2048, "gfx950": 4096}
_AMD_LDS_BYTES_PER_CU_CYCLE = {"gfx908": 128, "gfx90a": 128, "gfx942": 128, "gfx950": 256}
_AMD_GFX_BY_CAPABILITY = {(9, 4): "gfx942", (9, 5): "gfx950"}
_NVIDIA_ARCH = {2: "Fermi", 3: "Kepler", 5: "Maxwell", 6: "Pascal", 9: "Hopper", 10: "Blackwell"}
_GFX = re.compile(r"^gfx[0-9A-Fa-f]{3,}$")


#: The most a device stat can sanely be; past it (a damaged or hostile profile: inf, 1e308,
#: 2**63) the value is unknown (0), as is one that is not a finite number, or a peak that is
#: not a real one (5e-324 TFLOP/s would make every utilisation overflow).
_STAT_MAX = {
    "core_count": 10**6,
    "clock_rate": 10**8,  # kHz
    "memory_bandwidth": 10**16,  # bytes/s
    "compute_cap_major": 100,
    "compute_cap_minor": 100,
}
PEAK_TFLOPS_RANGE = (1e-6, 1e7)
PEAK_GBPS_RANGE = (1e-6, 1e9)


def _int(stats, key):
    v = stats.get(key)
    try:
        value = int(v) if v is not None else 0
    except (TypeError, ValueError, OverflowError):
        return 0
    return value if 0 <= value <= _STAT_MAX.get(key, 2**62) else 0


def peak_stat(stats, key) -> float:
    """A peak stat of a device plane (`peak_teraflops_per_second`, `peak_*_gigabytes_per_second`)
    as a float, 0.0 (unknown) when absent, not a finite number, or outside what a device
    can have (`PEAK_TFLOPS_RANGE`, `PEAK_GBPS_RANGE`)."""
    try:
        value = float(stats.get(key) or 0.0)
    except (TypeError, ValueError, OverflowError):
        return 0.0
    low, high = PEAK_TFLOPS_RANGE if "teraflops" in key else PEAK_GBPS_RANGE
    return value if math.isfinite(value) and low <= value <= high else 0.0


def amd_gfx(stats) -> str:
    """The gfx target of an AMD plane: `gpu_device_name` if it is one, else from the
    compute capability (9.4 gfx942, 9.5 gfx950), else ""."""
    name = stats.get("gpu_device_name")
    if isinstance(name, str) and _GFX.match(name):
        return name
    return _AMD_GFX_BY_CAPABILITY.get((_int(stats, "compute_cap_major"), _int(stats, "compute_cap_minor")), "")


def gpu_model_name(stats) -> str:
    """XProf's device type for a GPU plane: "Nvidia GPU (Hopper)", "AMD GPU - gfx942",
    ... or "" when the vendor is unknown (XProf then says "GPU")."""
    vendor = stats.get("device_vendor")
    major, minor = _int(stats, "compute_cap_major"), _int(stats, "compute_cap_minor")
    if vendor == "Nvidia":
        if major == 7:
            return "Nvidia GPU (Volta)" if minor < 5 else "Nvidia GPU (Turing)"
        if major == 8:
            return "Nvidia GPU (Ampere)" if minor < 9 else "Nvidia GPU (Ada Lovelace)"
        arch = _NVIDIA_ARCH.get(major)
        return f"Nvidia GPU ({arch})" if arch else "Nvidia GPU"
    if vendor == "AMD":
        gfx = amd_gfx(stats)
        if gfx:
            return f"AMD GPU - {gfx}"
        if major in (9, 10, 11):
            return f"AMD GPU - gfx-{major}XX series"
        return "AMD GPU"
    return ""


def _clock_ghz(stats):
    return _int(stats, "clock_rate") / 1e6


def flops_per_core_cycle(stats) -> float:
    """Peak FLOPs per SM/CU per clock (0 when unknown)."""
    vendor = stats.get("device_vendor")
    if vendor == "Nvidia":
        key = _int(stats, "compute_cap_major") * 1000 + _int(stats, "compute_cap_minor") * 10
        keys = [k for k, _ in _NVIDIA_FLOPS_PER_SM_CYCLE]
        i = bisect.bisect_right(keys, key) - 1
        return float(_NVIDIA_FLOPS_PER_SM_CYCLE[max(i, 0)][1])
    if vendor == "AMD":
        return float(_AMD_FLOPS_PER_CU_CYCLE.get(amd_gfx(stats), 0))
    return 0.0


def gpu_peaks(stats) -> dict:
    """Peaks of a GPU plane as XProf's PerfEnv has them: peak_flops (FLOP/s),
    peak_hbm_bw, peak_on_chip_read_bw, peak_on_chip_write_bw (shared memory / LDS;
    bytes/s), and `source` (how the FLOP/s were found)."""
    cores, ghz = _int(stats, "core_count"), _clock_ghz(stats)
    tflops = peak_stat(stats, "peak_teraflops_per_second")
    per_core = flops_per_core_cycle(stats)
    if tflops > 0:
        flops, source = tflops * 1e12, "the profile's peak_teraflops_per_second"
    else:
        flops = cores * per_core * ghz * 1e9
        source = (
            f"{cores} cores x {ghz:g} GHz x {per_core:g} FLOPs per core per cycle"
            if flops
            else "unknown GPU: XProf shows 0"
        )
    vendor = stats.get("device_vendor")
    if vendor == "Nvidia":
        shm_per_cycle = 64 if _int(stats, "compute_cap_major") <= 2 else 256
    elif vendor == "AMD":
        shm_per_cycle = _AMD_LDS_BYTES_PER_CU_CYCLE.get(amd_gfx(stats), 0)
    else:
        shm_per_cycle = 0
    shm = cores * shm_per_cycle * ghz * 1e9
    read = peak_stat(stats, "peak_sram_rd_bw_gigabytes_per_second") * 1e9 or shm
    write = peak_stat(stats, "peak_sram_wr_bw_gigabytes_per_second") * 1e9 or shm
    return {
        "peak_flops": float(flops),
        "peak_hbm_bw": float(_int(stats, "memory_bandwidth")),
        "peak_on_chip_read_bw": read,
        "peak_on_chip_write_bw": write,
        "source": source,
    }
