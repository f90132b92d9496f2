"""Bad input, one crafted case each: every step a user can take on it (tests/fuzz.py's
`exercise`: open, every analysis, every widget and its export) ends in a result or a
ProfileError naming the file; nothing hangs, nothing takes memory out of proportion.
The cases are those a mutation campaign and hand-made files found (tests/test_fuzz.py)."""

from __future__ import annotations

import gzip
import os
import shutil
import subprocess
import sys
import threading
import time
import zlib
from pathlib import Path

import pytest

import xprof_widgets as xw
from xprof_widgets.io import schema

from .fuzz import exercise, negate_metadata_id, varint

GPU = next(Path(xw.sample_run("gpu").path).glob("*.xplane.pb.gz"))
REPO = Path(__file__).resolve().parents[1]


def _space(path=GPU):
    space = schema.XSpace()
    data = path.read_bytes()
    space.ParseFromString(gzip.decompress(data) if path.name.endswith(".gz") else data)
    return space


def _write(tmp_path, space_or_bytes, name="host.xplane.pb"):
    run = tmp_path / "plugins" / "profile" / "run"
    run.mkdir(parents=True, exist_ok=True)
    path = run / name
    data = space_or_bytes if isinstance(space_or_bytes, bytes) else space_or_bytes.SerializeToString()
    path.write_bytes(data)
    return path


def _plane(space, prefix):
    return next(p for p in space.planes if p.name.startswith(prefix) and any(len(ln.events) for ln in p.lines))


def _busy_line(plane):
    return max(plane.lines, key=lambda ln: len(ln.events))


def _assert_handled(path):
    """Every step: a result or a ProfileError naming the file."""
    results = exercise(path)
    bad = {step: what for step, what in results.items() if what not in ("ok", "ProfileError")}
    assert not bad, bad
    return results


# --- events and times -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "field,value",
    [
        ("duration_ps", -1),
        ("duration_ps", -(2**40)),
        ("duration_ps", 2**63 - 1),
        ("offset_ps", 2**63 - 1),
        ("offset_ps", -(2**62)),
        ("offset_ps", -(2**63)),
    ],
)
def test_impossible_event_times(tmp_path, field, value):
    space = _space()
    setattr(_busy_line(_plane(space, "/device:GPU")).events[3], field, value)
    results = _assert_handled(_write(tmp_path, space))
    assert results["load_run"] == "ProfileError"
    with pytest.raises(xw.ProfileError, match="Stream #16"):  # says which line
        xw.load_run(tmp_path)


def test_negative_offsets_that_fit_are_read(tmp_path):
    """An event a little before its line's timestamp (clocks of two sources) is real data."""
    space = _space()
    line = _busy_line(_plane(space, "/device:GPU"))
    line.timestamp_ns += 10
    line.events[0].offset_ps = -5000
    path = _write(tmp_path, space)
    assert _assert_handled(path)["load_run"] == "ok"


@pytest.mark.parametrize("value", [2**62, -(2**62), 2**63 - 1])
def test_impossible_line_timestamp(tmp_path, value):
    space = _space()
    _busy_line(_plane(space, "/device:GPU")).timestamp_ns = value
    assert _assert_handled(_write(tmp_path, space))["load_run"] == "ProfileError"


def test_events_all_at_one_instant(tmp_path):
    """Many events with one start and duration: rows, levels and merging stay linear."""
    space = _space()
    line = _busy_line(_plane(space, "/device:GPU"))
    template = line.events[0]
    for _ in range(200_000):
        e = line.events.add()
        e.CopyFrom(template)
        del e.stats[:]
    started = time.perf_counter()
    path = _write(tmp_path, space)
    _assert_handled(path)
    assert time.perf_counter() - started < 120
    # Each is inside the one before (same start, same length): a row per event would be
    # 200,000 rows (10 M such events took 47 s and 3.8 GB, then no memory). The track
    # draws MAX_NESTING rows and says how many events it leaves out, in words too.
    from xprof_widgets.analysis.trace import MAX_NESTING

    trace = xw.load_run(path.parent).trace()
    track = trace.tracks[trace.tracks["hidden"] > 0].iloc[0]
    assert track["nesting_rows"] <= MAX_NESTING < track["events"] < 2 * MAX_NESTING
    assert track["hidden"] >= 200_000 + 1 - MAX_NESTING and track["events"] + track["hidden"] <= track["file_events"]
    assert trace.query(None, None, 1200)["row"].max() < track["rows"] <= MAX_NESTING + 2
    widget = xw.TraceViewerWidget(path.parent)
    assert f"{int(track['hidden']):,} events of" in widget.html and "nested deeper than 1,000 levels" in widget.html


