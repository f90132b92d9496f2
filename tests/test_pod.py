"""Many hosts as map, then reduce (analysis/pod.py, Run.host_summaries / pod / per_host).

* On every corpus run, the per-host summaries combined equal the one-process analyses
  (overview, input pipeline, device op metrics, kernel reports), which the other tests
  hold to XProf 2.24.2: so the two-host GPU run's combined overview is XProf's.
* A 16-host run of copies of one real host file: what adds up is 16 times the one host's,
  what averages is equal; the same in this process, on the default process pool and on a
  real `dask.distributed.LocalCluster` of worker processes.
"""

import json
import os
import re
import shutil
import time
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets import ProfileError
from xprof_widgets.analysis import pod
from xprof_widgets.analysis.core.kernels import MAX_KERNELS, all_hosts_reports
from xprof_widgets.analysis.core.op_stats import device_op_metrics
from xprof_widgets.analysis.core.steps import step_intersection
from xprof_widgets.analysis.framework_op_stats import framework_op_stats
from xprof_widgets.analysis.input_pipeline import input_pipeline
from xprof_widgets.analysis.overview import overview
from xprof_widgets.analysis.roofline import roofline_model

from .conftest import PROFILES, REFERENCE

RUNS = [
    ("jax_mlp_cpu", "2026_11_22_03_11_56"),
    ("tf_keras_cpu", "2026_11_22_03_16_08"),
    ("tf_keras_cpu", "2026_11_22_03_16_48"),
    ("tf_gpu_multiworker", "2020_12_23_gpu_multi_worker"),
    ("tpu_v6e_inference", "2025_tpu_inference"),
    ("amd_jax_gemm_mi300", "2026_02_20_13_54_10"),
    ("amd_jax_conv_mi300", "2026_02_20_13_53_59"),
    ("nvidia_jax_mlp_h200", "2026_11_26_01_22_22"),
    ("nvidia_jax_no_steps_h200", "2026_11_26_01_22_22"),
    ("nvidia_jax_mlp_no_graphs_h200", "2026_11_26_01_30_16"),
    ("nvidia_jax_scan_h200", "2026_11_26_01_49_05"),  # graph kernels attributed (the default), on each host
]
#: Host files copied 16 times: TPU ops and duty cycle; XLA:CPU thunks with steps; GPU
#: kernels with device steps and allocators.
ONE_HOST = ["tpu_v6e_inference", "jax_mlp_cpu", "tf_gpu_multiworker"]
HOSTS = 16
INSTANT = pod.InProcessExecutor()


def _folder(name, session):
    return PROFILES / name / "plugins" / "profile" / session


def _one_host_file(name):
    return sorted((PROFILES / name / "plugins" / "profile").glob("*/*.xplane.pb"))[0]


def _copies(tmp_path, source, n=HOSTS):
    folder = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    folder.mkdir(parents=True)
    for i in range(n):
        shutil.copyfile(source, folder / f"host{i:03d}.xplane.pb")
    return folder


