"""InputPipelineWidget: is the program waiting for input, and which input op costs what.

Shows what `Run.input_pipeline()` computes, as XProf's input pipeline analyzer
does: the verdict with its numbers, the step-time graph (each step's time
stacked by XProf's breakdown), the host-side breakdown of input time, and the
tf.data input ops as a table that sorts and folds along the iterator
hierarchy (`Iterator::Root::Prefetch::...`). Clicking a step selects it:
`selected_step` says which time range it covers, for the other widgets.
"""

from __future__ import annotations

import re

import numpy as np
import traitlets
from bokeh.palettes import Category10

from ..analysis.core.steps import BREAKDOWN_LABELS
from ..analysis.core.tpu_steps import TPU_BREAKDOWN_LABELS
from ..format import shorten
from ..run import as_run
from ._bokeh import BokehWidget, hover_and_tap
from ._html import data_json, esc, notice, plain_table, sortable_headers, stat_cards
from ._templates import ChartTemplate

BREAKDOWN = BREAKDOWN_LABELS  # column -> label, in XProf's order
HOST = {
    "enqueue": "Enqueue (to the device)",
    "demanded_file_read": "Demanded file read",
    "advanced_file_read": "Advanced file read",
    "preprocessing": "Preprocessing",
    "unclassified": "Other",
}
MIN_STEP_SLOTS = 3  # the step-time graph is at least this many bar widths wide (1-2 steps centred)
MAX_STEP_LABEL = 24  # characters of a step name under its bar
OP_COLUMNS = {
    "op_name": "Input op",
    "count": "Count",
    "time_us": "Total time (µs)",
    "time_percent": "Total %",
    "self_time_us": "Self time (µs)",
    "self_time_percent": "Self %",
    "category": "Category",
}


def _steps_values(steps, title):
    """(the step chart's template, its values) for `steps`: stacked bars, one a step, of
    the breakdown columns used (XProf's TPU breakdown on TPU steps; the step time itself
    where no part has time). The bars are one glyph (a chart template has a fixed set of
    models, whatever the parts): a row per part and step, part by part, each step's
    part times in columns s0, s1, ... for the tooltip."""
    labels = TPU_BREAKDOWN_LABELS if "tc_compute_ms" in steps else BREAKDOWN
    used = [c for c in labels if c in steps and steps[c].abs().sum() > 0]
    parts = [(labels[c], steps[c]) for c in used] or [("Step time", steps["step_time_ms"])]
    n, k = len(steps), len(parts)
    times = np.zeros((STEP_PARTS, n))
    times[:k] = [column.to_numpy(dtype=np.float64) for _, column in parts]
    tops = np.cumsum(times[:k], axis=0)  # (each part on the ones before it, in order)
    names = steps["step_name"].astype(str).tolist()
    colors = Category10[10][: max(k, 3)]
    data = {
        "x": np.tile(np.arange(n, dtype=np.float64), k),
        "bottom": (tops - times[:k]).ravel(),
        "top": tops.ravel(),
        "part": [label for label, _ in parts for _ in range(n)],
        "color": [colors[j] for j in range(k) for _ in range(n)],
        "id": np.tile(np.arange(n, dtype=np.int64), k),  # (a tap selects the step: all its parts)
        "name": names * k,
        "total": np.tile(steps["step_time_ms"].to_numpy(dtype=np.float64), k),
        **{f"s{j}": np.tile(times[j], k) for j in range(STEP_PARTS)},
    }
    # The steps fill the width (4-6 steps are not squeezed into half of it), but at least
    # MIN_STEP_SLOTS bar widths across, centred: one step is one bar, not the whole chart.
    pad = max(MIN_STEP_SLOTS - n, 0) / 2
    values = {
        "title": title,
        "x_start": -0.6 - pad,
        "x_end": n - 0.4 + pad,
        # Long step names (a hostile or odd file) cut: a rotated label would run over the
        # page below the chart; the whole name is in the bar's tooltip.
        "overrides": {i: shorten(name, MAX_STEP_LABEL) for i, name in enumerate(names)},
        "orientation": 0.8 if n > 8 else 0.0,
        "tips": [("step", "@name"), ("step time", "@total{0.000} ms")]
        + [(label, f"@s{j}{{0.000}} ms") for j, (label, _) in enumerate(parts)],
        "data": data,
    }
    # Ticks only where steps are (named after them): every step when few, whole steps when many.
    if n > TICK_EVERY_STEP:
        return MANY_STEPS_CHART, values
    return STEPS_CHART, {**values, "ticks": list(range(n))}


