"""KernelStatsWidget, FrameworkOpStatsWidget and RooflineWidget from Python (no browser):
the table is the analysis' rows, sorting and filters, the op card after a click,
the sentence a run without data shows, escaping, the exported page."""

import html
import re

import numpy as np
import pandas as pd
import pytest
import traitlets

import xprof_widgets as xw
from xprof_widgets.analysis.core.records import GIBI_IN_GIGA
from xprof_widgets.widgets.framework_op_stats import FrameworkOpStatsWidget
from xprof_widgets.widgets.kernel_stats import KernelStatsWidget, kernel_hlo_ops, short_kernel_name
from xprof_widgets.widgets.roofline import RooflineWidget, roofs, source_text

from .conftest import PROFILES, corpus_run

HOSTILE = "<img src=x onerror=alert(1)>'\"&"


def _rows_shown(page_html, testid):
    """The data-row ids of a table's body rows, in page order."""
    table = re.search(rf'data-testid="{testid}".*?</table>', page_html, re.DOTALL).group(0)
    return [int(i) for i in re.findall(r'<tr data-row="(\d+)"', table)]


def _cells(page_html, testid, column):
    """The text of column number `column` of a table's body rows."""
    table = re.search(rf'data-testid="{testid}".*?</table>', page_html, re.DOTALL).group(0)
    body = table.split("<tbody>", 1)[1]
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.DOTALL)
    return [
        html.unescape(re.sub(r"<[^>]+>", "", re.findall(r"<td[^>]*>(.*?)</td>", r, re.DOTALL)[column])) for r in rows
    ]


# --- KernelStatsWidget -------------------------------------------------------------


@pytest.fixture(scope="module")
def gpu_run():
    return xw.sample_run("gpu")


def test_kernel_table_is_the_analysis(gpu_run):
    w = KernelStatsWidget(gpu_run)
    expected = gpu_run.kernel_stats()
    assert len(expected) == 12
    # XProf's order (total duration, longest first) and every column of the analysis.
    pd.testing.assert_frame_equal(w.table[expected.columns].reset_index(drop=True), expected)
    assert list(w.table["rank"]) == list(range(1, 13))
    assert _rows_shown(w.html, "kernel-table") == list(range(12))
    assert 'data-rows="12"' in w.html
    # The total of the first row on the page, as the analysis has it.
    # Name, op, occurrences and durations first: visible without scrolling at 1,400 px.
    assert _cells(w.html, "kernel-table", 4)[0] == f"{expected['total_duration_us'][0]:,.3f}"
    # The chart: the (up to) 20 longest kernels, longest on top.
    bars = w.figures["kernels"]
    assert bars  # a json_item
    assert f"{w.stats['total_duration_us'].sum() / 1e3:,.3f} ms" in w.html


def test_kernel_sorting_filters_and_top_n(gpu_run):
    w = KernelStatsWidget(gpu_run)
    s = gpu_run.kernel_stats()
    # A header click sorts on that column (numbers largest first), a second click flips it.
    w.on_request("sort", {"column": "occurrences"})
    assert w.sort_by == "occurrences" and w.sort_descending
    assert list(w.table["occurrences"]) == sorted(s["occurrences"], reverse=True)
    assert [int(c.replace(",", "")) for c in _cells(w.html, "kernel-table", 3)] == sorted(
        s["occurrences"], reverse=True
    )
    w.on_request("sort", {"column": "occurrences"})
    assert not w.sort_descending and list(w.table["occurrences"]) == sorted(s["occurrences"])
    # Text sorts A-Z first.
    w.sort_by = "kernel_name"
    assert not w.sort_descending
    assert list(w.table["kernel_name"]) == sorted(s["kernel_name"], key=str.lower)
    # Filters by kernel name and op name (any case); the chart follows.
    w.on_request("name_filter", {"value": "WRAPPED"})
    assert set(w.table["kernel_name"]) == {"wrapped_broadcast.kd"}
    assert len(w.table) == int((s["kernel_name"] == "wrapped_broadcast.kd").sum())
    assert f'data-rows="{len(w.table)}"' in w.html and "of 12 kernels match" in w.html
    w.name_filter = ""
    w.on_request("op_filter", {"value": "dot_general"})
    assert len(w.table) == int(s["op_name"].str.contains("dot_general").sum()) and len(w.table) > 0
    w.op_filter = "no such op"
    assert w.table.empty and "No kernel matches" in w.html and w.figures == {}
    w.op_filter = ""
    assert set(w.figures) == {"kernels"}
    # Top N cuts the page, not the table.
    w.on_request("top_n", {"value": "10"})
    assert w.top_n == 10 and len(_rows_shown(w.html, "kernel-table")) == 10 and len(w.table) == 12
    with pytest.raises(traitlets.TraitError):
        w.sort_by = "nope"


