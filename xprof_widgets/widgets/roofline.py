"""RooflineWidget: each op against the device's roofs, on a log-log chart.

Shows what `Run.roofline_model()` computes, as XProf's roofline model tool does: the
device's peaks (FLOP rate, HBM and on-chip bandwidths, ridge points), the roofline
chart (operational intensity in FLOP/byte against the measured FLOP rate in GFLOP/s,
log-log: the peak FLOP rate as a flat roof, each memory bandwidth as a slanted roof up
to its ridge point; each op a point sized by its time and coloured by its category,
the whole program a diamond), filters by step (XProf's "Total" first), category, op
name and infeed/outfeed, and the table of ops. Ops with no FLOPs or no bytes cannot
sit on log axes: they stay in the table and the page says how many the chart leaves
out. Beyond XProf, a click on a point or a row shows the op details card of that op
(`selected_op`, as the op profile's).
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import replace
from functools import cached_property

import numpy as np
import pandas as pd
import traitlets
from bokeh.palettes import Category10, Category20

from ..analysis.core.records import GIBI_IN_GIGA
from ..run import as_run
from ._bokeh import BokehWidget, hover_and_tap, one_of, selection_look, strip_chrome
from ._html import esc, notice, options, stat_cards
from ._op_index import OpIndex
from ._table import SortedTable, contains, table_columns
from ._templates import ChartTemplate
from .op_details import op_details, op_details_html

TOP_N_CHOICES = (25, 100, 1000)
PROGRAM = "Program"
PROGRAM_COLOR = "#222222"
COMPUTE_ROOF_COLOR = "#c0392b"
MEMORY_ROOF_COLORS = ("#1f4e79", "#6a51a3", "#8c6d31", "#2e7d32", "#ad494a")
# XProf's source cell: a div of class source-info-cell, the stack in its (single-quoted)
# title, FILE:LINE as its text.
_SOURCE_CELL = re.compile(r"title=['](?P<stack>[^']*)[']>(?P<text>.*)</div>", re.DOTALL)
COLUMNS = table_columns("roofline")  # XProf's headers: table_columns.csv
_GPU_HEADERS = {"vmem_write_bw": "SHM/L1 BW (GiB/s)"}
SORTABLE = tuple(c.key for c in COLUMNS)


def source_text(cell):
    """The file:line of XProf's source cell (HTML), as plain text ("" for none)."""
    m = _SOURCE_CELL.search(cell or "")
    return html.unescape(m.group("text")) if m else ""


def roofs(attrs):
    """The roofs of the roofline model's `attrs`: (peak FLOP rate in GFLOP/s (0: unknown),
    [(label, bandwidth GiB/s, ridge point FLOP/byte)] of the memories with a known peak).
    GPUs: HBM and shared memory/L1 (XProf's SHM/L1); TPUs: HBM, CMEM and VMEM."""
    peak = float(attrs.get("peak_flop_rate") or 0.0)
    gpu = "GPU" in str(attrs.get("device_type", ""))
    names = [("HBM", "hbm")]
    names += (
        [("SHM/L1", "vmem_write")]
        if gpu
        else [
            ("CMEM read", "cmem_read"),
            ("CMEM write", "cmem_write"),
            ("VMEM read", "vmem_read"),
            ("VMEM write", "vmem_write"),
        ]
    )
    memories = []
    for label, key in names:
        bw = float(attrs.get(f"peak_{key}_bw") or 0.0)
        if bw > 0:
            ridge = peak / (bw * GIBI_IN_GIGA) if peak > 0 else 0.0
            memories.append((label, bw, ridge))
    return peak, memories


def _nice(x):
    """A number in a few significant digits, with thousands separators."""
    if x == 0:
        return "0"
    if abs(x) >= 100:
        return f"{x:,.0f}"
    return f"{x:,.3g}"


