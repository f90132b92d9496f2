"""In a notebook kernel the analyses' and the widgets' modules are imported ahead, once the
kernel is idle after the cell that imported the package (the first tool then finds its
modules, and its widget Bokeh and anywidget, imported), on the kernel's main thread: never
on a thread beside the user's, since Bokeh's imports are not thread-safe (CI once saw
"failed to validate WebDataSource.selection_policy" when a preload thread and the cell
both imported Bokeh). A script never imports them unasked, and XPROF_WIDGETS_PRELOAD=0
turns the preload off."""

import json
import os
import shutil
import subprocess
import sys

import pytest

CHECK = r"""
import json, sys, threading
if sys.argv[1] == "kernel":
    import ipykernel  # noqa: F401 (a notebook kernel has it imported)
import xprof_widgets
print(json.dumps({
    "threads": [t.name for t in threading.enumerate() if t is not threading.main_thread()],
    "bokeh": "bokeh.models" in sys.modules,
    "widgets": sorted(m for m in sys.modules if m.startswith("xprof_widgets.widgets.")),
    "analyses": sorted(m for m in sys.modules if m.startswith("xprof_widgets.analysis.")),
}))
"""

# Every import of Bokeh's or of our widgets' modules, with the thread that made it.
HOOK = """
import sys, threading
IMPORTS = []
def _hook(event, args):
    if event == "import" and str(args[0]).startswith(("bokeh", "xprof_widgets.widgets")):
        IMPORTS.append((threading.current_thread().name, str(args[0])))
sys.addaudithook(_hook)
"""

# A cell that awaits (the kernel's loop runs meanwhile) until the preload has imported
# the widgets' modules, then says what was imported where.
WAIT = """
import asyncio, json, sys, threading
for _ in range(1200):
    if "xprof_widgets.widgets.memory_viewer" in sys.modules and "bokeh.embed" in sys.modules:
        break
    await asyncio.sleep(0.05)
print(json.dumps({
    "off_main": sorted({m for t, m in IMPORTS if t != "MainThread"}),
    "on_main": len(IMPORTS),
    "threads": [t.name for t in threading.enumerate() if t is not threading.main_thread()],
    "widgets": sorted(m for m in sys.modules if m.startswith("xprof_widgets.widgets.")),
    "analyses": sorted(m for m in sys.modules if m.startswith("xprof_widgets.analysis.")),
}))
"""


def _check(mode, **env):
    out = subprocess.run(
        [sys.executable, "-c", CHECK, mode],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, **env},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def _in_kernel(cells, **env):
    """Run `cells` one after another in a fresh IPython kernel; the last line each printed."""
    pytest.importorskip("ipykernel")
    from jupyter_client.manager import start_new_kernel

    manager, client = start_new_kernel(kernel_name="python3", env={**os.environ, **env})
    try:
        printed = []
        for code in cells:
            reply = client.execute_interactive(code, timeout=120, output_hook=lambda m, out=printed: out.append(m))
            errors = [m["content"] for m in printed if m["msg_type"] == "error"]
            assert reply["content"]["status"] == "ok", errors
        streams = "".join(m["content"]["text"] for m in printed if m["msg_type"] == "stream")
        return json.loads(streams.strip().splitlines()[-1])
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=True)


def test_a_kernel_imports_the_widgets_ahead_on_its_main_thread():
    got = _in_kernel([HOOK, "import xprof_widgets as xw", WAIT])
    assert got["off_main"] == [] and got["on_main"] > 50
    assert not any("preload" in name for name in got["threads"])
    for name in ("hlo_stats", "trace_viewer", "overview", "profile", "_bokeh", "memory_viewer"):
        assert f"xprof_widgets.widgets.{name}" in got["widgets"]
    for name in ("roofline", "core.grouping", "core.steps", "core.hlo_cost", "core.run_stats"):
        assert f"xprof_widgets.analysis.{name}" in got["analyses"]