def test_kernel_click_shows_its_hlo_op_and_its_kernels(gpu_run):
    w = KernelStatsWidget(gpu_run)
    # What the page sends on a click of the first row (or its bar).
    w.selected = {"figure": "kernels", "source": "kernels", "index": 0, "id": 0}
    k = w.selected_kernel
    assert k["id"] == 0 and k["kernel_name"] == gpu_run.kernel_stats()["kernel_name"][0]
    op = w.selected_op
    # The kernel ran for custom-call.1 of program 49 (its launches' hlo_op / program_id).
    hlo = kernel_hlo_ops(gpu_run)
    mine = hlo[hlo["kernel_name"] == k["kernel_name"]]
    assert list(zip(mine["program_id"], mine["hlo_op"])) == [(49, "custom-call.1")]
    profile = gpu_run.op_profile(group_by="program", top_n=10**9)
    node = next(n for n, _d, _p in profile.root.walk() if n.kind == "op" and n.program_id == 49)
    assert op["name"] == "custom-call.1" and op["program"] == "jit_dot(49)"
    assert op["occurrences"] == node.occurrences and op["total_time_ps"] == node.time_ps
    assert 'data-testid="op-card-name">custom-call.1<' in w.html
    assert 'data-testid="op-kernels" data-rows="1"' in w.html
    assert re.search(r'<tr data-row="0" class="sel"', w.html)
    # Another row by id from Python; clearing the selection clears the card.
    w.select_kernel(5)
    assert w.selected == {"figure": "kernels", "source": "kernels", "id": 5}
    assert w.selected_op["name"] == "wrapped_broadcast"
    w.selected = {}
    assert w.selected_kernel == {} and w.selected_op == {} and "Click a kernel" in w.html
    with pytest.raises(KeyError):
        w.select_kernel(99)


def test_kernel_without_hlo_op_falls_back_to_framework_op():
    """TensorFlow's kernels name no HLO op and these no op at all: the card says so."""
    run = corpus_run("tf_gpu_multiworker")
    w = KernelStatsWidget(run)
    assert len(w.table) == len(run.kernel_stats()) == 30
    w.select_kernel(0)
    assert w.selected_op == {} and 'data-testid="no-op"' in w.html
    assert w.selected_kernel["kernel_name"].startswith("void tensorflow::functor::FillPhiloxRandom")


def test_kernel_stats_without_gpu_says_why():
    run = xw.sample_run()
    w = KernelStatsWidget(run)
    reason = run.kernel_stats().attrs["reason"]
    assert w.html == xw.widgets._html.notice(f"No kernel stats for run {run.name}: {reason}.")
    assert "no GPU plane" in w.html and w.figures == {}
    assert "No kernel stats" in w.to_html()


def test_kernel_names_are_escaped(gpu_run):
    w = KernelStatsWidget(gpu_run)
    w.stats.loc[0, "kernel_name"] = HOSTILE
    w.stats.loc[0, "op_name"] = HOSTILE
    w.name_filter = "img"  # redraws chart and table
    assert len(w.table) == 1
    w.select_kernel(0)
    assert HOSTILE not in w.html and "<img" not in w.html
    assert html.escape(HOSTILE) in w.html
    assert short_kernel_name("void " + "a" * 100).startswith("aaa") and len(short_kernel_name("a" * 100)) == 46


def test_kernel_stats_page_exports(gpu_run, tmp_path):
    w = KernelStatsWidget(gpu_run)
    w.select_kernel(1)
    path = w.to_html(tmp_path / "kernels.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") or page.lstrip().lower().startswith("<!doctype html>")
    assert "KernelStatsWidget" in page and gpu_run.name in page and len(page) > 1_000_000


# --- FrameworkOpStatsWidget ----------------------------------------------------------


