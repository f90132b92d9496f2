"""CompareWidget: two runs side by side, as `xw.compare(run_a, run_b)` computes them.

The summary in sentences, the average step of each run as one stacked bar
(XProf's breakdown), then tables: the step breakdown with deltas, the HLO ops
whose time changed most (and those that ran in one run only), the modules'
peak heap and the allocators' peak memory. Where a part cannot be compared,
the widget says why. Every table is a DataFrame on `widget.result`.
"""

from __future__ import annotations

import math

import numpy as np
from bokeh.palettes import Category10

from ..analysis.compare import (
    DISJOINT_BREAKDOWN,
    STEP_QUANTITIES,
    CompareResult,
    compare,
)
from ..format import change, number, percent, size_short
from ..run import as_run
from ._bokeh import BokehWidget, hover_and_tap
from ._html import esc, plain_table

#: Op rows shown in the table (all are in `result.ops`).
OP_ROWS = 30


def _pct(ratio):
    return change(ratio, prefix="", suffix="")


def _cls(delta):
    """Slower / bigger is a regression (red), faster / smaller an improvement (green)."""
    if delta is None or not math.isfinite(delta) or delta == 0:
        return ""
    return ' class="num up"' if delta > 0 else ' class="num down"'


def _ms(x, signed=False):
    return number(x, "+,.3f" if signed else ",.3f", missing="")


def _size(x, signed=False):
    return size_short(x)


def _diff_cells(a, b, delta, ratio, text):
    """The cells of one quantity: in run a, in run b, b - a (coloured) and the change;
    `text(value, signed)` writes a value."""
    return (
        f"<td class=num>{esc(text(a))}</td><td class=num>{esc(text(b))}</td>"
        f"<td{_cls(delta)}>{esc(text(delta, True))}</td><td class=num>{_pct(ratio)}</td>"
    )


def breakdown_figure(result: CompareResult):
    """One stacked bar per run: its average step, by XProf's breakdown (ms)."""
    from bokeh.models import ColumnDataSource, DataRange1d, Range1d
    from bokeh.plotting import figure

    steps = result.steps.set_index("quantity")
    used = [q for q in DISJOINT_BREAKDOWN if q in steps.index]
    runs = [f"a: {result.name_a}", f"b: {result.name_b}"]
    data = {q: np.nan_to_num(steps.loc[q, ["a_ms", "b_ms"]].to_numpy(dtype=np.float64)) for q in used}
    # Numeric x with labels, as the other step charts: the bundled BokehJS draws
    # these; a categorical (FactorRange) axis failed to embed in the browser.
    data["x"] = np.array([0.0, 1.0])
    data["run"] = runs
    data["total"] = np.nan_to_num(steps.loc["step_time_ms", ["a_ms", "b_ms"]].to_numpy(dtype=np.float64))
    fig = figure(
        x_range=Range1d(start=-0.6, end=1.6),
        y_range=DataRange1d(start=0),
        height=260,
        width=560,
        title="Average step time (ms), by XProf's breakdown",
        y_axis_label="ms",
        tools="save,reset",
    )
    colors = Category10[10][: max(len(used), 3)]
    src = ColumnDataSource(data, name="compare_steps")
    bars = fig.vbar_stack(
        used, x="x", width=0.6, source=src, color=colors[: len(used)], legend_label=[STEP_QUANTITIES[q] for q in used]
    )
    hover_and_tap(
        fig,
        bars,
        [("run", "@run"), ("step time", "@total{0.000} ms")]
        + [(STEP_QUANTITIES[q], f"@{q}{{0.000}} ms") for q in used],
        tap=False,
    )
    fig.xaxis.ticker = [0, 1]
    fig.xaxis.major_label_overrides = {0: "run a", 1: "run b"}  # names are long: in the hover and the header
    fig.xgrid.grid_line_color = None
    fig.add_layout(fig.legend[0], "right")  # not over the bars
    fig.toolbar.logo = None
    return fig


