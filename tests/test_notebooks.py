"""The notebooks run top to bottom in a real kernel (nbclient)."""

from pathlib import Path

import nbformat
from nbclient import NotebookClient

import xprof_widgets as xw

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
    for name in ("OpProfileWidget(", "OverviewWidget("):
        cell = next(c for c in nb.cells if name in c.source)
        assert "application/vnd.jupyter.widget-view+json" in {k for o in cell.outputs for k in o.get("data", {})}