def _same_overview(a, b, adds=1):
    """`a` is `b` with everything that adds up over hosts times `adds`."""
    assert a.host_count == b.host_count  # the copies name the same host inside
    assert a.device_type == b.device_type
    assert a.device_core_count == adds * b.device_core_count
    pd.testing.assert_frame_equal(a.steps, b.steps)
    for k in ("avg_step_time_ms", "min_step_time_ms", "max_step_time_ms", "std_step_time_ms", "input_percent"):
        assert getattr(a, k) == pytest.approx(getattr(b, k), rel=1e-12), k
    for k in ("host_op_time_eager_percent", "device_op_time_eager_percent"):
        assert getattr(a, k) == pytest.approx(getattr(b, k), rel=1e-9, abs=1e-12), k
    for k in ("device_duty_cycle_percent", "device_idle_percent", "host_idle_percent"):
        assert getattr(a, k) == (None if getattr(b, k) is None else pytest.approx(getattr(b, k), rel=1e-9)), k
    assert a.op_placement == pytest.approx(b.op_placement, rel=1e-9)
    assert (a.precision is None) == (b.precision is None)
    if a.precision is not None:
        assert a.precision == pytest.approx(b.precision, rel=1e-9)
    assert (a.bottleneck, a.recommendation, a.reason) == (b.bottleneck, b.recommendation, b.reason)
    ta, tb = a.top_ops, b.top_ops
    assert list(ta["operation"]) == list(tb["operation"]) and list(ta["category"]) == list(tb["category"])
    for k in ("self_time_ps", "time_ps", "flops", "occurrences"):
        np.testing.assert_allclose(ta[k].astype(float), adds * tb[k].astype(float), rtol=1e-12)
    for k in ("self_time_fraction", "cumulative_time_fraction", "flop_rate_gflops"):
        np.testing.assert_allclose(ta[k].astype(float), tb[k].astype(float), rtol=1e-9)
    la, lb = a.module_latency, b.module_latency
    assert list(la["module"]) == list(lb["module"])
    np.testing.assert_array_equal(la["executions"], adds * lb["executions"])
    # Percentiles of 16 copies of the samples interpolate differently: only the mean and the
    # longest stay.
    for k in ("mean_ms", "max_ms") if adds > 1 else ("mean_ms", "p50_ms", "p90_ms", "p99_ms", "max_ms"):
        np.testing.assert_allclose(la[k].astype(float), lb[k].astype(float), rtol=1e-9)


def _same_op_profile(a, b, adds=1):
    da, db = a.to_dataframe(), b.to_dataframe()
    assert list(da["name"]) == list(db["name"]) and list(da["kind"]) == list(db["kind"])
    for k in ("time_ps", "self_time_ps", "occurrences", "flops", "raw_flops", "hbm_bytes"):
        ran = (da["kind"] != "fused").to_numpy() if k == "occurrences" else slice(None)  # fused: from the HLO
        np.testing.assert_allclose(da[k].astype(float)[ran], adds * db[k].astype(float)[ran], rtol=1e-12)
    for k in ("avg_time_ps", "time_fraction", "flops_utilization", "hbm_utilization", "wasted_time_fraction"):
        np.testing.assert_allclose(da[k].astype(float), db[k].astype(float), rtol=1e-9, equal_nan=True)


# --- combined = one process, on every corpus run ---------------------------------------


@pytest.fixture(scope="module", params=RUNS, ids=lambda p: f"{p[0]}/{p[1]}")
def both(request):
    """(the run analysed in one process, its hosts summarized and combined)."""
    name, session = request.param
    folder = _folder(name, session)
    alone = xw.load_run(folder)
    combined = xw.load_run(folder, executor=INSTANT).pod()
    return name, alone, combined


def test_overview_equals_one_process(both):
    _, alone, combined = both
    _same_overview(combined.overview, overview(alone))


def test_input_pipeline_equals_one_process(both):
    _, alone, combined = both
    a, b = combined.input_pipeline, input_pipeline(alone)
    pd.testing.assert_frame_equal(a.steps, b.steps)
    pd.testing.assert_frame_equal(a.input_ops, b.input_ops)
    assert a.host_breakdown_us == pytest.approx(b.host_breakdown_us, rel=1e-12)
    assert (a.input_percent, a.verdict, a.recommendation, a.reason) == (
        b.input_percent,
        b.verdict,
        b.recommendation,
        b.reason,
    )


def test_op_metrics_equal_one_process(both):
    _, alone, combined = both
    a, b = combined.op_metrics, device_op_metrics(alone)
    assert (a.source, a.total_time_ps, a.total_op_time_ps, a.reason) == (
        b.source,
        b.total_time_ps,
        b.total_op_time_ps,
        b.reason,
    )
    assert a.peaks == pytest.approx(b.peaks, nan_ok=True) and a.program_names == b.program_names
    pd.testing.assert_frame_equal(a.ops, b.ops, check_exact=False, rtol=1e-12)


def test_kernel_reports_equal_one_process(both):
    """Kernel reports built on each host's worker and combined equal the reports of every
    host read in one process."""
    _, alone, combined = both
    a, b = combined.stats.kernels, all_hosts_reports(alone)
    if isinstance(b, str):
        assert a == b
    else:
        pd.testing.assert_frame_equal(a, b)


