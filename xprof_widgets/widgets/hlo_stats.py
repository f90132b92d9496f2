"""HloStatsWidget: every HLO op of the run, its time, FLOP rate and memory bandwidth.

Shows what `Run.hlo_stats()` computes, as XProf's HLO op stats tool does: the table of
HLO ops with XProf's columns (sorted by a click on a header, filtered by op name and
category, the top N shown), and its charts: self time by category, the self time of the
longest ops, and their FLOP rate and memory bandwidth. A click on a row or a bar
selects the op: XProf's op details card (`selected_op`, as the op profile's), with the
way to the graph viewer (a button inside ProfileWidget).
"""

from __future__ import annotations

from functools import cached_property

import numpy as np
import traitlets
from bokeh.palettes import Category10, Category20

from ..format import shorten
from ..run import as_run
from ._bokeh import RANKED_PARAMS, BokehWidget, hover_and_tap, ranked_bars, ranked_layout, selectable_bars
from ._html import esc, note, notice, stat_cards
from ._op_index import OpIndex
from ._table import SortedTable, contains, table_columns
from ._templates import ChartTemplate
from .op_details import op_details, op_details_html

CHART_OPS = 20  # bars in the op charts: the ops of the longest self time that match the filters
TOP_N_CHOICES = (10, 25, 100, 1000)
COLUMNS = table_columns("hlo_stats")  # XProf's headers: table_columns.csv
SORTABLE = tuple(c.key for c in COLUMNS)
#: The analysis' times (ps) shown in µs, as XProf's table shows them.
_MICROSECONDS = {
    "total_time_us": "total_time_ps",
    "avg_time_us": "avg_time_ps",
    "self_time_us": "self_time_ps",
    "avg_self_time_us": "avg_self_time_ps",
}


