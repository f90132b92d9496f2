"""Trace viewer model: tracks, nesting rows, and the boxes to draw for any window.

`Trace(space)` lays out one host's events as XProf's trace viewer does, and
answers a viewport query (`query(start_ps, end_ps, resolution)`) with a
number of boxes bounded by pixels x rows, however many events there are.
`run.trace(host)` builds it once per host.

**Layout** (XProf 2.24.2: `xprof/convert/xplane_to_trace_container.cc`; for
the per-track counts openxla/xla `xla/tsl/profiler/convert/xplane_to_trace_events.cc`):

* Sections are planes, in XProf's process-id order: device planes first
  (`/device:GPU:*`, or `/device:TPU:*` when there is no GPU plane; pid
  1 + plane id), then custom devices (`/device:CUSTOM:*`), then the host
  (`/host:CPU`). Other planes (`/host:metadata`, `Task Environment`,
  `/host:CUPTI`...) are not part of the trace.
* A track is a line with events. Within a section tracks follow XProf's
  thread sort index: the line's display id (its id when that is 0) as an
  unsigned 32-bit number. Counter lines (`_counters_`, `counters_*`) are
  not boxes and are left out.
* Events XProf never shows are dropped: the allocator and tf.data
  bookkeeping events of its `IsInternalEvent` (`INTERNAL_EVENTS`).
* Events XProf adds when it preprocesses a plane are added: a
  `ThreadpoolListener::Region` from the last `ThreadpoolListener::StartRegion`
  (with a `_c` stat) to each `StopRegion` after it (openxla/xla
  `preprocess_xplane.h`, ThreadpoolLineMutator). They have no record in the
  file (`Trace.event` marks them `synthetic`).
* An event's name is its metadata's display name when set (TPU ops:
  `fusion.3`, not the whole HLO text), else the metadata name; a `step_name`
  stat replaces it (the `Steps` lines of GPU files), and so does the name of
  the step an event is the root of (`train 3` for
  `StepTraceAnnotation("train", step_num=3)`: XProf's grouping gives each root
  its group's name as a `step_name` stat, and its trace shows that).
* Lines XProf derives when it loads a TPU profile are added to each
  `/device:TPU:N` section, after the file's lines (XProf's derived thread
  ids): `Framework Name Scope`, `Framework Ops`, `Source code` and
  `Host Offload Ops row N`, made from the XLA ops' `tf_op` / `source`
  stats and host-memory copies (`derived_lines`, xprof
  `xprof/utils/derived_timeline.cc`). They have no line in the file
  (`tracks.derived`; `Trace.event` marks their events `synthetic` and
  `Trace.derived_from` gives the XLA ops each was made from). TPU planes
  get no `Steps` line from XProf either (it derives one on GPU planes only).
* XProf's non-streaming trace skips `Async XLA Ops` lines; its streaming
  viewer, which this follows, shows them.

**Rows.** A track is sorted by start, longer events first at equal starts
(XProf's `SortXLine`), and each event's row is the number of the track's
events still open when it starts. For properly nested events that is the
nesting depth, the row XProf's trace viewer packs it in. An event that starts
inside another and ends after it (a step annotation that outlives the Python
frame it began in, overlapping async copies) would share a row with a
neighbour: such events are taken out, the rest laid out again, and they go to
extra rows below the nesting rows (first fit), so that no two events of a row
overlap. All of it is vectorised: a sort of end times and a binary search.

**Query.** Within a row events do not overlap and are sorted by start, so
their ends are sorted too, and the events overlapping a window are one
contiguous range found by binary search. Events at least a pixel long come
back one by one; the others are merged: a run of them whose gaps are all
under a pixel becomes one box with its count, extent and dominant name (that
of its longest event). So there are at most 2 x (pixels + 1) boxes per row.
When a window holds many events the runs are built from a pyramid of time
buckets (2**k ps, levels a factor 2 apart, each built the first time a query
reads it, from the events or from a finer level: `_Pyramid`):
per bucket its first event, its one event at least a bucket long (rows do not
overlap, so there is at most one, and it is the bucket's last) and its longest
shorter event. A query reads the level whose buckets are at most a pixel
wide: about 2 x pixels buckets per row, whatever the number of events.

Times are integer picoseconds, absolute (as in the file).
"""

from __future__ import annotations

import collections
import re
import threading
from dataclasses import dataclass, field
from typing import ClassVar

import numpy as np
import pandas as pd

from ..io import column_cache, native
from ..io.sorting import order_by_key
from .core.cache import derived
from .core.columns import Groups
from .core.command_buffers import graph_attribution
from .core.derived_lines import DerivedLine, derive_lines, derives_lines
from .core.flows import CATEGORIES, MID, OUT, line_flow_ends
from .core.gpu_lines import derive_gpu_lines, derives_gpu_lines
from .core.grouping import IMPLICIT_ROOTS, INTERNAL_EVENTS, is_grouped, step_events
from .core.intervals import children_time
from .core.planes import GPU_PLANE_PREFIX, HOST_PLANE, TPU_PLANE_PREFIX

CUSTOM_PLANE_PREFIX = "/device:CUSTOM:"
XLA_OPS_LINE = "XLA Ops"
XLA_MODULES_LINE = "XLA Modules"
#: Skipped by XProf's non-streaming trace (`kXlaAsyncOpLineName`), shown here.
ASYNC_OPS_LINE = "Async XLA Ops"
STEPS_LINE = "Steps"
#: Rows of nested events a track draws at most. A degenerate file (ten million events at one
#: instant, each inside the one before) would need a row per event; its events nested deeper
#: than this are left out of the trace, and its track says how many (`tracks["hidden"]`).
MAX_NESTING = 1000
COUNTER_LINE = "_counters_"
COUNTER_LINE_PREFIX = "counters_"

# XProf's trace process ids (openxla/xla `xla/tsl/profiler/utils/trace_utils.h`): they order sections.
_FIRST_DEVICE_PID, _LAST_DEVICE_PID = 1, 500
_FIRST_CUSTOM_PID = _LAST_DEVICE_PID + 1
_HOST_PID = _FIRST_CUSTOM_PID + 200

START_REGION = "ThreadpoolListener::StartRegion"
STOP_REGION = "ThreadpoolListener::StopRegion"
REGION = "ThreadpoolListener::Region"

#: Windows with at most this many events are answered from the events
#: themselves, larger ones from the bucket pyramid (same boxes; see `query`).
RAW_LIMIT = 50_000
#: The finest pyramid level aims at this many events per bucket, were they even.
EVENTS_PER_BUCKET = 16
#: A zoom in to a level with no finer one built builds, from the events, a level up to
#: this many steps (factors of 2) finer, and the ones between from it (`_zoom_base`)...
ZOOM_AHEAD = 4
#: ... while those levels are expected to hold at most this many buckets each.
_COARSEN_BUCKETS = 1 << 20
#: A query whose level is not built reads a built level up to this many steps finer.
READ_FINER = 3
#: A window of at most this many events whose level is finer than every level built reads
#: its events (about 55 ns an event) instead of building that level from all the events
#: (0.7 s at 9.7 M events; at 49 M, hundreds of MB for millions of buckets few read).
FINE_RAW_LIMIT = 1_000_000
#: A trace of at least this many events builds its other pyramid levels on a background
#: thread after its first view (a smaller one builds a level in milliseconds when asked).
BACKGROUND_LEVELS_EVENTS = 1 << 22

#: `Trace.event` lists at most this many of the events a derived event was made from.
DERIVED_FROM_SHOWN = 100

QUERY_COLUMNS = ["track", "row", "start_ps", "end_ps", "count", "index", "name"]
#: `Trace.flows`' columns.
FLOW_COLUMNS = ["flow_id", "category"] + [
    f"{end}_{c}" for end in ("from", "to") for c in ("track", "index", "row", "name", "start_ps", "end_ps")
]


@dataclass
class _Track:
    """One drawn track: a line's events after XProf's rules, sorted by start."""

    section: str
    name: str
    plane: int  # index in space.planes
    line: int  # index in plane.lines
    pid: int
    tid: int
    start: np.ndarray  # int64 ps, absolute
    dur: np.ndarray  # int64 ps
    # Index of each event in the file's line, -(k + 1) for synthetic region k;
    # None when the track is the line itself (same events, same order).
    src: np.ndarray | None
    region_ids: list = field(default_factory=list)  # `_c` of each synthetic region
    file_events: int = 0
    # A line XProf derives (no line in the file: `line` is -1), its events in track order.
    derived: DerivedLine | None = None
    rows: int = 0
    nesting_rows: int = 0
    # Events not drawn: nested deeper than MAX_NESTING (a degenerate file; see `_track`).
    hidden: int = 0

    def __len__(self):
        return len(self.start)


@dataclass
class _Level:
    """One pyramid level: buckets of 2**shift ps, row after row, as global positions."""

    shift: int
    first: np.ndarray  # int32: each bucket's first event; a bucket ends where the next begins
    long: np.ndarray  # int32: the bucket's event >= 2**shift ps long (its last one), or -1
    top: np.ndarray  # int32: the bucket's longest shorter event (first of equals), or -1


class SearchResult(pd.DataFrame):
    """Events whose name matches a search, one row each, sorted by start.

    Columns `track`, `index` (the event in its track), `start_ps`, `end_ps`,
    `name`; its length is the number of matches. `next_match(after_ps)` and
    `prev_match(before_ps)` step through them by time.
    """

    _metadata: ClassVar[list] = ["pattern"]

    @property
    def _constructor(self):
        return SearchResult

    def next_match(self, after_ps):
        """The first match starting after `after_ps` (ps) as a Series, or None."""
        i = int(np.searchsorted(self["start_ps"].to_numpy(), after_ps, side="right"))
        return self.iloc[i] if i < len(self) else None

    def prev_match(self, before_ps):
        """The last match starting before `before_ps` (ps) as a Series, or None."""
        i = int(np.searchsorted(self["start_ps"].to_numpy(), before_ps, side="left")) - 1
        return self.iloc[i] if i >= 0 else None


_ID_SUFFIX = re.compile(r"^(.*\S)/(-?\d+)$")
_PID_MAX_LIMIT = 2**22  # Linux: no OS thread id is larger


def track_labels(sections, names, line_ids):
    """Labels for tracks. A host thread of a pool is named `NAME/ID`, ID the line's own id (a
    hash, `tf_XLAEigen/6739298145702471454`): where ID cannot be an OS thread id (above 2**22)
    the label is NAME, numbered `NAME #1`, `NAME #2` in track order where a section has
    several. Other names (`python`, `Host Threads/1083`, device lines) stay as they are.
    `line_ids`: each track's line id (None for derived tracks)."""
    base = []
    for name, line_id in zip(names, line_ids):
        m = _ID_SUFFIX.match(name)
        own = (
            m is not None
            and line_id is not None
            and abs(int(m.group(2))) > _PID_MAX_LIMIT
            and int(m.group(2)) % 2**32 == int(line_id) % 2**32
        )
        base.append(m.group(1) if own else None)
    taken = collections.Counter(zip(sections, [b or n for b, n in zip(base, names)]))
    seen = collections.Counter()
    labels = []
    for section, name, b in zip(sections, names, base):
        if b is None:
            labels.append(name)
        elif taken[(section, b)] == 1:
            labels.append(b)
        else:
            seen[(section, b)] += 1
            labels.append(f"{b} #{seen[(section, b)]}")
    return labels