def test_framework_op_stats_equal_one_process(both):
    """Framework op stats of the hosts' stats combined equal the one-process analysis
    (every host file read here)."""
    _, alone, combined = both
    for exclude_idle in (False, True):
        a = framework_op_stats(combined.stats, exclude_idle=exclude_idle)
        b = framework_op_stats(alone, exclude_idle=exclude_idle)
        pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)
        assert a.attrs == b.attrs


def test_roofline_equal_one_process(both):
    """The roofline model of the hosts' stats combined equals the one-process analysis."""
    _, alone, combined = both
    a = roofline_model(combined.stats)
    b = roofline_model(alone)
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)
    assert a.attrs == b.attrs


def test_two_gpu_hosts_as_xprof_all_hosts():
    """The two-host GPU run through `run.overview()` / `run.input_pipeline()` (per-host
    summaries combined) shows XProf's all-hosts numbers."""
    name, session = "tf_gpu_multiworker", "2020_12_23_gpu_multi_worker"
    run = xw.load_run(_folder(name, session), executor=INSTANT)
    assert run.pooled and len(run.hosts) == 2
    res, ip = run.overview(), run.input_pipeline()
    ref = json.loads((REFERENCE / name / session / "overview_page.json").read_text())
    env = ref[2]["p"]
    assert (res.host_count, res.device_type, res.device_core_count) == (
        int(env["host_count"]),
        env["device_type"],
        int(env["device_core_count"]),
    )
    steps = ref[1]
    assert list(res.steps["step_name"]) == [r["c"][0]["v"] for r in steps["rows"]]
    assert f"{res.avg_step_time_ms:.1f}" == steps["p"]["steptime_ms_average"]
    page = json.loads((REFERENCE / name / session / "input_pipeline_analyzer.json").read_text())
    rows = [[c.get("v") if c else None for c in r["c"]] for r in page[2].get("rows", [])]
    assert list(ip.input_ops["op_name"]) == [r[0] for r in rows]
    assert list(ip.input_ops["count"]) == [r[1] for r in rows]
    assert f"{ip.host_breakdown_us['preprocessing']:.3f}" == page[2]["p"]["preprocessing_us"]


# --- 16 copies of one host ----------------------------------------------------------------


@pytest.fixture(scope="module", params=ONE_HOST)
def pod_of_copies(request, tmp_path_factory):
    """(the host's file alone, 16 copies of it, both opened to be summarized in this process)."""
    source = _one_host_file(request.param)
    folder = _copies(tmp_path_factory.mktemp(request.param), source)
    one = xw.load_run(source, executor=INSTANT)
    many = xw.load_run(folder, executor=INSTANT)
    return request.param, one, many, folder


def test_copies_add_up(pod_of_copies):
    _, one, many, _ = pod_of_copies
    assert len(many.hosts) == HOSTS and many.pooled
    _same_overview(many.overview(), one.overview(), adds=HOSTS)
    _same_op_profile(many.op_profile(), one.op_profile(), adds=HOSTS)
    a, b = many.input_pipeline().input_ops, one.input_pipeline().input_ops
    np.testing.assert_array_equal(a["count"], HOSTS * b["count"])
    np.testing.assert_allclose(a["self_time_percent"], b["self_time_percent"], rtol=1e-9)
    hs, hs1 = many.hlo_stats(), one.hlo_stats()
    np.testing.assert_array_equal(hs["occurrences"], HOSTS * hs1["occurrences"])
    np.testing.assert_allclose(
        hs["self_time_fraction"].astype(float), hs1["self_time_fraction"].astype(float), rtol=1e-9
    )
    # Kernels, in each host's stats: XProf's combiner
    # concatenates the hosts' reports (no merging of equal kernels), sorts and cuts them,
    # so each report of the one host stands 16 times in a row.
    ks, ks1 = many.kernel_stats(), one.kernel_stats()
    repeated = ks1.loc[ks1.index.repeat(HOSTS)].head(len(ks)).reset_index(drop=True)
    pd.testing.assert_frame_equal(ks, repeated)
    assert len(ks) == min(HOSTS * len(ks1), MAX_KERNELS)
    # Framework op stats and roofline of the combined stats: as every file read here.
    pd.testing.assert_frame_equal(
        framework_op_stats(many.stats()), framework_op_stats(many), check_exact=False, rtol=1e-12
    )
    a, b = roofline_model(many.stats()), roofline_model(many)
    pd.testing.assert_frame_equal(a, b, check_exact=False, rtol=1e-12)
    assert a.attrs == b.attrs


