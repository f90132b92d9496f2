"""Where one tool's first view spends its time, thread by thread: each function named is
wrapped to record when it ran, on which thread and how much CPU that thread used meanwhile.

    python benchmarks/timeline.py FILE.xplane.pb [--tool framework_op_stats]
                                  [--watch module:qualname,...] [--sequential]

The column cache is off (a first open, as `bench_peer.py` and `bench_tools.py` measure:
a timeline of a cached open says nothing of a cold one). The imports are done before the
clock, as in those benchmarks. Each line: start and end (ms from `load_run`), wall ms,
the thread's CPU ms over that span (less than wall: the thread waited, for the GIL, a
lock or another thread's result), the thread, and the function, indented by nesting.
`--sequential`: no part of the run's statistics built ahead on a thread
(`RunStats.build_ahead`), to see what the threads win. The summary line gives the
process's wall and CPU time: CPU near twice the wall is both cores busy.
"""

import argparse
import functools
import importlib
import os
import sys
import threading
import time

from bench_tools import KWARGS, TOOLS

#: What a GPU tool's first view is made of (module:qualname under xprof_widgets).
DEFAULT = (
    "io.xspace:read_xspace",
    "io.xspace:read_padded",
    "io.xspace:_parse_space",
    "analysis.core.grouping:gpu_stats_first",
    "analysis.core.op_stats:_gpu_op_metrics",
    "analysis.core.op_stats:_gpu_kernel_runs",
    "analysis.core.command_buffers:_read_graph_events",
    "analysis.core.kernels:_host_reports",
    "analysis.core.host_ops:host_op_db",
    "analysis.core.xla_ops:_parsed",
    "analysis.core.hlo_cost:module_costs",
)


def _wrap(records, depth, name, fn, t0):
    @functools.wraps(fn)
    def timed(*args, **kwargs):
        level = getattr(depth, "level", 0)
        depth.level = level + 1
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            depth.level = level
            end = time.perf_counter()
            thread = threading.current_thread().name
            records.append((start - t0[0], end - t0[0], time.thread_time() - cpu, thread, level, name))

    return timed


def _watch(spec, records, depth, t0):
    """Wrap `module:qualname` (under xprof_widgets) where it is defined and wherever a
    module imported it by name."""
    module_name, qualname = spec.split(":")
    module = importlib.import_module(f"xprof_widgets.{module_name}")
    *path, attr = qualname.split(".")
    owner = module
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, attr)
    timed = _wrap(records, depth, qualname, original, t0)
    setattr(owner, attr, timed)
    if not path:
        for other in list(sys.modules.values()):
            if other is not module and getattr(other, "__name__", "").startswith("xprof_widgets"):
                if getattr(other, attr, None) is original:
                    setattr(other, attr, timed)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--tool", default="framework_op_stats", choices=sorted(TOOLS))
    ap.add_argument("--watch", default=",".join(DEFAULT))
    ap.add_argument("--sequential", action="store_true")
    args = ap.parse_args()
    os.environ["XPROF_WIDGETS_CACHE"] = "0"
    import bokeh.plotting  # noqa: F401 (the first chart's import: before the clock)

    import xprof_widgets as xw
    from xprof_widgets.analysis.core import run_stats

    xw._import_analyses()
    method, module, widget_class = TOOLS[args.tool]
    widget = getattr(importlib.import_module(f"xprof_widgets.widgets.{module}"), widget_class) if widget_class else None
    if args.sequential:
        run_stats.RunStats.build_ahead = lambda self, name, first=None: None
    records, depth, t0 = [], threading.local(), [0.0]
    for spec in [s for s in args.watch.split(",") if s]:
        _watch(spec, records, depth, t0)
    kwargs = eval(f"dict({KWARGS.get(args.tool, '')})")
    t0[0], cpu0 = time.perf_counter(), time.process_time()
    run = xw.load_run(args.file)
    getattr(run, method)(**kwargs)
    if widget is not None:
        widget(run)
    wall, cpu = time.perf_counter() - t0[0], time.process_time() - cpu0
    print(f"{args.tool}: wall {wall * 1e3:.1f} ms, CPU {cpu * 1e3:.1f} ms (both cores busy: CPU = 2 x wall)")
    print(f"{'start':>7} {'end':>7} {'wall':>6} {'cpu':>6}  thread")
    for start, end, used, thread, level, name in sorted(records):
        print(
            f"{start * 1e3:7.1f} {end * 1e3:7.1f} {(end - start) * 1e3:6.1f} {used * 1e3:6.1f}  {thread[:24]:24s} {'  ' * level}{name}"
        )


if __name__ == "__main__":
    main()
