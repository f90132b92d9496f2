"""OpProfileWidget in JupyterLab in headless Chromium: click a wedge of the
sunburst and its card and row show that op; click a row and the card follows;
sort by wasted time; nothing fetched from off this machine."""

import math

import xprof_widgets as xw

from ..conftest import PROFILES
from .harness import ARTIFACTS, save_screenshot, show_widget, tool_cell
from .test_platform import PAINTED_PIXELS_JS

LOGDIR = PROFILES / "tpu_v6e_inference"


def test_op_profile_widget_in_lab(page, jupyter_lab):
    widget = show_widget(page, jupyter_lab, "op_profile.ipynb", tool_cell("OpProfileWidget", LOGDIR))
    assert widget.evaluate(PAINTED_PIXELS_JS) > 5000
    ref = xw.OpProfileWidget(LOGDIR)  # the same tree, to know where each wedge is
    root = ref.profile.root
    assert (
        widget.locator("[data-stat='flops_utilization']").inner_text()
        == f"{100 * root.flops_utilization_of_time:.4f} %"
    )

    # The largest op (depth 3) and the middle of its wedge.
    ops = [i for i in ref._wedge_of if ref.nodes[i][0].kind == "op"]
    i = max(ops, key=lambda i: ref._wedge_of[i][3] - ref._wedge_of[i][2])
    node = ref.nodes[i][0]
    inner, outer, start, end = ref._wedge_of[i]
    angle = (start + end) / 2
    radius = (inner + outer) / 2
    extent = 0.35 + 4 * 0.5 + 0.05
    canvas = widget.locator("[data-figure='sunburst'] canvas").first
    canvas.scroll_into_view_if_needed()
    box = canvas.bounding_box()
    # The plot frame is square below the title: centre and scale from the canvas.
    title_px = 22
    side = min(box["width"], box["height"] - title_px) - 10
    cx, cy = box["x"] + box["width"] / 2, box["y"] + title_px + (box["height"] - title_px) / 2
    px = side / (2 * extent)
    page.mouse.click(cx + radius * math.cos(angle) * px, cy - radius * math.sin(angle) * px)
    card = widget.locator("[data-testid='op-card-name']")
    card.wait_for(timeout=15_000)
    assert card.inner_text() == node.name
    assert widget.locator("tr.sel td").first.inner_text() == node.name
    assert node.expression.split(" ")[0] in widget.locator("[data-testid='op-expression']").inner_text()
    # The card's numbers are that op's: total time, occurrences, HBM bandwidth.
    text = widget.locator("[data-op-card]").inner_text()
    seconds = node.time_ps * 1e-12
    for shown in (
        f"{node.time_ps / 1e9:,.3f} ms",
        f"{node.occurrences:,}",
        f"{node.hbm_bytes / seconds / 1e9:,.2f} GB/s",
    ):
        assert shown in text, (shown, text)
    widget.scroll_into_view_if_needed()
    save_screenshot(page, "op-profile-1-wedge")
    widget.screenshot(path=str(ARTIFACTS / "op-profile-widget.png"))

    # Hovering a row outlines its wedge (one row pushed into "hover_wedge").
    widget.locator(f"tr[data-node='{i}']").hover()
    page.wait_for_function(
        "() => { const d = document.querySelector('.xprof-widget').dataset;"
        " return d.lastPush === 'hover_wedge' && d.lastPushRows === '1'; }",
        timeout=15_000,
    )
    # A row click selects that node instead.
    other = next(i for i, (n, *_r) in enumerate(ref.nodes) if n.kind == "op" and n.name != node.name)
    widget.locator(f"tr[data-node='{other}']").click()
    page.wait_for_function(
        "v => document.querySelector(\"[data-testid='op-card-name']\")?.innerText === v",
        arg=ref.nodes[other][0].name,
        timeout=15_000,
    )
    # Sort by wasted time: the first op row is the op with the most wasted time.
    widget.locator("[data-testid='sort-by']").select_option("wasted_time")
    wasted = xw.load_run(LOGDIR).op_profile(sort_by="wasted_time")
    first_op = next(n for n, d, p in wasted.root.walk() if n.kind == "op")
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='sort-by']\")?.value === 'wasted_time'", timeout=15_000
    )
    page.wait_for_selector(".xprof-widget[data-ready='1']", timeout=30_000)
    # The selection survives the new order: the card comes back with the same op.
    page.wait_for_function(
        "v => document.querySelector(\"[data-testid='op-card-name']\")?.innerText === v",
        arg=ref.nodes[other][0].name,
        timeout=15_000,
    )
    names = widget.locator("tr[data-node] td:first-child").all_inner_texts()
    assert first_op.name in names
    save_screenshot(page, "op-profile-2-wasted")
    assert page.off_host == [], f"requests left localhost: {page.off_host}"
