"""FrameworkOpStatsWidget: TensorFlow and JAX ops on the host and on the device, by self time.

Shows what `Run.framework_op_stats()` computes, in the layout of XProf's framework op
stats (tf_stats) tool: pie charts of the self time by op type on the device and on the
host, then the table of ops with XProf's columns (sorted by a click on a header,
filtered by host/device, op type and op name), and XProf's IDLE toggle, which
recomputes the table without IDLE (`exclude_idle`: fractions of op time instead of
total time). Beyond XProf, a click on a wedge filters the table to that op type.
"""

from __future__ import annotations

import math

import numpy as np
import traitlets
from bokeh.palettes import Category10, Category20

from ..run import as_run
from ._bokeh import NO_AXES, BokehWidget, hover_and_tap, selection_look, strip_chrome
from ._html import esc, note, notice, options, stat_cards
from ._table import SortedTable, contains, table_columns
from ._templates import ChartTemplate

PIE_TYPES = 9  # wedges per pie: the types with the most self time, the rest as "Other"
TOP_N_CHOICES = (25, 100, 500, 1000)
IDLE_COLOR = "#bab0ac"
OTHER_COLOR = "#d9d9d9"
PLACES = ("All", "Device", "Host")
COLUMNS = table_columns("framework_op_stats")  # XProf's headers: table_columns.csv
SORTABLE = tuple(c.key for c in COLUMNS)


def _us(us):
    """A time in µs in a readable unit."""
    if us >= 1e6:
        return f"{us / 1e6:,.3f} s"
    if us >= 1e3:
        return f"{us / 1e3:,.3f} ms"
    return f"{us:,.3f} µs"


