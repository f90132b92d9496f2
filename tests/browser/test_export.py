"""Static export (`widget.to_html(path)`) opened from a file in headless Chromium, with no Jupyter
server and no kernel: the page draws the charts, shows the analysis' numbers, replays the last data
Python sent (a hovered buffer's lifespan, the trace boxes of the window a view asked for), zoom
still works, and nothing is fetched from anywhere (not even localhost: there is no server)."""

import json

import xprof_widgets as xw
from xprof_widgets.widgets import _export
from xprof_widgets.widgets.memory_profile import human_bytes

from ..conftest import PROFILES
from ..test_export import view_request
from .harness import ARTIFACTS, save_screenshot
from .test_platform import PAINTED_PIXELS_JS

# What Bokeh holds in the page: rows of each named source, and the x range of the range-tagged plot.
BOKEH_STATE_JS = """
async () => {
  const registry = globalThis.__xprof_widgets_bokeh;
  const Bokeh = await registry[Object.keys(registry)[0]];
  const out = {rows: {}};
  for (const doc of Bokeh.documents) {
    for (const model of doc.all_models) {
      if (model.name != null && model.data !== undefined && model.selected !== undefined) {
        const first = Object.values(model.data)[0];
        out.rows[model.name] = first == null ? 0 : first.length;
      }
      if (model.x_range != null && (model.tags ?? []).some((t) => String(t).startsWith("xprof:range-request:"))) {
        out.x_start = model.x_range.start;
        out.x_end = model.x_range.end;
      }
    }
  }
  return out;
}
"""


def open_export(page, path, name):
    """Open an exported page from its file; wait until it drew and replayed the recorded data."""
    requests = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(path.as_uri())
    try:
        page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
        page.wait_for_selector("html[data-xprof-replayed]", state="attached", timeout=10_000)
    except Exception:
        save_screenshot(page, f"export-{name}-failed")
        print("\n".join(page.console_lines))
        raise
    assert page.get_attribute("html", "data-xprof-replayed") != "error"
    page.wait_for_timeout(300)  # WebGL and canvas paint after the data swap
    page.requests = requests
    return page.locator(".xprof-widget").first


def assert_self_contained(page, path):
    assert page.off_host == [], f"requests left the machine: {page.off_host}"
    # Only the file itself and the blob: URLs it makes from its own text (front end, BokehJS).
    others = [u for u in page.requests if u != path.as_uri() and not u.startswith("blob:")]
    assert others == [], others
    assert not [line for line in page.console_lines if line.startswith(("error", "pageerror"))], page.console_lines


def test_memory_viewer_export(page, tmp_path):
    w = xw.MemoryViewerWidget(xw.sample_run())
    expected = w.result
    widest = expected.buffers_at_peak.sort_values("size_bytes", ascending=False).iloc[0]
    w.select_buffer(widest.instruction_name)  # the selection and its card are part of the view
    w.on_hover("by_order", int(widest.program_order_index), "buffers")  # pushes that buffer's lifespan
    path = w.to_html(tmp_path / "memory-viewer.html")
    widget = open_export(page, path, "memory-viewer")

    banner = page.locator("[data-testid='export-banner']").inner_text()
    assert banner.startswith("Static export of MemoryViewerWidget") and "no kernel" in banner
    mib = lambda n: f"{n / 2**20:,.2f} MiB"  # noqa: E731
    assert widget.locator("[data-stat='peak_heap_bytes']").inner_text() == mib(expected.peak_heap_bytes)
    assert widget.locator("[data-stat='total_allocation_bytes']").inner_text() == mib(expected.total_allocation_bytes)
    assert widget.locator("[data-testid='card-name']").inner_text() == widest.instruction_name
    # The recorded push was replayed: the lifespan (one box) is on the heap chart.
    data = widget.evaluate("el => ({...el.dataset})")
    assert (data["lastPush"], data["lastPushRows"]) == ("lifespan", "1")
    state = page.evaluate(BOKEH_STATE_JS)
    assert state["rows"]["lifespan"] == 1
    assert state["rows"]["by_order"] == len(expected.buffers_at_peak)
    assert widget.locator("canvas").count() >= 3
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    save_screenshot(page, "export-memory-viewer")
    assert_self_contained(page, path)


def test_memory_profile_export(page, tmp_path):
    run = xw.load_run(PROFILES / "tpu_v6e_inference")
    w = xw.MemoryProfileWidget(run)
    expected = w.result
    path = w.to_html(tmp_path / "memory-profile.html")
    widget = open_export(page, path, "memory-profile")
    assert widget.locator("[data-stat='peak_heap_bytes']").inner_text() == human_bytes(expected.peak_heap_bytes)
    assert widget.locator("[data-stat='peak_bytes_in_use']").inner_text() == human_bytes(expected.peak_bytes_in_use)
    assert widget.locator("[data-stat='peak_time_ms']").inner_text().startswith(f"{expected.peak_time_ms:,.3f} ms")
    rows = int(widget.locator("[data-testid='breakdown']").get_attribute("data-rows"))
    assert rows == len(expected.breakdown_at_peak)
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    # A control that would ask the kernel does nothing, and the page stays as it was.
    widget.locator("th", has_text="Op name").click()
    page.wait_for_function("() => document.querySelector('.xprof-widget').dataset.pending === '0'")
    assert int(widget.locator("[data-testid='breakdown']").get_attribute("data-rows")) == rows
    save_screenshot(page, "export-memory-profile")
    assert_self_contained(page, path)