#: `Trace.summary`'s columns.
SUMMARY_DTYPES = {
    "name": object,
    "occurrences": np.int64,
    "wall_ps": np.int64,
    "self_ps": np.int64,
    "avg_ps": np.float64,
}


#: `Trace.counters()`'s columns and types.
COUNTER_COLUMNS = {"section": object, "name": object, "stat": object, "time_ps": np.int64, "value": np.float64}


class Trace:
    """One host's trace, laid out in tracks and rows, with a viewport index.

    `tracks`: DataFrame, one row per track in display order (its index is the
    track id used everywhere): `section` (plane name), `name` (line title),
    `plane` / `line` (indices in the XSpace), `pid` / `tid` (XProf's process
    and thread sort ids), `events` (drawn), `file_events` (in the file's
    line), `rows` (rows the track needs) and `nesting_rows` (of those, the
    nesting levels; the rest hold improperly nested events).
    `start_ps` / `end_ps`: the extent of all events (absolute ps).
    `names`: the table the `name` columns' categories come from.
    `label` is the name people read: a host thread named `tf_XLAEigen/6739298145702471454`
    (the thread pool's name and the line's id, a hash) is `tf_XLAEigen`, numbered
    `tf_XLAEigen #1`, `#2` ... where a section has several (`track_labels`).
    `derived` is True for the lines XProf derives (TPU planes: Framework Name
    Scope, Framework Ops, Source code, Host Offload Ops rows, `derived_lines`;
    GPU planes: per stream Framework Name Scope / Ops, XLA Modules, XLA Ops,
    Source code, Command Buffers, and Steps, Launch Stats, `gpu_lines`): they have
    no line in the file (`line` is -1, `file_events` 0). TPU ones come after the
    file's lines of their section, GPU ones after their stream. `run` (for the HLO
    modules GPU lines read) may be None: then GPU planes get no derived lines.
    """

    #: The thread building the pyramid's other levels after a big trace's first view.
    _levels_thread: threading.Thread | None = None

    def __init__(self, space, run=None):
        self.space = space
        self._tracks = _build_tracks(space, run)
        self._build_index()
        self.attribute_graph_kernels(run)

    def attribute_graph_kernels(self, run):
        """Have `event()` give the kernels run in CUDA graphs the op they were attributed
        (`command_buffers.graph_attribution`, found when first asked) if `run` attributes
        them."""
        self._graph_ops = None
        if run is not None and run.attribute_cuda_graphs:
            self._graph_ops = lambda: graph_attribution(run, self.space).ops

    def _attributed_op(self, t, src):
        """The op a kernel run in a CUDA graph was attributed, or None."""
        if self._graph_ops is None or not self.space.planes[t.plane].name.startswith(GPU_PLANE_PREFIX):
            return None
        entry = self._graph_ops().get((t.plane, t.line))
        if entry is None:
            return None
        events, ops = entry
        at = int(np.searchsorted(events, src))
        return ops[at] if at < len(events) and events[at] == src else None

    # --- building ----------------------------------------------------------------------

    def _build_index(self):
        tracks = self._tracks
        self._step_names = _step_roots(self.space)
        names, plane_codes = _name_table(self.space, {t.plane for t in tracks})
        known = {name: i for i, name in enumerate(names)}

        def code_of(name):  # names not in any metadata: the regions, step names
            if name not in known:
                known[name] = len(names)
                names.append(name)
            return known[name]

        total = sum(len(t) for t in tracks)
        self.start_ps = min((int(t.start[0]) for t in tracks), default=0)
        # Every event in row-major order: track after track, row after row, by
        # start within a row. Positions are int32: up to 2**31 events.
        self._start = np.empty(total, dtype=np.int64)
        self._end = np.empty(total, dtype=np.int64)
        # Name codes: int16 while the names fit (they usually do), else int32.
        self._name = np.empty(total, dtype=np.int16 if len(names) < _INT16_NAMES else np.int32)
        self._index = np.empty(total, dtype=np.int32)  # the event's index in its track
        row_track, row_depth, row_off = [], [], [0]
        pos = 0
        for ti, t in enumerate(tracks):
            n = len(t)
            sl = slice(pos, pos + n)
            order, per_row, overflow = _rows(t.start, t.dur, self._start[sl], self._end[sl], self._index[sl])
            t.rows = len(per_row)
            t.nesting_rows = t.rows - overflow
            codes = _event_codes(self.space, t, plane_codes[t.plane], code_of, self._step_names)
            if self._name.dtype == np.int16 and len(names) > _INT16_MAX:  # names added past int16
                self._name = self._name.astype(np.int32)
            _take(codes, order, self._name[sl])
            del codes
            del order
            for depth, count in enumerate(per_row.tolist()):
                if count:
                    row_track.append(ti)
                    row_depth.append(depth)
                    row_off.append(row_off[-1] + count)
            pos += n
        # Every event's end is in `_end` now: one pass, no start + dur temporary per track.
        self.end_ps = int(self._end.max()) if total else 0
        self._row_track = np.asarray(row_track, dtype=np.int32)
        self._row_depth = np.asarray(row_depth, dtype=np.int32)
        self._row_off = np.asarray(row_off, dtype=np.int64)  # row r: positions [row_off[r], row_off[r+1])
        self.names = pd.Index(names, dtype=object)
        self._pyramid = _Pyramid(self._start, self._end, self._row_off, self.start_ps)
        self.tracks = _tracks_frame(self.space, tracks)
        self._track_of_line = {(t.plane, t.line): ti for ti, t in enumerate(tracks) if t.derived is None}
        self._inverse = {}  # track id -> index in the track of each event of its file line (-1: not drawn)

    def _saved(self):
        """(meta, arrays): what `_restore` makes this Trace again from (file lines only)."""
        own = [t for t in self._tracks if t.src is not None]
        levels = self._pyramid.built()
        at = np.cumsum([0] + [len(t) for t in own]).tolist()
        ranges = {id(t): [a, b] for t, a, b in zip(own, at[:-1], at[1:])}
        meta = {
            "start_ps": int(self.start_ps),
            "end_ps": int(self.end_ps),
            "names": [str(n) for n in self.names],
            "shifts": [level.shift for level in levels],
            "pyramid": [self._pyramid.finest, self._pyramid.coarsest],
            "tracks": [
                {
                    "section": t.section,
                    "name": t.name,
                    "plane": t.plane,
                    "line": t.line,
                    "pid": t.pid,
                    "tid": t.tid,
                    "file_events": t.file_events,
                    "rows": t.rows,
                    "nesting_rows": t.nesting_rows,
                    "region_ids": [_plain(v) for v in t.region_ids],
                    "src": ranges.get(id(t)),
                    "hidden": t.hidden,
                }
                for t in self._tracks
            ],
        }
        empty = np.zeros(0, np.int64)
        arrays = {
            "start": self._start,
            "end": self._end,
            "name": self._name,
            "index": self._index,
            "row_track": self._row_track,
            "row_depth": self._row_depth,
            "row_off": self._row_off,
            "track_start": np.concatenate([t.start for t in own]) if own else empty,
            "track_dur": np.concatenate([t.dur for t in own]) if own else empty,
            "track_src": np.concatenate([t.src for t in own]) if own else empty.astype(np.int32),
        }
        for k, level in enumerate(levels):
            arrays.update({f"level{k}_first": level.first, f"level{k}_long": level.long, f"level{k}_top": level.top})
        return meta, arrays

    @classmethod
    def _restore(cls, space, meta, arrays):
        """The Trace `_saved` described, over `space`'s lines; None if the saved data does
        not fit them (then the caller builds it)."""
        try:
            self = object.__new__(cls)
            self.space = space
            tracks = []
            for d in meta["tracks"]:
                line = space.planes[d["plane"]].lines[d["line"]]
                if d["src"] is None:
                    start, dur, src = line.start_ps, line.event_duration_ps, None
                else:
                    a, b = d["src"]
                    start, dur, src = arrays["track_start"][a:b], arrays["track_dur"][a:b], arrays["track_src"][a:b]
                    if len(src) and (int(src.max()) >= len(line) or len(src) != b - a):
                        return None
                fields = {k: d[k] for k in ("section", "name", "plane", "line", "pid", "tid", "file_events")}
                t = _Track(**fields, start=start, dur=dur, src=src, region_ids=list(d["region_ids"]))
                t.hidden = int(d.get("hidden", 0))
                t.rows, t.nesting_rows = int(d["rows"]), int(d["nesting_rows"])
                if t.file_events != len(line):
                    return None
                tracks.append(t)
            self._tracks = tracks
            self.start_ps, self.end_ps = int(meta["start_ps"]), int(meta["end_ps"])
            for name in ("start", "end", "name", "index", "row_track", "row_depth", "row_off"):
                setattr(self, f"_{name}", arrays[name])
            total = sum(len(t) for t in tracks)
            if not len(self._start) == len(self._end) == len(self._name) == len(self._index) == total:
                return None
            if len(self._row_off) != len(self._row_track) + 1 or (len(self._row_off) and self._row_off[-1] != total):
                return None
            self.names = pd.Index(meta["names"], dtype=object)
            if len(self._name) and int(self._name.max()) >= len(self.names):
                return None
            levels = {}  # the levels built before it was saved (the rest are built when asked for)
            for k, shift in enumerate(meta["shifts"]):
                first, long_, top = (arrays[f"level{k}_{part}"] for part in ("first", "long", "top"))
                levels[int(shift)] = _Level(int(shift), first, long_, top)
            shifts = meta.get("pyramid")  # (finest, coarsest); found again if absent
            shifts = shifts if isinstance(shifts, list) and len(shifts) == 2 else None
            self._pyramid = _Pyramid(self._start, self._end, self._row_off, self.start_ps, levels, shifts)
            self.tracks = _tracks_frame(space, tracks)
        except (KeyError, IndexError, TypeError, ValueError):
            return None
        self._track_of_line = {(t.plane, t.line): ti for ti, t in enumerate(tracks)}
        self._inverse = {}
        return self

    def __repr__(self):
        return (
            f"<Trace {self.space.host!r}: {len(self.tracks)} tracks, {self.event_count:,} events, "
            f"{(self.end_ps - self.start_ps) / 1e9:.3f} ms>"
        )

    @property
    def event_count(self):
        """Events drawn, over all tracks."""
        return len(self._start)

    # --- the viewport query --------------------------------------------------------------

    def query(self, start_ps=None, end_ps=None, resolution=2000, tracks=None, raw_limit=RAW_LIMIT):
        """The boxes to draw for the window [start_ps, end_ps) at `resolution` pixels across.

        `start_ps` / `end_ps` are absolute ps (None: the trace's start / end);
        `tracks` limits the answer to those track ids. Returns a DataFrame,
        one row per box, sorted by track, row and start (`QUERY_COLUMNS`):

        * `track`, `row` (int64): the track id and its row (0 at the top),
        * `start_ps`, `end_ps` (int64, absolute ps): whole events, not
          clipped to the window,
        * `count` (int32): 1 for an event, else the events a merged box
          stands for,
        * `index` (int64): the event's index in its track, with `track` a
          stable id for `Trace.event`; -1 for a box of several events,
        * `name` (categorical over `trace.names`).

        Every event overlapping the window that lasts at least a pixel
        ((end_ps - start_ps) / resolution) is a box of its own; the others
        are merged: a run of them in a row whose gaps are all under a pixel
        is one box from its first start to its last end, named after its
        longest event. In each row the counts add up to the events
        overlapping the window (a zero-length event overlaps where it is),
        and there are at most 2 x (resolution + 1) boxes per row. Windows
        holding more than `raw_limit` events are read from the bucket
        pyramid: same boxes, except that a merged box cut by the window's
        edge may be named after another of its events.
        """
        ws = self.start_ps if start_ps is None else int(start_ps)
        we = self.end_ps + 1 if end_ps is None else int(end_ps)
        resolution = max(1, int(resolution))
        rows = np.arange(len(self._row_track))
        if tracks is not None:
            rows = rows[np.isin(self._row_track, np.asarray(self._track_ids(tracks), dtype=np.int64))]
        empty = np.zeros(0, np.int64)
        if we <= ws or len(rows) == 0:
            return self._frame(empty, empty, empty, empty, empty)
        pixel = (we - ws) / resolution
        lo, hi = self._window(rows, ws, we)
        keep = hi > lo
        rows, lo, hi = rows[keep], lo[keep], hi[keep]
        # A level is built on first use: not for windows answered from the events.
        in_window = int((hi - lo).sum())
        level = None if in_window <= raw_limit else self._pyramid.level_for(pixel, in_window)
        if level is None:
            parts = self._raw_parts(rows, lo, hi, pixel)
        else:
            parts = self._pyramid_parts(level, rows, lo, hi, pixel)
            self._build_levels_after(resolution)
        return self._boxes(*parts, pixel)

    def _build_levels_after(self, resolution):
        """After a big trace's first view from the pyramid, its other levels are built on a
        daemon thread (`_Pyramid.build_all`): a zoom then finds its level built instead of
        building it (0.3-0.5 s a level at 49 M events)."""
        if self._levels_thread is not None or self.event_count < BACKGROUND_LEVELS_EVENTS:
            return
        self._levels_thread = threading.Thread(
            target=self._pyramid.build_all, args=(resolution,), name="xprof-widgets-trace-levels", daemon=True
        )
        self._levels_thread.start()

    def _window(self, rows, ws, we):
        """Per row, the range [lo, hi) of positions of the events overlapping [ws, we)."""
        a, b = self._row_off[rows], self._row_off[rows + 1]
        # Overlapping: starts before `we`, and ends after `ws` or starts at/after
        # it (zero-length events). Each is monotone along a row.
        lo = np.minimum(_search(self._end, a, b, ws, right=True), _search(self._start, a, b, ws, right=False))
        hi = _search(self._start, a, b, we, right=False)
        return lo, hi

    def _raw_parts(self, rows, lo, hi, pixel):
        """Events a pixel long, and the shorter ones as parts to merge, from the events."""
        pos = _ranges(lo, hi)
        row = np.repeat(rows, hi - lo)
        dur = self._end[pos] - self._start[pos]
        single = dur >= pixel
        part = ~single
        ppos = pos[part]
        return pos[single], row[single], row[part], ppos, ppos, np.ones(len(ppos), np.int64), ppos, dur[part]

    def _pyramid_parts(self, level, rows, lo, hi, pixel):
        """Events a pixel long, and one part to merge per bucket, from a pyramid level."""
        first = level.first
        bl = np.searchsorted(first, lo, side="right") - 1  # the bucket holding lo
        bh = np.searchsorted(first, hi - 1, side="right")  # past the bucket holding hi - 1
        b = _ranges(bl, bh)
        row = np.repeat(rows, bh - bl)
        # Each bucket's events, clipped to the window's: [a, z).
        a = np.maximum(first[b], np.repeat(lo, bh - bl))
        z = np.minimum(np.append(first, len(self._start))[b + 1], np.repeat(hi, bh - bl))
        long_ = level.long[b].astype(np.int64)
        has_long = (long_ >= a) & (long_ < z)
        long_dur = np.where(has_long, self._end[long_] - self._start[long_], -1)
        single = has_long & (long_dur >= pixel)
        # The long event is its bucket's last: the others are [a, z - single).
        last = z - 1 - single
        count = z - a - single
        top = level.top[b].astype(np.int64)
        top_in = (top >= a) & (top < z)
        top_dur = np.where(top_in, self._end[top] - self._start[top], -1)
        lost = ~top_in & (count > has_long & ~single)
        if lost.any():  # the window cut a bucket's longest event off: look at what is left
            top[lost], top_dur[lost] = self._longest(a[lost], last[lost] + 1, pixel)
        take_long = has_long & ~single & (long_dur > top_dur)
        top = np.where(take_long, long_, top)
        top_dur = np.where(take_long, long_dur, top_dur)
        part = count > 0
        return (long_[single], row[single], row[part], a[part], last[part], count[part], top[part], top_dur[part])

    def _longest(self, a, z, pixel, limit=RAW_LIMIT):
        """Per range [a, z): its first longest event under `pixel`, and that duration.

        Past `limit` events in all, each range's first event stands in (only a
        name depends on it).
        """
        if int((z - a).sum()) > limit:
            return a, self._end[a] - self._start[a]
        pos = _ranges(a, z)
        dur = self._end[pos] - self._start[pos]
        at, best = _first_max(np.where(dur < pixel, dur, -1), np.cumsum(z - a) - (z - a))
        return pos[at], best

    def _boxes(self, s_pos, s_row, p_row, p_first, p_last, p_count, p_top, p_topdur, pixel):
        """Merge consecutive parts of a row whose gap is under a pixel; add the single events."""
        if len(p_row):
            p_start = self._start[p_first]
            p_end = self._end[p_last]
            new = np.empty(len(p_row), dtype=bool)
            new[0] = True
            new[1:] = (p_row[1:] != p_row[:-1]) | (p_start[1:] - p_end[:-1] >= pixel)
            head = np.flatnonzero(new)
            tail = np.append(head[1:], len(p_row)) - 1
            m_count = np.add.reduceat(p_count, head)
            at, _ = _first_max(p_topdur, head)
            m_top, m_row, m_start, m_end = p_top[at], p_row[head], p_start[head], p_end[tail]
        else:
            m_count = m_top = m_row = m_start = m_end = np.zeros(0, np.int64)
        row = np.concatenate([s_row, m_row])
        pos = np.concatenate([s_pos, m_top])
        start = np.concatenate([self._start[s_pos], m_start])
        end = np.concatenate([self._end[s_pos], m_end])
        count = np.concatenate([np.ones(len(s_pos), np.int64), m_count])
        order = np.lexsort((start, row))
        return self._frame(row[order], pos[order], start[order], end[order], count[order])

    def _frame(self, row, pos, start, end, count):
        """The query's DataFrame, from global rows and each box's representative event."""
        pos = pos.astype(np.int64)
        return pd.DataFrame(
            {
                "track": self._row_track[row].astype(np.int64),
                "row": self._row_depth[row].astype(np.int64),
                "start_ps": start.astype(np.int64),
                "end_ps": end.astype(np.int64),
                "count": count.astype(np.int32),
                "index": np.where(count == 1, self._index[pos], -1).astype(np.int64),
                "name": pd.Categorical.from_codes(self._name[pos], categories=self.names, validate=False),
            },
            columns=QUERY_COLUMNS,
        )

    # --- events and search ---------------------------------------------------------------

    def event(self, track, index):
        """Details of one event, by `track` id and `index` in the track (see `query`).

        A dict: `track`, `index`, `section`, `track_name`, `row`, `name`,
        `long_name` (the metadata's full name, e.g. the HLO text of a TPU op),
        `start_ps`, `duration_ps`, `end_ps` (ps), `stats` (every stat of the
        event, metadata stats included, decoded for this event alone), and
        its XLA context where the profile has one: `hlo_op`, `program`
        (the module as `name(program_id)`) and `program_id`. CPU and GPU
        events carry `hlo_op` / `hlo_module` / `program_id` stats; on TPU the
        `XLA Ops` event is the op and the `XLA Modules` event around it the
        module. `synthetic` is True for the threadpool regions XProf adds,
        which have no record in the file, and for the events of derived
        tracks; those also have `derived_count` (the XLA op events merged
        into them) and `derived_from` (up to DERIVED_FROM_SHOWN of those as
        [track, index] pairs, first ones first; `derived_from()` gives all),
        and their `stats` are the ones XProf gives them (`group_id`; host
        offload: `_a`, `raw_bytes_accessed`, `shape_with_layout`).
        """
        track, index = self._track_id(track), int(index)
        t = self._tracks[track]
        if not 0 <= index < len(t):
            raise IndexError(f"track {track} has {len(t)} events; no event {index}")
        if t.derived is not None:
            return self._derived_event(track, index)
        plane = self.space.planes[t.plane]
        line = plane.lines[t.line]
        src = index if t.src is None else int(t.src[index])
        out = self._event_place(track, index, synthetic=src < 0)
        if src < 0:  # a threadpool region XProf adds
            # XProf 2.24.2 gives regions no stats (setting their consumer stat is a TODO in its
            # preprocess_xplane.h); which StartRegion opened it is ours: `start_region_c`.
            out.update(
                name=REGION,
                long_name=REGION,
                stats={},
                start_region_c=t.region_ids[-src - 1],
                hlo_op=None,
                program=None,
                program_id=None,
            )
            return out
        md = plane.event_metadata
        mid = int(line.metadata_id[src])
        long_name = str(md["name"].get(mid, ""))
        name = str(md["display_name"].get(mid, "") or long_name)
        st = line.stats(events=[src])
        stats = {k: _plain(v) for k, v in st.iloc[0].items() if not _missing(v)}
        if stats.get("step_name"):
            name = str(stats["step_name"])
        name = getattr(self, "_step_names", {}).get((t.plane, t.line), {}).get(int(src), name)
        out.update(name=name, long_name=long_name, stats=stats)
        out.update(_xla_context(plane, t, line, src, name, stats))
        op = self._attributed_op(t, src)
        if op is not None:  # its `hlo_op` names its command buffer; the op was found (beyond XProf)
            out.update(command_buffer=out["hlo_op"], hlo_op=str(op))
        return out

    def _event_place(self, track, index, synthetic):
        """Where an event is: the keys of `event()` that every event has."""
        t = self._tracks[track]
        start, dur = int(t.start[index]), int(t.dur[index])
        return {
            "track": track,
            "index": index,
            "section": t.section,
            "track_name": t.name,
            "row": self._row_of(track, index),
            "start_ps": start,
            "duration_ps": dur,
            "end_ps": start + dur,
            "synthetic": synthetic,
        }

    def _derived_event(self, track, index):
        """`event()` for an event of a derived track."""
        t = self._tracks[track]
        d = t.derived
        stats = {k: _plain(v[index]) for k, v in d.stats.items() if not _missing(v[index])}
        members = self.derived_from(track, index)
        context = {"hlo_op": None, "program": None, "program_id": None}
        if d.name.startswith(XLA_OPS_LINE + " - from #") and d.member_hi[index] > d.member_lo[index]:
            # A GPU XLA op event: the op and module of the kernels it was made from.
            plane = self.space.planes[t.plane]
            lo = int(d.member_lo[index])
            line = plane.lines[int(d.members_line[lo])]
            src = int(d.members_event[lo])
            first = line.stats(events=[src]).iloc[0]
            kernel_stats = {k: _plain(v) for k, v in first.items() if not _missing(v)}
            context = _xla_context(plane, t, line, src, str(d.names[index]), kernel_stats)
            context["hlo_op"] = str(d.names[index])
        return {
            **self._event_place(track, index, synthetic=True),
            "name": str(d.names[index]),
            "long_name": str(d.long_names[index] or d.names[index]),
            "stats": stats,
            **context,
            "derived_count": len(members),
            "derived_from": members[["track", "index"]].head(DERIVED_FROM_SHOWN).to_numpy().tolist(),
        }

    def derived_from(self, track, index):
        """The file events a derived event was made from, by start: a DataFrame with
        `track`, `index` (-1 where the event is not drawn), `start_ps`, `end_ps`
        (ps) and `name`. Empty for an event of a track that is not derived."""
        track = self._track_id(track)
        t = self._tracks[track]
        cols = ["track", "index", "start_ps", "end_ps", "name"]
        if t.derived is None:
            return pd.DataFrame({c: [] for c in cols})
        d = t.derived
        index = int(index)
        if not 0 <= index < len(t):
            raise IndexError(f"track {track} has {len(t)} events; no event {index}")
        lo, hi = int(d.member_lo[index]), int(d.member_hi[index])
        lines, events = d.members_line[lo:hi], d.members_event[lo:hi]
        plane = self.space.planes[t.plane]
        out_track = np.full(len(events), -1, dtype=np.int64)
        out_index = np.full(len(events), -1, dtype=np.int64)
        starts = np.empty(len(events), dtype=np.int64)
        ends = np.empty(len(events), dtype=np.int64)
        names = np.empty(len(events), dtype=object)
        md = plane.event_metadata
        for li in np.unique(lines).tolist():
            at = np.flatnonzero(lines == li)
            line, ev = plane.lines[li], events[at]
            starts[at] = line.start_ps[ev]
            ends[at] = line.start_ps[ev] + line.event_duration_ps[ev]
            mid = line.metadata_id[ev]
            display = md["display_name"].reindex(mid).fillna("").to_numpy(dtype=object)
            names[at] = np.where(display != "", display, md["name"].reindex(mid).fillna("").to_numpy(dtype=object))
            ti = self._track_of_line.get((t.plane, li))
            if ti is not None:
                out_track[at] = ti
                out_index[at] = self._inverse_of(ti)[ev]
        frame = pd.DataFrame(
            {"track": out_track, "index": out_index, "start_ps": starts, "end_ps": ends, "name": names}, columns=cols
        )
        return frame.sort_values("start_ps", kind="stable", ignore_index=True)

    def _inverse_of(self, track):
        """For a file line's track: the track index of each event of the line (-1: not drawn)."""
        if track not in self._inverse:
            t = self._tracks[track]
            if t.src is None:
                inv = np.arange(t.file_events, dtype=np.int64)
            else:
                inv = np.full(t.file_events, -1, dtype=np.int64)
                real = np.flatnonzero(t.src >= 0)
                inv[t.src[real]] = real
            self._inverse[track] = inv
        return self._inverse[track]

    def _row_of(self, track, index):
        """The row one event is drawn in."""
        a, b, _ = self._track_span(track)
        at = a + int(np.flatnonzero(self._index[a:b] == index)[0])
        return int(self._row_depth[np.searchsorted(self._row_off, at, side="right") - 1])

    def _track_id(self, track):
        """`track` as an int, or an IndexError saying which ids exist."""
        try:
            tid = int(track)
        except (TypeError, ValueError):
            raise TypeError(f"a track id is an int (an index of trace.tracks), not {track!r}") from None
        if not 0 <= tid < len(self._tracks):
            raise IndexError(f"no track {tid}: this trace has tracks 0 to {len(self._tracks) - 1} (trace.tracks)")
        return tid

    def _track_ids(self, tracks):
        """`tracks` (one id or several) as a list of checked ids."""
        if isinstance(tracks, (int, np.integer)):
            tracks = [tracks]
        elif isinstance(tracks, (str, bytes)) or not hasattr(tracks, "__iter__"):
            raise TypeError(f"tracks is a list of track ids (indexes of trace.tracks), not {tracks!r}")
        return [self._track_id(t) for t in tracks]

    def _track_span(self, track):
        """Positions [a, b) of a track's events, and its global rows."""
        rows = np.flatnonzero(self._row_track == self._track_id(track))
        return int(self._row_off[rows[0]]), int(self._row_off[rows[-1] + 1]), rows

    def events(self, track):
        """One track's events as a DataFrame indexed by their index in the track:
        `row`, `start_ps`, `end_ps` (absolute ps) and `name`."""
        a, b, rows = self._track_span(track)
        row = np.repeat(self._row_depth[rows], np.diff(self._row_off[rows[0] : rows[-1] + 2]))
        order = np.argsort(self._index[a:b], kind="stable")
        pos = a + order
        frame = pd.DataFrame(
            {
                "row": row[order].astype(np.int16),
                "start_ps": self._start[pos],
                "end_ps": self._end[pos],
                "name": pd.Categorical.from_codes(self._name[pos], categories=self.names, validate=False),
            }
        )
        frame.index.name = "index"
        return frame

    def counters(self) -> pd.DataFrame:
        """XProf's counter tracks: the events of each shown section's `_counters_` line
        (which is no track of boxes), one series per (section, counter name), as its
        streaming trace viewer draws them (`trace_events_to_json.h`, a "C" event per
        series: [time, the event's argument values]).

        One row per sample and argument, in section, then file order: `section`, `name`
        (the counter: the event's name), `stat` (the argument's name; XProf labels a series
        by its first), `time_ps` (absolute, XProf's origin), `value` (float; NaN where the
        value is not a number). Lines named `counters_*` are left out, as XProf does.
        """
        return derived(self, "counters", self._counters).copy()

    def _counters(self):
        parts = []
        for pi, (plane, pid) in enumerate(zip(self.space.planes, _section_pids(self.space.planes))):
            if pid is None:
                continue
            for line in plane.lines:
                if line.name != COUNTER_LINE or not len(line):
                    continue
                names = np.asarray(line.names().astype(object), dtype=object)
                stats = line.stats()
                for stat in stats.columns:
                    values = pd.to_numeric(stats[stat], errors="coerce")
                    has = stats[stat].notna().to_numpy()
                    at = np.flatnonzero(has)
                    parts.append(
                        pd.DataFrame(
                            {
                                "pid": pid,
                                "plane": pi,
                                "section": plane.name,
                                "name": names[at],
                                "stat": str(stat),
                                "event": at,
                                "time_ps": line.start_ps[at],
                                "value": values.to_numpy(np.float64)[at],
                            }
                        )
                    )
        if not parts:
            return pd.DataFrame({k: pd.Series(dtype=t) for k, t in COUNTER_COLUMNS.items()})
        out = pd.concat(parts, ignore_index=True).sort_values(["pid", "plane", "event"], kind="stable")
        return out[list(COUNTER_COLUMNS)].astype(COUNTER_COLUMNS).reset_index(drop=True)

    def summary(self, start_ps=None, end_ps=None, tracks=None) -> pd.DataFrame:
        """What a box selection over [start_ps, end_ps] on `tracks` holds, as XProf's trace
        viewer sums it (its selection table): per event name, `occurrences`, `wall_ps`
        (their durations summed), `self_ps` (less the time of their direct children, the
        events nested in them on their track, counted over the whole track) and `avg_ps`
        (wall / occurrences). An event is in the selection when it overlaps the window
        (ends have it: a zero-length event on an edge counts). `start_ps`/`end_ps`:
        absolute ps, None for the trace's start / end; `tracks`: track ids (`tracks`'
        index), None for all. Sorted by wall time, longest first, then name."""
        lo = self.start_ps if start_ps is None else int(start_ps)
        hi = self.end_ps if end_ps is None else int(end_ps)
        names, wall, own = [], [], []
        for track in self.tracks.index if tracks is None else self._track_ids(tracks):
            ev = self.events(int(track))
            if ev.empty:
                continue
            begin, end = ev["start_ps"].to_numpy(np.int64), ev["end_ps"].to_numpy(np.int64)
            inside = (begin <= hi) & (end >= lo)
            if not inside.any():
                continue
            duration = end - begin
            names.append(np.asarray(ev["name"].cat.codes)[inside])
            wall.append(duration[inside])
            own.append((duration - children_time(begin, end))[inside])
        if not names:
            return pd.DataFrame({c: pd.Series(dtype=t) for c, t in SUMMARY_DTYPES.items()})
        g = Groups(np.concatenate(names))
        occurrences, wall_ps = g.size(), g.sum(np.concatenate(wall))
        out = pd.DataFrame(
            {
                "name": np.asarray(self.names, dtype=object)[g.first(np.concatenate(names))],
                "occurrences": occurrences,
                "wall_ps": wall_ps,
                "self_ps": g.sum(np.concatenate(own)),
                "avg_ps": wall_ps / occurrences,
            }
        )
        order = np.lexsort((out["name"].astype(str).to_numpy(), -out["wall_ps"].to_numpy()))
        return out.iloc[order].reset_index(drop=True)

    def search(self, pattern, regex=False):
        """Events whose name contains `pattern` (case-insensitive), by start time.

        `regex=True` takes `pattern` as a regular expression (`re.search`,
        case-insensitive). The distinct names are matched, then events by name
        code in one pass. Returns a SearchResult: a DataFrame (`track`,
        `index`, `start_ps`, `end_ps`, `name`) with `next_match(after_ps)` and
        `prev_match(before_ps)`.
        """
        rx = re.compile(pattern if regex else re.escape(str(pattern)), re.IGNORECASE)
        hit = np.fromiter((rx.search(n) is not None for n in self.names), dtype=bool, count=len(self.names))
        pos = np.flatnonzero(hit[self._name]) if hit.any() else np.zeros(0, np.int64)
        order = np.argsort(self._start[pos], kind="stable")
        pos = pos[order]
        row = np.searchsorted(self._row_off, pos, side="right") - 1
        out = SearchResult(
            {
                "track": self._row_track[row].astype(np.int64),
                "index": self._index[pos].astype(np.int32),
                "start_ps": self._start[pos],
                "end_ps": self._end[pos],
                "name": pd.Categorical.from_codes(self._name[pos], categories=self.names, validate=False),
            }
        )
        out.pattern = pattern
        return out

    # --- flows ---------------------------------------------------------------------------

    def flows(self, start_ps=None, end_ps=None) -> pd.DataFrame:
        """The arrows of XProf's trace: one row per connection between two events of a flow.

        A flow joins the events XProf gives the same flow (`core.flows`: a host launch and
        the kernels and copies it started, by `correlation_id`; producer and consumer
        contexts, `_p` / `_c`; the file's own `flow` stats). Its events, by start (one
        starting it first at equal starts), are connected as XProf's trace viewer draws
        them by default (`flow_arrows`): its producer to each consumer, so a launch to its
        kernel, a CUDA graph launch to every kernel of its graph. Columns: `flow_id` (numbers the flows), `category`
        (XProf's `cat`: `gpu_launch`, `threadpool_event`, `PjRt`...; "" for generic), and
        for each end (`from_`, `to_`): `track`, `index` (the event in its track, as in
        `query` and `event`), `row`, `name`, `start_ps`, `end_ps` (absolute ps). Sorted by
        the start of the `from` event. With a window (`start_ps` / `end_ps`, absolute ps,
        None for the trace's start / end), only connections with an end overlapping it
        (ends included). Events XProf does not draw (internal ones) are no ends; a flow of
        one drawn event has no row. Found once per trace, for every event at once.
        """
        links = self._flow_links()
        if start_ps is None and end_ps is None:
            return links.copy()
        lo = self.start_ps if start_ps is None else int(start_ps)
        hi = self.end_ps if end_ps is None else int(end_ps)
        inside = np.zeros(len(links), dtype=bool)
        for end in ("from", "to"):
            begin, stop = links[f"{end}_start_ps"].to_numpy(), links[f"{end}_end_ps"].to_numpy()
            inside |= (begin <= hi) & (stop >= lo)
        return links[inside].reset_index(drop=True)

    def flows_of(self, track, index) -> pd.DataFrame:
        """The connections (`flows()` rows) one event is an end of: the one coming in (it is
        the `to` end) and the one going out (the `from` end); none for most events."""
        links = self._flow_links()
        track, index = int(track), int(index)
        mine = (links["from_track"].to_numpy() == track) & (links["from_index"].to_numpy() == index)
        mine |= (links["to_track"].to_numpy() == track) & (links["to_index"].to_numpy() == index)
        return links[mine].reset_index(drop=True)

    def _flow_links(self):
        """Every connection of every flow (`flows()` without a window), built on first use."""
        return derived(self, "flows", self._found_flow_links)

    def _found_flow_links(self):
        ends = []
        added = not is_grouped(self.space)  # XProf adds flows to the files it groups only
        for ti, t in enumerate(self._tracks):
            if t.derived is not None:  # XProf derives its lines after it adds the flows: they have none
                continue
            plane = self.space.planes[t.plane]
            got = line_flow_ends(plane, plane.lines[t.line], added)
            if got is None:
                continue
            index = self._inverse_of(ti)[got.events]
            drawn = index >= 0
            index = index[drawn]
            a, b, _ = self._track_span(ti)
            position = np.empty(b - a, dtype=np.int64)  # index in the track -> global position
            position[self._index[a:b]] = np.arange(a, b)
            columns = (got.rule, got.key, got.kind, got.category, got.entry)
            ends.append((np.full(len(index), ti, np.int64), index, position[index], *(c[drawn] for c in columns)))
        return self._connect(ends)

    def _connect(self, ends):
        """Each flow's ends, by start, connected as XProf draws them (`flow_arrows`): the `flows()` frame."""
        types = (np.int64, np.int64, np.int64, np.int8, np.uint64, np.int8, np.int8, np.int8)
        cols = [np.concatenate(c) for c in zip(*ends)] if ends else [np.zeros(0)] * len(types)
        track, index, pos, rule, key, kind, category, entry = (c.astype(t) for c, t in zip(cols, types))
        # A flow: one (rule, kind, key); its ends by start, the one starting it first at equal starts.
        order = np.lexsort((index, track, entry, self._start[pos], key, kind, rule))
        track, index, pos, rule, key, kind, category, entry = (
            c[order] for c in (track, index, pos, rule, key, kind, category, entry)
        )
        same = (rule[1:] == rule[:-1]) & (kind[1:] == kind[:-1]) & (key[1:] == key[:-1])
        flow_id = np.cumsum(np.concatenate([[True], ~same])) - 1 if len(order) else np.zeros(0, np.int64)
        src, dst = flow_arrows(flow_id, entry)
        row = self._row_depth[np.searchsorted(self._row_off, pos, side="right") - 1] if len(pos) else pos
        names = pd.Categorical.from_codes(self._name[pos], categories=self.names, validate=False)
        frame = {
            "flow_id": flow_id[src].astype(np.int64),
            "category": pd.Categorical(np.asarray(CATEGORIES, dtype=object)[category[src]]),
        }
        for end, at in (("from", src), ("to", dst)):
            frame[f"{end}_track"] = track[at]
            frame[f"{end}_index"] = index[at]
            frame[f"{end}_row"] = row[at].astype(np.int64)
            frame[f"{end}_name"] = names[at]
            frame[f"{end}_start_ps"] = self._start[pos[at]]
            frame[f"{end}_end_ps"] = self._end[pos[at]]
        out = pd.DataFrame(frame, columns=FLOW_COLUMNS)
        by_start = np.argsort(out["from_start_ps"].to_numpy(), kind="stable")
        return out.iloc[by_start].reset_index(drop=True)


