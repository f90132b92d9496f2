"""The notebooks run top to bottom in a real kernel (nbclient)."""

import importlib
import json
import re
import socket
import subprocess
import sys
import sysconfig
from html import escape as html_escape
from importlib.util import find_spec
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient
from nbclient.exceptions import CellExecutionError

import xprof_widgets as xw

from .conftest import PROFILES, corpus_run

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _text(cell):
    out = []
    for o in cell.get("outputs", []):
        out.append(o.get("text", ""))
        out.append(o.get("data", {}).get("text/plain", ""))
    return "".join(out)


def test_quickstart_runs_and_shows_the_sample(tmp_path):
    nb = nbformat.read(NOTEBOOKS / "quickstart.ipynb", as_version=4)
    NotebookClient(nb, timeout=300, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, errors
    text = "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")
    mv = xw.sample_run().memory_viewer()
    assert f"{mv.module}: peak heap {mv.peak_heap_bytes / 2**20:.2f} MiB" in text
    # The widget cell produced a widget view (its text fallback names the class).
    widget_cell = next(c for c in nb.cells if "MemoryViewerWidget(" in c.source)
    kinds = {k for o in widget_cell.outputs for k in o.get("data", {})}
    assert "application/vnd.jupyter.widget-view+json" in kinds
    for name in ("OpProfileWidget(", "OverviewWidget(", "MemoryProfileWidget("):
        cell = next(c for c in nb.cells if name in c.source)
        assert "application/vnd.jupyter.widget-view+json" in {k for o in cell.outputs for k in o.get("data", {})}


# --- helpers for the walk-through notebooks -----------------------------------------------------


def _execute(name, cwd, timeout=300):
    """Run notebook `name` in a fresh kernel with `cwd` as working folder; return it, executed.
    The kernel inherits this process's environment (monkeypatch.setenv reaches it)."""
    nb = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(cwd)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, [(e["ename"], e["evalue"]) for e in errors]
    return nb


def _cell(nb, snippet):
    """The first code cell whose source contains `snippet`."""
    return next(c for c in nb.cells if c.cell_type == "code" and snippet in c.source)


def _html(cell):
    return "".join(o.get("data", {}).get("text/html", "") for o in cell.get("outputs", []))


def _all_text(nb):
    return "\n".join(_text(c) for c in nb.cells if c.cell_type == "code")


def _shows_widget(cell):
    return "application/vnd.jupyter.widget-view+json" in {k for o in cell.get("outputs", []) for k in o.get("data", {})}


def _size(n):
    """The notebook's `size()`: MiB below 1 GiB, GiB above."""
    return f"{n / 2**30:,.2f} GiB" if n >= 2**30 else f"{n / 2**20:,.2f} MiB"


# --- memory_peak.ipynb --------------------------------------------------------------------------