# --- metadata -------------------------------------------------------------------------------------


@pytest.mark.parametrize("device", ["/device:GPU", "/device:TPU", "/host:CPU"])
def test_events_whose_metadata_is_missing(tmp_path, device):
    source = (
        GPU
        if device != "/device:TPU"
        else next((REPO / "tests/data/profiles/tpu_v6e_inference").glob("plugins/profile/*/*.xplane.pb"))
    )
    space = _space(source)
    plane = _plane(space, device)
    for line in plane.lines:
        for e in line.events[::3]:
            e.metadata_id = 987654321  # no such metadata
    del plane.event_metadata[next(iter(plane.event_metadata))]  # and one entry gone
    _assert_handled(_write(tmp_path, space))


@pytest.mark.parametrize("logdir", ["amd_jax_conv_mi300", "nvidia_jax_mlp_h200"])
def test_two_planes_of_one_name(tmp_path, logdir):
    """A damaged file with two planes named /device:GPU:0 (fuzz seed 1 found it: the step
    groups, kept by plane name, then had the other plane's lengths): every tool answers."""
    space = _space(next((REPO / "tests/data/profiles" / logdir).glob("plugins/profile/*/*.xplane.pb")))
    gpus = [p for p in space.planes if p.name.startswith("/device:GPU:")]
    gpus[-1].name = "/device:GPU:0"
    if len(gpus) == 1:
        copy = space.planes.add()
        copy.CopyFrom(gpus[0])
        del copy.lines[0].events[1:]
    results = _assert_handled(_write(tmp_path, space))
    assert results["overview"] == "ok" and results["input_pipeline"] == "ok"


def test_negative_metadata_ids(tmp_path):
    space = _space()
    plane = _plane(space, "/device:GPU")
    for key in list(plane.event_metadata)[:5]:
        negate_metadata_id(plane, key)
    _assert_handled(_write(tmp_path, space))


TPU = REPO / "tests/data/profiles/tpu_v6e_inference/plugins/profile/2025_tpu_inference/tpu_host.xplane.pb"


@pytest.mark.parametrize("profile", [GPU, TPU], ids=["gpu", "tpu"])
@pytest.mark.parametrize("kind", ["str", "nan-text", "int", "bytes", "ref", "compressed", "double"])
def test_stats_of_the_wrong_kind(tmp_path, kind, profile):
    """Every stat of the events and of their metadata. (TPU, bytes: the duty cycle turned
    the metadata's `hlo_category` into str, a fuzz finding; TPU, int: a huge negative
    device offset made the op self times loop forever.)"""
    space = _space(profile)
    for plane in space.planes:
        owners = [e for line in plane.lines for e in line.events] + list(plane.event_metadata.values())
        for st in (st for owner in owners for st in owner.stats):
            if kind == "str":
                st.str_value = "\x00\ufffd not a number"
            elif kind == "nan-text":
                st.str_value = "NaN"
            elif kind == "int":
                st.int64_value = -(2**62)
            elif kind == "bytes":
                st.bytes_value = b"\xff\xfe\x00garbage"
            elif kind == "ref":
                st.ref_value = 2**63 + 7
            elif kind == "compressed":
                st.compressed_str_value = b"\x1f\x8b\x08\x00broken"
            else:
                st.double_value = float("nan")
    _assert_handled(_write(tmp_path, space))


def test_compressed_string_that_inflates_without_end(tmp_path):
    """A gzip bomb in one stat: a few KB that would inflate to GBs. Refused, quickly, small."""
    bomb = gzip.compress(b"\0" * (256 * 2**20), compresslevel=9)  # 256 MB of zeros in ~250 KB
    space = _space()
    line = _busy_line(_plane(space, "/device:GPU"))
    for e in line.events[:4]:
        e.stats[0].compressed_str_value = bomb
    started = time.perf_counter()
    _assert_handled(_write(tmp_path, space))
    assert time.perf_counter() - started < 60


