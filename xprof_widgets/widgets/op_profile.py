"""OpProfileWidget: where device time goes, op by op, against the chip's peaks.

Shows what `Run.op_profile()` computes, as XProf's HLO op profile does: the
whole run's FLOPS and HBM utilisation, a control panel (top N, name filter,
sort by time or wasted time, group by program or category, exclude idle), a
sunburst of the hierarchy beside the table, linked both ways (a click on a
wedge selects its row, a click on a row selects its wedge, hovering a wedge
marks its row), and the op details card of the selected node.
"""

from __future__ import annotations

import math

import numpy as np
import traitlets
from bokeh.palettes import Category20, RdYlGn11

from ..format import percent, shorten
from ..run import as_run
from ._bokeh import LABEL_TEXT, NO_AXES, BokehWidget, hover_and_tap, selection_look, strip_chrome
from ._html import data_json, esc, notice, options, plain_table, stat_cards
from ._templates import ChartTemplate
from .op_details import op_details, op_details_html

MAX_DEPTH = 4  # rings: program, category, op, fused op
PX_PER_UNIT = 80  # the sunburst's scale: 400 px for its 4.8 data units, less the frame
CHAR_PX = 5.5  # the width of a character of a 9 px wedge label
NEUTRAL = "#bab0ac"  # wedges without a colour of their own (programs, when colouring by category)
# Red (wasteful) to green (near a peak): the colour of max(FLOPS, HBM utilisation).
UTILIZATION_COLORS = list(reversed(RdYlGn11))
CONTROLS = ("group_by", "sort_by", "top_n", "exclude_idle", "name_filter")


def _color(node):
    """Colour of max(FLOPS, HBM) utilisation; grey where the chip's peaks are unknown (CPU)."""
    util = np.fmax(node.flops_utilization_of_time, node.hbm_utilization)
    if np.isnan(util):
        return NEUTRAL
    return UTILIZATION_COLORS[min(int(util * len(UTILIZATION_COLORS)), len(UTILIZATION_COLORS) - 1)]


