"""TraceViewerWidget in JupyterLab in headless Chromium, on jax_transformer_cpu tiled 12x (9.7 M events)
when ../shared/tools is there (else the untiled profile): the wheel zooms and new boxes arrive, the time from
each wheel step to the frame that shows its data is recorded (tests/artifacts/trace-zoom.json), a search for
an XLA op selects it and shows its op details card, a click on another op's box on the canvas shows that op's
details and card; nothing fetched from off this machine.

XPROF_TRACE_ZOOM_TIMES=60 runs the same test on the profile tiled 60x (49 M events, 0.9 GB; about 13 GB of
memory in all, so not in CI): the times go to tests/artifacts/trace-zoom-60x.json."""

import json
import os
import statistics
import subprocess
import sys
import time

import pytest

from ..conftest import PROFILES, TOOLS
from .harness import ARTIFACTS, finish, save_screenshot, show_widget, tool_cell

TOOL = TOOLS / "tile_xplane.py"
TIMES = int(os.environ.get("XPROF_TRACE_ZOOM_TIMES", "12"))
# jax_transformer_cpu's one file (found when the test runs: the corpus may be missing).
SOURCE = PROFILES / "jax_transformer_cpu" / "plugins" / "profile" / "2026_11_22_03_13_20" / "vm.xplane.pb"


# In the last widget's timeline: the widest real (not merged) box on the outlined match's row with
# another name, and the page point at its middle (BokehJS's own scales, so no layout is assumed).
PICK_ANOTHER_OP_JS = """
async () => {
  const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
  const views = [...Object.values(Bokeh.embed.index)];
  const view = views.filter((v) => (v.model.tags ?? []).some((t) => String(t).startsWith("xprof:range")))
    .filter((v) => v.el.isConnected).pop();
  const source = [...view.model.document.all_models].find((m) => m.name === "events" && m.data !== undefined);
  const d = source.data;
  const match = d.lw.findIndex((w) => w > 0);
  if (match < 0) return null;
  let best = -1;
  for (let i = 0; i < d.id.length; i++) {
    if (d.id[i] < 0 || d.y[i] !== d.y[match] || d.name[i] === d.name[match]) continue;
    if (best < 0 || d.x1[i] - d.x0[i] > d.x1[best] - d.x0[best]) best = i;
  }
  if (best < 0) return null;
  const frame = view.frame;
  const sx = frame.x_scale.compute((d.x0[best] + d.x1[best]) / 2);
  const sy = frame.y_scale.compute(d.y[best]);
  if (Math.abs(frame.x_scale.compute(d.x1[best]) - frame.x_scale.compute(d.x0[best])) < 6) return null;
  const rect = view.canvas_view.el.getBoundingClientRect();
  return { name: String(d.name[best]), x: rect.left + sx, y: rect.top + sy };
}
"""


@pytest.fixture(scope="module")
def big_profile(tmp_path_factory):
    if not TOOL.exists():
        return SOURCE, 1
    out = tmp_path_factory.mktemp("tiled") / "plugins" / "profile" / "tiled" / "vm.xplane.pb"
    out.parent.mkdir(parents=True)
    subprocess.run(
        [sys.executable, str(TOOL), str(SOURCE), str(out), "--times", str(TIMES)], check=True, capture_output=True
    )
    return out, TIMES


