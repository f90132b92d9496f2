"""In a notebook kernel the analyses' and the widgets' modules are imported on a background
thread as soon as the package is (the first tool then finds its modules, and its widget
Bokeh and anywidget, imported); a script never imports them unasked, and
XPROF_WIDGETS_PRELOAD=0 turns the preload off."""

import json
import os
import subprocess
import sys

import pytest

CHECK = r"""
import json, sys, threading
if sys.argv[1] == "kernel":
    import ipykernel  # noqa: F401 (a notebook kernel has it imported)
import xprof_widgets
thread = next((t for t in threading.enumerate() if t.name == "xprof_widgets-preload"), None)
if thread is not None:
    thread.join(60)
print(json.dumps({
    "thread": thread is not None,
    "bokeh": "bokeh.models" in sys.modules,
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


def test_a_kernel_imports_the_widgets_in_the_background():
    got = _check("kernel")
    assert got["thread"] and got["bokeh"]
    for name in ("hlo_stats", "trace_viewer", "overview", "profile", "_bokeh"):
        assert f"xprof_widgets.widgets.{name}" in got["widgets"]
    for name in ("roofline", "core.grouping", "core.steps", "core.hlo_cost", "core.run_stats"):
        assert f"xprof_widgets.analysis.{name}" in got["analyses"]


@pytest.mark.parametrize("mode,env", [("script", {}), ("kernel", {"XPROF_WIDGETS_PRELOAD": "0"})])
def test_no_preload_in_a_script_or_when_turned_off(mode, env):
    got = _check(mode, **env)
    assert not got["thread"] and not got["bokeh"] and got["widgets"] == []
    assert "xprof_widgets.analysis.core.grouping" not in got["analyses"]
