"""Helpers of the browser harness: talk to the Jupyter server, drive JupyterLab,
save screenshots. Fixtures are in conftest.py."""

import contextlib
import json
import os
import pathlib
import re
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request

import nbformat
import pytest

import xprof_widgets as xw

CHROMIUM = "/usr/bin/chromium"
REPO_ROOT = pathlib.Path(__file__).resolve().parents[2]
HERE = pathlib.Path(__file__).resolve().parent
ARTIFACTS = REPO_ROOT / "tests" / "artifacts"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


def api(url, token, path, method="GET", timeout=10):
    """Call the Jupyter server's REST API; returns the decoded JSON (or None)."""
    request = urllib.request.Request(f"{url}{path}", method=method, headers={"Authorization": f"token {token}"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        body = response.read()
    return json.loads(body) if body else None


def repo_env(**extra):
    """The environment of a server under test: it imports the working tree, installed or not."""
    pythonpath = os.pathsep.join(p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=pythonpath, **extra)


@contextlib.contextmanager
def serve(name, command, log_path, ready, env, cwd, wait_s=90):
    """Run a server (`command`) until the block ends: wait until `ready()` stops raising
    OSError (its URL answers); fail the test with the end of its log if it exits or does
    not answer in `wait_s`. The log goes to `log_path`."""
    with open(log_path, "wb") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=cwd)
        try:
            deadline = time.monotonic() + wait_s
            while True:
                if process.poll() is not None:
                    pytest.fail(f"{name} exited with {process.returncode}:\n{log_path.read_text()[-3000:]}")
                try:
                    ready()
                    break
                except OSError:  # URLError and ConnectionError are OSErrors
                    if time.monotonic() > deadline:
                        pytest.fail(f"{name} did not answer in {wait_s} s:\n{log_path.read_text()[-3000:]}")
                    time.sleep(0.5)
            yield process
        finally:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def write_notebook(notebook_dir, name, sources):
    """Write a notebook of code cells to notebook_dir/name; the first cell puts the
    repository (the working tree under test) and this folder on the kernel's sys.path."""
    setup = f"import sys\nsys.path[:0] = [{str(REPO_ROOT)!r}, {str(HERE)!r}]\n"
    nb = nbformat.v4.new_notebook()
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3 (ipykernel)", "language": "python"}
    nb.cells = [nbformat.v4.new_code_cell(setup)] + [nbformat.v4.new_code_cell(s) for s in sources]
    path = pathlib.Path(notebook_dir) / name
    nbformat.write(nb, path)
    return path


def run_notebook_in_lab(page, url, token, nb_name, ready_count=1, timeout_ms=60_000):
    """Open nb_name in JupyterLab, run all cells through the Run menu, and wait
    until `ready_count` widgets report data-ready="1"."""
    _run_all(
        page,
        url,
        token,
        f"/lab/tree/{urllib.parse.quote(nb_name)}?reset&token={token}",
        nb_name,
        ready_count,
        timeout_ms,
        wait_idle=True,
    )


def tool_cell(widget_class, path):
    """A notebook cell that shows `xw.<widget_class>(path)` as `w`."""
    return f"import xprof_widgets as xw\nw = xw.{widget_class}({str(path)!r})\nw"


def show_widget(page, jupyter_lab, nb_name, source, ready_count=1, timeout_ms=None):
    """Write a notebook whose cell `source` displays a widget, run it in JupyterLab,
    and return the first widget's locator, scrolled into view (`timeout_ms`: how long the
    widgets may take to show, default `run_notebook_in_lab`'s)."""
    url, token, notebook_dir = jupyter_lab
    write_notebook(notebook_dir, nb_name, [source])
    extra = {} if timeout_ms is None else {"timeout_ms": timeout_ms}
    run_notebook_in_lab(page, url, token, nb_name, ready_count=ready_count, **extra)
    widget = page.locator(".xprof-widget").first
    widget.scroll_into_view_if_needed()
    return widget


def show_step_page(page, jupyter_lab, widget_class, logdir, analysis):
    """Show `xw.<widget_class>(logdir)`, a page with a step-time graph (overview, input
    pipeline), and check its average step time and recommendation against the run's
    `analysis` ("overview", "input_pipeline"): (the widget's locator, that result)."""
    widget = show_widget(page, jupyter_lab, f"{analysis}.ipynb", tool_cell(widget_class, logdir))
    expected = getattr(xw.load_run(logdir), analysis)()
    assert widget.locator("[data-stat='avg_step_time_ms']").inner_text() == f"{expected.avg_step_time_ms:,.3f} ms"
    assert widget.locator("[data-testid='recommendation']").inner_text() == expected.recommendation
    return widget, expected


def click_a_step(page, widget):
    """Click the step-time chart (its "steps" figure) until a step is selected; return the
    element that shows the selection. Bars have gaps between them, so a few places are tried."""
    canvas = widget.locator("[data-figure='steps'] canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    chosen = widget.locator("[data-testid='selected-step']")
    for fraction in (0.33, 0.47, 0.61, 0.75):
        page.mouse.click(box["x"] + box["width"] * fraction, box["y"] + box["height"] * 0.7)
        try:
            chosen.wait_for(timeout=4_000)
            break
        except Exception:
            continue
    chosen.wait_for(timeout=10_000)
    return chosen


def run_notebook_in_notebook7(page, url, token, nb_name, ready_count=1, timeout_ms=60_000):
    """Open nb_name in Jupyter Notebook 7 (same server), Run All Cells, wait for the widgets."""
    _run_all(
        page,
        url,
        token,
        f"/notebooks/{urllib.parse.quote(nb_name)}?token={token}",
        nb_name,
        ready_count,
        timeout_ms,
        wait_idle=False,
    )


def _run_all(page, url, token, path, nb_name, ready_count, timeout_ms, wait_idle):
    for session in api(url, token, "/api/sessions") or []:  # no stale kernel
        api(url, token, f"/api/sessions/{session['id']}", method="DELETE")
    page.goto(f"{url}{path}")
    page.wait_for_selector(".jp-Notebook", timeout=timeout_ms)
    # The front end may still ask which kernel to start: take the preselected one.
    dialog = page.locator(".jp-Dialog .jp-mod-accept")
    try:
        dialog.wait_for(timeout=5_000)
        dialog.click()
    except Exception:
        pass
    idle = ".jp-Notebook-ExecutionIndicator[data-status='idle']"
    if wait_idle:
        page.wait_for_selector(idle, timeout=timeout_ms)
    page.locator(".lm-MenuBar-itemLabel", has_text="Run").first.click()
    page.locator(".lm-Menu-itemLabel", has_text="Run All Cells").first.click()
    try:
        # Ready, or a cell failed (then say why at once, with the cell's error, not after the timeout).
        page.wait_for_function(
            "n => document.querySelectorAll('.xprof-widget[data-ready=\"1\"]').length >= n"
            " || [...document.querySelectorAll(\"[data-mime-type='application/vnd.jupyter.stderr']\")]"
            ".some(e => e.textContent.includes('Traceback (most recent call last)'))",
            arg=ready_count,
            timeout=timeout_ms,
        )
    except Exception as error:
        shot = save_screenshot(page, f"failed-{pathlib.Path(nb_name).stem}")
        console = "\n".join(page.console_lines[-40:])
        raise AssertionError(f"widgets not ready ({error}); screenshot {shot}; console:\n{console}") from None
    failed = [
        t
        for t in page.locator("[data-mime-type='application/vnd.jupyter.stderr']").all_text_contents()
        if "Traceback (most recent call last)" in t
    ]
    if failed:
        raise AssertionError(f"a cell of {nb_name} failed:\n" + "\n".join(failed))
    if wait_idle:
        page.wait_for_selector(idle, timeout=timeout_ms)
    # JupyterLab's "get notified about news?" toast would cover screenshots.
    toast = page.locator(".jp-Notification-Toast-Close, .jp-toast-button:has-text('No')")
    if toast.count():
        toast.first.click()


def save_notebook(page, path, timeout_s=120):
    """Save the open notebook (File > Save Notebook) and wait until the file on disk changed."""
    before = path.stat().st_mtime_ns
    page.locator(".lm-MenuBar-itemLabel", has_text="File").first.click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Save( Notebook)?$")).first.click()
    deadline = time.monotonic() + timeout_s
    while path.stat().st_mtime_ns == before:
        if time.monotonic() > deadline:
            shot = save_screenshot(page, f"failed-save-{path.stem}")
            console = "\n".join(page.console_lines[-20:])
            raise TimeoutError(f"{path} was not saved in {timeout_s} s; screenshot {shot}; console:\n{console}")
        # Not time.sleep: the page's requests go through a Python route handler
        # that only runs while Playwright has control.
        page.wait_for_timeout(200)
    page.wait_for_timeout(500)  # let the write finish
    print(f"\nsaved {path.name} in {time.monotonic() - (deadline - timeout_s):.1f} s")
    return path


def save_screenshot(page, name):
    """Save a full-page PNG to tests/artifacts/NAME.png and return its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# ProfileWidget's progress label: every text it shows, and whether it was on screen, as
# [text, visible] pairs in `window.__progress` (set up before a run opens).
WATCH_PROGRESS_JS = """() => {
  const root = document.querySelector('.xw-profile').closest('.xprof-widget');
  window.__progress = [];
  new MutationObserver(() => {
    const label = root.querySelector('.xw-profile-progress');
    if (label) window.__progress.push([label.textContent.trim(), label.offsetParent !== null]);
  }).observe(root, {subtree: true, childList: true, characterData: true});
}"""


def finish(page, widget, widget_png, page_shot=None):
    """The end of a widget test: the widget scrolled into view and saved as `widget_png` in
    ARTIFACTS (and the whole page as `page_shot`, if named); no request left localhost."""
    widget.scroll_into_view_if_needed()
    if page_shot is not None:
        save_screenshot(page, page_shot)
    widget.screenshot(path=str(ARTIFACTS / widget_png))
    assert page.off_host == [], f"requests left localhost: {page.off_host}"


def text_is(page, selector, text, timeout=60_000):
    """Wait until the element `selector` shows exactly `text` (trimmed)."""
    page.wait_for_function(
        "([s, t]) => document.querySelector(s)?.innerText.trim() === t", arg=[selector, text], timeout=timeout
    )