def test_trace_viewer_zoom_and_op_card(page, jupyter_lab, big_profile):
    path, times = big_profile
    widget = show_widget(
        page,
        jupyter_lab,
        "trace.ipynb",
        tool_cell("TraceViewerWidget", path),
        timeout_ms=max(120_000, 4_000 * times),
    )
    count = widget.locator("[data-testid='event-count']").inner_text()
    import xprof_widgets as xw

    expected = xw.load_run(path).trace().event_count  # the file's events as XProf shows them
    assert int(count.split()[0].replace(",", "")) == expected
    plot = widget.locator(".xprof-figure").first
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.4, box["y"] + box["height"] * 0.5)
    draws, phases = [], []
    for _step in range(8):
        before = int(page.evaluate("() => Number(document.querySelector('.xprof-widget').dataset.drawnReplies ?? 0)"))
        page.mouse.wheel(0, -240)  # zoom in
        page.wait_for_function(
            "n => Number(document.querySelector('.xprof-widget').dataset.drawnReplies ?? 0) > n",
            arg=before,
            timeout=30_000,
        )
        timing = page.evaluate(
            "() => { const d = document.querySelector('.xprof-widget').dataset;"
            " return [d.lastDrawMs, d.lastReplyMs, d.lastApplyMs, d.lastPushRows]; }"
        )
        draws.append(float(timing[0]))
        phases.append({"reply_ms": float(timing[1]), "apply_ms": float(timing[2]), "boxes": int(timing[3])})
        rows = int(page.evaluate("() => document.querySelector('.xprof-widget').dataset.lastPushRows"))
        assert rows > 0  # new boxes (and labels) arrived for the zoomed window
    result = {
        "events": expected,
        "wheel_steps": len(draws),
        "draw_ms": draws,
        "median_ms": statistics.median(draws),
        "median_reply_ms": statistics.median(p["reply_ms"] for p in phases),
        "median_apply_ms": statistics.median(p["apply_ms"] for p in phases),
        "steps": phases,
    }
    ARTIFACTS.mkdir(parents=True, exist_ok=True)  # (this test may run first)
    (ARTIFACTS / ("trace-zoom.json" if times <= 12 else f"trace-zoom-{times}x.json")).write_text(
        json.dumps(result, indent=1)
    )
    print("trace viewer zoom, wheel step to drawn frame:", result)
    save_screenshot(page, "trace-viewer-zoomed")

    # Search an XLA op: the first match is selected and the op's details card shows (on the
    # untiled profile: the card needs the op profile, whose CPU analysis of 9.7 M events takes long).
    show_widget(
        page,
        jupyter_lab,
        "trace-small.ipynb",
        f"import xprof_widgets as xw\nw = xw.TraceViewerWidget({str(SOURCE.parent.parent.parent.parent)!r})\nw",
    )
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

    # Click another op on the canvas: its details and its op card replace the match's.
    widget.scroll_into_view_if_needed()
    # The match's window arrives in its own reply after the card: poll until its boxes are drawn.
    target = None
    deadline = time.monotonic() + 30
    while target is None and time.monotonic() < deadline:
        target = page.evaluate(PICK_ANOTHER_OP_JS)
        if target is None:
            page.wait_for_timeout(250)
    assert target is not None, "no other op box wide enough to click next to the match"
    page.mouse.click(target["x"], target["y"])
    page.wait_for_function(
        "name => document.querySelectorAll('.xprof-widget')[document.querySelectorAll('.xprof-widget').length - 1]"
        ".querySelector(\"[data-testid='event-name']\")?.innerText === name",
        arg=target["name"],
        timeout=30_000,
    )
    widget.locator("[data-testid='op-card']").wait_for(timeout=30_000)
    assert widget.locator("[data-testid='op-card-name']").inner_text().startswith(target["name"])
    finish(page, widget, "trace-viewer.png")


# The x range of the last connected range-tagged plot (the trace viewer's timeline).
X_RANGE_JS = """
async () => {
  const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
  const view = [...Object.values(Bokeh.embed.index)]
    .filter((v) => v.el.isConnected && (v.model.tags ?? []).some((t) => String(t).startsWith("xprof:range")))
    .pop();
  return view == null ? null : [view.model.x_range.start, view.model.x_range.end];
}
"""