def flow_arrows(flow, entry):
    """(from, to) positions of the arrows XProf's trace viewer draws among a flow's ends
    (`flow`: each end's flow, ends grouped by flow and in time order; `entry`: `core.flows`'
    OUT, MID, IN or NONE), as its default viewer (catapult's `createFlowSlices_`: an end
    going out is a producer, one coming in (or without a direction) a consumer, one doing
    both a step) draws them:

    * each consumer gets an arrow from the flow's producer: a CUDA graph launch to every
      kernel of the graph, a batch's first request to the batch;
    * ends before the flow's first producer get none;
    * a producer replaces the flow's producer only after a consumer since the last one
      (a second producer right after a first is ignored);
    * a step takes its arrow from the producer, then is the producer itself.
    """
    n = len(flow)
    if not n:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    pos = np.arange(n)
    producer, step = entry == OUT, entry == MID
    consumer = ~producer & ~step
    start = np.flatnonzero(np.concatenate([[True], flow[1:] != flow[:-1]]))
    seg = np.repeat(np.arange(len(start)), np.diff(np.append(start, n)))
    # The first producer of each flow (n: none).
    first = np.full(len(start), n)
    np.minimum.at(first, seg[producer], pos[producer])
    after = pos >= first[seg]  # at or after the flow's first producer
    # Ends that become the producer: the first one, every step after it, and a producer
    # right after a consumer (a producer after a producer is ignored).
    prev_consumer = np.concatenate([[False], consumer[:-1] & (flow[1:] == flow[:-1])]) & np.concatenate(
        [[False], after[:-1]]
    )
    sets = (pos == first[seg]) | (step & after) | (producer & after & prev_consumer)
    # Each consumer or step after the first producer: from the last end before it that set one.
    last = np.where(sets, pos, -1)
    last = np.maximum.accumulate(np.concatenate([[-1], last[:-1]]))
    to = np.flatnonzero((consumer | step) & after & (pos > first[seg]))
    return last[to].astype(np.int64), to.astype(np.int64)