class HloStatsWidget(SortedTable, BokehWidget):
    """XProf's HLO op stats of a run: a table of every HLO op and its charts.

    `sort_by`, `sort_descending`, `name_filter`, `category_filter` and `top_n` are traits
    Python can read and set; `table` is the rows shown (filtered and sorted, all of them,
    not only the top N), `stats` the analysis (`run.hlo_stats()`, times also in µs).
    `selected_op` holds the op details of the selected op (see `op_details`);
    `select_row(id)` selects a row.
    """

    columns = COLUMNS
    sort_by = traitlets.Enum(SORTABLE, "rank", help="The column the table is sorted on.").tag(sync=True)
    sort_descending = traitlets.Bool(False, help="Largest first.").tag(sync=True)
    name_filter = traitlets.Unicode("", help="Show ops whose name contains this (any case).").tag(sync=True)
    category_filter = traitlets.Unicode("", help="Show ops whose category contains this (any case).").tag(sync=True)
    selected_row = traitlets.Dict(help="The selected op's row, with its `id`; {} for none.").tag(sync=True)
    selected_op = traitlets.Dict(help="op_details() of the selected op; {} for none.").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        stats = self.run.hlo_stats()
        self.stats = stats.assign(**{us: stats[ps] / 1e6 for us, ps in _MICROSECONDS.items()})
        self._ready = True
        if self.stats.empty:
            self.html = notice(f"No HLO op stats for run {self.run.name}: {stats.attrs.get('reason')}.")
            return
        self._redraw_charts()
        self.html = self._html()

    @property
    def empty(self):
        return self.stats.empty

    @property
    def table(self):
        """The rows that match the filters, sorted as shown (index: the row's id)."""
        s = self.stats
        keep = contains(s["hlo_op_name"], self.name_filter) & contains(s["category"], self.category_filter)
        return self.sorted(s[keep])

    # --- state -------------------------------------------------------------------

    @traitlets.observe("name_filter", "category_filter")
    def _refilter(self, change):
        if self._ready and not self.empty:
            self._redraw_charts()
            self.html = self._html()

    tap_source = "ops"

    def select_tapped(self, id):
        self.select_row(id)

    def clear_tapped(self):
        if self.selected_row:
            self.selected_row = {}
            self.selected_op = {}
            self.html = self._html()

    @cached_property
    def _ops(self) -> OpIndex:
        """The op profile's ops by program and name, indexed on the first selection."""
        return OpIndex(self.run)

    def select_row(self, id):
        """Select row `id` (its index in `run.hlo_stats()`): its bars, its row, its op card."""
        if self.empty or not 0 <= int(id) < len(self.stats):
            raise KeyError(f"no HLO op row {id!r}")
        i = int(id)
        row = self.stats.iloc[i]
        self.selected_row = {"id": i, "hlo_op_name": str(row["hlo_op_name"]), "program": str(row["program"])}
        found = self._ops.op(row["program_id"], row["hlo_op_name"])
        self.selected_op = op_details(*found) if found is not None else {}
        want = {"figure": "ops", "source": "ops", "id": i}
        if {k: self.selected.get(k) for k in want} != want:
            self.selected = want
        self.html = self._html()

    # --- browser messages ----------------------------------------------------------

    text_requests = ("name_filter", "category_filter")

    # --- drawing -----------------------------------------------------------------

    @cached_property
    def _colors(self):
        """A colour per category, the same in every chart and every redraw."""
        cats = list(self.stats.groupby("category", sort=False)["self_time_ps"].sum().sort_values(ascending=False).index)
        palette = Category10[10] if len(cats) <= 10 else Category20[20]
        return {c: palette[k % len(palette)] for k, c in enumerate(cats)}

    def _redraw_charts(self):
        shown = self.table
        if shown.empty:
            self.set_figures({})
            return
        top = shown.sort_values("self_time_ps", ascending=False, kind="stable").head(CHART_OPS)
        colors = self._colors
        self.set_figures(
            {
                "categories": self._category_chart(shown, colors),
                "ops": self._op_chart(top, colors),
                "rates": self._rate_chart(top),
            }
        )

    def _category_chart(self, shown, colors):
        by = shown.groupby("category", sort=False)["self_time_us"].sum().sort_values(ascending=False)
        n = len(by)
        total = float(by.sum()) or 1.0
        data = {
            "y": np.arange(n, dtype=np.float64),
            "time": by.to_numpy(np.float64),
            "share": 100 * by.to_numpy(np.float64) / total,
            "category": [str(c) for c in by.index],
            "color": [colors.get(c, "#888888") for c in by.index],
        }
        labels = [shorten(str(c), 40) for c in by.index]
        layout = ranked_layout(n, float(by.max()), labels)
        return CATEGORY_CHART.item(title="Self time by HLO op category (µs)", data=data, **layout)

    @staticmethod
    def _op_labels(top):
        return [f"{r}. {shorten(str(n), 36)}" for r, n in zip(top["rank"], top["hlo_op_name"])]

    def _op_chart(self, top, colors):
        n = len(top)
        layout = ranked_layout(n, float(top["self_time_us"].max()), self._op_labels(top))
        title = f"Self time of the {n} longest HLO ops (µs)"
        return OP_CHART.item(title=title, data=_op_data(top, colors), **layout)

    def _rate_chart(self, top):
        """The same ops' FLOP rate (bars) and memory bandwidth (dots, their own axis)."""
        n = len(top)
        data = {
            "y": np.arange(n, dtype=np.float64),
            "flops": np.nan_to_num(top["flop_rate_gflops"].to_numpy(np.float64)),
            "bw": np.nan_to_num(top["memory_bw_gibs"].to_numpy(np.float64)),
            "name": [shorten(str(v), 120) for v in top["hlo_op_name"]],
        }
        flops_top = float(data["flops"].max()) if n else 0.0
        bw_top = float(data["bw"].max()) if n else 0.0
        # A short title (Bokeh does not wrap one, and a long one ran past a half-width
        # chart): the units are on the two axes.
        layout = ranked_layout(n, flops_top, self._op_labels(top))
        return RATE_CHART.item(title="FLOP rate and memory BW", bw_end=(bw_top or 1.0) * 1.04, data=data, **layout)

    def _card_html(self):
        if not self.selected_row:
            return '<div class="xw-card" data-op-card="">Click an op (a row or a bar) to see its details here.</div>'
        if not self.selected_op:
            return (
                f'<div class="xw-card" data-op-card="{esc(self.selected_row["hlo_op_name"])}" data-testid="no-op">'
                f"<b>{esc(self.selected_row['hlo_op_name'])}</b>: the op profile has no such op "
                f"({esc(self._ops.reason or 'not in its tree')}).</div>"
            )
        return op_details_html(self.selected_op, show_graph=self.hosted)

    def _html(self):
        s = self.stats
        table = self.table
        shown = table.head(self.top_n)
        total_us = float(s["self_time_us"].sum())
        bound = s.groupby("bound_by")["self_time_us"].sum()
        stats = stat_cards(
            [
                ("ops", "HLO ops", f"{len(s):,}"),
                ("programs", "Programs", f"{s['program_id'].nunique():,}"),
                ("total_time", "Total self time", f"{total_us / 1e3:,.3f} ms"),
                ("bound_by", "Self time by bound", _shares(bound, total_us)),
            ]
        )
        controls = (
            f'<label>Op name <input type="text" data-request="name_filter" value="{esc(self.name_filter)}" '
            f'placeholder="filter" data-testid="name-filter"></label>'
            f'<label>Category <input type="text" data-request="category_filter" '
            f'value="{esc(self.category_filter)}" placeholder="filter" data-testid="category-filter"></label>'
            + self.top_n_control(TOP_N_CHOICES)
        )
        matched = f"{len(table):,} of {len(s):,} HLO ops match" if len(table) != len(s) else f"{len(s):,} HLO ops"
        cut = f", the first {len(shown):,} shown" if len(shown) < len(table) else ""
        charts = (
            '<div class="xw-charts"><div data-figure="categories"></div><div data-figure="rates"></div></div>'
            if len(table)
            else '<div class="xw-note" data-testid="no-match">No HLO op matches the filters.</div>'
        )
        grid = self.table_html(
            shown,
            "hlo-table",
            total_rows=len(table),
            select_in=("ops", "ops"),
            selected=self.selected_row.get("id"),
        )
        return f"""
<div class="xw-hs">
  <div class="xw-head"><b>HLO op stats</b> {controls}</div>
  {stats}{note(s.attrs.get("notes", ""))}
  <div class="xw-top">
    <div class="xw-chart">{'<div data-figure="ops"></div>' if len(table) else ""}</div>
    <div class="xw-side" data-testid="op-card-area">{self._card_html()}</div>
  </div>
  {charts}
  <div class="xw-rows" data-testid="row-count">{esc(matched + cut)}. Click a header to sort, a row to see its op.</div>
  <div class="xw-scroll xw-table-wrap">{grid}</div>
</div>"""