def test_framework_op_table_is_the_analysis():
    run = corpus_run("tf_keras_cpu")
    w = FrameworkOpStatsWidget(run)
    # IDLE left out by default, as XProf does: the analysis with exclude_idle=True.
    expected = run.framework_op_stats(exclude_idle=True)
    assert w.exclude_idle and "IDLE" not in set(w.table["type"])
    pd.testing.assert_frame_equal(w.table.reset_index(drop=True), expected.reset_index(drop=True))
    assert _rows_shown(w.html, "op-table") == list(range(min(len(expected), 100)))
    assert _cells(w.html, "op-table", 3)[:3] == list(expected["operation"][:3])
    # CPU only: a host pie, no device pie (a sentence instead).
    assert set(w.figures) == {"host_types"} and 'data-testid="device_types-none"' in w.html
    assert "Include IDLE</label>" in w.html
    # With IDLE: recomputed, as the analysis with its default.
    w.on_request("exclude_idle", {"value": True})  # the checkbox reads "Include IDLE"
    assert not w.exclude_idle and "IDLE" in set(w.table["type"])
    pd.testing.assert_frame_equal(w.stats, run.framework_op_stats())
    w.on_request("exclude_idle", {"value": False})
    assert w.exclude_idle


def test_framework_op_sorting_and_filters():
    run = corpus_run("tf_gpu_multiworker")
    # IDLE in: this run's only device op is IDLE (its kernels name no op).
    w = FrameworkOpStatsWidget(run, exclude_idle=False)
    s = run.framework_op_stats()
    assert set(w.figures) == {"device_types", "host_types"}
    w.on_request("sort", {"column": "occurrences"})
    assert list(w.table["occurrences"]) == sorted(s["occurrences"], reverse=True)
    w.on_request("sort", {"column": "type"})
    assert list(w.table["type"]) == sorted(s["type"], key=str.lower)
    w.on_request("place", {"value": "Device"})
    assert set(w.table["host_or_device"]) == {"Device"}
    w.on_request("place", {"value": "All"})
    w.on_request("type_filter", {"value": "dataset"})
    assert len(w.table) == int(s["type"].str.lower().str.contains("dataset").sum()) > 0
    w.on_request("name_filter", {"value": "Iterator::Prefetch"})
    assert set(w.table["operation"]) == {"Iterator::Prefetch", "Iterator::Prefetch::Generator"}
    assert 'data-testid="clear-filters"' in w.html
    w.on_request("clear", {})
    assert (w.place, w.type_filter, w.name_filter) == ("All", "", "") and len(w.table) == len(s)
    w.top_n = 25
    assert len(_rows_shown(w.html, "op-table")) == 25 and "the first 25 shown" in w.html
    with pytest.raises(traitlets.TraitError):
        w.place = "Moon"


def test_framework_op_wedge_click_filters_its_type():
    run = xw.sample_run("gpu")
    w = FrameworkOpStatsWidget(run)
    device = run.framework_op_stats(exclude_idle=True)
    device = device[device["host_or_device"] == "Device"]
    by_type = device.groupby("type")["total_self_time"].sum().sort_values(ascending=False)
    # Wedge 1 of the device pie is the second-largest type.
    w.selected = {"figure": "device_types", "source": "device_types", "index": 1, "id": 1}
    assert (w.place, w.type_filter) == ("Device", by_type.index[1])
    assert set(w.table["type"]) == {by_type.index[1]}


def test_framework_op_stats_without_ops_says_why():
    run = xw.sample_run()
    w = FrameworkOpStatsWidget(run, exclude_idle=True)
    reason = run.framework_op_stats(exclude_idle=True).attrs["reason"]
    assert reason and esc_in(reason, w.html) and "No framework op stats" in w.html
    assert w.figures == {} and 'data-testid="include-idle"' in w.html  # the toggle to bring IDLE back
    w.exclude_idle = False
    assert len(w.table) == 1 and 'data-testid="host_types-none"' in w.html


def esc_in(text, page):
    return html.escape(text) in page


def test_framework_op_names_are_escaped():
    w = FrameworkOpStatsWidget(PROFILES / "tf_keras_cpu")
    w.stats.loc[1, "operation"] = HOSTILE
    w.stats.loc[1, "type"] = HOSTILE
    w.set_figures(w._pies())
    w.name_filter = "img"
    assert len(w.table) == 1
    assert "<img" not in w.html and html.escape(HOSTILE) in w.html
    assert len(w.to_html()) > 1_000_000


