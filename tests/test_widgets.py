"""Widget state from Python (no browser): selection, module switch, no data, escaping."""

import pytest
import traitlets

import xprof_widgets as xw
from xprof_widgets.widgets import memory_profile

from .conftest import PROFILES, corpus_run


@pytest.fixture
def viewer():
    return xw.MemoryViewerWidget(xw.sample_run())


def test_default_module_and_numbers_on_the_page(viewer):
    mv = xw.sample_run().memory_viewer()
    assert viewer.module == mv.module == "jit_step(30)"  # the largest module, not the first
    assert f'data-stat="peak_heap_bytes">{mv.peak_heap_bytes / 2**20:,.2f} MiB<' in viewer.html
    assert set(viewer.figures) == {"heap", "buffers", "allocations"}


def test_selected_buffer_round_trip(viewer):
    viewer.select_buffer("dot.1")
    assert viewer.selected_buffer["instruction_name"] == "dot.1"
    assert viewer.selected_buffer["size_bytes"] == 4194304
    linked = ["by_order", "by_size", "by_padding", "blocks"]
    assert viewer.selected == {"figure": "buffers", "source": "by_order", "id": 0, "linked": linked}
    assert 'data-testid="card-name">dot.1<' in viewer.html
    # What the page sends on a tap in the by-size chart.
    order = viewer.result.buffers_at_peak.set_index("size_rank")
    viewer.selected = {
        "figure": "buffers",
        "source": "by_size",
        "index": 1,
        "id": int(order.loc[1, "program_order_index"]),
    }
    assert viewer.selected_buffer["instruction_name"] == order.loc[1, "instruction_name"]
    viewer.selected = {}
    assert viewer.selected_buffer == {}
    with pytest.raises(traitlets.TraitError, match="no buffer"):
        viewer.select_buffer("not-a-buffer")


def test_allocation_chart_is_xprofs_timeline_linked_to_the_buffers(viewer):
    """The buffer allocation chart draws every block of XProf's timeline (allocation boxes
    apart): a buffer live at the peak carries its program order index, so a tap on its block
    selects it (card, bars) and a selection elsewhere highlights the block."""
    import json as json_

    blocks = viewer.result.allocation_blocks
    buffers = blocks[blocks["logical_buffer_id"] >= 0]
    figure = json_.dumps(viewer.figures["allocations"])
    assert '"name":"blocks"' in figure.replace(" ", "")
    at_peak = viewer.result.buffers_at_peak.set_index("logical_buffer_id")
    live = buffers[buffers["logical_buffer_id"].isin(at_peak.index)].iloc[0]
    order = int(at_peak.loc[live["logical_buffer_id"], "program_order_index"])
    viewer.selected = {"figure": "allocations", "source": "blocks", "id": order}
    assert viewer.selected_buffer["logical_buffer_id"] == live["logical_buffer_id"]
    assert "blocks" in viewer.selected["linked"]
    gone = buffers[~buffers["logical_buffer_id"].isin(at_peak.index)]
    if len(gone):  # a block not live at the peak: no card, no selection
        viewer.selected = {
            "figure": "allocations",
            "source": "blocks",
            "id": -2 - int(gone.iloc[0]["logical_buffer_id"]),
        }
        assert viewer.selected_buffer == {}


def test_by_padding_chart_where_buffers_are_padded(viewer):
    """XProf's by-padding list: on the TPU module (its one padded buffer at the peak) a
    chart of the bytes layouts add, linked to the others; on the CPU sample (none padded)
    a sentence instead."""
    import json as json_

    from .conftest import VENDORED

    assert "by_padding" not in json_.dumps(viewer.figures["buffers"])
    assert 'data-testid="no-padding">No buffer live at the peak is padded' in viewer.html
    tpu = xw.MemoryViewerWidget(VENDORED / "tpu_v6e_inference", module="jit_f(12190760917235803885)")
    padded = tpu.result.buffers_at_peak.query("padding_bytes > 0")
    assert len(padded) == 1
    assert '"name": "by_padding"' in json_.dumps(tpu.figures["buffers"]) and "no-padding" not in tpu.html
    tpu.selected = {"figure": "buffers", "source": "by_padding", "id": int(padded.iloc[0]["program_order_index"])}
    assert tpu.selected_buffer["padding_bytes"] == int(padded.iloc[0]["padding_bytes"])


def test_module_switch_from_python_and_page(viewer):
    viewer.select_buffer("dot.1")
    viewer.module = "jit__normal(16)"
    assert viewer.selected_buffer == {}
    assert viewer.result.peak_heap_bytes == xw.sample_run().memory_viewer("jit__normal(16)").peak_heap_bytes
    content, _ = viewer.on_request("module", {"value": "jit_step(30)"})
    assert content == {"module": "jit_step(30)"} and viewer.module == "jit_step(30)"
    with pytest.raises(traitlets.TraitError):
        viewer.module = "jit_nothing(0)"


def test_hover_lifespan_columns(viewer):
    pushed = []
    viewer.push_columns = lambda source, columns, mode="replace": pushed.append((source, columns))
    temp = viewer.result.buffers_at_peak.query("category == 'Temporary'").iloc[0]
    viewer.on_hover("by_order", int(temp.program_order_index), "buffers")
    source, cols = pushed[-1]
    assert source == "lifespan"
    assert (cols["left"][0], cols["right"][0]) == (temp.span_start, temp.span_end)
    assert cols["top"][0] == temp.size_bytes / 2**20
    viewer.on_hover("by_order", None, "buffers")
    assert len(pushed[-1][1]["left"]) == 0


