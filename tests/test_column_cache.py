"""The on-disk column cache (xprof_widgets/io/column_cache.py): a second open of an
unchanged file maps its decoded columns instead of decoding, gives the same results,
and never trusts an entry that is stale or damaged.

Every test writes its entries under its own tmp folder (XPROF_WIDGETS_CACHE_DIR); the
session's default one is set in conftest.py, so nothing reaches the user's ~/.cache.
"""

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import xprof_widgets as xw
from xprof_widgets.analysis import trace as T
from xprof_widgets.errors import ProfileError
from xprof_widgets.io import column_cache
from xprof_widgets.io.xspace import read_xspace

from .conftest import PROFILES

SOURCE = next(PROFILES.glob("jax_mlp_cpu/plugins/profile/*/*.xplane.pb"))
AN_HOUR_AGO = time.time() - 3600


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A cache folder of this test's own, the cache on, and small files cached too."""
    folder = tmp_path / "cache"
    monkeypatch.setenv(column_cache.ENV_DIR, str(folder))
    monkeypatch.delenv(column_cache.ENV_ENABLE, raising=False)
    monkeypatch.delenv(column_cache.ENV_MIN_BYTES, raising=False)
    monkeypatch.setattr(column_cache, "MIN_FILE_BYTES", 0)
    return folder


@pytest.fixture
def profile(tmp_path):
    """A copy of a real profile, last changed an hour ago (not "just written")."""
    path = tmp_path / "logdir" / "plugins" / "profile" / "2026_01_01_00_00_00" / "vm.xplane.pb"
    path.parent.mkdir(parents=True)
    shutil.copy(SOURCE, path)
    os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))
    return path


def _open(path):
    """A Run of `path`, with any cache entry its opening writes finished."""
    run = xw.load_run(path)
    column_cache.wait_for_writers()
    return run


def _from_cache(run):
    """Whether the run's file was opened from the cache (its bytes not read yet)."""
    return run.xspace()._data is None


def _entry(path):
    return column_cache.entry_dir(os.path.realpath(path))


def _results(run):
    """What tools compute from the columns and the stats, to compare two opens by."""
    trace = run.trace()
    space = run.xspace()
    busiest = max((ln for p in space.planes for ln in p.lines), key=len)
    return {
        "events": run.events(),
        "trace": trace.query(None, None, 2000),
        "tracks": trace.tracks,
        "hlo_stats": run.hlo_stats(),
        "op_profile": run.op_profile().to_dataframe(),
        "steps": run.overview().steps,
        "stats": busiest.stats(),
        "modules": run.modules,
    }


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for key in a:
        pd.testing.assert_frame_equal(a[key], b[key], obj=key)


def test_reopen_maps_the_cached_columns_and_gives_the_same_results(cache_dir, profile):
    first = _open(profile)
    assert not _from_cache(first)
    manifest = json.loads((_entry(profile) / "manifest.json").read_text())
    assert manifest["source"]["size"] == profile.stat().st_size
    assert manifest["events"] == first.xspace().event_count == 87808

    again = _open(profile)
    assert _from_cache(again)
    space = again.xspace()
    assert not max((ln for p in space.planes for ln in p.lines), key=len).start_ps.flags.writeable  # mapped
    _assert_same(_results(first), _results(again))
    assert space._data is not None  # stats were asked for: the file's bytes were read then


def test_events_share_the_columns_and_copy_on_write(cache_dir, profile):
    _open(profile)
    run = _open(profile)
    space = run.xspace()
    events = run.events()
    start = space.event_columns()[0]["start_ps"].to_numpy()
    assert np.shares_memory(events["start_ps"].to_numpy(), start)
    before = start[:3].copy()
    events.loc[0:2, "start_ps"] = -1  # the user's frame changes, the run's columns do not
    assert (events["start_ps"][:3] == -1).all()
    assert (start[:3] == before).all()
    assert (run.events()["start_ps"][:3] == before).all()
    line = max((ln for p in space.planes for ln in p.lines), key=len)
    one = run.events(line=line.name)
    assert np.shares_memory(one["start_ps"].to_numpy(), start)
    assert (one["start_ps"].to_numpy() == line.start_ps).all()