class FrameworkOpStatsWidget(SortedTable, BokehWidget):
    """XProf's framework op stats of a run: pies of self time by op type (device, host)
    and the op table.

    `exclude_idle` (recomputes without IDLE), `place` ("All", "Device" or "Host"),
    `type_filter`, `name_filter` (operation name), `sort_by`, `sort_descending` and
    `top_n` are traits Python can read and set; `stats` is the analysis' frame,
    `table` the rows that match, in the order shown.
    """

    # IDLE left out unless asked for, as in the op profile: on a GPU run it is most of the
    # time, and the pies would be one colour.
    exclude_idle = traitlets.Bool(True, help="Leave IDLE out (fractions of op time, not total time).").tag(sync=True)
    place = traitlets.Enum(PLACES, "All", help='"All", "Device" or "Host".').tag(sync=True)
    type_filter = traitlets.Unicode("", help="Show ops whose type contains this (any case).").tag(sync=True)
    name_filter = traitlets.Unicode("", help="Show ops whose name contains this (any case).").tag(sync=True)
    columns = COLUMNS
    sort_by = traitlets.Enum(SORTABLE, "rank", help="The column the table is sorted on.").tag(sync=True)
    sort_descending = traitlets.Bool(False, help="Largest first.").tag(sync=True)

    def __init__(self, run, exclude_idle=True, **kwargs):
        self.run = as_run(run)
        self._wedges = {}  # pie source name -> [(place, type or None for "Other")]
        super().__init__(**kwargs)
        self.exclude_idle = exclude_idle
        self._ready = True
        self._recompute()

    # --- state -------------------------------------------------------------------

    @traitlets.observe("exclude_idle")
    def _recompute(self, change=None):
        if not self._ready:
            return
        self.stats = self.run.framework_op_stats(exclude_idle=self.exclude_idle)
        self.selected = {}
        if self.stats.empty:
            self.set_figures({})
            sentence = notice(
                f"No framework op stats for run {self.run.name}"
                f"{' without IDLE' if self.exclude_idle else ''}: {self.stats.attrs.get('reason')}."
            )
            # Without IDLE a run may have nothing left: keep the toggle to bring it back.
            self.html = self._page(sentence) if self.exclude_idle else sentence
            return
        self.set_figures(self._pies())
        self.html = self._html()

    @property
    def empty(self):
        return self.stats.empty

    def _redraw_table(self):
        self._redraw()

    @traitlets.observe("place", "type_filter", "name_filter")
    def _redraw(self, change=None):
        if self._ready and not self._quiet and not self.stats.empty:
            self.html = self._html()

    def on_tap(self, sel):
        wedges = self._wedges.get(sel.get("source"))
        if wedges is None or sel.get("id") is None or not 0 <= int(sel["id"]) < len(wedges):
            return
        place, kind = wedges[int(sel["id"])]
        with self.quietly():
            self.place = place
            self.type_filter = kind or ""
        self._redraw()

    @property
    def table(self):
        """The rows that match the filters, sorted as shown (index: the row in `stats`)."""
        s = self.stats
        keep = contains(s["type"], self.type_filter) & contains(s["operation"], self.name_filter)
        if self.place != "All":
            keep &= (s["host_or_device"] == self.place).to_numpy(bool)
        return self.sorted(s[keep])

    def all_columns(self):
        return [c for c in COLUMNS if c.key in self.stats.columns]

    # --- browser messages ----------------------------------------------------------

    text_requests = ("place", "type_filter", "name_filter")

    def on_request(self, kind, params):
        if kind == "exclude_idle":
            # The checkbox says "include IDLE".
            self.exclude_idle = not bool(params.get("value"))
        elif kind == "clear":
            with self.quietly():
                self.place, self.type_filter, self.name_filter = "All", "", ""
                self.selected = {}
            self._redraw()
        elif not self.table_request(kind, params):
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    # --- drawing -----------------------------------------------------------------

    def _by_type(self, place):
        """[(type, self time µs)] of one place, most first, the tail folded into "Other"."""
        s = self.stats
        at = (s["host_or_device"] == place).to_numpy(bool)
        # (A few hundred rows at most: summed in a dict, where a pandas groupby's fixed
        # cost is most of this chart's.)
        sums: dict = {}
        for kind, us in zip(s["type"].to_numpy(object)[at].tolist(), s["total_self_time"].to_numpy(float)[at].tolist()):
            sums[kind] = sums.get(kind, 0.0) + us
        by_type = sorted(((t, v) for t, v in sums.items() if v > 0), key=lambda item: -item[1])  # (stable)
        out = by_type[:PIE_TYPES]
        rest = math.fsum(v for _, v in by_type[PIE_TYPES:])
        if rest > 0:
            out.append((None, rest))
        return out

    def _pies(self):
        parts = {place: self._by_type(place) for place in ("Device", "Host")}
        # One colour per type in both pies.
        types = []
        for part in parts.values():
            types += [t for t, _ in part if t is not None and t != "IDLE" and t not in types]
        palette = Category10[10] if len(types) <= 10 else Category20[20]
        color = {t: palette[i % len(palette)] for i, t in enumerate(types)}
        color["IDLE"] = IDLE_COLOR
        figures = {}
        self._wedges = {}
        for place, part in parts.items():
            if not part:
                continue
            name = f"{place.lower()}_types"
            total = sum(v for _, v in part)
            share = np.array([v / total for _, v in part])
            ends = np.cumsum(share) * 2 * math.pi
            starts = np.concatenate([[0.0], ends[:-1]])
            labels = [f"{'Other' if t is None else t} ({100 * s:.1f} %)" for (t, _), s in zip(part, share)]
            data = {
                "id": np.arange(len(part), dtype=np.int32),
                # Clockwise from twelve o'clock, as XProf's pies.
                "start": math.pi / 2 - ends,
                "end": math.pi / 2 - starts,
                "type": ["Other" if t is None else t for t, _ in part],
                "label": labels,
                "self_us": np.array([v for _, v in part], dtype=np.float64),
                "percent": 100 * share,
                "color": [OTHER_COLOR if t is None else color[t] for t, _ in part],
            }
            self._wedges[name] = [(place, t) for t, _ in part]
            figures[name] = PIE.item(title=f"On {place.lower()}: total self-time by op type", source=name, data=data)
        return figures

    def _controls(self):
        return (
            f'<label><input type="checkbox" data-request="exclude_idle" data-testid="include-idle"'
            f"{'' if self.exclude_idle else ' checked'}> Include IDLE</label>"
            f'<label>Host/device <select data-request="place" data-testid="place">'
            f"{options(PLACES, self.place)}</select></label>"
            f'<label>Type <input type="text" data-request="type_filter" value="{esc(self.type_filter)}" '
            f'placeholder="filter" data-testid="type-filter" size="14"></label>'
            f'<label>Operation <input type="text" data-request="name_filter" value="{esc(self.name_filter)}" '
            f'placeholder="filter" data-testid="name-filter"></label>' + self.top_n_control(TOP_N_CHOICES)
        )

    def _page(self, body):
        return f"""
<div class="xw-fos">
  <div class="xw-head"><b>Framework op stats</b> {self._controls()}</div>
  {body}
</div>"""

    def _pie_slot(self, place):
        name = f"{place.lower()}_types"
        if name in self.figures:
            return f'<div data-figure="{name}" data-testid="{name}-pie"></div>'
        rows = self.stats[self.stats["host_or_device"] == place]
        cpu_only = self.stats.attrs.get("device_type", "CPU") in ("CPU", "")
        if rows.empty and place == "Device":
            why = (
                "No device ops: this run ran on the host CPU only."
                if cpu_only
                else "No framework op ran on the devices: XProf's device ops are XLA or TensorFlow "
                "ops named by the GPU kernels or TPU ops, and this profile names none."
            )
        elif rows.empty:
            why = "No host ops: the profile has no host thread plane."
        else:
            why = f"No self-time on the {place.lower()} to draw."
        return f'<div class="xw-pie-note" data-testid="{name}-none">{esc(why)}</div>'

    def _html(self):
        s = self.stats
        table = self.table
        shown = table.head(self.top_n)
        place = s["host_or_device"]
        idle = s["type"] == "IDLE"

        def idle_share(where):
            rows = s[place == where]
            total = float(rows["total_self_time"].sum())
            return f"{100 * float(rows.loc[idle, 'total_self_time'].sum()) / total:.1f} %" if total > 0 else "n/a"

        cards = [
            ("device_type", "Device type", s.attrs.get("device_type", "")),
            ("task_type", "Task", s.attrs.get("task_type", "")),
            ("device_ops", "Device ops", f"{int(((place == 'Device') & ~idle).sum()):,}"),
            ("host_ops", "Host ops", f"{int(((place == 'Host') & ~idle).sum()):,}"),
        ]
        if not self.exclude_idle:
            cards += [
                ("device_idle", "IDLE on device", idle_share("Device")),
                ("host_idle", "IDLE on host", idle_share("Host")),
            ]
        filtered = self.place != "All" or self.type_filter or self.name_filter
        matched = f"{len(table):,} of {len(s):,} ops match" if filtered else f"{len(s):,} ops"
        cut = f", the first {len(shown):,} shown" if len(shown) < len(table) else ""
        clear = ' <button data-request="clear" data-testid="clear-filters">clear filters</button>' if filtered else ""
        grid = self.table_html(shown, "op-table", columns=self.all_columns(), total_rows=len(table))
        return self._page(f"""
  {stat_cards(cards)}{note(s.attrs.get("notes", ""))}
  <div class="xw-pies">{self._pie_slot("Device")}{self._pie_slot("Host")}</div>
  <div class="xw-rows" data-testid="row-count">{esc(matched + cut)}.{clear} Click a header to sort, a wedge to
    show its op type.</div>
  <div class="xw-scroll xw-table-wrap">{grid}</div>""")