@pytest.mark.parametrize("profile", ["sample", "jax_mlp_cpu", "tpu_v6e_inference", "tf_keras_cpu"])
def test_memory_peak_walkthrough(profile, tmp_path, monkeypatch):
    """The OOM walk-through on its default, the packaged GPU sample (both tools), JAX on CPU
    (memory viewer only, no allocator events), a TPU profile (both tools) and a TensorFlow CPU
    profile (memory profile only, no compiled modules)."""
    if profile == "sample":
        monkeypatch.delenv("XPROF_LOGDIR", raising=False)
        run = xw.sample_run("gpu")
    else:
        monkeypatch.setenv("XPROF_LOGDIR", str(PROFILES / profile))
        run = corpus_run(profile)
    nb = _execute("memory_peak.ipynb", tmp_path)
    text = _all_text(nb)
    assert f"<Run {run.name!r}" in _text(_cell(nb, "XPROF_LOGDIR"))  # the notebook opened this run

    mp = run.memory_profile()
    assert bool(mp.reason) == (profile == "jax_mlp_cpu")
    if mp.reason:
        assert f"No memory profile in this run: {mp.reason}" in text
        assert "(no allocator events: nothing to break down)" in text
    else:
        assert (
            f"allocator {mp.memory_id!r} (allocators: {', '.join(mp.memory_ids)}) on host {mp.host!r}, "
            f"{len(mp.timeline):,} allocator events"
        ) in text
        assert (
            f"peak bytes in use: {mp.peak_bytes_in_use:,} bytes ({_size(mp.peak_bytes_in_use)}) "
            f"of {mp.capacity_bytes:,} bytes capacity"
        ) in text
        assert (
            f"peak within the profile at {mp.peak_time_ms:,.3f} ms (step {mp.peak_step_id}): "
            f"heap {mp.peak_heap_bytes:,} + stack {mp.peak_stack_bytes:,} bytes, "
            f"free {mp.peak_free_bytes:,} bytes, fragmentation {mp.fragmentation_at_peak:.2%}"
        ) in text
        # The breakdown at peak, shown as a table: every size of its first 10 rows.
        html = _html(_cell(nb, "mp.breakdown_at_peak"))
        assert len(mp.breakdown_at_peak) > 1
        for v in mp.breakdown_at_peak["allocation_bytes"].head(10):
            assert f"<td>{v}</td>" in html
        # Another moment: where the heap was largest, every allocation live then.
        tl = mp.timeline
        largest = tl.loc[tl["heap_bytes"].idxmax()]
        assert f"largest heap: {int(largest['heap_bytes']):,} bytes at {largest['time_ms']:,.3f} ms" in text
        moment = mp.breakdown_at(int(largest["time_ps"]))
        assert len(moment) > 0
        html = _html(_cell(nb, "mp.breakdown_at("))
        for v in moment["allocation_bytes"].head(10):
            assert f"<td>{v}</td>" in html

    if "memory_viewer" in run.tools:
        assert profile != "tf_keras_cpu"
        mv = run.memory_viewer()
        assert (
            f"{mv.module}: peak heap {mv.peak_heap_bytes:,} bytes ({_size(mv.peak_heap_bytes)}) "
            f"at program step {mv.peak_position}"
        ) in text
        assert (
            f"indefinite (parameters, outputs, constants): {mv.indefinite_allocation_bytes:,} bytes; "
            f"temporaries: {mv.heap_temp_bytes:,} bytes"
        ) in text
        top = mv.buffers_by_size().head(10)
        assert (
            f"the 10 largest buffers hold {top['size_bytes'].sum() / mv.peak_heap_bytes:.1%} of the peak heap" in text
        )
        html = _html(_cell(nb, "mv.buffers_by_size()"))
        for name, nbytes in zip(top["instruction_name"], top["size_bytes"]):
            assert f"<td>{html_escape(name)}</td>" in html and f"<td>{nbytes}</td>" in html
    else:
        assert profile == "tf_keras_cpu"
        reason = run.tool_status().set_index("tool").loc["memory_viewer", "reason"]
        assert f"No compiled modules in this run: {reason}" in text

    # Both widgets display, with or without data (they then say why).
    assert _shows_widget(_cell(nb, "xw.MemoryProfileWidget(run)"))
    assert _shows_widget(_cell(nb, "xw.MemoryViewerWidget(run)"))


# --- capture.ipynb ------------------------------------------------------------------------------


@pytest.mark.skipif(find_spec("jax") is None, reason="jax is not installed: the notebook's workload is a JAX program")
@pytest.mark.skipif(
    importlib.import_module("xprof_widgets.capture").available_client() is None,
    reason="no capture client (pip install xprof)",
)
def test_capture_walkthrough(tmp_path, monkeypatch):
    logdir = tmp_path / "captures"
    monkeypatch.setenv("XPROF_LOGDIR", str(logdir))
    nb = _execute("capture.ipynb", tmp_path)
    text = _all_text(nb)

    # Two captures (xw.capture, then the form's), written in the logdir the test gave.
    runs = xw.list_runs(logdir)
    assert len(runs) == 2
    first, second = (xw.load_run(p) for p in runs["path"])
    events = first.events()
    assert len(events) > 1000 and "PjitFunction(matmul_loop)" in set(events["name"].astype(str))
    assert f"captured run {first.name} on hosts {first.hosts}: {len(events):,} events" in text
    assert f"written to {first.path}" in text
    ov = first.overview()
    assert len(ov.steps) > 50
    assert f"{len(ov.steps)} steps captured, average step time {ov.avg_step_time_ms:.3f} ms" in text
    assert repr(first.trace()) in text
    assert (f"second capture: run {second.name}, {len(second.events()):,} events; 2 runs in the logdir") in text
    for snippet in ("xw.OverviewWidget(run)", "xw.TraceViewerWidget(run)", "xw.CaptureWidget("):
        assert _shows_widget(_cell(nb, snippet)), snippet

    # The profiled program was stopped: nothing listens on its port any more.
    port = int(re.search(r"profiler server listening on localhost:(\d+)", text).group(1))
    assert "profiler server stopped, exit code" in text
    with pytest.raises(OSError):
        socket.create_connection(("127.0.0.1", port), timeout=1).close()


# --- colab_tpu_vm.ipynb -------------------------------------------------------------------------

REPO = NOTEBOOKS.parent


def _wheel(folder):
    """A wheel of this checkout, built as the Colab notebook tells users to build one."""
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", str(REPO), "-w", str(folder)],
        check=True,
        capture_output=True,
        text=True,
    )
    (wheel,) = Path(folder).glob("xprof_widgets-*.whl")
    return wheel


