"""ProfileWidget on a run of several hosts, in JupyterLab in headless Chromium: the hosts are
summarized on a process pool while the bar counts them, the host menu starts with "All
hosts" (the combined view), a table of the hosts marks the straggler, and picking a host
shows that host alone."""

import shutil

import xprof_widgets as xw
from xprof_widgets.analysis.pod import InProcessExecutor

from ..conftest import PROFILES
from .harness import ARTIFACTS, WATCH_PROGRESS_JS, save_screenshot, show_widget, text_is

TF = PROFILES / "tf_keras_cpu" / "plugins" / "profile"
FAST, SLOW = "2026_11_22_03_16_48", "2026_11_22_03_16_08"  # mean step 36.7 ms, 55.1 ms
HOSTS = [f"worker{i}" for i in range(6)]  # the last one is the slow run's host


def test_profile_widget_on_many_hosts(page, jupyter_lab, tmp_path):
    folder = tmp_path / "logdir" / "plugins" / "profile" / "2026_01_01_00_00_00"
    folder.mkdir(parents=True)
    for host in HOSTS:
        shutil.copyfile(TF / (SLOW if host == HOSTS[-1] else FAST) / "vm.xplane.pb", folder / f"{host}.xplane.pb")
    source = f"import xprof_widgets as xw\nw = xw.ProfileWidget({str(tmp_path / 'logdir')!r})\nw"
    show_widget(page, jupyter_lab, "profile_pod.ipynb", source)
    widget = page.locator(".xw-profile")
    host_select = widget.locator(".xw-profile-host select")

    run = xw.load_run(folder, executor=InProcessExecutor())
    avg = ".xw-profile [data-stat='avg_step_time_ms']"
    text_is(page, avg, f"{run.overview().avg_step_time_ms:,.3f} ms")
    assert host_select.locator("option").all_inner_texts() == ["All hosts", *HOSTS]
    assert host_select.input_value() == "All hosts"

    # The table of hosts: a row each, the slow one marked, its step time the analysis'.
    table = widget.locator("[data-testid='per-host']")
    assert table.locator("summary").inner_text() == "6 hosts, 1 straggling (step time > 1.1x median)"
    rows = table.locator("tr[data-host]")
    assert rows.count() == len(HOSTS)
    assert table.locator("tr[data-straggler]").get_attribute("data-host") == HOSTS[-1]
    per_host = run.per_host().set_index("host")
    shown = table.locator(f"tr[data-host='{HOSTS[-1]}'] [data-col='step_time_ms']").inner_text()
    assert shown == f"{per_host.at[HOSTS[-1], 'step_time_ms']:.2f}"
    page.wait_for_selector(".xprof-widget[data-ready='1'] .xw-profile", timeout=30_000)
    page.wait_for_timeout(500)  # let the charts paint
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "profile-widget-hosts")
    widget.screenshot(path=str(ARTIFACTS / "profile-widget-hosts-element.png"))

    # One host on its own.
    host_select.select_option(HOSTS[-1])
    text_is(page, avg, f"{run.overview(host=HOSTS[-1]).avg_step_time_ms:,.3f} ms")

    # A copy of the run written while the widget is open: opening it counts the hosts done.
    page.evaluate(WATCH_PROGRESS_JS)
    again = "2026_01_02_00_00_00"
    shutil.copytree(folder, folder.parent / again)
    widget.locator(".xw-profile-refresh").click()
    run_select = widget.locator(".xw-profile-run select")
    page.wait_for_function(
        "n => document.querySelector('.xw-profile .xw-profile-run select option')?.innerText === n",
        arg=again,
        timeout=30_000,
    )
    run_select.select_option(again)
    page.wait_for_function(
        "() => window.__progress.some(([t]) => t === 'Summarizing hosts: 6 of 6 done')", timeout=120_000
    )
    counts = [t for t, _ in page.evaluate("() => window.__progress") if t.startswith("Summarizing hosts")]
    assert counts[0].startswith("Summarizing hosts: 0 of 6") or "of 6 done" in counts[0], counts
    text_is(page, avg, f"{run.overview().avg_step_time_ms:,.3f} ms")
    assert page.off_host == [], f"requests left localhost: {page.off_host}"