def trace(run, host=None):
    """The Trace of a run's `host` (default: the first), built once per host, or read
    back from the column cache when an earlier process built it for this file."""
    space = run.xspace(host)
    return derived(space, "trace", lambda: _cached_trace(space, run))


#: The name a Trace's index has in the column cache; a new number when what is saved changes.
_CACHE_NAME = "trace-2"  # 2: step roots named by their step ("train 3")


def _cached_trace(space, run):
    """The Trace of `space`: restored from the column cache if there, else built (and saved).

    Building sorts every event into rows and builds the bucket pyramid, seconds on ten
    million events; restoring maps the saved arrays. Only traces made of the file's own
    lines are saved: lines XProf derives on TPU and GPU planes (`DerivedLine`, made from
    stats and, for GPUs, the run's HLO modules) are built each time.
    """
    cacheable = not any(
        derives_lines(space, p) or (run is not None and derives_gpu_lines(space, p))
        for p in space.planes
        if p.name.startswith((TPU_PLANE_PREFIX, GPU_PLANE_PREFIX))
    )
    if cacheable:
        found = column_cache.load_derived(space, _CACHE_NAME)
        if found is not None:
            restored = Trace._restore(space, *found)
            if restored is not None:
                restored.attribute_graph_kernels(run)
                return restored
    built = Trace(space, run)
    if cacheable and all(t.derived is None for t in built._tracks):
        column_cache.store_derived_later(space, _CACHE_NAME, built._saved)  # with the levels built by then
    return built


