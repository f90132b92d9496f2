"""Memory profile against XProf 2.24.2's own output, for every allocator of the corpus."""

import json

import numpy as np
import pandas as pd
import pytest

from xprof_widgets.analysis.memory_profile import (
    NO_EVENTS_REASON,
    UNUSED_PREALLOCATED,
    _box_filter,
    data_type_name,
)

from .conftest import REFERENCE, corpus_run

RUNS = {
    "tf_keras_cpu": "2026_11_22_03_16_48",
    "tf_gpu_multiworker": "2020_12_23_gpu_multi_worker",
    "tpu_v6e_inference": "2025_tpu_inference",
    "amd_jax_gemm_mi300": "2026_02_20_13_54_10",
    "amd_jax_elementwise_mi300": "2026_02_20_13_54_27",
    "amd_jax_conv_mi300": "2026_02_20_13_53_59",
    "nvidia_jax_mlp_h200": "2026_11_26_01_22_22",
    "nvidia_jax_no_steps_h200": "2026_11_26_01_22_22",
    "nvidia_jax_mlp_no_graphs_h200": "2026_11_26_01_30_16",
    "nvidia_jax_scan_h200": "2026_11_26_01_49_05",
    "nvidia_jax_scan_no_graphs_h200": "2026_11_26_01_49_10",
}


def _reference(profile):
    path = REFERENCE / profile / RUNS[profile] / "memory_profile.json"
    return json.loads(path.read_text()) if path.is_file() else None


def _cases():
    out = []
    for profile in RUNS:
        ref = _reference(profile)
        for mid in ref["memoryIds"] if ref else ["?"]:
            out.append(pytest.param(profile, mid, id=f"{profile}-{mid}"))
    return out


def _run(profile):
    return corpus_run(profile, RUNS[profile])


def _ref_breakdown(alloc):
    """XProf's active allocations at peak as (op, alloc bytes, requested, occurrences, region, type, shape)."""
    rows = []
    for a in alloc.get("activeAllocations", []):
        si, sp = int(a["snapshotIndex"]), int(a["specialIndex"])
        m = alloc["specialAllocations"][sp] if si < 0 else alloc["memoryProfileSnapshots"][si]["activityMetadata"]
        rows.append(
            (
                m["tfOpName"],
                int(m["allocationBytes"]),
                int(m["requestedBytes"]),
                int(a["numOccurrences"]),
                m["regionType"],
                m["dataType"],
                m["tensorShape"],
            )
        )
    return rows


def _our_breakdown(df):
    return [(o, int(a), int(r), int(n), reg, dt, sh) for o, a, r, n, reg, dt, sh in df.itertuples(index=False)]


@pytest.mark.parametrize("profile,memory_id", _cases())
def test_summary_matches_xprof(profile, memory_id):
    ref = _reference(profile)
    # XProf's reference covers the first host only (make_reference.py: files[:1]).
    res = _run(profile).memory_profile(memory_id)
    assert res.host == _run(profile).hosts[0]
    assert res.memory_ids == ref["memoryIds"]
    assert res.memory_id == memory_id and res.reason == ""
    summary = ref["memoryProfilePerAllocator"][memory_id]["profileSummary"]
    peak = summary["peakStats"]
    assert res.peak_bytes_in_use == int(summary["peakBytesUsageLifetime"])
    assert res.peak_heap_bytes == int(peak["heapAllocatedBytes"])
    assert res.peak_stack_bytes == int(peak["stackReservedBytes"])
    assert res.peak_bytes_in_profile == int(peak["peakBytesInUse"])
    assert res.peak_free_bytes == int(peak["freeMemoryBytes"])
    assert res.peak_time_ps == int(summary["peakStatsTimePs"])
    assert res.peak_time_ms == pytest.approx(int(summary["peakStatsTimePs"]) / 1e9)
    assert res.capacity_bytes == int(summary["memoryCapacity"])
    assert res.fragmentation_at_peak == pytest.approx(peak.get("fragmentation", 0.0), rel=1e-5, abs=1e-9)


