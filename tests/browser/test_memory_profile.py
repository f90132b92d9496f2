"""MemoryProfileWidget in JupyterLab in headless Chromium: pick an allocator, the
peak shown equals the analysis', a click on the timeline shows that moment's
allocations, sorting works, nothing fetched from off this machine."""

import xprof_widgets as xw
from xprof_widgets.widgets.memory_profile import human_bytes

from ..conftest import PROFILES
from .harness import ARTIFACTS, save_screenshot, show_widget, tool_cell
from .test_platform import PAINTED_PIXELS_JS

LOGDIR = PROFILES / "tpu_v6e_inference"


def test_memory_profile_widget_in_lab(page, jupyter_lab):
    widget = show_widget(page, jupyter_lab, "memory_profile.ipynb", tool_cell("MemoryProfileWidget", LOGDIR))
    run = xw.load_run(LOGDIR)
    first = run.memory_profile()
    assert widget.locator("[data-testid='memory-id']").input_value() == first.memory_id
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000

    # Another allocator: the peak on the page is the analysis' peak for it.
    other = first.memory_ids[2]
    expected = run.memory_profile(memory_id=other)
    widget.locator("[data-testid='memory-id']").select_option(other)
    page.wait_for_function(  # the peak time tells allocators apart
        "v => document.querySelector(\"[data-stat='peak_time_ms']\")?.innerText.startsWith(v)",
        arg=f"{expected.peak_time_ms:,.3f} ms",
        timeout=20_000,
    )
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    assert widget.locator("[data-stat='peak_heap_bytes']").inner_text() == human_bytes(expected.peak_heap_bytes)
    assert widget.locator("[data-stat='peak_bytes_in_use']").inner_text() == human_bytes(expected.peak_bytes_in_use)
    rows_at_peak = int(widget.locator("[data-testid='breakdown']").get_attribute("data-rows"))
    assert rows_at_peak == len(expected.breakdown_at_peak)
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "memory-profile-1-peak")

    # Click early in the timeline: the table shows that moment instead.
    canvas = widget.locator("[data-figure='timeline'] canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    page.mouse.click(box["x"] + 0.6 * box["width"], box["y"] + box["height"] / 2)  # inside the snapshots' span
    title = widget.locator("[data-testid='breakdown-title']")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='breakdown-title']\")?.innerText.startsWith('Allocations live at ')"
        " && !document.querySelector(\"[data-testid='breakdown-title']\").innerText.includes('peak (')",
        timeout=20_000,
    )
    assert "all steps" in title.inner_text()
    # Sort by op name from the table header.
    widget.locator("th", has_text="Op name").click()
    page.wait_for_selector(".xw-mp th.sorted:has-text('Op name')", timeout=15_000)
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "memory-profile-2-moment")
    widget.screenshot(path=str(ARTIFACTS / "memory-profile-widget.png"))
    # Back to the peak.
    widget.locator("[data-testid='back-to-peak']").click()
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='breakdown-title']\")?.innerText.includes('at the peak')",
        timeout=15_000,
    )
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def test_gpu_memory_profile_heap_fills_the_chart(page, jupyter_lab):
    """On the GPU sample the allocator has 144 GiB free against a 460 MiB heap: the chart's
    axis spans heap and stack (free memory has its own scale, off until its legend entry is
    clicked), and what the allocator did not record reads "not recorded", with a note."""
    source = "import xprof_widgets as xw\nw = xw.MemoryProfileWidget(xw.sample_run('gpu'))\nw"
    widget = show_widget(page, jupyter_lab, "memory_profile_gpu.ipynb", source)
    expected = xw.MemoryProfileWidget(xw.sample_run("gpu"))
    sampled = expected.result.sampled_timeline()
    top_mib = (sampled["heap_bytes"] + sampled["stack_bytes"]).max() / 2**20
    # The y range the page's chart was given (read from its Bokeh document).
    end = page.evaluate("""async () => {
      const Bokeh = await Object.values(globalThis.__xprof_widgets_bokeh)[0];
      for (const view of Object.values(Bokeh.embed.index)) {
        if (!view.el.isConnected) continue;
        return view.model.y_range.end;
      }
      return null;
    }""")
    assert abs(end - top_mib * 1.05) < 1e-6 * top_mib
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    note = widget.locator("[data-testid='not-recorded-note']").inner_text()
    assert note.startswith("not recorded: the allocator event has no such stat")
    assert widget.locator("[data-testid='breakdown'] td", has_text="not recorded").count() >= 3
    assert widget.locator("[data-testid='breakdown'] td", has_text="INVALID").count() == 0
    widget.scroll_into_view_if_needed()
    widget.screenshot(path=str(ARTIFACTS / "memory-profile-gpu-heap.png"))
    assert page.off_host == [], f"requests left localhost: {page.off_host}"