def test_per_host_table(pod_of_copies):
    _, one, many, _ = pod_of_copies
    table = many.per_host()
    assert list(table["host"]) == [f"host{i:03d}" for i in range(HOSTS)]
    mine = one.per_host().iloc[0]
    for k in ("steps", "step_time_ms", "idle_pct", "input_pct", "memory_peak_bytes", "op_time_ms"):
        np.testing.assert_allclose(table[k].astype(float), float(mine[k]), rtol=1e-12, equal_nan=True)
    # A per-host view is that host alone.
    _same_overview(many.overview(host="host007"), one.overview())


def test_copies_on_the_default_process_pool(pod_of_copies):
    """No executor: a local process pool reads the hosts; the same numbers as in-process."""
    _, _, many, folder = pod_of_copies
    seen = []
    run = xw.load_run(folder)
    assert run.executor is None
    summaries = run.host_summaries(progress=lambda done, total: seen.append((done, total)))
    assert [s.host for s in summaries] == run.hosts
    assert seen[0] == (0, HOSTS) and seen[-1] == (HOSTS, HOSTS) and len(seen) == HOSTS + 1
    _same_overview(run.overview(), many.overview())
    _same_op_profile(run.op_profile(), many.op_profile())


def test_copies_on_dask(pod_of_copies):
    """A real Dask cluster of worker processes, its workers reading the files: the same
    overview and op profile as in this process."""
    distributed = pytest.importorskip("distributed")
    _, _, many, folder = pod_of_copies
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # dashboard port in use, etc.
        with (
            distributed.LocalCluster(
                n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
            ) as cluster,
            distributed.Client(cluster) as client,
        ):
            run = xw.load_run(folder, executor=client)
            _same_overview(run.overview(), many.overview())
            _same_op_profile(run.op_profile(), many.op_profile())
            pd.testing.assert_frame_equal(
                run.per_host().drop(columns="seconds"), many.per_host().drop(columns="seconds")
            )
            pd.testing.assert_frame_equal(run.kernel_stats(), many.kernel_stats())  # built on the workers
            # The run behind an fsspec URL, as gs:// would be: each worker opens its host
            # file through fsspec itself (fsspec's "local" protocol, which every process sees).
            pytest.importorskip("fsspec")
            remote = xw.load_run("local://" + str(folder), executor=client)
            assert all(str(p).startswith("local://") for p in remote.files.values())
            _same_overview(remote.overview(), many.overview())
            _same_op_profile(remote.op_profile(), many.op_profile())


@pytest.mark.parametrize("name", ["tf_gpu_multiworker", "tf_keras_cpu", "tpu_v6e_inference"])
def test_summary_with_and_without_shared_stats(monkeypatch, name):
    """A host summary is the same whether its lines' stats are decoded once for every
    analysis (small files) or by each analysis itself (files past SHARED_STATS_BYTES)."""
    path = _one_host_file(name)
    shared = xw.run.host_summary(path)
    monkeypatch.setattr(pod, "SHARED_STATS_BYTES", 0)
    alone = xw.run.host_summary(path)
    pd.testing.assert_frame_equal(shared.memory, alone.memory, obj="memory")
    a, b = shared.stats, alone.stats
    for part in ("gpu_ops", "input_ops", "module_ms", "host_ops"):
        pd.testing.assert_frame_equal(getattr(a, part), getattr(b, part), obj=part)
    pd.testing.assert_frame_equal(a.step_db[0], b.step_db[0])
    assert a.step_db[1] == b.step_db[1]
    pd.testing.assert_frame_equal(a.op_metrics.ops, b.op_metrics.ops)
    if isinstance(a.kernels, str):
        assert a.kernels == b.kernels
    else:
        pd.testing.assert_frame_equal(a.kernels, b.kernels)
    assert {k: v for k, v in shared.row.items() if k != "seconds"} == {
        k: v for k, v in alone.row.items() if k != "seconds"
    }