def test_trace_viewer_keys_zoom_and_pan(page, jupyter_lab):
    """XProf's keys once the timeline has been clicked: W zooms in by a fifth around the
    middle, S out, A and D pan by a fifth; each new window's boxes arrive; JupyterLab's own
    shortcuts for those keys (A: insert a cell, D D: delete it) do not fire."""
    widget = show_widget(
        page,
        jupyter_lab,
        "trace-keys.ipynb",
        "import xprof_widgets as xw\nw = xw.TraceViewerWidget(xw.sample_run())\nw",
    )
    cells = page.locator(".jp-Notebook .jp-Cell").count()
    plot = widget.locator(".xprof-figure").first
    box = plot.bounding_box()
    page.mouse.click(box["x"] + box["width"] * 0.5, box["y"] + box["height"] - 5)  # focus, on no box
    start, end = page.evaluate(X_RANGE_JS)

    def press(key):
        before = int(page.evaluate("() => Number(document.querySelector('.xprof-widget').dataset.drawnReplies ?? 0)"))
        page.keyboard.press(key)
        page.wait_for_function(
            "n => Number(document.querySelector('.xprof-widget').dataset.drawnReplies ?? 0) > n",
            arg=before,
            timeout=30_000,
        )
        return page.evaluate(X_RANGE_JS)

    width, middle = end - start, (start + end) / 2
    s, e = press("w")
    assert e - s == pytest.approx(0.8 * width) and (s + e) / 2 == pytest.approx(middle)
    s2, e2 = press("d")
    assert s2 - s == pytest.approx(0.2 * (e - s)) and e2 - s2 == pytest.approx(e - s)
    s3, e3 = press("a")
    assert (s3, e3) == (pytest.approx(s), pytest.approx(e))
    s4, e4 = press("s")
    assert e4 - s4 == pytest.approx(width)
    page.keyboard.press("d")  # JupyterLab's "D, D" would delete the cell
    page.wait_for_timeout(300)
    assert page.locator(".jp-Notebook .jp-Cell").count() == cells
    finish(page, widget, "trace-viewer-keys.png")

    # Box select over the lower rows (the python thread): XProf's selection table, a row per
    # name with occurrences, wall and self time; the names are the python thread's.
    widget.locator(".bk-tool-icon-box-select").first.click()
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.80)
    page.mouse.down()
    page.mouse.move(box["x"] + box["width"] * 0.7, box["y"] + box["height"] * 0.95, steps=8)
    page.mouse.up()
    table = widget.locator("[data-testid='selection-table']")
    table.wait_for(timeout=30_000)
    rows = table.locator("tr").all_inner_texts()[1:]
    assert rows and all(len(r.split("\t")) == 5 for r in rows)
    import xprof_widgets as xw

    trace = xw.sample_run().trace()
    python = trace.events(int(trace.tracks.index[trace.tracks["name"] == "python"][0]))
    assert {r.split("\t")[0] for r in rows} <= set(python["name"].astype(str))
    widget.locator("[data-testid='measure']").scroll_into_view_if_needed()
    save_screenshot(page, "trace-viewer-selection-table")
    # A row with several events shows them one by one: each click selects the next.
    many = [k for k, r in enumerate(rows) if int(r.split("\t")[1].replace(",", "")) >= 2]
    assert many, rows
    name = rows[many[0]].split("\t")[0]
    row = table.locator("[data-testid='selection-row']").nth(many[0])
    for k in (1, 2):
        row.click()
        at = table.locator("[data-testid='cycle-at']")
        page.wait_for_function(
            "t => document.querySelector(\"[data-testid='cycle-at']\")?.innerText.startsWith(t)",
            arg=f"({k} of ",
            timeout=30_000,
        )
        assert widget.locator("[data-testid='event-name']").inner_text() == name
        row = table.locator("[data-testid='selection-row']").nth(many[0])
    assert at.count() == 1
    save_screenshot(page, "trace-viewer-selection-cycle")

    # The thread filter: only the python thread is drawn.
    threads = widget.locator("[data-testid='thread-filter']")
    threads.fill("python")
    threads.press("Enter")
    total = len(trace.tracks)
    page.wait_for_function(
        "t => document.querySelector(\"[data-testid='thread-count']\")?.innerText === t",
        arg=f"1 of {total} threads",
        timeout=30_000,
    )


# JS: `view`, the page's last connected timeline (a figure that asks for its ranges).
_TIMELINE_VIEW = """
  const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
  const view = [...Object.values(Bokeh.embed.index)]
    .filter((v) => v.el.isConnected && (v.model.tags ?? []).some((t) => String(t).startsWith("xprof:range")))
    .pop();
"""