def _tracks_frame(space, tracks):
    """The `Trace.tracks` DataFrame of built (or restored) tracks."""
    frame = pd.DataFrame(
        {
            "section": [t.section for t in tracks],
            "name": [t.name for t in tracks],
            "plane": [t.plane for t in tracks],
            "line": [t.line for t in tracks],
            "pid": [t.pid for t in tracks],
            "tid": [t.tid for t in tracks],
            "events": [len(t) for t in tracks],
            "file_events": [t.file_events for t in tracks],
            "rows": [t.rows for t in tracks],
            "nesting_rows": [t.nesting_rows for t in tracks],
            "hidden": [t.hidden for t in tracks],
            "derived": [t.derived is not None for t in tracks],
            "label": track_labels(
                [t.section for t in tracks],
                [t.name for t in tracks],
                [None if t.line < 0 else space.planes[t.plane].lines[t.line].id for t in tracks],
            ),
        }
    )
    frame.index.name = "track"
    return frame


# --- layout ----------------------------------------------------------------------------------


def _section_pids(planes):
    """XProf's process id for each plane's section (None: the trace leaves it out). One pass
    over the planes: a file may hold very many."""
    has_gpu = any(p.name.startswith(GPU_PLANE_PREFIX) for p in planes)
    hosts = sorted(p.name for p in planes if p.name.startswith(HOST_PLANE))
    host_rank = {}
    for i, name in enumerate(hosts):
        host_rank.setdefault(name, i)  # a name's first place among the sorted host planes
    pids = []
    for plane in planes:
        name = plane.name
        if name.startswith(GPU_PLANE_PREFIX) or (not has_gpu and name.startswith(TPU_PLANE_PREFIX)):
            pid = _FIRST_DEVICE_PID + plane.id
            pids.append(pid if pid <= _LAST_DEVICE_PID else _FIRST_DEVICE_PID)
        elif name.startswith(CUSTOM_PLANE_PREFIX):
            pids.append(_FIRST_CUSTOM_PID + plane.id)
        elif name.startswith(HOST_PLANE):
            pids.append(_HOST_PID + host_rank[name])
        else:
            pids.append(None)
    return pids


