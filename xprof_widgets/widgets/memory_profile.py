"""MemoryProfileWidget: an allocator's memory over time, the peak, what is live there.

Shows what `Run.memory_profile()` computes, as XProf's memory profile does:
a memory-id (allocator) selector, the summary at the peak, the timeline (heap
and stack stacked, free memory, fragmentation on its own axis, the peak
marked) and the live allocations at the peak. Beyond XProf, clicking any
moment of the timeline shows the allocations live then. The page receives
only the sampled timeline (at most 1000 points), never every event.
"""

from __future__ import annotations

import numpy as np
import traitlets

from ..format import size as human_bytes
from ..run import as_run
from ._bokeh import BokehWidget, a_host, hover_and_tap, one_of
from ._html import esc, notice, options, plain_table, sortable_headers, stat_cards
from ._templates import ChartTemplate

TABLE_ROWS = 100  # rows of the breakdown shown on the page; all are in the DataFrame
SORTABLE = ("op_name", "allocation_bytes", "requested_bytes", "occurrences", "region_type", "data_type", "shape")
HEADERS = {
    "op_name": "Op name",
    "allocation_bytes": "Allocation size",
    "requested_bytes": "Requested size",
    "occurrences": "Occurrences",
    "region_type": "Region type",
    "data_type": "Data type",
    "shape": "Shape",
}


def _unit(max_bytes):
    """(divisor, label): GiB for large memories, MiB otherwise."""
    return (2**30, "GiB") if max_bytes >= 4 * 2**30 else (2**20, "MiB")


