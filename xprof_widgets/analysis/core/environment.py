"""The run environment and the device peaks every tool divides by (XProf's RunEnvironment
and PerfEnv, built once per host in `xplane_to_op_stats.cc` and combined by
`op_stats_combiner.cc`): the device type and its core count, the hardware kind, and each
device's peak FLOP/s and bandwidths (GPUs: `gpu_device`)."""

from __future__ import annotations

from .gpu_device import gpu_model_name, gpu_peaks, peak_stat
from .planes import GPU_PLANE_PREFIX, TPU_PLANE_PREFIX, gpu_planes, tensor_core_planes


def device_type(spaces):
    """XProf's run environment device type and core count over all files."""
    return combine_devices(host_device(space) for space in spaces)


def host_device(space):
    """(device type, cores) of one file: ("CPU", 0) without GPUs or TPUs."""
    gpu = gpu_planes(space)
    if gpu:
        # XProf names the model from the first GPU plane's vendor and capability
        # ("Nvidia GPU (Hopper)", "AMD GPU - gfx942"); without a vendor, "GPU".
        return gpu_model_name(gpu[0].stats) or "GPU", len(gpu)
    tpu = tensor_core_planes(space)
    if tpu:
        kind = tpu[0].stats.get("device_type_string")
        return (None if kind is None else str(kind)), len(tpu)
    return "CPU", 0


def combine_devices(devices):
    """The run's (device type, cores) from each host's (`host_device`, in host order), as
    XProf combines run environments: the last device type seen, cores summed."""
    kind, cores = "CPU", 0
    for host_kind, host_cores in devices:
        if host_cores:
            kind, cores = (kind if host_kind is None else host_kind), cores + host_cores
    return kind, cores


def hardware(space):
    """XProf's hardware type of one file: "TPU", "GPU" or "CPU"."""
    if any(p.name.startswith(TPU_PLANE_PREFIX) for p in space.planes):
        return "TPU"
    return "GPU" if gpu_planes(space) else "CPU"


def tpu_core_count(space):
    """TPU TensorCores of one file."""
    return len(tensor_core_planes(space))


def plane_perf_env(plane):
    """PerfEnv of a device plane (GetPerfEnvFromXPlane): peak_tflops (TFLOP/s), bws (GB/s:
    HBM, SRAM read, SRAM write[, CMEM read, CMEM write, VMEM read, VMEM write] on TPUs),
    has_cmem, has_merged_vmem, has_megacore."""
    st = plane.stats

    def num(k):
        return peak_stat(st, k)

    if plane.name.startswith(TPU_PLANE_PREFIX):
        bws = [
            num(f"peak_{k}_gigabytes_per_second")
            for k in ("hbm_bw", "sram_rd_bw", "sram_wr_bw", "cmem_rd_bw", "cmem_wr_bw", "vmem_rd_bw", "vmem_wr_bw")
        ]
        return {
            "peak_tflops": num("peak_teraflops_per_second"),
            "bws": bws,
            "has_cmem": bws[3] > 0 or bws[4] > 0,
            "has_merged_vmem": bool(st.get("has_merged_vmem")),
            "has_megacore": bool(st.get("has_megacore")),
        }
    p = gpu_peaks(st)
    return {
        "peak_tflops": p["peak_flops"] / 1e12,
        "bws": [p["peak_hbm_bw"] / 1e9, p["peak_on_chip_read_bw"] / 1e9, p["peak_on_chip_write_bw"] / 1e9],
        "has_cmem": False,
        "has_merged_vmem": False,
        "has_megacore": False,
    }


def perf_env(run) -> dict:
    """The peaks XProf's tools divide by, all hosts combined (`CombinePerfEnv`): peak_tflops
    (TFLOP/s, the last host's that has one), bws (GB/s, the first host's), has_cmem,
    has_merged_vmem, has_megacore (kept only for a single host: XProf's combiner drops
    them), hardware ("TPU", "GPU" or "CPU"), device_type (XProf's name) and
    device_core_count."""
    spaces = run.xspaces()
    return combine_perf_env([host_perf_env(s) for s in spaces], device_type(spaces))


def host_perf_env(space):
    """(hardware, the peaks of its first device plane or None) of one host, for
    `combine_perf_env`."""
    kind = hardware(space)
    prefix = TPU_PLANE_PREFIX if kind == "TPU" else GPU_PLANE_PREFIX
    planes = [p for p in space.planes if p.name.startswith(prefix)]
    return kind, (plane_perf_env(planes[0]) if planes else None)


def combine_perf_env(hosts, device):
    """`perf_env` from each host's `host_perf_env` (in host order) and the run's (device
    type, core count)."""
    env = {"peak_tflops": 0.0, "bws": [], "has_cmem": False, "has_merged_vmem": False, "has_megacore": False}
    hardware = "CPU"
    rank = {"CPU": 1, "GPU": 2, "TPU": 3}
    for kind, host in hosts:
        hardware = max(hardware, kind, key=rank.get)
        if host is None:
            continue
        if len(hosts) == 1:
            env = host
            break
        if host["peak_tflops"] > 0:
            env["peak_tflops"] = host["peak_tflops"]
        if host["bws"] and not env["bws"]:
            env["bws"] = host["bws"]
    device_type, cores = device
    return {
        **env,
        "hardware": hardware,
        "device_type": device_type if hardware != "CPU" else "",
        "device_core_count": cores,
    }