class OpProfileWidget(BokehWidget):
    """XProf's HLO op profile of a run, with a sunburst, a table and the op card.

    `group_by`, `sort_by`, `top_n`, `exclude_idle` and `name_filter` are traits
    Python can read and set. `selected_op` holds the selected node's details
    (see `op_details`); `select_op(name)` selects a node by name.
    """

    group_by = traitlets.Enum(
        ("program", "category", "provenance"),
        "program",
        help='"program", "category" or "provenance" (framework op path).',
    ).tag(sync=True)
    sort_by = traitlets.Enum(("time", "wasted_time"), "time", help='"time" or "wasted_time".').tag(sync=True)
    top_n = traitlets.Int(100, min=1, help="Children shown per node.").tag(sync=True)
    # As XProf's op profile: idle time left out unless asked for (on a GPU run it is most of
    # the profile, and the ops would be hairlines in the sunburst).
    exclude_idle = traitlets.Bool(True, help="Leave idle time out of the fractions.").tag(sync=True)
    name_filter = traitlets.Unicode("", help="Show only nodes whose name contains this (and their parents).").tag(
        sync=True
    )
    selected_op = traitlets.Dict(help="op_details() of the selected node; {} for none.").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        self.profile = None
        self.nodes = []  # (node, depth, parent index, program name), depth-first
        self._hovered = None
        self._ready = False
        super().__init__(**kwargs)
        self._ready = True
        self._recompute()

    # --- state -------------------------------------------------------------------

    @traitlets.observe("group_by", "sort_by", "top_n", "exclude_idle")
    def _recompute(self, change=None):
        if not self._ready:
            return
        self.profile = self.run.op_profile(
            group_by=self.group_by, exclude_idle=self.exclude_idle, top_n=self.top_n, sort_by=self.sort_by
        )
        if self.profile.empty:
            self.set_figures({})
            self.html = notice(f"No op profile for run {self.run.name}: {self.profile.reason}.")
            return
        self.nodes = []
        index = {}
        for node, depth, parent in self.profile.root.walk():
            index[id(node)] = len(self.nodes)
            parent_i = index.get(id(parent)) if parent is not None else None
            program = (
                node.name if node.kind == "program" else (self.nodes[parent_i][3] if parent_i is not None else None)
            )
            self.nodes.append((node, depth, parent_i, program))
        previous = self.selected_op.get("name") if self.selected_op else None
        self.selected = {}
        self.selected_op = {}
        self.set_figures({"sunburst": self._sunburst()})
        if previous:
            self.select_op(previous, missing_ok=True)
        self.html = self._html()

    @traitlets.observe("name_filter")
    def _refilter(self, change):
        if self._ready and self.profile is not None and not self.profile.empty:
            self.html = self._html()

    tap_source = "wedges"
    tap_selection = "selected_op"

    def select_tapped(self, id):
        self._select_index(id)

    def _select_index(self, i):
        node, _, _, program = self.nodes[i]
        details = dict(op_details(node, program), id=i)
        if details != self.selected_op:
            self.selected_op = details
        want = {"figure": "sunburst", "source": "wedges", "id": i}
        if {k: self.selected.get(k) for k in want} != want:
            self.selected = want
        self.html = self._html()

    def select_op(self, name, missing_ok=False):
        """Select the first node (depth-first) named `name`: its wedge, row and card."""
        for i, (node, *_rest) in enumerate(self.nodes):
            if node.name == name:
                self._select_index(i)
                return
        if not missing_ok:
            raise KeyError(f"no op named {name!r} in this op profile")

    # --- browser messages ----------------------------------------------------------

    def on_request(self, kind, params):
        if kind == "select":
            self._select_index(int(params["id"]))
        elif kind == "hover-row":
            geometry = self._wedge_of.get(int(params["id"]))
            columns = (
                dict(zip(("inner", "outer", "start", "end"), (np.array([v], dtype=np.float64) for v in geometry)))
                if geometry
                else {k: np.zeros(0) for k in ("inner", "outer", "start", "end")}
            )
            self.push_columns("hover_wedge", columns)
        elif kind == "control":
            name, value = params["name"], params["value"]
            if name not in CONTROLS:
                raise ValueError(f"unknown control {name!r}")
            setattr(self, name, int(value) if name == "top_n" else value)
        else:
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    def on_hover(self, source, id, figure):
        if source == "wedges" and id != self._hovered:
            self._hovered = id
            self.html = self._html()

    # --- drawing -----------------------------------------------------------------

    def _sunburst(self):
        """Wedges: depth d is a ring; a node spans its share of its parent's angle."""
        span = {0: (0.0, 2 * math.pi)}
        cursor = {0: 0.0}
        rows = []
        for i, (node, depth, parent, _program) in enumerate(self.nodes):
            if i == 0:
                continue
            if depth > MAX_DEPTH or parent not in span:
                continue
            p0, p1 = span[parent]
            parent_time = self.nodes[parent][0].time_ps or 1
            width = (p1 - p0) * min(node.time_ps / parent_time, 1.0)
            a0 = p0 + cursor[parent]
            cursor[parent] += width
            span[i], cursor[i] = (a0, a0 + width), 0.0
            if width <= 0:
                continue
            inner = 0.35 + (depth - 1) * 0.5
            rows.append((i, inner, inner + 0.48, math.pi / 2 - (a0 + width), math.pi / 2 - a0, node))
        self._wedge_of = {r[0]: r[1:5] for r in rows}  # node -> (inner, outer, start, end), for row hovers
        root = self.nodes[0][0]
        known = not np.isnan(np.fmax(root.flops_utilization_of_time, root.hbm_utilization))
        if known:
            colors = [_color(r[5]) for r in rows]
            self._key = None  # the colour key: utilisation
        else:  # no chip peaks (CPU): colour by the category the node sits in
            category = {}  # node -> the category it sits in; None above the categories (programs)
            for i, (node, _depth, parent, _) in enumerate(self.nodes):
                if node.kind == "category":
                    category[i] = node.name
                elif node.kind in ("root", "program", "provenance"):
                    category[i] = None
                else:
                    category[i] = category.get(parent) or node.category or node.name
            names = sorted({category[r[0]] for r in rows} - {None})
            palette = {c: Category20[20][k % 20] for k, c in enumerate(names)}
            colors = [palette.get(category[r[0]], NEUTRAL) for r in rows]
            self._key = palette
        # Names along the wedges whose arc holds at least a few characters, cut to fit.
        texts, xs, ys, angles = [], [], [], []
        for _, inner, outer, start, end, node in rows:
            radius, middle = (inner + outer) / 2, (start + end) / 2
            fits = int(((end - start) * radius * PX_PER_UNIT - 6) / CHAR_PX)
            if fits < 4:
                continue
            texts.append(shorten(node.name, fits))
            xs.append(radius * math.cos(middle))
            ys.append(radius * math.sin(middle))
            tangent = middle - math.pi / 2  # along the arc, never upside down
            angles.append((tangent + math.pi / 2) % math.pi - math.pi / 2)
        wedges = {
            "id": np.array([r[0] for r in rows], dtype=np.int32),
            **{k: np.array([r[j] for r in rows], dtype=np.float64) for j, k in enumerate(_RING, 1)},
            "color": colors,
            "name": [r[5].name for r in rows],
            "kind": [r[5].kind for r in rows],
            # numpy columns travel as binary, NaN (unknown peak) included
            "time": np.array([100 * r[5].time_fraction for r in rows], dtype=np.float64),
            "flops": np.array([100 * r[5].flops_utilization_of_time for r in rows], dtype=np.float64),
            "hbm": np.array([100 * r[5].hbm_utilization for r in rows], dtype=np.float64),
        }
        labels = {k: np.array(v, dtype=np.float64) for k, v in (("x", xs), ("y", ys), ("angle", angles))}
        return SUNBURST.item(wedges=wedges, labels={**labels, "text": texts})

    def _key_html(self):
        """What the sunburst's colours mean, under it."""
        if self._key is None:
            stops = ", ".join(UTILIZATION_COLORS)
            return (
                '<div class="xw-legend" data-testid="colour-key">Colour: max(FLOPS, HBM bandwidth) utilisation'
                f'<div class="xw-ramp" style="background: linear-gradient(to right, {stops})"></div>'
                '<div class="xw-ramp-ticks"><span>0 %</span><span>50 %</span><span>100 %</span></div></div>'
            )
        key = ({"(program)": NEUTRAL} if self.group_by == "program" else {}) | self._key
        swatches = "".join(f'<span><i style="background:{c}"></i>{esc(name)}</span>' for name, c in key.items())
        return (
            '<div class="xw-legend" data-testid="colour-key">Colour: category (no known peak on this '
            f"device, so no utilisation)<div>{swatches}</div></div>"
        )

    def _visible_rows(self):
        """Indices of the table rows: all nodes, or those matching the filter and their parents."""
        if not self.name_filter:
            return list(range(len(self.nodes)))
        needle = self.name_filter.lower()
        keep = set()
        for i, (node, _, _parent, _) in enumerate(self.nodes):
            if needle in node.name.lower():
                while i is not None and i not in keep:
                    keep.add(i)
                    i = self.nodes[i][2]
        return sorted(keep)

    def _notes_html(self):
        notes = getattr(self.profile, "notes", None) or []
        notes = [notes] if isinstance(notes, str) else notes
        return "".join(f'<div class="xw-note">{esc(n)}</div>' for n in notes)

    def _html(self):
        root = self.profile.root
        controls = (
            f'<label>Group by <select data-request="control" data-params="{data_json({"name": "group_by"})}" '
            f'data-testid="group-by">{options(["program", "category", "provenance"], self.group_by)}</select></label>'
            f'<label>Sort by <select data-request="control" data-params="{data_json({"name": "sort_by"})}" '
            f'data-testid="sort-by">{options(["time", "wasted_time"], self.sort_by)}</select></label>'
            f'<label>Top <select data-request="control" data-params="{data_json({"name": "top_n"})}" '
            f'data-testid="top-n">{options(["10", "25", "100"], str(self.top_n))}</select></label>'
            f'<label><input type="checkbox" data-request="control" data-params="{data_json({"name": "exclude_idle"})}"'
            f"{' checked' if self.exclude_idle else ''}> exclude idle</label>"
            f'<label>Filter <input type="text" data-request="control" '
            f'data-params="{data_json({"name": "name_filter"})}" '
            f'value="{esc(self.name_filter)}" placeholder="op name" data-testid="name-filter"></label>'
        )
        stats = stat_cards(
            [
                (
                    "total_time",
                    "Op time (idle excluded)" if self.exclude_idle else "Profile time (idle included)",
                    f"{root.time_ps / 1e9:,.3f} ms",
                ),
                ("flops_utilization", "FLOPS utilization", percent(root.flops_utilization_of_time, 4)),
                ("hbm_utilization", "HBM bandwidth utilization", percent(root.hbm_utilization)),
                ("ops", "Ops", f"{sum(1 for n, *_ in self.nodes if n.kind == 'op'):,}"),
            ]
        )
        selected = self.selected_op.get("id") if self.selected_op else None
        body = []
        for i in self._visible_rows():
            node, depth, _, _ = self.nodes[i]
            cls = " ".join(c for c, on in (("sel", i == selected), ("hov", i == self._hovered)) if on)
            body.append(
                f'<tr data-select="{data_json({"figure": "sunburst", "source": "wedges", "id": i})}" '
                f'data-hover="hover-row" data-params="{data_json({"id": i})}" '
                f'data-node="{i}"'
                f"{f' class={cls!r}' if cls else ''}>"
                f'<td style="padding-left:{6 + 14 * depth}px">{esc(node.name)}</td>'
                f"<td class=num>{100 * node.time_fraction:.2f} %</td>"
                f"<td class=num>{node.time_ps / 1e9:,.3f}</td>"
                f"<td class=num>{percent(node.flops_utilization_of_time)}</td>"
                f"<td class=num>{percent(node.hbm_utilization)}</td>"
                f"<td class=num>{percent(node.wasted_time_fraction)}</td></tr>"
            )
        return f"""
<div class="xw-op">
  <div class="xw-head"><b>HLO op profile</b> {controls}</div>
  {stats}
  {self._notes_html()}
  <div class="xw-body">
    <div class="xw-sun"><div data-figure="sunburst"></div>{self._key_html()}</div>
    {plain_table("op-table", ["Name", "Time", "ms", "FLOPS util", "HBM util", "Wasted"], body)}
  </div>
  {op_details_html(self.selected_op, show_graph=self.hosted)}
</div>"""