@pytest.mark.parametrize(
    ("tool", "widget", "figures"),
    [
        ("trace_viewer", "TraceViewerWidget", ["timeline"]),
        ("memory_viewer", "MemoryViewerWidget", ["allocations", "buffers", "heap"]),
    ],
)
def test_a_profile_widget_reading_in_the_background_imports_nothing_of_bokeh_there(tmp_path, tool, widget, figures):
    """ProfileWidget reads a run, and builds its tool's widget, on a thread of its own: the
    widgets' modules and Bokeh's models are imported before, on the caller's thread (here
    with the preload off, so that nothing else imported them). The trace viewer's chart is
    filled from a template, the memory viewer's charts are built by Bokeh."""
    import xprof_widgets as xw

    run = xw.sample_run()
    shutil.copytree(run.path, tmp_path / "plugins" / "profile" / run.name)
    make = f"""
import json, xprof_widgets as xw
w = xw.ProfileWidget({str(tmp_path)!r}, tool={tool!r}, background=True)
w.wait(120)
print(json.dumps({{
    "built": type(w.current).__name__,
    "figures": sorted(w.current.figures),
    "off_main": sorted({{m for t, m in IMPORTS if t != "MainThread"}}),
}}))
"""
    got = _in_kernel([HOOK, make], XPROF_WIDGETS_PRELOAD="0")
    assert got == {"built": widget, "figures": figures, "off_main": []}


def test_no_preload_in_a_kernel_when_turned_off():
    """XPROF_WIDGETS_PRELOAD=0: the kernel's loop runs (a cell awaits a second) and imports
    nothing ahead."""
    idle = """
import asyncio, json, sys
await asyncio.sleep(1)
print(json.dumps({
    "bokeh": "bokeh.models" in sys.modules,
    "widgets": sorted(m for m in sys.modules if m.startswith("xprof_widgets.widgets.")),
    "analyses": sorted(m for m in sys.modules if m.startswith("xprof_widgets.analysis.")),
}))
"""
    got = _in_kernel(["import xprof_widgets", idle], XPROF_WIDGETS_PRELOAD="0")
    assert not got["bokeh"] and got["widgets"] == []
    assert "xprof_widgets.analysis.core.grouping" not in got["analyses"]


@pytest.mark.parametrize("mode", ["script", "kernel"])
def test_no_preload_in_a_script_without_a_kernel_loop(mode):
    """A script (even one that imported ipykernel, but runs no kernel's loop) imports
    nothing ahead and starts no thread."""
    got = _check(mode)
    assert got["threads"] == [] and not got["bokeh"] and got["widgets"] == []
    assert "xprof_widgets.analysis.core.grouping" not in got["analyses"]


TEMPLATED = r"""
import json, sys
import xprof_widgets as xw
for module in sorted(set(xw._WIDGETS.values())):  # every widget module
    __import__("xprof_widgets" + module)
drawn = {}
for sample, names in (
    ("cpu", ["TraceViewerWidget", "HloStatsWidget", "OpProfileWidget"]),
    ("gpu", ["FrameworkOpStatsWidget", "KernelStatsWidget", "RooflineWidget", "MemoryProfileWidget"]),
):
    run = xw.sample_run(sample)
    for name in names:
        drawn[name] = sorted(getattr(xw, name)(run).figures)
print(json.dumps({"drawn": drawn, "models": sorted(m for m in sys.modules if m.startswith(("bokeh.models", "bokeh.plotting", "bokeh.document")))}))
"""


def test_charts_filled_from_templates_import_no_bokeh_models():
    """Bokeh's models (0.4 s of a kernel's first widget) are imported only where a chart is
    built by Bokeh: no widget module imports them, and the charts filled from a template
    draw without them."""
    out = subprocess.run([sys.executable, "-c", TEMPLATED], check=True, capture_output=True, text=True).stdout
    got = json.loads(out.strip().splitlines()[-1])
    assert got["drawn"] == {
        "TraceViewerWidget": ["timeline"],
        "HloStatsWidget": ["categories", "ops", "rates"],
        "OpProfileWidget": ["sunburst"],
        "FrameworkOpStatsWidget": ["device_types", "host_types"],
        "KernelStatsWidget": ["kernels"],
        "RooflineWidget": ["roofline"],
        "MemoryProfileWidget": ["timeline"],
    }
    assert got["models"] == []
