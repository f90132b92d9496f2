"""Command line: `python -m xprof_widgets demo` or `python -m xprof_widgets summary PATH`.

`demo` prints what the sample profile shipped in the package holds and opens
`notebooks/quickstart.ipynb` (or a copy written next to you) in JupyterLab.
"""

import argparse
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path

from . import load_run, sample_run
from .errors import ProfileError
from .format import mib


def summary(run, out=None):
    """Print a run's hosts, devices, tools and its largest module's memory (to `out`,
    else the sys.stdout of the moment: a notebook or a test may have replaced it)."""
    out = sys.stdout if out is None else out
    print(f"run {run.name}: hosts {', '.join(run.hosts)}", file=out)
    for space in run.xspaces():
        print(f"  {space.host}: {len(space.planes)} planes, {space.event_count:,} events", file=out)
    print(f"  tools with data: {', '.join(run.tools) or 'none'}", file=out)
    for _, row in run.tool_status().iterrows():
        if not row.available:
            print(f"  {row.tool}: {row.reason}", file=out)
    if "memory_viewer" in run.tools:
        mv = run.memory_viewer()
        print(
            f"  memory viewer, module {mv.module}: peak heap {mib(mv.peak_heap_bytes)} "
            f"(unpadded {mib(mv.peak_unpadded_heap_bytes)}), {len(mv.buffers_at_peak)} buffers at peak, "
            f"largest {mv.buffers_at_peak.sort_values('size_bytes').iloc[-1].instruction_name}",
            file=out,
        )


_REPOSITORY_QUICKSTART = Path(__file__).resolve().parent.parent / "notebooks" / "quickstart.ipynb"


def _quickstart_notebook(folder=None, repository=_REPOSITORY_QUICKSTART):
    """The quickstart notebook to open: the repository's (a checkout), else a copy next to
    you (an installed wheel carries it). A copy already there is opened as it is (your
    edits kept), never written over."""
    if repository.is_file():
        return repository
    copy = Path(folder or Path.cwd()) / "xprof_widgets_quickstart.ipynb"
    if not copy.exists():
        packaged = resources.files(__package__).joinpath("data", "quickstart.ipynb")
        copy.write_bytes(packaged.read_bytes() if packaged.is_file() else _REPOSITORY_QUICKSTART.read_bytes())
    return copy


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m xprof_widgets")
    sub = ap.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="summarise the sample profile and open the quickstart notebook")
    demo.add_argument("--no-lab", action="store_true", help="only print the summary")
    s = sub.add_parser("summary", help="summarise a logdir, run folder or .xplane.pb file")
    s.add_argument("path")
    args = ap.parse_args(argv)
    if args.command == "summary":
        try:
            summary(load_run(args.path))
        except ProfileError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        return 0
    summary(sample_run())
    print('  (a second sample, with allocator events, GPU ops and kernels: xw.sample_run("gpu"))')
    if args.no_lab:
        return 0
    notebook = _quickstart_notebook()
    if shutil.which("jupyter") is None and not Path(sys.executable).with_name("jupyter").exists():
        print(f"JupyterLab is not installed here: pip install jupyterlab, then open {notebook}")
        return 0
    print(f"opening {notebook} in JupyterLab (Ctrl+C to stop)")
    command = [sys.executable, "-m", "jupyter", "lab", str(notebook)]
    if hasattr(os, "geteuid") and os.geteuid() == 0:  # containers, cloud VMs: JupyterLab refuses root otherwise
        command.append("--allow-root")
    return subprocess.call(command)


if __name__ == "__main__":
    sys.exit(main())