# --- RooflineWidget ---------------------------------------------------------------------


def test_roofline_rows_are_the_analysis():
    run = corpus_run("amd_jax_elementwise_mi300")
    w = RooflineWidget(run)
    model = run.roofline_model()
    total = model[(model["step"] == "Total") & model["include_infeed_outfeed"].astype(bool)]
    assert list(w.rows.index) == list(total.index)
    pd.testing.assert_frame_equal(w.rows[model.columns], total)
    assert _rows_shown(w.html, "roofline-table") == list(total.index)
    assert _cells(w.html, "roofline-table", 2) == list(total["operation"])
    # Every row has FLOPs and bytes here: all are points, none left out.
    assert len(w.points) == len(total) == 14 and 'data-testid="left-out"' not in w.html
    # The roofs come from the model's attrs: the peak and HBM and SHM/L1 to their ridges.
    peak, memories = roofs(model.attrs)
    assert peak == model.attrs["peak_flop_rate"]
    assert [m[0] for m in memories] == ["HBM", "SHM/L1"]
    assert memories[0][2] == pytest.approx(model.attrs["hbm_ridge_point"])
    assert memories[1][2] == pytest.approx(model.attrs["vmem_write_ridge_point"])
    assert 'data-stat="hbm_ridge_point">491.08 FLOP/byte<' in w.html
    # The chart: the HBM roof ends at its ridge on the peak.
    item = w.figures["roofline"]
    (lines,) = [
        r for r in item["doc"]["roots"][0]["attributes"]["renderers"] if r["attributes"]["glyph"]["name"] == "Segment"
    ]
    data = dict(lines["attributes"]["data_source"]["attributes"]["data"]["entries"])
    assert [label.split()[0] for label in data["label"]] == ["HBM", "SHM/L1", "Peak"]  # one segment each
    x0, y0, x1, y1 = (_decode(data[k]) for k in ("x0", "y0", "x1", "y1"))
    assert x1[0] == pytest.approx(model.attrs["hbm_ridge_point"])
    assert y1[0] == pytest.approx(peak)
    assert y0[0] == pytest.approx(model.attrs["peak_hbm_bw"] * GIBI_IN_GIGA * x0[0])
    assert x0[2] == pytest.approx(min(m[2] for m in memories)) and y0[2] == y1[2] == pytest.approx(peak)


def _decode(value):
    """A column of a json_item: a list, or Bokeh's base64 ndarray (gzipped, as Bokeh 3.9
    writes it, or not)."""
    if isinstance(value, list):
        return value
    import base64
    import gzip

    array = value["array"]
    data = base64.b64decode(array["data"] if isinstance(array, dict) else array)
    data = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    return list(np.frombuffer(data, dtype=value.get("dtype", "float64")))


def test_roofline_zero_points_are_left_out_and_counted():
    run = xw.sample_run("gpu")
    w = RooflineWidget(run)
    rows = w.rows
    drawn = (rows["operational_intensity"] > 0) & (rows["measured_flop_rate"] > 0)
    assert int(drawn.sum()) == len(w.points) == 2  # the program and the one GEMM fusion with FLOPs
    left = len(rows) - len(w.points)
    assert f'data-testid="left-out" data-count="{left}">{left:,} of {len(rows):,} rows are not drawn' in w.html
    # What the chart gets: positive x and y only, so the log axes hold.
    renderers = w._chart(w.points)["doc"]["roots"][0]["attributes"]["renderers"]
    (src,) = [
        r["attributes"]["data_source"]["attributes"]
        for r in renderers
        if r["attributes"]["data_source"]["attributes"].get("name") == "ops"
    ]
    data = dict(src["data"]["entries"])
    assert (np.asarray(_decode(data["x"])) > 0).all() and (np.asarray(_decode(data["y"])) > 0).all()


