"""xprof-widgets in marimo: every tool on the GPU sample, and a cell that reacts to a click.

Run it with `marimo edit notebooks/marimo_tour.py` (or `marimo run` for the app view);
`pip install marimo` first. The widgets are anywidgets: marimo shows them as they are,
and `mo.ui.anywidget(widget)` makes their synced traits (`selected_op`, `window_ps`,
`selected_buffer`, ...) the value other cells react to.
"""

import marimo

__generated_with = "0.25.2"
app = marimo.App(width="full")


@app.cell
def _():
    import os

    import marimo as mo

    import xprof_widgets as xw

    # Your own profile: set XPROF_LOGDIR (a logdir, a run folder or a .xplane.pb file).
    # Without it: the GPU sample shipped in the package (JAX on 8 AMD MI300X GPUs).
    LOGDIR = os.environ.get("XPROF_LOGDIR")
    run = xw.load_run(LOGDIR) if LOGDIR else xw.sample_run("gpu")
    mo.md(
        f"# xprof-widgets in marimo\n\nRun **{run.name}**, hosts {', '.join(run.hosts)}; "
        f"tools with data: {', '.join(run.tools)}."
    )
    return mo, run, xw


@app.cell
def _(mo, run, xw):
    ops = mo.ui.anywidget(xw.OpProfileWidget(run))
    mo.vstack([mo.md("## HLO op profile\nClick a wedge or a row: the cell below follows."), ops])
    return (ops,)


@app.cell
def _(mo, ops):
    _op = ops.value.get("selected_op") or {}
    mo.md(
        f"**Selected op:** <span data-testid='marimo-selected-op'>{_op.get('name', 'none')}</span>"
        + (f" in {_op.get('program')}, {_op.get('occurrences', 0):,} occurrences" if _op else "")
    )
    return


@app.cell
def _(mo, run, xw):
    # The other tools, one section each.
    _tools = {
        "Overview": xw.OverviewWidget,
        "Trace viewer": xw.TraceViewerWidget,
        "Memory profile": xw.MemoryProfileWidget,
        "Memory viewer": xw.MemoryViewerWidget,
        "Input pipeline": xw.InputPipelineWidget,
    }
    mo.vstack([part for title, tool in _tools.items() for part in (mo.md(f"## {title}"), tool(run))])
    return


@app.cell
def _(mo, run, xw):
    mo.vstack([mo.md("## Every tool in one widget"), xw.ProfileWidget(run, background=False)])
    return


@app.cell
def _(mo, run, xw):
    mo.vstack(
        [
            mo.md("## Two runs side by side (here the CPU sample against this run)"),
            xw.CompareWidget(xw.sample_run(), run),
        ]
    )
    return


@app.cell
def _(mo, xw):
    mo.vstack(
        [
            mo.md(
                "## Capture from a running profiler server\n"
                "Start `jax.profiler.start_server(9999)` in your program, then press Capture."
            ),
            xw.CaptureWidget(address="localhost:9999", duration_ms=1000),
        ]
    )
    return


if __name__ == "__main__":
    app.run()
