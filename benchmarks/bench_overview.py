"""Overview page: xprof-widgets against XProf 2.24.2 on the same file, same machine.

    python benchmarks/bench_overview.py FILE.xplane.pb [--repeat 3] [--xprof-python PYTHON]

The overview is what `ProfileWidget` shows first. Each measurement runs in a fresh
process (its own peak RSS), times start after the imports. Ours: `load_run` +
`overview()` (steps found by the event grouping, each step's breakdown, op statistics),
then building the OverviewWidget. XProf: `xspace_to_tool_data(..., "overview_page")` on
a fresh copy of the file. Make a big input with `tile_xplane.py
jax_transformer_cpu/.../vm.xplane.pb OUT --times 12` (9.7 M events, 185 MB).
"""

import argparse
import sys
from pathlib import Path

from _common import fresh_copy, measure, median, uncached

OURS = r"""
import json, resource, sys, time
import xprof_widgets as xw
from xprof_widgets.widgets.overview import OverviewWidget
t0 = time.perf_counter()
run = xw.load_run(sys.argv[1])
t_open = time.perf_counter() - t0
result = run.overview()
t_analysis = time.perf_counter() - t0
OverviewWidget(run)
t_widget = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"open_s": t_open, "analysis_s": t_analysis, "widget_s": t_widget,
                  "steps": len(result.steps), "peak_rss_bytes": rss}))
"""

XPROF = r"""
import json, resource, sys, time
from xprof.convert import raw_to_tool_data as r
t0 = time.perf_counter()
data, _ = r.xspace_to_tool_data([sys.argv[1]], "overview_page", {"use_saved_result": False})
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
        f"{Path(args.file).name} ({Path(args.file).stat().st_size / 1e6:.1f} MB), {ours[0]['steps']} steps, "
        f"median of {args.repeat}:\n"
        f"  ours : open {median(ours, 'open_s'):.2f} s, + overview {median(ours, 'analysis_s'):.2f} s, "
        f"+ widget {median(ours, 'widget_s'):.2f} s; peak RSS {median(ours, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  XProf: overview_page {median(theirs, 'seconds'):.2f} s; peak RSS {median(theirs, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  ratio ours (open to widget) / XProf: time {median(ours, 'widget_s') / median(theirs, 'seconds'):.3f}, "
        f"memory {median(ours, 'peak_rss_bytes') / median(theirs, 'peak_rss_bytes'):.3f}"
    )


if __name__ == "__main__":
    main()
