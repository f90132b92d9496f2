"""Memory viewer against XProf 2.24.2's own output for every module in the corpus.

References: ../shared/profiles/_reference/LOGDIR/RUN/memory_viewer/MODULE.json
(XProf's PreprocessResult as proto3 JSON, sizes in MiB). Each is compared with
`memory_viewer` run on the HloProto of the same module taken from the
profile's XSpace.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from xprof_widgets.analysis.core.modules import default_module, list_modules
from xprof_widgets.analysis.memory_viewer import MemoryViewerResult, memory_viewer
from xprof_widgets.errors import ProfileError
from xprof_widgets.io import schema
from xprof_widgets.io.hlo import hlo_protos_from_xspace, parse_hlo_proto

from .conftest import PROFILES

REFERENCES = sorted(PROFILES.glob("_reference/*/*/memory_viewer/*.json"))
MIB = float(1 << 20)
RTOL = 1e-6

needs_shared = pytest.mark.skipif(not REFERENCES, reason=f"no XProf reference outputs under {PROFILES}/_reference")


@cache
def _modules(logdir: str, run: str) -> dict[str, bytes]:
    protos: dict[str, bytes] = {}
    for path in sorted((PROFILES / logdir / "plugins" / "profile" / run).glob("*.xplane.pb")):
        protos.update(hlo_protos_from_xspace(schema.XSpace.FromString(path.read_bytes())))
    return protos


def _case(ref: Path):
    run_dir = ref.parent.parent
    return run_dir.parent.name, run_dir.name, ref.stem


@cache
def _result(ref: Path) -> tuple[MemoryViewerResult, dict]:
    logdir, run, module = _case(ref)
    protos = _modules(logdir, run)
    assert module in protos, f"{module} not in the HloProtos of {logdir}/{run}"
    return memory_viewer(protos[module], memory_space=0, module_name=module), json.loads(ref.read_text())


def _mib(value_bytes):
    return np.asarray(value_bytes, dtype=np.float64) / MIB


def _close(ours_mib, ref_mib):
    np.testing.assert_allclose(ours_mib, np.asarray(ref_mib, dtype=np.float64), rtol=RTOL, atol=0)


IDS = ["/".join(_case(r)[::2]) for r in REFERENCES]


@needs_shared
def test_every_reference_has_a_module():
    assert len(REFERENCES) >= 38
    for ref in REFERENCES:
        logdir, run, module = _case(ref)
        assert module in _modules(logdir, run)


@needs_shared
@pytest.mark.parametrize("ref", REFERENCES, ids=IDS)
def test_matches_xprof(ref):
    r, d = _result(ref)

    # Peaks and allocation totals.
    _close(_mib(r.peak_heap_bytes), d.get("peakHeapMib", 0))
    _close(_mib(r.peak_unpadded_heap_bytes), d.get("peakUnpaddedHeapMib", 0))
    _close(_mib(r.total_allocation_bytes), d.get("totalBufferAllocationMib", 0))
    _close(_mib(r.indefinite_allocation_bytes), d.get("indefiniteBufferAllocationMib", 0))
    _close(_mib(r.entry_parameters_bytes), d.get("entryComputationParametersMib", 0))
    _close(_mib(r.live_out_bytes), d.get("maybeLiveOutMib", 0))
    _close(_mib(r.non_reusable_bytes), d.get("nonReusableMib", 0))
    _close(_mib(r.padding_overhead_bytes), d.get("peakHeapMib", 0) - d.get("peakUnpaddedHeapMib", 0))
    assert r.entry_computation_name == d.get("entryComputationName", "")
    assert r.module_name == d.get("moduleName", "")

    # Heap sizes per heap-simulator step.
    heap = d.get("heapSizes", [])
    assert len(r.heap_sizes) == len(heap)
    assert len(r.unpadded_heap_sizes) == len(d.get("unpaddedHeapSizes", []))
    if heap:
        _close(_mib(r.heap_sizes), heap)
        _close(_mib(r.unpadded_heap_sizes), d["unpaddedHeapSizes"])
    assert r.peak_position == d.get("peakHeapSizePosition", 0)
    assert r.hlo_instruction_names == d.get("hloInstructionNames", [])

    # Buffers live at the peak, program order.
    max_heap = d.get("maxHeap", [])
    frame = r.buffers_at_peak
    assert len(frame) == len(max_heap)
    assert list(frame["logical_buffer_id"]) == [int(o.get("logicalBufferId", 0)) for o in max_heap]
    _close(_mib(frame["size_bytes"].to_numpy()), [o.get("logicalBufferSizeMib", 0) for o in max_heap])
    named = frame[frame["allocation_type"] != "small"]
    ref_named = [o for o in max_heap if int(o.get("logicalBufferId", 0)) != -1]
    _close(_mib(named["unpadded_size_bytes"].to_numpy()), [o.get("unpaddedShapeMib", 0) for o in ref_named])
    for column, key in [
        ("instruction_name", "instructionName"),
        ("category", "groupName"),
        ("shape", "shapeString"),
        ("tf_op_name", "tfOpName"),
        ("op_code", "opCode"),
    ]:
        assert list(named[column]) == [o.get(key, "") for o in ref_named], column
    assert list(named["source"]) == [
        f"{o['sourceInfo']['fileName']}:{o['sourceInfo'].get('lineNumber', 0)}" if "sourceInfo" in o else ""
        for o in ref_named
    ]

    # By-size order: sizes descending.
    by_size = d.get("maxHeapBySize", [])
    _close(_mib(r.buffers_by_size()["size_bytes"].to_numpy()), [o.get("logicalBufferSizeMib", 0) for o in by_size])
    assert sorted(frame["size_rank"]) == list(range(len(frame)))

    # Lifespans on the chart.
    spans = {int(k): (v.get("start", 0), v.get("limit", 0)) for k, v in d.get("logicalBufferSpans", {}).items()}
    assert r.logical_buffer_spans == spans
    for _, row in named.iterrows():
        if row["logical_buffer_id"] in spans:
            assert (row["span_start"], row["span_end"]) == spans[row["logical_buffer_id"]]


@needs_shared
@pytest.mark.parametrize("ref", REFERENCES, ids=IDS)
def test_allocation_timeline_matches_xprofs_buffer_blocks(ref):
    """Each buffer's place in memory over its lifespan, as XProf's buffer allocation
    timeline (`bufferBlocks`) has it: the same blocks in the same order, with their
    allocation containers."""
    r, d = _result(ref)
    want = d.get("bufferBlocks", [])
    got = r.allocation_blocks
    assert len(got) == len(want)
    for (_, row), block in zip(got.iterrows(), want):
        assert row["logical_buffer_id"] == int(block.get("logicalBufferId", 0))
        assert row["name"] == block.get("name", "")
        assert row["category"] == block.get("category", "")
        assert row["offset_bytes"] == int(block.get("offset", 0))
        assert row["size_bytes"] == int(block.get("size", 0))
        assert (row["start_step"], row["end_step"]) == (int(block.get("startStep", 0)), int(block.get("endStep", 0)))
        if row["logical_buffer_id"] >= 0:
            assert row["shape"] == block.get("shapeString", "")
            assert row["tf_op_name"] == block.get("tfOpName", "")
            assert row["unpadded_size_bytes"] == int(block.get("unpaddedSize", 0))


@needs_shared
@pytest.mark.parametrize("ref", REFERENCES, ids=IDS)
def test_by_size_index_maps_match_xprof(ref):
    r, d = _result(ref)
    ranks = list(r.buffers_at_peak["size_rank"])
    assert ranks == [int(x) for x in d.get("maxHeapToBySize", [])]
    by_size = list(r.buffers_by_size()["program_order_index"])
    assert by_size == [int(x) for x in d.get("bySizeToMaxHeap", [])]


def test_size_order_ties_follow_std_sort():
    from xprof_widgets.analysis.memory_viewer import _introsort_order

    rng = np.random.default_rng(0)
    for n in (0, 1, 5, 16, 17, 40, 200):
        keys = rng.integers(0, 4, n).tolist()
        order = _introsort_order(keys)
        assert sorted(order) == list(range(n))
        assert [keys[i] for i in order] == sorted(keys, reverse=True)


@needs_shared
def test_fragmentation_matches_xprof_ui_formula():
    ref = next(r for r in REFERENCES if r.stem == "jit_step(30)")
    r, d = _result(ref)
    total = d["totalBufferAllocationMib"]
    expected = (total - d["peakHeapMib"]) / (total - d["indefiniteBufferAllocationMib"])
    assert r.fragmentation == pytest.approx(expected, rel=1e-9)
    assert r.heap_sizes.dtype == np.int64
    assert r.heap_sizes[r.peak_position + 1] == r.peak_heap_bytes


@needs_shared
def test_list_modules_and_default():
    logdir, run, _ = _case(REFERENCES[0])
    protos = _modules(logdir, run)
    frame = list_modules(protos)
    assert set(frame["module"]) == set(protos)
    assert (frame["instructions"] > 0).all()
    assert list(frame["total_allocation_bytes"]) == sorted(frame["total_allocation_bytes"], reverse=True)
    assert default_module(protos) == frame["module"].iloc[0]
    if logdir == "jax_mlp_cpu":
        assert default_module(protos) == "jit_step(30)"
    assert default_module({}) is None


@pytest.mark.parametrize("data", [b"\xff\xff\xff\xff", b"\x0a\x05abc", b"\x08"], ids=["varint", "truncated", "short"])
def test_corrupt_hlo_proto_raises_profile_error(data):
    with pytest.raises(ProfileError) as info:
        memory_viewer(data, module_name="jit_bad(1)")
    assert "jit_bad(1)" in str(info.value)
    with pytest.raises(ProfileError):
        parse_hlo_proto(data, "x.pb")


def test_empty_hlo_proto_gives_empty_result():
    r = memory_viewer(b"", module_name="empty(0)")
    assert r.peak_heap_bytes == 0
    assert len(r.heap_sizes) == 0
    assert r.buffers_at_peak.empty
    assert r.fragmentation == 0.0


def test_inconsistent_trace_raises_profile_error():
    hlo = schema.message_class("xla.HloProto")()
    comp = hlo.hlo_module.computations.add(name="main")
    inst = comp.instructions.add(name="p", opcode="parameter", id=1)
    inst.shape.element_type = 11  # F32
    inst.shape.dimensions.append(4)
    lb = hlo.buffer_assignment.logical_buffers.add(id=7, size=16)
    lb.defined_at.instruction_id = 1
    alloc = hlo.buffer_assignment.buffer_allocations.add(index=0, size=16)
    alloc.assigned.add(logical_buffer_id=7, size=16)
    trace = hlo.buffer_assignment.heap_simulator_traces.add()
    trace.events.add(kind=0, buffer_id=7)
    trace.events.add(kind=1, buffer_id=7)
    ok = memory_viewer(hlo.SerializeToString(), module_name="m(1)")
    assert ok.peak_heap_bytes == 16 and list(ok.heap_sizes) == [0, 16, 0]
    assert ok.logical_buffer_spans == {7: (0, 1)}
    trace.events.add(kind=1, buffer_id=7)  # freed twice
    with pytest.raises(ProfileError, match="freed more than once"):
        memory_viewer(hlo.SerializeToString(), module_name="m(1)")


def test_hlo_protos_from_xspace_without_metadata_plane():
    space = schema.XSpace()
    space.planes.add(name="/host:CPU")
    assert hlo_protos_from_xspace(space) == {}


def test_every_memory_space_the_module_uses_matches_xprof():
    """The TPU module puts buffers in HBM, VMEM, Sflag and host memory: the viewer lists
    those spaces only, and in each one gives XProf's numbers (XProf run on the same file)."""
    from xprof_widgets.analysis.memory_viewer import memory_space_name

    from . import xprof_oracle
    from .conftest import VENDORED

    files = sorted((VENDORED / "tpu_v6e_inference").rglob("*.xplane.pb"))
    module = "jit_f(12190760917235803885)"
    protos = hlo_protos_from_xspace(schema.XSpace.FromString(files[0].read_bytes()))
    first = memory_viewer(protos[module], module_name=module)
    assert first.memory_spaces == [0, 1, 2, 5]
    assert [memory_space_name(c) for c in first.memory_spaces] == ["HBM", "VMEM", "Sflag", "Host"]
    with pytest.raises(ValueError, match=r"no memory space 99; its buffers use 0 \(HBM\), 1 \(VMEM\)"):
        memory_viewer(protos[module], memory_space=99, module_name=module)  # issue 46
    mib = 2**20
    for color in first.memory_spaces:
        ours = memory_viewer(protos[module], memory_space=color, module_name=module)
        xprof = xprof_oracle.tool_data(files, "memory_viewer", {"module_name": module, "memory_space": str(color)})
        assert ours.memory_space == color
        assert ours.peak_heap_bytes / mib == pytest.approx(xprof.get("peakHeapMib", 0), rel=1e-12), color
        assert ours.total_allocation_bytes / mib == pytest.approx(xprof.get("totalBufferAllocationMib", 0), rel=1e-12)
        assert ours.indefinite_allocation_bytes / mib == pytest.approx(
            xprof.get("indefiniteBufferAllocationMib", 0), rel=1e-12
        )
        assert len(ours.buffers_at_peak) == len(xprof.get("maxHeap", []))