def test_roofline_filters_steps_and_sorting():
    run = corpus_run("tpu_v6e_inference")
    w = RooflineWidget(run)
    model = run.roofline_model()
    assert w.steps == ["Total", "Average"] and w.step == "Total"
    w.on_request("category", {"value": "copy-done"})
    assert set(w.rows["category"]) == {"copy-done"} and len(w.rows) == 6
    w.on_request("step", {"value": "Average"})
    # XProf's per-step rows are the program only: the category goes back to All, no chart.
    assert w.category == "All" and list(w.rows["category"]) == ["Program"]
    assert w.figures == {} and 'data-testid="no-points"' in w.html
    w.step = "Total"
    w.on_request("include_infeed_outfeed", {"value": False})
    expected = model[(model["step"] == "Total") & ~model["include_infeed_outfeed"].astype(bool)]
    assert list(w.rows.index) == list(expected.index)
    w.include_infeed_outfeed = True
    w.on_request("sort", {"column": "measured_flop_rate"})
    assert list(w.table["measured_flop_rate"]) == sorted(w.rows["measured_flop_rate"], reverse=True)
    w.on_request("name_filter", {"value": "fusion"})
    assert len(w.rows) == 3 and all("fusion" in n for n in w.rows["operation"])
    with pytest.raises(traitlets.TraitError):
        w.step = "7"


def test_roofline_click_shows_the_op_card():
    run = corpus_run("tpu_v6e_inference")
    w = RooflineWidget(run)
    row = w.rows[w.rows["operation"] == "broadcast_add_fusion"].index[0]
    # A tap on the point (what the page sends).
    w.selected = {"figure": "roofline", "source": "ops", "index": 2, "id": int(row)}
    op = w.selected_op
    profile = run.op_profile(group_by="program", top_n=10**9)
    node = next(n for n, _d, _p in profile.root.walk() if n.kind == "op" and n.name == "broadcast_add_fusion")
    assert op["id"] == row and op["name"] == "broadcast_add_fusion"
    assert op["total_time_ps"] == node.time_ps and op["occurrences"] == node.occurrences
    assert 'data-testid="op-card-name">broadcast_add_fusion<' in w.html
    assert 'data-testid="roofline-numbers"' in w.html
    assert f"{w.model.loc[row, 'operational_intensity']:,.3f} FLOP/byte" in w.html
    # The program row shows the whole profile.
    w.select_row(int(w.rows.index[0]))
    assert w.selected_op["name"] == "Program (the whole profile)"
    assert w.selected == {"figure": "roofline", "source": "ops", "id": int(w.rows.index[0])}
    # A filter that hides the selected row drops the selection.
    w.category = "copy-done"
    assert w.selected_op == {} and w.selected == {}


def test_roofline_without_device_says_why():
    run = xw.sample_run()
    w = RooflineWidget(run)
    reason = run.roofline_model().attrs["reason"]
    assert w.html == xw.widgets._html.notice(f"No roofline model for run {run.name}: {reason}.")
    assert w.figures == {} and "No roofline model" in w.to_html()


def test_roofline_with_unknown_peak_and_no_points():
    """Old TensorFlow GPU profile: no peak FLOP rate, no op with FLOPs: a sentence, not a chart."""
    w = RooflineWidget(PROFILES / "tf_gpu_multiworker")
    assert w.figures == {} and 'data-testid="no-peak"' in w.html and 'data-testid="no-points"' in w.html
    assert 'data-stat="peak_flop_rate">unknown<' in w.html


def test_roofline_names_are_escaped():
    w = RooflineWidget(xw.sample_run("gpu"))
    row = int(w.points.index[-1])
    w.model.loc[row, "operation"] = HOSTILE
    w.model.loc[row, "category"] = HOSTILE
    w.model.loc[row, "source"] = HOSTILE
    w._redraw()
    w.select_row(row)
    assert "<img" not in w.html and html.escape(HOSTILE) in w.html
    assert source_text("<div class='source-info-cell' title='a &lt;b&gt;'>x.py:3</div>") == "x.py:3"
    assert len(w.to_html()) > 1_000_000


# --- HloStatsWidget ------------------------------------------------------------------


