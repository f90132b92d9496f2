"""InputPipelineWidget in JupyterLab in headless Chromium: the average step time
and the verdict on the page are the analysis', a click on a step selects it,
the input-op tree folds; nothing fetched from off this machine."""

from ..conftest import PROFILES
from .harness import click_a_step, finish, save_screenshot, show_step_page

LOGDIR = PROFILES / "tf_keras_cpu"


def test_input_pipeline_widget_in_lab(page, jupyter_lab):
    widget, expected = show_step_page(page, jupyter_lab, "InputPipelineWidget", LOGDIR, "input_pipeline")
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
