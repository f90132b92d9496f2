"""Names never run as code: every widget, live in JupyterLab and exported with `to_html`, shows
real profiles whose every name carries script (tests/hostile.py: an attribute break-out with an
`onerror` handler and a `</script>` break-out, in event, op, kernel, module, instruction,
thread, allocator, tf.data, host and run names). In Chromium nothing of it runs
(`window.__xss` stays unset) and the names show as the literal text they are.
Screenshot: tests/artifacts/xss-live.png."""

from pathlib import Path

import pytest

import xprof_widgets as xw

from ..conftest import PROFILES
from ..hostile import FILE_PAYLOAD, PAYLOAD, hostile_copy
from .harness import ARTIFACTS, run_notebook_in_lab, save_screenshot, write_notebook
from .test_export import open_export

LITERAL = "onerror=window.__xss=1"  # part of every payload: shows as text when escaped
TF = PROFILES / "tf_keras_cpu" / "plugins" / "profile" / "2026_11_22_03_16_48"  # tf.data iterators, allocators


@pytest.fixture(scope="module")
def hostile(tmp_path_factory):
    """{name: hostile run folder}: the two shipped samples, and the TF run with tf.data when here."""
    root = tmp_path_factory.mktemp("hostile")
    runs = {
        "gpu": hostile_copy(xw.sample_run("gpu").path, root / "gpu"),
        "cpu": hostile_copy(xw.sample_run().path, root / "cpu"),
    }
    if TF.is_dir():
        runs["tf"] = hostile_copy(TF, root / "tf")
    return runs


def _widgets(runs):
    """(label, source building the widget) for every widget, on the hostile runs."""
    gpu, cpu = str(runs["gpu"]), str(runs["cpu"])
    out = [
        ("overview", f"xw.OverviewWidget({gpu!r})"),
        ("input_pipeline", f"xw.InputPipelineWidget({cpu!r})"),
        ("op_profile", f"xw.OpProfileWidget({gpu!r})"),
        ("trace_viewer", f"xw.TraceViewerWidget({gpu!r})"),
        ("memory_profile", f"xw.MemoryProfileWidget({gpu!r})"),
        ("memory_viewer", f"xw.MemoryViewerWidget({gpu!r})"),
        ("profile", f"xw.ProfileWidget({str(Path(gpu).parents[2])!r}, tool='op_profile', background=False)"),
        ("compare", f"xw.CompareWidget({cpu!r}, {gpu!r})"),
        ("capture", f"xw.CaptureWidget(address={PAYLOAD!r}, logdir={PAYLOAD!r})"),
        ("op_profile_cpu", f"xw.OpProfileWidget({cpu!r})"),
    ]
    if "tf" in runs:
        tf = str(runs["tf"])
        out += [
            ("input_pipeline_tf", f"xw.InputPipelineWidget({tf!r})"),
            ("memory_profile_tf", f"xw.MemoryProfileWidget({tf!r})"),
        ]
    return out


def test_hostile_names_reach_every_tool(hostile):
    """The payload survives into what each tool shows (or the tests below would prove nothing)."""
    run = xw.load_run(hostile["gpu"])
    assert run.name.endswith(FILE_PAYLOAD) and run.hosts[0].endswith(FILE_PAYLOAD)
    assert all(PAYLOAD in m for m in run.modules["module"])
    assert any(PAYLOAD in n.name for n in run.op_profile().root.children)
    assert run.memory_viewer().buffers_at_peak["instruction_name"].str.contains(PAYLOAD, regex=False).all()
    assert run.trace().tracks["label"].str.contains(LITERAL, regex=False).any()
    assert run.tools == xw.sample_run("gpu").tools  # every tool still finds its data
    if "tf" in hostile:
        ops = xw.load_run(hostile["tf"]).input_pipeline().input_ops
        assert len(ops) and ops["op_name"].str.contains(LITERAL, regex=False).all()


def test_nothing_runs_in_the_live_widgets(page, jupyter_lab, hostile):
    url, token, notebook_dir = jupyter_lab
    widgets = _widgets(hostile)
    write_notebook(notebook_dir, "xss.ipynb", ["import xprof_widgets as xw"] + [src for _, src in widgets])
    run_notebook_in_lab(page, url, token, "xss.ipynb", ready_count=len(widgets), timeout_ms=180_000)
    shown = page.locator(".xprof-widget")
    index = {name: i for i, (name, _) in enumerate(widgets)}

    # Interact where more names appear: an op's card (with its HLO text), a trace search and an
    # event's details, the ProfileWidget's selectors, a tf.data fold control.
    ops = shown.nth(index["op_profile"])
    ops.locator("tr[data-node]").nth(2).click()
    ops.locator("[data-op-card] [data-testid='op-card-name']").wait_for(timeout=30_000)
    trace = shown.nth(index["trace_viewer"])
    trace.locator("[data-testid='search']").fill(PAYLOAD)
    trace.locator("[data-testid='search']").press("Enter")
    trace.locator("[data-testid='search-at']").wait_for(timeout=60_000)
    trace.locator("[data-testid='event-details']").wait_for(timeout=60_000)
    if "input_pipeline_tf" in index:
        fold = shown.nth(index["input_pipeline_tf"]).locator(".xw-fold").first
        fold.click()
        page.wait_for_timeout(1000)

    for name, i in index.items():
        if name == "input_pipeline":  # JAX on CPU: no tf.data ops, its step names are on the chart only
            continue
        if name == "capture":  # the address and logdir typed in: the fields hold them as they are
            assert shown.nth(i).locator("[data-testid='capture-address']").input_value() == PAYLOAD
            assert shown.nth(i).locator("[data-testid='capture-logdir']").input_value() == PAYLOAD
            continue
        text = shown.nth(i).text_content()  # (JupyterLab hides cells scrolled out of view: not innerText)
        assert LITERAL in text, f"{name}: the hostile names do not show as text"
    assert "<img src=x" in trace.locator("[data-testid='event-name']").text_content()
    assert page.evaluate("() => window.__xss") is None, "a name from the profile ran as script"
    assert page.locator(".xprof-widget img").count() == 0  # no element was made from a name
    save_screenshot(page, "xss-live")


@pytest.mark.parametrize(
    "tool",
    [
        "overview",
        "op_profile",
        "trace_viewer",
        "memory_profile",
        "memory_viewer",
        "input_pipeline_tf",
        "compare",
        "profile",
    ],
)
def test_nothing_runs_in_the_exported_pages(page, hostile, tmp_path, tool):
    sources = dict(_widgets(hostile))
    if tool not in sources:
        pytest.skip(f"{TF} is not here (a corpus run: tf.data names)")
    widget = eval(sources[tool], {"xw": xw})
    if tool == "op_profile":
        widget.select_op(widget.nodes[2][0].name)
    if tool == "trace_viewer":
        widget.find(PAYLOAD)
    path = widget.to_html(tmp_path / f"{tool}.html")
    assert "window.__xss=1</script>" not in path.read_text(encoding="utf-8")  # no raw break-out in the file
    shown = open_export(page, path, f"xss-{tool}")
    assert LITERAL in shown.inner_text()
    assert page.evaluate("() => window.__xss") is None, "a name from the profile ran as script"
    assert shown.locator("img").count() == 0
    if tool == "op_profile":
        shown.screenshot(path=str(ARTIFACTS / "xss-export-op-profile.png"))
