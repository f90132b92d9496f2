"""Our serialization of a figure (`_bokeh._json_item`, each model by `_SetValuesSerializer`)
gives what Bokeh's own `json_item` gives, for every chart of every tool widget on the
shipped samples: the same models, ids, properties and data, only faster."""

from __future__ import annotations

import importlib

import pytest
from bokeh.embed import json_item

import xprof_widgets as xw
from xprof_widgets.tools import TOOLS
from xprof_widgets.widgets import _bokeh, _templates

_SHIPPED = _templates._shipped  # (the template file's charts; the fixture turns them off)


@pytest.fixture
def compared(monkeypatch):
    """Each figure a widget serializes, serialized by Bokeh's json_item too and compared;
    the names of the figures' root models compared."""
    seen = []
    ours = _bokeh._json_item

    def both(figure):
        item = ours(figure)
        theirs = json_item(figure)
        assert item["root_id"] == theirs["root_id"]
        for key in ("roots", "defs", "callbacks"):
            assert item["doc"].get(key) == theirs["doc"].get(key), key
        seen.append(item["doc"]["roots"][0]["name"])
        return item

    monkeypatch.setattr(_bokeh, "_json_item", both)
    # Charts with a template built by Bokeh too (test_chart_templates: the same items).
    monkeypatch.setattr(_templates, "_shipped", lambda: {})
    return seen


@pytest.mark.parametrize("kind", ["cpu", "gpu"])
def test_every_chart_serializes_as_bokeh_does(compared, kind):
    run = xw.sample_run(kind)
    for tool in TOOLS:
        widget = getattr(importlib.import_module(tool.module, "xprof_widgets"), tool.widget)
        widget(run)
    # (Plots of every kind the samples have charts for: bars, pies, sunbursts, timelines.)
    assert len(compared) >= 10 and set(compared) >= {"Figure"}


def test_defaults_asked_for_are_bokeh_s_own(compared, monkeypatch):
    """With Bokeh told to serialize defaults too, every property goes out, as Bokeh writes it."""
    monkeypatch.setenv("BOKEH_SERIALIZE_INCLUDE_DEFAULTS", "true")
    xw.KernelStatsWidget(xw.sample_run("gpu"))
    assert compared == ["Figure"]


def test_data_models_defined_later_are_written_as_bokeh_writes_them(compared, monkeypatch):
    """Bokeh writes the DataModel classes defined in the process into every document
    (`defs`); ours looks for them again when a class is defined after a first figure."""
    xw.KernelStatsWidget(xw.sample_run("gpu"))  # a figure before the class exists
    from bokeh.core.properties import Int
    from bokeh.model import DataModel

    class XwSerializationProbe(DataModel):  # (registered with Bokeh for the process)
        count = Int(0)

    item = _bokeh._json_item(_bokeh.ranked_bars(title="probe", **_bokeh.ranked_layout(2, 1.0, ["a", "b"])))
    assert "XwSerializationProbe" in str(item["doc"]["defs"])
    # A chart drawn from its template writes them too.
    monkeypatch.setattr(_templates, "_shipped", _SHIPPED)
    widget = xw.KernelStatsWidget(xw.sample_run("gpu"))
    assert "XwSerializationProbe" in str(widget.figures["kernels"]["doc"]["defs"])
    assert compared == ["Figure", "Figure"]


def test_items_have_document_ids_of_their_own():
    """BokehJS indexes the models of every document on a page by id: two items share none,
    their documents' settings models included."""
    items = [
        _bokeh._json_item(_bokeh.ranked_bars(title="t", **_bokeh.ranked_layout(2, 1.0, ["a", "b"]))) for _ in range(2)
    ]
    assert items[0]["doc"]["config"]["id"] != items[1]["doc"]["config"]["id"]
    assert items[0]["root_id"] != items[1]["root_id"]