def test_run_without_modules_says_why():
    w = xw.MemoryViewerWidget(PROFILES / "tf_keras_cpu")
    assert "No memory viewer" in w.html and "no HLO modules" in w.html
    assert w.figures == {}


def test_names_from_the_profile_are_escaped(viewer):
    run = viewer.run
    evil = '<img src=x onerror="alert(1)">(7)'
    run.hlo_protos[evil] = run.hlo_protos["jit_step(30)"]
    viewer.module = evil
    viewer.result.buffers_at_peak.loc[0, "instruction_name"] = "<script>alert(2)</script>"
    viewer.select_buffer("<script>alert(2)</script>")
    assert "<img src=x" not in viewer.html and "&lt;img src=x" in viewer.html
    assert "<script>alert(2)" not in viewer.html and "&lt;script&gt;alert(2)" in viewer.html


# --- MemoryProfileWidget ---------------------------------------------------------


def test_memory_profile_widget_state():
    run = corpus_run("tf_gpu_multiworker")
    w = xw.MemoryProfileWidget(run)
    first = run.memory_profile()
    assert w.memory_id == first.memory_id == first.memory_ids[0]
    assert len(w.breakdown) == len(first.breakdown_at_peak)
    # What the page sends for an allocator, a click on the timeline, a header, "back".
    w.on_request("memory_id", {"value": "gpu_host_bfc"})
    assert w.result.peak_heap_bytes == run.memory_profile(memory_id="gpu_host_bfc").peak_heap_bytes
    w.selected = {"figure": "timeline", "source": "moments", "index": 3, "id": 3}
    moment = int(w.result.sampled_timeline()["time_ps"].iloc[3])
    assert w.moment_ps == moment
    assert w.breakdown.equals(
        w.result.breakdown_at(moment)
        .sort_values("allocation_bytes", ascending=False, kind="stable")
        .reset_index(drop=True)
    )
    w.on_request("sort", {"column": "op_name"})
    assert list(w.breakdown.op_name) == sorted(w.breakdown.op_name)
    w.on_request("peak", {})
    assert w.moment_ps == -1 and "at the peak" in w.html
    # Another host keeps an allocator it also has.
    w.on_request("host", {"value": run.hosts[1]})
    assert w.host == run.hosts[1] and w.memory_id == "gpu_host_bfc"
    with pytest.raises(traitlets.TraitError):
        w.memory_id = "GPU_99_bfc"
    with pytest.raises(traitlets.TraitError):
        w.sort_by = "nope"


def test_memory_profile_heap_fills_the_chart_and_unrecorded_fields_are_said():
    """On a GPU the allocator's free memory (here 144 GiB) would flatten the 460 MiB heap to
    the axis: the chart's axis spans heap and stack, free memory has its own scale, hidden
    until its legend entry is clicked. Op, data type and shape the allocator did not record
    (XProf: blank, INVALID) read "not recorded", with a note why."""
    run = xw.sample_run("gpu")
    w = xw.MemoryProfileWidget(run)
    timeline = w.result.timeline
    assert timeline["free_bytes"].max() > 100 * (timeline["heap_bytes"] + timeline["stack_bytes"]).max()
    fig = memory_profile._timeline_figure(**w._timeline_values())  # (the chart's item: test_chart_templates)
    sampled = w.result.sampled_timeline()
    top = (sampled["heap_bytes"] + sampled["stack_bytes"]).max() / 2**20  # MiB: the heap's unit
    assert fig.yaxis[0].axis_label == "MiB" and fig.y_range.end == pytest.approx(top * 1.05)
    (free,) = [r for r in fig.renderers if getattr(r, "y_range_name", "") == "free"]
    assert not free.visible and fig.extra_y_ranges["free"].end == pytest.approx(
        sampled["free_bytes"].max() / 2**20 * 1.05
    )
    assert fig.legend[0].click_policy == "hide"
    assert (w.breakdown["data_type"] == "INVALID").all() and (w.breakdown["op_name"] == "").all()
    assert "<td>INVALID</td>" not in w._table_html() and w._table_html().count("<i>not recorded</i>") >= 3 * min(
        len(w.breakdown), 50
    )
    assert 'data-testid="not-recorded-note"' in w.html


def test_memory_profile_widget_without_allocator_events_says_how():
    w = xw.MemoryProfileWidget(xw.sample_run())
    assert "No memory profile" in w.html and "TF_CPU_ALLOCATOR_USE_BFC" in w.html
    assert w.figures == {}


def test_memory_profile_names_are_escaped():
    w = xw.MemoryProfileWidget(PROFILES / "tf_gpu_multiworker")
    w.result.breakdown_at_peak.loc[1, "op_name"] = "<b onmouseover=alert(1)>x</b>"
    w.on_request("sort", {"column": "op_name"})
    assert "<b onmouseover" not in w.html and "&lt;b onmouseover" in w.html


# --- OpProfileWidget and OpDetailsCard -------------------------------------------


