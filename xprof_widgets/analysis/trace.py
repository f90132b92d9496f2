"""The trace model behind the trace viewer: tracks, rows, and bounded window queries.

A *track* is one line of a plane (a device's "XLA Ops", a host thread); its
*rows* are the nesting depths inside it (an event's parent is the innermost
earlier event that contains it, `grouping._prev_enclosing`). Sections are
planes: devices first (by name), then the host.

`Trace.query(start, end, resolution)` answers what to draw for a window at
that many pixels across, with work and output bounded by pixels x rows, not
by events:

* per row, events are sorted by start; a running maximum of their ends makes
  "overlaps the window" two binary searches;
* every event at least one pixel long comes back on its own: a block index
  (the longest duration per block of `BLOCK` events) finds them, scanning
  only blocks whose longest event is long enough;
* the shorter events are counted per pixel by binary search of the pixel
  edges; each pixel that has any becomes one merged box with its count and
  its dominant name (the most frequent among up to 8 evenly spaced events in
  it), so nothing disappears; neighbouring such pixels of a row become one
  box.

Times are absolute picoseconds, as in the file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd


BLOCK = 64  # events per block of the long-event index
SAMPLES = 8  # events looked at per merged box to name it
QUERY_COLUMNS = ["track", "row", "start_ps", "end_ps", "count", "index", "name"]


def _depths(start, end):
    """Nesting depth of each event of a line sorted by start, longer first at equal starts (0 = top).

    An event's depth is the number of earlier events still open when it
    starts (ending after its start): for nested events, its ancestors.
    Counted for all events at once: i minus the events that ended by then
    (one binary search into the sorted ends), less zero-length events at the
    same start that come after it, which the search also counts.
    """
    n = len(start)
    closed = np.searchsorted(np.sort(end), start, side="right")
    # Events at index >= i with end <= start[i] are zero-length ones starting at start[i].
    zero = end == start
    later_zero = np.zeros(n, np.int64)
    if zero.any():
        key = start[zero]
        pos = np.flatnonzero(zero)
        total_at = np.searchsorted(key, start, side="right") - np.searchsorted(key, start, side="left")
        before = np.searchsorted(pos, np.arange(n), side="left")  # zero-length events before i
        before_at = before - np.searchsorted(key, start, side="left")  # ... of them at start[i]
        later_zero = total_at - before_at
    depth = np.arange(n) - (closed - later_zero)
    return np.maximum(depth, 0).astype(np.int32)


@dataclass
class _Row:
    track: int
    depth: int
    index: np.ndarray  # event indices in the line, by start
    start: np.ndarray
    end_max: np.ndarray  # running max of ends: monotone, for binary search
    end: np.ndarray
    block_max: np.ndarray  # longest duration per BLOCK events


class Trace:
    """Tracks and window queries of one host's profile (see the module doc).

    `tracks`: DataFrame, one row a track: section (plane name), name (line
    title), plane, line (indices in the file), events, rows (nesting depths),
    in display order (its index is the track id). `start_ps`, `end_ps`: the
    profile's extent. `event_count`: events in all tracks.
    """

    def __init__(self, space):
        self.space = space
        planes = [p for p in space.planes if p.name != "/host:metadata" and any(len(ln) for ln in p.lines)]
        planes.sort(key=lambda p: (not p.name.startswith("/device:"), p.name))
        rows, tracks = [], []
        lo, hi = None, None
        for plane in planes:
            pi = space.planes.index(plane)
            for li, line in enumerate(plane.lines):
                n = len(line)
                if n == 0:
                    continue
                start = line.start_ps
                end = start + line.event_duration_ps
                order = None
                step = np.diff(start)
                if (step < 0).any() or ((step == 0) & (end[1:] > end[:-1])).any():
                    # Writers sort lines by start; nesting wants the longer first at equal starts.
                    order = np.lexsort((start - end, start))
                    start, end = start[order], end[order]
                depth = _depths(start, end)
                track = len(tracks)
                tracks.append({"section": plane.name, "name": line.title, "plane": pi, "line": li,
                               "events": n, "rows": int(depth.max()) + 1})
                lo = start.min() if lo is None else min(lo, start.min())
                hi = end.max() if hi is None else max(hi, end.max())
                # Stable (radix for 16-bit keys): start order is kept inside a depth.
                by_depth = np.argsort(depth.astype(np.int16 if depth.max() < 2**15 else np.int32), kind="stable")
                cuts = np.searchsorted(depth[by_depth], np.arange(int(depth.max()) + 2))
                for d in range(int(depth.max()) + 1):
                    sel = by_depth[cuts[d]:cuts[d + 1]]
                    s, e = start[sel], end[sel]
                    dur = e - s
                    pad = (-len(dur)) % BLOCK
                    bm = np.concatenate([dur, np.zeros(pad, dur.dtype)]).reshape(-1, BLOCK).max(axis=1)
                    idx = sel if order is None else order[sel]
                    rows.append(_Row(track, d, idx.astype(np.int32 if n < 2**31 else np.int64), s,
                                     np.maximum.accumulate(e), e, bm))
        self.tracks = pd.DataFrame(tracks, columns=["section", "name", "plane", "line", "events", "rows"])
        self._rows = rows
        self._rows_of = {}
        for k, r in enumerate(rows):
            self._rows_of.setdefault(r.track, []).append(k)
        self.start_ps = int(lo) if lo is not None else 0
        self.end_ps = int(hi) if hi is not None else 0
        self.event_count = int(self.tracks["events"].sum()) if len(self.tracks) else 0
        self._lines = [space.planes[p].lines[li] for p, li in zip(self.tracks["plane"], self.tracks["line"])]

    # ---- lines and names ----------------------------------------------------

    def _line(self, track):
        return self._lines[int(track)]

    def _names(self, track, index):
        line = self._line(track)
        cat = line.plane.names_for(line.metadata_id[index])
        return np.append(np.asarray(cat.categories, dtype=object), "")[cat.codes]  # code -1: ""

    # ---- the window query ------------------------------------------------------

    def query(self, start_ps=None, end_ps=None, resolution=2000, tracks=None):
        """Boxes to draw for [start_ps, end_ps) at `resolution` pixels across (see module doc).

        A DataFrame with QUERY_COLUMNS: track, row (depth), start_ps, end_ps,
        count (1 for an event, n for a merged box), index (the event's index
        in its line; -1 for merged boxes) and name.
        """
        start = self.start_ps if start_ps is None else int(start_ps)
        end = self.end_ps + 1 if end_ps is None else int(end_ps)
        end = max(end, start + 1)
        res = max(int(resolution), 1)
        px = (end - start) / res
        edges = start + (np.arange(res + 1) * px).astype(np.int64)
        wanted = range(len(self.tracks)) if tracks is None else tracks
        parts = []
        for t in wanted:
            mine = [p for p in (self._query_row(self._rows[k], start, end, px, edges)
                                for k in self._rows_of.get(int(t), [])) if p is not None]
            if mine:  # names of a track in one lookup
                src = np.concatenate([p.pop("name_src") for p in mine])
                names = self._names(t, src)
                at = 0
                for p in mine:
                    p["name"] = names[at:at + len(p["track"])]
                    at += len(p["track"])
                parts.extend(mine)
        if not parts:
            return pd.DataFrame({c: pd.Series(dtype=object if c == "name" else np.int64) for c in QUERY_COLUMNS})
        cols = {c: np.concatenate([p[c] for p in parts]) for c in QUERY_COLUMNS if c != "name"}
        names = np.empty(len(cols["track"]), dtype=object)
        at = 0
        for p in parts:  # names per track, in one lookup each
            names[at:at + len(p["track"])] = p["name"]
            at += len(p["track"])
        cols["name"] = names
        return pd.DataFrame(cols, columns=QUERY_COLUMNS)

    def _query_row(self, r, start, end, px, edges):
        lo = int(np.searchsorted(r.end_max, start, side="left"))  # events ending at the window start count
        hi = int(np.searchsorted(r.start, end, side="left"))
        if hi <= lo:
            return None
        # Long events (>= 1 px): only blocks whose longest event is long enough.
        b0, b1 = lo // BLOCK, (hi - 1) // BLOCK + 1
        blocks = b0 + np.flatnonzero(r.block_max[b0:b1] >= px)
        if len(blocks):
            cand = (blocks[:, None] * BLOCK + np.arange(BLOCK)).ravel()
            cand = cand[(cand >= lo) & (cand < hi)]
            long_ = cand[(r.end[cand] - r.start[cand]) >= px]
            long_ = long_[r.end[long_] > start]
        else:
            long_ = np.zeros(0, np.int64)
        # Short events: counted per pixel by where they start (those starting
        # before the window go to pixel 0).
        first = np.searchsorted(r.start, edges[1:-1], side="left")
        bounds = np.concatenate([[lo], np.clip(first, lo, hi), [hi]])
        counts = np.diff(bounds)
        # Events starting before the window that ended before it (a partly
        # overlapping event at this depth keeps the running max of ends high)
        # are not in it: take them out of pixel 0.
        inside = int(np.searchsorted(r.start, start, side="left"))
        if inside > lo:
            counts[0] -= int(np.count_nonzero(r.end[lo:min(inside, hi)] < start))
        if len(long_):
            pix = np.clip(np.searchsorted(edges, r.start[long_], side="right") - 1, 0, len(counts) - 1)
            counts = counts - np.bincount(pix, minlength=len(counts))
        busy = np.flatnonzero(counts > 0)
        # A pixel whose only event is short and alone: send it as itself.
        a, b = bounds[busy], bounds[busy + 1]
        single = (b - a == 1) & (counts[busy] == 1)
        solo = a[single]
        merged = busy[~single]
        ma, mb = bounds[merged], bounds[merged + 1]
        m_start = np.maximum(r.start[ma], edges[merged])
        m_end = np.maximum(np.minimum(r.end_max[mb - 1], edges[merged + 1]), m_start + max(int(px), 1))
        # Dominant name: the most frequent among up to SAMPLES evenly spaced events.
        if len(merged):
            span = (mb - ma)[:, None]
            sample = ma[:, None] + (np.arange(SAMPLES)[None, :] * span) // SAMPLES
            mid = self._line(r.track).metadata_id[r.index[sample]]
            votes = (mid[:, :, None] == mid[:, None, :]).sum(axis=2)
            pick = sample[np.arange(len(merged)), votes.argmax(axis=1)]
        else:
            pick = np.zeros(0, np.int64)
        # Neighbouring merged pixels of a row become one box (count summed, the
        # busiest pixel's name): a dense stretch costs one box, not one per pixel.
        if len(merged) > 1:
            run_id = np.concatenate([[0], np.cumsum(np.diff(merged) != 1)])
            heads = np.flatnonzero(np.concatenate([[True], run_id[1:] != run_id[:-1]]))
            tails = np.concatenate([heads[1:], [len(merged)]]) - 1
            m_counts = counts[merged]
            busiest = np.lexsort((-m_counts, run_id))[heads]  # per run, its pixel with the most events
            m_start, m_end, pick = m_start[heads], m_end[tails], pick[busiest]
            merged_counts = np.add.reduceat(m_counts, heads)
        else:
            merged_counts = counts[merged]
        own = np.concatenate([long_, solo]).astype(np.int64)
        n_own, n_m = len(own), len(m_start)
        name_src = np.concatenate([own, pick]).astype(np.int64)
        return {
            "track": np.full(n_own + n_m, r.track, np.int64),
            "row": np.full(n_own + n_m, r.depth, np.int64),
            "start_ps": np.concatenate([r.start[own], m_start]),
            "end_ps": np.concatenate([r.end[own], m_end]),
            "count": np.concatenate([np.ones(n_own, np.int64), merged_counts]),
            "index": np.concatenate([r.index[own].astype(np.int64), np.full(n_m, -1, np.int64)]),
            "name_src": r.index[name_src],
        }

    # ---- details and search ----------------------------------------------------

    def event(self, track, index):
        """One event's details: name, start_ps, duration_ps, stats (all, decoded for it alone),
        section and track name, and the HLO op and program (module) it belongs to when known."""
        track, index = int(track), int(index)
        line = self._line(track)
        t = self.tracks.iloc[track]
        st = line.stats(events=[index])
        stats = {k: v for k, v in st.iloc[0].items() if not (v is None or (isinstance(v, float) and np.isnan(v))
                                                             or v is pd.NA)}
        name = str(line.plane.names_for(line.metadata_id[[index]]).astype(object)[0])
        start = int(line.start_ps[index])
        out = {"track": track, "index": index, "section": t.section, "track_name": t["name"], "name": name,
               "start_ps": start, "duration_ps": int(line.event_duration_ps[index]),
               "stats": {k: (v.item() if hasattr(v, "item") else v) for k, v in stats.items()},
               "hlo_op": None, "program": None}
        if "hlo_op" in stats:  # XLA on CPU/GPU: the thunk or kernel names its op and module
            out["hlo_op"] = str(stats["hlo_op"])
            module, pid = stats.get("hlo_module"), stats.get("program_id")
            if module is not None:
                out["program"] = f"{module}({pid})" if pid is not None else str(module)
        elif line.name == "XLA Ops":  # TPU: the event is the op; the module runs around it
            # Named by its HLO text ("%copy-done = f32[...] copy-done(...)") or by the op alone.
            out["hlo_op"] = name[1:].split(" = ", 1)[0] if name.startswith("%") else name
            modules = next((ln for ln in line.plane.lines if ln.name == "XLA Modules" and len(ln)), None)
            if modules is not None:
                k = int(np.searchsorted(modules.start_ps, start, side="right")) - 1
                if k >= 0 and modules.start_ps[k] + modules.event_duration_ps[k] >= start:
                    out["program"] = str(modules.plane.names_for(modules.metadata_id[[k]]).astype(object)[0])
        return out

    def search(self, pattern, regex=False):
        """Events whose name contains `pattern` (case-insensitive; a regex with `regex=True`).

        A DataFrame (track, index, start_ps, end_ps, name) sorted by start.
        """
        rx = re.compile(pattern if regex else re.escape(pattern), re.IGNORECASE)
        parts = []
        for track, t in enumerate(self.tracks.itertuples(index=False)):
            line = self.space.planes[t.plane].lines[t.line]
            md = line.plane.event_metadata
            ids = md["id"].to_numpy()[[bool(rx.search(str(n))) for n in md["name"]]]
            if not len(ids):
                continue
            idx = np.flatnonzero(np.isin(line.metadata_id, ids))
            if len(idx):
                parts.append(pd.DataFrame({
                    "track": track, "index": idx, "start_ps": line.start_ps[idx],
                    "end_ps": line.start_ps[idx] + line.event_duration_ps[idx],
                    "name": line.plane.names_for(line.metadata_id[idx]).astype(object),
                }))
        if not parts:
            return pd.DataFrame(columns=["track", "index", "start_ps", "end_ps", "name"])
        return pd.concat(parts, ignore_index=True).sort_values(["start_ps", "track"], kind="stable",
                                                                ignore_index=True)


def trace(run, host=None):
    """The Trace of `host` (default: the first), built once per host."""
    space = run.xspace(host)
    if "trace" not in space.cache:
        space.cache["trace"] = Trace(space)
    return space.cache["trace"]
