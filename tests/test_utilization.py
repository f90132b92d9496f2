"""XProf's utilization viewer and kernel utilization against XProf 2.24.2 itself, on TPU v6e
runs whose TensorCores sampled hardware counters (made from the real v6e file by
`tools/make_tpu_profiles.py counters`: a `_counters_` line of ten samples and a
`counters_flash_attention` line per core, real v6e counter ids; the last core without a
`device_id`), on the same run with lines as libtpu may also write them (a counter sampled
twice, as a double and as an int64, a line without a cycle count, a line of another name),
and on every corpus run (no counters: empty, saying why; listed exactly where XProf lists
them)."""

import pytest

import xprof_widgets as xw
from tests import xprof_oracle
from tests.conftest import corpus_run, first_sessions, session_files
from tests.test_tpu_steps import make_tpu_profiles
from xprof_widgets.analysis import utilization
from xprof_widgets.io import schema

V6E = utilization._V6E


def _stat_id(plane, name):
    for k, m in plane.stat_metadata.items():
        if m.name == name:
            return k
    k = max(plane.stat_metadata, default=0) + 1
    plane.stat_metadata[k].id = k
    plane.stat_metadata[k].name = name
    return k


def _line(plane, name, samples):
    """A counter line: samples (counter id, value, offset ps, duration ps, value field)."""
    line = plane.lines.add()
    line.id = max(x.id for x in plane.lines) + 1
    line.name = name
    for cid, value, at, duration, field in samples:
        mid = max(plane.event_metadata, default=0) + 1
        plane.event_metadata[mid].id = mid
        plane.event_metadata[mid].name = f"counter_{cid}"
        e = line.events.add(metadata_id=mid, offset_ps=at, duration_ps=duration)
        for key, kind, v in (("performance_counter_id", "uint64_value", cid), ("counter_value", field, value)):
            s = e.stats.add()
            s.metadata_id = _stat_id(plane, key)
            setattr(s, kind, v)


def _odd_lines(path):
    """The made run with more lines on TPU 0: `counters_matmul`, VST sampled three times
    (int64 early, uint64, a double late: the viewer keeps the latest, kernel utilization sums
    them) and its first event 400 µs long; `counters_0` (the first op's name) without
    durations; `other_line` without a cycle count (kernel utilization: 250 µs at the clock)."""
    space = schema.XSpace()
    space.ParseFromString(path.read_bytes())
    plane = next(p for p in space.planes if p.name == "/device:TPU:0")
    t0 = 20_389_366_556_750
    base = [
        (V6E.CYCLES, 700_000),
        (V6E.MXU_BUSY[1], 150_000),
        (V6E.MXU_BUSY[2], 350_000),
        (V6E.LMR_BF16[0], 60_000),
        (V6E.VREG_I8[1], 2_750),
        (V6E.VREG_I4[0], 3_000),
        (V6E.XLU_BUSY[2], 80_000),
        (V6E.VPU_OPS[19], 333_333),
        (V6E.HBM_READ[5], 9_000_000),
        (V6E.HBM_WRITE[40], 2_500_000),
        (V6E.ICI_WRITE[1], 40_000),
        (V6E.tile(1, 0, "CYCLES"), 600_000),
        (V6E.tile(1, 9, "VECTOR_ISSUE"), 450_000),
        (V6E.scs(0, "CYCLES"), 500_000),
        (V6E.scs(0, "S1_INSTRUCTION"), 25_000),
    ]
    matmul = [(cid, v, t0 + i, 400_000_000 if i == 0 else 0, "uint64_value") for i, (cid, v) in enumerate(base)]
    matmul += [
        (V6E.VST, 1_000, t0 - 10_000, 0, "int64_value"),
        (V6E.VST, 210_000, t0 + 50, 0, "uint64_value"),
        (V6E.VST, 5_000.0, t0 + 10_000, 0, "double_value"),
    ]
    _line(plane, "counters_matmul", matmul)
    _line(plane, "counters_0", [(cid, 2 * v, t0 + i, 0, "uint64_value") for i, (cid, v) in enumerate(base)])
    _line(
        plane,
        "other_line",
        [(cid, v, t0 + i, 250_000_000 if i == 3 else 1_000_000, "uint64_value") for i, (cid, v) in enumerate(base[1:])],
    )
    out = path.parent.parent / "odd" / path.name
    out.parent.mkdir()
    out.write_bytes(space.SerializeToString())
    return out