def test_op_profile_widget_controls_and_selection():
    run = corpus_run("tpu_v6e_inference")
    w = xw.OpProfileWidget(run)
    # Idle left out by default, as XProf's op profile does, and the card says so.
    assert w.exclude_idle and w.nodes[0][0].time_ps == run.op_profile(exclude_idle=True).root.time_ps
    assert "Op time (idle excluded)" in w.html
    w.exclude_idle = False
    assert w.nodes[0][0].time_ps == run.op_profile().root.time_ps and "Profile time (idle included)" in w.html
    w.exclude_idle = True
    w.select_op("copy-done.4")
    d = w.selected_op
    node = next(n for n, *_ in w.nodes if n.name == "copy-done.4")
    assert d["name"] == "copy-done.4" and d["occurrences"] == node.occurrences
    assert d["hbm_gb_per_s"] == pytest.approx(node.hbm_bytes / (node.time_ps * 1e-12) / 1e9)
    assert w.selected == {"figure": "sunburst", "source": "wedges", "id": d["id"]}
    assert 'data-testid="op-card-name">copy-done.4<' in w.html and "class='sel'" in w.html
    # What the page sends: a wedge tap, a row click, the controls.
    w.selected = {"figure": "sunburst", "source": "wedges", "id": 2, "index": 1}
    assert w.selected_op["name"] == w.nodes[2][0].name
    w.on_request("select", {"id": 3})
    assert w.selected_op["name"] == w.nodes[3][0].name
    w.on_request("control", {"name": "group_by", "value": "category"})
    assert w.profile.group_by == "category" and w.selected_op["name"] == w.nodes[w.selected_op["id"]][0].name
    w.on_request("control", {"name": "top_n", "value": "10"})
    assert w.top_n == 10
    w.on_request("control", {"name": "name_filter", "value": "fusion"})
    rows = w._visible_rows()
    matches = [i for i, (n, *_r) in enumerate(w.nodes) if "fusion" in n.name.lower()]
    ancestors = set()
    for i in matches:
        while (i := w.nodes[i][2]) is not None:
            ancestors.add(i)
    assert matches and set(rows) == set(matches) | ancestors
    assert w.html.count("data-node=") == len(rows)
    pushed = []
    w.push_columns = lambda source, columns, mode="replace": pushed.append((source, columns))
    w.on_request("hover-row", {"id": 1})
    assert pushed[-1][0] == "hover_wedge" and len(pushed[-1][1]["inner"]) == 1
    with pytest.raises(traitlets.TraitError):
        w.sort_by = "size"
    with pytest.raises(KeyError):
        w.select_op("no-such-op")


def test_op_profile_widget_without_device_ops_says_why():
    w = xw.OpProfileWidget(PROFILES / "tf_keras_cpu")
    assert "No op profile" in w.html and w.figures == {}


def test_op_details_card_is_its_own_widget_and_escapes():
    from xprof_widgets.widgets.op_details import op_details_html

    card = xw.OpDetailsCard()
    assert "Click an op" in card.html
    card.op = {
        "name": "<i>x</i>",
        "kind": "op",
        "category": "c",
        "program": None,
        "expression": "<b>",
        "provenance": "",
        "occurrences": 1,
        "total_time_ps": 1e6,
        "avg_time_ps": 1e6,
        "time_fraction": 0.5,
        "tflops_per_s": 0.0,
        "hbm_gb_per_s": 1.0,
        "on_chip_read_gb_per_s": 0.0,
        "on_chip_write_gb_per_s": 0.0,
        "flops_utilization": float("nan"),
        "hbm_utilization": 0.1,
        "wasted_time_fraction": 0.4,
    }
    assert "&lt;i&gt;x&lt;/i&gt;" in card.html and "<i>x</i>" not in card.html and "&lt;b&gt;" in card.html
    assert "n/a" in card.html  # unknown peak: no made-up utilisation
    assert card.html == op_details_html(card.op)


# --- InputPipelineWidget ---------------------------------------------------------


def test_input_pipeline_widget_state():
    w = xw.InputPipelineWidget(PROFILES / "tf_keras_cpu")
    r = w.result
    assert f'data-stat="avg_step_time_ms">{r.avg_step_time_ms:,.3f} ms<' in w.html
    rows = w._op_rows()
    assert len(rows) == len(r.input_ops)
    # The tree follows the iterator path (input indices like [0] ignored).
    depth = {op["op_name"]: d for op, d, _ in rows}
    assert depth["Iterator::Root"] == 0
    assert (
        depth["Iterator::Root::Prefetch::ForeverRepeat[0]::MapAndBatch"]
        == depth["Iterator::Root::Prefetch::ForeverRepeat"] + 1
    )
    w.on_request("toggle", {"path": "Iterator::Root::Prefetch"})
    assert [op["op_name"] for op, *_ in w._op_rows()] == ["Iterator::Root", "Iterator::Root::Prefetch"]
    w.on_request("toggle", {"path": "Iterator::Root::Prefetch"})
    assert len(w._op_rows()) == len(r.input_ops)
    w.on_request("sort", {"column": "count"})
    assert w.sort_by == "count"
    w.selected = {"figure": "steps", "source": "steps", "index": 2, "id": 2}
    step = r.steps.iloc[2]
    assert w.selected_step["step_name"] == step.step_name and w.selected_step["begin_ps"] == step.begin_ps
    assert w.selected_step["end_ps"] - w.selected_step["begin_ps"] == pytest.approx(step.step_time_ms * 1e9, abs=1)
    with pytest.raises(traitlets.TraitError):
        w.sort_by = "nope"