@pytest.mark.parametrize("profile,memory_id", _cases())
def test_timeline_matches_xprof(profile, memory_id):
    alloc = _reference(profile)["memoryProfilePerAllocator"][memory_id]
    ref = alloc["sampledTimelineSnapshots"]
    res = _run(profile).memory_profile(memory_id)
    tl = res.timeline
    assert np.all(np.diff(tl["time_offset_ps"].to_numpy()) >= 0)
    if len(ref) < 1000:  # not sampled: the whole timeline
        assert len(tl) == len(ref)
    else:
        assert len(tl) >= 1000
    sampled = res.sampled_timeline()
    assert len(sampled) == len(ref)
    assert list(sampled["time_offset_ps"]) == [int(s["timeOffsetPs"]) for s in ref]
    assert list(sampled["heap_bytes"]) == [int(s["aggregationStats"]["heapAllocatedBytes"]) for s in ref]
    assert list(sampled["stack_bytes"]) == [int(s["aggregationStats"]["stackReservedBytes"]) for s in ref]
    assert list(sampled["free_bytes"]) == [int(s["aggregationStats"]["freeMemoryBytes"]) for s in ref]
    np.testing.assert_allclose(
        sampled["fragmentation"], [s["aggregationStats"].get("fragmentation", 0) for s in ref], rtol=1e-5, atol=1e-9
    )
    meta = [s["activityMetadata"] for s in ref]
    assert list(sampled["activity"]) == ["alloc" if m["memoryActivity"] == "ALLOCATION" else "free" for m in meta]
    assert list(sampled["address"].astype(np.uint64)) == [int(m["address"]) for m in meta]
    assert list(sampled["allocation_bytes"]) == [int(m["allocationBytes"]) for m in meta]
    assert list(sampled["requested_bytes"]) == [int(m["requestedBytes"]) for m in meta]
    for col, key in [
        ("op_name", "tfOpName"),
        ("region_type", "regionType"),
        ("data_type", "dataType"),
        ("shape", "tensorShape"),
    ]:
        assert list(sampled[col]) == [m[key] for m in meta], col
    assert list(sampled["step_id"]) == [int(m["stepId"]) for m in meta]
    # The peak is never lost by the sampling.
    total = sampled["heap_bytes"] + sampled["stack_bytes"]
    assert total.max() == res.peak_heap_bytes + res.peak_stack_bytes


@pytest.mark.parametrize("profile,memory_id", _cases())
def test_breakdown_at_peak_matches_xprof(profile, memory_id):
    alloc = _reference(profile)["memoryProfilePerAllocator"][memory_id]
    res = _run(profile).memory_profile(memory_id)
    assert _our_breakdown(res.breakdown_at_peak) == _ref_breakdown(alloc)
    if alloc["specialAllocations"]:
        assert res.peak_step_id == int(alloc["specialAllocations"][0]["stepId"])
    else:  # no stack, no unused preallocation: the live allocations carry the peak's step
        first = alloc["memoryProfileSnapshots"][int(alloc["activeAllocations"][0]["snapshotIndex"])]
        assert res.peak_step_id == int(first["activityMetadata"]["stepId"])


def test_tf_cpu_steps_come_from_grouping():
    """tf_keras_cpu holds no group_id stats: steps come from our event grouping, as XProf's do."""
    ref = _reference("tf_keras_cpu")
    mid = ref["memoryIds"][0]
    res = _run("tf_keras_cpu").memory_profile(mid)
    assert res.peak_step_id == int(ref["memoryProfilePerAllocator"][mid]["specialAllocations"][0]["stepId"]) == 13
    assert res.timeline["step_id"].nunique() > 10
    # Every row still adds up to the heap and stack at the peak.
    assert res.breakdown_at_peak.eval("allocation_bytes * occurrences").sum() == res.peak_bytes_in_profile


@pytest.mark.parametrize("profile,memory_id", _cases())
def test_breakdown_at_equals_peak_breakdown_without_synthetic_rows(profile, memory_id):
    res = _run(profile).memory_profile(memory_id)
    bd = res.breakdown_at_peak
    synthetic = ((bd["op_name"] == UNUSED_PREALLOCATED) & (bd["region_type"] == "persist/dynamic")) | (
        (bd["op_name"] == "stack") & (bd["region_type"] == "stack")
    )
    real = bd[~synthetic]
    got = res.breakdown_at(res.peak_time_abs_ps, step_id=res.peak_step_id)
    pd.testing.assert_frame_equal(got.reset_index(drop=True), real.reset_index(drop=True), check_dtype=False)
    # Across all steps there are at least as many live allocations.
    everything = res.breakdown_at(res.peak_time_abs_ps)
    assert everything["occurrences"].sum() >= got["occurrences"].sum()


