"""Many hosts: the all-hosts overview and op profile of a pod-sized run, four ways, and XProf's.

    python benchmarks/bench_pod.py [FILE.xplane.pb] [--hosts 16 64] [--repeat 3] [--xprof-python PYTHON]

The run is FILE copied under N host names in a temporary folder (default: a host of the
corpus' two-host GPU run, `tf_gpu_multiworker`). Each measurement is a fresh process;
times start after the imports and cover `load_run` + `overview()` + `op_profile()`:

* sequential: every host's XSpace read in this process (`analysis.overview(run)`, what
  `Run` did before per-host summaries); the driver holds every host's events;
* in-process: per-host summaries one after another in this process (`InProcessExecutor`);
* pool: the default, a process pool sized to the machine (`load_run(path)`);
* dask: a `dask.distributed.LocalCluster` of worker processes, one per core, already
  started (its start is reported apart), `load_run(path, executor=client)`;
* XProf 2.24.2: `xspace_to_tool_data(all files, "overview_page")` on fresh copies.

`--all-tools` then times kernel stats, framework op stats and the roofline model of the
same run (reported apart, as "then 3 tools").

Peak RSS is the driver's (`ru_maxrss` of the measuring process); for the pool the
largest worker's too. Medians of `--repeat` runs; the machine's load is printed, since
the numbers are only comparable on an idle machine.
"""

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from _common import measure, median, uncached

REPO = Path(__file__).resolve().parents[1]
DEFAULT = (
    REPO.parent
    / "shared/profiles/tf_gpu_multiworker/plugins/profile/2020_12_23_gpu_multi_worker/34.83.195.179_6003.xplane.pb"
)

OURS = r"""
import json, resource, sys, time
mode, folder = sys.argv[1], sys.argv[2]
all_tools = sys.argv[3:] == ["all"]
def main():
    import xprof_widgets as xw
    from xprof_widgets.analysis import pod
    from xprof_widgets.analysis.overview import overview
    from xprof_widgets.analysis.op_profile import op_profile
    extra = {}
    client = None
    if mode == "dask":
        import os
        from distributed import Client, LocalCluster
        t = time.perf_counter()
        cluster = LocalCluster(n_workers=len(os.sched_getaffinity(0)), threads_per_worker=1, processes=True,
                               dashboard_address=None)
        client = Client(cluster)
        extra["cluster_start_s"] = time.perf_counter() - t
    t0 = time.perf_counter()
    if mode == "sequential":
        run = xw.load_run(folder)
        res = overview(run)  # the one-process analysis: every host's XSpace read here
        prof = op_profile(run)
    else:
        executor = {"in-process": pod.InProcessExecutor(), "pool": None, "dask": client}[mode]
        run = xw.load_run(folder, executor=executor)
        res = run.overview()
        prof = run.op_profile()
    seconds = time.perf_counter() - t0
    if all_tools:  # the rest of the all-hosts tools, after the overview and op profile
        t1 = time.perf_counter()
        if mode == "sequential":
            from xprof_widgets.analysis.framework_op_stats import framework_op_stats
            from xprof_widgets.analysis.kernel_stats import kernel_stats
            from xprof_widgets.analysis.roofline import roofline_model
            kernel_stats(run), framework_op_stats(run), roofline_model(run)
        else:
            run.kernel_stats(), run.framework_op_stats(), run.roofline_model()
        extra["more_tools_s"] = time.perf_counter() - t1
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    workers = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if client is not None:
        client.close()
        cluster.close()
    print(json.dumps({"seconds": seconds, "peak_rss_bytes": rss, "worker_peak_rss_bytes": workers,
                      "avg_step_time_ms": res.avg_step_time_ms, "cores": res.device_core_count,
                      "root_time_ps": prof.root.time_ps, **extra}))
if __name__ == "__main__":
    main()
"""

XPROF = r"""
import glob, json, resource, sys, time
from xprof.convert import raw_to_tool_data as r
files = sorted(glob.glob(sys.argv[1] + "/*.xplane.pb"))
t0 = time.perf_counter()
data, _ = r.xspace_to_tool_data(files, "overview_page", {"use_saved_result": False})
t = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": t, "bytes": len(data or b""), "peak_rss_bytes": rss}))
"""

MODES = ["sequential", "in-process", "pool", "dask"]


def _pod(source, n, where):
    folder = Path(where) / "plugins" / "profile" / "2026_01_01_00_00_00"
    folder.mkdir(parents=True)
    for i in range(n):
        shutil.copyfile(source, folder / f"host{i:04d}.xplane.pb")
    return folder


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", default=str(DEFAULT))
    ap.add_argument("--hosts", type=int, nargs="+", default=[16, 64])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--modes", nargs="+", default=MODES + ["xprof"])
    ap.add_argument("--xprof-python", default=sys.executable)
    ap.add_argument("--all-tools", action="store_true", help="also time kernel, framework op stats, roofline")
    args = ap.parse_args()
    size = Path(args.file).stat().st_size / 1e6
    print(f"{Path(args.file).name} ({size:.1f} MB) x N hosts; {os.cpu_count()} cores; load {os.getloadavg()}")
    print(f"{'hosts':>5} {'mode':>10} {'median s':>9} {'driver MB':>10} {'worker MB':>10} {'vs sequential':>13}")
    for n in args.hosts:
        rows = {m: [] for m in args.modes}
        for _ in range(args.repeat):
            for mode in args.modes:
                with tempfile.TemporaryDirectory() as tmp:  # a fresh copy each time: XProf caches beside
                    folder = _pod(args.file, n, tmp)
                    if mode == "xprof":
                        rows[mode].append(measure([args.xprof_python, "-c", XPROF, str(folder)]))
                    else:
                        more = ["all"] if args.all_tools else []
                        rows[mode].append(measure([sys.executable, "-c", OURS, mode, str(folder), *more], env=_env()))
        base = median(rows["sequential"], "seconds") if rows.get("sequential") else None
        for mode, got in rows.items():
            if not got:
                continue
            s = median(got, "seconds")
            workers = median(got, "worker_peak_rss_bytes") / 1e6 if "worker_peak_rss_bytes" in got[0] else float("nan")
            ratio = f"{base / s:.2f}x" if base else ""
            extra = f"  (cluster start {median(got, 'cluster_start_s'):.1f} s)" if "cluster_start_s" in got[0] else ""
            if "more_tools_s" in got[0]:
                extra += f"  then 3 tools {median(got, 'more_tools_s'):.2f} s"
            print(
                f"{n:>5} {mode:>10} {s:>9.2f} {median(got, 'peak_rss_bytes') / 1e6:>10.0f} {workers:>10.0f} "
                f"{ratio:>13}{extra}",
                flush=True,
            )
    print(f"load after: {os.getloadavg()}")


def _env():
    return uncached(PYTHONPATH=str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""))


if __name__ == "__main__":
    main()
