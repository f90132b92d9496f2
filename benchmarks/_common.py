"""What every benchmark here does the same way: run a measurement in a fresh
process, give XProf a fresh copy of the file, take medians."""

import argparse
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path


def measure(cmd, env=None, cwd=None):
    """Run `cmd` (a fresh Python process; `env`: its environment, else this one's; `cwd`:
    its folder, else this one's) and return the JSON object on its last output line."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=cwd).stdout
    return json.loads(out.strip().splitlines()[-1])


def compiled():
    """Byte-compile the package once, as `pip install` does for a wheel: where
    PYTHONDONTWRITEBYTECODE is set (as on these machines) every fresh process would
    otherwise compile each module it imports lazily, inside the timed part."""
    import compileall

    import xprof_widgets

    compileall.compile_dir(Path(xprof_widgets.__file__).parent, quiet=1)


def uncached(**extra):
    """This environment with the column cache off (and `extra`): every repeat decodes the
    file, as a first open does, and nothing is written into the user's cache folder."""
    return {**os.environ, "XPROF_WIDGETS_CACHE": "0", **extra}


@contextlib.contextmanager
def fresh_copy(path):
    """A copy of `path` in a temporary folder: XProf caches results beside its input."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / Path(path).name
        shutil.copy(path, copy)
        yield copy


def median(rows, key):
    """The median of `key` over a list of measurement dicts."""
    return statistics.median(r[key] for r in rows)


#: XProf's `xspace_to_tool_data` of one tool on one file (argv[1]), timed after the imports:
#: prints seconds, the size of what it returns and the process's peak RSS.
XPROF_TOOL = r"""
import json, resource, sys, time
from xprof.convert import raw_to_tool_data as r
t0 = time.perf_counter()
data, _ = r.xspace_to_tool_data([sys.argv[1]], sys.argv[2], {"use_saved_result": False})
t = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"seconds": t, "bytes": len(data or b""), "peak_rss_bytes": rss}))
"""


#: Ours: `load_run` of argv[1], then `run.METHOD()`, then `WIDGET(run)` (from module
#: `xprof_widgets.widgets.MODULE`), timed after the imports; prints the times, the peak
#: RSS and EXTRA (a dict expression over `result` and `widget`).
OURS_TOOL = r"""
import json, resource, sys, time
import xprof_widgets as xw
from xprof_widgets.widgets.MODULE import WIDGET
import bokeh.plotting  # noqa: F401 (imported by the first chart: an import, before the timer)
t0 = time.perf_counter()
run = xw.load_run(sys.argv[1])
t_open = time.perf_counter() - t0
result = run.METHOD()
t_analysis = time.perf_counter() - t0
widget = WIDGET(run)
t_widget = time.perf_counter() - t0
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(json.dumps({"open_s": t_open, "analysis_s": t_analysis, "widget_s": t_widget, "peak_rss_bytes": rss, **EXTRA}))
"""


def ours_tool_script(module, widget, method, extra="{}"):
    """`OURS_TOOL` for one tool (see there)."""
    return (
        OURS_TOOL.replace("MODULE", module).replace("WIDGET", widget).replace("METHOD", method).replace("EXTRA", extra)
    )


def ours_against_xprof(doc, ours_script, tool):
    """A benchmark's command line (`doc`: its help): FILE, `--repeat`, `--xprof-python`.
    Runs `--repeat` rounds of our script (fresh process, column cache off) then XProf's
    `tool` (fresh process, fresh copy of the file) on FILE: (args, ours, theirs), the
    lists of results of each side."""
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--xprof-python", default=sys.executable)
    args = ap.parse_args()
    ours, theirs = [], []
    for _ in range(args.repeat):
        ours.append(measure([sys.executable, "-c", ours_script, args.file], env=uncached()))
        with fresh_copy(args.file) as copy:
            theirs.append(measure([args.xprof_python, "-c", XPROF_TOOL, str(copy), tool]))
    return args, ours, theirs