def test_a_changed_file_is_decoded_again_and_its_entry_replaced(cache_dir, profile, tmp_path):
    first = _open(profile)
    expected = first.events()
    # Same bytes, another mtime: not trusted.
    os.utime(profile, (AN_HOUR_AGO - 60, AN_HOUR_AGO - 60))
    run = _open(profile)
    assert not _from_cache(run)
    pd.testing.assert_frame_equal(run.events(), expected)
    assert _from_cache(_open(profile))  # the new entry is used next time
    # Another profile at the same path (another size): its own events, not the cached ones.
    other = next(PROFILES.glob("amd_jax_conv_mi300/plugins/profile/*/*.xplane.pb"))  # in a clone too
    shutil.copy(other, profile)
    os.utime(profile, (AN_HOUR_AGO, AN_HOUR_AGO))
    run = _open(profile)
    assert not _from_cache(run)
    # (the host is named after the file: compare the rest)
    pd.testing.assert_frame_equal(run.events().drop(columns="host"), xw.load_run(other).events().drop(columns="host"))
    manifest = json.loads((_entry(profile) / "manifest.json").read_text())
    assert manifest["source"]["size"] == other.stat().st_size


def _truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _garbage(path):
    path.write_bytes(os.urandom(path.stat().st_size))


def _bad_header(path):
    data = bytearray(path.read_bytes())
    data[10:40] = b"x" * 30
    path.write_bytes(bytes(data))


def _wrong_type(path):
    np.save(path, np.load(path).astype(np.float64))


def _positions_outside(path):
    positions = np.load(path)
    positions[-1] = np.iinfo(positions.dtype).max  # past the end of any file this test writes
    np.save(path, positions)


def _one_value(change):
    """Damage that changes one value of an array and keeps the file well formed (its header,
    length and type): only a check of every value finds it."""

    def damage(path):
        array = np.load(path)
        at = len(array) * 2 // 3
        array[at] = change(array[at], array)
        np.save(path, array)

    damage.__name__ = f"one_value_{change.__name__}"
    return damage


def _past_the_file(value, array):
    return min(int(value) + 1_000_000, np.iinfo(array.dtype).max)


def _negative(value, array):
    return -5


def _other(value, array):
    return value + 1


def _json_garbage(path):
    path.write_text('{"format": 1, "planes": [')


def _first_line(manifest):
    return next(line for plane in manifest["planes"] for line in plane["lines"])


def _wrong_layout(path):
    manifest = json.loads(path.read_text())
    _first_line(manifest)["rows"][1] += 5
    path.write_text(json.dumps(manifest))


def _wrong_types(path):
    manifest = json.loads(path.read_text())
    _first_line(manifest)["id"] = "not a number"
    path.write_text(json.dumps(manifest))


def _renamed_line(path):
    """A line's name, one letter changed: well-formed JSON of the right layout and types,
    found by the manifest's own checksum only."""
    manifest = json.loads(path.read_text())
    line = _first_line(manifest)
    line["name"] = (line["name"] or "x")[:-1] + "#"
    path.write_text(json.dumps(manifest))


def _moved_line(path):
    manifest = json.loads(path.read_text())
    _first_line(manifest)["timestamp_ns"] += 1
    path.write_text(json.dumps(manifest))


DAMAGE = {
    "start_ps.npy": (_truncate, _garbage, _bad_header, _wrong_type, _one_value(_other)),
    "record_pos.npy": (_truncate, _positions_outside, _one_value(_past_the_file), _one_value(_other)),
    "stats_at.npy": (_truncate, _one_value(_other)),
    "duration_ps.npy": (_one_value(_negative),),
    "metadata_id.npy": (_one_value(_other),),
    "shells.npy": (_garbage, _truncate),
    "manifest.json": (_truncate, _garbage, _json_garbage, _wrong_layout, _wrong_types, _renamed_line, _moved_line),
}