def test_hlo_stats_table_is_the_analysis_with_its_charts(gpu_run):
    from xprof_widgets.widgets.hlo_stats import HloStatsWidget

    w = HloStatsWidget(gpu_run)
    expected = gpu_run.hlo_stats()
    assert len(expected) == 16
    # XProf's order (its rank) and every column of the analysis, times also in µs.
    pd.testing.assert_frame_equal(w.table[expected.columns].reset_index(drop=True), expected)
    assert list(w.table["total_time_us"]) == list(expected["total_time_ps"] / 1e6)
    assert _rows_shown(w.html, "hlo-table") == list(range(16))
    assert _cells(w.html, "hlo-table", 1)[:3] == list(expected["hlo_op_name"][:3])
    assert _cells(w.html, "hlo-table", 5)[0] == f"{expected['total_time_ps'][0] / 1e6:,.3f}"
    assert set(w.figures) == {"categories", "ops", "rates"}
    assert f"{expected['self_time_ps'].sum() / 1e9:,.3f} ms" in w.html
    # Sort on a header, filter by name and category; the charts follow the filters.
    w.on_request("sort", {"column": "self_time_us"})
    assert list(w.table["self_time_ps"]) == sorted(expected["self_time_ps"], reverse=True)
    w.on_request("category_filter", {"value": "LOOP"})
    assert set(w.table["category"]) == {c for c in expected["category"] if "loop" in c.lower()} != set()
    w.on_request("name_filter", {"value": "no such op"})
    assert w.table.empty and "No HLO op matches" in w.html and w.figures == {}
    w.name_filter = w.category_filter = ""
    assert set(w.figures) == {"categories", "ops", "rates"}


def test_hlo_stats_row_opens_the_op_card_with_the_graph_viewer_way(gpu_run):
    from xprof_widgets.widgets.hlo_stats import HloStatsWidget

    w = HloStatsWidget(gpu_run)
    row = w.stats.iloc[2]
    w.selected = {"figure": "ops", "source": "ops", "index": 0, "id": 2}  # a bar tapped
    assert w.selected_row["hlo_op_name"] == row["hlo_op_name"]
    assert w.selected_op["name"] == row["hlo_op_name"] and w.selected_op["program"] == row["program"]
    node_time = w.selected_op["total_time_ps"]
    assert node_time == pytest.approx(row["total_time_ps"])
    assert f'data-op-card="{row["hlo_op_name"]}"' in w.html and 'data-testid="graph-code"' in w.html
    assert '<tr data-row="2" class="sel"' in w.html  # its row, selected
    with pytest.raises(KeyError):
        w.select_row(99)


def test_hlo_stats_without_ops_says_why_and_names_are_escaped():
    from xprof_widgets.widgets.hlo_stats import HloStatsWidget

    w = HloStatsWidget(corpus_run("tf_keras_cpu"))
    assert "No HLO op stats" in w.html and w.figures == {}
    w = HloStatsWidget(xw.sample_run())  # JAX on CPU: XProf shows none; we do
    assert len(w.stats) > 10
    w.stats.loc[0, "hlo_op_name"] = "<img src=x onerror=alert(1)>"
    w.name_filter = "img"
    assert "<img src=x" not in w.html and "&lt;img src=x" in w.html


def test_columns_menu_hides_and_shows_table_columns(gpu_run):
    """The Columns menu of a table tool: a checkbox per column but the sticky name; unticking
    one takes it out of the table (header and cells), the menu stays open and counts it;
    ticking it brings it back. From Python: `hidden_columns`."""
    w = KernelStatsWidget(gpu_run)
    headers = lambda: re.findall(r'<th [^>]*data-col="([^"]+)"', w.html)  # noqa: E731
    assert "occurrences" in headers() and 'data-testid="columns">' in w.html
    assert 'data-col="kernel_name" checked' not in w.html  # the sticky name column has no box
    cells = len(re.findall(r"<td", w.html))
    w.on_request("show_column", {"column": "occurrences", "value": False})
    assert w.hidden_columns == ["occurrences"] and "occurrences" not in headers()
    rows = int(re.search(r'data-testid="kernel-table" data-rows="\d+" data-shown="(\d+)"', w.html).group(1))
    assert len(re.findall(r"<td", w.html)) == cells - rows  # one cell less per row
    assert '<details class="xw-columns" data-testid="columns" open><summary>Columns (1 hidden)' in w.html
    assert 'data-col="occurrences">' in w.html  # its box, unticked
    w.on_request("show_column", {"column": "occurrences", "value": True})
    assert w.hidden_columns == [] and "occurrences" in headers()
    w.hidden_columns = ["op_name", "kernel_name"]  # from Python; the name column stays
    assert "op_name" not in headers() and "kernel_name" in headers()
