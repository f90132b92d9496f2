"""InputPipelineWidget in JupyterLab in headless Chromium: the average step time
and the verdict on the page are the analysis', a click on a step selects it,
the input-op tree folds; nothing fetched from off this machine."""

import xprof_widgets as xw

from ..conftest import PROFILES
from .harness import click_a_step, finish, save_screenshot, show_widget, tool_cell

LOGDIR = PROFILES / "tf_keras_cpu"


def test_input_pipeline_widget_in_lab(page, jupyter_lab):
    widget = show_widget(page, jupyter_lab, "input_pipeline.ipynb", tool_cell("InputPipelineWidget", LOGDIR))
    expected = xw.load_run(LOGDIR).input_pipeline()
    assert widget.locator("[data-stat='avg_step_time_ms']").inner_text() == f"{expected.avg_step_time_ms:,.3f} ms"
    assert widget.locator("[data-testid='recommendation']").inner_text() == expected.recommendation
    assert int(widget.locator("[data-testid='input-ops']").get_attribute("data-rows")) == len(expected.input_ops)
    save_screenshot(page, "input-pipeline-1")

    chosen = click_a_step(page, widget)
    assert chosen.inner_text().startswith("Selected train ")

    # Fold the root iterator: only its row stays.
    widget.locator("tr[data-op='Iterator::Root'] .xw-fold").click()
    page.wait_for_function(
        "() => document.querySelector(\"[data-testid='input-ops']\")?.dataset.rows === '1'", timeout=15_000
    )
    finish(page, widget, "input-pipeline-widget.png", "input-pipeline-2-step-folded")
