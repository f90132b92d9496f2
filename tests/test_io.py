"""Reading profiles: columns equal to protobuf's own parse, runs, devices, bad input."""

import gzip
import os
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets.io import schema, sorting, wire, xspace
from xprof_widgets.io.xspace import SMALL_LINE, read_xspace, stat_value

from .conftest import PROFILES, profile_files
from .fuzz import varint
from .fuzz_diff import _len_field, rewrite_space


@pytest.fixture(scope="module", params=profile_files(), ids=lambda p: f"{p.parts[-5]}/{p.parts[-2]}/{p.name}")
def pair(request):
    """(our XSpaceFile, protobuf's XSpace message) for one real profile."""
    path = request.param
    return read_xspace(path), schema.XSpace.FromString(path.read_bytes())


def test_event_columns_equal_protobuf(pair):
    ours, ref = pair
    assert [p.name for p in ours.planes] == [p.name for p in ref.planes]
    for plane, ref_plane in zip(ours.planes, ref.planes):
        assert [ln.name for ln in plane.lines] == [ln.name for ln in ref_plane.lines]
        for line, ref_line in zip(plane.lines, ref_plane.lines):
            assert (line.display_id, line.display_name, line.timestamp_ns) == (
                ref_line.display_id,
                ref_line.display_name,
                ref_line.timestamp_ns,
            )
            offsets = np.array([e.offset_ps for e in ref_line.events], dtype=np.int64)
            np.testing.assert_array_equal(line.start_ps, ref_line.timestamp_ns * 1000 + offsets)
            np.testing.assert_array_equal(line.event_duration_ps, [e.duration_ps for e in ref_line.events])
            np.testing.assert_array_equal(line.metadata_id, [e.metadata_id for e in ref_line.events])


def _sampled_stats(ours, ref, per_line):
    """Per line with events: (line, stat names by id, sampled event indices, and for each
    sampled event its XStat messages by name, its metadata's under its own)."""
    for plane, ref_plane in zip(ours.planes, ref.planes):
        names = {k: v.name for k, v in ref_plane.stat_metadata.items()}
        for line, ref_line in zip(plane.lines, ref_plane.lines):
            if not len(line):
                continue
            sample = np.unique(np.linspace(0, len(line) - 1, min(len(line), per_line)).astype(int))
            wants = []
            for i in sample:
                event = ref_line.events[int(i)]
                want = {names[s.metadata_id]: s for s in ref_plane.event_metadata[event.metadata_id].stats}
                want.update({names[s.metadata_id]: s for s in event.stats})
                wants.append(want)
            yield line, names, sample, wants


def test_stats_equal_protobuf(pair):
    """Every stat of every (sampled) event, merged with its metadata's stats."""
    ours, ref = pair
    checked = 0
    for line, names, sample, wants in _sampled_stats(ours, ref, 500):
        table = line.stats(events=sample)
        for i, want in zip(sample, wants):
            for name, stat in want.items():
                value = stat_value(stat, names)
                got = table.at[i, name]
                assert got == value or (isinstance(value, float) and np.isclose(got, value)), (line.name, i, name)
                checked += 1
    assert checked > 0 or ours.plane("/host:CPU") is None


def test_plane_stats_and_names(pair):
    ours, ref = pair
    for plane, ref_plane in zip(ours.planes, ref.planes):
        names = {k: v.name for k, v in ref_plane.stat_metadata.items()}
        # A stat whose metadata the plane does not define is named by its id: the
        # scope range tree of newer JAX on GPU (/host:__ScopeRangeCallStack__) is such stats.
        named = {names.get(s.metadata_id, str(s.metadata_id)): stat_value(s, names) for s in ref_plane.stats}
        assert plane.stats == named
        for line, ref_line in zip(plane.lines, ref_plane.lines):
            got = np.asarray(line.names()[:50], dtype=object)
            want = [ref_plane.event_metadata[e.metadata_id].name for e in list(ref_line.events)[:50]]
            assert list(got) == want
            assert list(line.name_strings(np.arange(min(50, len(line))))) == want


def test_name_strings_of_events_without_metadata(tmp_path):
    """An event whose metadata id names no metadata has the empty name (XProf's visitor
    reads a default metadata), as `name_strings` gives it: a str for every event."""
    space = schema.XSpace()
    plane = space.planes.add(id=1, name="/host:CPU")
    plane.event_metadata[1].id = 1
    plane.event_metadata[1].name = "known"
    line = plane.lines.add(id=1, name="t", timestamp_ns=1)
    for i, mid in enumerate([1, 7, 1]):
        line.events.add(metadata_id=mid, offset_ps=i * 10, duration_ps=5)
    path = tmp_path / "h.xplane.pb"
    path.write_bytes(space.SerializeToString())
    ours = read_xspace(path).plane("/host:CPU").lines[0]
    assert list(ours.name_strings()) == ["known", "", "known"]
    assert list(ours.name_strings(np.array([1, 2]))) == ["", "known"]


@pytest.mark.parametrize("extra", [[], [7], [2**21], [-3]])
def test_metadata_names_of_many_events_with_and_without_unknown_ids(tmp_path, monkeypatch, extra):
    """A plane of many events: its names table found by the compiled pass that checks every
    id has metadata (`Plane._all_ids_known`) is the one the table of the ids used gives,
    with an unknown id (past the metadata's, far past, negative) named "" as XProf does."""
    space = schema.XSpace()
    plane = space.planes.add(id=1, name="/host:CPU")
    for mid in (1, 2, 5):
        plane.event_metadata[mid].id = mid
        plane.event_metadata[mid].name = f"op{mid}"
    ids = [1, 2, 5] * 40 + extra + [2] * 5
    for k, line_ids in enumerate((ids, [5] * 50)):
        line = plane.lines.add(id=k + 1, name=f"t{k}", timestamp_ns=1)
        for i, mid in enumerate(line_ids):
            line.events.add(metadata_id=mid, offset_ps=i * 10, duration_ps=5)
    path = tmp_path / "h.xplane.pb"
    path.write_bytes(space.SerializeToString())

    def names(fast):
        if not fast:
            monkeypatch.setattr(xspace.Plane, "_all_ids_known", lambda self, ids: False)
        ours = read_xspace(path, cache=False).plane("/host:CPU")
        table = [list(map(str, column)) for column in ours.metadata_names]
        return table, [list(line.name_strings()) for line in ours.lines]

    fast, table = names(True), names(False)
    assert fast == table
    assert fast[1][0][120 : 120 + len(extra)] == [""] * len(extra)
    assert ("" in fast[0][1]) == bool(extra)


