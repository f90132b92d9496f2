"""Every tool, file to widget, against XProf 2.24.2's converter for that tool, on one file.

    python benchmarks/bench_tools.py FILE.xplane.pb [--repeat 3] [--tools overview_page,...]
                                    [--xprof-python PYTHON]

Each measurement is a fresh process (column cache off: a first open), timed after the
imports (XProf's converter module; ours, the package and its analyses' modules, the
widget's module and Bokeh's plotting module, which the first chart would import; in a
notebook kernel the package imports them ahead, once the kernel is idle after the
importing cell): ours is `load_run`, the
tool's analysis and its widget; XProf's is `xspace_to_tool_data(..., tool)` on a fresh copy
of the file.
Rounds alternate ours and XProf's so the machine's noise falls on both; the table gives
medians and the ratio ours / XProf per tool. Inputs (make them with
`shared/tools/tile_xplane.py`): `jax_transformer_cpu/.../vm.xplane.pb --times 12` (9.7 M
events) and a GPU run, e.g. `tests/data/profiles/nvidia_jax_mlp_no_graphs_h200/.../vm.xplane.pb
--times 40`; a TPU training run: `tools/make_tpu_profiles.py OUT --variant infeed --times 40`
(4,000 steps on 4 TensorCores, 59 MB); the counter tools: `--variant counters --times 40`;
the inference profile with batches: `--variant batches`.
"""

import argparse
import sys
from pathlib import Path

from _common import XPROF_TOOL, compiled, fresh_copy, measure, median, uncached

#: What the widget shows at first, where it is not the method's default (XProf's op profile
#: and ours leave idle time out at first): passed to the method, so that the widget finds
#: the same analysis computed.
KWARGS = {"op_profile": "exclude_idle=True", "framework_op_stats": "exclude_idle=True"}

#: XProf's tool name -> (our Run method, our widget module, widget class or None).
TOOLS = {
    "overview_page": ("overview", "overview", "OverviewWidget"),
    "input_pipeline_analyzer": ("input_pipeline", "input_pipeline", "InputPipelineWidget"),
    "op_profile": ("op_profile", "op_profile", "OpProfileWidget"),
    "hlo_stats": ("hlo_stats", "hlo_stats", "HloStatsWidget"),
    "framework_op_stats": ("framework_op_stats", "framework_op_stats", "FrameworkOpStatsWidget"),
    "kernel_stats": ("kernel_stats", "kernel_stats", "KernelStatsWidget"),
    "roofline_model": ("roofline_model", "roofline", "RooflineWidget"),
    "memory_profile": ("memory_profile", "memory_profile", "MemoryProfileWidget"),
    "pod_viewer": ("pod_viewer", "pod_viewer", "PodViewerWidget"),
    "perf_counters": ("perf_counters", "perf_counters", "PerfCountersWidget"),
    "utilization_viewer": ("utilization_viewer", "utilization", "UtilizationViewerWidget"),
    "kernel_utilization": ("kernel_utilization", "utilization", "KernelUtilizationWidget"),
    "inference_profile": ("inference_profile", "inference_profile", "InferenceProfileWidget"),
}

OURS = r"""
import importlib, json, resource, sys, time
import xprof_widgets as xw
xw._import_analyses()  # (imports, before the timer: a notebook kernel's preload makes them)
import bokeh.plotting  # noqa: F401 (imported by the first chart: an import, before the timer)
method, module, widget_class, kwargs = sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
Widget = getattr(importlib.import_module(f"xprof_widgets.widgets.{module}"), widget_class) if module != "-" else None
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # (the interpreter and imports)
t0 = time.perf_counter()
run = xw.load_run(sys.argv[1])
eval(f"run.{method}({kwargs})", {"run": run})
t_analysis = time.perf_counter() - t0
if Widget is not None:
    Widget(run)
t_widget = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"analysis_s": t_analysis, "widget_s": t_widget, "peak_rss_bytes": rss, "base_rss_bytes": base}))
"""


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", default=",".join(TOOLS))
    ap.add_argument("--xprof-python", default=sys.executable)
    args = ap.parse_args()
    names = [t for t in args.tools.split(",") if t]
    compiled()
    rows = []
    for tool in names:
        method, module, widget = TOOLS[tool]
        ours, theirs = [], []
        for _ in range(args.repeat):
            cmd = [sys.executable, "-c", OURS, args.file, method, module or "-", widget or "-", KWARGS.get(tool, "")]
            ours.append(measure(cmd, env=uncached()))
            with fresh_copy(args.file) as copy:
                theirs.append(measure([args.xprof_python, "-c", XPROF_TOOL, str(copy), tool]))
        o, x = median(ours, "widget_s"), median(theirs, "seconds")
        rows.append((tool, o, median(ours, "peak_rss_bytes"), x, median(theirs, "peak_rss_bytes")))
        print(
            f"{tool:26s} ours {o:7.2f} s {rows[-1][2] / 1e6:6.0f} MB | XProf {x:7.2f} s {rows[-1][4] / 1e6:6.0f} MB"
            f" | ratio {o / x:.2f}",
            flush=True,
        )
    size = Path(args.file).stat().st_size / 1e6
    print(f"\n{Path(args.file).name} ({size:.1f} MB), medians of {args.repeat} fresh processes, column cache off")
    print("| tool | ours (s) | XProf (s) | ratio | ours peak RSS (MB) | XProf peak RSS (MB) |")
    print("|---|---|---|---|---|---|")
    for tool, o, om, x, xm in rows:
        print(f"| {tool} | {o:.2f} | {x:.2f} | {o / x:.2f} | {om / 1e6:.0f} | {xm / 1e6:.0f} |")


if __name__ == "__main__":
    main()