# --- the wire format --------------------------------------------------------------------------------


def test_line_field_of_the_wrong_wire_type(tmp_path):
    """A line's id written as a string, its name as a number."""
    line = b"\x0a\x03abc" + b"\x10\x05"  # field 1 (id) as LENGTH, field 2 (name) as VARINT
    plane = b"\x12\x09/host:CPU" + b"\x1a" + varint(len(line)) + line
    data = b"\x0a" + varint(len(plane)) + plane
    results = _assert_handled(_write(tmp_path, data))
    assert results["load_run"] == "ProfileError"


@pytest.mark.parametrize("length", [2**63, 2**64 - 1, 2**62, 2**32 + 3])
def test_huge_lengths(tmp_path, length):
    data = _space().SerializeToString()
    bad = b"\x0a" + varint(length) + data[1:40]  # the first plane claims `length` bytes
    assert _assert_handled(_write(tmp_path, bad))["load_run"] == "ProfileError"


def test_event_with_a_negative_length(tmp_path):
    """An event record whose length varint is negative (huge as unsigned): no backwards walk."""
    space = _space()
    data = bytearray(space.SerializeToString())
    at = data.find(b"\x22", 2000)  # an event tag inside a line
    bad = bytes(data[: at + 1]) + varint(-3) + bytes(data[at + 2 :])
    started = time.perf_counter()
    _assert_handled(_write(tmp_path, bad))
    assert time.perf_counter() - started < 30


# --- planes ---------------------------------------------------------------------------------------


def test_plane_without_lines_or_events(tmp_path):
    space = _space()
    for plane in space.planes:
        if plane.name.startswith("/device:GPU"):
            del plane.lines[:]
    _assert_handled(_write(tmp_path, space))
    space = schema.XSpace()
    space.planes.add(name="/host:CPU")
    space.planes.add(name="/device:GPU:0")
    _assert_handled(_write(tmp_path / "empty", space))


def test_many_empty_planes(tmp_path):
    """A 4 MB file of 300,000 empty planes: read in time proportional to it (seconds, not hours)."""
    data = b"".join([b"\x0a\x0c\x12\x0a/device:X:"] * 10) + b"".join(
        b"\x0a\x08\x12\x06/d:" + f"{i % 1000:03d}".encode() for i in range(300_000)
    )
    path = _write(tmp_path, data)
    started = time.perf_counter()
    _assert_handled(path)
    assert time.perf_counter() - started < 120


# --- HLO modules ------------------------------------------------------------------------------------


def _hlo_edit(tmp_path, edit):
    space = _space()
    meta = next(p for p in space.planes if p.name == "/host:metadata")
    names = {k: m.name for k, m in meta.stat_metadata.items()}
    for md in meta.event_metadata.values():
        for st in md.stats:
            if names.get(st.metadata_id) == "Hlo Proto":
                proto = schema.message_class("xla.HloProto")()
                proto.ParseFromString(st.bytes_value)
                edit(proto)
                st.bytes_value = proto.SerializeToString()
    return _write(tmp_path, space)


def test_module_without_a_name(tmp_path):
    def edit(proto):
        proto.hlo_module.name = ""

    _assert_handled(_hlo_edit(tmp_path, edit))


def test_deep_tuple_shape(tmp_path):
    def edit(proto):
        shape = proto.hlo_module.computations[0].instructions[0].shape
        for _ in range(3000):
            shape = shape.tuple_shapes.add()

    _assert_handled(_hlo_edit(tmp_path, edit))


@pytest.mark.parametrize("dim", [2**40, 2**62, -7])
def test_impossible_dimensions(tmp_path, dim):
    def edit(proto):
        for c in proto.hlo_module.computations:
            for i in c.instructions:
                if i.shape.dimensions:
                    i.shape.dimensions[0] = dim

    _assert_handled(_hlo_edit(tmp_path, edit))