def _kernel_without_xprof_widgets(root, monkeypatch):
    """A Jupyter kernel in a new virtual environment where xprof_widgets is not installed (as on
    a fresh Colab runtime), but its dependencies, jax and ipykernel are (linked from this one, so
    pip needs no network). Returns the kernel's name and the environment's site-packages."""
    env = root / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(env)], check=True)
    python = env / "bin" / "python"
    site_packages = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True
        ).strip()
    )
    ours = Path(sysconfig.get_paths()["purelib"])
    shared = root / "shared-site-packages"
    shared.mkdir()
    for entry in ours.iterdir():  # everything but this checkout's own (editable) install
        if "xprof_widgets" not in entry.name.lower():
            (shared / entry.name).symlink_to(entry)
    (site_packages / "shared.pth").write_text(f"{shared}\n")
    spec = root / "jupyter" / "kernels" / "fresh"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(
        json.dumps(
            {
                "argv": [str(python), "-m", "ipykernel_launcher", "-f", "{connection_file}"],
                "display_name": "fresh runtime",
                "language": "python",
            }
        )
    )
    monkeypatch.setenv("JUPYTER_PATH", str(root / "jupyter"))
    return "fresh", site_packages


@pytest.mark.skipif(find_spec("jax") is None, reason="jax is not installed: the notebook profiles a JAX program")
def test_colab_tpu_vm_notebook(tmp_path, monkeypatch):
    """The Colab notebook on a runtime without the package: its first cell installs the wheel
    (built here as the notebook says), then it profiles, opens and shows the profile."""
    wheel = _wheel(tmp_path / "dist")
    kernel, site_packages = _kernel_without_xprof_widgets(tmp_path, monkeypatch)
    logdir = tmp_path / "logdir"
    monkeypatch.setenv("XPROF_LOGDIR", str(logdir))
    monkeypatch.setenv("XPROF_WIDGETS_WHEEL", str(wheel))
    nb = nbformat.read(NOTEBOOKS / "colab_tpu_vm.ipynb", as_version=4)
    NotebookClient(nb, timeout=600, kernel_name=kernel, resources={"metadata": {"path": str(tmp_path)}}).execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors, [(e["ename"], e["evalue"]) for e in errors]
    text = _all_text(nb)

    # The install cell installed the wheel into the fresh environment, front end included.
    installed = site_packages / "xprof_widgets"
    assert (installed / "__init__.py").is_file() and (installed / "static" / "widget.js").is_file()
    assert next(site_packages.glob("xprof_widgets-*.dist-info/RECORD")).is_file()
    assert "backend: cpu" in text

    # jax.profiler.trace wrote one run into the logdir; the numbers printed are that run's.
    runs = xw.list_runs(logdir)
    assert len(runs) == 1
    run = xw.load_run(logdir)
    assert len(run.events()) > 1000
    assert (
        f"run {run.name}: hosts {run.hosts}, {len(run.events()):,} events; tools with data: {', '.join(run.tools)}"
    ) in text
    assert "memory_viewer" in run.tools and "trace_viewer" in run.tools
    ov = run.overview()
    assert len(ov.steps) >= 15
    assert f"{len(ov.steps)} steps, average step time {ov.avg_step_time_ms:.3f} ms on {ov.device_type}" in text
    assert any(m.startswith("jit_train_step(") for m in run.modules["module"])  # compiled inside the trace
    assert _shows_widget(_cell(nb, "xw.ProfileWidget(LOGDIR)"))


def test_colab_install_cell_is_skipped_where_installed(tmp_path):
    """Where xprof_widgets is importable (JupyterLab on a TPU VM with it installed) the install
    cell does nothing: no output, no network."""
    nb = nbformat.read(NOTEBOOKS / "colab_tpu_vm.ipynb", as_version=4)
    nb.cells = [c for c in nb.cells if c.cell_type == "code"][:1]
    NotebookClient(nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert nb.cells[0].outputs == []


def test_colab_install_cell_says_what_is_missing(tmp_path, monkeypatch):
    """Without the package and without the wheel, the cell says what to upload (not a pip traceback)."""
    kernel, _ = _kernel_without_xprof_widgets(tmp_path, monkeypatch)
    monkeypatch.setenv("XPROF_WIDGETS_WHEEL", str(tmp_path / "missing.whl"))
    nb = nbformat.read(NOTEBOOKS / "colab_tpu_vm.ipynb", as_version=4)
    nb.cells = [c for c in nb.cells if c.cell_type == "code"][:1]
    with pytest.raises(CellExecutionError) as err:
        NotebookClient(nb, timeout=120, kernel_name=kernel, resources={"metadata": {"path": str(tmp_path)}}).execute()
    assert "FileNotFoundError" in str(err.value)
    assert f"no wheel at {str(tmp_path / 'missing.whl')!r}: upload it (Files panel) or set XPROF_WIDGETS" in str(
        err.value
    )
