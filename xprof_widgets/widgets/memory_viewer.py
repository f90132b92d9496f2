"""MemoryViewerWidget: a compiled module's heap over program order, buffers at peak.

Shows what `Run.memory_viewer()` computes, as XProf's memory viewer does: the
module selector, the summary numbers, the heap chart (padded and unpadded
heap size after each heap-simulator step, the peak marked), and the buffers
live at the peak drawn twice, in program order and by size. Hovering a
buffer draws its lifespan on the heap chart; clicking it pins its details.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import traitlets
from bokeh.palettes import Category20

from ..analysis.core.availability import NO_HLO_MODULES
from ..analysis.core.modules import default_module
from ..analysis.memory_viewer import memory_space_name
from ..format import mib
from ..run import as_run
from ._bokeh import BokehWidget, hover_and_tap, one_of, selection_look, strip_chrome
from ._html import esc, notice, options, stat_cards

MIB = 2**20
# One colour a category, as XProf's legend has them.
CATEGORY_COLORS = {
    "Parameter": "#4e79a7",
    "Output": "#f28e2b",
    "Thread-local": "#76b7b2",
    "Constant": "#59a14f",
    "Temporary": "#e15759",
    "": "#bab0ac",
}
# The buffer charts' sources; their ids are the program order indices of the buffers at the peak.
BUFFER_SOURCES = ("by_order", "by_size", "by_padding", "blocks")


class MemoryViewerWidget(BokehWidget):
    """XProf's memory viewer for one compiled module of a run.

    `MemoryViewerWidget(run)` (or a path) shows the largest module; `module`
    and `memory_space` are traits Python can read and set. `selected_buffer`
    holds the clicked buffer's details ({} when none); `select_buffer(name or
    logical buffer id)` (or setting `selected_buffer = {"id": ...}`) selects one.
    """

    module = traitlets.Unicode(help="The module shown, `name(program_id)`.").tag(sync=True)
    memory_space = traitlets.Int(0, help="Memory space (colour) shown; 0 is device memory (HBM).").tag(sync=True)
    selected_buffer = traitlets.Dict(help="Details of the clicked buffer at peak; {} when none.").tag(sync=True)

    def __init__(self, run, module=None, memory_space=0, **kwargs):
        self.run = as_run(run)
        if not self.run.hlo_protos:
            super().__init__(html=notice(f"No memory viewer for run {self.run.name}: {NO_HLO_MODULES}."), **kwargs)
            self.result = None
            return
        super().__init__(**kwargs)
        self.result = None
        self.memory_space = memory_space
        self.module = module or default_module(self.run.hlo_protos)  # the largest module, as run.memory_viewer()

    # --- state -------------------------------------------------------------------

    @traitlets.validate("module")
    def _check_module(self, proposal):
        return one_of(proposal["value"], sorted(self.run.hlo_protos), "module")

    @traitlets.observe("module", "memory_space")
    def _recompute(self, change=None):
        if not self.module:
            return
        self.result = self.run.memory_viewer(self.module, self.memory_space)
        self.selected_buffer = {}
        self.selected = {}
        self._render()

    def on_tap(self, sel):
        if sel.get("source") not in BUFFER_SOURCES or sel.get("id") is None or int(sel["id"]) < 0:
            if self.selected_buffer:
                self.selected_buffer = {}
            return
        details = self._buffer(int(sel["id"]))
        if details != self.selected_buffer:
            self.selected_buffer = details  # observed: links the charts and draws the card
        else:
            self._link_charts(details)

    @traitlets.validate("selected_buffer")
    def _resolve_buffer(self, proposal):
        value = proposal["value"]
        if not value or self.result is None:
            return {}
        if "program_order_index" in value and "instruction_name" in value:
            return value
        key = value.get("id", value.get("instruction_name"))
        table = self.result.buffers_at_peak
        rows = table[(table.logical_buffer_id == key) | (table.instruction_name == key)]
        if rows.empty:
            raise traitlets.TraitError(f"no buffer {key!r} live at the peak of {self.module}")
        return self._buffer(int(rows.program_order_index.iloc[0]))

    @traitlets.observe("selected_buffer")
    def _show_selection(self, change):
        if change["new"]:
            self._link_charts(change["new"])
        self.html = self._html()

    def _link_charts(self, details):
        """Both buffer charts highlight the buffer, whichever was clicked."""
        source = self.selected.get("source")
        want = {
            "figure": "buffers",
            "source": source if source in BUFFER_SOURCES else "by_order",
            "id": details["program_order_index"],
            "linked": list(BUFFER_SOURCES),
        }
        if {k: self.selected.get(k) for k in want} != want:
            self.selected = want

    def _buffer(self, order_index):
        row = self.result.buffers_at_peak.set_index("program_order_index").loc[order_index]
        out = {"program_order_index": int(order_index)}
        for key, value in row.items():
            if value is pd.NA or (isinstance(value, float) and np.isnan(value)):
                value = None
            elif isinstance(value, (np.integer,)):
                value = int(value)
            elif isinstance(value, (np.floating,)):
                value = float(value)
            out[key] = value
        return out

    def select_buffer(self, key):
        """Select a buffer live at the peak by instruction name or logical buffer id."""
        self.selected_buffer = {"id": key}

    # --- browser messages ----------------------------------------------------------

    def on_request(self, kind, params):
        if kind == "module":
            self.module = str(params["value"])
            return {"module": self.module}, None
        if kind == "memory_space":
            self.memory_space = int(params["value"])
            return {"memory_space": self.memory_space}, None
        raise ValueError(f"unknown request {kind!r}")

    def on_hover(self, source, id, figure):
        if source not in BUFFER_SOURCES:
            return
        self.push_columns("lifespan", self._lifespan(None if id is None or int(id) < 0 else int(id)))

    def _lifespan(self, order_index):
        empty = {"left": np.zeros(0), "right": np.zeros(0), "top": np.zeros(0)}
        if order_index is None:
            return empty
        buf = self._buffer(order_index)
        steps = len(self.result.heap_sizes)
        start = 0 if buf["span_start"] is None else buf["span_start"]
        end = steps - 1 if buf["span_end"] is None else buf["span_end"]
        return {
            "left": np.array([start], dtype=np.float64),
            "right": np.array([end], dtype=np.float64),
            "top": np.array([buf["size_bytes"] / MIB], dtype=np.float64),
        }

    # --- drawing -----------------------------------------------------------------

    def _render(self):
        figures = {}
        r = self.result
        if len(r.heap_sizes):
            figures["heap"] = self._heap_figure()
        if len(r.buffers_at_peak):
            figures["buffers"] = self._buffer_figures()
        allocations = self._allocation_figure()
        if allocations is not None:
            figures["allocations"] = allocations
        self.set_figures(figures)
        self.html = self._html()

    def _allocation_figure(self):
        """XProf's buffer allocation timeline: each buffer where it sits in memory (y, MiB)
        over its lifespan (x, heap-simulator steps), in its allocation's box. A buffer live
        at the peak has its program order index as id (a tap selects it, as in the bar
        charts); the others a negative one."""
        from bokeh.models import ColumnDataSource
        from bokeh.plotting import figure

        blocks = self.result.allocation_blocks
        if not (blocks["logical_buffer_id"] >= 0).any():
            return None
        at_peak = dict(
            zip(
                self.result.buffers_at_peak["logical_buffer_id"].astype(np.int64),
                self.result.buffers_at_peak["program_order_index"].astype(np.int64),
            )
        )
        boxes, rows = blocks[blocks["logical_buffer_id"] < 0], blocks[blocks["logical_buffer_id"] >= 0]
        ids = [at_peak.get(int(b), -2 - int(b)) for b in rows["logical_buffer_id"]]
        bottom = rows["offset_bytes"].to_numpy(np.float64) / MIB
        src = ColumnDataSource(
            {
                "id": np.asarray(ids, dtype=np.int64),
                "left": rows["start_step"].to_numpy(np.float64),
                "right": np.maximum(
                    rows["end_step"].to_numpy(np.float64), rows["start_step"].to_numpy(np.float64) + 0.5
                ),
                "bottom": bottom,
                "top": bottom + rows["size_bytes"].to_numpy(np.float64) / MIB,
                "name": rows["name"].astype(str).tolist(),
                "category": rows["category"].astype(str).tolist(),
                "size": rows["size_bytes"].to_numpy(np.float64) / MIB,
                "shape": rows["shape"].astype(str).tolist(),
                "op": rows["tf_op_name"].astype(str).tolist(),
                "span": [f"{a} to {b}" for a, b in zip(rows["start_step"], rows["end_step"])],
                # A colour per buffer (XProf's timeline too): neighbours told apart.
                "color": [Category20[20][k % 20] for k in range(len(rows))],
            },
            name="blocks",
        )
        fig = figure(
            height=320,
            sizing_mode="stretch_width",
            title="Buffer allocations: where each buffer sits in memory over its lifespan",
            x_axis_label="heap-simulator step",
            y_axis_label="MiB",
            tools="pan,wheel_zoom,box_zoom,reset,save",
            active_scroll="wheel_zoom",
        )
        box_bottom = boxes["offset_bytes"].to_numpy(np.float64) / MIB
        fig.quad(
            left=0,
            right=boxes["end_step"].to_numpy(np.float64),
            bottom=box_bottom,
            top=box_bottom + boxes["size_bytes"].to_numpy(np.float64) / MIB,
            fill_color=None,
            line_color="#999999",
            line_dash="dashed",
        )
        quads = fig.quad(
            left="left",
            right="right",
            bottom="bottom",
            top="top",
            source=src,
            fill_color="color",
            fill_alpha=0.8,
            line_color="white",
            line_width=0.5,
            **selection_look(),
        )
        hover_and_tap(
            fig,
            quads,
            [
                ("buffer", "@name"),
                ("category", "@category"),
                ("size", "@size{0,0.000} MiB"),
                ("steps", "@span"),
                ("shape", "@shape"),
                ("framework op", "@op"),
            ],
        )
        fig.y_range.start = 0
        strip_chrome(fig, "")
        return fig

    def _heap_figure(self):
        from bokeh.models import ColumnDataSource
        from bokeh.models.annotations import Span
        from bokeh.plotting import figure

        r = self.result
        steps = np.arange(len(r.heap_sizes))
        names = list(r.hlo_instruction_names) + [""] * (len(steps) - len(r.hlo_instruction_names))
        src = ColumnDataSource(
            {
                "step": steps,
                "heap": np.asarray(r.heap_sizes) / MIB,
                "unpadded": np.asarray(r.unpadded_heap_sizes) / MIB,
                "op": names[: len(steps)],
            },
            name="heap",
        )
        fig = figure(
            height=260,
            sizing_mode="stretch_width",
            title=f"Heap of {r.module} over program order (after each heap-simulator step)",
            x_axis_label="program point",
            y_axis_label="MiB",
            tools="xpan,xwheel_zoom,reset,save",
            active_scroll="xwheel_zoom",
        )
        lifespan = ColumnDataSource({"left": [], "right": [], "top": []}, name="lifespan")
        fig.quad(
            left="left",
            right="right",
            bottom=0,
            top="top",
            source=lifespan,
            fill_color="#f28e2b",
            fill_alpha=0.35,
            line_color="#f28e2b",
        )
        padded = fig.step("step", "heap", source=src, mode="after", line_width=2, color="#4e79a7", legend_label="heap")
        fig.step(
            "step",
            "unpadded",
            source=src,
            mode="after",
            line_width=1.5,
            color="#59a14f",
            line_dash="dashed",
            legend_label="unpadded",
        )
        peak_x = int(np.argmax(r.heap_sizes)) if len(r.heap_sizes) else 0
        fig.add_layout(
            Span(location=peak_x, dimension="height", line_color="#e15759", line_dash="dotted", line_width=2)
        )
        hover_and_tap(
            fig,
            padded,
            [
                ("step", "@step"),
                ("heap", "@heap{0,0.00} MiB"),
                ("unpadded", "@unpadded{0,0.00} MiB"),
                ("op", "@op"),
            ],
            tap=False,
            mode="vline",
        )
        fig.y_range.start = 0  # sizes from zero, as XProf draws them: no exaggerated swings
        fig.legend.orientation = "horizontal"
        fig.add_layout(fig.legend[0], "above")  # not over the heap curve
        strip_chrome(fig, "")
        return fig

    def _buffer_figures(self):
        from bokeh.layouts import column
        from bokeh.models import ColumnDataSource
        from bokeh.plotting import figure

        table = self.result.buffers_at_peak
        figs = []
        charts = [
            ("by_order", table.sort_values("program_order_index"), "Buffers at peak, in program order"),
            ("by_size", table.sort_values("size_rank"), "Buffers at peak, by size"),
        ]
        padded = table[table["padding_bytes"] > 0]
        if len(padded):  # XProf's by-padding list: the bytes each layout adds, largest first
            charts.append(
                (
                    "by_padding",
                    padded.sort_values("padding_bytes", ascending=False, kind="stable"),
                    "Buffers at peak, by padding (bytes their layout adds)",
                )
            )
        for name, order, title in charts:
            widths = order.padding_bytes if name == "by_padding" else order.size_bytes
            sizes = widths.to_numpy(dtype=np.float64) / MIB
            right = np.cumsum(sizes)
            src = ColumnDataSource(
                {
                    "id": order.program_order_index.to_numpy(),
                    "left": right - sizes,
                    "right": right,
                    "name": order.instruction_name.astype(str).tolist(),
                    "category": order.category.astype(str).tolist(),
                    "size": order.size_bytes.to_numpy(dtype=np.float64) / MIB,
                    "padding": order.padding_bytes.to_numpy(dtype=np.float64) / MIB,
                    "shape": order["shape"].astype(str).tolist(),
                    "color": [CATEGORY_COLORS.get(c, "#bab0ac") for c in order.category.astype(str)],
                },
                name=name,
            )
            fig = figure(
                height=110,
                sizing_mode="stretch_width",
                title=title,
                x_axis_label="MiB",
                tools="xpan,xwheel_zoom,reset",
                y_range=(0, 1),
            )
            bars = fig.quad(
                left="left",
                right="right",
                bottom=0,
                top=1,
                source=src,
                fill_color="color",
                line_color="white",
                **selection_look(),
            )
            hover_and_tap(
                fig,
                bars,
                [
                    ("buffer", "@name"),
                    ("category", "@category"),
                    ("size", "@size{0,0.000} MiB"),
                    ("padding", "@padding{0,0.000} MiB"),
                    ("shape", "@shape"),
                ],
            )
            strip_chrome(fig, "y")
            figs.append(fig)
        return column(*figs, sizing_mode="stretch_width")

    def _html(self):
        if self.result is None:
            return self.html
        r = self.result
        modules = options(sorted(self.run.hlo_protos, key=lambda m: (m != self.module, m)), self.module)
        # Only the spaces the module's buffers use (XProf lists its seven whatever the module).
        spaces = "".join(
            f'<option value="{c}"{" selected" if c == r.memory_space else ""}>{esc(memory_space_name(c))}</option>'
            for c in r.memory_spaces
        )
        stats = [
            ("peak_heap_bytes", "Peak heap", mib(r.peak_heap_bytes)),
            ("peak_unpadded_heap_bytes", "Unpadded peak", mib(r.peak_unpadded_heap_bytes)),
            ("padding_overhead_bytes", "Padding overhead", mib(r.padding_overhead_bytes)),
            ("total_allocation_bytes", "Total allocation", mib(r.total_allocation_bytes)),
            ("indefinite_allocation_bytes", "Indefinite lifetime", mib(r.indefinite_allocation_bytes)),
            ("entry_parameters_bytes", "Entry parameters", mib(r.entry_parameters_bytes)),
            ("live_out_bytes", "Live out", mib(r.live_out_bytes)),
            ("fragmentation", "Fragmentation", f"{100 * r.fragmentation:.1f} %"),
            ("buffers_at_peak", "Buffers at peak", f"{len(r.buffers_at_peak)}"),
        ]
        space = memory_space_name(r.memory_space)
        empty_note = ""
        if not len(r.heap_sizes) and not len(r.buffers_at_peak):
            empty_note = (
                f'<div class="xw-note" data-testid="no-heap">No {esc(space)} buffer of this module has a '
                "heap-simulator lifetime"
                + (
                    f": its {mib(r.indefinite_allocation_bytes)} are held for the whole program "
                    "(parameters, outputs, constants)"
                    if r.indefinite_allocation_bytes
                    else ""
                )
                + ", so there is no heap chart and no buffer at a peak.</div>"
            )
        padding_note = (
            ""
            if (r.buffers_at_peak["padding_bytes"] > 0).any()
            else '<div class="xw-note" data-testid="no-padding">No buffer live at the peak is padded: '
            "their layouts add no bytes, so there is no by-padding chart.</div>"
        )
        legend = "".join(
            f'<span><i style="background:{c}"></i>{esc(k)}</span>' for k, c in CATEGORY_COLORS.items() if k
        )
        return f"""
<div class="xw-mv">
  <div class="xw-head"><b>Memory viewer</b>
    <label>Module <select data-request="module" data-testid="module">{modules}</select></label>
    <label>Memory space <select data-request="memory_space" data-testid="memory-space">{spaces}</select></label>
  </div>
  {stat_cards(stats)}
  {empty_note}
  {'<div data-figure="heap"></div>' if "heap" in self.figures else ""}
  {f'<div class="xw-legend">{legend}</div><div data-figure="buffers"></div>' if "buffers" in self.figures else ""}
  {padding_note if "buffers" in self.figures else ""}
  {self._card_html() if "buffers" in self.figures else ""}
  {'<div data-figure="allocations"></div>' if "allocations" in self.figures else ""}
</div>"""

    def _card_html(self):
        b = self.selected_buffer
        if not b:
            return '<div class="xw-card" data-card="">Click a buffer to see its details here.</div>'
        span = "whole program" if b.get("span_start") is None else f"steps {b['span_start']} to {b['span_end']}"
        rows = [
            ("Category", b.get("category")),
            ("Size", mib(b["size_bytes"])),
            ("Unpadded size", mib(b["unpadded_size_bytes"])),
            ("Extra memory (padding)", mib(b["padding_bytes"])),
            ("Expansion", f"{b['expansion']:.2f}x"),
            ("Shape", b.get("shape")),
            ("Framework op", b.get("tf_op_name")),
            ("HLO opcode", b.get("op_code")),
            ("Allocation", b.get("allocation_type")),
            ("Lifespan", span),
            ("Source", b.get("source")),
        ]
        body = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows if v not in (None, ""))
        return (
            f'<div class="xw-card" data-card="{esc(b["instruction_name"])}">'
            f'<b data-testid="card-name">{esc(b["instruction_name"])}</b><table>{body}</table></div>'
        )


__all__ = ["MemoryViewerWidget"]