def _steps_chart(*, title, x_start, x_end, overrides, orientation, tips, data, ticks=None):
    """The step chart (`_steps_values`' values; `ticks` None: ticks as Bokeh spaces them,
    whole steps, else one per step there); a tap selects a step (source "steps")."""
    from bokeh.models import BasicTicker, ColumnDataSource, FixedTicker, Range1d
    from bokeh.plotting import figure

    fig = figure(
        height=280,
        sizing_mode="stretch_width",
        title=title,
        x_range=Range1d(x_start, x_end, bounds=(x_start, x_end)),
        x_axis_label="step",
        y_axis_label="ms",
        tools="xpan,xwheel_zoom,reset,save",
    )
    bars = fig.vbar(
        x="x",
        bottom="bottom",
        top="top",
        width=0.8,
        source=ColumnDataSource(data, name="steps"),
        color="color",
        legend_field="part",
        nonselection_fill_alpha=0.35,
    )
    hover_and_tap(fig, bars, tips)
    fig.xaxis.ticker = BasicTicker(min_interval=1) if ticks is None else FixedTicker(ticks=ticks)
    fig.xaxis.major_label_overrides = overrides
    fig.xaxis.major_label_orientation = orientation
    fig.xgrid.visible = False
    fig.legend.orientation = "horizontal"
    fig.add_layout(fig.legend[0], "above")  # not over the first bars
    fig.toolbar.logo = None
    return fig


def steps_figure(steps, title="Step time, by XProf's breakdown (ms)"):
    """The step chart of `steps` as Bokeh builds it (see `steps_item`)."""
    template, values = _steps_values(steps, title)
    return template.build(**values)


def steps_item(steps, title="Step time, by XProf's breakdown (ms)"):
    """The step chart of `steps` (stacked bars, one a step, of the breakdown columns used;
    a tap selects a step, source "steps"), filled from its template."""
    template, values = _steps_values(steps, title)
    return template.item(**values)


#: Above this many steps the axis ticks whole steps as Bokeh spaces them, not each step.
TICK_EVERY_STEP = 40
#: The most parts a step's bar has: XProf's GPU breakdown (its TPU one has fewer).
STEP_PARTS = max(len(BREAKDOWN), len(TPU_BREAKDOWN_LABELS))
_STEPS_PARAMS = {
    "title": "str",
    "x_start": "float",
    "x_end": "float",
    "overrides": "labels",
    "orientation": "float",
    "tips": "pairs",
    "data": {
        "x": np.float64,
        "bottom": np.float64,
        "top": np.float64,
        "part": str,
        "color": str,
        "id": np.int64,
        "name": str,
        "total": np.float64,
        **{f"s{j}": np.float64 for j in range(STEP_PARTS)},
    },
}
STEPS_CHART = ChartTemplate("steps", _steps_chart, {**_STEPS_PARAMS, "ticks": "floats"})
MANY_STEPS_CHART = ChartTemplate("steps.many", _steps_chart, _STEPS_PARAMS)


def step_range(steps, index):
    """The step at row `index` and the time range it covers:
    {step_number, step_name, begin_ps, end_ps, step_time_ms}."""
    row = steps.iloc[int(index)]
    begin = int(row.begin_ps)
    return {
        "step_number": int(row.step_number),
        "step_name": str(row.step_name),
        "begin_ps": begin,
        "end_ps": begin + int(round(row.step_time_ms * 1e9)),
        "step_time_ms": float(row.step_time_ms),
    }


def _plain(path):
    """An iterator path without input indices: A::B[0]::C -> A::B::C."""
    return re.sub(r"\[\d+\]", "", path)