# The last connected timeline: move its x range (ms), the page then asks for that window.
SET_X_RANGE_JS = (
    """
async ([start, end]) => {"""
    + _TIMELINE_VIEW
    + """  view.model.x_range.setv({ start, end });
}
"""
)

# The page point at the middle of the drawn box of event `id`, whether it is among the rows in
# view (`inFrame`), and how many arrows the named source (`event_flows`: the selected event's)
# holds; null while the box is not drawn.
BOX_AND_ARROWS_JS = (
    """
async ([id, arrows]) => {"""
    + _TIMELINE_VIEW
    + """  const models = [...view.model.document.all_models];
  const d = models.find((m) => m.name === "events" && m.data !== undefined).data;
  const a = models.find((m) => m.name === arrows && m.data !== undefined).data;
  const i = [...d.id].findIndex((v) => v === id);
  if (i < 0) return null;
  const frame = view.frame;
  const rect = view.canvas_view.el.getBoundingClientRect();
  const x = rect.left + frame.x_scale.compute((d.x0[i] + d.x1[i]) / 2);
  const y = frame.y_scale.compute(d.y[i]);
  const inFrame = y >= frame.bbox.top && y <= frame.bbox.bottom;
  return { x, y: rect.top + y, inFrame, arrows: (a.x0 ?? a.x).length, note: [...(a.text ?? [])] };
}
"""
)


