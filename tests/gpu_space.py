"""XLA-on-GPU XSpaces made from real HLO: the inputs of the differential tests.

The HLO modules are real (text parsed and laid out by jaxlib's XLA, as a GPU compile
writes them into a profile); the kernel events around them are made here, shaped as
CUPTI / roctracer write them (a `/device:GPU:N` plane with the device's capability
stats, `Stream #N(Kernel)` lines, each kernel with `hlo_op`, `hlo_module`, `program_id`,
`correlation_id` and `kernel_details`). XProf 2.24.2 (tests/xprof_oracle.py) and we read
the same file.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xprof_widgets.io import schema

MI300X = {
    "device_vendor": "AMD",
    "clock_rate": 2100000,
    "core_count": 304,
    "memory_bandwidth": 2662400000000,
    "memory_size": 206141652992,
    "compute_cap_major": 9,
    "compute_cap_minor": 4,
}
H100 = {
    "device_vendor": "Nvidia",
    "clock_rate": 1980000,
    "core_count": 132,
    "memory_bandwidth": 3352320000000,
    "memory_size": 85024112640,
    "compute_cap_major": 9,
    "compute_cap_minor": 0,
}
PASCAL = {
    "device_vendor": "Nvidia",
    "clock_rate": 1733000,
    "core_count": 20,
    "memory_bandwidth": 320320000000,
    "memory_size": 8506769408,
    "compute_cap_major": 6,
    "compute_cap_minor": 1,
}


def hlo_proto_bytes(text):
    """Serialized xla.HloProto of an HLO module written as text (parsed by jaxlib)."""
    from jax._src.lib import xla_client as xc

    module = xc.hlo.hlo_module_from_text(text).as_serialized_hlo_module_proto()
    proto = schema.message_class("xla.HloProto")()
    proto.hlo_module.ParseFromString(module)
    return proto.SerializeToString()


@dataclass
class Kernel:
    """One kernel event: times in ns, `op` the hlo_op stat (None: not an XLA kernel)."""

    name: str
    start_ns: int
    duration_ns: int
    op: str | None = None
    program_id: int | None = None
    module: str | None = None
    stream: int = 1
    stats: dict = field(default_factory=dict)


def gpu_space(modules, kernels, device=MI300X, devices=1, hostname="gpu", kernels_by_device=None, scope_ranges=None):
    """Serialized XSpace: `/host:metadata` with `modules` ({program_id: (name, hlo text or
    HloProto bytes)}), `devices` GPU planes with `device` stats, the kernels on device 0
    (or `kernels_by_device`: {device index: [Kernel]}). `scope_ranges` ({range id: its
    parent's}) makes the plane `/host:__ScopeRangeCallStack__` as JAX 0.11 writes it: one
    stat per range, its metadata id the range, its int64 value the parent (no metadata)."""
    space = schema.XSpace(hostnames=[hostname])
    meta = space.planes.add(id=0, name="/host:metadata")
    if scope_ranges:
        tree = space.planes.add(id=100, name="/host:__ScopeRangeCallStack__")
        for child, parent in scope_ranges.items():
            tree.stats.add(metadata_id=child, int64_value=parent)
    meta.stat_metadata[1].id = 1
    meta.stat_metadata[1].name = "Hlo Proto"
    for pid, (name, hlo) in modules.items():
        md = meta.event_metadata[pid]
        md.id, md.name = pid, name
        md.stats.add(metadata_id=1, bytes_value=hlo if isinstance(hlo, bytes) else hlo_proto_bytes(hlo))
    by_device = kernels_by_device if kernels_by_device is not None else {0: kernels}
    for d in range(devices):
        plane = space.planes.add(id=d + 1, name=f"/device:GPU:{d}")
        stat_ids = {}

        def stat_id(name, stat_ids=stat_ids, plane=plane):
            if name not in stat_ids:
                sid = stat_ids[name] = len(stat_ids) + 1
                plane.stat_metadata[sid].id = sid
                plane.stat_metadata[sid].name = name
            return stat_ids[name]

        for k, v in device.items():
            _set(plane.stats.add(metadata_id=stat_id(k)), v)
        metadata = {}
        lines = {}
        for i, k in enumerate(by_device.get(d, [])):
            line = lines.get(k.stream)
            if line is None:
                line = lines[k.stream] = plane.lines.add(
                    id=k.stream, display_id=0, name=f"Stream #{k.stream}(Kernel)", timestamp_ns=1_000_000
                )
            mid = metadata.get(k.name)
            if mid is None:
                mid = metadata[k.name] = len(metadata) + 1
                plane.event_metadata[mid].id = mid
                plane.event_metadata[mid].name = k.name
            ev = line.events.add(metadata_id=mid, offset_ps=k.start_ns * 1000, duration_ps=k.duration_ns * 1000)
            stats = {
                "correlation_id": 100 + i,
                "kernel_details": "grid:1,1,1 block:256,1,1 private_mem:0 group_mem:0 occ_pct:0",
            }
            if k.op is not None:
                stats["hlo_op"] = k.op
                if k.program_id is not None:
                    stats["program_id"] = k.program_id
                if k.module is not None:
                    stats["hlo_module"] = k.module
            stats.update(k.stats)
            for name, v in stats.items():
                _set(ev.stats.add(metadata_id=stat_id(name)), v)
    return space.SerializeToString()


def _set(stat, value):
    if isinstance(value, str):
        stat.str_value = value
    elif isinstance(value, float):
        stat.double_value = value
    elif isinstance(value, bytes):
        stat.bytes_value = value
    else:
        stat.int64_value = value


def write(tmp_path, data, name="gpu.xplane.pb"):
    """Writes a profile file as a run folder holds it; returns its path."""
    run = tmp_path / "plugins" / "profile" / "run"
    run.mkdir(parents=True, exist_ok=True)
    path = run / name
    path.write_bytes(data)
    return path