class CompareWidget(BokehWidget):
    """Run b against run a: `CompareWidget(run_a, run_b)` (Runs or paths), or
    `CompareWidget(result)` with a CompareResult. `result` holds the numbers."""

    def __init__(self, run_a, run_b=None, max_ops=OP_ROWS, **kwargs):
        super().__init__(**kwargs)
        self.result = run_a if isinstance(run_a, CompareResult) else compare(as_run(run_a), as_run(run_b))
        self.max_ops = max_ops
        r = self.result
        if r.avg_step_time_a_ms is not None or r.avg_step_time_b_ms is not None:
            self.set_figures({"steps": breakdown_figure(r)})
        self.html = self._html()

    def _note(self, text, testid):
        return f'<div class="xw-note" data-testid="{testid}">{esc(text)}</div>' if text else ""

    def _steps_html(self):
        r = self.result
        rows = (
            f"<tr><td>{esc(x.label)}</td>{_diff_cells(x.a_ms, x.b_ms, x.delta_ms, x.ratio, _ms)}</tr>"
            for x in r.steps.itertuples(index=False)
        )
        headers = ["Average per step (ms)", "a", "b", "b - a", "change"]
        table = plain_table("steps", headers, rows, scroll=False)
        counts = f"<div>Steps: {r.step_count_a} in a, {r.step_count_b} in b.</div>"
        return table + counts + self._note(r.steps_reason, "steps-reason")

    def _ops_html(self):
        r = self.result
        if r.ops.empty:
            return self._note(r.ops_reason or "No HLO ops in either run.", "ops-reason")

        def util(x):
            return percent(x, digits=1) if x is not None and math.isfinite(x) else ""

        shown = r.ops.head(self.max_ops)
        # Utilisation needs the chip's peaks; XLA:CPU has none, so no empty columns.
        has_util = shown[["flops_utilization_a", "flops_utilization_b"]].notna().to_numpy().any()
        rows = (
            f'<tr data-present="{esc(x.present)}"><td>{esc(x.hlo_op_name)}</td><td>{esc(x.program)}</td>'
            f"<td>{esc(x.category)}</td><td>{esc(x.present)}</td>"
            + _diff_cells(x.total_time_a_ps / 1e9, x.total_time_b_ps / 1e9, x.delta_ps / 1e9, x.ratio, _ms)
            + (
                f"<td class=num>{util(x.flops_utilization_a)}</td><td class=num>{util(x.flops_utilization_b)}</td>"
                if has_util
                else ""
            )
            + "</tr>"
            for x in shown.itertuples(index=False)
        )
        more = (
            f"<div>{len(r.ops) - len(shown)} more ops: see the widget's .result.ops</div>"
            if len(r.ops) > len(shown)
            else ""
        )
        only = f"<div>{len(r.ops_only_a)} op(s) ran only in a, {len(r.ops_only_b)} only in b.</div>"
        headers = ["Op", "Program", "Category", "In", "Total a (ms)", "Total b (ms)", "b - a (ms)", "change"]
        headers += ["FLOPS util. a", "FLOPS util. b"] if has_util else []
        return plain_table("ops", headers, rows, len(r.ops)) + more + only + self._note(r.ops_reason, "ops-reason")

    def _memory_html(self):
        r = self.result
        parts = []
        if len(r.modules):
            rows = (
                f"<tr><td>{esc(x.name)}</td><td>{esc(x.module_a if isinstance(x.module_a, str) else '')}</td>"
                f"<td>{esc(x.module_b if isinstance(x.module_b, str) else '')}</td>"
                + _diff_cells(x.peak_heap_a_bytes, x.peak_heap_b_bytes, x.delta_bytes, x.ratio, _size)
                + f"<td>{esc(x.matched_by)}</td></tr>"
                for x in r.modules.itertuples(index=False)
            )
            headers = ["Module", "a", "b", "Peak heap a", "Peak heap b", "b - a", "change", "Matched by"]
            parts.append(plain_table("modules", headers, rows))
        parts.append(self._note(r.modules_reason, "modules-reason"))
        if len(r.allocators):
            rows = (
                f"<tr><td>{esc(x.memory_id)}</td>"
                + _diff_cells(x.peak_bytes_in_use_a, x.peak_bytes_in_use_b, x.delta_bytes, x.ratio, _size)
                + "</tr>"
                for x in r.allocators.itertuples(index=False)
            )
            headers = ["Memory id", "Peak in use a", "Peak in use b", "b - a", "change"]
            parts.append(plain_table("allocators", headers, rows, scroll=False))
        parts.append(self._note(r.allocators_reason, "allocators-reason"))
        return "".join(parts)

    def _html(self):
        r = self.result
        summary = "".join(f"<li>{esc(s)}</li>" for s in r.summary)
        return f"""
<div class="xw-cmp">
  <div class="xw-head"><b>Run b ({esc(r.name_b)}) against run a ({esc(r.name_a)})</b></div>
  <ul data-testid="summary">{summary}</ul>
  <div data-figure="steps"></div>
  <h4>Step time</h4>
  {self._steps_html()}
  <h4>HLO ops, by the change in total time</h4>
  {self._ops_html()}
  <h4>Memory</h4>
  {self._memory_html()}
</div>"""


__all__ = ["CompareWidget", "breakdown_figure"]
