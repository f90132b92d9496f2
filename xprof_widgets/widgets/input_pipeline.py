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


def steps_figure(steps, title="Step time, by XProf's breakdown (ms)"):
    """Stacked bars, one a step, of the breakdown columns used (XProf's TPU breakdown on TPU
    steps); a tap selects a step (source "steps")."""
    from bokeh.models import BasicTicker, ColumnDataSource, FixedTicker, Range1d
    from bokeh.plotting import figure

    labels = TPU_BREAKDOWN_LABELS if "tc_compute_ms" in steps else BREAKDOWN
    used = [c for c in labels if c in steps and steps[c].abs().sum() > 0]
    data = {c: steps[c].to_numpy(dtype=np.float64) for c in used}
    data["x"] = np.arange(len(steps), dtype=np.float64)
    data["id"] = np.arange(len(steps))
    data["name"] = steps["step_name"].astype(str).tolist()
    data["total"] = steps["step_time_ms"].to_numpy(dtype=np.float64)
    src = ColumnDataSource(data, name="steps")
    n = len(steps)
    # The steps fill the width (4-6 steps are not squeezed into half of it), but at least
    # MIN_STEP_SLOTS bar widths across, centred: one step is one bar, not the whole chart.
    pad = max(MIN_STEP_SLOTS - n, 0) / 2
    x_range = Range1d(-0.6 - pad, n - 0.4 + pad, bounds=(-0.6 - pad, n - 0.4 + pad))
    fig = figure(
        height=280,
        sizing_mode="stretch_width",
        title=title,
        x_range=x_range,
        x_axis_label="step",
        y_axis_label="ms",
        tools="xpan,xwheel_zoom,reset,save",
    )
    colors = Category10[10][: max(len(used), 3)]
    bars = fig.vbar_stack(
        used,
        x="x",
        width=0.8,
        source=src,
        color=colors[: len(used)],
        legend_label=[labels[c] for c in used],
        nonselection_fill_alpha=0.35,
    )
    hover_and_tap(
        fig,
        bars,
        [("step", "@name"), ("step time", "@total{0.000} ms")] + [(labels[c], f"@{c}{{0.000}} ms") for c in used],
    )
    # Ticks only where steps are (named after them): every step when few, whole steps when many.
    fig.xaxis.ticker = FixedTicker(ticks=list(range(n))) if n <= 40 else BasicTicker(min_interval=1)
    # Long step names (a hostile or odd file) cut: a rotated label would run over the page
    # below the chart; the whole name is in the bar's tooltip.
    fig.xaxis.major_label_overrides = {i: shorten(name, MAX_STEP_LABEL) for i, name in enumerate(data["name"])}
    fig.xaxis.major_label_orientation = 0.8 if n > 8 else 0
    fig.xgrid.visible = False
    fig.legend.orientation = "horizontal"
    fig.add_layout(fig.legend[0], "above")  # not over the first bars
    fig.toolbar.logo = None
    return fig


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
            self.set_figures({"steps": steps_figure(self.result.steps)})
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


__all__ = ["InputPipelineWidget", "steps_figure", "step_range"]