class MemoryProfileWidget(BokehWidget):
    """XProf's memory profile for one allocator of a run.

    `MemoryProfileWidget(run)` (or a path) shows the first allocator; `host`,
    `memory_id`, `moment_ps` (the clicked time, absolute ps; -1: the peak) and
    `sort_by` are traits Python can read and set. `breakdown` is the table
    shown (a DataFrame).
    """

    host = traitlets.Unicode(help="The host shown.").tag(sync=True)
    memory_id = traitlets.Unicode(help="The allocator shown (see result.memory_ids).").tag(sync=True)
    moment_ps = traitlets.Int(-1, help="Absolute time (ps) of the breakdown shown; -1: the peak.").tag(sync=True)
    sort_by = traitlets.Enum(
        SORTABLE, "allocation_bytes", help="Breakdown column sorted on (descending for sizes)."
    ).tag(sync=True)

    def __init__(self, run, memory_id=None, host=None, **kwargs):
        self.run = as_run(run)
        self.result = None
        self._ready = False  # observers wait until host and memory id are both set
        self._ids = {}  # host -> memory ids, for validation
        super().__init__(**kwargs)
        self.host = host or self.run.readable_hosts[0]
        self.memory_id = memory_id or ""
        self._ready = True
        self._recompute()

    # --- state -------------------------------------------------------------------

    def _memory_ids(self, host):
        if host not in self._ids:
            self._ids[host] = self.run.memory_profile(host=host).memory_ids
        return self._ids[host]

    @traitlets.validate("host")
    def _check_host(self, proposal):
        return a_host(self.run, proposal["value"])

    @traitlets.validate("memory_id")
    def _check_memory_id(self, proposal):
        value = proposal["value"]
        return one_of(value, self._memory_ids(self.host), "memory id") if value else value

    @traitlets.observe("host", "memory_id")
    def _recompute(self, change=None):
        if not self._ready:
            return
        if change is not None and change["name"] == "host" and self.memory_id not in self._memory_ids(self.host):
            self._ready = False
            self.memory_id = ""  # the new host has other allocators: take its first
            self._ready = True
        self.result = self.run.memory_profile(memory_id=self.memory_id or None, host=self.host)
        if self.result.reason:
            self.set_figures({})
            self.html = notice(f"No memory profile for host {self.host} of run {self.run.name}: {self.result.reason}.")
            return
        if self.memory_id != self.result.memory_id:
            self._ready = False
            self.memory_id = self.result.memory_id
            self._ready = True
        self.moment_ps = -1
        self.selected = {}
        # The unit of what the chart's axis spans: heap and stack (free memory has its own scale).
        self._unit = _unit(int(self.result.timeline[["heap_bytes", "stack_bytes"]].sum(axis=1).max()))
        self._samples = self.result.sampled_timeline()
        self.set_figures({"timeline": TIMELINE.item(**self._timeline_values())})
        self.html = self._html()

    @traitlets.observe("moment_ps", "sort_by")
    def _redraw_table(self, change):
        if self._ready and self.result is not None and not self.result.reason:
            self.html = self._html()

    tap_source = "moments"

    def select_tapped(self, id):
        self.moment_ps = int(self._samples["time_ps"].iloc[id])

    def clear_tapped(self):
        self.moment_ps = -1

    @property
    def breakdown(self):
        """The allocations shown: at the peak (XProf's rows), or at `moment_ps`."""
        r = self.result
        if r is None or r.reason:
            return None
        table = r.breakdown_at_peak if self.moment_ps < 0 else r.breakdown_at(self.moment_ps)
        ascending = self.sort_by in ("op_name", "region_type", "data_type", "shape")
        return table.sort_values(self.sort_by, ascending=ascending, kind="stable").reset_index(drop=True)

    # --- browser messages ----------------------------------------------------------

    def on_request(self, kind, params):
        if kind == "memory_id":
            self.memory_id = str(params["value"])
        elif kind == "host":
            self.host = str(params["value"])
        elif kind == "sort":
            self.sort_by = str(params["column"])
        elif kind == "peak":
            self.selected = {}
            self.moment_ps = -1
        else:
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    # --- drawing -----------------------------------------------------------------

    def _timeline_values(self):
        """What the timeline chart (`TIMELINE`) is drawn from."""
        r, s, (div, unit) = self.result, self._samples, self._unit
        t = s["time_ms"].to_numpy(dtype=np.float64)
        # Each sample owns the time from halfway to its neighbours: an invisible
        # column there makes any click on the chart pick the nearest moment.
        mid = (t[1:] + t[:-1]) / 2
        left = np.concatenate([[t[0] - (mid[0] - t[0] if len(t) > 1 else 0.5)], mid])
        right = np.concatenate([mid, [t[-1] + (t[-1] - mid[-1] if len(t) > 1 else 0.5)]])
        heap = s["heap_bytes"].to_numpy(dtype=np.float64) / div
        stack = s["stack_bytes"].to_numpy(dtype=np.float64) / div
        free = s["free_bytes"].to_numpy(dtype=np.float64) / div
        moments = {
            "id": np.arange(len(s), dtype=np.int32),
            "t": t,
            "left": left,
            "right": right,
            "stack": stack,
            "heap_top": stack + heap,
            "heap": heap,
            "free": free,
            "frag": s["fragmentation"].to_numpy(dtype=np.float64) * 100,
            "op": s["op_name"].astype(str).tolist(),
            "activity": s["activity"].astype(str).tolist(),
            "size": s["allocation_bytes"].to_numpy(dtype=np.float64) / div,
        }
        # Heap and stack fill the chart: free memory (on a GPU, the rest of its 80-140 GiB)
        # would flatten them to the axis, so it has its own scale, hidden until its legend
        # entry is clicked.
        top = float(np.max(stack + heap)) if len(s) else 1.0
        top = top if top > 0 else 1.0
        free_top = float(np.max(free)) if len(s) else 0.0
        return {
            "title": f"Allocator {r.memory_id} over time ({len(s)} of {len(r.timeline)} snapshots drawn, peaks kept)",
            "unit": unit,
            "y_end": top * 1.05,
            "free_end": (free_top or 1.0) * 1.05,
            "free_label": f"free (own scale, up to {human_bytes(int(free_top * div))})",
            "peak_ms": float(r.peak_time_ms),
            "peak": {
                "x": np.array([r.peak_time_ms], dtype=np.float64),
                "y": np.array([r.peak_bytes_in_profile / div], dtype=np.float64),
            },
            "tips": [
                ("time", "@t{0,0.000} ms"),
                ("heap", f"@heap{{0,0.000}} {unit}"),
                ("stack", f"@stack{{0,0.000}} {unit}"),
                ("free", f"@free{{0,0.000}} {unit}"),
                ("fragmentation", "@frag{0.0} %"),
                ("event", "@activity @op"),
            ],
            "moments": moments,
            # The curves draw from a copy: glyphs on the clicked source would dim.
            "curves": {k: moments[k] for k in _CURVES},
        }

    def _html(self):
        r = self.result
        ids = options(r.memory_ids, r.memory_id)
        hosts = options(self.run.hosts, self.host)
        host_select = (
            f'<label>Host <select data-request="host" data-testid="host">{hosts}</select></label>'
            if len(self.run.hosts) > 1
            else ""
        )
        stats = [
            ("peak_bytes_in_use", "Lifetime peak", human_bytes(r.peak_bytes_in_use)),
            ("peak_bytes_in_profile", "Peak in this profile", human_bytes(r.peak_bytes_in_profile)),
            ("peak_heap_bytes", "Heap at peak", human_bytes(r.peak_heap_bytes)),
            ("peak_stack_bytes", "Stack at peak", human_bytes(r.peak_stack_bytes)),
            ("peak_free_bytes", "Free at peak", human_bytes(r.peak_free_bytes)),
            ("capacity_bytes", "Capacity", human_bytes(r.capacity_bytes)),
            ("fragmentation_at_peak", "Fragmentation at peak", f"{100 * r.fragmentation_at_peak:.1f} %"),
            ("peak_time_ms", "Peak at", f"{r.peak_time_ms:,.3f} ms (step {r.peak_step_id})"),
        ]
        return f"""
<div class="xw-mp">
  <div class="xw-head"><b>Memory profile</b> {host_select}
    <label>Memory id <select data-request="memory_id" data-testid="memory-id">{ids}</select></label>
  </div>
  {stat_cards(stats)}
  <div data-figure="timeline"></div>
  {self._table_html()}
</div>"""

    def _table_html(self):
        r = self.result
        table = self.breakdown
        if self.moment_ps < 0:
            title = (
                f"Allocations live at the peak ({r.peak_time_ms:,.3f} ms, step {r.peak_step_id}), as XProf "
                "shows them. Click the timeline for another moment."
            )
            back = ""
        else:
            moment_ms = (self.moment_ps - (r.peak_time_abs_ps - r.peak_time_ps)) / 1e9
            title = f"Allocations live at {moment_ms:,.3f} ms (all steps)."
            back = ' <button data-request="peak" data-testid="back-to-peak">back to the peak</button>'
        head = sortable_headers({c: HEADERS[c] for c in SORTABLE}, self.sort_by)
        rows, unsaid = [], False
        for row in table.head(TABLE_ROWS).itertuples(index=False):
            # What the allocator did not record (XProf shows a blank op and the data type
            # INVALID, TensorFlow's DT_INVALID): said in words, with a note why below.
            op, dtype = _said(row.op_name, ""), _said(row.data_type, INVALID_DATA_TYPE)
            region, shape = _said(row.region_type, ""), _said(row.shape, "")
            unsaid |= NOT_RECORDED in (op, dtype, region, shape)
            rows.append(
                f"<tr><td>{op}</td><td class=num>{esc(human_bytes(row.allocation_bytes))}</td>"
                f"<td class=num>{esc(human_bytes(row.requested_bytes))}</td><td class=num>{row.occurrences}</td>"
                f"<td>{region}</td><td>{dtype}</td><td>{shape}</td></tr>"
            )
        more = (
            f"<div>{len(table) - TABLE_ROWS} more rows: see the widget's .breakdown</div>"
            if len(table) > TABLE_ROWS
            else ""
        )
        why = (
            '<div class="xw-note" data-testid="not-recorded-note"><i>not recorded</i>: the allocator '
            "event has no such stat. TensorFlow records the op, data type and shape of the tensors its "
            "op kernels allocate; XLA's own buffers (all of a JAX program's) carry none, and XProf "
            "shows them blank, with data type INVALID.</div>"
            if unsaid
            else ""
        )
        return (
            f'<div data-testid="breakdown-title">{esc(title)}{back}</div>'
            + plain_table("breakdown", head, rows, len(table))
            + more
            + why
        )


