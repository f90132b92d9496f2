"""How our ops of kernels run in CUDA graphs agree with XProf on the same program without graphs.

usage: python tools/graph_attribution_check.py GRAPHS_ON GRAPHS_OFF

GRAPHS_ON and GRAPHS_OFF are logdirs (or run folders, or files) of one program profiled with
XLA's command buffers on (JAX's default on NVIDIA) and off
(`XLA_FLAGS=--xla_gpu_enable_command_buffer=`). Prints, for the HLO ops that make 90 % of
XProf's device op time on GRAPHS_OFF (XProf 2.24.2 run here), our HLO stats of GRAPHS_ON with
the graph kernels attributed: which were found, their occurrences and self times, and the
shares of issue 30 (found >= 95 %, self time within +-35 % for >= 85 %). Also how many graph
kernels stayed idle and why. Needs the test extra (XProf); run from the repository root.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import pandas as pd

import xprof_widgets as xw
from tests.graph_pairs import agreement, xprof_hlo_rows
from tests.xprof_oracle import tool_data


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("graphs_on")
    ap.add_argument("graphs_off")
    args = ap.parse_args()
    on = xw.load_run(args.graphs_on)
    off = xw.load_run(args.graphs_off, attribute_cuda_graphs=False)
    xprof = tool_data(list(off.files.values()), "hlo_stats")
    result = agreement(on.hlo_stats(), xprof_hlo_rows(xprof, off))
    with pd.option_context("display.width", 200, "display.max_rows", 500):
        print(result.ops.to_string(index=False))
    kernels = on.cuda_graph_kernels()
    left = kernels[kernels["op"].isna()]
    print(
        f"\nops found for {100 * result.found:.1f} % of the time that matters (>= 95 %), self time within "
        f"+-35 % for {100 * result.within:.1f} % (>= 85 %): {'passes' if result.passes else 'FAILS'}\n"
        f"graph kernels: {int(kernels['launches'].sum()):,}, attributed "
        f"{int(kernels.loc[kernels['op'].notna(), 'launches'].sum()):,}"
    )
    for reason, n in left.groupby("reason")["launches"].sum().items():
        print(f"  left idle: {n:,}: {reason}")
    return 0 if result.passes else 1


if __name__ == "__main__":
    sys.exit(main())
