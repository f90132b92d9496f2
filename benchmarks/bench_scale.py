"""Every step from file to first view at scale, cold and from the column cache, against
XProf 2.24.2 and against the floors (reading the bytes, protobuf's own C parse).

    python benchmarks/bench_scale.py FILE.xplane.pb [--repeat 3] [--xprof-repeat N]
        [--before SRC]            # a source tree of another version (e.g. `git archive HEAD`)
        [--xprof-python PYTHON]   # a Python with `xprof==2.24.2` (default: this one)
        [--no-events]             # open + first trace view only (the 49 M event goal)
        [--json OUT.json]

Make the input with `../shared/tools/tile_xplane.py jax_transformer_cpu/.../vm.xplane.pb
OUT --times 12` (9.7 M events, 185 MB) or `--times 60` (49 M, 0.9 GB).

Every number is a median over `--repeat` fresh processes (times after the imports; peak
RSS is the process's own). Ours, per step: `load_run`, `run.events()`, `run.trace()`
(the build), `trace.query(whole profile, 2000 px)` (the first view), in one process, in
that order, in these settings:

- cold: an empty column cache (the entry is written on a background thread while the
  later steps run; the process waits for it at exit, untimed);
- off: `XPROF_WIDGETS_CACHE=0`, what every open cost before the cache;
- warm: reopening the unchanged file, its cache entry present (the second `load_run`
  of a file in a new process);
- before, before cold (with `--before`): the same steps with the other source tree,
  as "off" and as "cold" (run in that tree's folder, so that it is the one imported).

Floors: reading the file's bytes (`Path.read_bytes`) and `XSpace.FromString` (protobuf's
C parser, building every message object), each in a fresh process. XProf: its
trace viewer's first view, `xspace_to_tool_data([copy], "trace_viewer@", ...)` at
2000 px on a fresh copy of the file (it caches beside its input), which is the step
comparable to our open + first trace view. The machine here is small and shared:
compare the ratios measured in one run, and the load printed with them.
"""

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from _common import fresh_copy, measure, median

OURS = r"""
import json, resource, sys, time
path, with_events = sys.argv[1], sys.argv[2] == "1"
t0 = time.perf_counter()
import numpy as np
import xprof_widgets as xw
t_import = time.perf_counter() - t0
def rss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
out = {"import_s": t_import}
t = time.perf_counter()
run = xw.load_run(path)
out["open_s"] = time.perf_counter() - t
out["open_rss"] = rss()
out["from_cache"] = getattr(run.xspace(), "_data", 1) is None
if with_events:
    t = time.perf_counter()
    events = run.events()
    out["events_s"] = time.perf_counter() - t
    out["events_rss"] = rss()
    out["events"] = len(events)
t = time.perf_counter()
trace = run.trace()
out["trace_s"] = time.perf_counter() - t
t = time.perf_counter()
view = trace.query(None, None, 2000)
out["view_s"] = time.perf_counter() - t
out["boxes"] = len(view)
out["total_s"] = out["open_s"] + out.get("events_s", 0) + out["trace_s"] + out["view_s"]
out["peak_rss"] = rss()
print(json.dumps(out))
"""

