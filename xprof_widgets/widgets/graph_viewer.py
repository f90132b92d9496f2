"""GraphViewerWidget: the HLO graph around an op, as XProf's graph viewer shows it.

Shows what `analysis.graph_viewer.graph_viewer()` computes: the instructions at
most `radius` edges from the centre op, operands above users, boxes coloured
by category (or by the device time / FLOPs the profile measured), opened
fusions boxed around their fused instructions. Controls pick the module, the
op (typed, Enter), the radius and the colouring; clicking a node centres the
graph on it (clicking the centre fusion opens or closes it); the card beside
the graph says what the centre op is, lists its operands and users (each a
button to go there) and shows XProf's op details where the profile timed it.
"""

from __future__ import annotations

import logging

import numpy as np
import traitlets
from bokeh.palettes import Blues9, YlOrRd9

from ..analysis.core.availability import NO_HLO_MODULES
from ..analysis.core.xla_ops import category as op_category
from ..analysis.core.xla_ops import expression, source_text
from ..analysis.graph_viewer import (
    NODE_HEIGHT,
    NODE_WIDTH,
    OpNotFoundError,
    RunModules,
    busiest_ops,
    default_op,
    find_op,
    graph_viewer,
    module_index,
)
from ..errors import ProfileError
from ..format import duration, shorten
from ..io.hlo_text import shape_text
from ._bokeh import LABEL_TEXT, NO_AXES, BokehWidget, hover_and_tap, one_of, strip_chrome
from ._html import data_json, esc, notice, options
from .op_details import op_details, op_details_html

log = logging.getLogger(__name__)

COLOR_BY = ("category", "time", "flops")
RADII = tuple(range(9))
PX_PER_UNIT = 50  # the drawing's scale when first shown: labels fit their boxes
NARROW_PX = 860  # a graph wider than this is first shown around its centre op (a notebook at 1,400 px has ~900)
MAX_HEIGHT_PX = 760
LABEL_CHARS = 28  # characters of a 10 px label that fit a box (NODE_WIDTH)
MAX_LISTED = 24  # operands / users listed in the card
NOT_MEASURED = "#f4f4f4"

# Fill colours by kind of op, after XProf's node styles (hlo_proto_to_graph_view.cc): light
# tones so the black labels read. Order is the legend's.
KIND_COLORS = {
    "parameter": "#fdd49e",
    "constant": "#e6e6e6",
    "dot / convolution": "#9ecae1",
    "fusion": "#dadaeb",
    "elementwise": "#fff3a8",
    "data movement": "#c7e9c0",
    "reduction / gather / scatter": "#e0c3e0",
    "collective / host transfer": "#e8cfa8",
    "control flow / call": "#a8d5a0",
    "async": "#b5cff0",
    "other": "#ffffff",
}
_KIND_OF_OPCODE = {
    **dict.fromkeys(("parameter",), "parameter"),
    **dict.fromkeys(("constant", "iota"), "constant"),
    **dict.fromkeys(("dot", "convolution", "fft", "triangular-solve", "cholesky", "ragged-dot"), "dot / convolution"),
    **dict.fromkeys(
        (
            "broadcast",
            "concatenate",
            "slice",
            "dynamic-slice",
            "dynamic-update-slice",
            "pad",
            "reverse",
            "transpose",
            "copy",
            "reshape",
            "dynamic-reshape",
            "bitcast",
            "copy-start",
            "copy-done",
        ),
        "data movement",
    ),
    **dict.fromkeys(
        (
            "reduce",
            "reduce-window",
            "scatter",
            "gather",
            "select-and-scatter",
            "sort",
            "batch-norm-grad",
            "batch-norm-inference",
            "batch-norm-training",
        ),
        "reduction / gather / scatter",
    ),
    **dict.fromkeys(
        (
            "all-gather",
            "all-gather-start",
            "all-gather-done",
            "all-reduce",
            "all-reduce-start",
            "all-reduce-done",
            "reduce-scatter",
            "all-to-all",
            "ragged-all-to-all",
            "collective-broadcast",
            "collective-permute",
            "collective-permute-start",
            "collective-permute-done",
            "infeed",
            "outfeed",
            "partition-id",
            "replica-id",
            "send",
            "send-done",
            "recv",
            "recv-done",
        ),
        "collective / host transfer",
    ),
    **dict.fromkeys(("while", "call", "conditional", "custom-call"), "control flow / call"),
    **dict.fromkeys(("async-start", "async-update", "async-done"), "async"),
}


