"""TraceViewerWidget: every device and host thread on one timeline, for millions of events.

Shows `Run.trace()`: one section per device (its XLA Modules, XLA Ops, ... rows) and one
for the host threads, each row split into its nesting depths. The page never holds the
profile: each view (wheel zoom, drag pan, XProf's W / S zoom and A / D pan keys once the
timeline was clicked, a range set from Python) asks Python for that window at the plot's
pixel width and gets binary columns back: every event at least a pixel wide, and merged
boxes (count and dominant name, drawn lighter) where shorter events crowd a pixel, so
the answer is bounded by pixels x rows. A click on an event shows its details (all
stats, decoded for it alone); on an XLA op, the same op details card as the op profile.
Its flows (XProf's arrows, `Trace.flows`: the host launch to the kernel it started, a
producer to its consumer) are drawn as arrows and listed ("Incoming flow", "Outgoing flow"),
each entry a link that selects that event (and shows it when it is out of view). "Flows"
draws the arrows of every flow in the view (at most FLOWS_SHOWN, spread over it; the view
says how many).
Box select (drag with the select tool over the rows wanted) measures: the span from the
first selected start to the last end, and XProf's selection table (`Trace.summary`) of the
selected events' threads over that span. Search finds events by name (substring or regex),
with next / previous. `selected_event` and `window_ps` are traits Python can read;
`show_range()`, `find()` and `link()` drive the view from Python and from the other
widgets (a step in OverviewWidget, an op in OpProfileWidget, a moment in
MemoryProfileWidget).
"""

from __future__ import annotations

import re
import zlib

import numpy as np
import pandas as pd
import traitlets
from bokeh.palettes import Category20_20

from ..analysis.core.command_buffers import graph_kernel_words, host_graph_summary
from ..analysis.trace import MAX_NESTING
from ..format import duration
from ..run import as_run
from ._bokeh import LABEL_TEXT, BokehWidget, a_host, selection_look
from ._html import data_json, esc, note, notice, options
from ._templates import ChartTemplate
from .op_details import op_details, op_details_html

ROW_PX = 18  # height of one nesting row on the page
MAX_HEIGHT_PX = 640  # taller layouts scroll vertically (drag pan)
LABEL_MIN_PX = 60  # boxes at least this wide carry their name
#: Boxes are drawn at least this wide (their times stay the events'): a kernel of a few µs in
#: a view of seconds is a sliver a canvas draws faintly, or not at all, and its row looks empty.
MIN_BOX_PX = 2
SEARCH_SHOWN = 20  # matches listed under the search box
SUMMARY_SHOWN = 20  # names listed in a box selection's table (XProf's selection summary)
#: The selection table's columns (`Trace.summary`'s) and their headers.
SUMMARY_COLUMNS = {"name": "Name", "occurrences": "#", "wall_ps": "Wall ms", "self_ps": "Self ms", "avg_ps": "Avg ms"}
_ID_TRACK = 2**32  # event id = track * 2**32 + event index: exact in float64 below 2**53
FLOWS_SHOWN = 300  # flow arrows drawn at most per view with "Flows" on (spread over the view's)
_NO_ARROWS = {"x0": np.zeros(0), "y0": np.zeros(0), "x1": np.zeros(0), "y1": np.zeros(0)}


def _ms(ps):
    return duration(ps, ms_from=1e6)  # a span of a microsecond or more in ms, as the time axis


#: Rows a counter series is drawn in, and at most how many of its samples are drawn.
COUNTER_ROWS = 3
COUNTER_POINTS = 4000


def _color_codes(names):
    """A stable colour index (0..19) per name: the same op has the same colour in every view."""
    codes, uniq = pd.factorize(pd.Series(names, dtype=object))
    table = np.array([zlib.crc32(str(n).encode()) % 20 for n in uniq], dtype=np.uint8)
    return table[codes] if len(table) else np.zeros(len(names), np.uint8)


#: How much lighter a merged box (events under a pixel, merged) is drawn than its dominant
#: name's own colour: told apart, yet as readable as the events around it at first view.
MERGED_LIGHTER = 0.3


def _palette():
    """20 colours for events, then the same 20 lighter for merged boxes."""
    light = []
    for c in Category20_20:
        r, g, b = (int(c[i : i + 2], 16) for i in (1, 3, 5))
        light.append("#" + "".join(f"{int(v + (255 - v) * MERGED_LIGHTER):02x}" for v in (r, g, b)))
    return list(Category20_20) + light


_NOTE_TEXT = {"text_font_size": "11px", "text_color": "#555555"}


def _arrows(source, color, width, head, alpha):
    """An arrow annotation over the columns x0, y0 (its tail) to x1, y1 (its head)."""
    from bokeh.models.annotations import Arrow, VeeHead

    return Arrow(
        source=source,
        x_start="x0",
        y_start="y0",
        x_end="x1",
        y_end="y1",
        line_color=color,
        line_width=width,
        line_alpha=alpha,
        end=VeeHead(size=head, line_color=color, fill_color=color, line_alpha=alpha, fill_alpha=alpha),
    )