# --- what stays as it was, and what goes wrong -----------------------------------------


def _die(path):
    os._exit(3)  # as a worker killed by the kernel's OOM killer


def test_dead_worker_is_a_profile_error(tmp_path):
    """A pool worker that dies is a ProfileError naming the run folder and what to do, not
    concurrent.futures' BrokenProcessPool."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from xprof_widgets.analysis.pod import map_hosts

    paths = [str(tmp_path / f"host{i}.xplane.pb") for i in range(3)]
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("fork")) as pool:
        with pytest.raises(ProfileError, match="worker process of the pool died") as caught:
            map_hosts(_die, paths, pool)
    assert caught.value.path == str(tmp_path) and "InProcessExecutor" in caught.value.problem


def test_one_host_run_stays_in_process():
    run = xw.load_run(_one_host_file("jax_mlp_cpu"))
    assert not run.pooled
    run.overview()
    run.op_profile()
    assert "host_summaries" not in run.__dict__.get("_derived", {})


def test_unreadable_host_is_left_out(tmp_path):
    source = _one_host_file("tpu_v6e_inference")
    folder = _copies(tmp_path, source, n=4)
    bad = folder / "host002.xplane.pb"
    bad.write_bytes(source.read_bytes()[:5000])  # starts like an XSpace, then stops
    run = xw.load_run(folder, executor=INSTANT)
    with pytest.warns(UserWarning, match="host002"):
        summaries = run.host_summaries()
    assert [s.host for s in summaries] == ["host000", "host001", "host003"]
    # The host stays listed (the list does not change under the user), named as left out.
    assert "host002" in run.unreadable and run.hosts == ["host000", "host001", "host002", "host003"]
    assert run.readable_hosts == ["host000", "host001", "host003"]
    table = run.per_host()
    assert list(table["host"]) == ["host000", "host001", "host002", "host003"]
    assert table["error"].astype(bool).tolist() == [False, False, True, False]
    one = xw.load_run(source, executor=INSTANT)
    _same_op_profile(run.op_profile(), one.op_profile(), adds=3)


def test_a_host_left_out_says_so_before_and_after_its_file_is_read(tmp_path):
    """Issue 46: a damaged host's file stays in `run.hosts` before and after the files are
    read; every per-host tool asked for it raises "host X was left out: FILE: why" (a
    ProfileError), first time or later, as the widgets do."""
    source = _one_host_file("tpu_v6e_inference")
    folder = _copies(tmp_path, source, n=3)
    bad = folder / "host001.xplane.pb"
    bad.write_bytes(source.read_bytes()[: len(source.read_bytes()) // 2])
    hosts = ["host000", "host001", "host002"]
    run = xw.load_run(folder, executor=INSTANT)
    assert run.hosts == hosts and run.unreadable == {}
    expected = f"host host001 was left out: {bad}: is not a readable XSpace profile: truncated"
    with pytest.warns(UserWarning, match="host001"), pytest.raises(ProfileError, match=re.escape(expected)):
        run.trace("host001")  # found out here, first
    assert run.hosts == hosts and list(run.unreadable) == ["host001"]
    run.overview()
    assert run.hosts == hosts and run.readable_hosts == ["host000", "host002"]
    calls = {
        "memory_profile": lambda: run.memory_profile(host="host001"),
        "trace": lambda: run.trace("host001"),
        "xspace": lambda: run.xspace("host001"),
        "TraceViewerWidget": lambda: xw.TraceViewerWidget(run, host="host001"),
        "MemoryProfileWidget": lambda: xw.MemoryProfileWidget(run, host="host001"),
    }
    for name, call in calls.items():
        with pytest.raises(ProfileError, match=re.escape(expected)) as caught:
            call()
        assert caught.value.host == "host001" and caught.value.path == str(bad), name
    viewer = xw.TraceViewerWidget(run, host="host002")
    with pytest.raises(ProfileError, match="host host001 was left out"):
        viewer.host = "host001"
    assert viewer.host == "host002"  # the view stays on the host it shows
    with pytest.raises(KeyError, match="no host 'nope'"):
        run.trace("nope")


def test_step_intersection_aligns_by_time():
    steps = xw.load_run(_one_host_file("jax_mlp_cpu"), executor=INSTANT).host_summaries()[0].steps
    n = len(steps)
    assert n > 6
    # A host that missed the first two steps, one that missed the last: the steps all share.
    first, count = step_intersection([steps, steps.iloc[2:], steps.iloc[:-1]])
    assert first == [2, 0, 2] and count == n - 3
    # A coordinator (None) takes no part.
    assert step_intersection([steps, None]) == ([0, 0], n)


def test_combiner_folds_in_host_order_whatever_the_arrival():
    """Results arrive in any order; XProf's combination is ordered (first host's metadata
    and steps): folded in host order, and each host kept light."""
    from xprof_widgets.run import host_summary

    a, b = (_folder("tf_keras_cpu", s) / "vm.xplane.pb" for s in ("2026_11_22_03_16_08", "2026_11_22_03_16_48"))
    summaries = [host_summary(p) for p in (b, a, b)]
    in_order = pod.combine(summaries)
    combiner = pod.Combiner()
    for i in (2, 0, 1):
        combiner.add(i, summaries[i])
    shuffled = combiner.result()
    _same_overview(shuffled.overview, in_order.overview)
    pd.testing.assert_frame_equal(shuffled.input_pipeline.input_ops, in_order.input_pipeline.input_ops)
    pd.testing.assert_frame_equal(shuffled.per_host, in_order.per_host)
    assert all(s.light and s.stats.op_metrics.ops.empty for s in shuffled.hosts)
    with pytest.raises(LookupError):
        _ = shuffled.hosts[0].stats.host_op_db  # let go once folded in
    assert in_order.overview.steps["step_name"].iloc[0] == summaries[0].steps["step_name"].iloc[3]


def test_profile_errors_cross_processes_whole():
    import pickle

    error = pickle.loads(pickle.dumps(ProfileError("/logs/host7.xplane.pb", "is damaged")))
    assert isinstance(error, ProfileError)
    assert (error.path, error.problem) == ("/logs/host7.xplane.pb", "is damaged")


def test_one_bad_host_leaves_every_tool_working(tmp_path, monkeypatch):
    """A truncated host file, and a host whose analysis raises what no check foresaw (an
    IndexError): each left out, named, with why; every all-hosts tool answers for the rest."""
    source = _one_host_file("tf_gpu_multiworker")
    folder = _copies(tmp_path, source, n=4)
    (folder / "host001.xplane.pb").write_bytes(source.read_bytes()[:300_000])
    real = pod.summarize

    def flaky(run):
        if run.hosts == ["host002"]:
            raise IndexError("index 7 is out of bounds")
        return real(run)

    monkeypatch.setattr(pod, "summarize", flaky)
    run = xw.load_run(folder, executor=INSTANT)
    with pytest.warns(UserWarning, match="host00[12]"):
        overview = run.overview()
    assert run.readable_hosts == ["host000", "host003"] and len(run.hosts) == 4
    assert "truncated" in run.unreadable["host001"] and "IndexError" in run.unreadable["host002"]
    one = xw.load_run(source, executor=INSTANT)
    _same_overview(overview, one.overview(), adds=2)
    assert run.input_pipeline().input_percent == pytest.approx(one.input_pipeline().input_percent)
    for tool in ("kernel_stats", "framework_op_stats", "roofline_model"):
        assert len(getattr(run, tool)()), tool
    assert run.hlo_stats().attrs["reason"] == one.hlo_stats().attrs["reason"]  # TF ops: no HLO ops


def _hang_on_odd(path):
    import time as _time

    if str(path).endswith("1"):
        _time.sleep(600)  # a reader that never finishes
    return str(path)


def _alive(pids):
    alive = []
    for pid in pids:
        try:
            os.kill(pid, 0)
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split()[2] != "Z":
                    alive.append(pid)
        except (OSError, IndexError):
            pass
    return alive


def _children():
    import psutil

    return [p.pid for p in psutil.Process().children(recursive=True)]


def test_a_hanging_host_times_out_and_leaves_nothing_running(monkeypatch):
    """A host whose reading never ends: a ProfileError naming it once the time limit is
    past, and the pool's workers ended (none left at 100 % CPU)."""
    pytest.importorskip("psutil")
    from xprof_widgets.analysis.pod import map_hosts

    monkeypatch.setenv("XPROF_WIDGETS_HOST_TIMEOUT_S", "3")
    before = set(_children())
    started = time.monotonic()
    with pytest.raises(ProfileError, match="no result for 3 s") as caught:
        map_hosts(_hang_on_odd, ["/logs/host0", "/logs/host1"])
    assert time.monotonic() - started < 30
    assert "host1" in str(caught.value)
    time.sleep(1)
    assert not _alive(set(_children()) - before)