def _build_tracks(space, run=None):
    """Every drawn track, in display order, with XProf's drops and additions made (GPU
    derived lines need the `run`'s HLO modules)."""
    sections = []
    for pi, (plane, pid) in enumerate(zip(space.planes, _section_pids(space.planes))):
        if pid is not None and plane.lines:
            sections.append((pid, pi, plane))
    sections.sort(key=lambda s: (s[0], s[1]))
    tracks = []
    for pid, pi, plane in sections:
        internal, start_ids, stop_ids = _special_metadata(plane)
        stream_tids, derived = {}, []
        if derives_lines(space, plane):
            derived = derive_lines(plane)
        elif run is not None and derives_gpu_lines(space, plane):
            stream_tids, derived = derive_gpu_lines(run, space, plane)
        lines = []
        for li, line in plane.busy_lines:
            if line.name != COUNTER_LINE and not line.name.startswith(COUNTER_LINE_PREFIX):
                lines.append((stream_tids.get(li, (line.display_id or line.id) & 0xFFFFFFFF), li, line))
        lines.extend((d.tid, len(plane.lines) + k, d) for k, d in enumerate(derived))
        lines.sort(key=lambda x: (x[0], x[1]))
        for tid, li, line in lines:
            if isinstance(line, DerivedLine):
                t = _derived_track(plane, pi, line, pid)
            else:
                t = _track(plane, pi, li, line, pid, tid, internal, start_ids, stop_ids)
            if len(t):
                tracks.append(t)
    return tracks


def _derived_track(plane, pi, d, pid):
    """A derived line as a track: its events sorted by start, longer first at equal starts."""
    order = np.lexsort((-d.dur, d.start))
    d = d.take(order)
    return _Track(
        section=plane.name,
        name=d.name,
        plane=pi,
        line=-1,
        pid=pid,
        tid=d.tid,
        start=d.start,
        dur=d.dur,
        src=None,
        derived=d,
    )


def _special_metadata(plane):
    """Metadata ids of internal events, and of region start / stop markers (when both exist)."""
    ids, names, _ = plane.metadata_names
    # (A set per name, not np.isin: 50 µs a call, and a file may hold 20,000 planes.)
    internal = ids[np.fromiter((n in INTERNAL_EVENTS for n in names), bool, len(names))]
    start_ids, stop_ids = ids[names == START_REGION], ids[names == STOP_REGION]
    if not len(start_ids) or not len(stop_ids):  # XProf's mutator needs both
        start_ids = stop_ids = np.zeros(0, np.int64)
    return internal, start_ids, stop_ids


def _track(plane, pi, li, line, pid, tid, internal, start_ids, stop_ids):
    """One line as a track: internal events dropped, regions added, sorted by start."""
    start, dur = line.start_ps, line.event_duration_ps
    src = None
    if len(internal):
        keep = ~np.isin(line.metadata_id, internal)
        if not keep.all():
            src = np.flatnonzero(keep)
            start, dur = start[src], dur[src]
    region_ids = []
    regions = _regions(line, start_ids, stop_ids) if len(start_ids) else None
    if regions is not None:
        r_start, r_end, region_ids = regions
        base = np.arange(len(line)) if src is None else src
        src = np.concatenate([base, -1 - np.arange(len(r_start))])
        start = np.concatenate([start, r_start])
        dur = np.concatenate([dur, np.maximum(r_end - r_start, 0)])  # a stop before its start (a damaged file): empty
    # XProf sorts a line by start, longer events first at equal starts.
    same = start[1:] == start[:-1]
    if not np.all((start[1:] > start[:-1]) | (same & (dur[1:] <= dur[:-1]))):
        order = np.lexsort((-dur, start))  # stable: file order among equals
        start, dur = start[order], dur[order]
        src = order if src is None else src[order]
    hidden = 0
    if len(start) > MAX_NESTING:  # (a track of fewer events cannot nest deeper)
        depth = _open_count(start, dur)
        if int(depth.max()) >= MAX_NESTING:
            keep = depth < MAX_NESTING
            hidden = int(len(keep) - keep.sum())
            src = np.flatnonzero(keep) if src is None else src[keep]
            start, dur = start[keep], dur[keep]
    return _Track(
        section=plane.name,
        name=line.title,
        plane=pi,
        line=li,
        pid=pid,
        tid=tid,
        start=start,
        dur=dur,
        src=None if src is None else src.astype(np.int32),
        region_ids=region_ids,
        file_events=len(line),
        hidden=hidden,
    )


def _regions(line, start_ids, stop_ids):
    """XProf's threadpool regions of a line: (start_ps, end_ps, `_c` ids), or None.

    In file order, each StopRegion closes a region opened by the last
    StartRegion before it that has a `_c` stat (one start may open several),
    unless that start's timestamp is 0 (XProf's "no start yet").
    """
    starts = np.flatnonzero(np.isin(line.metadata_id, start_ids))
    stops = np.flatnonzero(np.isin(line.metadata_id, stop_ids))
    if not len(starts) or not len(stops):
        return None
    c = line.stats(names=["_c"], events=starts)
    if "_c" not in c:
        return None
    has_c = ~pd.isna(c["_c"]).to_numpy()
    starts, c_ids = starts[has_c], c["_c"].to_numpy(dtype=object)[has_c]
    if not len(starts):
        return None
    opener = np.searchsorted(starts, stops, side="left") - 1  # the last start before each stop
    ok = opener >= 0
    stops, opener = stops[ok], opener[ok]
    ok = line.start_ps[starts[opener]] != 0
    stops, opener = stops[ok], opener[ok]
    if not len(stops):
        return None
    return line.start_ps[starts[opener]], line.start_ps[stops], [_plain(v) for v in c_ids[opener]]


def _name_table(space, plane_ids):
    """The shown names of the planes' event metadata (a list, "" included), and per plane
    (sorted metadata ids, the code of each)."""
    shown_by_plane = {}
    for pi in sorted(plane_ids):
        ids, name, display = space.planes[pi].metadata_names
        shown_by_plane[pi] = (ids, np.where(display != "", display, name))
    names = np.unique(np.concatenate([s for _, s in shown_by_plane.values()] + [np.array([""], dtype=object)]))
    codes = {pi: (ids, np.searchsorted(names, shown).astype(np.int32)) for pi, (ids, shown) in shown_by_plane.items()}
    return names.tolist(), codes


def _step_roots(space):
    """{(plane index, line index): {event index: step name}} of the events XProf's grouping
    makes step roots (`grouping.step_events`: `train 3`), where the file has any: events
    with a root level (`_r`) or named as TF's implicit roots; {} for a file grouped already
    (its own `step_name` stats say it)."""
    host = space.plane(HOST_PLANE)
    if host is None:
        return {}
    if not host.has_stat("_r") and not any(n in IMPLICIT_ROOTS for n in host.metadata_names[1].tolist()):
        return {}
    steps = step_events(space)
    out: dict = {}
    index_of = {p.name: i for i, p in enumerate(space.planes)}
    for plane, line, event, name in zip(steps["plane"], steps["line"], steps["event"], steps["step_name"]):
        out.setdefault((index_of[plane], int(line)), {})[int(event)] = str(name)
    return out


def _event_codes(space, t, plane_codes, code_of, step_names=None):
    """The name code of every event of a track (`step_names`: `_step_roots`)."""
    if t.derived is not None:
        shown, inverse = np.unique(t.derived.names.astype(str), return_inverse=True)
        return np.array([code_of(n) for n in shown.tolist()], dtype=np.int32)[inverse]
    line = space.planes[t.plane].lines[t.line]
    ids, codes = plane_codes
    real = None if t.src is None else t.src >= 0
    out = np.empty(len(t), dtype=codes.dtype)
    for c in range(0, len(t), _CHUNK):  # a chunk at a time: no event-sized temporaries
        if t.src is None:
            mid = line.metadata_id[c : c + _CHUNK]
        else:
            src = t.src[c : c + _CHUNK]
            mid = line.metadata_id[np.where(src >= 0, src, 0)]
        out[c : c + _CHUNK] = _lookup(ids, codes, mid)
    if real is not None and not real.all():
        out[~real] = code_of(REGION)
    if space.planes[t.plane].has_stat("step_name"):  # XProf names an event by its step_name
        idx = np.arange(len(t)) if real is None else np.flatnonzero(real)
        st = line.stats(names=["step_name"], events=idx if t.src is None else t.src[idx])
        if "step_name" in st:
            for i, v in zip(idx.tolist(), st["step_name"].tolist()):
                if isinstance(v, str) and v:
                    out[i] = code_of(v)
    roots = (step_names or {}).get((t.plane, t.line))
    if roots:
        events = np.fromiter(roots, dtype=np.int64, count=len(roots))
        at = events if t.src is None else np.flatnonzero(np.isin(t.src, events))
        for i in at.tolist():
            out[i] = code_of(roots[int(i if t.src is None else t.src[i])])
    if (out < 0).any():  # metadata missing from the plane
        out[out < 0] = code_of("")
    return out


# --- rows ------------------------------------------------------------------------------------


