"""OverviewWidget in JupyterLab in headless Chromium: the average step time and
the verdict on the page are the analysis'; a click on the step graph selects a
step; nothing fetched from off this machine."""

import xprof_widgets as xw

from ..conftest import PROFILES
from .harness import click_a_step, finish, show_step_page, show_widget, tool_cell

LOGDIR = PROFILES / "tf_keras_cpu"


def test_overview_widget_in_lab(page, jupyter_lab):
    widget, expected = show_step_page(page, jupyter_lab, "OverviewWidget", LOGDIR, "overview")
    assert widget.locator("[data-stat='device_type']").inner_text() == expected.device_type
    chosen = click_a_step(page, widget)
    assert chosen.inner_text().startswith("Selected train ")
    finish(page, widget, "overview-widget.png", "overview-1")


def test_overview_without_steps_in_lab(page, jupyter_lab):
    """The TPU inference run has no step markers: the page says how to add them and shows module latency."""
    logdir = PROFILES / "tpu_v6e_inference"
    widget = show_widget(page, jupyter_lab, "overview-tpu.ipynb", tool_cell("OverviewWidget", logdir))
    expected = xw.load_run(logdir).overview()
    assert "`Steps` line" in widget.locator("[data-testid='no-steps']").inner_text()
    table = widget.locator("[data-testid='module-latency']")
    first = table.locator("tbody tr").first.locator("td")
    assert first.nth(0).inner_text() == expected.module_latency.module.iloc[0]
    assert first.nth(5).inner_text() == f"{expected.module_latency.p99_ms.iloc[0]:,.3f}"
    assert (
        widget.locator("[data-stat='device_duty_cycle_percent']").inner_text()
        == f"{expected.device_duty_cycle_percent:.1f} %"
    )
    finish(page, widget, "overview-tpu-inference.png")