@pytest.mark.parametrize(
    "name, damage",
    [(name, damage) for name, damages in DAMAGE.items() for damage in damages],
    ids=lambda x: getattr(x, "__name__", x),
)
def test_a_damaged_entry_is_rebuilt_never_an_error(cache_dir, profile, name, damage):
    first = _open(profile)
    expected = first.events()
    fields = _line_fields(first)
    damage(_entry(profile) / name)
    run = _open(profile)  # no exception
    assert not _from_cache(run)
    pd.testing.assert_frame_equal(run.events(), expected)
    assert _line_fields(run) == fields
    again = _open(profile)  # and the entry was written anew
    assert _from_cache(again)
    pd.testing.assert_frame_equal(again.events(), expected)


def _line_fields(run):
    """Every line's own fields (what the manifest holds of it, beside its rows)."""
    return [
        (ln.id, ln.name, ln.display_id, ln.display_name, ln.timestamp_ns, ln.duration_ps)
        for p in run.xspace().planes
        for ln in p.lines
    ]


def test_one_damaged_value_is_never_served(cache_dir, profile):
    """A record position moved inside the file (the sampled check of earlier versions
    passed it): rebuilt, and every stat read as from the file."""
    expected = _open(profile)
    stats = {
        i: line.stats() for i, line in enumerate(ln for p in expected.xspace().planes for ln in p.lines) if len(line)
    }
    _one_value(_other)(_entry(profile) / "record_pos.npy")
    run = _open(profile)
    assert not _from_cache(run)
    lines = [ln for p in run.xspace().planes for ln in p.lines]
    for i, want in stats.items():
        pd.testing.assert_frame_equal(lines[i].stats(), want)


def test_a_missing_entry_file_is_rebuilt(cache_dir, profile):
    expected = _open(profile).events()
    (_entry(profile) / "duration_ps.npy").unlink()
    run = _open(profile)
    assert not _from_cache(run)
    pd.testing.assert_frame_equal(run.events(), expected)


def test_the_cache_can_be_turned_off(cache_dir, profile, monkeypatch):
    monkeypatch.setenv(column_cache.ENV_ENABLE, "0")
    run = _open(profile)
    assert not cache_dir.exists()
    assert not _from_cache(_open(profile))
    monkeypatch.delenv(column_cache.ENV_ENABLE)
    read_xspace(profile, cache=False)
    off = xw.load_run(profile, cache=False)
    column_cache.wait_for_writers()
    assert not cache_dir.exists()
    assert off.cache is False and len(off.events()) == 87808
    assert len(run.events()) == 87808


def test_small_and_just_written_files_are_not_cached(cache_dir, profile, monkeypatch):
    os.utime(profile)  # now: it may still be being written within this mtime tick
    _open(profile)
    assert not cache_dir.exists()
    os.utime(profile, (AN_HOUR_AGO, AN_HOUR_AGO))
    monkeypatch.setattr(column_cache, "MIN_FILE_BYTES", profile.stat().st_size + 1)
    _open(profile)
    assert not cache_dir.exists()


def test_a_file_changed_after_a_cached_open_is_refused_by_name(cache_dir, profile):
    _open(profile)
    run = _open(profile)
    assert _from_cache(run)
    os.utime(profile, (AN_HOUR_AGO + 60, AN_HOUR_AGO + 60))  # changed: positions may be wrong
    line = max((ln for p in run.xspace().planes for ln in p.lines), key=len)
    with pytest.raises(ProfileError, match="changed on disk") as error:
        line.stats()
    assert str(profile) in str(error.value)