# --- files and folders ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "start, ratio",
    [(b"\0", None), (b"\x0a" + b"\xff" * 9 + b"\x01", None), (b"\x0a" + b"\xff" * 9 + b"\x01", 10**6)],
    ids=["zeros", "header", "header-past-the-process-limit"],
)
def test_gzip_bomb_file(tmp_path, start, ratio):
    """A 2 MB .gz that inflates to 2 GB (zeros, or an XSpace header then zeros): refused
    before it is inflated, in a process capped at 1.5 GB. With the ratio cap lifted (as a
    20 GB bomb of 20 MB would pass it), the process's own limit holds: a ProfileError,
    never a MemoryError."""
    run = tmp_path / "plugins" / "profile" / "run"
    run.mkdir(parents=True)
    path = run / "host.xplane.pb.gz"
    zeros = b"\0" * 2**24
    with gzip.open(path, "wb", compresslevel=6) as f:
        f.write(start)
        for _ in range(2 * 2**30 // len(zeros)):
            f.write(zeros)
    code = (
        "import resource, xprof_widgets as xw\n"
        f"xw.io.xspace.MAX_INFLATE_RATIO = {ratio or 200}\n"
        "resource.setrlimit(resource.RLIMIT_AS, (3 * 2**29, 3 * 2**29))\n"
        f"try:\n    xw.load_run({str(path)!r})\nexcept xw.ProfileError as e:\n    print('ProfileError:', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env=dict(os.environ, PYTHONPATH=str(REPO)),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "ProfileError:" in done.stdout and "host.xplane.pb.gz" in done.stdout
    assert ("inflate past" if start != b"\0" else "not an XSpace profile") in done.stdout


def test_device_files_and_fifos_are_not_profiles(tmp_path):
    for path in ("/dev/zero", "/dev/null"):
        with pytest.raises(xw.ProfileError, match=path):
            xw.load_run(path)
        with pytest.raises(xw.ProfileError, match=path):
            xw.list_runs(path)
    fifo = tmp_path / "pipe.xplane.pb"
    os.mkfifo(fifo)
    with pytest.raises(xw.ProfileError, match="pipe.xplane.pb"):
        xw.load_run(fifo)


def test_run_folders_coming_and_going(tmp_path):
    """list_runs and ProfileWidget.refresh while run folders appear and vanish: never an exception."""
    root = tmp_path / "plugins" / "profile"
    root.mkdir(parents=True)
    stop = threading.Event()

    def churn():
        k = 0
        while not stop.is_set():
            d = root / f"2026_{k:06d}"
            d.mkdir()
            shutil.copy(GPU, d / "h.xplane.pb.gz")
            shutil.rmtree(d)
            k += 1

    thread = threading.Thread(target=churn)
    thread.start()
    try:
        w = xw.ProfileWidget(tmp_path, background=False)
        for _ in range(300):
            xw.list_runs(tmp_path)
            w.refresh()
    finally:
        stop.set()
        thread.join()


def test_newest_run_still_being_written(tmp_path):
    """load_run(logdir) opens the newest complete run, and says it passed over the one being written."""
    root = tmp_path / "plugins" / "profile"
    shutil.copytree(Path(xw.sample_run("gpu").path), root / "2026_01_01_00_00_00")
    partial = root / "2026_01_02_00_00_00"
    partial.mkdir()
    data = gzip.decompress(GPU.read_bytes())
    (partial / "host.xplane.pb").write_bytes(data[: len(data) // 3])
    with pytest.warns(UserWarning, match="2026_01_02_00_00_00"):
        run = xw.load_run(tmp_path)
    assert run.name == "2026_01_01_00_00_00"


def test_one_bad_host_of_many(tmp_path):
    """A run whose one host file is empty opens with the other hosts; the bad one is named."""
    run_dir = tmp_path / "plugins" / "profile" / "run"
    run_dir.mkdir(parents=True)
    shutil.copy(GPU, run_dir / "a.xplane.pb.gz")
    shutil.copy(GPU, run_dir / "b.xplane.pb.gz")
    (run_dir / "c.xplane.pb").write_bytes(b"")
    with pytest.warns(UserWarning, match="c.xplane.pb"):
        run = xw.load_run(run_dir)
    assert run.hosts == ["a", "b"]
    assert "c.xplane.pb" in run.unreadable["c"]
    run.overview()


def test_file_rewritten_while_read(tmp_path):
    """A file overwritten while ProfileWidget reads it: a ProfileError from wait(), or the run."""
    run_dir = tmp_path / "plugins" / "profile" / "run"
    run_dir.mkdir(parents=True)
    path = run_dir / "host.xplane.pb"
    data = gzip.decompress(GPU.read_bytes())
    path.write_bytes(data)
    from xprof_widgets.io import xspace

    original = xspace._read_chunks

    def racing(f, view, progress):  # the file shrinks between stat and read
        path.write_bytes(data[: len(data) // 2])
        return original(f, view, progress)

    xspace._read_chunks = racing
    try:
        w = xw.ProfileWidget(tmp_path, background=True)
        try:
            w.wait(timeout=60)
        except xw.ProfileError as error:
            assert "host.xplane.pb" in str(error)
    finally:
        xspace._read_chunks = original


def test_zlib_stream_is_not_gzip(tmp_path):
    path = _write(tmp_path, zlib.compress(_space().SerializeToString()), name="h.xplane.pb.gz")
    assert _assert_handled(path)["load_run"] == "ProfileError"


@pytest.mark.parametrize("lines", [0, 1, 2000])
def test_trace_viewer_of_empty_planes_and_lines(tmp_path, lines):
    """Planes with no lines, or thousands of lines without events, and a million event
    metadata entries: the trace viewer says there are no events and answers the page's
    requests (view, search, next, zoom out) without an error."""
    space = schema.XSpace()
    host = space.planes.add(name="/host:CPU", id=1)
    for i in range(lines):
        host.lines.add(id=i, name=f"thread {i}")
    space.planes.add(name="/device:GPU:0", id=2)
    if lines == 1:
        for i in range(1, 1_000_001):
            host.event_metadata[i].id = i
    path = _write(tmp_path, space)
    results = _assert_handled(path)
    assert results["TraceViewerWidget"] == "ok"
    w = xw.TraceViewerWidget(xw.load_run(path))
    assert "no events" in w.html
    w.on_request("view", {"figure": "timeline", "x_start": 0.0, "x_end": 1.0, "width_px": 800})


@pytest.mark.parametrize("peak", [float("inf"), 1e308, 5e-324, float("nan"), -7.0])
def test_device_peaks_outside_any_device_are_unknown(tmp_path, peak):
    """A TPU plane whose peak FLOP rate and bandwidths are infinite, overflow, are tiny or
    negative: unknown peaks (0, as XProf shows a missing one), never an OverflowError in the
    roofline or op profile widgets."""
    space = _space(TPU)
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for st in plane.stats:
            if names.get(st.metadata_id, "").startswith("peak_"):
                st.double_value = peak
    path = _write(tmp_path, space)
    _assert_handled(path)
    run = xw.load_run(path)
    roofline = run.roofline_model()
    assert roofline.attrs["peak_flop_rate"] == 0.0
    for widget in (xw.RooflineWidget, xw.OpProfileWidget, xw.HloStatsWidget, xw.FrameworkOpStatsWidget):
        widget(run).to_html()


@pytest.mark.parametrize("where", ["fusion-calls-itself", "callee-calls-entry"])
def test_hlo_call_graph_cycle(tmp_path, where):
    """A module whose computations call each other in a cycle (a fusion calling its own
    computation; a called computation calling the entry back): left out of the run, named
    with the cycle, and every tool still answers in seconds (no RecursionError, no walk
    that never ends)."""

    def edit(proto):
        module = proto.hlo_module
        entry = next(c for c in module.computations if c.id == module.entry_computation_id)
        for comp in module.computations:
            for instr in comp.instructions:
                if where == "fusion-calls-itself" and instr.opcode == "fusion":
                    instr.called_computation_ids.append(comp.id)
                    return
                if where == "callee-calls-entry" and comp.id != entry.id:
                    instr.called_computation_ids.append(entry.id)
                    return

    path = _hlo_edit(tmp_path, edit)
    started = time.perf_counter()
    with pytest.warns(UserWarning, match="cycle"):
        results = _assert_handled(path)
    assert time.perf_counter() - started < 120
    assert all(v in ("ok", "ProfileError") for v in results.values())
    run = xw.load_run(path)
    with pytest.warns(UserWarning, match="cycle"):
        _ = run.hlo_protos
    assert any("cycle" in why for why in run.unreadable_modules.values())
    xw.GraphViewerWidget(run).to_html()
