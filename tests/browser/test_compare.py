"""CompareWidget in JupyterLab in headless Chromium, on the two JAX MLP runs of tests/data/mlp_widths
(hidden width 256 vs 1024): the step table, the op table and the chart show `xw.compare`'s numbers;
nothing fetched from off this machine."""

from pathlib import Path

import xprof_widgets as xw

from .harness import finish, show_widget
from .test_platform import PAINTED_PIXELS_JS

MLP = Path(__file__).resolve().parents[1] / "data" / "mlp_widths" / "plugins" / "profile"


def test_compare_widget_in_lab(page, jupyter_lab):
    a, b = sorted(p for p in MLP.iterdir() if p.is_dir())
    widget = show_widget(
        page,
        jupyter_lab,
        "compare.ipynb",
        f"import xprof_widgets as xw\nw = xw.CompareWidget({str(a)!r}, {str(b)!r})\nw",
    )
    result = xw.compare(xw.load_run(a), xw.load_run(b))
    # The average step, a and b, as the analysis has them (first row of the step table).
    steps = widget.locator("[data-testid='steps']")
    assert int(steps.get_attribute("data-rows")) == len(result.steps)
    first = steps.locator("tbody tr").first.locator("td")
    row = result.steps.iloc[0]
    assert first.nth(0).inner_text() == row["label"]
    assert first.nth(1).inner_text() == f"{row['a_ms']:,.3f}"
    assert first.nth(2).inner_text() == f"{row['b_ms']:,.3f}"
    assert first.nth(3).inner_text() == f"{row['delta_ms']:+,.3f}"
    # The op that changed most is the first row of the op table, with its total times.
    ops = widget.locator("[data-testid='ops']")
    assert int(ops.get_attribute("data-rows")) == len(result.ops)
    top = result.ops.iloc[0]
    cells = ops.locator("tbody tr").first.locator("td")
    assert cells.nth(0).inner_text() == top["hlo_op_name"]
    assert cells.nth(4).inner_text() == f"{top['total_time_a_ps'] / 1e9:,.3f}"
    assert cells.nth(5).inner_text() == f"{top['total_time_b_ps'] / 1e9:,.3f}"
    # Every summary sentence is on the page; the stacked bars are drawn.
    summary = widget.locator("[data-testid='summary'] li").all_inner_texts()
    assert summary == list(result.summary)
    assert widget.evaluate(PAINTED_PIXELS_JS) > 3000
    finish(page, widget, "compare-widget.png", "compare-widget")
