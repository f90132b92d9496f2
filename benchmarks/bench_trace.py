"""The trace model: open + first view, and pan/zoom queries, against XProf 2.24.2.

    python benchmarks/bench_trace.py FILE.xplane.pb [--repeat 3] [--queries 200]
        [--xprof-python PYTHON]   # a Python with `xprof==2.24.2` (default: this one)
        [--xprof-queries 5]       # XProf window queries after its first view (0: none)
        [--json OUT.json]

Every measurement runs in a fresh process, so each side's peak RSS is its own;
times start after the imports. Medians over `--repeat` runs are printed, with
the ratio ours / XProf.

- ours: `load_run(file)`, `run.trace()`, then the first view (the whole
  profile at 2000 px); then, `--settle` seconds later (default 1: the goal is
  for queries from the first second after the first view, while a big trace's
  other pyramid levels are built on a background thread), `--queries` random
  pan/zoom windows at 2000 px (widths log-uniform from the whole profile down
  to a millionth of it, anywhere in it): their time (p50 / p95 / max) and the size of each answer
  encoded as binary columns (track and row int16, start and end int64,
  count, index and name code int32, plus the names it uses in UTF-8).
  `levels_s`: when the background levels were all built (after the first view).
  Column cache off, unless `--cached`: then a first untimed process fills a
  temporary cache folder and every measured one opens from it.
- XProf: `xspace_to_tool_data([copy], "trace_viewer@", ...)` at resolution
  2000, on a fresh copy of the file each time (it caches beside the file),
  which is what its trace viewer asks for its first view; then, in the same
  process, `--xprof-queries` windows through the same call (served from the
  tables the first view wrote). Answer sizes are its JSON's bytes.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from _common import fresh_copy, measure, median, uncached

OURS = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import numpy as np
import xprof_widgets as xw
t_import = time.perf_counter() - t0
path, n_queries, resolution, settle = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[5])

def encoded_bytes(q, names):
    codes = q["name"].cat.codes.to_numpy()
    used = np.unique(codes)
    text = sum(len(str(names[i]).encode()) for i in used)
    return len(q) * (2 + 2 + 8 + 8 + 4 + 4 + 4) + text

t0 = time.perf_counter()
run = xw.load_run(path)
run.xspace()
t_open = time.perf_counter() - t0
tr = run.trace()
t_trace = time.perf_counter() - t0
first = tr.query(None, None, resolution)
t_view = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
time.sleep(settle)
rng = np.random.default_rng(int(sys.argv[4]))
span = tr.end_ps - tr.start_ps
times, sizes, boxes = [], [], []
for _ in range(n_queries):
    width = max(int(span * 10 ** rng.uniform(-6, 0)), 1000)
    start = tr.start_ps + int(rng.uniform(0, 1) * (span - width))
    t = time.perf_counter()
    q = tr.query(start, start + width, resolution)
    times.append(time.perf_counter() - t)
    sizes.append(encoded_bytes(q, tr.names))
    boxes.append(len(q))
times, sizes = np.array(times), np.array(sizes)
levels = getattr(tr, "_levels_thread", None)
if levels is not None:
    levels.join()
t_levels = time.perf_counter() - t0 - t_view if levels is not None else 0.0
print(json.dumps({
    "levels_s": t_levels,
    "import_s": t_import, "open_s": t_open, "trace_s": t_trace - t_open, "first_view_s": t_view,
    "first_view_boxes": len(first), "first_view_bytes": encoded_bytes(first, tr.names),
    "events": tr.event_count, "tracks": len(tr.tracks), "peak_rss_bytes": rss,
    "query_p50_ms": float(np.median(times) * 1e3), "query_p95_ms": float(np.percentile(times, 95) * 1e3),
    "query_max_ms": float(times.max() * 1e3), "query_bytes_p95": float(np.percentile(sizes, 95)),
    "query_bytes_max": int(sizes.max()), "query_boxes_max": int(max(boxes)),
    "peak_rss_after_queries_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
}))
"""

