"""TraceViewerWidget in JupyterLab in headless Chromium, on jax_transformer_cpu tiled 12x (9.7 M events)
when ../shared/tools is there (else the untiled profile): the wheel zooms and new boxes arrive, the time from
each wheel step to the frame that shows its data is recorded (tests/artifacts/trace-zoom.json), a search for
an XLA op selects it and shows its op details card; nothing fetched from off this machine."""

import json
import statistics
import subprocess
import sys

import pytest

from ..conftest import PROFILES
from .harness import ARTIFACTS, save_screenshot, show_widget

TOOL = PROFILES.parent / "tools" / "tile_xplane.py"
SOURCE = next((PROFILES / "jax_transformer_cpu" / "plugins" / "profile").glob("*/*.xplane.pb"))


@pytest.fixture(scope="module")
def big_profile(tmp_path_factory):
    if not TOOL.exists():
        return SOURCE, 1
    out = tmp_path_factory.mktemp("tiled") / "plugins" / "profile" / "tiled" / "vm.xplane.pb"
    out.parent.mkdir(parents=True)
    subprocess.run([sys.executable, str(TOOL), str(SOURCE), str(out), "--times", "12"], check=True,
                   capture_output=True)
    return out, 12


def test_trace_viewer_zoom_and_op_card(page, jupyter_lab, big_profile):
    path, times = big_profile
    widget = show_widget(page, jupyter_lab, "trace.ipynb",
                         f"import xprof_widgets as xw\nw = xw.TraceViewerWidget({str(path)!r})\nw")
    count = widget.locator("[data-testid='event-count']").inner_text()
    import xprof_widgets as xw

    expected = xw.load_run(path).trace().event_count  # the file's events as XProf shows them
    assert int(count.split()[0].replace(",", "")) == expected
    plot = widget.locator(".xprof-figure").first
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
    draws, phases = [], []
    for step in range(8):
        before = int(page.evaluate("() => Number(document.querySelector('.xprof-widget').dataset.drawnReplies ?? 0)"))
        page.mouse.wheel(0, -240)  # zoom in
        page.wait_for_function(
            "n => Number(document.querySelector('.xprof-widget').dataset.drawnReplies ?? 0) > n", arg=before,
            timeout=30_000)
        timing = page.evaluate("() => { const d = document.querySelector('.xprof-widget').dataset;"
                               " return [d.lastDrawMs, d.lastReplyMs, d.lastApplyMs, d.lastPushRows]; }")
        draws.append(float(timing[0]))
        phases.append({"reply_ms": float(timing[1]), "apply_ms": float(timing[2]), "boxes": int(timing[3])})
        rows = int(page.evaluate("() => document.querySelector('.xprof-widget').dataset.lastPushRows"))
        assert rows > 0  # new boxes (and labels) arrived for the zoomed window
    result = {"events": expected, "wheel_steps": len(draws), "draw_ms": draws,
              "median_ms": statistics.median(draws),
              "median_reply_ms": statistics.median(p["reply_ms"] for p in phases),
              "median_apply_ms": statistics.median(p["apply_ms"] for p in phases), "steps": phases}
    (ARTIFACTS / "trace-zoom.json").write_text(json.dumps(result, indent=1))
    print("trace viewer zoom, wheel step to drawn frame:", result)
    save_screenshot(page, "trace-viewer-zoomed")

    # Search an XLA op: the first match is selected and the op's details card shows (on the
    # untiled profile: the card needs the op profile, whose CPU analysis of 9.7 M events takes long).
    show_widget(page, jupyter_lab, "trace-small.ipynb",
                f"import xprof_widgets as xw\nw = xw.TraceViewerWidget({str(SOURCE.parent.parent.parent.parent)!r})\nw")
    widget = page.locator(".xprof-widget").last  # the first notebook's tab stays open behind this one
    search = widget.locator("[data-testid='search']")
    search.fill("dot.")
    search.press("Enter")
    try:
        widget.locator("[data-testid='op-card']").wait_for(timeout=90_000)
    except Exception:
        save_screenshot(page, "trace-viewer-search-failed")
        print("WIDGET TEXT:", widget.inner_text()[:2000])
        raise
    assert "matches" in widget.locator("[data-testid='search-count']").inner_text()
    assert widget.locator("[data-testid='event-name']").inner_text().startswith("dot.")
    widget.scroll_into_view_if_needed()
    widget.screenshot(path=str(ARTIFACTS / "trace-viewer.png"))
    assert page.off_host == [], f"requests left localhost: {page.off_host}"