class TraceViewerWidget(BokehWidget):
    """A run's trace: devices and host threads on one zoomable timeline.

    `TraceViewerWidget(run)` (or a path) shows the whole profile of the first
    host. Traits: `host`, `window_ps` ([start, end] absolute ps of the view),
    `selected_event` (details of the clicked event, {} for none), `search`
    (the search pattern), `collapsed` (section names folded).
    """

    host = traitlets.Unicode(help="The host shown.").tag(sync=True)
    window_ps = traitlets.List(traitlets.Float(), help="[start, end] of the view, absolute ps.").tag(sync=True)
    selected_event = traitlets.Dict(help="Details of the clicked event; {} for none.").tag(sync=True)
    search = traitlets.Unicode("", help="Search pattern (substring; /.../ for a regex).").tag(sync=True)
    collapsed = traitlets.List(traitlets.Unicode(), help="Sections folded to their header.").tag(sync=True)
    show_flows = traitlets.Bool(False, help="Draw the arrows of every flow in the view.").tag(sync=True)
    thread_filter = traitlets.Unicode(
        "", help="Only the threads (tracks) whose name matches this case-insensitive regex; empty: all."
    ).tag(sync=True)

    def __init__(self, run, host=None, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self._matches = None
        self._match_at = -1
        self._measure = {}
        self._summary_sort = ("wall_ps", True)  # the selection table's column, largest first
        self._cycle = None  # (name, position, of how many) of the selection table's event last shown
        self._cycling = None  # the id selected by cycling (keeps the selection table)
        self._highlight = None  # names to outline in every view
        self._ops = None  # the op profile's op nodes, for the op details card (see _op_nodes)
        self._graph_notes = {}  # host -> what became of its kernels run in CUDA graphs
        self.host = host or self.run.readable_hosts[0]
        self._open_host()

    # ---- building the view ------------------------------------------------

    def _open_host(self):
        self.trace = self.run.trace(self.host)
        self._matches, self._match_at, self._measure, self.selected_event = None, -1, {}, {}
        t = self.trace
        # XProf's origin: the profile's start (the file's time 0), not the first event, so
        # that times read here are XProf's `ts` and can be compared with it and with logs.
        self.origin_ps = 0
        # What a view request reads, empty until a timeline is drawn (a page may ask for a
        # window before, or of a host with no events).
        self._offset, self._row0 = {}, np.zeros(1, dtype=np.int64)
        self.window_ps = [int(t.start_ps), int(max(t.end_ps, t.start_ps))]
        if t.end_ps <= t.start_ps:
            self.set_figures({})
            self.html = notice(f"The trace of host {self.host} has no events.")
            return
        self._draw()

    def _layout(self):
        """Track -> first y row, and the y ticks (a label per track, a header per section).
        A section's counter series (`Trace.counters`) come first in it, COUNTER_ROWS rows
        each (`self._counter_rows`: (section, name) -> its top row), as XProf puts its
        counter tracks first in their process."""
        tracks = self.trace.tracks
        pattern = self._thread_pattern()
        if pattern is not None:
            keep = [bool(pattern.search(f"{label}\n{name}")) for label, name in zip(tracks["label"], tracks["name"])]
            tracks = tracks[keep]
        series = self._counter_series()
        offset, self._counter_rows = {}, {}
        ticks, labels = [], {}
        y = 0
        for section, group in tracks.groupby("section", sort=False):
            ticks.append(y)
            folded = section in self.collapsed
            labels[y] = ("▸ " if folded else "▾ ") + section
            y += 1
            if folded:
                continue
            for name in series.get(section, []):
                if pattern is None or pattern.search(name):
                    self._counter_rows[(section, name)] = y
                    ticks.append(y)
                    labels[y] = name
                    y += COUNTER_ROWS
            for row in group.itertuples():
                offset[row.Index] = y
                ticks.append(y)
                labels[y] = row.label
                y += max(int(row.rows), 1)
        return offset, ticks, labels, max(y, 1)

    def _counter_series(self):
        """{section: its counter names, in file order}."""
        counters = self.trace.counters()
        return {sec: list(dict.fromkeys(g["name"])) for sec, g in counters.groupby("section", sort=False)}

    def _counter_columns(self):
        """One line per counter series shown, as steps (a sample's value holds until the
        next), scaled into its rows (its lowest value at the bottom, its highest at the top);
        past COUNTER_POINTS samples, each of COUNTER_POINTS / 2 spans of time keeps its
        lowest and highest, so no spike is lost."""
        counters = self.trace.counters()
        xs, ys, names, ranges = [], [], [], []
        for (section, name), g in counters.groupby(["section", "name"], sort=False):
            top = self._counter_rows.get((section, name))
            if top is None:
                continue
            g = g[g["stat"] == g["stat"].iloc[0]]  # XProf's series: the first argument's
            t = g["time_ps"].to_numpy(np.int64)
            v = g["value"].to_numpy(np.float64)
            ok = np.isfinite(v)
            t, v = t[ok], v[ok]
            if not len(v):
                continue
            if len(v) > COUNTER_POINTS:
                spans = COUNTER_POINTS // 2
                bucket = ((t - t[0]) * spans // max(int(t[-1] - t[0]), 1)).clip(0, spans - 1)
                starts = np.flatnonzero(np.r_[True, bucket[1:] != bucket[:-1]])
                bounds = list(zip(starts.tolist(), np.r_[starts[1:], len(v)].tolist()))
                lo_at = [a + int(np.argmin(v[a:b])) for a, b in bounds]
                hi_at = [a + int(np.argmax(v[a:b])) for a, b in bounds]
                keep = np.unique(np.array(lo_at + hi_at + [len(v) - 1], dtype=np.int64))
                t, v = t[keep], v[keep]
            lo, hi = float(v.min()), float(v.max())
            scaled = (v - lo) / (hi - lo) if hi > lo else np.full(len(v), 0.5)
            y = top + (COUNTER_ROWS - 0.6) - scaled * (COUNTER_ROWS - 1.2)  # rows grow downwards
            x = (t - self.origin_ps) / 1e9
            xs.append(np.repeat(x, 2)[1:].tolist() + [float(x[-1])])
            ys.append(np.repeat(y, 2)[:-1].tolist() + [float(y[-1])])
            names.append(f"{name} ({section})")
            ranges.append(f"{lo:,.6g} to {hi:,.6g}")
        return {"xs": xs, "ys": ys, "name": names, "range": ranges}

    def _draw(self):
        self._offset, ticks, labels, total = self._layout()
        # Track id -> its first y row, as an array: each query maps its boxes with one lookup.
        self._row0 = np.zeros(len(self.trace.tracks) + 1, dtype=np.int64)
        self._row0[list(self._offset)] = list(self._offset.values())
        start, end = self.window_ps
        height = min(MAX_HEIGHT_PX, 40 + ROW_PX * total)
        rows_shown = (height - 40) / ROW_PX
        data = self._columns(start, end, 1200)
        item = TIMELINE.item(
            height=height,
            x_start=(start - self.origin_ps) / 1e9,
            x_end=(end - self.origin_ps) / 1e9,
            y_start=min(total, rows_shown) - 0.5,
            y_bound=total + 0.5,
            boxes=data["boxes"],
            labels=data["labels"],
            counters=self._counter_columns(),
            flows=data["flows"],
            flow_note=data["flow_note"],
            event_flows=self._event_arrows(),
            ticks=ticks,
            overrides={t: labels[t][:40] for t in ticks},
        )
        self.set_figures({"timeline": item})
        self.html = self._html()

    # ---- data for a window ------------------------------------------------

    def _columns(self, start_ps, end_ps, width_px, top_row=-0.5):
        """The query for a window as the page's columns (boxes, labels, and flows: the arrows
        of the window's flows with "Flows" on, and the line saying how many; `top_row`: the y
        at the top of the view, where that line goes)."""
        self._window_at = (start_ps, end_ps, top_row)
        q = self.trace.query(int(start_ps), int(end_ps), int(max(width_px, 50)), tracks=list(self._offset))
        track = q["track"].to_numpy(np.int64)
        y = self._row0[track] + q["row"].to_numpy(np.int64)
        y = y.astype(np.uint16 if self._row0.max() < 60000 else np.float32)
        s = q["start_ps"].to_numpy(np.int64)
        e = q["end_ps"].to_numpy(np.int64)
        index = q["index"].to_numpy(np.int64)
        names = q["name"].to_numpy(object)
        real = index >= 0
        ids = np.where(real, track.astype(np.float64) * _ID_TRACK + index, -1.0 - np.arange(len(index)))
        # What is drawn, for selections: merged box k has id -1-k (a tap on it zooms into it).
        self._last = {"id": ids, "start": s, "end": e, "count": q["count"].to_numpy(np.int64)}
        lw = np.zeros(len(index), dtype=np.uint8)
        if self._highlight and len(names):
            lw[np.isin(names, list(self._highlight))] = 2
        color = _color_codes(names) if len(names) else np.zeros(0, np.uint8)
        color = np.where(real, color, color + 20).astype(np.uint8)  # merged boxes: the lighter shade
        x0 = (s - self.origin_ps) / 1e9
        x1 = (e - self.origin_ps) / 1e9
        px = (end_ps - start_ps) / max(width_px, 1)
        boxes = {
            "x0": x0,
            "x1": np.maximum(x1, x0 + MIN_BOX_PX * px / 1e9),
            "ms": ((e - s) / 1e9).astype(np.float32),
            "y": y,
            "color": color,
            "lw": lw,
            "count": q["count"].to_numpy(np.int64).astype(np.uint32),
            "id": ids,
            "name": names,
        }
        wide = np.flatnonzero((e - s) >= LABEL_MIN_PX * px)
        text = [str(n)[: max(int((e[i] - s[i]) / px / 7), 1)] for i, n in zip(wide, names[wide])]
        labels = {
            "x": np.maximum(x0[wide], (start_ps - self.origin_ps) / 1e9),
            "y": y[wide],
            "text": np.asarray(text, dtype=object),
        }
        arrows, note = self._view_flows(start_ps, end_ps, top_row)
        return {"boxes": boxes, "labels": labels, "events": len(index), "flows": arrows, "flow_note": note}

    # ---- flows ----------------------------------------------------------------

    def _arrow_columns(self, links):
        """Arrows from each connection's `from` event to its `to` event (start to start, as
        XProf draws them), in the rows they are drawn in; none to a track not shown."""
        if links is None or not len(links):
            return dict(_NO_ARROWS)
        shown = np.zeros(len(self._row0), dtype=bool)
        shown[list(self._offset)] = True
        ft, tt = links["from_track"].to_numpy(np.int64), links["to_track"].to_numpy(np.int64)
        keep = shown[ft] & shown[tt]
        ft, tt, links = ft[keep], tt[keep], links[keep]
        return {
            "x0": (links["from_start_ps"].to_numpy(np.int64) - self.origin_ps) / 1e9,
            "y0": (self._row0[ft] + links["from_row"].to_numpy(np.int64)).astype(np.float64),
            "x1": (links["to_start_ps"].to_numpy(np.int64) - self.origin_ps) / 1e9,
            "y1": (self._row0[tt] + links["to_row"].to_numpy(np.int64)).astype(np.float64),
        }

    def _view_flows(self, start_ps, end_ps, top_row):
        """The "Flows" arrows of a window (at most FLOWS_SHOWN, spread over its flows) and
        the line that says how many: empty with "Flows" off."""
        if not self.show_flows:
            return dict(_NO_ARROWS), {"x": np.zeros(0), "y": np.zeros(0), "text": np.zeros(0, dtype=object)}
        links = self.trace.flows(int(start_ps), int(end_ps))
        total = len(links)
        if total > FLOWS_SHOWN:
            links = links.iloc[np.unique(np.linspace(0, total - 1, FLOWS_SHOWN).round().astype(np.int64))]
        text = f"{total:,} flows in view" + (f", {len(links):,} drawn" if total > len(links) else "")
        note = {
            "x": np.array([(start_ps - self.origin_ps) / 1e9]),
            "y": np.array([float(top_row)]),
            "text": np.array([text], dtype=object),
        }
        return self._arrow_columns(links), note

    def _event_arrows(self):
        """The arrows of the selected event's flows."""
        ev = self.selected_event
        if not ev or "track" not in ev:
            return dict(_NO_ARROWS)
        return self._arrow_columns(self.trace.flows_of(ev["track"], ev["index"]))

    @traitlets.observe("selected_event")
    def _on_selected_event(self, change):
        if self.figures and hasattr(self, "trace"):
            self.push_columns("event_flows", self._event_arrows())

    def _flows_html(self, ev):
        """The selected event's flows: the event each comes from ("Incoming flow") or goes
        to ("Outgoing flow"), each a link that selects it."""
        if "track" not in ev:
            return ""
        links = self.trace.flows_of(ev["track"], ev["index"])
        labels = self.trace.tracks["label"]
        rows = []
        for r in links.itertuples():
            incoming = (r.to_track, r.to_index) == (ev["track"], ev["index"])
            end = "from" if incoming else "to"
            track, index = int(getattr(r, f"{end}_track")), int(getattr(r, f"{end}_index"))
            start, stop = int(getattr(r, f"{end}_start_ps")), int(getattr(r, f"{end}_end_ps"))
            event_id = track * _ID_TRACK + index
            select = {"figure": "timeline", "source": "events", "id": event_id, "ids": [event_id]}
            what = "Incoming flow" if incoming else "Outgoing flow"
            category = f" ({esc(r.category)})" if str(r.category) else ""
            rows.append(
                f'<tr data-testid="{"flow-in" if incoming else "flow-out"}"><td>{what}{category}</td><td>'
                f'<span class="xw-flow" role="link" data-select="{data_json(select)}" title="select this event">'
                f"{esc(getattr(r, f'{end}_name'))}</span> on {esc(self.trace.tracks.at[track, 'section'])} / "
                f"{esc(labels[track])}, start {_ms(start - self.origin_ps)}, duration {_ms(stop - start)}</td></tr>"
            )
        return f'<table data-testid="event-flows">{"".join(rows)}</table>' if rows else ""

    @traitlets.observe("show_flows")
    def _on_show_flows(self, change):
        if hasattr(self, "_window_at") and self.figures:
            arrows, note = self._view_flows(*self._window_at)
            self.push_columns("flows", arrows)
            self.push_columns("flow_note", note)
        if hasattr(self, "trace"):
            self.html = self._html()

    def on_request(self, kind, params):
        if kind == "view":
            start = self.origin_ps + float(params["x_start"]) * 1e9
            end = self.origin_ps + float(params["x_end"]) * 1e9
            self.window_ps = [int(start), int(end)]
            ys = [float(v) for v in (params.get("y_start"), params.get("y_end")) if v is not None]
            data = self._columns(start, end, params.get("width_px") or 1200, min(ys) if ys else -0.5)
            # Labels and flows come in the same reply as the boxes: the page draws all in one frame.
            also = {"labels": data["labels"], "flows": data["flows"], "flow_note": data["flow_note"]}
            return {"source": "events", "boxes": data["events"], "also": also}, data["boxes"]
        if kind == "host":
            self.host = str(params["value"])
            return {}, None
        if kind == "section":
            name = str(params["section"])
            self.collapsed = (
                [c for c in self.collapsed if c != name] if name in self.collapsed else [*self.collapsed, name]
            )
            return {}, None
        if kind == "flows":
            self.show_flows = bool(params.get("value"))
            return {}, None
        if kind == "summary_sort":
            column = str(params["column"])
            if column not in SUMMARY_COLUMNS:
                raise ValueError(f"no selection table column {column!r}")
            was, descending = self._summary_sort
            self._summary_sort = (column, not descending if column == was else column != "name")
            self.html = self._html()
            return {}, None
        if kind == "summary_next":
            self.show_next_of(str(params["name"]))
            return {}, None
        if kind == "search":
            self.search = str(params.get("value", ""))
            return {}, None
        if kind == "thread_filter":
            self.thread_filter = str(params.get("value", ""))
            return {}, None
        if kind in ("next", "prev"):
            self._step_match(1 if kind == "next" else -1)
            return {}, None
        if kind == "zoom-out":
            self.show_range(self.trace.start_ps, self.trace.end_ps)
            return {}, None
        raise ValueError(f"unknown request {kind!r}")

    # ---- Python API ---------------------------------------------------------

    def show_range(self, start_ps, end_ps, row=None, redraw=False):
        """Show the window [start_ps, end_ps] (absolute ps) in every view (and row `row`, a
        y of the timeline, scrolled into view where it is not). `redraw`: draw the timeline
        again at that window too, for a view about to be shown (a widget just opened in a
        ProfileWidget has no view yet to move)."""
        start_ps, end_ps = int(start_ps), int(max(end_ps, start_ps + 1000))
        self.window_ps = [start_ps, end_ps]
        if redraw:
            self._draw()
        x0, x1 = (start_ps - self.origin_ps) / 1e9, (end_ps - self.origin_ps) / 1e9
        self.set_x_range("timeline", x0, x1, y=row)

    def find(self, pattern, regex=False):
        """Search event names; outlines the matches and shows the first. Returns the matches (DataFrame)."""
        self._matches = self.trace.search(pattern, regex=regex)
        self._highlight = set(self._matches["name"].unique()) if len(self._matches) else set()
        self._match_at = -1
        if len(self._matches):
            self._step_match(1)
        else:
            self.html = self._html()
        return self._matches

    def link(self, other):
        """Follow another widget: a step (OverviewWidget, InputPipelineWidget) or a core's step
        (PodViewerWidget) shows its time range,
        an op (OpProfileWidget) is searched and outlined, a memory moment (MemoryProfileWidget) is centred."""
        if other.has_trait("selected_step"):
            other.observe(
                lambda c: c["new"] and self.show_range(c["new"]["begin_ps"], c["new"]["end_ps"]), "selected_step"
            )
        if other.has_trait("selected_core"):  # PodViewerWidget: a core's step
            other.observe(
                lambda c: c["new"] and self.show_range(c["new"]["begin_ps"], c["new"]["end_ps"]), "selected_core"
            )
        if other.has_trait("selected_op"):
            other.observe(lambda c: c["new"] and self.find(c["new"]["name"].split(" ")[0]), "selected_op")
        if other.has_trait("moment_ps"):

            def centre(change):
                if change["new"] >= 0:
                    half = max((self.window_ps[1] - self.window_ps[0]) // 20, 10**6)
                    self.show_range(change["new"] - half, change["new"] + half)

            other.observe(centre, "moment_ps")
        return self

    # ---- reactions ----------------------------------------------------------

    @traitlets.validate("host")
    def _check_host(self, proposal):
        return a_host(self.run, proposal["value"])

    @traitlets.observe("host")
    def _on_host(self, change):
        if change["old"] and change["old"] != change["new"]:
            self._open_host()

    @traitlets.observe("collapsed", "thread_filter")
    def _on_collapsed(self, change):
        if hasattr(self, "trace"):
            self._draw()

    def _thread_pattern(self):
        """`thread_filter` compiled (None: no filter, or not a valid regex: then the page
        says why and shows every thread)."""
        text = self.thread_filter.strip()
        if not text:
            return None
        try:
            return re.compile(text, re.IGNORECASE)
        except re.error:
            return None

    @traitlets.observe("search")
    def _on_search(self, change):
        text = change["new"].strip()
        if not text:
            self._matches, self._highlight = None, None
            self.html = self._html()
            return
        regex = len(text) > 2 and text.startswith("/") and text.endswith("/")
        try:
            self.find(text[1:-1] if regex else text, regex=regex)
        except re.error as error:
            self._matches, self._highlight = None, None
            self.html = self._html(error=f"bad regular expression: {error}")

    def _step_match(self, step):
        m = self._matches
        if m is None or not len(m):
            return
        self._match_at = (self._match_at + step) % len(m)
        row = m.iloc[self._match_at]
        width = self.window_ps[1] - self.window_ps[0]
        dur = int(row["end_ps"] - row["start_ps"])
        if dur > width or width >= (self.trace.end_ps - self.trace.start_ps):
            width = max(dur * 4, 10**6)
        centre = int(row["start_ps"]) + dur // 2
        self.selected_event = self.trace.event(int(row["track"]), int(row["index"]))
        self.show_range(centre - width // 2, centre + width // 2, row=self._row_of(self.selected_event))
        self.html = self._html()

    @traitlets.observe("selected")
    def _on_selected(self, change):
        sel = change["new"] or {}
        ids = [i for i in (sel.get("ids") or []) if i is not None]
        if sel.get("source") != "events" or not ids:
            self.selected_event, self._measure = {}, {}
            self.html = self._html()
            return
        real = [int(i) for i in ids if i >= 0]
        if len(ids) == 1 and real and real[0] == self._cycling:  # the selection table's next event
            return
        self._cycling = None
        if len(ids) == 1 and not real:  # a merged box: zoom into it
            k = int(-1 - ids[0])
            starts, ends = self._last["start"], self._last["end"]
            if 0 <= k < len(starts):
                pad = max((ends[k] - starts[k]) // 10, 1000)
                self.show_range(starts[k] - pad, ends[k] + pad)
            return
        # Details decode the stats of one event; a box selection is measured on the boxes drawn.
        self.selected_event = self.trace.event(real[0] // _ID_TRACK, real[0] % _ID_TRACK) if real else {}
        if len(ids) == 1 and self.selected_event:  # one event (tapped, or a flow's end clicked): show it
            self._reveal(self.selected_event)
        self._measure, self._cycle = {}, None
        if len(ids) > 1:
            last = self._last
            wanted = np.asarray(ids, dtype=np.float64)
            chosen = np.isin(last["id"], wanted)
            s, e = last["start"][chosen], last["end"][chosen]
            count = int(last["count"][chosen].sum())
            # Ids not among the boxes drawn (set from Python, or a view since replaced): read those events.
            for i in np.setdiff1d(wanted[wanted >= 0], last["id"])[:2000].astype(np.int64):
                ev = self.trace.event(i // _ID_TRACK, i % _ID_TRACK)
                s = np.append(s, ev["start_ps"])
                e = np.append(e, ev["start_ps"] + ev["duration_ps"])
                count += 1
            if len(s):
                # XProf's selection table: the selected events' tracks over their time span.
                real_ids = wanted[wanted >= 0].astype(np.int64)
                tracks = sorted(set((real_ids // _ID_TRACK).tolist())) or None
                table = self.trace.summary(int(s.min()), int(e.max()), tracks=tracks)
                self._measure = {
                    "events": count,
                    "span_ps": int(e.max() - s.min()),
                    "table": table,
                    "window": (int(s.min()), int(e.max())),
                    "tracks": tracks,
                }
        self.html = self._html()

    def _reveal(self, ev):
        """Bring an event into view: centred when it is out of the window (the zoom kept), and
        its row scrolled to when it is above or below the rows shown."""
        start, end = self.window_ps
        if ev["end_ps"] < start or ev["start_ps"] > end:
            half = max((end - start) // 2, ev["duration_ps"])
            centre = ev["start_ps"] + ev["duration_ps"] // 2
            start, end = centre - half, centre + half
        self.show_range(start, end, row=self._row_of(ev))

    def _row_of(self, ev):
        """The y of an event's row on the timeline (None when its track is not drawn)."""
        track = int(ev["track"])
        return float(self._row0[track] + int(ev["row"])) if track in self._offset else None

    def selection_events(self, name):
        """The events named `name` of the box selection's table (its tracks, overlapping its
        span), by start: a DataFrame of `track`, `index`, `start_ps`, `end_ps` (empty with no
        selection)."""
        m = self._measure
        if not m:
            return pd.DataFrame({"track": [], "index": [], "start_ps": [], "end_ps": []}, dtype=np.int64)
        found = self.trace.search(f"^{re.escape(name)}$", regex=True)
        lo, hi = m["window"]
        keep = (found["name"].astype(str) == name).to_numpy() & (found["start_ps"] <= hi).to_numpy()
        keep &= (found["end_ps"] >= lo).to_numpy()
        if m["tracks"] is not None:
            keep &= np.isin(found["track"].to_numpy(), m["tracks"])
        return pd.DataFrame(found[keep][["track", "index", "start_ps", "end_ps"]]).reset_index(drop=True)

    def show_next_of(self, name):
        """Select and show the next event named `name` of the box selection (a click on its row
        of the selection table; again: the one after, round to the first), keeping the table."""
        events = self.selection_events(name)
        if not len(events):
            return
        at = self._cycle[1] + 1 if self._cycle and self._cycle[0] == name else 0
        at %= len(events)
        self._cycle = (name, at, len(events))
        row = events.iloc[at]
        track, index = int(row["track"]), int(row["index"])
        self.selected_event = self.trace.event(track, index)
        self._cycling = track * _ID_TRACK + index
        self.selected = {"figure": "timeline", "source": "events", "id": self._cycling, "ids": [self._cycling]}
        self._reveal(self.selected_event)
        self.html = self._html()

    # ---- HTML ---------------------------------------------------------------

    def _op_card(self, ev):
        """The op profile's details card for an XLA op event, when the op profile knows the op."""
        op, program = ev.get("hlo_op"), ev.get("program")
        if not op:
            return ""
        ops = self._op_nodes()
        if program:
            found = ops.get((program, op))
        else:  # no module known: the op's first occurrence in any program
            found = next((v for (_, name), v in ops.items() if name == op), None)
        return op_details_html(op_details(*found), show_graph=self.hosted) if found else ""

    def _op_nodes(self):
        """{(program, op name): (op node, program)} of the run's op profile, built on the first op selected."""
        if self._ops is None:
            self._ops = {}
            try:
                root = self.run.op_profile(group_by="program", top_n=10**9).root
            except Exception:
                return self._ops
            for prog in root.children:
                stack = list(prog.children)
                while stack:
                    node = stack.pop()
                    if node.kind == "op":
                        self._ops.setdefault((prog.name, node.name), (node, prog.name))
                    stack.extend(node.children)
        return self._ops

    def _html(self, error=""):
        t = self.trace
        sections = list(dict.fromkeys(t.tracks["section"]))
        boxes = "".join(
            f'<label><input type="checkbox" data-request="section" data-params="{data_json({"section": s})}"'
            f"{'' if s in self.collapsed else ' checked'}> {esc(s)}</label>"
            for s in sections
        )
        hosts = (
            f'<select data-request="host">{options(self.run.hosts, self.host)}</select>'
            if len(self.run.hosts) > 1
            else f"<b>{esc(self.host)}</b>"
        )
        m = self._matches
        found = ""
        if error:
            found = f'<span class="xw-err" data-testid="search-error">{esc(error)}</span>'
        elif m is not None:
            found = f'<span data-testid="search-count">{len(m):,} matches</span>' + (
                f' <span data-testid="search-at">({self._match_at + 1} of {len(m):,})</span>'
                '<button data-request="prev">◀</button><button data-request="next">▶</button>'
                if len(m)
                else ""
            )
        details = self._details_html()
        flows_on = " checked" if self.show_flows else ""
        return f"""
<div class="xw-tv">
  <div class="xw-head"><b>Trace of run {esc(self.run.name)}</b> host {hosts}
    <span data-testid="event-count">{t.event_count:,} events</span>
    <button data-request="zoom-out">Whole profile</button>
    <label title="the arrows of XProf's flows (launch to kernel, producer to consumer) in the view"><input
      type="checkbox" data-request="flows" data-testid="flows-toggle"{flows_on}> Flows</label>
    <input type="text" placeholder="search names (/regex/)" value="{esc(self.search)}" data-request="search"
      data-testid="search" size="28"> {found}
    <input type="text" placeholder="threads (regex)" value="{esc(self.thread_filter)}"
      data-request="thread_filter" data-testid="thread-filter" size="16"> {self._thread_filter_note()}</div>
  {note(self._graph_note())}
  {note(self._hidden_note(), "hidden-note")}
  <div class="xw-sections">{boxes}</div>
  <div class="xw-tv-main">
    <div class="xw-tv-plot" data-figure="timeline"></div>
    {f'<div class="xw-tv-side" data-testid="details-panel">{details}</div>' if details else ""}
  </div>
</div>"""

    def _thread_filter_note(self):
        text = self.thread_filter.strip()
        if not text:
            return ""
        if self._thread_pattern() is None:
            return '<span class="xw-err" data-testid="thread-filter-error">not a regular expression: all threads</span>'
        return f'<span data-testid="thread-count">{len(self._offset):,} of {len(self.trace.tracks):,} threads</span>'

    def _hidden_note(self):
        """Which threads have events too deeply nested to draw (`analysis.trace.MAX_NESTING`)."""
        tracks = self.trace.tracks
        hidden = tracks[tracks["hidden"] > 0]
        if hidden.empty:
            return ""
        shown = ", ".join(f"{n:,} events of {label}" for n, label in zip(hidden["hidden"], hidden["label"].head(3)))
        more = f" and of {len(hidden) - 3} more threads" if len(hidden) > 3 else ""
        return (
            f"Not drawn: {shown}{more}, nested deeper than {MAX_NESTING:,} levels (events at one instant, "
            "each inside the one before: a damaged or generated profile)."
        )

    def _graph_note(self):
        """What became of this host's kernels run in CUDA graphs (`command_buffers`)."""
        if self.host not in self._graph_notes:
            summary = host_graph_summary(self.run, self.run.xspace(self.host))
            self._graph_notes[self.host] = graph_kernel_words(summary, self.run.attribute_cuda_graphs)
        return self._graph_notes[self.host]

    def selection_table(self):
        """The box selection's table (`Trace.summary` of its tracks and span) in the order
        shown (`_summary_sort`); None without a box selection."""
        if not self._measure:
            return None
        column, descending = self._summary_sort
        table = self._measure["table"]
        key = table["name"].astype(str).str.lower() if column == "name" else table[column]
        order = key.sort_values(ascending=not descending, kind="stable").index
        return table.loc[order].reset_index(drop=True)

    def _selection_html(self):
        ms, table = self._measure, self.selection_table()
        shown = table.head(SUMMARY_SHOWN)
        column, descending = self._summary_sort
        order = "desc" if descending else "asc"
        heads = "".join(
            f'<th data-request="summary_sort" data-params="{data_json({"column": key})}" title="sort"'
            + (f' data-sorted="{order}">{label} {"▼" if descending else "▲"}' if key == column else f">{label}")
            + "</th>"
            for key, label in SUMMARY_COLUMNS.items()
        )
        rows = []
        for r in shown.itertuples():
            at = ""
            if self._cycle and self._cycle[0] == r.name:
                at = f' <span data-testid="cycle-at">({self._cycle[1] + 1} of {self._cycle[2]:,})</span>'
            rows.append(
                f'<tr data-request="summary_next" data-params="{data_json({"name": str(r.name)})}" '
                f'data-testid="selection-row" title="show its next event">'
                f'<td title="{esc(r.name)}">{esc(r.name)}{at}</td><td class=num>{r.occurrences:,}</td>'
                + "".join(
                    f'<td class=num title="{_ms(v)}">{v / 1e9:,.3f}</td>' for v in (r.wall_ps, r.self_ps, r.avg_ps)
                )
                + "</tr>"
            )
        more = f" (the first {len(shown)} of {len(table):,} names)" if len(table) > len(shown) else ""
        return (
            f'<div class="xw-card" data-testid="measure"><b>Selection</b>: {ms["events"]:,} events, '
            f'<span data-testid="span">span {_ms(ms["span_ps"])}</span>{more}'
            f'<table class="xw-selection" data-testid="selection-table"><tr>{heads}</tr>{"".join(rows)}</table>'
            '<div class="xw-note">A row shows its events one by one.</div></div>'
        )

    def _details_html(self):
        ev = self.selected_event
        parts = []
        if self._measure:
            parts.append(self._selection_html())
        if ev:
            stats = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in ev.get("stats", {}).items())
            if ev.get("command_buffer"):  # a kernel of a CUDA graph, its op attributed (beyond XProf)
                stats = (
                    f'<tr data-testid="attributed-op"><td>HLO op</td><td>{esc(ev["hlo_op"])} (ran in CUDA graph '
                    f"{esc(ev['command_buffer'])}; op found from the kernel's name and place in the program's "
                    "schedule: XProf shows it as idle)</td></tr>" + stats
                )
            if ev.get("derived_count"):  # a derived TPU line: the XLA ops it was made from
                names = [str(self.trace.event(int(t), int(i))["name"]) for t, i in ev.get("derived_from", [])[:5]]
                more = ev["derived_count"] - len(names)
                stats += (
                    f'<tr data-testid="derived-from"><td>made from</td><td>{ev["derived_count"]:,} XLA ops: '
                    f"{esc(', '.join(names))}{f', and {more:,} more' if more > 0 else ''}</td></tr>"
                )
            parts.append(
                f'<div class="xw-card" data-testid="event-details"><b data-testid="event-name">{esc(ev["name"])}</b>'
                f" on {esc(ev.get('section', ''))} / {esc(ev.get('track_name', ''))}<br>"
                f"start {_ms(ev['start_ps'] - self.origin_ps)}, "
                f'<span data-testid="event-duration">duration {_ms(ev["duration_ps"])}</span>'
                f"{self._flows_html(ev)}<table>{stats}</table></div>"
            )
            card = self._op_card(ev)
            if card:
                parts.append(f'<div data-testid="op-card">{card}</div>')
        return "".join(parts)


__all__ = ["TraceViewerWidget"]


def _timeline_figure(
    *, height, x_start, x_end, y_start, y_bound, boxes, labels, counters, flows, flow_note, event_flows, **axis
):
    """The timeline's figure (`TIMELINE`): the view's boxes and their labels, the counters'
    curves, the flows' arrows, one row per track."""
    from bokeh.models import (
        BoxSelectTool,
        ColumnDataSource,
        FixedTicker,
        HoverTool,
        LinearColorMapper,
        PanTool,
        Range1d,
        ResetTool,
        TapTool,
        WheelZoomTool,
    )
    from bokeh.plotting import figure

    # Canvas, not WebGL: a view holds at most pixels x rows boxes (the query merges the rest),
    # which a 2D canvas draws in a few ms, while WebGL's copy of its canvas onto the page
    # (drawImage) cost 100-170 ms a frame where there is no GPU (headless, VMs, remote desktops).
    p = figure(
        height=height,
        sizing_mode="stretch_width",
        x_axis_label="time from profile start (ms)",
        x_range=Range1d(x_start, x_end),
        y_range=Range1d(y_start, -0.5, bounds=(-0.5, y_bound)),
        tools=[],
        toolbar_location="above",
        output_backend="canvas",
    )
    mapper = LinearColorMapper(palette=_palette(), low=0, high=39)
    quad = p.hbar(
        y="y",
        left="x0",
        right="x1",
        height=0.85,
        source=ColumnDataSource(boxes, name="events"),
        fill_color={"field": "color", "transform": mapper},
        fill_alpha=0.9,
        line_color="#d62728",
        line_width="lw",
        **selection_look(fade=0.9),
    )
    p.text(x="x", y="y", text="text", source=ColumnDataSource(labels, name="labels"), x_offset=2, **LABEL_TEXT)
    lines = p.multi_line(xs="xs", ys="ys", source=ColumnDataSource(counters, name="counters"), line_width=1.5)
    # Flow arrows: every flow of the view ("Flows" on), and the selected event's on top.
    p.add_layout(_arrows(ColumnDataSource(flows, name="flows"), "#6b6b6b", 1, 6, 0.6))
    note = ColumnDataSource(flow_note, name="flow_note")
    p.text(x="x", y="y", text="text", source=note, x_offset=4, y_offset=2, text_baseline="top", **_NOTE_TEXT)
    p.add_layout(_arrows(ColumnDataSource(event_flows, name="event_flows"), "#d62728", 2, 10, 0.95))
    wheel = WheelZoomTool(dimensions="width")
    pan = PanTool(dimensions="both")
    p.add_tools(
        pan,
        wheel,
        BoxSelectTool(dimensions="both", renderers=[quad]),  # the rows dragged over, as XProf
        TapTool(renderers=[quad]),
        HoverTool(
            renderers=[quad],
            tooltips=[
                ("", "@name"),
                ("events", "@count"),
                ("from", "@x0{0,0.000000} ms"),
                ("for", "@ms{0,0.000000} ms"),
            ],
        ),
        HoverTool(renderers=[lines], tooltips=[("counter", "@name"), ("from", "@range")]),
        ResetTool(),
    )
    p.toolbar.active_drag = pan
    p.toolbar.active_scroll = wheel
    p.yaxis.ticker = FixedTicker(ticks=axis["ticks"])  # (a row per track: its first)
    p.yaxis.major_label_overrides = axis["overrides"]
    p.ygrid.grid_line_color = None
    p.xgrid.grid_line_alpha = 0.3
    p.min_border_left = 10
    return BokehWidget.request_on_range(p, "view")


_ARROW_COLUMNS = dict.fromkeys(_NO_ARROWS, np.float64)
#: The timeline, drawn from a template (`_templates`): Bokeh's models for it cost about
#: 90 ms to build, every draw.
TIMELINE = ChartTemplate(
    "trace_viewer.timeline",
    _timeline_figure,
    {
        "height": "int",
        "x_start": "float",
        "x_end": "float",
        "y_start": "float",
        "y_bound": "float",
        # (Integer columns drawn narrower, uint8 to uint32: a data parameter is replaced
        # whole, whatever its columns' types; its markers need room.)
        "boxes": {
            "x0": np.float64,
            "x1": np.float64,
            "ms": np.float32,
            "y": np.int64,
            "color": np.int64,
            "lw": np.int64,
            "count": np.int64,
            "id": np.float64,
            "name": str,
        },
        "labels": {"x": np.float64, "y": np.int64, "text": str},
        "counters": {"xs": np.float64, "ys": np.float64, "name": str, "range": str},
        "flows": _ARROW_COLUMNS,
        "flow_note": {"x": np.float64, "y": np.float64, "text": str},
        "event_flows": _ARROW_COLUMNS,
        "ticks": "floats",
        "overrides": "labels",
    },
)