def op_kind(opcode, category=""):
    """The colour group of an op (see KIND_COLORS)."""
    if opcode == "fusion":
        return "fusion"
    kind = _KIND_OF_OPCODE.get(opcode)
    if kind is None:
        kind = "elementwise" if category == "non-fusion elementwise" else "other"
    return kind


def _time_text(ps):
    return duration(ps, missing="not measured")


def _flops_text(f):
    if f is None or not np.isfinite(f):
        return "not measured"
    for unit, scale in (("TFLOP", 1e12), ("GFLOP", 1e9), ("MFLOP", 1e6), ("kFLOP", 1e3)):
        if f >= scale:
            return f"{f / scale:,.2f} {unit}"
    return f"{f:,.0f} FLOP"


def _ramp(values, palette):
    """Colours for values on a square-root scale of their maximum; NOT_MEASURED where NaN."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(len(v), NOT_MEASURED, dtype=object)
    ok = np.isfinite(v) & (v >= 0)
    top = v[ok].max() if ok.any() else 0.0
    if top > 0:
        idx = np.minimum((np.sqrt(v[ok] / top) * (len(palette) - 1)).round().astype(int), len(palette) - 1)
        out[ok] = np.asarray(palette, dtype=object)[idx]
    elif ok.any():
        out[ok] = palette[0]
    return out


def _text_color(fill):
    """Black on light fills, white on dark ones."""
    if not isinstance(fill, str) or not fill.startswith("#") or len(fill) != 7:
        return "#111"
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "#111" if 0.299 * r + 0.587 * g + 0.114 * b > 140 else "#fff"


class GraphViewerWidget(BokehWidget):
    """XProf's graph viewer: the HLO graph around an op of a run.

    `GraphViewerWidget(run)` (or a path) centres on the op with the most device
    time; `op`, `module`, `radius`, `color_by` ("category", "time", "flops") and
    `expanded` (names of the fusions drawn open) are traits Python can read and
    set. `view` is the GraphView drawn (nodes and edges as DataFrames). Clicking a
    node centres on it; clicking the centre fusion opens or closes it.
    """

    op = traitlets.Unicode("", help="The centre op (an instruction or computation name).").tag(sync=True)
    module = traitlets.Unicode("", help="The module shown, `name(program_id)`.").tag(sync=True)
    radius = traitlets.Int(2, min=0, help="Edges from the centre op shown.").tag(sync=True)
    color_by = traitlets.Enum(COLOR_BY, "category", help='"category", "time" or "flops".').tag(sync=True)
    expanded = traitlets.List(traitlets.Unicode(), help="Fusions drawn open.").tag(sync=True)

    def __init__(self, run, op=None, module=None, radius=2, color_by="category", expand=False, **kwargs):
        if isinstance(run, (str, bytes)) or hasattr(run, "__fspath__"):
            from ..run import as_run

            run = as_run(run)
        self.run = run
        self.view = None
        self.error = ""
        self._history = []
        self._busy = True
        self._op_nodes = None
        self._opened = []
        self._modules = RunModules(run)
        name = getattr(run, "name", "")
        if not self._modules.names():
            super().__init__(html=notice(f"No graph viewer for run {name}: {NO_HLO_MODULES}."), **kwargs)
            return
        super().__init__(**kwargs)
        if color_by not in COLOR_BY:
            raise ValueError(f"color_by must be one of {COLOR_BY}, not {color_by!r}")
        self.color_by = color_by
        try:
            if op is None:
                module, op = default_op(run, module)
            if op is None:
                self.html = notice(f"No graph viewer for run {name}: module {module} has no instructions.")
                return
            self._show(op, module, radius, expand, remember=False)
        except ProfileError as error:
            self.html = notice(f"No graph viewer for run {name}: {error}.")
        finally:
            self._busy = False

    # --- state -------------------------------------------------------------------------------

    def _show(self, op, module, radius, expand, remember=True):
        """Compute and draw the view around `op`; raises (nothing changed) if it cannot.
        `expand`: the fusions the user opened (those holding the centre open anyway)."""
        opened = (
            []
            if expand in (False, None)
            else [expand]
            if isinstance(expand, str)
            else ([op] if expand is True else list(expand))
        )
        view = graph_viewer(self.run, op, module=module, radius=radius, expand=opened)
        old = self.view
        if old is not None and (old.op, old.module, old.radius, old.expanded) == (
            view.op,
            view.module,
            view.radius,
            view.expanded,
        ):
            # The same view asked again (Enter then change in the op box, a tap on the
            # centre): nothing to redraw.
            if self.error:
                self.error = ""
                self.html = self._html()
            if self.selected:
                self.selected = {}
            return
        if remember and self.view is not None and not self.view.empty:
            self._history.append((self.view.op, self.view.module, self.view.radius, list(self._opened)))
            del self._history[:-50]
        self.view = view
        mod = self._modules.get(view.module)
        self._opened = [f for f in opened if getattr(mod.instruction(f), "opcode", "") == "fusion"]
        if view.op != op and view.op in view.expanded and view.op not in self._opened:
            self._opened.append(view.op)  # a fused computation's name opened its fusion
        self.error = ""
        busy, self._busy = self._busy, True
        try:
            self.module = view.module
            self.op = view.op
            self.radius = view.radius
            self.expanded = list(view.expanded)
        finally:
            self._busy = busy
        self._render()
        if self.selected:
            self.selected = {}

    def _find_module(self, op):
        """The module of `op`: the current one if it has it, else the one module that does."""
        if self.module:
            mod = self._modules.get(self.module)
            if mod.instruction(op) is not None or op in module_index(mod).computations:
                return self.module
        return find_op(self._modules, op)[0]

    @traitlets.validate("op")
    def _check_op(self, proposal):
        if not self._busy:
            try:
                self._find_module(proposal["value"])
            except (KeyError, ValueError) as error:
                raise traitlets.TraitError(str(error)) from None
        return proposal["value"]

    @traitlets.validate("module")
    def _check_module(self, proposal):
        return one_of(proposal["value"], sorted(self._modules.protos), "module")

    @traitlets.observe("op")
    def _op_changed(self, change):
        if not self._busy:
            op = change["new"]
            self._show(op, self._find_module(op), self.radius, self._kept_open(op))

    @traitlets.observe("module")
    def _module_changed(self, change):
        if not self._busy:
            module, op = default_op(self.run, change["new"])
            self._show(op, module, self.radius, False)

    @traitlets.observe("radius")
    def _radius_changed(self, change):
        if not self._busy and self.view is not None:
            self._show(self.view.op, self.view.module, self.radius, self._opened)

    @traitlets.observe("expanded")
    def _expanded_changed(self, change):
        if not self._busy and self.view is not None:
            self._show(self.view.op, self.view.module, self.radius, list(change["new"]))

    @traitlets.observe("color_by")
    def _recolour(self, change):
        if not self._busy and self.view is not None and not self.view.empty:
            self._render()

    def _kept_open(self, op):
        """Fusions to keep open when centring on `op`: those the user opened, in the same module."""
        return list(self._opened) if self.view is not None and self._find_module(op) == self.view.module else False

    def on_tap(self, sel):
        if sel.get("source") != "nodes" or sel.get("id") is None or self.view is None:
            return
        self.centre_on(str(sel["id"]))

    def centre_on(self, name):
        """Centre on the node `name` of the current module (the centre fusion: open or close it)."""
        if name == self.view.op and self._is_fusion(name):
            self.toggle_fusion(name)
            return
        self._show(name, self.view.module, self.radius, self._opened)

    def toggle_fusion(self, name):
        """Open the fusion `name` (draw its fused computation in its place), or close it."""
        if name in self.view.expanded:
            centre = self.view.op
            mod = self._modules.get(self.view.module)
            instr = mod.instruction(centre)
            # Closing the fusion that holds the centre: centre on the fusion itself.
            if instr is not None and name in [f.name for f in module_index(mod).enclosing_fusions(instr)]:
                centre = name
            opened = [f for f in self._opened if f != name and not self._inside(f, name)]
            self._show(centre, self.view.module, self.radius, opened)
        else:
            self._show(self.view.op, self.view.module, self.radius, self._opened + [name])

    def _inside(self, fusion, outer):
        mod = self._modules.get(self.view.module)
        instr = mod.instruction(fusion)
        return instr is not None and outer in [f.name for f in module_index(mod).enclosing_fusions(instr)]

    def _is_fusion(self, name):
        instr = self._modules.get(self.view.module).instruction(name)
        return instr is not None and instr.opcode == "fusion"

    def back(self):
        """Go back to the previous centre."""
        if not self._history:
            return
        op, module, radius, opened = self._history.pop()
        self._show(op, module, radius, opened, remember=False)

    # --- browser messages ---------------------------------------------------------------------

    def on_request(self, kind, params):
        try:
            if kind == "op":
                op = str(params.get("value", params.get("name", ""))).strip()
                if op:
                    self._show(op, self._find_module(op), self.radius, self._kept_open(op))
            elif kind == "centre":
                self.centre_on(str(params["name"]))
            elif kind == "module":
                module, op = default_op(self.run, str(params["value"]))
                self._show(op, module, self.radius, False)
            elif kind == "radius":
                self._show(self.view.op, self.view.module, int(params["value"]), self._opened)
            elif kind == "color_by":
                self.color_by = str(params["value"])
            elif kind == "toggle":
                self.toggle_fusion(str(params["name"]))
            elif kind == "back":
                self.back()
            else:
                raise ValueError(f"unknown request {kind!r}")
        except (KeyError, ValueError, traitlets.TraitError, ProfileError) as error:
            # A typo in the op box is not a traceback: say so above the graph, keep the graph.
            self.error = str(error) if not isinstance(error, KeyError) or error.args else repr(error)
            if isinstance(error, KeyError) and not isinstance(error, OpNotFoundError) and error.args:
                self.error = str(error.args[0])
            self.html = self._html()
            return {"ok": False, "error": self.error}, None
        return {"ok": True, "op": self.op, "module": self.module}, None

    # --- drawing ------------------------------------------------------------------------------

    def _render(self):
        if self.view.empty:
            self.set_figures({})
            self.html = notice(f"No graph to show: {self.view.reason}.")
            return
        self.set_figures({"graph": self._figure()})
        self.html = self._html()

    def _colors(self, nodes):
        if self.color_by == "time":
            return _ramp(nodes["time_ps"], YlOrRd9[::-1])
        if self.color_by == "flops":
            return _ramp(nodes["flops"], Blues9[::-1])
        return np.array([KIND_COLORS[op_kind(o, c)] for o, c in zip(nodes["opcode"], nodes["category"])], dtype=object)

    def _figure(self):
        from bokeh.models import ColumnDataSource, DataRange1d
        from bokeh.plotting import figure

        v = self.view
        nodes, edges, clusters = v.nodes, v.edges, v.clusters
        x = nodes["x"].to_numpy(float)
        y = nodes["y"].to_numpy(float)
        fill = self._colors(nodes)
        centre = nodes["is_centre"].to_numpy(bool)
        labels = []
        for name, opcode, shape, t in zip(nodes["name"], nodes["opcode"], nodes["shape"], nodes["time_ps"]):
            plain_shape = shape.split("{")[0] if not shape.startswith("(") else shape
            lines = [shorten(name, LABEL_CHARS), shorten(f"{opcode} {plain_shape}", LABEL_CHARS)]
            if np.isfinite(t):
                lines.append(_time_text(t))
            labels.append("\n".join(lines))
        src = ColumnDataSource(
            {
                "id": nodes["name"].tolist(),
                "x": x,
                "y": y,
                "fill": fill.tolist(),
                "text_color": [_text_color(f) for f in fill],
                "line": np.where(centre, "#000000", "#666666").tolist(),
                "line_width": np.where(centre, 3.0, 1.0),
                "label": labels,
                "opcode": nodes["opcode"].tolist(),
                "shape": nodes["shape"].tolist(),
                "category": nodes["category"].tolist(),
                "time": [_time_text(t) for t in nodes["time_ps"]],
                "flops": [_flops_text(f) for f in nodes["flops"]],
                "framework_op": nodes["framework_op"].tolist(),
                "source": nodes["source"].tolist(),
                "computation": nodes["computation"].tolist(),
            },
            name="nodes",
        )

        # A fixed scale (labels fit their boxes) at any page width: the y range is the graph's
        # height (or a window on the centre), and the x range follows from the plot's width
        # (match_aspect), around the graph's middle, or the centre op when the graph is wide.
        half_w = NODE_WIDTH / 2 + 0.4
        gx0, gx1 = x.min() - half_w, x.max() + half_w
        gy0, gy1 = y.min() - NODE_HEIGHT / 2 - 0.5, y.max() + NODE_HEIGHT / 2 + 0.5
        if len(clusters):
            gx0, gx1 = min(gx0, clusters["x0"].min() - 0.3), max(gx1, clusters["x1"].max() + 0.3)
            gy0, gy1 = min(gy0, clusters["y0"].min() - 0.3), max(gy1, clusters["y1"].max() + 0.3)
        cx = float(x[centre][0]) if centre.any() else (gx0 + gx1) / 2
        cy = float(y[centre][0]) if centre.any() else (gy0 + gy1) / 2
        h_units = min(gy1 - gy0, MAX_HEIGHT_PX / PX_PER_UNIT)
        y0, y1 = self._window(gy0, gy1, cy, h_units)
        half = NARROW_PX / PX_PER_UNIT / 2
        xc = (gx0 + gx1) / 2 if gx1 - gx0 <= 2 * half else min(max(cx, gx0 + half), gx1 - half)
        frame = ColumnDataSource({"x": [xc - 0.5, xc + 0.5], "y": [y0, y1]})
        fig = figure(
            **NO_AXES,
            frame_height=round(h_units * PX_PER_UNIT),
            sizing_mode="stretch_width",
            match_aspect=True,
            tools="pan,wheel_zoom,reset,save",
            active_scroll="wheel_zoom",
            active_drag="pan",
            title=f"{v.op} and what is within {v.radius} edge{'s' if v.radius != 1 else ''} of it ({len(nodes)} ops)",
        )
        window = fig.scatter("x", "y", source=frame, size=0, alpha=0)
        fig.x_range = DataRange1d(renderers=[window], range_padding=0)
        fig.y_range = DataRange1d(renderers=[window], range_padding=0)
        if len(clusters):
            csrc = ColumnDataSource(
                {
                    "x0": clusters["x0"].to_numpy(float),
                    "x1": clusters["x1"].to_numpy(float),
                    "y0": clusters["y0"].to_numpy(float),
                    "y1": clusters["y1"].to_numpy(float),
                    "label": [f"{n} (fused: {c})" for n, c in zip(clusters["name"], clusters["computation"])],
                    "line": np.where(clusters["is_centre"].to_numpy(bool), "#000000", "#8a7fb5").tolist(),
                }
            )
            fig.quad(
                left="x0",
                right="x1",
                bottom="y0",
                top="y1",
                source=csrc,
                fill_color="#f4f1fb",
                fill_alpha=0.7,
                line_color="line",
                line_dash="dashed",
                line_width=1.5,
            )
            fig.text(
                x="x0",
                y="y1",
                text="label",
                source=csrc,
                x_offset=6,
                y_offset=4,
                text_font_size="10px",
                text_baseline="top",
                text_align="left",
                text_color="#5a4f8a",
                text_font_style="italic",
            )
        if len(edges):
            esrc = ColumnDataSource(
                {
                    "xs": [list(p) for p in edges["path_x"]],
                    "ys": [list(p) for p in edges["path_y"]],
                    "color": np.where(edges["kind"].to_numpy() == "operand", "#6b6b6b", "#8a7fb5").tolist(),
                }
            )
            fig.multi_line(xs="xs", ys="ys", source=esrc, line_color="color", line_width=1.3, line_alpha=0.9)
            tip_x = np.array([p[-1] for p in edges["path_x"]])
            tip_y = np.array([p[-1] for p in edges["path_y"]]) + 0.06
            fig.scatter(tip_x, tip_y, marker="inverted_triangle", size=8, color="#6b6b6b")
        boxes = fig.rect(
            x="x",
            y="y",
            width=NODE_WIDTH,
            height=NODE_HEIGHT,
            source=src,
            fill_color="fill",
            line_color="line",
            line_width="line_width",
            selection_fill_alpha=1.0,
            nonselection_fill_alpha=1.0,
            nonselection_line_alpha=1.0,
            selection_line_color="#000",
        )
        fig.text(
            x="x",
            y="y",
            text="label",
            source=src,
            **{**LABEL_TEXT, "text_color": "text_color"},
            text_align="center",
            text_line_height=1.15,
        )
        # Neighbours left out: "+N" over the box (operands) or under it (users).
        for column, dy, baseline, word in (
            ("operands_omitted", 1, "bottom", "operand"),
            ("users_omitted", -1, "top", "user"),
        ):
            counts = nodes[column].to_numpy(int)
            keep = counts > 0
            if keep.any():
                fig.text(
                    x[keep] + NODE_WIDTH / 2,
                    y[keep] + dy * (NODE_HEIGHT / 2 + 0.04),
                    text=[f"+{c} {word}{'s' if c > 1 else ''}" for c in counts[keep]],
                    text_font_size="9px",
                    text_align="right",
                    text_baseline=baseline,
                    text_color="#888",
                )
        hover_and_tap(
            fig,
            boxes,
            [
                ("op", "@id"),
                ("opcode", "@opcode"),
                ("shape", "@shape"),
                ("category", "@category"),
                ("device time", "@time"),
                ("FLOPs", "@flops"),
                ("framework op", "@framework_op"),
                ("source", "@source"),
                ("computation", "@computation"),
            ],
        )
        strip_chrome(fig)
        fig.title.text_font_size = "12px"
        fig.title.text_font_style = "normal"
        return fig

    @staticmethod
    def _window(lo, hi, centre, size):
        """A range of `size` around `centre` inside [lo, hi], or [lo, hi] padded to `size`."""
        if hi - lo <= size:
            mid = (lo + hi) / 2
            return mid - size / 2, mid + size / 2
        start = min(max(centre - size / 2, lo), hi - size)
        return start, start + size

    def _html(self):
        v = self.view
        if v is None or v.empty:
            return self.html
        modules = options(sorted(self._modules.protos, key=lambda m: (m != v.module, m)), v.module)
        radii = options([str(r) for r in RADII], str(v.radius))
        colours = options(list(COLOR_BY), self.color_by)
        back = (
            '<button data-request="back" data-testid="back" title="previous centre">&larr; Back</button>'
            if self._history
            else ""
        )
        error = f'<div class="xw-error" data-testid="graph-error">{esc(self.error)}</div>' if self.error else ""
        opened = "".join(
            f'<button class="xw-chip" data-request="toggle" data-params="{data_json({"name": f})}" '
            f'title="close this fusion">{esc(f)} &times;</button>'
            for f in v.expanded
        )
        where = f"computation {esc(v.computation)}" + (
            f" (fused into {esc(v.parent_fusion)})" if v.parent_fusion else ""
        )
        summary = (
            f'<span data-testid="graph-summary">{len(v.nodes)} ops and {len(v.edges)} edges within '
            f"{v.radius} of <b>{esc(v.op)}</b> in {where}</span>"
        )
        if v.truncated:
            summary += ' <span class="xw-note">(cut at the node limit: lower the radius)</span>'
        if opened:
            summary += f' <span class="xw-note">open fusions:</span> {opened}'
        busy = busiest_ops(self.run, v.module)
        chips = "".join(
            f'<button class="xw-chip" data-request="centre" data-params="{data_json({"name": n})}">'
            f'{esc(n)} <span class="xw-note">{esc(_time_text(t))}</span></button>'
            for n, t in busy
        )
        busiest = (
            (f'<div class="xw-busy" data-testid="busiest"><span class="xw-note">Busiest ops here:</span> {chips}</div>')
            if chips
            else ""
        )
        kinds = [k for k in KIND_COLORS if k in {op_kind(o, c) for o, c in zip(v.nodes["opcode"], v.nodes["category"])}]
        if self.color_by == "category":
            legend = "".join(f'<span><i style="background:{KIND_COLORS[k]}"></i>{esc(k)}</span>' for k in kinds)
        else:
            palette = YlOrRd9[::-1] if self.color_by == "time" else Blues9[::-1]
            what = "device time" if self.color_by == "time" else "FLOPs"
            legend = (
                f'<span>less {what}</span><span class="xw-ramp" style="background: linear-gradient(to right, '
                f'{", ".join(palette)})"></span><span>more (square-root scale)</span>'
                f'<span><i style="background:{NOT_MEASURED}"></i>not measured</span>'
            )
        return f"""
