"""Charts drawn from templates (`widgets/_templates.py`) are the items Bokeh builds: for
every template, on many values (one bar and many, text with markup and quotes, NaN and
zero), the filled item equals the one `_bokeh._json_item` makes of the figure Bokeh
builds from the same values, but for the models' ids; and the shipped file is what
`tools/make_chart_templates.py` makes now."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from xprof_widgets.widgets import (  # noqa: F401 (their templates)
    _bokeh,
    _templates,
    framework_op_stats,
    hlo_stats,
    input_pipeline,
    kernel_stats,
    memory_profile,
    op_profile,
    roofline,
    trace_viewer,
)


def _normalized(item):
    """The item as JSON text with its model ids ("p1234") renamed in order of appearance."""
    ids: dict[str, str] = {}
    text = json.dumps(item, sort_keys=True)
    return re.sub(r'"(p\d+)"', lambda m: f'"id{ids.setdefault(m.group(1), len(ids))}"', text)


_TEXT = ["fusion.1", '<b>"x"</b> & y', "émoji 🔥", "", "a" * 200, "p-1"]


def _values(template, n, rng):
    labels = [_TEXT[k % len(_TEXT)] + str(k) for k in range(n)]
    right = float(rng.choice([0.0, 3.5, 1e9]))
    # (A title is never empty: Bokeh leaves out a Title's text equal to its default, "",
    # which the template writes; the same drawing.)
    ranked = {"title": rng.choice(_TEXT) + "µs", **_bokeh.ranked_layout(n, right, labels)}
    values = {k: v for k, v in ranked.items() if k in template.params}
    for name, kind in template.params.items():
        if name in values:
            continue
        if kind == "str":  # (never empty: see the title's)
            values[name] = str(rng.choice(_TEXT)) + "x"
        elif kind == "float":
            # (Not a property's default, 0 or 1 for a range's ends: Bokeh leaves out a value
            # set to the default, which the template writes; the same drawing.)
            values[name] = float(rng.choice([0.5, 1.04, 7e12]))
        elif kind == "pairs":
            values[name] = [(str(rng.choice(_TEXT)), f"@{k} {rng.choice(_TEXT)}") for k in range(n)]
        elif isinstance(kind, dict):
            values[name] = {
                column: [str(rng.choice(_TEXT)) for _ in range(n)]
                if dtype is str
                else np.where(rng.random(n) < 0.2, np.nan, rng.random(n) * 1e6).astype(dtype)
                if np.dtype(dtype).kind == "f"
                else rng.integers(0, 10**6, n).astype(dtype)
                for column, dtype in kind.items()
            }
        else:
            raise AssertionError(f"no test values for {name} ({kind})")
    if values.get("x_start", -np.inf) >= values.get("x_end", np.inf):  # (a range's bounds: start below end)
        values["x_start"] = -values["x_end"]
    return values


@pytest.mark.parametrize("name", sorted(_templates.TEMPLATES))
@pytest.mark.parametrize("n", [0, 1, 3, 20])
def test_template_items_are_the_items_bokeh_builds(name, n):
    template = _templates.TEMPLATES[name]
    assert name in _templates._shipped(), "the template file has no such template: run tools/make_chart_templates.py"
    rng = np.random.default_rng(n)
    for _ in range(3):
        values = _values(template, n, rng)
        filled = template.item(**values)
        built = _bokeh._json_item(template.build(**values))
        assert _normalized(filled) == _normalized(built)


def test_without_the_file_charts_are_built_by_bokeh(monkeypatch):
    """No template file (or one made for another Bokeh): the figure is built, the same item."""
    template = _templates.TEMPLATES["kernel_stats.kernels"]
    values = _values(template, 4, np.random.default_rng(1))
    filled = template.item(**values)
    monkeypatch.setattr(_templates, "_shipped", lambda: {})
    assert _normalized(template.item(**values)) == _normalized(filled)
    with pytest.raises(TypeError, match="takes"):
        template.item(title="x")
    with pytest.raises(TypeError, match="has columns"):
        template.item(**{**values, "data": {**values["data"], "extra": [1, 2, 3, 4]}})


def test_the_template_file_is_current():
    """What tools/make_chart_templates.py writes now (run it when this fails: a templated
    chart's figure or the pinned Bokeh changed)."""
    shipped = json.loads(_templates.TEMPLATE_FILE.read_text(encoding="utf-8"))
    made = _templates._as_json(_templates.made_file())
    assert shipped["bokeh"] == made["bokeh"]
    assert shipped["templates"].keys() == made["templates"].keys()
    for name, template in made["templates"].items():
        assert template["paths"] == shipped["templates"][name]["paths"], name
        assert _normalized(json.loads(template["text"])) == _normalized(
            json.loads(shipped["templates"][name]["text"])
        ), name


def test_each_item_has_model_ids_of_its_own():
    """BokehJS indexes the models of every document on a page by id: two charts drawn from
    one template share none."""
    template = _templates.TEMPLATES["hlo_stats.ops"]
    values = _values(template, 2, np.random.default_rng(2))
    first, second = (json.dumps(template.item(**values)) for _ in range(2))
    ids = [set(re.findall(r'"id": "(p\d+)"', text)) for text in (first, second)]
    assert len(ids[0]) > 20 and not ids[0] & ids[1]


def test_a_parameter_written_inside_other_text_is_refused():
    """A build that writes a parameter into a string of its own (a unit inside a tooltip)
    would leave the marker in every chart drawn: making the template says so."""
    from bokeh.plotting import figure

    def build(unit):
        fig = figure(title="t")
        fig.yaxis.axis_label = f"memory ({unit})"
        fig.title.text = unit
        return fig

    template = _templates.ChartTemplate("test.inside", build, {"unit": "str"})
    try:
        with pytest.raises(ValueError, match="inside other text"):
            template.made()
    finally:
        del _templates.TEMPLATES["test.inside"]
