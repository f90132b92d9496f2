"""`BokehWidget.to_html`: a self-contained page (no URL, no kernel) holding the current view:
the state, the last data sent per source, the x range shown; names escaped. No browser here
(tests/browser/test_export.py opens the pages)."""

import base64
import json
import pathlib
import re
import shutil

import numpy as np
import pytest

import xprof_widgets as xw
from xprof_widgets.widgets._bokeh import BOKEH_JS, WIDGET_JS, BokehWidget
from xprof_widgets.widgets._export import script_block

NAUGHTY = "<img src=x onerror=alert(1)>"
BLOCK = re.compile(r'<script type="text/plain" id="([^"]+)" data-encoding="(text|base64)">(.*?)</script>', re.S)


def page_data(page):
    """The JSON the page runs from (figures, html, ranges, pushes)."""
    m = re.search(r'<script type="application/json" id="xprof-export-data">(.*?)</script>', page, re.S)
    return json.loads(m.group(1))


def blocks(page):
    return {m.group(1): (m.group(2), m.group(3)) for m in BLOCK.finditer(page)}


def pushed(data, source):
    """The recorded push for `source` as {column: numpy array or list}."""
    push = next(p for p in data["pushes"] if p["msg"]["source"] == source)
    out = {}
    for column in push["msg"]["columns"]:
        if "buffer" in column:
            raw = base64.b64decode(push["buffers"][column["buffer"]])
            out[column["name"]] = np.frombuffer(raw, dtype=column["dtype"])
        else:
            out[column["name"]] = column["values"]
    return push["msg"]["mode"], out


@pytest.fixture(scope="module")
def viewer_page():
    w = xw.MemoryViewerWidget(xw.sample_run())
    w.select_buffer("dot.1")
    w.on_hover("by_order", 0, "buffers")  # the hovered buffer's lifespan, pushed to the heap chart
    return w, w.to_html()


def test_page_is_self_contained(viewer_page):
    w, page = viewer_page
    assert page.startswith("<!DOCTYPE html>") and '<meta charset="utf-8">' in page
    found = blocks(page)
    # The front end and BokehJS are inline, byte for byte the package's own files.
    assert found["xprof-export-widget"] == ("text", WIDGET_JS.read_text())
    assert found["xprof-export-bokeh"] == ("text", BOKEH_JS.read_text())
    # Outside those two files (which only name URLs: SVG namespaces, help links), the page names none,
    # loads nothing from anywhere (no src / href attributes, no @import, no url()).
    rest = BLOCK.sub("", page)
    rest = re.sub(r'"data":"[A-Za-z0-9+/=]*"', '""', rest)  # Bokeh's base64 arrays may hold "//f"
    assert not re.search(r"https?:|//[a-z]", rest, re.I), re.search(r".{40}https?:.{40}", rest)
    assert not re.search(r"\s(src|href)=|@import|(?<![\w.])url\(", rest, re.I)
    # The state is the widget's: figures and html, the selection; the banner says what it is.
    data = page_data(page)
    assert data["state"]["html"] == w.html
    assert data["state"]["figures"] == json.loads(json.dumps(w.figures))  # (tuples become lists)
    assert data["state"]["selected"] == w.selected and w.selected
    assert data["state"]["status"] == ""  # the page's front end reports ready itself
    assert 'data-testid="export-banner">Static export of <b>MemoryViewerWidget</b>' in page
    assert "no kernel: zoom/pan work, new data does not load" in page
    # The size: the two files plus the state (figures, html) and a few bytes of data.
    overhead = len(page) - WIDGET_JS.stat().st_size - BOKEH_JS.stat().st_size
    assert overhead < 200_000, overhead


def test_page_holds_the_last_push(viewer_page):
    w, page = viewer_page
    mode, columns = pushed(page_data(page), "lifespan")
    assert mode == "replace"
    assert columns["left"].tolist() == w._lifespan(0)["left"].tolist()
    assert columns["top"].tolist() == pytest.approx(w._lifespan(0)["top"].tolist())
    assert len(columns["left"]) == 1


class Pusher(BokehWidget):
    pass


def test_recording_copies_buffers_and_merges_updates():
    w = Pusher()
    x = np.arange(5, dtype=np.float64)
    w.push_columns("s", {"x": x, "name": ["a", "b", "c", "d", "e"]})
    x[:] = -1  # the caller reuses its array: the page keeps what was sent
    w.push_columns("s", {"y": np.ones(5, np.int64)}, mode="update")
    w.push_columns("t", {"v": np.zeros(2, np.float32)}, mode="update")
    w.push_columns("t", {"w": np.ones(2, np.float32)}, mode="update")
    data = page_data(w.to_html())
    assert [p["msg"]["source"] for p in data["pushes"]] == ["s", "t"]  # in the order last sent
    mode, s = pushed(data, "s")
    assert mode == "replace"
    assert s["x"].tolist() == [0, 1, 2, 3, 4] and s["name"] == list("abcde") and s["y"].tolist() == [1] * 5
    mode, t = pushed(data, "t")
    assert mode == "update" and set(t) == {"v", "w"}  # merged into the figure's own data in the page
    # Replacing drops the columns sent before.
    w.push_columns("s", {"z": np.arange(3)})
    mode, s = pushed(page_data(w.to_html()), "s")
    assert set(s) == {"z"}