def test_a_file_rewritten_in_place_with_its_size_and_mtime_put_back_is_refused(cache_dir, profile):
    """Same size, same mtime (put back with utime), other bytes: the ctime changed, so the
    stats of a session opened from the cache are not read at the old positions."""
    _open(profile)
    run = _open(profile)
    assert _from_cache(run)
    st = profile.stat()
    data = bytearray(profile.read_bytes())
    data[len(data) // 2] ^= 0xFF
    with open(profile, "r+b") as f:  # in place: same inode
        f.write(bytes(data))
    os.utime(profile, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert profile.stat().st_size == st.st_size and profile.stat().st_mtime_ns == st.st_mtime_ns
    line = max((ln for p in run.xspace().planes for ln in p.lines), key=len)
    with pytest.raises(ProfileError, match="changed on disk"):
        line.stats()


def _elsewhere(tmp_path):
    """A folder outside the cache with a file of someone else's in it."""
    other = tmp_path / "elsewhere"
    other.mkdir(parents=True)
    (other / "keep.txt").write_text("not the cache's")
    return other


def test_a_link_in_the_cache_is_never_followed(cache_dir, profile, tmp_path, monkeypatch):
    """An entry's `derived` folder, or the version folder, made a link to another folder:
    nothing is written there, nothing of it deleted, and the profile still opens."""
    first = _open(profile)
    first.trace()
    column_cache.wait_for_writers()
    derived = _entry(profile) / "derived"
    shutil.rmtree(derived)
    other = _elsewhere(tmp_path)
    derived.symlink_to(other, target_is_directory=True)
    (other / T._CACHE_NAME).mkdir()  # what a trace index through the link would replace
    run = _open(profile)
    assert run.trace()._start.flags.writeable  # built, not read through the link
    column_cache.wait_for_writers()
    assert sorted(p.name for p in other.iterdir()) == ["keep.txt", T._CACHE_NAME]
    assert not any((other / T._CACHE_NAME).iterdir())
    # The version folder a link: no entry is written through it, nothing pruned there.
    shutil.rmtree(cache_dir)
    cache_dir.mkdir()
    other2 = _elsewhere(tmp_path / "b")
    (cache_dir / f"v{column_cache.FORMAT_VERSION}").symlink_to(other2, target_is_directory=True)
    monkeypatch.setenv(column_cache.ENV_MAX_BYTES, "1")  # a cap that would prune everything
    run = _open(profile)
    assert len(run.events()) == 87808
    assert sorted(p.name for p in other2.iterdir()) == ["keep.txt"]
    assert not _from_cache(_open(profile))


def test_a_new_process_reopens_from_the_cache(cache_dir, profile):
    script = (
        "import sys, xprof_widgets as xw; run = xw.load_run(sys.argv[1]); "
        "print(run.xspace()._data is None, len(run.events()))"
    )
    env = dict(os.environ)
    env[column_cache.ENV_DIR] = str(cache_dir)
    env[column_cache.ENV_MIN_BYTES] = "0"
    first = subprocess.run([sys.executable, "-c", script, str(profile)], env=env, capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == ["False", "87808"]  # decoded; its entry written before exit
    second = subprocess.run([sys.executable, "-c", script, str(profile)], env=env, capture_output=True, text=True)
    assert second.returncode == 0, second.stderr
    assert second.stdout.split() == ["True", "87808"]


def test_default_folder_is_the_users_cache(monkeypatch, tmp_path):
    monkeypatch.delenv(column_cache.ENV_DIR)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    if sys.platform.startswith("linux"):
        assert column_cache.cache_root() == tmp_path / "xprof-widgets" / "columns"


def test_the_trace_index_is_saved_and_restored_the_same(cache_dir, profile):
    first = _open(profile)
    built = first.trace()
    column_cache.wait_for_writers()
    assert (_entry(profile) / "derived" / T._CACHE_NAME / "manifest.json").is_file()
    run = _open(profile)
    restored = run.trace()
    assert not restored._start.flags.writeable  # mapped from the cache, not built
    pd.testing.assert_frame_equal(restored.tracks, built.tracks)
    assert (restored.start_ps, restored.end_ps, list(restored.names)) == (
        built.start_ps,
        built.end_ps,
        list(built.names),
    )
    span = built.end_ps - built.start_ps
    for lo, hi, px in [
        (None, None, 2000),
        (built.start_ps + span // 3, built.start_ps + span // 3 + span // 4096, 2000),
    ]:
        pd.testing.assert_frame_equal(restored.query(lo, hi, px), built.query(lo, hi, px))
    busiest = int(built.tracks["events"].idxmax())
    for index in (0, 7, int(built.tracks["events"].max()) - 1):
        assert restored.event(busiest, index) == built.event(busiest, index)
    pd.testing.assert_frame_equal(restored.search("dot"), built.search("dot"))


def test_a_damaged_trace_index_is_built_again(cache_dir, profile):
    first = _open(profile)
    expected = first.trace().query(None, None, 1000)
    column_cache.wait_for_writers()
    folder = _entry(profile) / "derived" / T._CACHE_NAME
    _truncate(folder / "start.npy")
    trace = _open(profile).trace()
    assert trace._start.flags.writeable  # built, not restored
    pd.testing.assert_frame_equal(trace.query(None, None, 1000), expected)
    column_cache.wait_for_writers()  # written anew
    assert not _open(profile).trace()._start.flags.writeable
    meta = json.loads((folder / "manifest.json").read_text())
    meta["meta"]["tracks"][0]["plane"] = 99  # a plane the file does not have
    (folder / "manifest.json").write_text(json.dumps(meta))
    trace = _open(profile).trace()
    assert trace._start.flags.writeable
    pd.testing.assert_frame_equal(trace.query(None, None, 1000), expected)
    # A name changed that fits the file (only the manifest's own checksum finds it).
    column_cache.wait_for_writers()
    meta = json.loads((folder / "manifest.json").read_text())
    meta["meta"]["names"][-1] += "#"
    (folder / "manifest.json").write_text(json.dumps(meta))
    trace = _open(profile).trace()
    assert trace._start.flags.writeable
    assert list(trace.names) == list(first.trace().names)


def test_the_cache_keeps_to_its_cap_deleting_the_entries_used_longest_ago(cache_dir, profile, monkeypatch, tmp_path):
    copies = []
    for k in range(3):
        copy = tmp_path / f"copy{k}" / "vm.xplane.pb"
        copy.parent.mkdir()
        shutil.copy(profile, copy)
        os.utime(copy, (AN_HOUR_AGO, AN_HOUR_AGO))
        copies.append(copy)
    _open(copies[0])
    one_entry = sum(f.stat().st_size for f in _entry(copies[0]).rglob("*") if f.is_file())
    monkeypatch.setenv(column_cache.ENV_MAX_BYTES, str(2 * one_entry + one_entry // 2))
    _open(copies[1])
    os.utime(_entry(copies[0]) / "manifest.json", (AN_HOUR_AGO, AN_HOUR_AGO))  # used longest ago
    stale = _entry(copies[0]).parent / f".tmp-{'0' * 32}-{_dead_pid()}-{'1' * 32}"
    stale.mkdir()  # a writer that died before it wrote anything
    _open(copies[2])  # three entries do not fit: the one used longest ago goes
    assert not _entry(copies[0]).exists()
    assert _entry(copies[1]).exists() and _entry(copies[2]).exists()
    assert not stale.exists()
    assert not _from_cache(_open(copies[0]))  # and is decoded (and cached) again when asked for


def test_a_gzip_profile_is_cached_by_its_inflated_positions(cache_dir, tmp_path):
    packed = next((Path(xw.__file__).parent / "data" / "sample" / "plugins" / "profile").glob("*/*.xplane.pb.gz"))
    path = tmp_path / "logdir" / "plugins" / "profile" / "2026_01_01_00_00_00" / packed.name
    path.parent.mkdir(parents=True)
    shutil.copy(packed, path)
    os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))
    first = _open(path)
    again = _open(path)
    assert _from_cache(again)
    _assert_same(_results(first), _results(again))  # stats read from the inflated bytes


def test_cache_info_and_clear_cache_say_what_is_kept_and_empty_it(cache_dir, profile, tmp_path):
    """Users can see where the cache is, how big it is, its cap and which profiles it
    holds, and empty it; links planted in it are neither followed nor removed."""
    info = xw.cache_info()
    assert info.folder == cache_dir and info.enabled and info.total_bytes == 0 and info.entries.empty
    assert info.max_bytes == column_cache.MAX_BYTES == 4 * 2**30
    _open(profile)
    info = xw.cache_info()
    assert info.entries["path"].tolist() == [os.path.realpath(profile)]
    size = sum(f.stat().st_size for f in _entry(profile).rglob("*") if f.is_file())
    assert info.entries["bytes"].tolist() == [size] and info.total_bytes == size > 0
    assert f"1 profile(s), {size / 2**20:.1f} MiB of at most 4.0 GiB" in repr(info)
    # Someone else's folder, linked into the cache's: not counted, not touched.
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "keep.txt").write_text("not the cache's")
    (outside / "manifest.json").write_text("{}")
    os.symlink(outside, _entry(profile).parent / "planted")
    os.symlink(outside, cache_dir / "v9")
    assert xw.cache_info().total_bytes == size
    assert xw.clear_cache() == size
    assert not _entry(profile).exists() and xw.cache_info().entries.empty
    assert (outside / "keep.txt").read_text() == "not the cache's"
    assert not _from_cache(_open(profile))  # decoded again, and cached again
    assert xw.cache_info().entries["path"].tolist() == [os.path.realpath(profile)]


def _dead_pid():
    """The id of a process that has ended."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def _users_folders(version):
    """Folders a user keeps in a cache folder shared with their own files, named and
    filled as the cache's are (a manifest.json, temporary-looking names)."""
    made = []
    for name in ["a" * 32, "project", ".tmp-data", ".old-run", f".tmp-{'a' * 32}-1-{'b' * 32}"]:
        folder = version / name
        folder.mkdir(parents=True)
        (folder / "manifest.json").write_text('{"format": 2}')
        (folder / "notes.txt").write_text("the user's")
        made.append(folder)
    return made


def test_the_cache_deletes_only_the_folders_it_wrote(cache_dir, profile, tmp_path, monkeypatch):
    """With the cache folder shared with a user's files, neither `clear_cache` nor the
    pruning past the cap deletes a folder the cache did not write, and a temporary folder
    another running process is writing stays until that process ends (issue 46)."""
    _open(profile)
    version = _entry(profile).parent
    mine = _users_folders(version)
    assert (_entry(profile) / column_cache._MARK).is_file()
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        busy = version / f".tmp-{'c' * 32}-{sleeper.pid}-{'d' * 32}"
        busy.mkdir()
        (busy / column_cache._MARK).write_text(column_cache._mark_text("c" * 32))
        dead = version / f".tmp-{'e' * 32}-{_dead_pid()}-{'f' * 32}"
        dead.mkdir()
        (dead / column_cache._MARK).write_text(column_cache._mark_text("e" * 32))
        assert xw.cache_info().entries["path"].tolist() == [os.path.realpath(profile)]
        xw.clear_cache()
        assert not _entry(profile).exists() and not dead.exists()
        assert busy.exists()  # another process is writing it
        assert all((f / "notes.txt").read_text() == "the user's" for f in mine)
        # Pruning past the cap: the cache's entries go, the user's folders stay.
        monkeypatch.setenv(column_cache.ENV_MAX_BYTES, "1")
        copy = tmp_path / "other" / "vm.xplane.pb"
        copy.parent.mkdir()
        shutil.copy(profile, copy)
        os.utime(copy, (AN_HOUR_AGO, AN_HOUR_AGO))
        _open(profile)
        _open(copy)  # the cap is passed: the older entry goes
        assert not _entry(profile).exists() and _entry(copy).exists()
        assert all((f / "notes.txt").read_text() == "the user's" for f in mine)
        assert busy.exists()
    finally:
        sleeper.kill()
        sleeper.wait()
    xw.clear_cache()  # its writer has ended now
    assert not busy.exists() and all(f.exists() for f in mine)


def test_an_entry_written_before_entries_had_marks_is_still_the_caches(cache_dir, profile):
    _open(profile)
    (_entry(profile) / column_cache._MARK).unlink()  # as an older version wrote it
    assert len(xw.cache_info().entries) == 1
    xw.clear_cache()
    assert not _entry(profile).exists()


def test_the_cap_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv(column_cache.ENV_MAX_BYTES, str(2**30))
    assert column_cache.max_bytes() == xw.cache_info().max_bytes == 2**30
    monkeypatch.setenv(column_cache.ENV_MAX_BYTES, "lots")
    assert column_cache.max_bytes() == column_cache.MAX_BYTES


@pytest.mark.parametrize(
    "name", ["amd_jax_conv_mi300", "nvidia_jax_mlp_h200", "nvidia_jax_mlp_no_graphs_h200", "jax_mlp_cpu"]
)
def test_grouping_and_op_entries_reopened_from_the_cache(cache_dir, tmp_path, name, monkeypatch):
    """The grouping pass (every event's step, the step table, the eager events, the group
    links) and a GPU file's op entries (`op_stats.gpu_kernel_runs`, what every GPU op tool
    reads) are kept beside the file's columns: a second open reads them back, runs no
    grouping pass, and every tool built on them is the same."""
    from xprof_widgets.analysis.core import grouping, op_stats

    source = next(PROFILES.glob(f"{name}/plugins/profile/*/*.xplane.pb"))
    path = tmp_path / name / "plugins" / "profile" / "run" / source.name
    path.parent.mkdir(parents=True)
    shutil.copy(source, path)
    os.utime(path, (AN_HOUR_AGO, AN_HOUR_AGO))

    def tools(run):
        space = run.xspace()
        return {
            "groups": grouping.group_ids(space),
            "steps": grouping.step_events(space),
            "links": grouping.group_links(space),
            "hlo_stats": run.hlo_stats(),
            "framework": run.framework_op_stats(),
            "roofline": run.roofline_model(),
            "overview_steps": run.overview().steps,
            "input_steps": run.input_pipeline().steps,
            "op_profile": run.op_profile().root.time_ps,
        }

    first = _open(path)
    before = tools(first)
    gpu = name != "jax_mlp_cpu"
    runs = op_stats.gpu_kernel_runs(first, first.xspace()) if gpu else None
    column_cache.wait_for_writers()
    derived = _entry(path) / "derived"
    # (A file without roots is grouped without a pass, `_groups_nothing`: nothing to keep.)
    passed = not grouping._groups_nothing(first.xspace())
    assert passed == (name != "amd_jax_conv_mi300")
    assert (derived / f"{grouping._GROUPING_CACHE}-eager" / "manifest.json").is_file() == passed
    assert (derived / f"{op_stats._RUNS_CACHE}-graphs" / "manifest.json").is_file() == gpu

    def no_pass(*args, **kwargs):
        raise AssertionError("a grouping pass on a file whose grouping is kept")

    monkeypatch.setattr(grouping, "_forest", no_pass)
    second = xw.load_run(path)
    after = tools(second)
    for key, value in before.items():
        if isinstance(value, Mapping):  # (group ids: a mapping made line by line)
            assert value.keys() == after[key].keys()
            assert all(np.array_equal(value[k], after[key][k]) for k in value)
        elif isinstance(value, pd.DataFrame):
            pd.testing.assert_frame_equal(
                value.reset_index(drop=True), after[key].reset_index(drop=True), check_dtype=False
            )
        else:
            assert value == after[key]
    if gpu:
        again = op_stats.gpu_kernel_runs(second, second.xspace())
        pd.testing.assert_frame_equal(again[0], runs[0], check_dtype=False)
        assert again[1] == runs[1] and again[0].attrs == runs[0].attrs