@pytest.mark.parametrize("profile", ["jax_mlp_cpu", "jax_transformer_cpu"])
def test_no_allocator_events_says_why(profile):
    run = corpus_run(profile)
    res = run.memory_profile()
    assert res.reason == NO_EVENTS_REASON and "TF_CPU_ALLOCATOR_USE_BFC" in res.reason
    assert res.memory_ids == [] and res.timeline.empty and res.breakdown_at_peak.empty
    assert res.sampled_timeline().empty and res.breakdown_at(0).empty
    status = run.tool_status().set_index("tool")
    assert not status.at["memory_profile", "available"]
    assert status.at["memory_profile", "reason"] == NO_EVENTS_REASON


def test_unknown_memory_id_lists_ids():
    run = _run("tpu_v6e_inference")
    with pytest.raises(KeyError, match=r"\['0', '1', '2', '3'\]"):
        run.memory_profile("GPU_0_bfc")
    assert "memory_profile" in run.tools


def test_second_host_and_default_id():
    run = _run("tf_gpu_multiworker")
    res = run.memory_profile(host=run.hosts[1])
    assert res.host == run.hosts[1] and res.memory_id == res.memory_ids[0] == "GPU_1_bfc"
    assert len(res.timeline) > 0


def test_box_filter_and_data_types():
    total = np.array([1, 5, 2, 2, 9, 9, 0])
    assert list(_box_filter(total, 3)) == [1, 2, 4]  # widths 2, 2, 3; first of equal maxima
    assert list(_box_filter(total, 10)) == list(range(7))
    assert data_type_name(1) == "float" and data_type_name(0) == "INVALID"
    assert data_type_name(101) == "float_ref" and data_type_name(3) == "int32"


def test_missing_steps_take_the_last_step_before_them_plus_one():
    """XProf's rule for a snapshot without a step (-1): the last valid step before it + 1,
    0 when none comes before; checked against a plain walk, none missing and all missing
    included."""
    from xprof_widgets.analysis.memory_profile import _fill_steps

    rng = np.random.default_rng(7)
    cases = [np.array([], np.int64), np.full(5, -1), np.arange(6), np.array([-1, -1, 3, -1, 5, -1, -1])]
    cases += [np.where(rng.random(200) < p, -1, rng.integers(0, 9, 200)) for p in (0.1, 0.5, 0.9)]
    for step in cases:
        want, last = [], -1
        for s in step.tolist():
            want.append(s if s != -1 else last + 1)
            last = s if s != -1 else last
        assert _fill_steps(step).tolist() == want


def test_deallocations_take_metadata_of_their_pending_allocation():
    """XProf's rule (ProcessActiveAllocations' pairing): per address, an allocation is
    remembered only when none is pending, a deallocation takes the pending one's op, region,
    data type and shape and clears it. Checked against that walk, on few addresses and on
    more than 2^16 (the radix sort's limit: the other sort)."""
    from xprof_widgets.analysis.memory_profile import _copy_allocation_metadata

    rng = np.random.default_rng(11)
    for n, addresses in [(0, 1), (1, 1), (40, 3), (300, 20), (3000, 200), (200_000, 90_000)]:
        is_alloc = rng.random(n) < rng.uniform(0.2, 0.8)
        address = rng.integers(0, addresses, n).astype(np.uint64)
        ops = [f"op{i}" for i in range(n)]
        tl = pd.DataFrame({"is_alloc": is_alloc, "address": address})
        for col in ("op_name", "region_type", "data_type", "shape"):
            tl[col] = pd.Categorical(ops if col == "op_name" else [f"{col}{i % 7}" for i in range(n)])
        want, pending = list(ops), {}
        for i, (alloc, a) in enumerate(zip(is_alloc.tolist(), address.tolist())):
            if alloc:
                pending.setdefault(a, i)
            elif a in pending:
                want[i] = ops[pending.pop(a)]
        assert _copy_allocation_metadata(tl)["op_name"].astype(str).tolist() == want
