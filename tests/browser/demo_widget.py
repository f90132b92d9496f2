"""A minimal BokehWidget used only by the browser tests.

One figure with known geometry (no axes, no toolbar, fixed ranges 0..10, so
the canvas centre is data point (5, 5)), a label showing the Python-side
`selected` trait, a button that requests more rows, and a hover hook that
pushes the hovered id into a second source.
"""

import html

import numpy as np
from bokeh.models import ColumnDataSource, HoverTool, Range1d, TapTool
from bokeh.plotting import figure

from xprof_widgets.widgets._bokeh import BokehWidget

CENTER_ID = 4242


class DemoWidget(BokehWidget):
    """Points named "points"; the big one at the centre has id CENTER_ID."""

    def __init__(self, title="demo"):
        self.title = title
        self.hovered_ids = []
        points = ColumnDataSource(
            data={"x": [5.0, 1.0, 9.0], "y": [5.0, 1.0, 9.0], "id": [CENTER_ID, 1, 2]}, name="points"
        )
        hovered = ColumnDataSource(data={"x": [], "y": []}, name="hovered")
        fig = figure(
            width=400,
            height=300,
            x_range=Range1d(0, 10),
            y_range=Range1d(0, 10),
            toolbar_location=None,
            tools="",
            min_border=0,
        )
        fig.axis.visible = False
        fig.grid.visible = False
        renderer = fig.scatter("x", "y", size=60, source=points, color="#1f77b4", alpha=0.8)
        fig.scatter("x", "y", size=20, source=hovered, color="#d62728")
        fig.add_tools(TapTool(renderers=[renderer]), HoverTool(renderers=[renderer], tooltips=None))
        super().__init__(figures={"main": fig}, html=self._render_html())
        self.observe(lambda _change: setattr(self, "html", self._render_html()), "selected")

    def _render_html(self):
        selected_id = self.selected.get("id") if self.selected else None
        return (
            f'<div class="demo"><h4>{html.escape(self.title)}</h4>'
            '<button class="more" data-request="more" data-params=\'{"n": 500}\'>More points</button> '
            f'<span class="selected-label" data-selected-id="{html.escape(str(selected_id))}">'
            f"selected: {html.escape(str(selected_id))}</span>"
            '<div data-figure="main"></div></div>'
        )

    def on_request(self, kind, params):
        if kind != "more":
            raise ValueError(f"unknown request {kind!r}")
        n = int(params["n"])
        rng = np.random.default_rng(0)
        columns = {
            "x": rng.uniform(0.5, 9.5, n),
            "y": rng.uniform(0.5, 9.5, n).astype(np.float32),
            "id": np.arange(n, dtype=np.int64) + 10_000,
        }
        return {"source": "points", "rows": n}, columns

    def on_hover(self, source, id, figure):
        self.hovered_ids.append(id)
        if source == "points" and id == CENTER_ID:
            self.push_columns("hovered", {"x": np.array([5.0]), "y": np.array([5.0])})