def test_input_pipeline_widget_without_steps_says_how():
    # TPU steps are the TensorCores' `Steps` lines: an inference run has none, and is told so.
    w = xw.InputPipelineWidget(PROFILES / "tpu_v6e_inference")
    assert "`Steps` line" in w.html and "inference" in w.html and w.figures == {}
    w = xw.InputPipelineWidget(PROFILES / "nvidia_jax_no_steps_h200")
    assert "StepTraceAnnotation" in w.html


# --- OverviewWidget --------------------------------------------------------------


def test_overview_widget_state():
    run = corpus_run("tf_keras_cpu")
    w = xw.OverviewWidget(run)
    o = run.overview()
    assert f'data-stat="avg_step_time_ms">{o.avg_step_time_ms:,.3f} ms<' in w.html
    assert set(w.figures) == {"steps"}
    w.selected = {"figure": "steps", "source": "steps", "index": 0, "id": 0}
    assert w.selected_step["step_name"] == o.steps.step_name.iloc[0]
    w.selected = {}
    assert w.selected_step == {}


def test_overview_widget_without_steps_still_shows_what_it_can():
    w = xw.OverviewWidget(PROFILES / "tpu_v6e_inference")
    assert "`Steps` line" in w.html  # says why there are no TPU steps
    assert w.figures == {} and 'data-testid="top-ops"' in w.html  # and still shows the top ops
    # and, for this inference run, each XLA module's execution latency, before the top ops
    lat = corpus_run("tpu_v6e_inference").overview().module_latency
    assert f'data-testid="module-latency" data-rows="{len(lat)}"' in w.html
    assert w.html.index("module-latency") < w.html.index("top-ops")
    assert f"<td class=num>{lat.p99_ms.iloc[0]:,.3f}</td>" in w.html


# --- ProfileWidget ----------------------------------------------------------------


def test_profile_widget_runs_hosts_tools(tmp_path):
    import shutil

    w = xw.ProfileWidget(PROFILES / "tf_keras_cpu")
    runs = list(w.runs)
    assert runs == sorted(xw.list_runs(PROFILES / "tf_keras_cpu")["run"], reverse=True)  # newest first
    assert type(w.current).__name__ == "OverviewWidget" and w.current.run.name == runs[0]
    # TF on CPU: no XLA ops, no HLO modules; the newest run has allocator events.
    # TF on CPU: no XLA ops, no HLO modules, no GPU, no TPU counters, no requests: eight
    # tools without data, each said with why.
    assert "11 tools without data" in w.message and "Memory viewer" in w.message  # and why
    for label in (
        "HLO op profile",
        "HLO op stats",
        "Graph viewer",
        "Kernel stats",
        "Roofline model",
        "Performance counters",
    ):
        assert label in w.message
    assert w.tools == [
        "overview_page",
        "input_pipeline_analyzer",
        "trace_viewer",
        "memory_profile",
        "framework_op_stats",
        "pod_viewer",
    ]  # only tools with data are offered
    w.tool = "trace_viewer"
    assert type(w.current).__name__ == "TraceViewerWidget"
    w.run_name = runs[1]
    assert w.current.run.name == runs[1]
    # a run written while the widget is open shows up on refresh
    logdir = tmp_path / "logdir"
    shutil.copytree(PROFILES / "jax_mlp_cpu", logdir)
    w2 = xw.ProfileWidget(logdir)
    assert len(w2.runs) == 1
    src = next((logdir / "plugins" / "profile").iterdir())
    shutil.copytree(src, src.parent / "2099_01_01_00_00_00")
    w2.refresh()
    assert w2.runs[0] == "2099_01_01_00_00_00"


def _logdir_with(tmp_path, *runs):
    """A logdir holding copies of corpus runs (`(corpus logdir, run name or None for its newest, new name)`)."""
    import shutil

    root = tmp_path / "logdir" / "plugins" / "profile"
    root.mkdir(parents=True, exist_ok=True)
    for source, name, new in runs:
        folders = sorted((source / "plugins" / "profile").iterdir())
        src = folders[-1] if name is None else source / "plugins" / "profile" / name
        shutil.copytree(src, root / new)
    return tmp_path / "logdir"


def test_read_padded_reports_bytes_as_it_reads(tmp_path, monkeypatch):
    import gzip

    from xprof_widgets.io import xspace

    path = next((PROFILES / "tf_keras_cpu" / "plugins" / "profile").glob("*/vm.xplane.pb"))
    size = path.stat().st_size
    monkeypatch.setattr(xspace, "READ_CHUNK_BYTES", 256 * 1024)
    calls = []
    buf, got = xspace.read_padded(path, progress=lambda done, total: calls.append((done, total)))
    assert got == size and bytes(buf[:size]) == path.read_bytes()
    assert calls[0] == (0, size) and calls[-1] == (size, size)
    assert len(calls) == 2 + size // (256 * 1024)  # one before, one per chunk
    done = [d for d, _ in calls]
    assert done == sorted(done) and {t for _, t in calls} == {size}
    # gzip: the compressed bytes are reported, the decompressed ones returned
    packed = tmp_path / "vm.xplane.pb.gz"
    packed.write_bytes(gzip.compress(path.read_bytes(), compresslevel=1))
    calls.clear()
    buf, got = xspace.read_padded(packed, progress=lambda done, total: calls.append((done, total)))
    assert got == size and calls[-1] == (packed.stat().st_size,) * 2 and len(calls) > 2
    # the same XSpace with or without a callback
    plain, counted = xspace.read_xspace(path), xspace.read_xspace(path, progress=lambda d, t: None)
    assert plain.event_count == counted.event_count > 0