@pytest.fixture(scope="module")
def counters(tmp_path_factory):
    root = tmp_path_factory.mktemp("utilization")
    path = make_tpu_profiles.write("counters", root)
    return path, xw.load_run(root)


@pytest.fixture(scope="module")
def odd(counters):
    path = _odd_lines(counters[0])
    return path, xw.load_run(path.parent)


def _viewer_equals_xprof(path, run):
    d = xprof_oracle.tool_data([path], "utilization_viewer")
    assert [c["id"] for c in d["cols"]] == ["host", "device", "sample", "node", "name", "achieved", "peak", "unit"]
    theirs = [[c["v"] for c in r["c"]] for r in d["rows"]]
    ours = run.utilization_viewer()
    mine = [
        [0.0, float(r.device), float(r.sample), float(r.node), r.name, r.achieved, r.peak, r.unit]
        for r in ours.itertuples(index=False)
    ]
    assert mine == theirs  # every value, exactly
    return ours


def _as_xprof(result):
    """Our KernelUtilization as XProf's JSON (devices -> kernels -> metrics)."""
    out = []
    for dev in result.devices.itertuples(index=False):
        mine = result.kernels[(result.kernels["host"] == dev.host) & (result.kernels["device_id"] == dev.device_id)]
        kernels = []
        for i, k in mine.iterrows():
            m = result.metrics[result.metrics["kernel_row"] == i]
            kernels.append(
                {
                    "duration_us": k.duration_us,
                    "kernel_name": k.kernel,
                    "mxu_cycles_breakdown": {
                        "BF16": k.bf16_percent,
                        "FP8": k.fp8_percent,
                        "Int4": k.int4_percent,
                        "Int8": k.int8_percent,
                    },
                    "mxu_is_anomaly": bool(k.mxu_is_anomaly),
                    "mxu_utilization": k.mxu_utilization,
                    "other_metrics": dict(zip(m["metric"], m["percent"])),
                }
            )
        out.append({"device_id": int(dev.device_id), "device_type": dev.device_type, "kernels": kernels})
    return {"devices": out, "status": "SUCCESS"}


OPTIONS = [
    ({}, {}),
    ({"kernel": "flash"}, {"kernel": "flash"}),
    ({"duration_us": "123.5"}, {"duration_us": 123.5}),
    ({"force_duration": True, "duration_us": "250"}, {"force_duration": True, "duration_us": 250.0}),
    ({"device_id": 1}, {"device_id": 1}),
    ({"device_id": 3}, {"device_id": 3}),  # the plane without device_id: its id from its name
]


def test_the_utilization_viewer_equals_xprof(counters):
    path, run = counters
    ours = _viewer_equals_xprof(path, run)
    # 3 cores with a device id x 2 lines x 58 metrics (TensorCore, HBM, ICI, SparseCore).
    assert len(ours) == 3 * 2 * 58 and ours.attrs["reason"] == ""
    mxu = ours[(ours["name"] == "Avg MXU Busy") & (ours["device"] == 0)].iloc[0]
    assert mxu.achieved / mxu.peak == pytest.approx(0.5 * 0.3 + 0.45, rel=1e-6)


@pytest.mark.parametrize("theirs,ours", OPTIONS, ids=[str(o) for o, _ in OPTIONS])
def test_kernel_utilization_equals_xprof(counters, theirs, ours):
    path, run = counters
    assert _as_xprof(run.kernel_utilization(**ours)) == xprof_oracle.tool_data([path], "kernel_utilization", theirs)