class RooflineWidget(SortedTable, BokehWidget):
    """XProf's roofline model of a run: the device's roofs, each op as a point, the table.

    `step` ("Total", "Average" or a step number), `category` ("All" or one),
    `include_infeed_outfeed`, `name_filter` (op name), `sort_by`, `sort_descending`
    and `top_n` are traits Python can read and set. `model` is the analysis' frame,
    `rows` the rows of the step and filters (index: the row in `model`), `table` them
    in the order shown, `points` those drawn (FLOPs and bytes above zero).
    `selected_op` is the op details of the clicked op (with `id`, its row in `model`);
    `select_row(id)` selects one.
    """

    step = traitlets.Unicode("Total", help='"Total", "Average" or a step number.').tag(sync=True)
    category = traitlets.Unicode("All", help='"All" or one category of op.').tag(sync=True)
    include_infeed_outfeed = traitlets.Bool(True, help="XProf's rows with infeed/outfeed ops (and their time).").tag(
        sync=True
    )
    name_filter = traitlets.Unicode("", help="Show ops whose name contains this (any case).").tag(sync=True)
    columns = COLUMNS
    sort_by = traitlets.Enum(SORTABLE, "rank", help="The column the table is sorted on.").tag(sync=True)
    sort_descending = traitlets.Bool(False, help="Largest first.").tag(sync=True)
    selected_op = traitlets.Dict(help="op_details() of the clicked op, with its row `id`; {} for none.").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        model = self.run.roofline_model()
        self.model = model.copy()
        if "source_info" in self.model:
            self.model["source"] = [source_text(c) for c in self.model["source_info"]]
        self.peak_flop_rate, self.memory_roofs = roofs(model.attrs)
        # The rows without the model's attrs: pandas deep-copies a frame's attrs into every
        # frame made from it (thousands of copies a draw, 10 ms).
        self._plain = self.model.copy(deep=False)
        self._plain.attrs = {}
        # Rows by (step, infeed/outfeed choice) and by the filters too, each found once: a
        # draw asks for them a dozen times (each a filter over the model's rows).
        self._step_text = self._plain["step"].astype(str).to_numpy(object)
        self._found: dict = {}
        self._rows: tuple | None = None
        cats = self._plain.loc[self._plain["category"] != PROGRAM].groupby("category", sort=False)["total_self_time"]
        order = list(cats.sum().sort_values(ascending=False, kind="stable").index) if len(self.model) else []
        palette = Category10[10] if len(order) <= 10 else Category20[20]
        self._colors = {c: palette[i % len(palette)] for i, c in enumerate(order)}
        self._colors[PROGRAM] = PROGRAM_COLOR
        self._ready = True
        if self.model.empty:
            self.html = notice(f"No roofline model for run {self.run.name}: {model.attrs.get('reason')}.")
            return
        self._redraw()

    @property
    def steps(self):
        """The steps of the model, in its order (XProf's "Total" first)."""
        return list(pd.unique(self.model["step"].astype(str))) if len(self.model) else []

    # --- state -------------------------------------------------------------------

    @traitlets.validate("step")
    def _check_step(self, proposal):
        return one_of(proposal["value"], self.steps, "step") if self._ready and len(self.model) else proposal["value"]

    @traitlets.observe("step", "category", "include_infeed_outfeed", "name_filter")
    def _refilter(self, change):
        if self._ready and not self._quiet and not self.model.empty:
            self._redraw()

    @property
    def empty(self):
        return self.model.empty

    tap_source = "ops"
    tap_selection = "selected_op"

    def select_tapped(self, id):
        self.select_row(id)

    def _step_rows(self):
        key = (self.step, self.include_infeed_outfeed)
        if key not in self._found:
            m = self._plain
            keep = (self._step_text == self.step) & (
                m["include_infeed_outfeed"].to_numpy(bool) == self.include_infeed_outfeed
            )
            self._found[key] = m[keep]
        return self._found[key]

    def categories(self):
        """The categories of the step's rows, the longest first (Program last)."""
        cats = list(pd.unique(self._step_rows()["category"]))
        return sorted(cats, key=lambda c: (c == PROGRAM, list(self._colors).index(c) if c in self._colors else 0))

    @property
    def rows(self):
        """The rows of the step and filters, in the model's order (index: the row in `model`)."""
        key = (self.step, self.include_infeed_outfeed, self.name_filter, self.category)
        if self._rows is None or self._rows[0] != key:  # (the last filters' only: one per keystroke)
            r = self._step_rows()
            keep = contains(r["operation"], self.name_filter)
            if self.category != "All":
                keep &= (r["category"] == self.category).to_numpy(bool)
            self._rows = (key, r[keep])
        return self._rows[1]

    @property
    def table(self):
        """`rows` in the order shown."""
        return self.sorted(self.rows)

    @property
    def points(self):
        """The rows drawn: operational intensity and FLOP rate both above zero."""
        r = self.rows
        x = r["operational_intensity"].to_numpy(np.float64)
        y = r["measured_flop_rate"].to_numpy(np.float64)
        return r[np.isfinite(x) & np.isfinite(y) & (x > 0) & (y > 0)]

    @cached_property
    def _ops(self) -> OpIndex:
        """The op profile's ops by program and name, indexed on the first selection."""
        return OpIndex(self.run)

    def select_row(self, id):
        """Select row `id` of `model`: its point, its table row, its op's details card."""
        i = int(id)
        if not 0 <= i < len(self.model):
            raise KeyError(f"no roofline row {id!r}")
        row = self.model.iloc[i]
        found = None
        if row["category"] == PROGRAM:
            if self._ops.root is not None and str(row["step"]) == "Total":
                found = (self._ops.root, None)
        else:
            found = self._ops.op(row["hlo_module_id"], row["operation"])
        if found is not None:
            details = op_details(*found)
            if row["category"] == PROGRAM:
                details["name"] = f"{PROGRAM} (the whole profile)"
        else:
            details = {
                "name": str(row["operation"]),
                "kind": "roofline row",
                "category": str(row["category"]),
                "program": str(row["hlo_module_id"]),
                "occurrences": int(row["occurrences"]),
                "total_time_ps": float(row["total_time"]) * 1e6,
            }
        self.selected_op = dict(details, id=i)
        want = {"figure": "roofline", "source": "ops", "id": i}
        if {k: self.selected.get(k) for k in want} != want:
            self.selected = want
        self.html = self._html()

    # --- browser messages ----------------------------------------------------------

    text_requests = ("step", "category", "name_filter")

    def on_request(self, kind, params):
        if kind == "include_infeed_outfeed":
            self.include_infeed_outfeed = bool(params.get("value"))
        elif not self.table_request(kind, params):
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    # --- drawing -----------------------------------------------------------------

    def _redraw(self):
        if self.category != "All" and self.category not in self.categories():
            with self.quietly():
                self.category = "All"  # the new step has no such category
        points = self.points
        self.set_figures({"roofline": self._chart(points)} if len(points) else {})
        if self.selected_op and self.selected_op.get("id") not in set(self.rows.index):
            self.selected_op = {}
            self.selected = {}
        self.html = self._html()

    def _chart(self, points):
        x = points["operational_intensity"].to_numpy(np.float64)
        y = points["measured_flop_rate"].to_numpy(np.float64)
        t = points["total_time"].to_numpy(np.float64)
        cat = points["category"].astype(str).to_numpy(object)
        is_program = cat == PROGRAM
        ops_t = t[~is_program]
        t_max = float(ops_t.max()) if len(ops_t) else 1.0
        size = np.where(is_program, 15.0, 7.0 + 23.0 * np.sqrt(np.clip(t, 0, None) / (t_max or 1.0)))
        peak, memories = self.peak_flop_rate, self.memory_roofs
        ridges = [r for _, _, r in memories if r > 0]
        xs = np.concatenate([x, ridges]) if ridges else x
        ys = np.concatenate([y, [peak]]) if peak > 0 else y
        x_lo = 10 ** math.floor(math.log10(xs.min()) - 0.5)
        x_hi = 10 ** math.ceil(math.log10(xs.max()) + 0.5)
        y_lo = 10 ** math.floor(math.log10(ys.min()) - 0.5)
        y_hi = 10 ** math.ceil(math.log10(ys.max()) + 0.3)
        ops = {
            "id": points.index.to_numpy(np.int32),
            "x": x,
            "y": y,
            "size": size,
            "time": t,
            "name": points["operation"].astype(str).tolist(),
            "category": cat.tolist(),
            "color": [self._colors.get(c, "#888888") for c in cat],
            "marker": np.where(is_program, "diamond", "circle").tolist(),
            "program": points["hlo_module_id"].astype(str).tolist(),
            "bound_by": points["bound_by"].astype(str).tolist(),
            "efficiency": 100 * points["roofline_efficiency"].to_numpy(np.float64),
            "occurrences": points["occurrences"].to_numpy(np.float64),
        }
        # The roofs: each memory up to its ridge point, then the peak FLOP rate.
        roofs = []  # (x0, y0, x1, y1, width, label, colour, dash)
        for k, (label, bw, ridge) in enumerate(memories):
            end = ridge if ridge > 0 else x_hi
            gflops_per_flop_byte = bw * GIBI_IN_GIGA  # GiB/s -> GB/s: GFLOP/s per FLOP/byte
            roofs.append(
                (
                    x_lo,
                    gflops_per_flop_byte * x_lo,
                    end,
                    gflops_per_flop_byte * end,
                    2.0,
                    f"{label} {_nice(bw)} GiB/s" + (f" (ridge {_nice(ridge)})" if ridge else ""),
                    MEMORY_ROOF_COLORS[k % len(MEMORY_ROOF_COLORS)],
                    "solid" if k == 0 else "dashed",
                )
            )
        if peak > 0:
            start = min(ridges) if ridges else x_lo
            roofs.append(
                (start, peak, x_hi, peak, 2.5, f"Peak {_nice(peak / 1e3)} TFLOP/s", COMPUTE_ROOF_COLOR, "solid")
            )
        columns = list(zip(*roofs)) if roofs else [[]] * len(_ROOF_COLUMNS)
        roof_data = {
            k: np.array(v, dtype=np.float64) if k in _ROOF_NUMBERS else [str(x) for x in v]
            for k, v in zip(_ROOF_COLUMNS, columns)
        }
        # The key of the categories: a row per category, its first point's marker and
        # colour, in the categories' order (Program last).
        order = list(self._colors)
        firsts = pd.Series(np.arange(len(cat))).groupby(cat, sort=False).first()
        shown = sorted(firsts.index, key=lambda c: order.index(c) if c in order else len(order))
        first = firsts[shown].to_numpy(np.int64) if shown else np.zeros(0, np.int64)
        key = {
            "x": np.full(len(first), np.nan),
            "y": np.full(len(first), np.nan),
            "category": [str(c) for c in shown],
            "marker": [ops["marker"][i] for i in first],
            "color": [ops["color"][i] for i in first],
        }
        device = self.model.attrs.get("device_type") or "device"
        return ROOFLINE.item(
            title=f"Roofline of {device} (step {self.step})",
            x_start=float(x_lo),
            x_end=float(x_hi),
            y_start=float(y_lo),
            y_end=float(y_hi),
            roofs=roof_data,
            ops=ops,
            key=key,
        )

    def _roof_cards(self):
        a = self.model.attrs
        cards = [
            ("device_type", "Device", a.get("device_type") or "unknown"),
            (
                "peak_flop_rate",
                "Peak FLOP rate",
                f"{self.peak_flop_rate / 1e3:,.1f} TFLOP/s" if self.peak_flop_rate > 0 else "unknown",
            ),
        ]
        for label, bw, ridge in self.memory_roofs:
            key = label.lower().replace(" ", "_").replace("/", "_")
            cards.append((f"peak_{key}_bw", f"Peak {label} bandwidth", f"{bw:,.1f} GiB/s"))
            if ridge > 0:
                cards.append((f"{key}_ridge_point", f"{label} ridge point", f"{ridge:,.2f} FLOP/byte"))
        program = self._step_rows()
        program = program[program["category"] == PROGRAM]
        if len(program):
            p = program.iloc[0]
            cards.append(
                (
                    "program_flop_rate",
                    f"Program FLOP rate (step {self.step})",
                    f"{p['measured_flop_rate']:,.2f} GFLOP/s",
                )
            )
            cards.append(("program_bound_by", "Program bound by", str(p["bound_by"])))
        return stat_cards(cards)

    def _card_html(self):
        op = self.selected_op
        if not op:
            return '<div class="xw-card" data-op-card="">Click an op (a point or a row) to see its details here.</div>'
        i = op["id"]
        row = self.model.iloc[i]
        if op.get("kind") == "roofline row":
            card = (
                f'<div class="xw-card" data-op-card="{esc(op["name"])}"><b data-testid="op-card-name">'
                f'{esc(op["name"])}</b><div class="xw-note">Not in the op profile: no HLO op details.</div></div>'
            )
        else:
            card = op_details_html(op, show_graph=self.hosted)
        numbers = [
            ("Operational intensity", f"{row['operational_intensity']:,.3f} FLOP/byte"),
            ("Measured FLOP rate", f"{row['measured_flop_rate']:,.2f} GFLOP/s"),
            ("Memory bandwidth", f"{row['measured_memory_bw']:,.2f} GiB/s"),
            ("Bound by", row["bound_by"]),
            ("Roofline efficiency", f"{100 * row['roofline_efficiency']:,.2f} %"),
            ("Optimal FLOP rate", f"{row['optimal_flop_rate']:,.2f} GFLOP/s"),
        ]
        if row.get("source"):
            numbers.append(("Source", row["source"]))
        body = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in numbers)
        return (
            f'{card}<div class="xw-roof-numbers"><b>On the roofline</b>'
            f'<table data-testid="roofline-numbers">{body}</table></div>'
        )

    def _html(self):
        rows = self.rows
        table = self.table
        shown = table.head(self.top_n)
        points = self.points
        left_out = len(rows) - len(points)
        steps = self.steps
        controls = (
            f'<label>Step <select data-request="step" data-testid="step">{options(steps, self.step)}</select></label>'
            f'<label>Category <select data-request="category" data-testid="category">'
            f"{options(['All', *self.categories()], self.category)}</select></label>"
            f'<label>Operation <input type="text" data-request="name_filter" value="{esc(self.name_filter)}" '
            f'placeholder="filter" data-testid="name-filter"></label>'
            f'<label><input type="checkbox" data-request="include_infeed_outfeed" data-testid="infeed-outfeed"'
            f"{' checked' if self.include_infeed_outfeed else ''}> Include infeed/outfeed</label>"
            + self.top_n_control(TOP_N_CHOICES)
        )
        notes = []
        if left_out:
            notes.append(
                f'<div class="xw-note" data-testid="left-out" data-count="{left_out}">{left_out:,} of '
                f"{len(rows):,} rows are not drawn: their FLOP count or bytes accessed are zero (unknown "
                "for custom calls, none for copies), which log axes cannot place. They are in the "
                "table.</div>"
            )
        if self.peak_flop_rate <= 0:
            notes.append(
                '<div class="xw-note" data-testid="no-peak">The device\'s peak FLOP rate is unknown: '
                "no compute roof is drawn.</div>"
            )
        for severity, message in self.model.attrs.get("diagnostics") or []:
            notes.append(f'<div class="xw-note">{esc(severity)}: {esc(message)}</div>')
        if self.model.attrs.get("notes"):
            notes.append(f'<div class="xw-note">Note: {esc(self.model.attrs["notes"])}</div>')
        chart = (
            '<div data-figure="roofline"></div>'
            if len(points)
            else '<div class="xw-note xw-empty-chart" data-testid="no-points">No row of this step and filter has '
            "both FLOPs and bytes, so the chart has nothing to place.</div>"
        )
        gpu = "GPU" in str(self.model.attrs.get("device_type", ""))
        columns = [
            replace(c, header=_GPU_HEADERS.get(c.key, c.header)) if gpu else c
            for c in COLUMNS
            if c.key in self.model.columns
        ]
        selected = self.selected_op.get("id") if self.selected_op else None
        grid = self.table_html(
            shown,
            "roofline-table",
            columns=columns,
            total_rows=len(table),
            select_in=("roofline", "ops"),
            selected=selected,
        )
        cut = f", the first {len(shown):,} shown" if len(shown) < len(table) else ""
        return f"""
<div class="xw-rl">
  <div class="xw-head"><b>Roofline model</b> {controls}</div>
  {self._roof_cards()}
  {"".join(notes)}
  <div class="xw-top">
    <div class="xw-chart">{chart}</div>
    <div class="xw-side" data-testid="op-card-area">{self._card_html()}</div>
  </div>
  <div class="xw-rows" data-testid="row-count">{esc(f"{len(table):,} rows{cut}")}. Click a header to sort, a row or
    a point to see its op.</div>
  <div class="xw-scroll xw-table-wrap">{grid}</div>
</div>"""