def test_run_progress_names_the_host_once(tmp_path):
    calls = []
    run = xw.load_run(PROFILES / "tf_gpu_multiworker", progress=lambda *a: calls.append(a))
    first, second = run.hosts
    assert {c[0] for c in calls} == {first}  # load_run reads the first host only
    size = run.files[first].stat().st_size
    assert calls[-1] == (first, size, size)
    calls.clear()
    run.xspace(first, progress=lambda *a: calls.append(a))
    assert calls == []  # read before: nothing to report
    run.xspace(second, progress=lambda *a: calls.append(a))
    assert calls[0][0] == second and calls[-1][1] == calls[-1][2] == run.files[second].stat().st_size


def test_profile_widget_progress_shows_bytes_read(tmp_path, monkeypatch):
    from xprof_widgets.io import xspace

    monkeypatch.setattr(xspace, "READ_CHUNK_BYTES", 1 << 20)
    logdir = _logdir_with(tmp_path, (PROFILES / "tf_gpu_multiworker", None, "2020_12_23_gpu_multi_worker"))
    seen = []  # (label, bar value, bar max) after each report
    reporter = xw.ProfileWidget._reporter

    def spy(self, name, sizes):
        report = reporter(self, name, sizes)

        def wrapped(host, done, total):
            report(host, done, total)
            seen.append((self.progress_text, self.progress_bytes, self.progress_total, self.loading))

        return wrapped

    monkeypatch.setattr(xw.ProfileWidget, "_reporter", spy)
    w = xw.ProfileWidget(logdir, tool="trace_viewer", background=False)
    hosts = w.run.hosts
    total = sum(f.stat().st_size for f in w.run.files.values())
    texts = [t for t, *_ in seen]
    assert texts[0] == f"Reading {hosts[0]}: 0.0 / 3.0 MB (host 1 of 2)"
    assert f"Reading {hosts[0]}: 2.1 / 3.0 MB (host 1 of 2)" in texts
    # The first host is read here; the others are summarized on a process pool, counted as hosts.
    assert texts[-1] == f"Decoding {hosts[0]}… (host 1 of 2)"
    assert w.hosts_done == 2 and w.hosts == ["All hosts", *hosts]
    bar = [v for _, v, _, _ in seen]
    first = w.run.files[hosts[0]].stat().st_size
    assert bar == sorted(bar) and bar[-1] == first and {m for _, _, m, _ in seen} == {total}
    assert {d for *_, d in seen} == {True}  # shown while reading
    assert not w.loading  # hidden once the tool shows
    assert type(w.current).__name__ == "TraceViewerWidget"
    seen.clear()
    w.refresh()  # no new run: nothing read again
    assert seen == [] and w.ready.done()


def test_profile_widget_opens_runs_in_a_thread(tmp_path):
    logdir = _logdir_with(
        tmp_path,
        (PROFILES / "tf_keras_cpu", "2026_11_22_03_16_08", "2026_11_22_03_16_08"),
        (PROFILES / "tf_keras_cpu", "2026_11_22_03_16_48", "2026_11_22_03_16_48"),
    )
    w = xw.ProfileWidget(logdir, background=True)
    run = w.wait(timeout=120)
    assert run.name == "2026_11_22_03_16_48" and w.ready.done()
    assert type(w.current).__name__ == "OverviewWidget" and w.current.run is run
    assert not w.loading and "Memory viewer" in w.message
    # switching runs opens the other in the background too; wait() follows the selection
    w.run_name = "2026_11_22_03_16_08"
    assert w.wait(timeout=120).name == "2026_11_22_03_16_08" and w.current.run.name == "2026_11_22_03_16_08"
    # back to an open run: at once, no thread
    w.run_name = "2026_11_22_03_16_48"
    assert w.ready.done() and w.current.run is run


def test_profile_widget_shows_errors_from_the_thread(tmp_path):
    logdir = _logdir_with(tmp_path, (PROFILES / "tf_keras_cpu", "2026_11_22_03_16_08", "2026_11_22_03_16_08"))
    bad = logdir / "plugins" / "profile" / "2099_01_01_00_00_00"
    bad.mkdir()
    (bad / "vm.xplane.pb").write_bytes(b"\x0a\xff\xff\xff\xff\x0f garbage")  # a plane longer than the file
    w = xw.ProfileWidget(logdir, background=True)
    assert w.run_name == "2099_01_01_00_00_00"
    with pytest.raises(xw.ProfileError, match="vm.xplane.pb"):
        w.wait(timeout=60)
    assert "vm.xplane.pb" in w.message and w.current is None and not w.loading
    with pytest.raises(xw.ProfileError, match="vm.xplane.pb"):
        w.to_html()
    w.run_name = "2026_11_22_03_16_08"  # the good run still opens
    assert w.wait(timeout=120).name == "2026_11_22_03_16_08" and "vm.xplane.pb" not in w.message


def test_package_lists_its_widgets():
    """`dir(xw)` (a notebook's completion on `xw.`) offers the widgets, made on first use."""
    names = dir(xw)
    assert {"OverviewWidget", "PodViewerWidget", "ProfileWidget", "load_run"} <= set(names)


