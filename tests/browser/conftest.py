"""Browser harness: JupyterLab on 127.0.0.1 driven by headless Debian Chromium.

Nothing here downloads a browser: Playwright launches /usr/bin/chromium
(installed with apt-get when missing). Every request that would leave
localhost is aborted and recorded, and tests assert there were none.
Helpers (run_notebook_in_lab, save_screenshot, ...) are in harness.py.
"""

import json
import os
import pathlib
import secrets
import subprocess
import sys
import urllib.error
import urllib.parse

import pytest

from ..conftest import free_port
from .harness import CHROMIUM, CHROMIUM_ARGS, HERE, LOCAL_HOSTS, api, repo_env, serve


def pytest_collection_modifyitems(items):
    for item in items:
        if HERE in pathlib.Path(str(item.fspath)).resolve().parents:
            item.add_marker(pytest.mark.browser)
            item.add_marker(pytest.mark.slow)


@pytest.fixture(scope="session")
def chromium_path():
    if not os.path.exists(CHROMIUM):
        try:
            subprocess.run(["apt-get", "update"], check=True, capture_output=True, timeout=600)
            subprocess.run(["apt-get", "install", "-y", "chromium"], check=True, capture_output=True, timeout=900)
        except (OSError, subprocess.SubprocessError) as error:
            pytest.skip(f"{CHROMIUM} is missing and `apt-get install -y chromium` failed: {error}")
    if not os.path.exists(CHROMIUM):
        pytest.skip(f"{CHROMIUM} is missing after apt-get install")
    return CHROMIUM


@pytest.fixture(scope="session")
def jupyter_lab(tmp_path_factory):
    """A JupyterLab server on 127.0.0.1: yields (url, token, notebook_dir)."""
    notebook_dir = tmp_path_factory.mktemp("notebooks")
    settings_dir = tmp_path_factory.mktemp("lab-settings")
    # Save widget state in the notebook (off by default): the size test then
    # measures the worst case, what a notebook carries when state is saved.
    plugin = settings_dir / "@jupyter-widgets" / "jupyterlab-manager"
    plugin.mkdir(parents=True)
    (plugin / "plugin.jupyterlab-settings").write_text(
        json.dumps({"saveState": os.environ.get("XPROF_SAVE_STATE", "1") == "1"})
    )
    # No "receive official Jupyter news?" toast over the screenshots.
    news = settings_dir / "@jupyterlab" / "apputils-extension"
    news.mkdir(parents=True)
    (news / "notification.jupyterlab-settings").write_text(json.dumps({"fetchNews": "false"}))
    port = free_port()
    token = secrets.token_hex(16)
    log_path = notebook_dir.parent / "jupyter-lab.log"
    command = [
        sys.executable,
        "-m",
        "jupyter",
        "lab",
        "--no-browser",
        "--allow-root",
        f"--port={port}",
        f"--IdentityProvider.token={token}",
        "--ServerApp.ip=127.0.0.1",
        f"--notebook-dir={notebook_dir}",
        f"--LabApp.user_settings_dir={settings_dir}",
        "--LabApp.news_url=",
        "--ServerApp.open_browser=False",
    ]
    url = f"http://127.0.0.1:{port}"
    env = repo_env(JUPYTER_PLATFORM_DIRS="1")
    with serve("jupyter lab", command, log_path, lambda: api(url, token, "/api/status", timeout=2), env, notebook_dir):
        yield url, token, notebook_dir


@pytest.fixture(scope="session")
def browser(chromium_path):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium_path, headless=True, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


class OffHostRequests(list):
    """URLs the page tried to fetch from anywhere but localhost (all aborted)."""


@pytest.fixture
def page(browser):
    """A fresh page whose off-localhost requests are aborted; `page.off_host` lists them."""
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    page = context.new_page()
    off_host = OffHostRequests()

    def route(route):
        host = urllib.parse.urlsplit(route.request.url).hostname
        scheme = urllib.parse.urlsplit(route.request.url).scheme
        if scheme in ("http", "https", "ws", "wss") and host not in LOCAL_HOSTS:
            off_host.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    page.route("**/*", route)
    page.off_host = off_host
    page.console_lines = []
    page.on("console", lambda msg: page.console_lines.append(f"{msg.type}: {msg.text}"))
    page.on("pageerror", lambda error: page.console_lines.append(f"pageerror: {error}"))
    yield page
    context.close()