__all__ = ["OpProfileWidget"]


_RING = ("inner", "outer", "start", "end")


def _sunburst_figure(*, wedges, labels):
    """The sunburst from its wedges' columns (id, the `_RING` geometry, color, name, kind,
    time, flops, hbm) and its labels' (x, y, angle, text)."""
    from bokeh.models import ColumnDataSource
    from bokeh.plotting import figure

    extent = 0.35 + MAX_DEPTH * 0.5 + 0.05
    fig = figure(
        **NO_AXES,
        width=400,
        height=400,
        x_range=(-extent, extent),
        y_range=(-extent, extent),
        match_aspect=True,
        tools="",
    )
    ring = dict(x=0, y=0, inner_radius="inner", outer_radius="outer", start_angle="start", end_angle="end")
    drawn = fig.annular_wedge(
        **ring,
        source=ColumnDataSource(wedges, name="wedges"),
        fill_color="color",
        line_color="white",
        **selection_look(fade=0.6),
    )
    # The wedge of the table row under the pointer, outlined (filled by on_request "hover-row").
    hovered = ColumnDataSource({k: [] for k in _RING}, name="hover_wedge")
    fig.annular_wedge(**ring, source=hovered, fill_alpha=0, line_color="#222", line_width=3, line_dash="dashed")
    fig.text(
        x="x",
        y="y",
        text="text",
        angle="angle",
        source=ColumnDataSource(labels),
        **{**LABEL_TEXT, "text_font_size": "9px"},
        text_align="center",
        background_fill_color="white",
        background_fill_alpha=0.65,
        padding=1,
        name="wedge_labels",
    )
    hover_and_tap(
        fig,
        drawn,
        [
            ("", "@kind @name"),
            ("time", "@time{0.00} %"),
            ("FLOPS util", "@flops{0.00} %"),
            ("HBM util", "@hbm{0.00} %"),
        ],
    )
    strip_chrome(fig)
    fig.outline_line_color = None
    fig.toolbar_location = None
    return fig


SUNBURST = ChartTemplate(
    "op_profile.sunburst",
    _sunburst_figure,
    {
        "wedges": {
            "id": np.int32,
            **dict.fromkeys(_RING, np.float64),
            "color": str,
            "name": str,
            "kind": str,
            **dict.fromkeys(("time", "flops", "hbm"), np.float64),
        },
        "labels": {"x": np.float64, "y": np.float64, "angle": np.float64, "text": str},
    },
)
