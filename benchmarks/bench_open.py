"""Open a profile: xprof-widgets against XProf 2.24.2 on the same file, same machine.

    python benchmarks/bench_open.py FILE.xplane.pb [FILE ...] [--repeat 5]
        [--xprof-python PYTHON]   # a Python with `xprof==2.24.2` (default: this one)

Each measurement runs in a fresh process, so each side's peak RSS is its own.
Times start after the imports on both sides (reported apart).

- ours: `load_run` + every event of every line in columns + a first
  trace-sized view: for the whole capture at 2000 px, the events at least one
  pixel wide, per line, with their names. (The trace viewer's own query comes
  with its issue; this stands in for what its first view needs.)
- XProf: `xspace_to_tool_data([file], "trace_viewer@", ...)`, the call its
  trace viewer makes for its first view, on a fresh copy of the file each
  time (XProf caches results beside the file).

Prints medians and the ratio ours / XProf. Machines here are noisy: use the
median of several repeats.
"""

import argparse
import json
import sys
from pathlib import Path

from _common import fresh_copy, measure, median, uncached

OURS = r"""
import json, resource, sys, time
t0 = time.perf_counter()
import numpy as np
import xprof_widgets as xw
t_import = time.perf_counter() - t0
t0 = time.perf_counter()
run = xw.load_run(sys.argv[1])
t_open = time.perf_counter() - t0
space = run.xspace()
columns = sum(len(ln) for p in space.planes for ln in p.lines)
t_columns = time.perf_counter() - t0
lines = [ln for p in space.planes for ln in p.lines if len(ln)]
begin = min(int(ln.start_ps.min()) for ln in lines)
end = max(int((ln.start_ps + ln.event_duration_ps).max()) for ln in lines)
min_width = (end - begin) / 2000
shown = 0
for ln in lines:
    wide = np.flatnonzero(ln.event_duration_ps >= min_width)
    names = ln.plane.names_for(ln.metadata_id[wide])
    shown += len(wide)
t_view = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"import_s": t_import, "open_s": t_open, "columns_s": t_columns, "first_view_s": t_view,
                  "events": columns, "shown": shown, "peak_rss_bytes": rss}))
"""

XPROF = r"""
import json, resource, sys, time
src, tmp = sys.argv[1], sys.argv[2]
t0 = time.perf_counter()
from xprof.convert import raw_to_tool_data as r
t_import = time.perf_counter() - t0
t0 = time.perf_counter()
data, _ = r.xspace_to_tool_data([tmp], "trace_viewer@", {"use_saved_result": False,
    "trace_viewer_options": {"resolution": 2000}})
t_view = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"first_view_s": t_view, "import_s": t_import, "bytes": len(data or b""), "peak_rss_bytes": rss}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("files", nargs="+")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--xprof-python", default=sys.executable)
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    results = []
    for f in args.files:
        ours, theirs = [], []
        for _ in range(args.repeat):
            ours.append(measure([sys.executable, "-c", OURS, f], env=uncached()))
            with fresh_copy(f) as copy:
                theirs.append(measure([args.xprof_python, "-c", XPROF, f, str(copy)]))
        row = {
            "file": f,
            "size_mb": Path(f).stat().st_size / 1e6,
            "events": ours[0]["events"],
            "ours_import_s": median(ours, "import_s"),
            "xprof_import_s": median(theirs, "import_s"),
            "ours_open_s": median(ours, "open_s"),
            "ours_first_view_s": median(ours, "first_view_s"),
            "ours_peak_rss_mb": median(ours, "peak_rss_bytes") / 1e6,
            "xprof_first_view_s": median(theirs, "first_view_s"),
            "xprof_peak_rss_mb": median(theirs, "peak_rss_bytes") / 1e6,
            "repeats": args.repeat,
        }
        row["ratio_time"] = row["ours_first_view_s"] / row["xprof_first_view_s"]
        row["ratio_rss"] = row["ours_peak_rss_mb"] / row["xprof_peak_rss_mb"]
        results.append(row)
        print(
            f"{Path(f).name} ({row['size_mb']:.1f} MB, {row['events']:,} events), median of {args.repeat}:\n"
            f"  ours : open {row['ours_open_s']:.2f} s, open + columns + first view {row['ours_first_view_s']:.2f} s, "
            f"peak RSS {row['ours_peak_rss_mb']:.0f} MB (import {row['ours_import_s']:.2f} s)\n"
            f"  XProf: first trace_viewer@ view {row['xprof_first_view_s']:.2f} s, peak RSS {row['xprof_peak_rss_mb']:.0f} MB "
            f"(import {row['xprof_import_s']:.2f} s)\n"
            f"  ratio ours/XProf: time {row['ratio_time']:.3f}, memory {row['ratio_rss']:.3f}",
            flush=True,
        )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
