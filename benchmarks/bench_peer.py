"""Every tool's first view, ours against xprof-rs (the Rust rewrite of XProf's backend) on
the same file, alternating, medians: the table of issue 47.

    python benchmarks/bench_peer.py FILE.xplane.pb [--repeat 3] [--tools overview_page,...]
                                    [--xprof-rs PATH] [--against xprof] [--xprof-python PYTHON]

Ours: a fresh process, column cache off, imports done before the clock (the package and
its analyses' modules, the widget's module, Bokeh's plotting module: in a notebook kernel
the package imports them ahead, once the kernel is idle after the importing cell), then `load_run`, the tool's analysis and its
widget (`bench_tools.py`'s script). xprof-rs (`pip install -e '.[bench]'`): a fresh server
on a fresh copy of the file (LOGDIR/plugins/profile/run/HOST.xplane.pb), timed from its
first request for the tool to the last byte of the answer (the server's start before the
clock, as our imports); its peak memory is the server's VmHWM after the answer. Memory
is given twice: the process's peak, and the peak less what the process held before the
clock (ours: the interpreter, numpy, pandas, Bokeh, about 100 MB; xprof-rs's server: about
20 MB), the memory the tool itself took. Where
xprof-rs cannot open a file (0.1.3 on JAX 0.11's H200 files: "A stat metadata ID is out of
range") the row says so; `--against xprof` measures XProf 2.24.2's converter instead.
Inputs (make them with `shared/tools/tile_xplane.py`): the AMD MI300X GEMM run tiled 400x
(`amd_jax_gemm_mi300/.../tw003.xplane.pb --times 400`, 32 MB), the JAX transformer on CPU
tiled 12x (9.7 M events, 185 MB), an H200 run tiled 40x.
"""

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from _common import XPROF_TOOL, compiled, fresh_copy, measure, median, uncached
from bench_tools import KWARGS, OURS
from bench_tools import TOOLS as _TOOLS

#: XProf's tool name -> (our Run method, our widget module, widget class); the trace
#: viewer's first view is its widget's first window.
TOOLS = {"trace_viewer@": ("trace", "trace_viewer", "TraceViewerWidget"), **_TOOLS}
#: The tools of the issue's table, in its order.
DEFAULT = (
    "trace_viewer@",
    "overview_page",
    "input_pipeline_analyzer",
    "op_profile",
    "hlo_stats",
    "framework_op_stats",
    "kernel_stats",
    "roofline_model",
    "memory_profile",
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _peak_rss(pid, field="VmHWM"):
    """VmHWM (bytes) of a running process (or another `field` of its status: VmRSS), 0
    where /proc does not tell."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(f"{field}:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def xprof_rs(binary, file, tool, timeout=600):
    """One cold request of `tool` to a fresh xprof-rs server on a fresh copy of `file`:
    {"seconds", "bytes", "peak_rss_bytes", "base_rss_bytes"} or {"error": what it answered}."""
    with tempfile.TemporaryDirectory() as tmp:
        run = Path(tmp) / "plugins" / "profile" / "run"
        run.mkdir(parents=True)
        host = Path(file).name.split(".xplane.pb")[0]
        shutil.copy(file, run / Path(file).name)
        port = _free_port()
        server = subprocess.Popen(
            [binary, "--logdir", tmp, "--port", str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        try:
            base = f"http://127.0.0.1:{port}/data/plugin/profile"
            for _ in range(400):  # the server's start, before the clock
                try:
                    urllib.request.urlopen(f"{base}/runs", timeout=5).read()
                    break
                except (urllib.error.URLError, ConnectionError):
                    time.sleep(0.025)
            url = f"{base}/data?run=run&tag={tool}&host={host}"
            started = _peak_rss(server.pid, "VmRSS")
            t0 = time.perf_counter()
            try:
                body = urllib.request.urlopen(url, timeout=timeout).read()
            except urllib.error.HTTPError as e:
                return {"error": f"{e.code}: {e.read().decode(errors='replace')[:200]}"}
            seconds = time.perf_counter() - t0
            return {
                "seconds": seconds,
                "bytes": len(body),
                "peak_rss_bytes": _peak_rss(server.pid),
                "base_rss_bytes": started,
            }
        finally:
            server.kill()
            server.wait()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tools", default=",".join(DEFAULT))
    ap.add_argument("--xprof-rs", default=shutil.which("xprof-rs") or str(Path(sys.executable).parent / "xprof-rs"))
    ap.add_argument("--against", choices=("xprof-rs", "xprof"), default="xprof-rs")
    ap.add_argument("--xprof-python", default=sys.executable)
    args = ap.parse_args()
    if args.against == "xprof-rs" and not os.access(args.xprof_rs, os.X_OK):
        sys.exit(f"no xprof-rs at {args.xprof_rs}: pip install -e '.[bench]', or --against xprof")
    compiled()
    rows = []
    for tool in [t for t in args.tools.split(",") if t]:
        method, module, widget = TOOLS[tool]
        ours, theirs, error = [], [], ""
        for _ in range(args.repeat):
            cmd = [sys.executable, "-c", OURS, args.file, method, module, widget, KWARGS.get(tool, "")]
            ours.append(measure(cmd, env=uncached()))
            if args.against == "xprof":
                with fresh_copy(args.file) as copy:
                    theirs.append(measure([args.xprof_python, "-c", XPROF_TOOL, str(copy), tool.rstrip("@")]))
                continue
            got = xprof_rs(args.xprof_rs, args.file, tool)
            if "error" in got:
                error = got["error"]
                break
            theirs.append(got)
        o, om, oa = median(ours, "widget_s"), median(ours, "peak_rss_bytes"), _added(ours)
        x, xm, xa = (
            (median(theirs, "seconds"), median(theirs, "peak_rss_bytes"), _added(theirs))
            if theirs
            else (float("nan"), 0, 0)
        )
        rows.append((tool, o, om, oa, x, xm, xa, error))
        print(
            json.dumps(
                {"tool": tool, "ours_s": o, "ours_rss": om, "ours_added": oa, "theirs_s": x, "theirs_rss": xm,
                 "theirs_added": xa, "error": error}
            ),
            flush=True,
        )  # fmt: skip
    size = Path(args.file).stat().st_size / 1e6
    peer = "xprof-rs 0.1.3" if args.against == "xprof-rs" else "XProf 2.24.2"
    print(f"\n{Path(args.file).name} ({size:.1f} MB), medians of {args.repeat}, ours vs {peer}, column cache off")
    print(
        f"| tool | ours (s) | {peer} (s) | ratio | ours peak RSS (MB) | {peer} peak RSS (MB) "
        f"| ours added (MB) | {peer} added (MB) |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for tool, o, om, oa, x, xm, xa, error in rows:
        if error:
            print(f"| {tool} | {o:.2f} | cannot open: {error} | | {om / 1e6:.0f} | | {oa / 1e6:.0f} | |")
        else:
            print(
                f"| {tool} | {o:.2f} | {x:.2f} | {o / x:.2f} | {om / 1e6:.0f} | {xm / 1e6:.0f} "
                f"| {oa / 1e6:.0f} | {xa / 1e6:.0f} |"
            )


def _added(rows):
    """The median of peak less base memory (bytes) over measurements (0 where a measurement
    has no base: XProf's converter)."""
    return median(
        [{"added": r["peak_rss_bytes"] - r.get("base_rss_bytes", r["peak_rss_bytes"])} for r in rows], "added"
    )


if __name__ == "__main__":
    main()