#: XProf's name of a data type the allocator did not record (TensorFlow's DT_INVALID).
INVALID_DATA_TYPE = "INVALID"
NOT_RECORDED = "<i>not recorded</i>"


def _said(value, missing):
    """A cell's HTML: the value escaped, or "not recorded" where it is `missing`."""
    text = "" if value is None else str(value)
    return NOT_RECORDED if text == missing or text in ("", "nan") else esc(text)


__all__ = ["MemoryProfileWidget"]


_CURVES = ("t", "stack", "heap_top", "free", "frag")


def _timeline_figure(*, title, unit, y_end, free_end, free_label, peak_ms, peak, tips, moments, curves):
    """The allocator's timeline (`MemoryProfileWidget._timeline_values`' values): heap and
    stack stacked, free memory and fragmentation on axes of their own, the peak marked,
    and under it all a column per moment that a click selects."""
    from bokeh.models import BasicTickFormatter, ColumnDataSource, LinearAxis, Range1d
    from bokeh.models.annotations import Span
    from bokeh.plotting import figure

    fig = figure(
        height=300,
        sizing_mode="stretch_width",
        title=title,
        x_axis_label="time (ms)",
        y_axis_label=unit,
        y_range=Range1d(0, y_end),
        tools="xpan,xwheel_zoom,reset,save",
        active_scroll="xwheel_zoom",
    )
    columns = fig.quad(
        left="left",
        right="right",
        bottom=0,
        top=y_end,
        source=ColumnDataSource(moments, name="moments"),
        fill_alpha=0,
        line_alpha=0,
        selection_fill_alpha=0.12,
        selection_fill_color="#555",
        selection_line_alpha=0,
        nonselection_fill_alpha=0,
        nonselection_line_alpha=0,
    )
    drawn = ColumnDataSource(curves)
    fig.varea(x="t", y1=0, y2="stack", source=drawn, fill_color="#76b7b2", fill_alpha=0.8, legend_label="stack")
    fig.varea(x="t", y1="stack", y2="heap_top", source=drawn, fill_color="#4e79a7", fill_alpha=0.8, legend_label="heap")
    fig.extra_y_ranges = {"frag": Range1d(0, 100), "free": Range1d(0, free_end)}
    fig.line(
        "t",
        "free",
        source=drawn,
        y_range_name="free",
        color="#59a14f",
        line_width=1.5,
        legend_label=free_label,
        visible=False,
    )
    fig.add_layout(LinearAxis(y_range_name="frag", axis_label="fragmentation %"), "right")
    fig.line(
        "t",
        "frag",
        source=drawn,
        y_range_name="frag",
        color="#e15759",
        line_dash="dashed",
        legend_label="fragmentation",
    )
    fig.add_layout(Span(location=peak_ms, dimension="height", line_color="#e15759", line_width=2, line_dash="dotted"))
    fig.scatter("x", "y", source=ColumnDataSource(peak), size=9, color="#e15759", legend_label="peak")
    hover_and_tap(fig, columns, tips)
    fig.xaxis.formatter = BasicTickFormatter(use_scientific=False)
    fig.legend.orientation = "horizontal"
    fig.legend.click_policy = "hide"
    fig.add_layout(fig.legend[0], "above")  # over the chart, not over the curves
    fig.toolbar.logo = None
    return fig


TIMELINE = ChartTemplate(
    "memory_profile.timeline",
    _timeline_figure,
    {
        "title": "str",
        "unit": "str",
        "y_end": "float",
        "free_end": "float",
        "free_label": "str",
        "peak_ms": "float",
        "peak": {"x": np.float64, "y": np.float64},
        "tips": "pairs",
        "moments": {
            "id": np.int32,
            **dict.fromkeys(("t", "left", "right", "stack", "heap_top", "heap", "free", "frag"), np.float64),
            "op": str,
            "activity": str,
            "size": np.float64,
        },
        "curves": dict.fromkeys(_CURVES, np.float64),
    },
)