def test_profile_widget_to_html_exports_every_tool_with_a_menu(tmp_path, monkeypatch):
    import json
    import re

    w = xw.ProfileWidget(PROFILES / "tf_keras_cpu", background=True)
    out = w.to_html(tmp_path / "page.html")  # waits for the run
    assert out == tmp_path / "page.html"
    page = out.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "Static export of <b>ProfileWidget</b>" in page
    data = json.loads(re.search(r'id="xprof-export-data">(.*?)</script>', page, re.S).group(1))
    # Every tool offered for the run, the one shown first, each with its own synced page.
    from xprof_widgets.widgets.profile import TOOLS

    assert [t["label"] for t in data["tools"]] == [TOOLS[n].label for n in w.tools]
    assert data["tools"][0]["widget"] == "OverviewWidget"
    assert all(t["state"]["html"] for t in data["tools"])
    assert page.count('id="xprof-export-bokeh"') == 1  # BokehJS once for all tools
    menu = re.search(r'<select id="xprof-export-tool" data-testid="export-tool">(.*?)</select>', page).group(1)
    assert menu.count("<option") == len(w.tools)
    # One tool: the single-widget page.
    shown = w.to_html(tools="shown", title="t")
    assert shown.startswith("<!DOCTYPE html>") and "Static export of <b>OverviewWidget</b>" in shown
    assert 'id="xprof-export-tool"' not in shown
    with pytest.raises(ValueError, match="no tool 'nothing'"):
        w.to_html(tools=["nothing"])
    with pytest.raises(ValueError, match="no tool 'nothing'"):  # a name, not its letters
        w.to_html(tools="nothing")
    one = w.to_html(tools="input_pipeline_analyzer")
    assert "Static export of <b>InputPipelineWidget</b>" in one and 'id="xprof-export-tool"' not in one
    # No HLO modules in a TF CPU run: the memory viewer is not offered, the page says why.
    assert "memory_viewer" not in w.tools
    assert "Memory viewer</b>: no HLO modules" in w.message

    def broken(run, **kwargs):
        raise xw.ProfileError(run.path, "line 3 of the host plane does not decode")

    monkeypatch.setattr(xw, "TraceViewerWidget", broken)  # a tool that cannot show this run
    w = xw.ProfileWidget(PROFILES / "tf_keras_cpu", background=True)  # nothing built yet
    w.wait()
    w.tool = "trace_viewer"
    assert w.current is None and "does not decode" in w.message
    with pytest.raises(xw.ProfileError, match="Trace viewer tool has no view of this run.*does not decode"):
        w.to_html(tmp_path / "trace.html", tools="shown")
    assert not (tmp_path / "trace.html").exists()
    # Exporting them all leaves out the tool that cannot show the run.
    every = json.loads(re.search(r'id="xprof-export-data">(.*?)</script>', w.to_html(), re.S).group(1))
    widgets = [t["widget"] for t in every["tools"]]
    assert "TraceViewerWidget" not in widgets and "OverviewWidget" in widgets
    empty = tmp_path / "empty"
    (empty / "plugins" / "profile").mkdir(parents=True)
    nothing = xw.ProfileWidget(empty)
    assert "No runs" in nothing.message and nothing.wait() is None
    with pytest.raises(xw.ProfileError, match="no run is shown"):
        nothing.to_html()


def test_capture_widget_to_html(tmp_path, monkeypatch):
    import xprof_widgets.widgets.capture as capture_module

    logdir = _logdir_with(tmp_path, (PROFILES / "tf_keras_cpu", None, "2026_11_22_03_16_48"))
    w = xw.CaptureWidget(address="localhost:1", logdir=str(logdir))
    with pytest.raises(xw.ProfileError, match="no profile captured yet"):
        w.to_html()

    def fail(*a, **k):
        raise xw.ProfileError("localhost:1", "no profiler server answered")

    monkeypatch.setattr(capture_module, "capture", fail)
    assert w.capture() is None
    with pytest.raises(xw.ProfileError, match="the last capture failed.*no profiler server"):
        w.to_html()
    monkeypatch.setattr(capture_module, "capture", lambda *a, **k: xw.load_run(logdir))
    assert w.capture().name == "2026_11_22_03_16_48"
    page = w.to_html()
    assert page.startswith("<!DOCTYPE html>") and "OverviewWidget" in page
    assert w.to_html(tmp_path / "c.html") == tmp_path / "c.html"
    plain = xw.CaptureWidget(address="localhost:1", logdir=str(logdir), show_overview=False)
    plain.capture()
    with pytest.raises(xw.ProfileError, match="show_overview=False"):
        plain.to_html()


