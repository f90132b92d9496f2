"""Op profile of a GPU run with CUDA graphs: ours with the graph kernels attributed, ours
with XProf's accounting, and XProf 2.24.2, on the same file, same machine.

    python benchmarks/bench_graphs.py FILE.xplane.pb [--repeat 3] [--xprof-python PYTHON]

What attributing costs: `load_run(..., attribute_cuda_graphs=True/False)`, `op_profile()`,
then the OpProfileWidget, each in a fresh process (column cache off, its own peak RSS,
times after the imports); XProf: `xspace_to_tool_data(..., "op_profile")` on a fresh copy.
Make a big input from a real JAX run with graphs on: `tile_xplane.py
tests/data/profiles/nvidia_jax_mlp_h200/.../vm.xplane.pb OUT --times 100` (4 M events, 89 MB;
23,200 graph kernels).
"""

import argparse
import sys
from pathlib import Path

from _common import XPROF_TOOL, fresh_copy, measure, median, uncached

OURS = r"""
import json, resource, sys, time
import xprof_widgets as xw
from xprof_widgets.widgets.op_profile import OpProfileWidget
t0 = time.perf_counter()
run = xw.load_run(sys.argv[1], attribute_cuda_graphs=sys.argv[2] == "1")
t_open = time.perf_counter() - t0
profile = run.op_profile()
t_analysis = time.perf_counter() - t0
widget = OpProfileWidget(run)
t_widget = time.perf_counter() - t0
graphs = run.cuda_graph_kernels()
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"open_s": t_open, "analysis_s": t_analysis, "widget_s": t_widget, "peak_rss_bytes": rss,
                  "graph_kernels": int(graphs["launches"].sum()),
                  "attributed": int(graphs.loc[graphs["op"].notna(), "launches"].sum())}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--xprof-python", default=sys.executable)
    args = ap.parse_args()
    rounds = {"on": [], "off": [], "xprof": []}
    for _ in range(args.repeat):  # the three in turn, so that the machine's noise hits each alike
        for flag, key in (("1", "on"), ("0", "off")):
            rounds[key].append(measure([sys.executable, "-c", OURS, args.file, flag], env=uncached()))
        with fresh_copy(args.file) as copy:
            rounds["xprof"].append(measure([args.xprof_python, "-c", XPROF_TOOL, str(copy), "op_profile"]))
    on, off, xprof = rounds["on"], rounds["off"], rounds["xprof"]
    print(
        f"{Path(args.file).name} ({Path(args.file).stat().st_size / 1e6:.1f} MB), "
        f"{on[0]['attributed']:,} of {on[0]['graph_kernels']:,} graph kernels attributed, median of {args.repeat}:\n"
        f"  ours, attributed : open {median(on, 'open_s'):.2f} s, to widget {median(on, 'widget_s'):.2f} s; "
        f"peak RSS {median(on, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  ours, as XProf   : open {median(off, 'open_s'):.2f} s, to widget {median(off, 'widget_s'):.2f} s; "
        f"peak RSS {median(off, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  XProf op_profile : {median(xprof, 'seconds'):.2f} s; peak RSS {median(xprof, 'peak_rss_bytes') / 1e6:.0f} MB\n"
        f"  ratio to XProf, time: attributed {median(on, 'widget_s') / median(xprof, 'seconds'):.3f}, "
        f"as XProf {median(off, 'widget_s') / median(xprof, 'seconds'):.3f}"
    )


if __name__ == "__main__":
    main()