READ = r"""
import json, resource, sys, time
from pathlib import Path
t = time.perf_counter()
data = Path(sys.argv[1]).read_bytes()
print(json.dumps({"seconds": time.perf_counter() - t, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

PARSE = r"""
import json, resource, sys, time
from pathlib import Path
from xprof_widgets.io import schema
data = Path(sys.argv[1]).read_bytes()
t = time.perf_counter()
space = schema.message_class("tensorflow.profiler.XSpace").FromString(data)
print(json.dumps({"seconds": time.perf_counter() - t, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

XPROF = r"""
import json, resource, sys, time
from xprof.convert import raw_to_tool_data as r
t0 = time.perf_counter()
data, _ = r.xspace_to_tool_data([sys.argv[1]], "trace_viewer@", {"use_saved_result": False,
    "trace_viewer_options": {"resolution": 2000}})
print(json.dumps({"seconds": time.perf_counter() - t0, "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024}))
"""

STEPS = ("open_s", "events_s", "trace_s", "view_s", "total_s")


def _env(**changes):
    env = dict(os.environ)
    for k, v in changes.items():
        if v is None:
            env.pop(k, None)
        else:
            env[k] = v
    return env


def _load():
    try:
        return Path("/proc/loadavg").read_text().split()[:3]
    except OSError:
        return ["?"] * 3


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--xprof-repeat", type=int, help="XProf's repeats (default: --repeat; 0: none)")
    ap.add_argument("--xprof-python", default=sys.executable)
    ap.add_argument("--before", help="a source tree holding xprof_widgets/ of the version to compare with")
    ap.add_argument("--no-events", action="store_true", help="skip run.events()")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args()
    f = args.file
    events = "0" if args.no_events else "1"
    ours = [sys.executable, "-c", OURS, f, events]
    load = {"start": _load()}
    rows = {}
    with tempfile.TemporaryDirectory() as warm_dir:
        # The warm cache: written by one cold open first (its process waits for the writer).
        measure(ours, env=_env(XPROF_WIDGETS_CACHE_DIR=warm_dir, XPROF_WIDGETS_CACHE=None))
        settings = {
            "cold": lambda tmp: _env(XPROF_WIDGETS_CACHE_DIR=tmp, XPROF_WIDGETS_CACHE=None),
            "off": lambda tmp: _env(XPROF_WIDGETS_CACHE="0"),
            "warm": lambda tmp: _env(XPROF_WIDGETS_CACHE_DIR=warm_dir, XPROF_WIDGETS_CACHE=None),
        }
        if args.before:
            before = str(Path(args.before).resolve())
            settings["before"] = lambda tmp: _env(PYTHONPATH=before, XPROF_WIDGETS_CACHE="0")
            settings["before cold"] = lambda tmp: _env(
                PYTHONPATH=before, XPROF_WIDGETS_CACHE_DIR=tmp, XPROF_WIDGETS_CACHE=None
            )
        runs = {name: [] for name in settings}
        floors = {"read": [], "protobuf_parse": []}
        # `python -c` puts its folder first on sys.path: the other tree's process runs in that
        # tree, else a checkout it is started from would shadow PYTHONPATH.
        cwd = {"before": before, "before cold": before} if args.before else {}
        for _ in range(args.repeat):  # interleaved, so that a busy minute hits every setting alike
            for name, env in settings.items():
                with tempfile.TemporaryDirectory() as tmp:
                    runs[name].append(measure(ours, env=env(tmp), cwd=cwd.get(name)))
                # A cold run leaves its entry's pages to be written back: not during the next run.
                os.sync()
            floors["read"].append(measure([sys.executable, "-c", READ, f]))
            floors["protobuf_parse"].append(measure([sys.executable, "-c", PARSE, f]))
        theirs = []
        for _ in range(args.repeat if args.xprof_repeat is None else args.xprof_repeat):
            with fresh_copy(f) as copy:
                theirs.append(measure([args.xprof_python, "-c", XPROF, str(copy)]))
    load["end"] = _load()
    for name, got in runs.items():
        rows[name] = {k: median(got, k) for k in (*STEPS, "open_rss", "peak_rss") if k in got[0]}
        rows[name]["from_cache"] = [g["from_cache"] for g in got]
        rows[name]["events_rss"] = median(got, "events_rss") if "events_rss" in got[0] else None
    result = {
        "file": f,
        "size_mb": Path(f).stat().st_size / 1e6,
        "events": runs["cold"][0].get("events"),
        "repeats": args.repeat,
        "load": load,
        "ours": rows,
        "floors": {k: {"seconds": median(v, "seconds"), "peak_rss": median(v, "peak_rss")} for k, v in floors.items()},
        "xprof": {"seconds": median(theirs, "seconds"), "peak_rss": median(theirs, "peak_rss")} if theirs else None,
    }
    _print(result)
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))


def _print(r):
    print(f"{Path(r['file']).name}: {r['size_mb']:.0f} MB, {r['events'] or 0:,} events; medians of {r['repeats']}")
    print(f"load average: {' '.join(r['load']['start'])} at the start, {' '.join(r['load']['end'])} at the end")
    names = list(r["ours"])
    print(f"| step | {' | '.join(names)} |")
    print(f"|---|{'---|' * len(names)}")
    ours = r["ours"]
    for step in STEPS:
        if step in ours["cold"]:
            cells = " | ".join(f"{ours[n][step]:.2f}" for n in names)
            print(f"| {step[:-2]} (s) | {cells} |")
    for key in ("open_rss", "events_rss", "peak_rss"):
        if ours["cold"].get(key) is not None:
            cells = " | ".join(f"{ours[n][key] / 1e6:.0f}" for n in names)
            print(f"| {key} (MB) | {cells} |")
    fl = r["floors"]
    print(
        f"floors: read the bytes {fl['read']['seconds']:.2f} s; protobuf C parse {fl['protobuf_parse']['seconds']:.2f} s "
        f"({fl['protobuf_parse']['peak_rss'] / 1e6:.0f} MB)"
    )
    if r["xprof"]:
        x = r["xprof"]
        print(f"XProf trace_viewer@ first view: {x['seconds']:.2f} s, {x['peak_rss'] / 1e6:.0f} MB")
        for n in names:
            o = r["ours"][n]
            print(
                f"  ours {n} (open to first view) / XProf: time {o['total_s'] / x['seconds']:.3f}, "
                f"memory {o['peak_rss'] / x['peak_rss']:.3f}"
            )


if __name__ == "__main__":
    main()