def _poll(page, js, args, test, what, timeout_s=30):
    """`page.evaluate(js, args)` until `test` holds for its value (returned); Playwright's
    `wait_for_function` cannot wait on an async function (its promise counts as true at once)."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = page.evaluate(js, args)
        if test(value):
            return value
        assert time.monotonic() < deadline, f"{what}: still {value!r} after {timeout_s} s"
        page.wait_for_timeout(250)


def test_trace_viewer_flows(page, jupyter_lab):
    """JAX on an H200 (tests/data/profiles): a tap on a kernel shows the host launch it came
    from in the details panel ("Incoming flow") and draws its arrow; the launch's link selects
    the launch; "Flows" draws the view's arrows and says how many."""
    import xprof_widgets as xw

    path = PROFILES / "nvidia_jax_mlp_h200"
    trace = xw.load_run(path).trace()
    f = trace.flows()
    gpu = trace.tracks["section"].str.startswith("/device:GPU").to_numpy()
    launches = f[(f["category"] == "gpu_launch") & gpu[f["to_track"]] & ~gpu[f["from_track"]]]
    # The connection whose kernel is widest against the span from its launch to its end: a box to click.
    share = (launches["to_end_ps"] - launches["to_start_ps"]) / (launches["to_end_ps"] - launches["from_start_ps"])
    r = launches.loc[share.idxmax()]
    span = int(r["to_end_ps"] - r["from_start_ps"])
    start, end = (int(r["from_start_ps"]) - span // 5) / 1e9, (int(r["to_end_ps"]) + span // 5) / 1e9
    kernel = int(r["to_track"]) * 2**32 + int(r["to_index"])
    widget = show_widget(page, jupyter_lab, "trace-flows.ipynb", tool_cell("TraceViewerWidget", path))
    page.evaluate(SET_X_RANGE_JS, [start, end])
    target, deadline = None, time.monotonic() + 30
    while target is None and time.monotonic() < deadline:
        target = page.evaluate(BOX_AND_ARROWS_JS, [kernel, "event_flows"])
        if target is None:
            page.wait_for_timeout(250)
    assert target is not None, "the kernel's box was not drawn"
    page.mouse.click(target["x"], target["y"])
    incoming = widget.locator("[data-testid='flow-in']")
    incoming.wait_for(timeout=30_000)
    assert widget.locator("[data-testid='event-name']").inner_text() == str(r["to_name"])
    text = incoming.inner_text()
    assert "Incoming flow (gpu_launch)" in text and str(r["from_name"]) in text
    _poll(page, BOX_AND_ARROWS_JS, [kernel, "event_flows"], lambda v: v and v["arrows"] == 1, "the kernel's arrow")
    save_screenshot(page, "trace-viewer-flow")
    # The launch's link selects it: its outgoing flow is the kernel; the view scrolls down to
    # the launch's row (a host thread under the GPU's rows, out of the first view).
    launch = int(r["from_track"]) * 2**32 + int(r["from_index"])
    assert not (page.evaluate(BOX_AND_ARROWS_JS, [launch, "event_flows"]) or {}).get("inFrame")
    incoming.locator(".xw-flow").click()
    widget.locator("[data-testid='flow-out']").wait_for(timeout=30_000)
    assert widget.locator("[data-testid='event-name']").inner_text() == str(r["from_name"])
    _poll(page, BOX_AND_ARROWS_JS, [launch, "event_flows"], lambda v: v and v["inFrame"], "the launch in view")
    save_screenshot(page, "trace-viewer-flow-launch")
    # "Flows": the view's arrows, and how many.
    widget.locator("[data-testid='flows-toggle']").check()
    shown = _poll(page, BOX_AND_ARROWS_JS, [kernel, "flow_note"], lambda v: v and v["note"], "the flows note")["note"][
        0
    ]
    assert shown.endswith("flows in view") or "drawn" in shown
    finish(page, widget, "trace-viewer-flows.png")


# The counters source of the last timeline: its series' names and how many points each has.
COUNTERS_JS = (
    """
async () => {"""
    + _TIMELINE_VIEW
    + """  const c = [...view.model.document.all_models].find((m) => m.name === "counters" && m.data !== undefined);
  return c == null ? null : { names: [...c.data.name], points: [...c.data.xs].map((x) => x.length) };
}
"""
)


def test_trace_viewer_counters(page, jupyter_lab, tmp_path):
    """Counter tracks drawn as lines at the top of their section (XProf's "C" series): the
    H200 profile with a `_counters_` line added to its GPU plane (no profile of the corpus has
    one), an "HBM in use" counter of 600 samples over the profile, a sawtooth."""
    from xprof_widgets.analysis import trace as T
    from xprof_widgets.io import schema

    source = next((PROFILES / "nvidia_jax_mlp_no_graphs_h200").glob("plugins/profile/*/*.xplane.pb"))
    space = schema.XSpace.FromString(source.read_bytes())
    gpu = next(p for p in space.planes if p.name.startswith("/device:GPU"))
    first = min(line.timestamp_ns for line in gpu.lines if line.events)
    span_ps = max(
        (line.timestamp_ns - first) * 1000 + e.offset_ps + e.duration_ps for line in gpu.lines for e in line.events
    )
    event_id = max(gpu.event_metadata) + 1
    stat_id = max(gpu.stat_metadata) + 1
    gpu.event_metadata[event_id].id = event_id
    gpu.event_metadata[event_id].name = "HBM in use (bytes)"
    gpu.stat_metadata[stat_id].id = stat_id
    gpu.stat_metadata[stat_id].name = "value"
    line = gpu.lines.add(id=10**6, display_id=10**6, name=T.COUNTER_LINE, timestamp_ns=first)
    samples = 600
    for i in range(samples):
        e = line.events.add(metadata_id=event_id, offset_ps=i * (span_ps // samples))
        e.stats.add(metadata_id=stat_id, int64_value=2**30 + (i % 50) * 2**24)
    path = tmp_path / "plugins" / "profile" / "counters" / "vm.xplane.pb"
    path.parent.mkdir(parents=True)
    path.write_bytes(space.SerializeToString())

    widget = show_widget(page, jupyter_lab, "trace-counters.ipynb", tool_cell("TraceViewerWidget", path))
    drawn = page.evaluate(COUNTERS_JS)
    assert drawn["names"] == [f"HBM in use (bytes) ({gpu.name})"]
    assert drawn["points"][0] == 2 * samples  # a step per sample (under COUNTER_POINTS: all kept)
    # Its label on the axis, under the section's header and above the GPU's streams.
    assert "HBM in use (bytes)" in widget.inner_text() or page.locator("canvas").count() > 0
    finish(page, widget, "trace-viewer-counters.png")
