"""The widget platform in a real browser: BokehJS loads once over the comm and
draws, taps reach Python, requests bring binary columns back, nothing leaves
localhost, and a saved notebook does not carry BokehJS."""

import json
import pathlib
import re

from .harness import REPO_ROOT, run_notebook_in_lab, save_notebook, save_screenshot, write_notebook

BOKEH_JS = REPO_ROOT / "xprof_widgets" / "static" / "bokeh.js"

# Counts the non-white pixels of every canvas Bokeh drew (inside its shadow roots).
PAINTED_PIXELS_JS = """
root => {
  let painted = 0;
  const visit = node => {
    for (const el of node.querySelectorAll('*')) {
      if (el.tagName === 'CANVAS' && el.width > 0 && el.height > 0) {
        const data = el.getContext('2d').getImageData(0, 0, el.width, el.height).data;
        for (let i = 0; i < data.length; i += 4) {
          if (data[i + 3] > 0 && (data[i] < 240 || data[i + 1] < 240 || data[i + 2] < 240)) painted++;
        }
      }
      if (el.shadowRoot) visit(el.shadowRoot);
    }
  };
  visit(root);
  return painted;
}
"""


def test_demo_widget_draws_selects_and_requests(page, jupyter_lab):
    url, token, notebook_dir = jupyter_lab
    write_notebook(
        notebook_dir,
        "platform.ipynb",
        ["from demo_widget import DemoWidget\nw = DemoWidget('platform demo')\nw"],
    )
    run_notebook_in_lab(page, url, token, "platform.ipynb")
    widget = page.locator(".xprof-widget").first

    # BokehJS drew the figure: a canvas (found through Bokeh's shadow roots) with ink on it.
    canvas = widget.locator("canvas").first
    canvas.wait_for()
    box = canvas.bounding_box()
    assert box["width"] > 300 and box["height"] > 200
    assert widget.evaluate(PAINTED_PIXELS_JS) > 1000
    save_screenshot(page, "platform-1-rendered")

    # Tap the big glyph at the centre: JS sets `selected`, the Python observer
    # rewrites the HTML label, the figure stays where it was.
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    label = widget.locator(".selected-label")
    label.and_(page.locator("[data-selected-id='4242']")).wait_for(timeout=15_000)
    assert label.inner_text() == "selected: 4242"
    assert widget.locator("canvas").count() >= 1
    save_screenshot(page, "platform-2-selected")

    # Hover the same glyph: Python's on_hover pushes one row into "hovered".
    page.mouse.move(box["x"] + 10, box["y"] + 10)
    page.mouse.move(box["x"] + box["width"] / 2 + 3, box["y"] + box["height"] / 2 + 3)
    page.wait_for_function(
        "() => document.querySelector('.xprof-widget').dataset.lastPush === 'hovered'", timeout=15_000
    )
    assert widget.get_attribute("data-last-push-rows") == "1"

    # Ask for more data: 500 rows come back as binary columns into "points".
    before = widget.evaluate(PAINTED_PIXELS_JS)
    widget.locator("button.more").click()
    page.wait_for_function(
        "() => { const w = document.querySelector('.xprof-widget');"
        " return w.dataset.lastPush === 'points' && w.dataset.replies === '1'; }",
        timeout=15_000,
    )
    assert widget.get_attribute("data-last-push-rows") == "500"
    assert widget.get_attribute("data-pending") == "0"
    page.wait_for_timeout(300)  # one animation frame or more for the repaint
    after = widget.evaluate(PAINTED_PIXELS_JS)
    assert after != before
    save_screenshot(page, "platform-3-more-points")

    assert page.off_host == [], f"requests left localhost: {page.off_host}"
    assert not [line for line in page.console_lines if "xprof_widgets" in line and line.startswith("error")]


def test_five_widgets_share_one_bokehjs_and_save_small(page, jupyter_lab):
    url, token, notebook_dir = jupyter_lab
    path = write_notebook(
        notebook_dir,
        "five.ipynb",
        [f"from demo_widget import DemoWidget\nDemoWidget('widget {i}')" for i in range(5)],
    )
    run_notebook_in_lab(page, url, token, "five.ipynb", ready_count=5)
    assert page.locator(".xprof-widget[data-ready='1']").count() == 5
    save_screenshot(page, "five-widgets")

    # One BokehJS module for the page, whatever the number of widgets.
    versions = page.evaluate("() => Object.keys(globalThis.__xprof_widgets_bokeh || {})")
    assert len(versions) == 1

    save_notebook(page, path)
    saved = pathlib.Path(path).read_bytes()
    bundle_bytes = BOKEH_JS.stat().st_size
    nb = json.loads(saved)
    widget_state = nb["metadata"].get("widgets", {}).get("application/vnd.jupyter.widget-state+json", {})
    models = widget_state.get("state", {})
    # Widget state was saved (the worst case), yet no copy of BokehJS is in it.
    assert sum(1 for m in models.values() if m.get("model_name") == "AnyModel") == 5
    assert re.search(rb"embed_item as \w+", saved) is None
    assert len(saved) < bundle_bytes, (len(saved), bundle_bytes)
    print(f"\nfive-widget notebook: {len(saved)} bytes; naive 5 x bokeh.js = {5 * bundle_bytes} bytes")
    (REPO_ROOT / "tests" / "artifacts").mkdir(exist_ok=True)
    (REPO_ROOT / "tests" / "artifacts" / "five-widgets-size.json").write_text(
        json.dumps({"notebook_bytes": len(saved), "bokeh_js_bytes": bundle_bytes, "naive_bytes": 5 * bundle_bytes})
    )
    assert page.off_host == [], f"requests left localhost: {page.off_host}"