def _open_count(start, dur):
    """For each event, how many earlier events (in track order) are still open at its start.

    Track order: by start, longer first at equal starts. Counted as i minus
    the events ended by then, corrected for the zero-length events at i's
    start that come at or after i.
    """
    n = len(start)
    if native.available() and n:
        depth = native.open_count(start, dur, _INT16_DEPTH)
        if depth is not None:  # else a depth past int16's: the wider types below
            return depth
    # Few temporaries of n events: fresh memory costs its first touch, and adds to the peak.
    ends = start + dur
    ends.sort()
    depth = _searchsorted_sorted(ends, start)  # the events ended by i's start
    del ends
    for c in range(0, n, _CHUNK):  # i minus those (no arange of n events beside it)
        part = depth[c : c + _CHUNK]
        np.subtract(np.arange(c, c + len(part), dtype=depth.dtype), part, out=part)
    zero = dur == 0
    depth += zero  # i itself was counted as ended
    if zero.any():
        tie = np.flatnonzero(start[1:] == start[:-1])
        if len(tie):  # zero-length events after i at i's start were counted too
            idx = np.unique(np.concatenate([tie, tie + 1]))
            group_end = np.searchsorted(start, start[idx], side="right")
            zeros_before = np.concatenate([[0], np.cumsum(zero, dtype=np.int64)])  # zero-length events in [0, i)
            depth[idx] += zeros_before[group_end] - zeros_before[idx + 1]
    # Narrow while rows are laid out (a nesting depth is small: int16 unless past 2**14).
    top = int(depth.max(initial=0))
    return depth.astype(np.int16 if top < _INT16_DEPTH else np.int32 if n < 2**31 else np.int64)


#: Depths below this are kept as int16 (room left for the extra rows `_rows` adds).
_INT16_DEPTH = 2**14
#: A trace whose metadata names are fewer than this keeps its name codes as int16 (room
#: left for the names events add: regions, step names); past _INT16_MAX they become int32.
_INT16_NAMES = 2**14
_INT16_MAX = np.iinfo(np.int16).max


def _searchsorted_sorted(haystack, needles, chunk=1 << 16):
    """np.searchsorted(haystack, needles, side="right") for sorted `needles`: chunk by
    chunk, each within the part of `haystack` its first and last needles bound (shorter
    searches over memory that stays in cache)."""
    n = len(needles)
    if n <= chunk:
        return np.searchsorted(haystack, needles, side="right")
    at = np.arange(0, n, chunk)
    bound = np.append(np.searchsorted(haystack, needles[at], side="right"), len(haystack)).tolist()
    out = np.empty(n, dtype=np.int32 if len(haystack) < 2**31 else np.int64)  # half the memory of intp
    for j, a in enumerate(at.tolist()):
        lo, hi, z = bound[j], bound[j + 1], min(a + chunk, n)
        np.add(np.searchsorted(haystack[lo:hi], needles[a:z], side="right"), lo, out=out[a:z], casting="unsafe")
    return out


def _rows(start, dur, out_start, out_end, out_order=None):
    """Rows of a track's events (sorted by start, longer first at equal starts).

    Open-count rows. Where two events of a row overlap, the earlier one
    started inside another event and outlives it (else it would have one more
    event open at its start than the later one): the shorter of the two is
    taken out (`_shorter_of_pair`: a 19 s step annotation that starts inside the
    3 µs Python frame that opens it keeps its row, the frame goes), the rows of
    the events that start inside it move up one, and this repeats until no
    row has an overlap. The events taken out go to extra rows after the
    nesting rows, first fit. Returns (the events in row-major order, how many
    events each row holds, the number of extra rows), and writes their starts
    and ends in that order to `out_start` and `out_end`. The order is int32, written
    to `out_order` when given (the caller's array: no track-sized int64 index array
    is made; tens of millions of events need hundreds of MB less).
    """
    n = len(start)
    if out_order is None:
        out_order = np.empty(n, np.int32 if n < 2**31 else np.int64)
    if n == 1:  # one row of one event (a file may hold 20,000 such tracks: no passes over it)
        out_order[0], out_start[0], out_end[0] = 0, start[0], start[0] + dur[0]
        return out_order, np.ones(1, np.int64), 0
    depth = _open_count(start, dur)
    out = None
    while True:
        order, per_row, bad = _row_major(depth, out, start, dur, out_order, out_start, out_end)
        if not len(bad):
            break
        bad = _shorter_of_pair(bad, depth, order, per_row, start, dur, out_start, out_end)
        if out is None:
            out = np.zeros(n, dtype=bool)
        out[bad] = True
        # Each was counted open for the events that start inside it.
        stop = np.searchsorted(start, start[bad] + dur[bad], side="left")
        if len(bad) <= 4096 and int((stop - bad).sum()) <= 8 * n:  # the usual: in place, range by range
            for b, z in zip(bad.tolist(), stop.tolist()):
                depth[b + 1 : z] -= 1
        else:
            delta = np.bincount(stop, minlength=n + 1)[: n + 1] - np.bincount(bad + 1, minlength=n + 1)[: n + 1]
            depth += np.cumsum(delta[:n])
    extra = 0
    if out is not None and out.any():  # first fit, in start order; these are few
        nest = len(per_row)
        idx = np.flatnonzero(out)
        idx_end = start[idx] + dur[idx]
        ends = []
        for i, s, e in zip(idx.tolist(), start[idx].tolist(), idx_end.tolist()):
            r = next((r for r, x in enumerate(ends) if x <= s), len(ends))
            if r == len(ends):
                ends.append(0)
            ends[r] = e
            depth[i] = nest + r
        extra = len(ends)
        tail = idx[np.argsort(depth[idx], kind="stable")]
        k = len(order)
        out_order[k:] = tail
        order = out_order
        per_row = np.concatenate([per_row, np.bincount(depth[tail] - nest, minlength=extra)])
        out_start[k:] = start[tail]
        out_end[k:] = start[tail] + dur[tail]
    return order, per_row, extra


def _shorter_of_pair(bad, depth, order, per_row, start, dur, out_start, out_end):
    """The events to take out of the rows for `bad` (each started inside an event and
    outlives it): the event it started inside instead, where that one is shorter.

    That event is the one open at `bad`'s start in the row above it (the row-major
    layout `order`, `per_row`, `out_start`, `out_end` of `_row_major`): the last there to
    start by then, if it ends after that start and before `bad` ends. Row by row, each
    a binary search."""
    offsets = np.concatenate([[0], np.cumsum(per_row)])
    above = depth[bad].astype(np.int64) - 1
    chosen = bad.copy()
    for row in np.unique(above[(above >= 0) & (above < len(per_row))]).tolist():
        at = np.flatnonzero(above == row)
        lo, hi = int(offsets[row]), int(offsets[row + 1])
        b = bad[at]
        p = lo + np.searchsorted(out_start[lo:hi], start[b], side="right") - 1
        found = p >= lo
        at, b, p = at[found], b[found], p[found]
        c = order[p]
        shorter = (c != b) & (out_end[p] > start[b]) & (out_end[p] < start[b] + dur[b]) & (dur[c] < dur[b])
        chosen[at[shorter]] = c[shorter]
    return np.unique(chosen)


_CHUNK = 1 << 20  # events per step of the blocked passes below: their temporaries stay a few MB


def _take(values, index, out):
    """`out[:] = values[index]`, a chunk at a time: np.take would first copy an int32
    `index` whole into an int64 one. `out` may be a narrower type (name codes)."""
    same = out.dtype == values.dtype
    for c in range(0, len(index), _CHUNK):
        # mode="clip": `index` is in range, and "raise" would buffer `out` (a copy per call).
        if same:
            np.take(values, index[c : c + _CHUNK], out=out[c : c + _CHUNK], mode="clip")
        else:
            out[c : c + _CHUNK] = np.take(values, index[c : c + _CHUNK], mode="clip")


def _row_major(depth, out, start, dur, order, out_start, out_end):
    """One layout of `_rows`: (order, per_row, bad): the events not `out` in row-major
    order (written to `order`, their starts and ends to `out_start` / `out_end`), how many
    each row holds (up to the last row holding any), and the earlier event of each two
    neighbours of a row that overlap."""
    usual = depth.dtype == np.int16 and order.dtype == np.int32  # the compiled loop's types
    laid = native.row_major(depth, out, start, dur, order, out_start, out_end) if native.available() and usual else None
    if laid is not None:
        k, per_row, bad = laid
        order = order[:k]
    else:
        order, per_row = order_by_key(depth, out, order)
        k = len(order)
        os_, oe = out_start[:k], out_end[:k]
        _take(start, order, os_)
        _take(dur, order, oe)
        oe += os_
        od = np.repeat(np.arange(len(per_row), dtype=depth.dtype), per_row)
        bad = order[:-1][(od[1:] == od[:-1]) & (os_[1:] < oe[:-1])]
    return order, np.trim_zeros(per_row, "b"), bad


# --- the pyramid -----------------------------------------------------------------------------