def test_profile_widget_switching_runs_while_one_is_read(tmp_path, monkeypatch):
    import threading

    from xprof_widgets.io import xspace

    logdir = _logdir_with(
        tmp_path,
        (PROFILES / "tf_keras_cpu", "2026_11_22_03_16_08", "2026_11_22_03_16_08"),
        (PROFILES / "tf_keras_cpu", "2026_11_22_03_16_48", "2026_11_22_03_16_48"),
    )
    go, reading = threading.Event(), threading.Event()
    read_chunks = xspace._read_chunks

    def held(f, view, progress):  # the newest run's file waits until the test lets it go
        if "16_48" in f.name:
            reading.set()
            assert go.wait(60)
        return read_chunks(f, view, progress)

    monkeypatch.setattr(xspace, "_read_chunks", held)
    w = xw.ProfileWidget(logdir, background=True)
    assert reading.wait(60) and not w.ready.done() and w.current is None and w.run is None
    assert w.loading and w.progress_text.startswith("Opening 2026_11_22_03_16_48")
    first = w.ready
    w.run_name = "2026_11_22_03_16_08"  # while the newest is still being read
    assert w.wait(timeout=120).name == "2026_11_22_03_16_08"
    go.set()
    assert first.result(timeout=120).name == "2026_11_22_03_16_48"  # read, but not shown: not selected
    assert w.current.run.name == "2026_11_22_03_16_08" and not w.loading
    w.run_name = "2026_11_22_03_16_48"  # read already: shown at once
    assert w.ready.done() and w.current.run.name == "2026_11_22_03_16_48"


@pytest.mark.parametrize("uid", [0, 1000])
def test_demo_opens_the_quickstart_in_jupyterlab(monkeypatch, capsys, uid):
    """`python -m xprof_widgets demo` (the README's first command) prints the sample's summary and
    opens the quickstart in JupyterLab; as root (containers, cloud VMs) with --allow-root, without
    which JupyterLab exits at once."""
    from xprof_widgets import __main__ as cli

    calls = []
    monkeypatch.setattr(cli.subprocess, "call", lambda command: calls.append(command) or 0)
    monkeypatch.setattr(cli.os, "geteuid", lambda: uid)
    monkeypatch.setattr(cli.shutil, "which", lambda name: "/usr/bin/" + name)
    assert cli.main(["demo"]) == 0
    out = capsys.readouterr().out
    assert "run 2026_11_22_03_11_56: hosts vm" in out and "quickstart.ipynb in JupyterLab" in out
    (command,) = calls
    assert command[1:4] == ["-m", "jupyter", "lab"] and command[4].endswith("quickstart.ipynb")
    assert ("--allow-root" in command) == (uid == 0)


def test_demo_never_writes_over_your_quickstart(tmp_path, monkeypatch):
    """From an installed wheel (no repository around) the demo copies the quickstart next to
    you once; a copy already there, edited, is opened as it is."""
    from pathlib import Path

    from xprof_widgets import __main__ as cli

    nowhere = tmp_path / "no-checkout" / "quickstart.ipynb"
    first = cli._quickstart_notebook(tmp_path, repository=nowhere)
    assert first == tmp_path / "xprof_widgets_quickstart.ipynb" and '"cells"' in first.read_text()
    first.write_text('{"cells": [], "my": "edits"}')
    again = cli._quickstart_notebook(tmp_path, repository=nowhere)
    assert again == first and Path(again).read_text() == '{"cells": [], "my": "edits"}'


def test_step_graph_of_one_step_is_one_named_bar():
    """One step: a bar a tenth of the chart wide, its tick named after the step (no -0.4..0.4
    axis); many steps: a tick per step name, whole steps only."""
    import pandas as pd
    from bokeh.models import BasicTicker, FixedTicker

    from xprof_widgets.widgets.input_pipeline import steps_figure

    one = pd.DataFrame(
        {"step_name": ["7"], "step_number": [7], "step_time_ms": [3.0], "begin_ps": [0], "device_compute_ms": [3.0]}
    )
    fig = steps_figure(one)
    assert (fig.x_range.start, fig.x_range.end) == (-1.6, 1.6)  # three bar widths, the bar centred
    five = pd.concat([one] * 5, ignore_index=True).assign(step_name=list("abcde"))
    fig = steps_figure(five)
    assert (fig.x_range.start, fig.x_range.end) == (-0.6, 4.6)  # five steps fill the width
    fig = steps_figure(one)
    assert isinstance(fig.xaxis.ticker, FixedTicker) and fig.xaxis.ticker.ticks == [0]
    assert fig.xaxis.major_label_overrides == {0: "7"}
    many = pd.DataFrame(
        {
            "step_name": [str(i) for i in range(100)],
            "step_number": range(100),
            "step_time_ms": [1.0] * 100,
            "begin_ps": range(100),
            "device_compute_ms": [1.0] * 100,
        }
    )
    fig = steps_figure(many)
    assert (fig.x_range.start, fig.x_range.end) == (-0.6, 99.6)
    assert isinstance(fig.xaxis.ticker, BasicTicker) and fig.xaxis.ticker.min_interval == 1
    assert fig.xaxis.major_label_overrides[42] == "42"
    # A long name is cut under its bar (rotated, it would run over the page), whole in the tooltip.
    long = one.assign(step_name=["FunctionRun'\"><img src=x onerror=alert(1)> 201"])
    fig = steps_figure(long)
    assert fig.xaxis.major_label_overrides == {0: "FunctionRun'\"><img src=…"}  # 23 + "…"
    assert fig.renderers[0].data_source.data["name"] == list(long["step_name"])