def test_new_figures_forget_data_sent_to_the_old_ones(viewer_page):
    w = xw.MemoryViewerWidget(xw.sample_run())
    w.on_hover("by_order", 0, "buffers")
    assert [p["msg"]["source"] for p in page_data(w.to_html())["pushes"]] == ["lifespan"]
    w.module = "jit__normal(16)"  # new figures in every view: the lifespan pushed before is gone
    assert page_data(w.to_html())["pushes"] == []


def view_request(w, x_start, x_end, width_px=1000):
    """What the page sends when the trace's x range changes, answered as the comm would."""
    sent = []
    w.send = lambda content, buffers=None: sent.append(content)
    w._handle_message(
        w,
        {
            "type": "request",
            "id": 1,
            "view": "v",
            "kind": "view",
            "params": {
                "figure": "timeline",
                "x_start": x_start,
                "x_end": x_end,
                "y_start": None,
                "y_end": None,
                "width_px": width_px,
            },
        },
        [],
    )
    del w.send
    return next(c for c in sent if c["type"] == "reply")


def test_trace_viewer_page_holds_the_window_a_view_asked_for():
    w = xw.TraceViewerWidget(xw.sample_run())
    reply = view_request(w, 300.0, 320.0)
    assert reply["source"] == "events" and "error" not in reply
    data = page_data(w.to_html())
    assert data["ranges"] == [{"figure": "timeline", "start": 300.0, "end": 320.0}]
    mode, boxes = pushed(data, "events")
    assert len(boxes["x0"]) == reply["content"]["boxes"] > 0
    assert boxes["x1"].max() >= 300.0 and boxes["x0"].min() <= 320.0
    # Every source a view fills: boxes, labels, and the view's flow arrows with their note
    # (empty while "Flows" is off).
    assert {p["msg"]["source"] for p in data["pushes"]} == {"events", "labels", "flows", "flow_note"}


def test_trace_viewer_range_set_from_python_is_computed_for_the_page():
    w = xw.TraceViewerWidget(xw.sample_run())
    start = w.origin_ps + 300 * 10**9
    w.show_range(start, start + 20 * 10**9)  # no view answered: to_html asks on_request itself
    data = page_data(w.to_html())
    assert data["ranges"] == [{"figure": "timeline", "start": 300.0, "end": 320.0}]
    _, boxes = pushed(data, "events")
    expected = w.trace.query(start, start + 20 * 10**9, 1200, tracks=list(w._offset))
    assert len(boxes["x0"]) == len(expected) > 0
    assert w.window_ps == [start, start + 20 * 10**9]


def test_names_from_the_profile_are_escaped(tmp_path):
    source = pathlib.Path(next(iter(xw.sample_run().files.values())))
    run_dir = tmp_path / "plugins" / "profile" / NAUGHTY
    run_dir.mkdir(parents=True)
    shutil.copy(source, run_dir / source.name)
    run = xw.load_run(run_dir)
    assert run.name == NAUGHTY
    page = xw.MemoryViewerWidget(run).to_html()
    assert NAUGHTY not in page and "<img" not in page
    escaped = "&lt;img src=x onerror=alert(1)&gt;"
    assert f"<title>MemoryViewerWidget &#8212; run {escaped}</title>" in page
    assert f"&mdash; run {escaped} &mdash; no kernel" in page
    # A title passed in is escaped too.
    page = xw.OverviewWidget(run).to_html(title="</title><script>alert(1)</script>")
    assert "<title>&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;</title>" in page
    assert page.count("<script") == 4  # data, widget.js, bokeh.js, the loader


def test_script_block_keeps_any_bytes():
    for data in (b"let a = '</script>';", b"x = 1 <!-- 2", b"<SCRIPT>", b"\x00\xff", b"a\r\nb"):
        block = script_block("b", data)
        _, encoding, text = BLOCK.match(block).groups()
        assert encoding == "base64" and base64.b64decode(text) == data
    assert script_block("b", b"if (a < b) f();") == (
        '<script type="text/plain" id="b" data-encoding="text">if (a < b) f();</script>'
    )


def test_to_html_writes_a_file_and_returns_its_path(tmp_path):
    w = xw.OverviewWidget(xw.sample_run())
    path = w.to_html(tmp_path / "overview.html")
    assert isinstance(path, pathlib.Path) and path == tmp_path / "overview.html"
    written = path.read_text(encoding="utf-8")
    assert page_data(written) == page_data(w.to_html())
    assert written.isascii()


def test_compare_widget_exports_with_both_run_names():
    from xprof_widgets.widgets.compare import CompareWidget

    run = xw.sample_run()
    page = CompareWidget(run, run).to_html()
    assert f"<title>CompareWidget &#8212; {run.name} vs {run.name}</title>" in page
    assert page_data(page)["state"]["figures"].keys() == {"steps"}