class InputPipelineWidget(BokehWidget):
    """XProf's input pipeline analyzer for a run.

    `sort_by` (an input-op column) and `collapsed` (iterator paths folded) are
    traits Python can read and set; `selected_step` holds the clicked step
    ({step_number, step_name, begin_ps, end_ps, step_time_ms}; {} for none).
    """

    sort_by = traitlets.Enum(
        tuple(OP_COLUMNS), "self_time_us", help="Input-op column sorted on (sizes descending)."
    ).tag(sync=True)
    collapsed = traitlets.List(traitlets.Unicode(), help="Iterator paths whose children are hidden.").tag(sync=True)
    selected_step = traitlets.Dict(help="The clicked step and its time range (ps); {} for none.").tag(sync=True)

    def __init__(self, run, host=None, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self.result = self.run.input_pipeline(host=host)
        if self.result.steps.empty and self.result.input_ops.empty:
            self.html = notice(f"No input pipeline analysis for run {self.run.name}: {self.result.reason}")
            return
        if not self.result.steps.empty:
            self.set_figures({"steps": steps_item(self.result.steps)})
        self.html = self._html()

    @traitlets.observe("sort_by", "collapsed")
    def _redraw(self, change):
        self.html = self._html()

    def on_tap(self, sel):
        if sel.get("source") != "steps" or sel.get("id") is None:
            self.selected_step = {}
        else:
            self.selected_step = step_range(self.result.steps, sel["id"])
        self.html = self._html()

    def on_request(self, kind, params):
        if kind == "sort":
            self.sort_by = str(params["column"])
        elif kind == "toggle":
            path = str(params["path"])
            self.collapsed = (
                [p for p in self.collapsed if p != path] if path in self.collapsed else [*self.collapsed, path]
            )
        else:
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    # --- drawing -----------------------------------------------------------------

    def _op_rows(self):
        """Input ops in hierarchy order: siblings sorted, children of folded paths hidden."""
        ops = self.result.input_ops
        if ops.empty:
            return []
        names = ops["op_name"].astype(str).tolist()
        by_name = dict(zip(names, ops.to_dict("records")))
        # "ForeverRepeat[0]" is input 0 of "ForeverRepeat": match paths without the index.
        plain = {_plain(n): n for n in names}
        parent = {}
        for n in names:  # nearest listed ancestor along the iterator path
            parts = _plain(n).split("::")
            parent[n] = next(
                (plain["::".join(parts[:k])] for k in range(len(parts) - 1, 0, -1) if "::".join(parts[:k]) in plain),
                None,
            )
        children = {}
        for n in names:
            children.setdefault(parent[n], []).append(n)
        descending = self.sort_by not in ("op_name", "category")
        key = lambda n: by_name[n][self.sort_by]  # noqa: E731
        rows, folded = [], set(self.collapsed)

        def visit(name, depth):
            rows.append((name, depth, bool(children.get(name))))
            if name in folded:
                return
            for child in sorted(children.get(name, []), key=key, reverse=descending):
                visit(child, depth + 1)

        for top in sorted(children.get(None, []), key=key, reverse=descending):
            visit(top, 0)
        return [(by_name[n], d, has) for n, d, has in rows]

    def _html(self):
        r = self.result
        cards = (
            stat_cards(
                [
                    ("avg_step_time_ms", "Average step time", f"{r.avg_step_time_ms:,.3f} ms"),
                    ("std_step_time_ms", "Standard deviation", f"{r.std_step_time_ms:,.3f} ms"),
                    ("range_ms", "Min / max", f"{r.min_step_time_ms:,.3f} / {r.max_step_time_ms:,.3f} ms"),
                    ("input_percent", "Waiting for input", f"{r.input_percent:.1f} % of step time"),
                    ("steps", "Steps analysed", f"{len(r.steps)}"),
                ]
            )
            if not r.steps.empty
            else ""
        )
        step = (
            r""
            if not self.selected_step
            else (
                f'<div data-testid="selected-step">Selected {esc(self.selected_step["step_name"])}: '
                f"{self.selected_step['step_time_ms']:,.3f} ms</div>"
            )
        )
        total_host = sum(r.host_breakdown_us.values()) or 1.0
        host = "".join(
            f'<tr><td>{esc(label)}</td><td class=num data-host="{k}">{r.host_breakdown_us.get(k, 0.0):,.1f} µs</td>'
            f'<td><div class="xw-bar" style="width:{200 * r.host_breakdown_us.get(k, 0.0) / total_host:.0f}px"></div>'
            f"</td></tr>"
            for k, label in HOST.items()
        )
        head = sortable_headers(OP_COLUMNS, self.sort_by)
        body = []
        for op, depth, has_children in self._op_rows():
            name = op["op_name"]
            short = name.split("::")[-1] if depth else name
            fold = (
                (
                    f'<span class="xw-fold" data-request="toggle" data-params="{data_json({"path": name})}">'
                    f"{'▸' if name in self.collapsed else '▾'}</span> "
                )
                if has_children
                else ""
            )
            body.append(
                f'<tr data-op="{esc(name)}" title="{esc(name)}"><td style="padding-left:{6 + 14 * depth}px">{fold}'
                f"{esc(short)}</td><td class=num>{op['count']:,}</td><td class=num>{op['time_us']:,.1f}</td>"
                f"<td class=num>{op['time_percent']:.1f}</td><td class=num>{op['self_time_us']:,.1f}</td>"
                f"<td class=num>{op['self_time_percent']:.1f}</td><td>{esc(op['category'])}</td></tr>"
            )
        ops_html = (
            plain_table("input-ops", head, body)
            if body
            else '<div class="xw-note">No tf.data input ops in this profile.</div>'
        )
        reason = f'<div class="xw-note">{esc(r.reason)}</div>' if r.reason else ""
        return f"""
<div class="xw-ip">
  <div class="xw-head"><b>Input pipeline analysis</b></div>
  <div class="xw-verdict" data-testid="recommendation">{esc(r.recommendation)}</div>
  {reason}{cards}
  <div data-figure="steps"></div>{step}
  <h4>Host-side analysis: where the input time went</h4>
  <table data-testid="host-breakdown">{host}</table>
  <h4>Input ops (tf.data), by {esc(OP_COLUMNS[self.sort_by].lower())}</h4>
  {ops_html}
</div>"""


__all__ = ["InputPipelineWidget", "steps_figure", "steps_item", "step_range"]