<div class="xw-gv" data-testid="graph-viewer" data-nodes="{len(v.nodes)}" data-edges="{len(v.edges)}"
 data-op="{esc(v.op)}" data-module="{esc(v.module)}">
  <div class="xw-head"><b>Graph viewer</b>
    <label>Module <select data-request="module" data-testid="module">{modules}</select></label>
    <label>Op <input type="text" data-request="op" data-testid="op" value="{esc(v.op)}" size="26"
      placeholder="op or computation name" spellcheck="false"></label>
    <label>Radius <select data-request="radius" data-testid="radius">{radii}</select></label>
    <label>Colour by <select data-request="color_by" data-testid="color-by">{colours}</select></label>
    {back}
  </div>
  {error}
  <div class="xw-summary">{summary}</div>
  {busiest}
  <div class="xw-graph"><div data-figure="graph"></div></div>
  <div class="xw-legend" data-testid="legend">{legend}
    <span class="xw-note">Click an op to centre on it; click the centre fusion to open or close it.</span></div>
  <div class="xw-cards">{self._card_html()}</div>
</div>"""

    def _card_html(self):
        """What the centre op is, its operands and users (buttons), and XProf's op details."""
        v = self.view
        mod = self._modules.get(v.module)
        instr = mod.instruction(v.op)
        if instr is None:
            return ""
        shown = set(v.nodes["name"])

        def buttons(items):
            out = []
            for item in list(dict.fromkeys(items))[:MAX_LISTED]:
                mark = "" if item.name in shown else " &#8599;"
                out.append(
                    f'<button data-request="centre" data-params="{data_json({"name": item.name})}" '
                    f'title="{esc(item.opcode)} {esc(shape_text(item.shape, False))}">{esc(item.name)}{mark}'
                    f"</button>"
                )
            more = len(set(items)) - MAX_LISTED
            return "".join(out) + (f' <span class="xw-note">and {more} more</span>' if more > 0 else "")

        parent = v.parent_fusion
        details = self._op_details(v.module, instr.name)  # XProf's card shows time, framework op, text
        if details:
            timing = ""
        elif instr.computation.is_fusion:
            timing = '<span class="xw-note">none of its own: its fusion\'s time covers it</span>'
        else:
            timing = '<span class="xw-note">not measured by the profile</span>'
        rows = [
            ("Opcode", esc(instr.opcode)),
            ("Shape", esc(shape_text(instr.shape))),
            ("Category", esc(op_category(instr))),
            ("Computation", esc(instr.computation.name)),
            (
                "Inside fusion",
                (f'<button data-request="centre" data-params="{data_json({"name": parent})}">{esc(parent)}</button>')
                if parent
                else "",
            ),
            ("Device time", timing),
            ("Framework op", "" if details else esc(instr.metadata.op_name)),
            ("Source", esc(source_text(instr))),
            (
                "Calls",
                "".join(
                    f'<button data-request="op" data-params="{data_json({"name": c.name})}">{esc(c.name)}</button>'
                    for c in instr.called
                    if not c.is_fusion
                ),
            ),
            ("Operands", buttons(instr.operands) or '<span class="xw-note">none</span>'),
            ("Users", buttons(instr.users) or '<span class="xw-note">none</span>'),
        ]
        body = "".join(f"<tr><td>{esc(k)}</td><td class='xw-list'>{val}</td></tr>" for k, val in rows if val)
        toggle = ""
        if instr.opcode == "fusion":
            is_open = instr.name in v.expanded
            toggle = (
                f'<button data-request="toggle" data-testid="toggle-fusion" data-params="'
                f'{data_json({"name": instr.name})}">{"Close" if is_open else "Open"} fused computation'
                f"</button>"
            )
        text = (
            ""
            if details
            else (f'<pre class="xw-expr" data-testid="node-expression">{esc(shorten(expression(instr), 3000))}</pre>')
        )
        card = (
            f'<div class="xw-card" data-node-card="{esc(instr.name)}"><b data-testid="node-card-name">'
            f"{esc(instr.name)}</b> {toggle}<table>{body}</table>{text}</div>"
        )
        return card + (op_details_html(details) if details else "")

    def _op_details(self, module, name):
        """XProf's op details of `name` from the run's op profile, or {} where it has none."""
        if self._op_nodes is None:
            self._op_nodes = {}
            if hasattr(self.run, "op_profile"):
                try:
                    profile = self.run.op_profile(top_n=10**9)
                except Exception:  # the card then shows the HLO facts without times
                    log.warning("xprof_widgets: no op profile for the graph viewer's card", exc_info=True)
                    profile = None
                program = None
                for node, _, _parent in profile.root.walk() if profile is not None else ():
                    if node.kind == "program":
                        program = node.name
                    if node.kind == "op":
                        self._op_nodes.setdefault((program, node.name), node)
        node = self._op_nodes.get((module, name))
        if node is None:
            return {}
        return op_details(node, module)


__all__ = ["KIND_COLORS", "GraphViewerWidget", "op_kind"]