XPROF = r"""
import json, resource, sys, time
tmp, n_queries, resolution, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
t0 = time.perf_counter()
from xprof.convert import raw_to_tool_data as r
t_import = time.perf_counter() - t0

def view(options):
    options = dict(options, resolution=resolution)
    data, _ = r.xspace_to_tool_data([tmp], "trace_viewer@", {"trace_viewer_options": options})
    return data or b""

t0 = time.perf_counter()
data = view({})
t_view = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
times, sizes = [], []
if n_queries:
    import random
    rng = random.Random(seed)
    full = json.loads(data)
    span = full.get("fullTimespan") or [0, 0]
    t_min, t_max = float(span[0]), float(span[1])  # ms
    for _ in range(n_queries):
        width = (t_max - t_min) * 10 ** rng.uniform(-6, 0)
        start = t_min + rng.uniform(0, 1) * ((t_max - t_min) - width)
        t = time.perf_counter()
        d = view({"start_time_ms": repr(start), "end_time_ms": repr(start + width)})
        times.append(time.perf_counter() - t)
        sizes.append(len(d))
print(json.dumps({"import_s": t_import, "first_view_s": t_view, "first_view_bytes": len(data),
                  "peak_rss_bytes": rss, "query_times_ms": [t * 1e3 for t in times], "query_bytes": sizes}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--resolution", type=int, default=2000)
    ap.add_argument("--xprof-python", default=sys.executable)
    ap.add_argument("--xprof-queries", type=int, default=5)
    ap.add_argument("--no-xprof", action="store_true")
    ap.add_argument("--settle", type=float, default=1.0, help="seconds between the first view and the queries")
    ap.add_argument("--cached", action="store_true", help="open from the column cache (filled first, untimed)")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    ours, theirs = [], []
    cache = tempfile.mkdtemp(prefix="xw_bench_cache_") if args.cached else None
    env = uncached() if cache is None else {**os.environ, "XPROF_WIDGETS_CACHE_DIR": cache}
    ours_cmd = [sys.executable, "-c", OURS, args.file, str(args.queries), str(args.resolution)]
    if cache is not None:
        measure([*ours_cmd, "0", "0"], env=env)  # fills the cache
    for i in range(args.repeat):
        ours.append(measure([*ours_cmd, str(i), str(args.settle)], env=env))
        print("ours", json.dumps(ours[-1]), flush=True)
        if args.no_xprof:
            continue
        with fresh_copy(args.file) as copy:
            theirs.append(
                measure(
                    [args.xprof_python, "-c", XPROF, str(copy), str(args.xprof_queries), str(args.resolution), str(i)]
                )
            )
        print("xprof", json.dumps({k: v for k, v in theirs[-1].items()}), flush=True)
    row = {
        "file": args.file,
        "size_mb": Path(args.file).stat().st_size / 1e6,
        "repeats": args.repeat,
        "events": ours[0]["events"],
        "tracks": ours[0]["tracks"],
    }
    for k in (
        "levels_s",
        "open_s",
        "trace_s",
        "first_view_s",
        "first_view_boxes",
        "first_view_bytes",
        "query_p50_ms",
        "query_p95_ms",
        "query_max_ms",
        "query_bytes_p95",
        "query_bytes_max",
    ):
        row["ours_" + k] = median(ours, k)
    row["ours_peak_rss_mb"] = median(ours, "peak_rss_bytes") / 1e6
    row["ours_peak_rss_after_queries_mb"] = median(ours, "peak_rss_after_queries_bytes") / 1e6
    print(
        f"{Path(args.file).name} ({row['size_mb']:.1f} MB, {row['events']:,} events, {row['tracks']} tracks), "
        f"median of {args.repeat}:"
    )
    print(
        f"  ours : open {row['ours_open_s']:.2f} s + trace() {row['ours_trace_s']:.2f} s; open + trace + first "
        f"view {row['ours_first_view_s']:.2f} s, peak RSS {row['ours_peak_rss_mb']:.0f} MB; first view "
        f"{row['ours_first_view_boxes']:,.0f} boxes, {row['ours_first_view_bytes'] / 1e3:.0f} kB"
    )
    print(
        f"         {args.queries} pan/zoom queries at {args.resolution} px, {args.settle:g} s after the first view"
        f"{' (opened from the column cache)' if cache else ' (column cache off)'}: p50 {row['ours_query_p50_ms']:.1f} ms, "
        f"p95 {row['ours_query_p95_ms']:.1f} ms, max {row['ours_query_max_ms']:.1f} ms; answer p95 "
        f"{row['ours_query_bytes_p95'] / 1e3:.0f} kB, max {row['ours_query_bytes_max'] / 1e3:.0f} kB; "
        f"other pyramid levels built {row['ours_levels_s']:.1f} s after the first view"
    )
    if theirs:
        row["xprof_first_view_s"] = median(theirs, "first_view_s")
        row["xprof_peak_rss_mb"] = median(theirs, "peak_rss_bytes") / 1e6
        row["xprof_first_view_bytes"] = median(theirs, "first_view_bytes")
        qt = [t for r in theirs for t in r["query_times_ms"]]
        qb = [b for r in theirs for b in r["query_bytes"]]
        row["ratio_first_view_time"] = row["ours_first_view_s"] / row["xprof_first_view_s"]
        row["ratio_rss"] = row["ours_peak_rss_mb"] / row["xprof_peak_rss_mb"]
        print(
            f"  XProf: first trace_viewer@ view {row['xprof_first_view_s']:.2f} s, peak RSS "
            f"{row['xprof_peak_rss_mb']:.0f} MB, answer {row['xprof_first_view_bytes'] / 1e6:.1f} MB"
        )
        if qt:
            row["xprof_query_p50_ms"] = statistics.median(qt)
            row["xprof_query_max_ms"] = max(qt)
            row["xprof_query_bytes_median"] = statistics.median(qb)
            print(
                f"         {len(qt)} window queries: median {row['xprof_query_p50_ms']:.0f} ms, max "
                f"{row['xprof_query_max_ms']:.0f} ms; answer median {row['xprof_query_bytes_median'] / 1e6:.2f} MB"
            )
        print(f"  ratio ours/XProf: first view time {row['ratio_first_view_time']:.3f}, memory {row['ratio_rss']:.3f}")
    if args.json:
        Path(args.json).write_text(json.dumps(row, indent=1))
    if cache is not None:
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
