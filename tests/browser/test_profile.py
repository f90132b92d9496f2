"""ProfileWidget in JupyterLab in headless Chromium: the run selector lists the
logdir's runs (newest first), the numbers shown are the analyses', tools
without data are listed with the reason, opening a run shows the bytes read
(the run is read in a background thread: the cell returns at once), a run
written while the widget is open appears on Refresh; nothing fetched from off
this machine."""

import re
import shutil

import xprof_widgets as xw
from xprof_widgets.widgets.memory_profile import human_bytes
from xprof_widgets.widgets.profile import TOOLS

from ..conftest import PROFILES
from .harness import WATCH_PROGRESS_JS, finish, show_widget, text_is

TF = PROFILES / "tf_keras_cpu" / "plugins" / "profile"
NEWER, OLDER = "2026_11_22_03_16_48", "2026_11_22_03_16_08"
ADDED = "2026_11_23_00_00_00"  # a JAX run, copied in while the widget is open


def test_profile_widget_in_lab(page, jupyter_lab, tmp_path):
    logdir = tmp_path / "logdir"
    root = logdir / "plugins" / "profile"
    for name in (OLDER, NEWER):
        shutil.copytree(TF / name, root / name)
    source = (
        "import xprof_widgets as xw\n"
        "from xprof_widgets.io import xspace\n"
        "xspace.READ_CHUNK_BYTES = 256 * 1024  # small chunks: a 2 MB run reports its progress several times\n"
        f"w = xw.ProfileWidget({str(logdir)!r})\n"
        "w"
    )
    show_widget(page, jupyter_lab, "profile.ipynb", source)
    widget = page.locator(".xw-profile")
    run_select = widget.locator(".xw-profile-run select")
    tool_select = widget.locator(".xw-profile-tool select")

    # Both runs, the newest first and selected; its overview's average step time is the analysis'.
    assert run_select.locator("option").all_inner_texts() == [NEWER, OLDER]
    assert run_select.input_value() == NEWER
    newer = xw.load_run(root / NEWER)
    avg = ".xw-profile [data-stat='avg_step_time_ms']"
    assert page.locator(avg).inner_text() == f"{newer.overview().avg_step_time_ms:,.3f} ms"

    # The tools without data, each with its reason.
    missing = widget.locator("[data-testid='missing-tools']")
    missing.locator("summary").click()
    reasons = {t: r for t, ok, r in newer.tool_status().itertuples(index=False) if not ok and t in TOOLS}
    # TF on CPU: no XLA ops, no HLO modules, no GPU, no TPU counters, no requests.
    assert list(reasons) == [
        "op_profile",
        "hlo_stats",
        "memory_viewer",
        "graph_viewer",
        "kernel_stats",
        "roofline_model",
        "megascale_stats",
        "perf_counters",
        "utilization_viewer",
        "kernel_utilization",
        "inference_profile",
    ]
    assert missing.locator("summary").inner_text() == "11 tools without data"
    assert missing.locator("li").all_inner_texts() == [f"{TOOLS[t].label}: {r}" for t, r in reasons.items()]

    # Memory profile of the newest run: the peak shown is the analysis' peak.
    tool_select.select_option(label="Memory profile")
    peak = ".xw-profile [data-stat='peak_heap_bytes']"
    text_is(page, peak, human_bytes(newer.memory_profile().peak_heap_bytes))
    page.wait_for_selector(".xprof-widget[data-ready='1'] .xw-profile", timeout=30_000)

    # The older run: read in the background with the bytes read shown; it has no allocator
    # events, so the memory profile joins the tools without data, with XProf's reason.
    older = xw.load_run(root / OLDER)
    size = (root / OLDER / "vm.xplane.pb").stat().st_size
    page.evaluate(WATCH_PROGRESS_JS)
    run_select.select_option(OLDER)
    page.wait_for_function(  # textContent: the list is folded (a <details>) until opened
        "() => [...document.querySelectorAll('.xw-profile [data-testid=\"missing-tools\"] li')]"
        ".some(li => li.textContent.startsWith('Memory profile: '))",
        timeout=60_000,
    )
    seen = page.evaluate("() => window.__progress")
    assert all(visible for text, visible in seen if text.startswith("Reading")), seen
    shown = [text for text, _ in seen]
    reading = [t for t in shown if t.startswith("Reading vm: ")]
    assert reading and all(re.fullmatch(rf"Reading vm: [\d.]+ / {size / 1e6:.1f} MB", t) for t in reading), shown
    assert "Decoding vm…" in shown and "Building Memory profile…" in shown, shown
    widget.locator(".xw-profile-loading").wait_for(state="detached", timeout=30_000)  # gone once the tool shows
    status = {t: r for t, ok, r in older.tool_status().itertuples(index=False) if not ok}
    missing.locator("summary").click()
    items = missing.locator("li").all_inner_texts()
    assert f"Memory profile: {status['memory_profile']}" in items
    assert widget.locator(".xw-profile-status").inner_text().startswith(f"{len(status)} tools without data")
    tool_select.select_option(label="Overview")
    text_is(page, avg, f"{older.overview().avg_step_time_ms:,.3f} ms")

    # A run written while the widget is open shows up on Refresh, the newest first.
    jax_run = next((PROFILES / "jax_mlp_cpu" / "plugins" / "profile").iterdir())
    shutil.copytree(jax_run, root / ADDED)
    widget.locator(".xw-profile-refresh").click()
    page.wait_for_function(
        "n => document.querySelector('.xw-profile .xw-profile-run select option')?.innerText === n",
        arg=ADDED,
        timeout=30_000,
    )
    assert run_select.locator("option").all_inner_texts() == [ADDED, NEWER, OLDER]
    assert run_select.input_value() == OLDER  # the run shown stays selected
    run_select.select_option(ADDED)
    added = xw.load_run(root / ADDED)
    text_is(page, avg, f"{added.overview().avg_step_time_ms:,.3f} ms")
    page.wait_for_selector(".xprof-widget[data-ready='1'] .xw-profile", timeout=30_000)
    page.wait_for_timeout(500)  # let the charts paint
    finish(page, widget, "profile-widget-element.png", "profile-widget")