class _Pyramid:
    """The bucket levels over the row-major events, each built when a query first needs it.

    The levels are those of a pyramid built from the finest up (see the module docstring):
    from `finest` (about EVENTS_PER_BUCKET events per bucket, were the events spread
    evenly) up to `coarsest`, the first shift at which every row is one bucket (or the
    span's bit length). A level is what its shift makes it, whichever way it is built: from
    the events, or from a finer level already built (a factor 2 at a time). The finest
    levels whose buckets are more than half the events are not used (too sparse to save
    anything over the events). A whole-profile first view so builds one level from the
    events. A zoom in to a level with no finer one built builds a few levels finer from the
    events and the ones between from that (`_zoom_base`), so that the next steps in read
    levels already built. A big trace (BACKGROUND_LEVELS_EVENTS) builds the levels
    queries will read on a thread after its first view (`build_all`), so that a zoom
    finds its level built instead of building it (0.3-0.5 s a level at 49 M events).
    """

    def __init__(self, g_start, g_end, row_off, t0, built=None, shifts=None):
        self._start, self._end, self._t0, self._row_off = g_start, g_end, t0, row_off
        self.building = False  # while `build_all` runs
        self._n = n = len(g_start)
        self._lock = threading.Lock()
        self._built = dict(built or {})  # shift -> _Level
        if n == 0:
            self.finest = self.coarsest = None
            return
        if shifts is not None:  # (finest, coarsest) as saved: the events are not read
            self.finest, self.coarsest = (int(x) for x in shifts)
            return
        span = int(g_end.max()) - t0 + 1
        self.finest = max(0, (EVENTS_PER_BUCKET * span // n).bit_length() - 1)
        top_shift = max(self.finest, span.bit_length())
        # A level has one bucket per row when each row's first and last events share one.
        first_key = g_start[row_off[:-1]] - t0
        last_key = g_start[row_off[1:] - 1] - t0
        shift = self.finest
        while shift < top_shift and bool(((first_key >> shift) != (last_key >> shift)).any()):
            shift += 1
        self.coarsest = shift

    def level_for(self, pixel, window_events=None):
        """The coarsest level whose buckets are at most `pixel` ps wide, or None (the
        window's events are read).

        While `build_all` runs (in the background), a level not built yet is not
        waited for where one up to READ_FINER steps finer is built: that one is read,
        the same boxes from a few times the buckets. A level finer than every level
        built (after the first view) is not built for a window of at most
        FINE_RAW_LIMIT `window_events`: its events are read."""
        if self.finest is None or (1 << self.finest) > pixel:
            return None
        shift = min(int(pixel).bit_length() - 1, self.coarsest)
        level = self._built.get(shift)
        if level is None:
            built = list(self._built)
            finer = [s for s in built if shift - READ_FINER <= s < shift] if self.building else []
            if finer:
                level = self._built[max(finer)]
            elif built and window_events is not None and window_events <= FINE_RAW_LIMIT and min(built) > shift:
                return None
            else:
                level = self.level(shift)
        if level.shift < self.coarsest and len(level.first) > self._n // 2:
            return None  # too sparse: the events themselves are read
        return level

    def build_all(self, resolution):
        """Build the levels queries at `resolution` pixels will read and that are not built
        yet: the finest of them from the events (one pass), each coarser one from the
        next finer. The finest is the finest level a window read from which would hold,
        were the events spread evenly, at least an eighth of FINE_RAW_LIMIT events:
        narrower windows are mostly read from the events (a few ms: as fast as a level),
        and a finer level (built if a window of more events asks for one) would be
        millions of buckets few read (at 49 M events, 0.3 GB). What the background thread `Trace.query`
        starts after a big trace's first view runs."""
        if self.finest is None:
            return
        span = int(self._end.max()) - self._t0 + 1
        low = self.finest
        while low < self.coarsest and self._n * resolution * (1 << low) < span * (FINE_RAW_LIMIT // 8):
            low += 1
        self.building = True
        try:
            with self._lock:
                if not any(s <= low for s in self._built):
                    self._built[low] = self._from_events(low)
            for shift in range(low + 1, self.coarsest + 1):
                self.level(shift)  # from the closest finer level
        finally:
            self.building = False

    def level(self, shift):
        """The level of buckets 2**shift ps wide (finest <= shift <= coarsest)."""
        level = self._built.get(shift)  # built: no wait for a level being built meanwhile
        if level is not None:
            return level
        with self._lock:
            if shift not in self._built:
                finer = [s for s in self._built if s < shift]
                if not finer:
                    base = self._zoom_base(shift)
                    self._built[base] = self._from_events(base)
                    finer = [base]
                if shift not in self._built:  # from the closest finer level, keeping the ones between
                    level, heads = self._built[max(finer)], self._row_off[:-1]
                    while level.shift < shift:
                        level = _coarser(level, self._start, self._end, heads, self._t0)
                        self._built[level.shift] = level
            return self._built[shift]

    def _zoom_base(self, shift):
        """The level to build from the events when `shift` has no finer level built: itself
        for the first view; on a zoom in, up to ZOOM_AHEAD levels finer (the next steps in
        then read levels already built), as long as those levels, each about twice the
        buckets of the next coarser, stay under _COARSEN_BUCKETS: a level from the events
        costs a pass over every event (0.6 s at 49 M), one from a finer level a gather per
        bucket (0.2 s for 1.9 M buckets, 1.5 s for 5.8 M)."""
        if not self._built:
            return shift
        known = self._built[min(self._built)]  # coarser than `shift`: none is finer
        base, lowest = shift, max(self.finest, shift - ZOOM_AHEAD)
        while base > lowest and len(known.first) << (known.shift - base + 1) <= _COARSEN_BUCKETS:
            base -= 1
        return base

    def built(self):
        """The levels built so far, finest first."""
        with self._lock:
            return [self._built[s] for s in sorted(self._built)]

    def _from_events(self, shift):
        g_start, g_end, row_off, n = self._start, self._end, self._row_off, self._n
        parts = []
        # A few rows at a time (buckets never cross rows): bounded temporaries.
        cuts = np.searchsorted(row_off, np.arange(0, n, _CHUNK), side="right") - 1
        bounds = np.unique(np.append(row_off[cuts], n))
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            # The rows' first events in this part (no event-sized array of them: 49 MB at 49 M).
            row_head = np.zeros(b - a, dtype=bool)
            row_head[row_off[np.searchsorted(row_off, a) : np.searchsorted(row_off, b)] - a] = True
            parts.append(_finest(g_start[a:b], g_end[a:b], row_head, self._t0, shift, a))
        return _Level(shift, *(np.concatenate([p[k] for p in parts]) for k in range(3)))


_CHUNK = 1 << 21


def _finest(start, end, row_head, t0, shift, offset):
    """(first, long, top) of the buckets of 2**shift ps over some whole rows of events."""
    key = (start - t0) >> shift
    new = row_head.copy()
    new[0] = True
    new[1:] |= key[1:] != key[:-1]
    del key
    first = np.flatnonzero(new)
    del new
    dur = end - start
    width = 1 << shift
    long_pos = np.flatnonzero(dur >= width)
    long_ = np.full(len(first), -1, dtype=np.int64)
    long_[np.searchsorted(first, long_pos, side="right") - 1] = long_pos + offset
    short = dur < width
    if shift < 31:  # (duration, -position) packed in one int64: one max per bucket
        packed = np.where(short, dur << 32, -1 << 40)
        packed |= 0xFFFFFFFF - np.arange(len(dur))
        best = np.maximum.reduceat(packed, first)
        top = np.where(best >= 0, 0xFFFFFFFF - (best & 0xFFFFFFFF) + offset, -1)
    else:
        at, best = _first_max(np.where(short, dur, -1), first)
        top = np.where(best >= 0, at + offset, -1)
    return (first + offset).astype(np.int32), long_.astype(np.int32), top.astype(np.int32)


def _coarser(level, g_start, g_end, row_starts, t0):
    """The level with buckets twice as wide, from this level's buckets (`row_starts`: each
    row's first event, every one the first of a bucket)."""
    shift = level.shift + 1
    width = 1 << shift
    first = level.first
    key = (g_start[first] - t0) >> shift
    new = np.zeros(len(first), dtype=bool)
    new[np.searchsorted(first, row_starts)] = True
    new[1:] |= key[1:] != key[:-1]
    head = np.flatnonzero(new)
    long_ = level.long.astype(np.int64)
    ldur = np.where(long_ >= 0, g_end[long_] - g_start[long_], -1)
    # A wider bucket's long event is one of its children's, >= `width`: at most one.
    p_long = np.maximum.reduceat(np.where(ldur >= width, long_, -1), head).astype(np.int32)
    # Its longest shorter event: a child's, or a child's long event under `width`.
    top = level.top.astype(np.int64)
    tdur = np.where(top >= 0, g_end[top] - g_start[top], -1)
    ldur = np.where(ldur < width, ldur, -1)
    use_long = ldur > tdur  # on a tie the top wins: it comes first (the long event is last)
    best = np.where(use_long, long_, top)
    at, bdur = _first_max(np.where(use_long, ldur, tdur), head)
    return _Level(shift, first[head], p_long, np.where(bdur >= 0, best[at], -1).astype(np.int32))


# --- helpers ---------------------------------------------------------------------------------


def _first_max(keys, heads):
    """Per group (groups start at `heads`): the position of the first maximum of `keys`, and it."""
    if len(heads) == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=keys.dtype)
    best = np.maximum.reduceat(keys, heads)
    sizes = np.diff(np.append(heads, len(keys)))
    at = np.where(keys == np.repeat(best, sizes), np.arange(len(keys)), len(keys))
    return np.minimum.reduceat(at, heads), best


def _ranges(lo, hi):
    """np.arange(lo[i], hi[i]) for every i, concatenated, vectorised."""
    n = hi - lo
    keep = n > 0
    lo, n = lo[keep].astype(np.int64), n[keep].astype(np.int64)
    if not len(n):
        return np.zeros(0, dtype=np.int64)
    step = np.ones(int(n.sum()), dtype=np.int64)
    heads = np.cumsum(n) - n
    step[0] = lo[0]
    step[heads[1:]] = lo[1:] - (lo[:-1] + n[:-1] - 1)
    return np.cumsum(step)


def _search(values, a, b, target, right):
    """Per lane, np.searchsorted(values[a:b], target) as a global position (each slice sorted)."""
    lo, hi = a.astype(np.int64), b.astype(np.int64)
    while True:
        active = lo < hi
        if not active.any():
            return lo
        mid = (lo + hi) >> 1
        v = values[np.where(active, mid, 0)]
        go = (v <= target) if right else (v < target)
        lo = np.where(active & go, mid + 1, lo)
        hi = np.where(active & ~go, mid, hi)


def _lookup(keys, values, x, missing=-1):
    """values[i] where keys[i] == x, else `missing`, for each x (`keys` sorted, ints)."""
    if not len(keys):
        return np.full(len(x), missing, dtype=values.dtype)
    if 0 <= keys[0] and keys[-1] < 2**24:  # small ids (the usual): a table
        table = np.full(int(keys[-1]) + 1, missing, dtype=values.dtype)
        table[keys] = values
        inside = (x >= 0) & (x <= keys[-1])
        return (
            table[np.where(inside, x, 0)] if inside.all() else np.where(inside, table[np.where(inside, x, 0)], missing)
        )
    at = np.clip(np.searchsorted(keys, x), 0, len(keys) - 1)
    return np.where(keys[at] == x, values[at], missing).astype(values.dtype)


def _missing(v):
    try:
        return v is None or bool(pd.isna(v))
    except (TypeError, ValueError):
        return False


def _plain(v):
    """numpy scalars as Python values."""
    return v.item() if isinstance(v, np.generic) else v


def _program_id(value):
    """A `program_id` stat as an int, None where it is not one (a damaged or odd file may hold
    a string, a NaN, bytes)."""
    if isinstance(value, (bool, np.bool_)):
        return None
    if isinstance(value, (int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return int(value) if np.isfinite(value) and float(value).is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"-?\d{1,20}", value.strip()):
        return int(value)
    return None


def _xla_context(plane, t, line, src, name, stats):
    """The HLO op, module (`name(program_id)`) and program id of an event, where known."""
    op, module, program = stats.get("hlo_op"), stats.get("hlo_module"), _program_id(stats.get("program_id"))
    if t.name == XLA_OPS_LINE and plane.name.startswith(TPU_PLANE_PREFIX):
        op = op or name
        modules = plane.line(XLA_MODULES_LINE)
        if modules is not None and len(modules):
            s = int(line.start_ps[src])
            i = int(np.searchsorted(modules.start_ps, s, side="right")) - 1
            if i >= 0 and modules.start_ps[i] + modules.event_duration_ps[i] > s:
                module = str(modules.names()[i])
    elif t.name == XLA_MODULES_LINE:
        module = module or name
    if module is not None:
        m = re.fullmatch(r"(.*)\((\d+)\)", str(module))
        if m:
            program = program if program is not None else int(m.group(2))
        elif program is not None:
            module = f"{module}({program})"
    return {
        "hlo_op": None if op is None else str(op),
        "program": None if module is None else str(module),
        "program_id": program,
    }