def test_lines_as_libtpu_may_write_them_equal_xprof(odd):
    path, run = odd
    ours = _viewer_equals_xprof(path, run)
    matmul = ours[(ours["device"] == 0) & (ours["name"] == "Vmem Stores")]
    assert 5_000.0 in matmul["achieved"].tolist()  # the latest sample of VST
    for theirs, mine in OPTIONS[:4]:
        assert _as_xprof(run.kernel_utilization(**mine)) == xprof_oracle.tool_data([path], "kernel_utilization", theirs)
    k = run.kernel_utilization().kernels.set_index("kernel")
    assert k.at["matmul", "duration_us"] == 400.0 and k.at["default_kernel", "duration_us"] == 250.0
    metrics = run.kernel_utilization().metrics
    row = int(run.kernel_utilization().kernels.index[run.kernel_utilization().kernels["kernel"] == "matmul"][0])
    vst = metrics[(metrics["kernel_row"] == row) & (metrics["metric"] == "Vmem Stores")]["percent"].iloc[0]
    assert vst == round(100 * (1_000 + 210_000 + 5_000) / 700_000, 2)  # the three samples summed


def test_rounding_is_xprofs():
    assert utilization._percent(1, 8) == 12.5
    assert utilization._percent(0.0012345, 1) == 0.12
    assert utilization._percent(0.0012355, 1) == 0.12  # 12.355 as a double is below the half
    assert utilization._percent(5, 4) == 125.0


def test_tools_list_them_where_xprof_does(counters):
    path, run = counters
    listed = xprof_oracle.tool_names([path])
    for tool in ("utilization_viewer", "kernel_utilization"):
        assert tool in listed and tool in run.tools


RUNS = first_sessions()


@pytest.mark.parametrize("name,session", RUNS, ids=[f"{n}/{s}" for n, s in RUNS])
def test_none_on_the_corpus(name, session):
    run = corpus_run(name, session)
    paths = session_files(name, session)
    listed = xprof_oracle.tool_names(paths)
    viewer = run.utilization_viewer()
    assert viewer.empty and "performance_counter_id" in viewer.attrs["reason"]
    kernels = run.kernel_utilization()
    assert kernels.kernels.empty and kernels.reason
    for tool in ("utilization_viewer", "kernel_utilization"):
        assert (tool in run.tools) == (tool in listed) is False
    assert not xprof_oracle.tool_data(paths[:1], "utilization_viewer").get("rows")


def test_the_widgets_show_the_metrics(counters):
    _, run = counters
    w = xw.UtilizationViewerWidget(run)
    t = run.utilization_viewer()
    first = t[(t["device"] == 0) & (t["sample"] == t["sample"].iloc[0])]
    assert f'data-testid="utilization" data-rows="{len(first)}"' in w.html
    assert len(w.samples) == 6 and "SparseCore 1" in w.html
    w.sample = w.samples[-1]
    assert w.samples[-1].split("/")[1] == "2"
    with pytest.raises(Exception, match="no sample"):
        w.sample = "nope/0/1"
    k = xw.KernelUtilizationWidget(run)
    result = run.kernel_utilization()
    assert f'data-testid="kernels" data-rows="{len(result.kernels)}"' in k.html
    k.kernel = "flash"
    assert f'data-testid="kernels" data-rows="{(result.kernels["kernel"] == "flash_attention").sum()}"' in k.html
    k.kernel_row = int(result.kernels.index[-1])
    assert f'data-testid="kernel-metrics" data-rows="{(result.metrics["kernel_row"] == k.kernel_row).sum()}"' in k.html


def test_without_counters_the_widgets_say_why():
    run = xw.sample_run()
    assert "No utilization viewer" in xw.UtilizationViewerWidget(run).html
    assert "No kernel utilization" in xw.KernelUtilizationWidget(run).html


V7X = utilization._V7X