def test_trace_viewer_export_shows_the_window_a_view_asked_for(page, tmp_path):
    w = xw.TraceViewerWidget(xw.sample_run())
    reply = view_request(w, 300.0, 320.0)  # what a view sends after a zoom, at 1000 px
    boxes = reply["content"]["boxes"]
    assert boxes > 0
    path = w.to_html(tmp_path / "trace-viewer.html")
    widget = open_export(page, path, "trace-viewer")

    # The window shown is the one recorded, and every box pushed for it is in the plot's source.
    state = page.evaluate(BOKEH_STATE_JS)
    assert (state["x_start"], state["x_end"]) == (300.0, 320.0)
    assert state["rows"]["events"] == boxes
    assert widget.locator("[data-testid='event-count']").inner_text().split()[0].replace(",", "") == str(
        w.trace.event_count
    )
    painted = widget.evaluate(PAINTED_PIXELS_JS)
    assert painted > 5000
    save_screenshot(page, "export-trace-viewer")

    # The wheel still zooms (BokehJS alone); the request it makes gets no data and the boxes stay.
    plot = widget.locator(".xprof-figure").first
    box = plot.bounding_box()
    page.mouse.move(box["x"] + box["width"] * 0.5, box["y"] + box["height"] * 0.5)
    page.mouse.wheel(0, -240)
    page.wait_for_function(
        "() => Number(document.querySelector('.xprof-widget').dataset.replies ?? 0) >= 2", timeout=10_000
    )
    page.wait_for_function("() => document.querySelector('.xprof-widget').dataset.pending === '0'")
    after = page.evaluate(BOKEH_STATE_JS)
    assert after["x_end"] - after["x_start"] < 20.0
    assert after["rows"]["events"] == boxes
    result = {"boxes": boxes, "painted_pixels": painted, "page_bytes": path.stat().st_size}
    (ARTIFACTS / "export-trace-viewer.json").write_text(json.dumps(result, indent=1))
    assert_self_contained(page, path)


def test_base64_blocks_load_too(page, tmp_path, monkeypatch):
    # A front end or bundle that holds "</script" (say) goes into the page as base64: it still loads.
    monkeypatch.setattr(_export, "_UNSAFE_IN_SCRIPT", _export.re.compile(r""))
    w = xw.OverviewWidget(xw.sample_run())
    path = w.to_html(tmp_path / "overview.html")
    assert 'id="xprof-export-bokeh" data-encoding="base64"' in path.read_text()
    widget = open_export(page, path, "overview-base64")
    assert widget.evaluate(PAINTED_PIXELS_JS) > 1000
    assert_self_contained(page, path)


def test_profile_widget_export_switches_tools_offline(page, tmp_path):
    """ProfileWidget.to_html puts every tool of the run in one page: the first (the tool shown)
    is drawn on opening, and choosing another in the banner's menu draws it, with its numbers,
    from the page alone (no kernel, nothing fetched); going back shows the first as it was."""
    w = xw.ProfileWidget(PROFILES / "tf_keras_cpu")
    run = w.wait()
    path = w.to_html(tmp_path / "profile.html")
    widget = open_export(page, path, "profile")
    menu = page.locator("[data-testid='export-tool']")
    labels = menu.locator("option").all_inner_texts()
    from xprof_widgets.widgets.profile import TOOLS

    assert labels == [TOOLS[n].label for n in w.tools] and labels[0] == "Overview"
    overview = run.overview()
    assert widget.locator("[data-stat='host_count']").inner_text() == str(overview.host_count)

    menu.select_option(label="Memory profile")
    index = labels.index("Memory profile")
    page.wait_for_selector(f".xprof-export-view[data-view='{index}'] .xprof-widget[data-ready='1']", timeout=30_000)
    page.wait_for_function(f"() => document.documentElement.dataset.xprofShown === '{index}'")
    page.wait_for_timeout(300)
    memory = page.locator(f".xprof-export-view[data-view='{index}'] .xprof-widget")
    expected = run.memory_profile()
    assert memory.locator("[data-stat='peak_heap_bytes']").inner_text() == human_bytes(expected.peak_heap_bytes)
    assert memory.evaluate(PAINTED_PIXELS_JS) > 5000
    assert not page.locator(".xprof-export-view[data-view='0']").is_visible()
    save_screenshot(page, "export-profile-widget-memory")

    menu.select_option(label="Overview")
    page.wait_for_function("() => document.documentElement.dataset.xprofShown === '0'")
    assert widget.is_visible() and not memory.is_visible()
    assert widget.locator("[data-stat='host_count']").inner_text() == str(overview.host_count)
    assert_self_contained(page, path)