@pytest.mark.parametrize(
    "chunk, block", [(32, 1 << 12), (64, 1 << 12), (97, 1 << 12), (1000, 1 << 12), (32, 20), (97, 17)]
)
@pytest.mark.parametrize("logdir", ["jax_mlp_cpu", "tf_keras_cpu", "tpu_v6e_inference"])
def test_walkers_agree_with_exact_walk(monkeypatch, logdir, chunk, block):
    """Force the parallel walkers on every line (tiny chunks, so records span
    chunks and walkers start off the chain; small blocks, so a line is walked in
    many blocks, records spanning them) and compare with the exact walk."""
    path = sorted((PROFILES / logdir).glob("plugins/profile/*/*.xplane.pb"))[0]
    exact = read_xspace(path, cache=False)
    monkeypatch.setattr(wire, "CHUNK_BYTES", chunk)
    monkeypatch.setattr(wire, "BLOCK_CHUNKS", block)
    monkeypatch.setattr(wire, "BLOCK_RECORDS", 1000)
    walked = read_xspace(path, cache=False)
    for a, b in zip(exact.planes, walked.planes):
        for la, lb in zip(a.lines, b.lines):
            np.testing.assert_array_equal(la.record_pos, lb.record_pos)
            np.testing.assert_array_equal(la.start_ps, lb.start_ps)


def test_sample_run_is_real_and_gzipped():
    run = xw.sample_run()
    assert str(run.files["vm"]).endswith(".xplane.pb.gz")
    assert run.xspace().event_count == 87808  # as in shared/profiles/README.md (89k)
    assert "jit_step(30)" in run.hlo_protos and len(run.hlo_protos) == 16
    # XProf's tool names; the op profile and HLO stats are ours (XLA:CPU thunks); no allocator events.
    assert run.tools == [
        "overview_page",
        "input_pipeline_analyzer",
        "op_profile",
        "hlo_stats",
        "trace_viewer",
        "memory_viewer",
        "graph_viewer",
        "framework_op_stats",
        "pod_viewer",  # 20 steps (XProf's pod viewer keeps the first and last)
    ]
    gpu = xw.sample_run("gpu")
    assert str(gpu.files["tw003"]).endswith(".xplane.pb.gz") and len(gpu.hlo_protos) == 16
    assert gpu.tools == [
        "overview_page",
        "input_pipeline_analyzer",
        "op_profile",
        "hlo_stats",
        "trace_viewer",
        "memory_profile",
        "memory_viewer",
        "graph_viewer",
        "kernel_stats",
        "framework_op_stats",
        "roofline_model",
    ]


def test_list_runs_and_latest():
    runs = xw.list_runs(PROFILES / "tf_keras_cpu")
    assert list(runs["run"]) == ["2026_11_22_03_16_08", "2026_11_22_03_16_48"]
    assert runs["hosts"].tolist() == [["vm"], ["vm"]]
    assert xw.load_run(PROFILES / "tf_keras_cpu").name == "2026_11_22_03_16_48"
    multi = xw.load_run(PROFILES / "tf_gpu_multiworker")
    assert multi.hosts == ["34.83.195.179_6003", "34.83.195.180_6003"]


def test_devices():
    tpu = xw.load_run(PROFILES / "tpu_v6e_inference").devices
    chips = tpu[tpu.kind == "TPU"]
    assert len(chips) == 4 and set(chips.model) == {"TPU v6 Lite"}
    assert chips.peak_flops.iloc[0] == pytest.approx(918e12)
    # XProf's roofline shows 1525.5 GiB/s for this chip: the same bytes/s.
    assert chips.peak_hbm_bw.iloc[0] / 2**30 == pytest.approx(1525.5, abs=0.05)
    gpu = xw.load_run(PROFILES / "tf_gpu_multiworker").devices
    assert (gpu.kind == "GPU").sum() == 16  # 8 GPUs on each of 2 hosts
    # XProf's roofline: peak_hbm_bw 836.372 GiB/s.
    assert gpu[gpu.kind == "GPU"].peak_hbm_bw.iloc[0] / 2**30 == pytest.approx(836.372, abs=1e-3)
    # The 2020 V100 planes name no vendor: XProf knows no peak (0) and calls them "GPU".
    assert gpu[gpu.kind == "GPU"].peak_flops.iloc[0] == 0
    assert set(gpu[gpu.kind == "GPU"].model) == {"GPU"}
    assert "XProf shows 0" in gpu[gpu.kind == "GPU"].peak_flops_source.iloc[0]
    assert chips.peak_flops_source.iloc[0] == "profile"
    amd = xw.load_run(PROFILES / "amd_jax_gemm_mi300").devices
    mi300 = amd[amd.kind == "GPU"]
    assert len(mi300) == 8 and set(mi300.model) == {"AMD GPU - gfx942"}  # XProf's run environment
    # XProf's roofline of this run: 1307.4432 TFLOP/s (304 CUs x 2.1 GHz x 2048), 2662.4 GB/s.
    assert mi300.peak_flops.iloc[0] == pytest.approx(1307.4432e12, rel=1e-12)
    assert mi300.peak_hbm_bw.iloc[0] == 2662.4e9


def test_events_frame():
    run = xw.sample_run()
    ev = run.events(line="python")
    assert len(ev) == run.xspace().plane("/host:CPU").line("python").start_ps.size
    assert set(ev.columns) == {"host", "plane", "line", "name", "start_ps", "duration_ps", "metadata_id"}
    assert ev.start_ps.dtype == np.int64 and (ev.duration_ps >= 0).all()
    assert run.events(plane="no such plane").empty


# --- bad input: always a ProfileError that names the file -------------------------


