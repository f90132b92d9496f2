"""Memory profile: xprof-widgets against XProf 2.24.2 on the same file, same machine.

    python benchmarks/bench_memory_profile.py FILE.xplane.pb [--repeat 3] [--xprof-python PYTHON]

Each measurement runs in a fresh process (its own peak RSS), times start after
the imports. Ours: load_run + memory_profile() of the first allocator, then
building the MemoryProfileWidget, and how many bytes its synced state (figures
+ HTML) sends to the page. XProf: xspace_to_tool_data(..., "memory_profile")
on a fresh copy of the file. Make a big input with
`tile_xplane.py tf_keras_cpu/.../vm.xplane.pb OUT --times 50` (~1 M allocator
events).
"""

import argparse
import sys
from pathlib import Path

from _common import fresh_copy, measure, median, uncached

OURS = r"""
import json, resource, sys, time
import xprof_widgets as xw
from xprof_widgets.widgets.memory_profile import MemoryProfileWidget
t0 = time.perf_counter()
run = xw.load_run(sys.argv[1])
t_open = time.perf_counter() - t0
result = run.memory_profile()
t_analysis = time.perf_counter() - t0
widget = MemoryProfileWidget(run)
t_widget = time.perf_counter() - t0
sent = len(json.dumps(widget.figures)) + len(widget.html)
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"open_s": t_open, "analysis_s": t_analysis, "widget_s": t_widget, "snapshots": len(result.timeline),
                  "points_drawn": len(result.sampled_timeline()), "bytes_to_page": sent, "peak_rss_bytes": rss}))
"""

XPROF = r"""
import json, resource, sys, time
from xprof.convert import raw_to_tool_data as r
t0 = time.perf_counter()
data, _ = r.xspace_to_tool_data([sys.argv[1]], "memory_profile", {"use_saved_result": False})
t = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": t, "bytes": len(data or b""), "peak_rss_bytes": rss}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--xprof-python", default=sys.executable)
    args = ap.parse_args()
    ours, theirs = [], []
    for _ in range(args.repeat):
        ours.append(measure([sys.executable, "-c", OURS, args.file], env=uncached()))
        with fresh_copy(args.file) as copy:
            theirs.append(measure([args.xprof_python, "-c", XPROF, str(copy)]))
    print(
        f"{Path(args.file).name} ({Path(args.file).stat().st_size / 1e6:.1f} MB), "
        f"{ours[0]['snapshots']:,} allocator snapshots, median of {args.repeat}:\n"
        f"  ours : open {median(ours, 'open_s'):.2f} s, + memory_profile {median(ours, 'analysis_s'):.2f} s, "
        f"+ widget {median(ours, 'widget_s'):.2f} s; {ours[0]['points_drawn']} points and "
        f"{median(ours, 'bytes_to_page') / 1e3:.0f} KB sent to the page; peak RSS {median(ours, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  XProf: memory_profile {median(theirs, 'seconds'):.2f} s, {median(theirs, 'bytes') / 1e3:.0f} KB of JSON; "
        f"peak RSS {median(theirs, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  ratio ours (open to widget) / XProf: time {median(ours, 'widget_s') / median(theirs, 'seconds'):.3f}, "
        f"memory {median(ours, 'peak_rss_bytes') / median(theirs, 'peak_rss_bytes'):.3f}"
    )


if __name__ == "__main__":
    main()