def test_step_graph_stacks_the_parts_used_in_xprofs_order():
    """A bar per step of the breakdown parts with time, in XProf's order, each on the ones
    before it (one glyph: a row per part and step); a run whose parts have no time at
    all shows the step time itself."""
    import pandas as pd
    from bokeh.models import HoverTool

    from xprof_widgets.widgets.input_pipeline import steps_figure

    steps = pd.DataFrame(
        {
            "step_name": ["1", "2"],
            "step_number": [1, 2],
            "step_time_ms": [5.0, 7.0],
            "begin_ps": [0, 10],
            "input_ms": [1.0, 2.0],
            "output_ms": [0.0, 0.0],
            "device_compute_ms": [4.0, 5.0],
        }
    )
    fig = steps_figure(steps)
    (bars,) = fig.renderers
    data = bars.data_source.data
    assert list(data["part"]) == ["Device compute", "Device compute", "Input", "Input"]
    assert list(data["bottom"]) == [0.0, 0.0, 4.0, 5.0] and list(data["top"]) == [4.0, 5.0, 5.0, 7.0]
    assert list(data["id"]) == [0, 1, 0, 1] and list(data["name"]) == ["1", "2", "1", "2"]
    assert list(data["s0"]) == [4.0, 5.0, 4.0, 5.0] and list(data["s1"]) == [1.0, 2.0, 1.0, 2.0]
    tips = fig.select_one({"type": HoverTool}).tooltips
    assert tips == [
        ("step", "@name"),
        ("step time", "@total{0.000} ms"),
        ("Device compute", "@s0{0.000} ms"),
        ("Input", "@s1{0.000} ms"),
    ]
    idle = steps.assign(input_ms=0.0, device_compute_ms=0.0)
    data = steps_figure(idle).renderers[0].data_source.data
    assert list(data["part"]) == ["Step time"] * 2 and list(data["top"]) == [5.0, 7.0]


def test_data_attributes_are_written_one_way():
    """Every JSON value in an HTML attribute goes through `_html.data_json` inside double quotes:
    no widget writes a single-quoted attribute (json.dumps leaves ' < > alone, so a name
    holding them would end such an attribute: tests/browser/test_xss.py shows the attack)."""
    import re
    from pathlib import Path

    widgets = Path(xw.__file__).parent / "widgets"
    for source in widgets.glob("*.py"):
        text = source.read_text(encoding="utf-8")
        assert not re.search(r"""\b(data-[a-z-]+|value|title)=\\?'""", text), source.name
        # (_templates.py: chart items as JSON text, never in HTML.)
        allowed = ("_bokeh.py", "_export.py", "_html.py", "_templates.py")
        assert "json.dumps" not in text or source.name in allowed, source.name


def test_op_card_links_to_the_graph_viewer():
    """XProf's op details card links to the graph viewer: inside ProfileWidget a button opens
    it on the op; a widget on its own shows the line of Python that does."""
    w = xw.ProfileWidget(xw.sample_run("gpu"), tool="op_profile", background=False)
    w.current.select_op("custom-call.1")
    module = w.current.selected_op["program"]
    assert 'data-testid="show-in-graph"' in w.html
    w.on_request("show-graph", {"op": "custom-call.1", "module": module})
    assert w.tool == "graph_viewer" and (w.current.op, w.current.module) == ("custom-call.1", module)
    centre = w.current.view.nodes.query("is_centre")
    assert list(centre["name"]) == ["custom-call.1"]
    alone = xw.OpProfileWidget(xw.sample_run("gpu"))
    alone.select_op("custom-call.1")
    assert "show-in-graph" not in alone.html
    assert f"xw.GraphViewerWidget(run, op=&#x27;custom-call.1&#x27;, module=&#x27;{module}&#x27;)" in alone.html


def test_memory_space_selector_lists_the_spaces_the_module_uses():
    """A TPU module's buffers live in HBM, VMEM, Sflag and host memory: the selector offers
    those (XProf's names), and choosing one from the page shows that space's numbers."""
    from .conftest import VENDORED

    w = xw.MemoryViewerWidget(VENDORED / "tpu_v6e_inference", module="jit_f(12190760917235803885)")
    assert 'data-testid="memory-space">' in w.html
    for value, name in ((0, "HBM"), (1, "VMEM"), (2, "Sflag"), (5, "Host")):
        assert f'<option value="{value}"' in w.html and f">{name}</option>" in w.html
    assert '<option value="3"' not in w.html  # CMEM: the module has no buffer there
    content, _ = w.on_request("memory_space", {"value": "5"})
    assert content == {"memory_space": 5} and w.memory_space == 5
    assert w.result.peak_heap_bytes == 15360 * 2**20  # XProf's 15360 MiB of host memory
    assert f'data-stat="peak_heap_bytes">{15360:,.2f} MiB<' in w.html
    assert '<option value="5" selected>Host</option>' in w.html
    assert w.figures == {} and 'data-testid="no-heap">No Host buffer' in w.html  # no empty charts
    w.memory_space = 0
    assert set(w.figures) >= {"heap", "buffers"} and "no-heap" not in w.html


def test_tool_status_is_computed_once_per_run(monkeypatch):
    """Every widget of a ProfileWidget asks which tools have data; a run answers once (a file
    of a million empty planes took 20 s to build a ProfileWidget, the question asked three
    times over every plane)."""
    from xprof_widgets.analysis.core import availability

    calls = []
    real = availability.tool_status
    monkeypatch.setattr(availability, "tool_status", lambda run: calls.append(run) or real(run))
    run = xw.load_run(xw.sample_run().path)
    w = xw.ProfileWidget(run)
    assert run.tools == w.run.tools and len(calls) == 1