def _error(path, func=xw.load_run):
    with pytest.raises(xw.ProfileError) as info:
        func(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_missing_path(tmp_path):
    assert "no such" in _error(tmp_path / "nope")


def test_logdir_without_plugins_profile(tmp_path):
    assert "plugins/profile" in _error(tmp_path, xw.list_runs)
    assert "plugins/profile" in _error(tmp_path)


def test_run_without_profile_files(tmp_path):
    (tmp_path / "plugins" / "profile" / "run1").mkdir(parents=True)
    (tmp_path / "plugins" / "profile" / "run1" / "notes.txt").write_text("hi")
    assert "no run" in _error(tmp_path)


@pytest.mark.parametrize(
    "content, words",
    [
        (b"", "empty"),
        (b"hello, this is a text file\n" * 20, "not"),
        (os.urandom(4096), "not"),
        (b"\x1f\x8b\x08\x00garbage", "gzip"),
    ],
    ids=["empty", "text", "random", "bad-gzip"],
)
def test_bad_files(tmp_path, content, words):
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(content)
    message = _error(path)
    assert words in message


@pytest.mark.parametrize("keep", [0.999, 0.5, 0.1, 0.001])
def test_truncated_files(tmp_path, keep):
    data = (PROFILES / "jax_mlp_cpu/plugins/profile/2026_11_22_03_11_56/vm.xplane.pb").read_bytes()
    path = tmp_path / "cut.xplane.pb"
    path.write_bytes(data[: int(len(data) * keep)])
    assert "truncated" in _error(path)


def test_gzip_round_trip(tmp_path):
    src = PROFILES / "tpu_v6e_inference/plugins/profile/2025_tpu_inference/tpu_host.xplane.pb"
    run_dir = tmp_path / "plugins" / "profile" / "r"
    run_dir.mkdir(parents=True)
    (run_dir / "tpu_host.xplane.pb.gz").write_bytes(gzip.compress(src.read_bytes()))
    (tmp_path / "other").mkdir()
    shutil.copy(src, tmp_path / "other" / "plain.xplane.pb")
    a = xw.load_run(tmp_path).xspace()
    b = xw.load_run(tmp_path / "other" / "plain.xplane.pb").xspace()
    assert (a.host, b.host) == ("tpu_host", "plain")
    assert a.event_count == b.event_count == 26723


def test_unknown_host_and_module():
    run = xw.sample_run()
    with pytest.raises(KeyError):
        run.xspace("other")
    with pytest.raises(KeyError, match="modules"):
        run.memory_viewer("jit_nothing(1)")


def test_no_hlo_modules_says_why():
    run = xw.load_run(PROFILES / "tf_keras_cpu")
    status = run.tool_status().set_index("tool")
    assert not status.at["memory_viewer", "available"]
    assert "no HLO modules" in status.at["memory_viewer", "reason"]
    with pytest.raises(xw.ProfileError, match="no HLO modules"):
        run.memory_viewer()
    assert isinstance(run.events(), pd.DataFrame)


def test_fsspec_url_logdir():
    """A logdir behind a URL (here fsspec's in-memory filesystem, as gs:// would be)."""
    fsspec = pytest.importorskip("fsspec")
    mem = fsspec.filesystem("memory")
    src = PROFILES / "tf_keras_cpu/plugins/profile"
    for run_dir in sorted(src.iterdir()):
        for f in run_dir.iterdir():
            mem.pipe(f"/logdir/plugins/profile/{run_dir.name}/{f.name}", f.read_bytes())
    mem.pipe(
        "/logdir/plugins/profile/2026_11_22_03_16_48/extra.xplane.pb.gz",
        gzip.compress((src / "2026_11_22_03_16_48/vm.xplane.pb").read_bytes()),
    )
    runs = xw.list_runs("memory://logdir")
    assert list(runs.run) == ["2026_11_22_03_16_08", "2026_11_22_03_16_48"]
    assert runs.hosts.iloc[1] == ["extra", "vm"]
    run = xw.load_run("memory://logdir")
    assert run.name == "2026_11_22_03_16_48" and run.hosts == ["extra", "vm"]
    local = xw.load_run(src / "2026_11_22_03_16_48").xspace()
    assert run.xspace("vm").event_count == run.xspace("extra").event_count == local.event_count
    with pytest.raises(xw.ProfileError, match="no such"):
        xw.load_run("memory://nowhere")


def test_huge_file_is_refused_up_front(tmp_path, monkeypatch):
    """A file that cannot fit in free memory fails with a ProfileError, not an OOM kill."""
    from xprof_widgets.io import xspace

    src = PROFILES / "jax_mlp_cpu/plugins/profile/2026_11_22_03_11_56/vm.xplane.pb"
    monkeypatch.setattr(xspace, "available_memory_bytes", lambda: src.stat().st_size)  # pretend: little free
    message = _error(src)
    assert "too large to open here" in message


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize("what", ["lines", "planes"])
def test_many_planes_or_lines_are_refused_before_they_take_the_memory(tmp_path, monkeypatch, what, native):
    """A small file may hold millions of empty planes or lines, each an object in memory
    (60x the file's bytes): with too little free for them, a ProfileError naming the file
    and what it holds, before they are made; with enough, the file opens."""
    from xprof_widgets.io import native as native_loops
    from xprof_widgets.io import xspace

    if native and not native_loops.available():
        pytest.skip(f"the compiled loops are not built here: {native_loops.why_not()}")
    if not native:
        monkeypatch.setattr(native_loops, "_LIB", None)
    space = schema.XSpace()
    if what == "lines":
        host = space.planes.add(name="/host:CPU", id=1)
        for i in range(100_000):  # 51 MB at open, for a 1.6 MB file
            host.lines.add(id=i)
    else:
        for i in range(40_000):  # 61 MB at open, for a 0.6 MB file
            space.planes.add(id=i, name=f"/custom:{i}")
    path = tmp_path / "host.xplane.pb"
    path.write_bytes(space.SerializeToString())
    monkeypatch.setattr(xspace, "available_memory_bytes", lambda: 40 * 2**20)  # pretend: 40 MiB free
    message = _error(path, lambda p: read_xspace(p, cache=False))
    assert "too large to open here" in message and f"{what}" in message, message
    monkeypatch.setattr(xspace, "available_memory_bytes", lambda: 4 * 2**30)
    opened = read_xspace(path, cache=False)
    assert (len(opened.planes[0].lines) if what == "lines" else len(opened.planes)) == (
        100_000 if what == "lines" else 40_000
    )


def _event(stats, tail=b""):
    """An XEvent-like payload: field 1 (varint), then repeated field 4 (LENGTH) records, then `tail`."""
    out = b"\x08\x05"
    for payload in stats:
        out += b"\x22" + varint(len(payload)) + payload
    return out + tail


@pytest.mark.parametrize("block", [2, 1 << 16])
def test_repeated_run_equals_the_general_decoder(monkeypatch, block):
    """Stat runs of any length (none, long payloads with 2-byte lengths, a later field after
    them) come back as decode_fields gives them; an unusual layout falls back to it."""
    monkeypatch.setattr(wire, "BLOCK_RECORDS", block)
    rng = np.random.default_rng(1)
    records = []
    for i in range(40):
        stats = [bytes(rng.integers(0, 256, int(rng.choice([0, 3, 200])), dtype=np.uint8)) for _ in range(i % 5)]
        records.append(_event(stats, tail=b"\x28\x07" if i % 3 == 0 else b""))
    buf, size = wire.padded(b"".join(records))
    data = np.frombuffer(buf, dtype=np.uint8)
    bounds = np.cumsum([0] + [len(r) for r in records])
    starts, stops = bounds[:-1] + 2, bounds[1:]  # after field 1
    want = wire.decode_fields(data, starts, stops, lengths=(4,)).ranges[4]
    got = wire.repeated_run(data, starts, stops, 4)
    assert len(got[0]) == sum(i % 5 for i in range(40))
    for w, g in zip(want, got):
        assert g.tolist() == w.tolist()
    # Field 2 after the stats (allowed by protobuf, never written): the general decoder decides.
    odd = records[:3] + [_event([b"ab"], tail=b"\x10\x01") + b""] + records[3:]
    buf, _ = wire.padded(b"".join(odd))
    data = np.frombuffer(buf, dtype=np.uint8)
    bounds = np.cumsum([0] + [len(r) for r in odd])
    starts, stops = bounds[:-1] + 2, bounds[1:]
    want = wire.decode_fields(data, starts, stops, lengths=(4,)).ranges[4]
    for w, g in zip(want, wire.repeated_run(data, starts, stops, 4)):
        assert g.tolist() == w.tolist()


_ONEOF = {
    "double_value": 2,
    "uint64_value": 3,
    "int64_value": 4,
    "str_value": 5,
    "bytes_value": 6,
    "ref_value": 7,
    "compressed_str_value": 8,
}


def _random_stat(rng):
    def pick(values):  # Python ints past 2**53 stay exact
        return values[int(rng.integers(len(values)))]

    stat = schema.XStat(metadata_id=pick([0, 1, 5, 127, 128, 300, 1 << 20, (1 << 63) - 1]))
    kind = pick(list(_ONEOF) + ["none"])
    big = [0, 1, 127, 128, 1 << 32, (1 << 56) - 1, 1 << 56, (1 << 63) - 1]
    if kind == "double_value":
        stat.double_value = pick([0.0, -1.5, 3e300, float(rng.standard_normal())])
    elif kind in ("uint64_value", "ref_value"):
        setattr(stat, kind, pick(big + [(1 << 64) - 1, 1 << 63]))
    elif kind == "int64_value":
        stat.int64_value = pick(big + [-1, -(1 << 63), -300])
    elif kind == "str_value":
        stat.str_value = "é" * pick([0, 1, 70, 200])
    elif kind in ("bytes_value", "compressed_str_value"):
        setattr(stat, kind, bytes(rng.integers(0, 256, pick([0, 3, 300]), dtype=np.uint8)))
    return stat


@pytest.mark.parametrize("block", [3, 1 << 16])
def test_decode_keyed_equals_protobuf(monkeypatch, block):
    """XStat records of every value kind and size (one- and many-byte ids, 1- to 10-byte varints,
    empty and long strings, no value), plus layouts writers do not produce (value before the id,
    a value set twice, an unknown field), decode as protobuf parses them."""
    monkeypatch.setattr(wire, "BLOCK_RECORDS", block)
    rng = np.random.default_rng(7)
    payloads = [_random_stat(rng).SerializeToString() for _ in range(600)]
    payloads += [
        b"\x20\x05\x08\x03",  # int64 5, then id 3
        b"\x08\x03\x20\x05\x18\x07",  # int64 then uint64: the last one wins
        b"\x08\x03\x20\x05\x48\x01",  # an unknown field 9 after the value
        b"\x08\x03",  # no value
        b"",  # nothing
        b"\x08\x81\x01\x11" + np.float64(2.5).tobytes(),  # a 2-byte id, a double
    ]
    buf, _ = wire.padded(b"".join(payloads))
    data = np.frombuffer(buf, dtype=np.uint8)
    bounds = np.cumsum([0] + [len(p) for p in payloads])
    kinds = dict(scalars=(2, 3, 4, 7), lengths=(5, 6, 8))
    owner = np.arange(len(payloads)) * 3  # any owners, as the caller gives them
    got = wire.decode_keyed_by_key(data, bounds[:-1], bounds[1:], owner=owner, **kinds)
    _check_by_key(data, list(zip(owner.tolist(), payloads)), got)
    # Some keys only (one-byte, two-byte, 0, and past the table): theirs are all there, as above.
    keys = np.zeros(400, bool)
    keys[[0, 5, 128, 300]] = True
    got = wire.decode_keyed_by_key(data, bounds[:-1], bounds[1:], owner=owner, keys=keys, **kinds)
    _check_by_key(data, list(zip(owner.tolist(), payloads)), got, only={0, 5, 128, 300})
    # The same records as runs of a repeated field 4 in event-like records (0 to 9 per run),
    # found and decoded in one pass; a record's owner is its run.
    rng.shuffle(payloads)
    cuts = np.cumsum([0] + [int(rng.integers(0, 10)) for _ in range(len(payloads) // 4)])
    runs = [payloads[a:b] for a, b in zip(cuts[:-1], cuts[1:])] + [payloads[cuts[-1] :]]
    # One run is followed by a field 2 (allowed, never written): its block takes the general decoder.
    events = [_event(run, tail=b"\x10\x01" if i == 5 else b"") for i, run in enumerate(runs)]
    buf, _ = wire.padded(b"".join(events))
    data = np.frombuffer(buf, dtype=np.uint8)
    bounds = np.cumsum([0] + [len(r) for r in events])
    got = wire.decode_keyed_by_key(data, bounds[:-1] + 2, bounds[1:], repeated=4, **kinds)  # after field 1
    _check_by_key(data, [(i, p) for i, run in enumerate(runs) for p in run], got)
    got = wire.decode_keyed_by_key(data, bounds[:-1] + 2, bounds[1:], repeated=4, keys=keys, **kinds)
    _check_by_key(data, [(i, p) for i, run in enumerate(runs) for p in run], got, only={0, 5, 128, 300})


def _check_by_key(data, records, by_key, only=None):
    """`decode_keyed_by_key` holds every record [(owner, XStat bytes)] as protobuf parses it,
    under its key, each key's records in their order: owner, value field, and the value
    (a scalar's bits, a LENGTH value's bytes). `only`: the keys to compare (others may be
    left out)."""
    want = {}
    for owner, payload in records:
        stat = schema.XStat.FromString(payload)
        kind = stat.WhichOneof("value")
        if kind in ("str_value", "bytes_value", "compressed_str_value"):
            value = stat.str_value.encode() if kind == "str_value" else getattr(stat, kind)
        elif kind == "double_value":
            value = int(np.float64(stat.double_value).view(np.uint64))
        else:
            value = getattr(stat, kind) & 0xFFFFFFFFFFFFFFFF if kind else 0
        key = stat.metadata_id & 0xFFFFFFFFFFFFFFFF
        want.setdefault(key, []).append((owner, _ONEOF[kind] if kind else 0, value))
    got = {}
    for key, r in by_key.items():
        texts = [None] * len(r) if r.text_start is None else zip(r.text_start.tolist(), r.text_stop.tolist())
        for owner, number, raw, text in zip(r.owner.tolist(), r.number.tolist(), r.raw.tolist(), texts):
            value = bytes(data[text[0] : text[1]]) if number in (5, 6, 8) else raw
            if text is not None and number not in (5, 6, 8):
                assert text == (0, 0), (key, owner)  # no payload range on a record without one
            got.setdefault(int(key), []).append((owner, number, value))
    if only is not None:
        want = {k: v for k, v in want.items() if k in only}
        got = {k: v for k, v in got.items() if k in only}
    assert got == want


def test_stat_table_equals_protobuf(pair):
    """`stat_table` reads every stat of (sampled) events as XProf's XStatVisitor does (IntOrUintValue,
    DoubleValue, StrOrRefValue), its metadata's stats included; the same when the line's stats are
    shared (`sharing_stats`) or kept by the line (a later call for some of the names it decoded last)
    and the table is cut to some events and names."""
    ours, ref = pair
    checked = 0
    for line, names, sample, wants in _sampled_stats(ours, ref, 300):
        with ours.sharing_stats([line]):
            shared = line.stat_table(events=sample)
        some = sorted({n for want in wants for n in want})[:2]
        with ours.sharing_stats([line], names=some):  # decoded once for readers of these names
            shared_some = line.stat_table(names=some[:1], events=sample)
            assert line.stat_table(names=some, events=sample) is not shared_some
            assert ours._shared_tables[id(line)]["table"] is not None
            other = line.stat_table(events=sample)  # all stats: not the shared decode of `some`
        assert set(shared_some.names) <= set(some[:1])
        if len(line) > SMALL_LINE:  # (a small line: decoded with the others, `_SmallLines`)
            line.stat_table(names=some)  # every event's stats of `some`: the line keeps them
            assert line._kept_stats is not None and line._kept_stats[0] == set(some)
        kept_some = line.stat_table(names=some[:1], events=sample)
        assert set(kept_some.names) <= set(some[:1])
        for table in (line.stat_table(events=sample), shared, other):
            columns = {}
            for j, (i, want) in enumerate(zip(sample, wants)):
                assert set(want) <= table.names
                for name, s in want.items():
                    if name in some[:1]:  # the shared and kept tables of a few names read as the others
                        assert shared_some.str_column(name)[j] == table.str_column(name)[j]
                        assert kept_some.str_column(name)[j] == table.str_column(name)[j]
                        assert kept_some.int_column(name)[j] == table.int_column(name)[j]
                    if name not in columns:
                        columns[name] = (table.int_column(name), table.float_column(name), table.str_column(name))
                    ints, floats, strs = columns[name]
                    kind = s.WhichOneof("value")
                    want_int = s.uint64_value if kind == "uint64_value" else s.int64_value
                    assert ints[j] == np.uint64(want_int & 0xFFFFFFFFFFFFFFFF).view(np.int64), (line.name, i, name)
                    assert floats[j] == s.double_value
                    want_str = names.get(s.ref_value, "") if kind == "ref_value" else s.str_value
                    assert strs[j] == want_str, (line.name, i, name)
                    checked += 1
    assert checked > 0


@pytest.mark.parametrize("block", [3, 1 << 16])
def test_decode_head_equals_the_general_decoder(monkeypatch, block):
    """An event's leading fields (metadata id, offset, duration: each may be absent, values of
    every varint length, negative offsets) and where its stats begin, as decode_records reads
    them, layouts writers never produce included (fields out of order, repeated, other types)."""
    monkeypatch.setattr(wire, "BLOCK_RECORDS", block)
    rng = np.random.default_rng(3)
    sizes = [0, 1, 127, 128, 1 << 20, (1 << 49) - 1, 1 << 49, (1 << 56) - 1, 1 << 56, (1 << 63) - 1]
    events = []
    for _ in range(300):
        fields = b""
        for number in (1, 2, 3):
            if rng.random() < 0.8:
                value = sizes[int(rng.integers(len(sizes)))]
                if number == 2 and rng.random() < 0.1:
                    value = (1 << 64) - 5  # a negative int64
                fields += bytes([number << 3]) + varint(value)
        fields += b"".join(b"\x22\x02\x08\x01" for _ in range(int(rng.integers(0, 3))))
        events.append(fields)
    events += [b"\x10\x05\x08\x07", b"\x08\x01\x08\x02\x18\x03", b"\x08\x01\x12\x01\x00", b"\x18\x01\x10\x02", b""]
    # Fields after the stats, stats split by another field, an unknown field first.
    events += [b"\x08\x01\x22\x02\x08\x01\x10\x05", b"\x08\x01\x22\x02\x08\x01\x28\x01\x22\x02\x08\x02"]
    events += [b"\x48\x01\x08\x07\x10\x02\x18\x03", b"\x22\x02\x08\x01\x08\x09"]
    records = [b"\x22" + varint(len(e)) + e for e in events]
    buf, size = wire.padded(b"".join(records))
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = np.cumsum([0] + [len(r) for r in records])[:-1]
    got = wire.decode_head(data, pos, (1, 2, 3), end=size)
    # As protobuf's parser reads them: any order, the last value winning; and the stats
    # read from `rest` to the record's end are all of the event's.
    from xprof_widgets.io import schema

    starts, stops = wire.record_payloads(data, pos, size)
    parsed = [schema.XEvent.FromString(bytes(buf[a:b])) for a, b in zip(starts.tolist(), stops.tolist())]
    for n, field in ((1, "metadata_id"), (2, "offset_ps"), (3, "duration_ps")):
        assert got.scalar[n].tolist() == [getattr(e, field) % 2**64 for e in parsed], field
    owner, _, _ = wire.repeated_run(data, pos + got.rest, stops, 4)
    assert np.bincount(owner, minlength=len(pos)).tolist() == [len(e.stats) for e in parsed]


def test_record_payloads_of_long_and_short_lengths():
    """Where each LENGTH record's payload starts and ends, lengths of one to three varint
    bytes mixed (one-byte ones read in one pass, the others walked)."""
    rng = np.random.default_rng(5)
    sizes = rng.choice([0, 1, 127, 128, 300, 16383, 16384, 70000], 400).tolist()
    records = [b"\x22" + varint(n) + b"x" * n for n in sizes]
    buf, _ = wire.padded(b"".join(records))
    data = np.frombuffer(buf, dtype=np.uint8)
    pos = np.cumsum([0] + [len(r) for r in records])[:-1]
    start, stop = wire.record_payloads(data, pos)
    assert start.tolist() == (pos + [1 + len(varint(n)) for n in sizes]).tolist()
    assert stop.tolist() == (pos + [len(r) for r in records]).tolist()


def test_corrupt_stats_name_the_file(tmp_path):
    """Stats decode after the file opened: a stat whose bytes do not decode (here a varint that
    never ends) is a ProfileError naming the file and the line, for the bulk reader (memory
    profile) and the per-line one (trace details) alike."""
    src = PROFILES / "tf_keras_cpu/plugins/profile/2026_11_22_03_16_48/vm.xplane.pb"  # BFC allocator events
    run = xw.load_run(str(src.parent))
    space = run.xspace()
    line = next(ln for ln in space.plane("/host:CPU").lines if len(ln) > 100)
    owner, s, e = line._stat_records(np.array([50]))
    data = bytearray(src.read_bytes())
    data[s[0] + 1 : e[0]] = b"\xff" * (e[0] - s[0] - 1)  # the stat's id: continuation bits to its end
    folder = tmp_path / "plugins" / "profile" / "bad"
    folder.mkdir(parents=True)
    (folder / src.name).write_bytes(bytes(data))
    bad = xw.load_run(str(folder))  # the file still opens: events are intact
    with pytest.raises(xw.ProfileError, match=r"bad/.*stats that do not decode on line"):
        bad.memory_profile()
    with pytest.raises(xw.ProfileError, match="stats that do not decode"):
        bad.xspace().plane("/host:CPU").lines[space.plane("/host:CPU").lines.index(line)].stats()


@pytest.mark.parametrize("block", [7, 1 << 21])
@pytest.mark.parametrize("dtype", [np.int16, np.uint32])
def test_order_by_key_is_a_stable_sort(monkeypatch, block, dtype):
    """The counting sort behind stat tables and trace rows: numpy's stable argsort, with or
    without positions taken out, in blocks of a few positions or one block."""
    monkeypatch.setattr(sorting, "BLOCK", block)
    keys = np.random.default_rng(0).integers(0, 40, 1000).astype(dtype)
    keys[500:] = 3  # a long run of one key across blocks
    order, counts = sorting.order_by_key(keys)
    assert order.dtype == np.int32
    np.testing.assert_array_equal(order, np.argsort(keys, kind="stable"))
    np.testing.assert_array_equal(counts, np.bincount(keys))
    out = np.flatnonzero(keys % 5 == 0)
    kept = np.setdiff1d(np.arange(len(keys)), out)
    order, counts = sorting.order_by_key(keys, taken_out=out)
    np.testing.assert_array_equal(order, kept[np.argsort(keys[kept], kind="stable")])
    np.testing.assert_array_equal(counts, np.bincount(keys[kept], minlength=len(counts)))


def test_tool_registry_and_rules_agree():
    """Every tool of the registry has its availability rule, in the same order (the order
    `run.tool_status()` and a host summary list them)."""
    from xprof_widgets.analysis.core.availability import STATUS
    from xprof_widgets.tools import TOOLS

    assert [t.name for t in TOOLS] == list(STATUS)
    assert all(t.status is STATUS[t.name] for t in TOOLS)


# --- legal encodings writers do not produce: fields in any order, split, repeated --------


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_any_field_order_reads_as_protobuf(monkeypatch, tmp_path, compiled):
    """Protobuf reads fields in any order, a repeated field split into runs, a field written
    twice (the last value wins), unknown fields skipped: an event so written gives the
    same metadata id, times and stats as the real file (compiled loops and numpy alike)."""
    from xprof_widgets.io import native

    if compiled and not native.available():
        pytest.skip(f"the compiled loops are not built here: {native.why_not()}")
    if not compiled:
        monkeypatch.setattr(native, "_LIB", None)
    source = next(Path(xw.sample_run("gpu").path).glob("*.xplane.pb*"))
    if source.name.endswith(".gz"):
        plain = tmp_path / "plain.xplane.pb"
        plain.write_bytes(gzip.decompress(source.read_bytes()))
        source = plain
    scrambled = tmp_path / "scrambled.xplane.pb"
    # Every event rewritten (fields in any order, twice, unknown fields, stats split, keys twice).
    space = schema.XSpace.FromString(source.read_bytes())
    scrambled.write_bytes(rewrite_space(space, np.random.default_rng(7)))
    want, got = read_xspace(source, cache=False), read_xspace(scrambled, cache=False)
    compared = 0
    for plane, other in zip(want.planes, got.planes, strict=True):
        for line, mine in zip(plane.lines, other.lines, strict=True):
            np.testing.assert_array_equal(mine.metadata_id, line.metadata_id)
            np.testing.assert_array_equal(mine.start_ps, line.start_ps)
            np.testing.assert_array_equal(mine.event_duration_ps, line.event_duration_ps)
            if len(line):
                every = line.stats()
                pd.testing.assert_frame_equal(mine.stats(), every)
                for name in list(every.columns)[:3]:  # one stat asked for: the others skipped by key
                    pd.testing.assert_frame_equal(mine.stats(names=[name]), line.stats(names=[name]))
                compared += len(line)
    assert compared > 1000


@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
@pytest.mark.parametrize(
    "event",
    [
        b"\x22" + varint(2**63) + b"\x08\x01",  # an event whose length is 2**63
        b"\x22" + varint(2**64 - 3) + b"\x08\x01",  # one that wraps around to -3
        b"\x22\x04\x08\x01\x22" + varint(2**63 + 1),  # a stat whose length is 2**63 + 1
        b"\x22\x05\x08\x01\x22" + varint(2**64 - 4) + b"\x08",  # a stat that wraps around
        b"\x22\x04\x08\x01\x22\x7f",  # a stat past its event
    ],
    ids=["event-2^63", "event-wraps", "stat-2^63", "stat-wraps", "stat-past"],
)
def test_huge_lengths_are_a_profile_error(monkeypatch, tmp_path, compiled, event):
    """Lengths of 2**63 and more, or that wrap around int64, in an event or stat record: a
    ProfileError naming the file (never an IndexError, nor a walk that loops), both ways."""
    from xprof_widgets.io import native

    if compiled and not native.available():
        pytest.skip(f"the compiled loops are not built here: {native.why_not()}")
    if not compiled:
        monkeypatch.setattr(native, "_LIB", None)
    good = b"\x22\x06\x08\x01\x10\x02\x18\x03"
    line = _len_field(2, b"ops") + good * 20_000 + event + good  # a long run: walked in chunks
    plane = b"\x08\x01" + _len_field(2, b"/host:CPU") + _len_field(3, line)
    path = tmp_path / "huge.xplane.pb"
    path.write_bytes(_len_field(1, plane))
    with pytest.raises(xw.ProfileError) as caught:
        space = read_xspace(path, cache=False)
        for plane in space.planes:
            for line in plane.lines:
                line.stats()
    assert str(path) in str(caught.value)


def _many_small_planes(path, planes=90, bad=None):
    """A file of `planes` GPU planes, each one line of 0-3 events with stats of every kind
    (int, uint, double, str, ref, bytes; some events with none); `bad`: the plane whose
    first stat's id is a varint that never ends."""
    space = schema.XSpace()
    for p in range(planes):
        plane = space.planes.add(id=p + 1, name=f"/device:GPU:{p}")
        for k, name in enumerate(["correlation_id", "hlo_op", "flops", "ref"], start=1):
            plane.stat_metadata[k].id = k
            plane.stat_metadata[k].name = name
        plane.event_metadata[1].id = 1
        plane.event_metadata[1].name = f"kernel{p % 7}"
        line = plane.lines.add(id=1, name="Stream #1", timestamp_ns=1000)
        for i in range(p % 4):
            ev = line.events.add(metadata_id=1, offset_ps=i * 100, duration_ps=50)
            if (p + i) % 5 == 0:
                continue  # no stats
            ev.stats.add(metadata_id=1, uint64_value=p * 10 + i)
            ev.stats.add(metadata_id=2, str_value=f"op{p}.{i}")
            ev.stats.add(metadata_id=3, double_value=p / 3)
            if i % 2:
                ev.stats.add(metadata_id=4, ref_value=1)  # the ref names stat metadata 1
                ev.stats.add(metadata_id=2, bytes_value=b"x")
    data = space.SerializeToString()
    path.write_bytes(data)
    if bad is not None:
        first = space.planes[bad].lines[0].events[0].stats[0].SerializeToString()
        at = data.index(first)
        path.write_bytes(data[:at] + b"\x08" + b"\xff" * (len(first) - 1) + data[at + len(first) :])


def _plain(columns):
    """Stat columns as lists, missing values None (NaN and NA compare unequal)."""
    return {k: [None if pd.isna(x) else x for x in pd.Series(v, dtype=object)] for k, v in columns.items()}


def _columns_of(space):
    return [_plain(line.stat_columns()) for plane in space.planes for line in plane.lines]


@pytest.mark.parametrize("chunk", [5, 1 << 18])
def test_small_lines_decoded_together_equal_one_at_a_time(tmp_path, monkeypatch, chunk):
    """A file of many small lines has their stats decoded many lines at a time (chunks of
    `SmallLines.CHUNK` events, the last few kept): every line's stats equal those of a
    decode of that line alone, also when chunks are small and dropped (asked out of
    order), and for a few events of a line."""
    from xprof_widgets.io.xspace import SmallLines

    path = tmp_path / "h.xplane.pb"
    _many_small_planes(path)
    monkeypatch.setattr(SmallLines, "MANY", 10**9)  # each line on its own
    alone = _columns_of(read_xspace(path))
    monkeypatch.setattr(SmallLines, "MANY", 64)
    monkeypatch.setattr(SmallLines, "CHUNK", chunk)
    space = read_xspace(path)
    assert _columns_of(space) == alone
    assert space._small_lines._where  # (the chunks were used)
    lines = [line for plane in space.planes for line in plane.lines]
    for k in [80, 3, 77, 2, 50]:  # out of order: chunks decoded again
        line = lines[k]
        assert _plain(line.stat_columns()) == alone[k]
    line = lines[7]  # 3 events
    got = line.stat_table(names=["hlo_op"], events=np.array([2])).str_column("hlo_op")
    assert list(got) == [alone[7]["hlo_op"][2] or ""]


def test_small_lines_with_a_bad_stat_name_the_line(tmp_path):
    """A stat that does not decode among many small lines: a ProfileError naming the file
    and the line (the chunk falls back to each line's own decode), the other lines read."""
    path = tmp_path / "h.xplane.pb"
    _many_small_planes(path, bad=6)
    space = read_xspace(path)
    with pytest.raises(xw.ProfileError, match=r"h.xplane.pb.*do not decode on line 'Stream #1' of /device:GPU:6"):
        space.planes[6].lines[0].stat_columns()
    assert space.planes[9].lines[0].stat_columns()["correlation_id"].tolist() == [90]


def _small_line(rng, k, damage=False):
    """The payload of a small XLine in a random layout: its fields in any order, some
    twice, unknown fields of every wire type, negative numbers, names that are not UTF-8,
    sometimes an event; with `damage`, sometimes a wrong wire type, a bad timestamp or a
    cut field."""
    fields = [
        wire_field(1, varint(int(rng.integers(-5, 2**40)))),
        _len_field(2, rng.choice([f"thread {k}".encode(), b"\xff\xfe bad", b"", "名前".encode()])),
        wire_field(3, varint(int(rng.choice([0, 1000, -1000, 2**50] + [2**60, -(2**60)] * damage)))),
        wire_field(9, varint(int(rng.integers(0, 2**50)))),
        wire_field(10, varint(int(rng.integers(-3, 1000)))),
        _len_field(11, rng.choice([b"", b"shown", b"\x80"])),
    ]
    fields = [f for f in fields if rng.random() < 0.8]
    fields += [fields[int(rng.integers(len(fields)))]] if fields and rng.random() < 0.3 else []
    if rng.random() < 0.3:  # unknown fields
        fields.append(
            rng.choice(
                [
                    varint(7 << 3) + varint(5),
                    varint(8 << 3 | 1) + b"12345678",
                    _len_field(12, b"xyz"),
                    varint(13 << 3 | 5) + b"abcd",
                ]
            )
        )
    rng.shuffle(fields)
    payload = b"".join(fields)
    odd = rng.random()
    if odd < 0.05:  # an event
        payload += _len_field(4, varint(1 << 3) + varint(1))
    elif not damage:
        pass
    elif odd < 0.08:  # a known field of the wrong wire type
        payload += _len_field(1, b"x") if rng.random() < 0.5 else varint(2 << 3) + varint(3)
    elif odd < 0.1 and payload:  # cut
        payload = payload[:-1]
    elif odd < 0.12:  # a group, or a wire type that does not exist
        payload += varint(14 << 3 | int(rng.choice([3, 4, 6, 7])))
    return payload


def wire_field(number, value):
    return varint(number << 3) + value


@pytest.mark.parametrize("native", [True, False], ids=["compiled", "numpy"])
def test_small_lines_read_together_equal_one_at_a_time(tmp_path, monkeypatch, native):
    """A plane of many small lines (a file may hold a million) is read in one pass
    (`_small_line_fields`); each line must come out as `_parse_line` reads it alone, in any
    layout protobuf allows, and where one is damaged the same ProfileError."""
    from xprof_widgets.io import native as native_module
    from xprof_widgets.io import xspace

    if not native:
        monkeypatch.setattr(native_module, "available", lambda: False)
    rng = np.random.default_rng(5)
    plane = schema.XPlane(id=1, name="/host:CPU").SerializeToString()
    for case in range(40):
        lines = [_small_line(rng, k, damage=case % 4 == 0) for k in range(int(rng.integers(2, 60)))]
        body = plane + b"".join(_len_field(3, line) for line in lines)
        path = tmp_path / f"{case}.xplane.pb"
        path.write_bytes(_len_field(1, body))
        original = xspace._parse_lines
        try:
            together = read_xspace(path)
        except xw.ProfileError as error:
            together = str(error)
        monkeypatch.setattr(
            xspace, "_parse_lines", lambda p, buf, s, e: [xspace._parse_line(p, buf, a, b) for a, b in zip(s, e)]
        )
        try:
            alone = read_xspace(path)
        except xw.ProfileError as error:
            alone = str(error)
        monkeypatch.setattr(xspace, "_parse_lines", original)
        if isinstance(alone, str):
            assert together == alone
            continue
        fields = ("id", "name", "display_id", "display_name", "timestamp_ns", "duration_ps")
        got = [tuple(getattr(ln, f) for f in fields) + (len(ln),) for ln in together.planes[0].lines]
        want = [tuple(getattr(ln, f) for f in fields) + (len(ln),) for ln in alone.planes[0].lines]
        assert got == want
        try:  # and as protobuf reads them, where it reads them (names in UTF-8)
            reference = schema.XSpace.FromString(path.read_bytes())
        except Exception:
            continue
        assert [
            (ln.id, ln.name, ln.display_id, ln.display_name, ln.timestamp_ns, ln.duration_ps)
            for ln in reference.planes[0].lines
        ] == [g[:6] for g in got]


@pytest.mark.parametrize("size", [1000, 3 * 2**20 + 5])
def test_read_padded_gives_the_file_then_zero_padding(tmp_path, size):
    """Small files in a bytearray, larger ones in memory mapped up front (`zeroed_buffer`):
    either way the file's bytes, then `wire.PADDING` zeros, writable as the reading wants."""
    from xprof_widgets.io import xspace

    data = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "h.xplane.pb"
    path.write_bytes(data)
    buf, got = xspace.read_padded(path)
    assert got == size and len(buf) == size + wire.PADDING
    assert bytes(buf[:size]) == data and bytes(buf[size:]) == bytes(wire.PADDING)
    view = np.frombuffer(buf, dtype=np.uint8)
    assert view.flags.writeable and buf[size - 1] == data[-1]
    assert isinstance(buf, bytearray) == (size < xspace._MAPPED_BYTES)


def _hand_made_lines(tmp_path, bad=()):
    """A host plane of five lines of 2,000 events each (line k's events are k+1 ps long;
    line k in `bad` has k of negative duration: a later bad line is longer, read first),
    written to a file."""
    space = schema.XSpace()
    plane = space.planes.add(id=1, name="/host:CPU")
    plane.event_metadata[1].id = 1
    plane.event_metadata[1].name = "op"
    for k in range(5):
        line = plane.lines.add(id=k, name=f"thread {k}", timestamp_ns=1000)
        for i in range(2000):
            line.events.add(metadata_id=1, offset_ps=10 * i, duration_ps=-3 if k in bad and i < k else k + 1)
    path = tmp_path / f"bad{'_'.join(map(str, bad))}.xplane.pb"
    path.write_bytes(space.SerializeToString())
    return path


def test_lines_read_two_at_a_time_equal_one_at_a_time(tmp_path, monkeypatch):
    """`_parsed_lines` reads a plane's lines on two threads where they hold enough bytes
    (here every plane, the threshold set to 0): every line's columns are those of the
    one-at-a-time reading, on a real file and a hand-made one; and the error of a file with
    two bad lines names the first in file order, as one at a time does."""
    paths = [_hand_made_lines(tmp_path), *profile_files()[:3]]
    one = {p: read_xspace(p, cache=False) for p in paths}
    monkeypatch.setattr(xspace, "_PARALLEL_LINE_BYTES", 0)
    for p in paths:
        two = read_xspace(p, cache=False)
        assert [pl.name for pl in two.planes] == [pl.name for pl in one[p].planes]
        for a, b in zip(one[p].planes, two.planes):
            assert [ln.name for ln in a.lines] == [ln.name for ln in b.lines]
            for x, y in zip(a.lines, b.lines):
                for col in ("start_ps", "event_duration_ps", "metadata_id", "record_pos", "stats_at"):
                    assert np.array_equal(getattr(x, col), getattr(y, col))
    with pytest.raises(xw.ProfileError, match="thread 1"):
        read_xspace(_hand_made_lines(tmp_path, bad=(1, 3)), cache=False)
    with pytest.raises(xw.ProfileError, match="thread 3"):
        read_xspace(_hand_made_lines(tmp_path, bad=(3,)), cache=False)


def test_a_file_read_in_two_halves_is_the_file_then_zero_padding(tmp_path, monkeypatch):
    """Without a progress callback a large file is read in two halves on two threads
    (`_read_halves`; here from 1 MiB on): the same bytes, then `wire.PADDING` zeros. A file
    that ends early (cut short while it was read: here the first half stops after 5,000
    bytes) reads as that short, every byte after them zero, though the second half read."""
    monkeypatch.setattr(xspace, "_PARALLEL_READ_BYTES", 2**20)
    size = 3 * 2**20 + 17
    data = np.random.default_rng(7).integers(1, 256, size, dtype=np.uint8).tobytes()
    path = tmp_path / "h.xplane.pb"
    path.write_bytes(data)
    assert xspace._in_halves(size) == ((xspace.os.cpu_count() or 1) >= 2)
    buf, got = xspace.read_padded(path)
    assert got == size and bytes(buf[:size]) == data and bytes(buf[size:]) == bytes(wire.PADDING)
    if not xspace._in_halves(size):
        return
    real, half = xspace.os.preadv, size // 2 // xspace.mmap.PAGESIZE * xspace.mmap.PAGESIZE

    def cut(fd, buffers, offset):  # the first half ends after 5,000 bytes
        if offset < half:
            want = max(0, min(5000 - offset, len(buffers[0])))
            return real(fd, [buffers[0][:want]], offset) if want else 0
        reads_second_half[0] = True
        return real(fd, buffers, offset)

    reads_second_half = [False]
    monkeypatch.setattr(xspace.os, "preadv", cut)
    buf, got = xspace.read_padded(path)
    assert got == 5000 and bytes(buf[:5000]) == data[:5000]
    assert not any(bytes(buf[5000:])) and reads_second_half[0]


@pytest.mark.parametrize("n,top", [(0, 1), (1, 5), (100, 50), (10_000, 300), (50, 2**63 + 5), (1000, 10**9)])
def test_distinct_ref_ids_are_numpys_unique(n, top):
    """`_distinct` (a table over a small range of ids, else a sort) gives what
    `np.unique(..., return_inverse=True)` gives: the ids sorted, each value's position."""
    from xprof_widgets.io.xspace import _distinct

    ids = np.random.default_rng(n).integers(0, top, n, dtype=np.uint64)
    got, want = _distinct(ids), np.unique(ids, return_inverse=True)
    assert got[0].dtype == want[0].dtype and got[0].tolist() == want[0].tolist()
    assert got[1].tolist() == want[1].tolist()


def _gpu_lines(space):
    return [line for p in space.planes if p.name.startswith("/device:GPU") for line in p.lines]


def test_decode_ahead_decodes_from_the_last_line_what_the_caller_would(monkeypatch):
    """`decode_ahead` decodes a plane's lines on a thread, last first, stopping at a line
    the caller decoded: what it keeps is what the caller's own decoding gives, and an
    error in a line is left to the caller (the thread ends quietly)."""
    monkeypatch.setattr(xspace, "SMALL_LINE", 0)  # (the AMD run's lines are short: all count)
    path = next((PROFILES / "amd_jax_conv_mi300").rglob("*.xplane.pb"))
    names = frozenset(["hlo_op", "tf_op", "program_id", "kernel_details"])
    lines = _gpu_lines(read_xspace(path))
    assert len(lines) >= 4
    xspace.decode_ahead(lines, names).join()
    fresh = _gpu_lines(read_xspace(path))
    for ahead, own in zip(lines, fresh):
        assert ahead._kept_stats is not None and ahead._kept_stats[0] >= names
        a, b = ahead.stat_table(names=names), own.stat_table(names=names)
        for name in ("hlo_op", "tf_op", "kernel_details"):
            assert np.array_equal(a.str_codes(name)[0], b.str_codes(name)[0])
            assert a.str_codes(name)[1].tolist() == b.str_codes(name)[1].tolist()
        assert np.array_equal(a.int_column("program_id"), b.int_column("program_id"))
    # The caller got to the last line first: the thread stops there, decoding nothing.
    lines = _gpu_lines(read_xspace(path))
    lines[-1].stat_table(names=names)
    xspace.decode_ahead(lines, names).join()
    assert all(line._kept_stats is None for line in lines[:-1])
    # A line that does not decode: the thread ends, the error is the caller's to meet.
    lines = _gpu_lines(read_xspace(path))
    errors = []
    monkeypatch.setattr("threading.excepthook", errors.append)
    broken = lines[-2]

    def stat_table(self, names=None, events=None, _real=xspace.Line.stat_table):
        if self is broken:
            raise xw.ProfileError(path, "has stats that do not decode")
        return _real(self, names, events)

    monkeypatch.setattr(xspace.Line, "stat_table", stat_table)
    xspace.decode_ahead(lines, names).join()
    assert not errors and lines[-1]._kept_stats is not None and lines[0]._kept_stats is None