def _v7x_counters():
    """A v7x sample with every counter XProf's metrics read on both dies (a few HBM channels),
    distinct values, cycle counts of 10 M."""
    counters = {}
    for die in (0, 1):
        for o in V7X.TC_OFFSETS:
            counters[V7X.tc(die, o)] = 10_000 + 37 * o + 1_000 * die
        counters[V7X.tc(die, 0)] = 10_000_000  # the TensorCore's cycles
        for name in V7X.PWR:
            counters[V7X.pwr(die, name)] = 10_000_000 if name == "CYCLE_COUNT" else 1_000 * (die + 1) + len(name)
        for kind in (0, 16, 32):
            for n, i in enumerate(V7X.hbm(die, kind)[::9]):
                counters[i] = 50_000 + 11 * n + kind
        for core in (0, 1):
            for t in range(16):
                for name in (*V7X.SCTD, *V7X.SCTC):
                    counters[V7X.tile(die, core, t, name)] = 2_000 + 13 * t + 7 * core + 3 * die + len(name)
                counters[V7X.tile(die, core, t, "CYCLES")] = 1_000_000
            for name in ("CYCLES", "SCALAR_ISSUE", "S0_INSTRUCTION", "S1_INSTRUCTION", "SMISC_INSTRUCTION"):
                counters[V7X.scs(die, core, name)] = 900_000 if name == "CYCLES" else 5_000 + len(name) + core
    for n, i in enumerate(V7X.ICI_READ + V7X.ICI_WRITE):
        counters[i] = 3_000 + n
    return counters


def _v7x_run(path):
    """The made counters run as a v7x's: its TPU planes `TPU v7x`, and on TPU 0 a
    `counters_v7x` line (every counter), a `counters_mykernel` line of TensorCore counters
    only (its cycles come from its duration) and a `counters_0` line without the power
    manager's cycles (no TensorCore rows; HBM rows still)."""
    space = schema.XSpace()
    space.ParseFromString(path.read_bytes())
    for plane in space.planes:
        if not plane.name.startswith("/device:TPU:"):
            continue
        sid = _stat_id(plane, "device_type_string")
        for st in plane.stats:
            if st.metadata_id == sid:
                st.str_value = "TPU v7x"
    plane = next(p for p in space.planes if p.name == "/device:TPU:0")
    t0 = 20_389_366_556_750
    counters = _v7x_counters()
    _line(plane, "counters_v7x", [(cid, v, t0 + i, 0, "uint64_value") for i, (cid, v) in enumerate(counters.items())])
    tc_only = [(cid, v) for cid, v in counters.items() if cid - V7X._TC in range(0, 2 * 2**29) and cid != V7X.tc(0, 0)]
    tc_only = [(cid, v) for cid, v in tc_only if cid != V7X.tc(1, 0)]
    _line(
        plane,
        "counters_mykernel",
        [(cid, v, t0 + i, 123_456_789 if i == 0 else 0, "uint64_value") for i, (cid, v) in enumerate(tc_only)],
    )
    no_pwr = [
        (cid, v) for cid, v in counters.items() if cid not in (V7X.pwr(0, "CYCLE_COUNT"), V7X.pwr(1, "CYCLE_COUNT"))
    ]
    _line(plane, "counters_0", [(cid, v, t0 + i, 0, "uint64_value") for i, (cid, v) in enumerate(no_pwr)])
    out = path.parent.parent / "v7x" / path.name
    out.parent.mkdir()
    out.write_bytes(space.SerializeToString())
    return out


@pytest.fixture(scope="module")
def v7x(counters):
    path = _v7x_run(counters[0])
    return path, xw.load_run(path.parent)


def test_a_v7x_equals_xprof(v7x):
    """TPU v7x: two dies (each its TensorCore, HBM and two SparseCores), XProf's own spelling
    and gates: the TensorCore rows where the die's power manager counted cycles, HBM where
    its TensorCore did, the ICI on die 0's cycles; every row of the viewer and every kernel."""
    path, run = v7x
    ours = _viewer_equals_xprof(path, run)
    sizes = ours[ours["device"] == 0].groupby("sample").size()
    full = ours[(ours["device"] == 0) & (ours["sample"] == sizes.idxmax())]
    assert len(full) == 120 and "SC Vector Issue: V0 Slot" in set(full["name"]) and (full["node"] == 3).any()
    for theirs, mine in OPTIONS[:5]:
        assert _as_xprof(run.kernel_utilization(**mine)) == xprof_oracle.tool_data([path], "kernel_utilization", theirs)
    k = run.kernel_utilization().kernels.set_index("kernel")
    assert k.at["mykernel", "duration_us"] == pytest.approx(123.456789)
