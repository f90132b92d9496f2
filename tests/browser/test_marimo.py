"""Every widget in marimo: notebooks/marimo_tour.py served by a real `marimo run` server,
driven in headless Chromium. Each tool draws and shows the analysis' numbers; clicks,
requests and pushes reach Python and come back (op card, search, module switch, the tool
selector of ProfileWidget, the capture form); a marimo cell reacts to the op clicked.
Screenshot: tests/artifacts/marimo-tour.png."""

import sys
import urllib.error
import urllib.request
from importlib.util import find_spec

import pytest

import xprof_widgets as xw

from ..conftest import free_port
from .harness import ARTIFACTS, REPO_ROOT, repo_env, save_screenshot, serve

pytestmark = pytest.mark.skipif(find_spec("marimo") is None, reason="marimo is not installed (pip install marimo)")

NOTEBOOK = REPO_ROOT / "notebooks" / "marimo_tour.py"
WIDGETS = 9  # the tour's widgets, in its order
OPS, OVERVIEW, TRACE, MEMORY_PROFILE, MEMORY_VIEWER, INPUT, PROFILE, COMPARE, CAPTURE = range(WIDGETS)


@pytest.fixture(scope="module")
def marimo_app(tmp_path_factory):
    """`marimo run notebooks/marimo_tour.py` on 127.0.0.1: yields its URL."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("marimo") / "marimo.log"
    env = repo_env()
    env.pop("XPROF_LOGDIR", None)  # the tour's default: the packaged GPU sample
    command = [sys.executable, "-m", "marimo", "run", str(NOTEBOOK), "--headless"]
    command += ["--host", "127.0.0.1", "--port", str(port), "--no-token"]
    url = f"http://127.0.0.1:{port}"
    cwd = tmp_path_factory.mktemp("marimo-cwd")
    with serve("marimo", command, log_path, lambda: urllib.request.urlopen(url, timeout=2).close(), env, cwd):
        yield url


def test_every_widget_works_in_marimo(page, marimo_app):
    run = xw.sample_run("gpu")
    page.goto(marimo_app)
    # Playwright's CSS locators reach into the shadow roots marimo renders widgets in.
    widgets = page.locator(".xprof-widget")
    try:
        page.locator(".xprof-widget[data-ready='1']").nth(WIDGETS - 1).wait_for(timeout=120_000)
    except Exception as error:
        save_screenshot(page, "failed-marimo-tour")
        raise AssertionError(
            f"not every widget drew ({error}); console:\n" + "\n".join(page.console_lines[-30:])
        ) from None
    assert widgets.count() == WIDGETS

    # The numbers are the analyses'.
    ops = widgets.nth(OPS)
    profile = run.op_profile(exclude_idle=True)  # the widget's default, as XProf's
    assert (
        ops.locator("[data-stat='flops_utilization']").inner_text()
        == f"{100 * profile.root.flops_utilization_of_time:.4f} %"
    )
    trace = run.trace()
    count = widgets.nth(TRACE).locator("[data-testid='event-count']").inner_text()
    assert count == f"{trace.event_count:,} events"
    mv = run.memory_viewer()
    assert (
        widgets.nth(MEMORY_VIEWER).locator("[data-stat='peak_heap_bytes']").inner_text()
        == f"{mv.peak_heap_bytes / 2**20:,.2f} MiB"
    )
    assert "no step markers" in widgets.nth(INPUT).inner_text()

    # A click on an op's row: the op card comes back from Python, and a marimo cell reacts.
    name = "custom-call.1"
    ops.locator("tr[data-node] td:first-child", has_text=name).first.click()
    ops.locator(f"[data-op-card='{name}']").wait_for(timeout=30_000)
    page.locator("[data-testid='marimo-selected-op']", has_text=name).wait_for(timeout=30_000)

    # Search in the trace: a request answered with binary columns.
    tv = widgets.nth(TRACE)
    tv.locator("[data-testid='search']").fill("gemm")
    tv.locator("[data-testid='search']").press("Enter")
    tv.locator("[data-testid='search-count']").wait_for(timeout=30_000)
    assert tv.locator("[data-testid='search-count']").inner_text() == f"{len(trace.search('gemm')):,} matches"

    # Another module in the memory viewer: new numbers, new charts drawn.
    viewer = widgets.nth(MEMORY_VIEWER)
    other = run.modules["module"].iloc[1]
    drawn = int(viewer.get_attribute("data-figures-drawn"))
    viewer.locator("[data-testid='module']").select_option(other)
    expected = f"{run.memory_viewer(other).peak_heap_bytes / 2**20:,.2f} MiB"
    page.wait_for_function(
        "([el, n]) => Number(el.dataset.figuresDrawn) > n && el.dataset.ready === '1'",
        arg=[viewer.element_handle(), drawn],
        timeout=30_000,
    )
    assert viewer.locator("[data-stat='peak_heap_bytes']").inner_text() == expected

    # ProfileWidget: the tool selector swaps the tool shown inside it.
    pw = widgets.nth(PROFILE)
    pw.locator(".xw-profile-tool select").select_option("trace_viewer")
    pw.locator("[data-testid='event-count']").wait_for(timeout=60_000)
    assert pw.locator("[data-testid='event-count']").inner_text() == f"{trace.event_count:,} events"

    # CompareWidget draws both runs' names.
    assert "2026_11_22_03_11_56" in widgets.nth(COMPARE).inner_text()

    # The capture form: a port where nothing listens, and the status says so in words.
    form = widgets.nth(CAPTURE)
    field = form.locator("[data-testid='capture-address']")
    field.fill(f"localhost:{free_port()}")
    field.press("Enter")
    form.locator("[data-testid='capture-button']").click()
    form.locator(".xw-capture-status[data-status='error']").wait_for(timeout=60_000)
    assert "Capture failed" in form.locator(".xw-capture-status").inner_text()

    page.wait_for_timeout(500)
    ops.screenshot(path=str(ARTIFACTS / "marimo-op-profile.png"))
    pw.screenshot(path=str(ARTIFACTS / "marimo-profile-widget.png"))
    form.screenshot(path=str(ARTIFACTS / "marimo-capture.png"))
    ops.scroll_into_view_if_needed()
    save_screenshot(page, "marimo-tour")