__all__ = ["RooflineWidget", "roofs", "source_text"]


_ROOF_COLUMNS = ("x0", "y0", "x1", "y1", "width", "label", "color", "dash")
_ROOF_NUMBERS = frozenset(("x0", "y0", "x1", "y1", "width"))


def _roofline_figure(*, title, x_start, x_end, y_start, y_end, roofs, ops, key):
    """The roofline chart on log axes: the roofs (a segment each, `_ROOF_COLUMNS`), the ops
    as points (their size by time, a diamond for the program), and a legend of the roofs
    and of the categories, drawn from `key`'s rows (points at NaN: in the legend only, so
    the ops are drawn in their order whatever the legend's)."""
    from bokeh.core.properties import field
    from bokeh.models import ColumnDataSource, LogTickFormatter, Range1d
    from bokeh.models.annotations import Legend, LegendItem
    from bokeh.plotting import figure

    fig = figure(
        height=500,
        sizing_mode="stretch_width",
        min_width=480,
        x_axis_type="log",
        y_axis_type="log",
        x_range=Range1d(x_start, x_end),
        y_range=Range1d(y_start, y_end),
        title=title,
        x_axis_label="Operational intensity (FLOP/byte)",
        y_axis_label="Measured FLOP rate (GFLOP/s)",
        tools="pan,wheel_zoom,box_zoom,reset,save",
        active_scroll="wheel_zoom",
        toolbar_location="above",
    )
    # One renderer for every roof, and one for the key: a renderer is nine Bokeh models.
    lines = fig.segment(
        x0="x0",
        y0="y0",
        x1="x1",
        y1="y1",
        line_color="color",
        line_width="width",
        line_dash="dash",
        source=ColumnDataSource(roofs),
    )
    look = dict(fill_color="color", fill_alpha=0.75, line_color="white")
    dots = fig.scatter(
        x="x",
        y="y",
        size="size",
        marker="marker",
        source=ColumnDataSource(ops, name="ops"),
        selection_fill_alpha=1.0,
        **look,
        **selection_look(fade=0.35),
    )
    keyed = fig.scatter(x="x", y="y", marker="marker", source=ColumnDataSource(key), **look)
    legend = Legend(
        items=[
            LegendItem(label=field("label"), renderers=[lines]),
            LegendItem(label=field("category"), renderers=[keyed]),
        ]
    )
    hover_and_tap(
        fig,
        dots,
        [
            ("", "@category @name"),
            ("program", "@program"),
            ("intensity", "@x{0,0.000} FLOP/byte"),
            ("FLOP rate", "@y{0,0.00} GFLOP/s"),
            ("time", "@time{0,0.000} µs"),
            ("occurrences", "@occurrences{0,0}"),
            ("bound by", "@bound_by"),
            ("roofline efficiency", "@efficiency{0.00} %"),
        ],
    )
    fig.xaxis.formatter = LogTickFormatter()
    fig.yaxis.formatter = LogTickFormatter()
    legend.label_text_font_size = "11px"
    legend.glyph_height = 18
    legend.glyph_width = 22
    legend.spacing = 0
    legend.border_line_color = None
    legend.ncols = 3
    legend.location = "top_left"
    fig.add_layout(legend, "below")  # under the chart: never over the points, the frame keeps its width
    strip_chrome(fig, "")
    return fig


ROOFLINE = ChartTemplate(
    "roofline.chart",
    _roofline_figure,
    {
        "title": "str",
        "x_start": "float",
        "x_end": "float",
        "y_start": "float",
        "y_end": "float",
        "roofs": {k: np.float64 if k in _ROOF_NUMBERS else str for k in _ROOF_COLUMNS},
        "ops": {
            "id": np.int32,
            **dict.fromkeys(("x", "y", "size", "time"), np.float64),
            **dict.fromkeys(("name", "category", "color", "marker", "program", "bound_by"), str),
            "efficiency": np.float64,
            "occurrences": np.float64,
        },
        "key": {"x": np.float64, "y": np.float64, "category": str, "marker": str, "color": str},
    },
)