def test_an_interrupt_returns_at_once_and_leaves_nothing_running():
    """Ctrl-C while a host hangs: the KeyboardInterrupt comes back at once (no wait for the
    pool) and its workers are ended."""
    pytest.importorskip("psutil")
    from xprof_widgets.analysis.pod import map_hosts

    before = set(_children())

    def interrupt(done, total):
        if done == 1:
            raise KeyboardInterrupt

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        map_hosts(_hang_on_odd, ["/logs/host0", "/logs/host1"], progress=interrupt)
    assert time.monotonic() - started < 30
    time.sleep(1)
    assert not _alive(set(_children()) - before)


def test_hosts_of_one_program_share_its_parsed_module(monkeypatch):
    """A worker reads host after host of one program: each module is parsed and costed
    once (kept by its name and bytes, the last KEPT_MODULES of at most KEPT_BYTES: all of a
    host's), and a host's op metrics are the same from the kept module as from its own
    parse."""
    from xprof_widgets.analysis.core import xla_ops

    monkeypatch.setattr(xla_ops, "_PARSED", {})
    first, second = xw.sample_run(), xw.sample_run()
    a, b = xla_ops.program_modules(first), xla_ops.program_modules(second)
    pid = next(iter(a.names))
    assert a.module(pid) is b.module(pid) is not None
    assert a.costs(pid, "cpu") is b.costs(pid, "cpu")
    kept = device_op_metrics(second).ops
    monkeypatch.setattr(xla_ops, "_PARSED", {})
    alone = device_op_metrics(xw.sample_run()).ops
    pd.testing.assert_frame_equal(kept, alone)
    # A host's 16 modules all stay: the next host of the program parses none of them.
    monkeypatch.setattr(xla_ops, "_PARSED", {})
    for pid in a.names:
        xla_ops.program_modules(xw.sample_run()).module(pid)
    parsed = []
    monkeypatch.setattr(xla_ops, "hlo_module", lambda *args: parsed.append(args[1]))
    third = xla_ops.program_modules(xw.sample_run())
    assert len(a.names) == 16 and all(third.module(pid) is not None for pid in a.names) and not parsed
    # Bounded by count and by bytes, the newest kept.
    monkeypatch.setattr(xla_ops, "KEPT_MODULES", 5)
    xla_ops.program_modules(xw.sample_run()).module(next(iter(a.names)))  # (kept: no parse, no eviction)
    xla_ops._parsed("new", b"x")
    assert len(xla_ops._PARSED) == 5 and ("new", b"x") in xla_ops._PARSED
    monkeypatch.setattr(xla_ops, "KEPT_BYTES", 1)
    xla_ops._parsed("newer", b"yy")
    assert list(xla_ops._PARSED) == [("newer", b"yy")]


def test_the_driver_reads_the_first_host_holding_each_module(tmp_path):
    """The combined overview asks whether a program trains (its modules): the driver reads
    the first host that holds each module (here the first of 16 copies), not every host."""
    source = sorted(Path(xw.sample_run().xspace().path).parent.glob("*.xplane.pb*"))[0]
    many = xw.load_run(_copies(tmp_path, source), executor=INSTANT)
    result = many.overview()
    assert list(many._spaces) == [many.hosts[0]]
    assert result.is_training == xw.sample_run().overview().is_training
    assert len(many.hlo_protos) == 16