def _shares(times, total):
    """Each part's share of `total`, largest first ("HBM 60 % / Compute 40 %")."""
    if total <= 0 or times.empty:
        return "n/a"
    return " / ".join(
        f"{k or 'unknown'} {100 * v / total:.0f} %" for k, v in times.sort_values(ascending=False).items()
    )


__all__ = ["HloStatsWidget"]


def _op_data(top, colors):
    """The op charts' columns of the `top` rows."""
    return {
        "id": top.index.to_numpy(np.int32),
        "y": np.arange(len(top), dtype=np.float64),
        "time": top["self_time_us"].to_numpy(np.float64),
        "occurrences": top["occurrences"].to_numpy(np.float64),
        "name": [shorten(str(n), 120) for n in top["hlo_op_name"]],
        "program": top["program"].astype(str).tolist(),
        "category": top["category"].astype(str).tolist(),
        "color": [colors.get(c, "#888888") for c in top["category"]],
    }


def _category_figure(*, data, **layout):
    from bokeh.models import ColumnDataSource, NumeralTickFormatter

    fig = ranked_bars(**layout, min_width=300)
    src = ColumnDataSource(data, name="categories")
    bars = fig.hbar(y="y", right="time", height=0.72, source=src, fill_color="color", line_color=None)
    fig.xaxis.formatter = NumeralTickFormatter(format="0,0.[000]")
    hover_and_tap(fig, bars, [("category", "@category"), ("self time", "@time{0,0.000} µs (@share{0.0} %)")])
    return fig


def _op_figure(*, data, **layout):
    from bokeh.models import NumeralTickFormatter

    fig = ranked_bars(**layout)
    bars = selectable_bars(fig, data, "ops", "time")
    fig.xaxis.formatter = NumeralTickFormatter(format="0,0.[000]")
    hover_and_tap(
        fig,
        bars,
        [
            ("op", "@name"),
            ("program", "@program"),
            ("category", "@category"),
            ("self time", "@time{0,0.000} µs"),
            ("occurrences", "@occurrences{0,0}"),
        ],
    )
    return fig


def _rate_figure(*, data, bw_end, **layout):
    from bokeh.models import ColumnDataSource, LinearAxis, NumeralTickFormatter, Range1d

    fig = ranked_bars(**layout)
    src = ColumnDataSource(data)
    fig.xaxis[0].axis_label = "FLOP rate, GFLOP/s (bars)"
    fig.extra_x_ranges = {"bw": Range1d(0, bw_end)}
    fig.add_layout(LinearAxis(x_range_name="bw", axis_label="memory BW, GiB/s (dots)"), "above")
    bars = fig.hbar(y="y", right="flops", height=0.6, source=src, fill_color="#4e79a7", line_color=None)
    fig.scatter(x="bw", y="y", source=src, x_range_name="bw", size=8, color="#e15759")
    fig.xaxis[0].formatter = NumeralTickFormatter(format="0,0.[00]")
    tips = [("op", "@name"), ("FLOP rate", "@flops{0,0.00} GFLOP/s"), ("memory", "@bw{0,0.00} GiB/s")]
    hover_and_tap(fig, bars, tips, tap=False)  # a tap selects in the time chart and the table
    return fig


_OP_COLUMNS = {
    "id": np.int32,
    "y": np.float64,
    "time": np.float64,
    "occurrences": np.float64,
    "name": str,
    "program": str,
    "category": str,
    "color": str,
}
CATEGORY_CHART = ChartTemplate(
    "hlo_stats.categories",
    _category_figure,
    {
        **RANKED_PARAMS,
        "data": {"y": np.float64, "time": np.float64, "share": np.float64, "category": str, "color": str},
    },
)
OP_CHART = ChartTemplate("hlo_stats.ops", _op_figure, {**RANKED_PARAMS, "data": _OP_COLUMNS})
RATE_CHART = ChartTemplate(
    "hlo_stats.rates",
    _rate_figure,
    {**RANKED_PARAMS, "bw_end": "float", "data": {"y": np.float64, "flops": np.float64, "bw": np.float64, "name": str}},
)