__all__ = ["FrameworkOpStatsWidget"]


def _pie_figure(*, title, source, data):
    """A pie of self time by op type from its wedges' columns (`PIE`'s), in a source named
    `source` (what a tap reports), its legend beside it."""
    from bokeh.models import ColumnDataSource
    from bokeh.plotting import figure

    # A square frame (the legend goes beside it), so the pie is round and whole.
    fig = figure(
        **NO_AXES,
        frame_width=230,
        frame_height=230,
        x_range=(-1.05, 1.05),
        y_range=(-1.05, 1.05),
        tools="",
        toolbar_location=None,
        title=title,
        min_border_left=4,
        min_border_right=4,
        min_border_top=4,
        min_border_bottom=4,
    )
    wedges = fig.wedge(
        x=0,
        y=0,
        radius=1.0,
        start_angle="start",
        end_angle="end",
        source=ColumnDataSource(data, name=source),
        fill_color="color",
        line_color="white",
        legend_field="label",
        **selection_look(fade=0.5),
    )
    hover_and_tap(fig, wedges, [("type", "@type"), ("self-time", "@self_us{0,0.000} µs"), ("share", "@percent{0.0} %")])
    legend = fig.legend[0]
    legend.location = "center_left"
    legend.label_text_font_size = "11px"
    legend.glyph_height = 12
    legend.glyph_width = 12
    legend.spacing = 1
    legend.border_line_color = None
    fig.add_layout(legend, "right")  # beside the pie, not over it
    strip_chrome(fig)
    fig.outline_line_color = None
    return fig


PIE = ChartTemplate(
    "framework_op_stats.pie",
    _pie_figure,
    {
        "title": "str",
        "source": "str",
        "data": {
            "id": np.int32,
            "start": np.float64,
            "end": np.float64,
            "type": str,
            "label": str,
            "self_us": np.float64,
            "percent": np.float64,
            "color": str,
        },
    },
)
