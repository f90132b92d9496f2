"""The graph viewer on a big module: its parse, the first view around a fusion (parse plus
the neighbourhood's layout) and a wide view cut at max_nodes, each repeat in a fresh process.

    python benchmarks/bench_graph_viewer.py [--instructions 10000,40000] [--repeat 5]

The module is `tests/hlo_corpus.py`'s layered random DAG (the one the graph viewer's tests
use: 200 fusions, the rest adds and multiplies). XProf's graph viewer renders a module saved
beside the run, not one built in memory, so there is no XProf column here: this measures how
our first view grows with the module, which the tests check by the work done (only the
neighbourhood is laid out), not by a clock.
"""

import argparse
import sys
from pathlib import Path

from _common import compiled, measure, median, uncached

ROOT = Path(__file__).resolve().parent.parent

SCRIPT = r"""
import json, sys, time
sys.path.insert(0, sys.argv[2])
from tests.hlo_corpus import layered_hlo_proto
from xprof_widgets.analysis.graph_viewer import graph_viewer
from xprof_widgets.io.hlo import hlo_module
proto = layered_hlo_proto(int(sys.argv[1]), fusions=200)
t0 = time.perf_counter()
hlo_module(proto, "big(1)")
t_parse = time.perf_counter() - t0
protos = {"big(1)": proto}
t0 = time.perf_counter()
first = graph_viewer(protos, "fusion.100", radius=3)
t_first = time.perf_counter() - t0
t0 = time.perf_counter()
wide = graph_viewer(protos, "fusion.100", radius=8, expand=True)
t_wide = time.perf_counter() - t0
print(json.dumps({"parse_s": t_parse, "first_s": t_first, "wide_s": t_wide,
                  "first_nodes": len(first.nodes), "wide_nodes": len(wide.nodes)}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--instructions", default="10000,40000", help="module sizes, comma-separated")
    ap.add_argument("--repeat", type=int, default=5)
    args = ap.parse_args()
    compiled()
    print("| instructions | parse (s) | first view (s) | wide view, cut at 400 nodes (s) | nodes shown |")
    print("|---|---|---|---|---|")
    for n in (int(s) for s in args.instructions.split(",")):
        rows = [measure([sys.executable, "-c", SCRIPT, str(n), str(ROOT)], env=uncached()) for _ in range(args.repeat)]
        nodes = f"{rows[0]['first_nodes']} / {rows[0]['wide_nodes']}"
        print(
            f"| {n:,} | {median(rows, 'parse_s'):.3f} | {median(rows, 'first_s'):.3f} "
            f"| {median(rows, 'wide_s'):.3f} | {nodes} |"
        )


if __name__ == "__main__":
    main()
