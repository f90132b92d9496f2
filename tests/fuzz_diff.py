"""Differential fuzzing of the reader: the compiled loops, the numpy code and protobuf's own
parser on the same bytes.

`structured_mutant(seed)` takes a small real profile and rewrites it as protobuf allows and
writers never do, then damages some of it: events with their fields in any order, a field
written twice (the last wins), unknown fields anywhere, stats split into runs by other
fields, a stat's key written twice; and lengths of 2**63 and more or that wrap around
int64, event and stat records cut or run past their end. `check(path)` reads the file
three ways and says where they disagree:

* protobuf parses it: both of our readers open it, and every event's metadata id, offset,
  duration and number of stats are protobuf's;
* protobuf refuses it: both raise ProfileError (at open, or when every stat is read);
* the compiled loops and the numpy code always give the same columns, or the same error;
* where the file opens, an open through the column cache, its entry for the file damaged
  (a byte flipped, cut, a file gone) or linked out of the cache folder (a file, the entry,
  the version folder), gives what the file gives, and changes nothing outside the cache.

A quarter of the mutants have planes or lines added by the thousand (empty ones, tiny
ones read many at a time).

    python -m tests.fuzz_diff --count 500 --seed 1    # a longer run than CI's

tests/test_fuzz_diff.py runs a fixed set of seeds in CI.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
import tempfile
import zlib
from pathlib import Path

import numpy as np

from .fuzz import varint

REPO = Path(__file__).resolve().parents[1]
SOURCES = [
    REPO / "xprof_widgets/data/sample_gpu/plugins/profile/2026_02_20_13_54_10/tw003.xplane.pb.gz",
    REPO / "tests/data/profiles/tpu_v6e_inference/plugins/profile/2025_tpu_inference/tpu_host.xplane.pb",
]


def _len_field(number, payload):
    return varint(number << 3 | 2) + varint(len(payload)) + payload


def _event_bytes(event, rng, damage):
    """An XEvent's bytes in a layout protobuf reads as `event` (or, with `damage`, a
    damaged one): fields and stats in random places, repeated, split, unknown fields."""
    stats = []
    for s in event.stats:
        body = s.SerializeToString()
        if s.metadata_id and rng.random() < 0.2:
            body = b"\x08" + varint(int(rng.integers(1, 2**20))) + body  # key twice: the later wins
        stats.append(_len_field(4, body))
    head = [
        varint(n << 3) + varint(v) for n, v in ((1, event.metadata_id), (2, event.offset_ps), (3, event.duration_ps))
    ]
    if rng.random() < 0.3:
        head.append(varint(int(rng.integers(6, 40)) << 3) + varint(int(rng.integers(0, 2**40))))  # unknown
    order = rng.permutation(len(head)) if rng.random() < 0.5 else np.arange(len(head))
    parts = list(stats)
    for k in order:
        parts.insert(int(rng.integers(len(parts) + 1)) if rng.random() < 0.5 else 0, head[k])
    if rng.random() < 0.2:  # the metadata id written twice, a wrong one first: the later wins
        parts.insert(0, b"\x08" + varint(int(rng.integers(0, 2**30))))
    data = b"".join(parts)
    if damage and data:
        kind = int(rng.integers(4))
        if kind == 0:  # a stat whose length is huge, or wraps around
            data += b"\x22" + varint(int(rng.choice([2**63, 2**64 - 3, 2**62 + 5])))
        elif kind == 1:  # a length past the end
            data += b"\x22" + varint(int(rng.integers(1, 200)))
        elif kind == 2:  # cut inside
            data = data[: int(rng.integers(len(data)))]
        else:  # a group wire type (none in the schema)
            data += b"\x0b"
    return data


def structured_mutant(seed, source=None):
    """(name, bytes) of a rewritten, sometimes damaged, real profile; a quarter of them
    with planes or lines added by the thousand (`_by_the_thousand`)."""
    from xprof_widgets.io import schema

    rng = np.random.default_rng(seed)
    path = source or SOURCES[seed % len(SOURCES)]
    raw = path.read_bytes()
    space = schema.XSpace.FromString(gzip.decompress(raw) if path.name.endswith(".gz") else raw)
    many = rng.random() < 0.25
    if many:
        _by_the_thousand(space, rng)
    scramble = rng.random() * (0.2 if many else 1.0)  # the share of events rewritten
    damaged = rng.random() < 0.5
    return f"{path.name.split('.')[0]}-{seed}", rewrite_space(space, rng, scramble, damaged)


def _by_the_thousand(space, rng):
    """Planes or lines added by the thousand, among the real ones: empty lines (some with
    names, times, display fields), lines of one to three events copied from a real line
    (their stats too: read many lines at a time), or planes without lines."""
    from xprof_widgets.io import schema

    count = int(rng.integers(1000, 3000))
    kind = int(rng.integers(3))
    busy = [p for p in space.planes if any(len(ln.events) for ln in p.lines)]
    if kind == 2 or not busy:
        extra = [
            schema.XPlane(id=10_000 + k, name=str(rng.choice(["/device:GPU:", "/custom:", "/host:CPU", ""])) + str(k))
            for k in range(count)
        ]
        _interleave(space.planes, extra, rng)
        return
    plane = busy[int(rng.integers(len(busy)))]
    real = [ln for ln in plane.lines if len(ln.events)]
    source = real[int(rng.integers(len(real)))]
    extra = []
    for k in range(count):
        line = schema.XLine(id=100_000 + k)
        if rng.random() < 0.5:
            line.name = f"thread {k}"
        if rng.random() < 0.3:
            line.timestamp_ns = int(source.timestamp_ns) + int(rng.integers(0, 10**6))
            line.duration_ps = int(rng.integers(0, 10**9))
        if rng.random() < 0.1:
            line.display_id, line.display_name = int(rng.integers(0, 99)), f"shown {k}"
        if kind == 1:
            line.timestamp_ns = source.timestamp_ns
            first = int(rng.integers(len(source.events)))
            for e in source.events[first : first + int(rng.integers(1, 4))]:
                line.events.add().CopyFrom(e)
        extra.append(line)
    _interleave(plane.lines, extra, rng)


def _interleave(field, extra, rng):
    """The repeated message field `field` rewritten with the messages `extra` at random
    places among its own (their order kept)."""
    own = list(field)
    at = np.sort(rng.integers(0, len(own) + 1, len(extra)))
    del field[:]
    for k, message in enumerate([*own, None]):
        for e in np.flatnonzero(at == k).tolist():
            field.add().CopyFrom(extra[e])
        if message is not None:
            field.add().CopyFrom(message)


def rewrite_space(space, rng, scramble=1.0, damaged=False):
    """The bytes of the XSpace message `space` with a share `scramble` of its events written
    as `_event_bytes` writes them (a few of them damaged if `damaged`), each line's events
    and each plane's lines after their other fields."""
    from xprof_widgets.io import schema

    planes = []
    for plane in space.planes:
        lines = []
        for line in plane.lines:
            events = []
            for e in line.events:
                if rng.random() < scramble:
                    hurt = damaged and rng.random() < 0.002
                    events.append(_len_field(4, _event_bytes(e, rng, hurt)))
                else:
                    events.append(_len_field(4, e.SerializeToString()))
            if len(events) > 2 and rng.random() < 0.1:  # a line field among the events
                events.insert(len(events) // 2, varint(2 << 3 | 2) + varint(4) + b"name")
            shell = schema.XLine()
            shell.CopyFrom(line)
            del shell.events[:]
            lines.append(_len_field(3, shell.SerializeToString() + b"".join(events)))
        shell = schema.XPlane()
        shell.CopyFrom(plane)
        del shell.lines[:]
        planes.append(_len_field(1, shell.SerializeToString() + b"".join(lines)))
    rest = schema.XSpace()
    rest.CopyFrom(space)
    del rest.planes[:]
    return b"".join(planes) + rest.SerializeToString()


def _ours(path, cache=False):
    """What our reader makes of the file: ("ok", [per line (metadata ids, offsets, durations,
    stats per event)], digest of those, every line's fields and every stat value) or
    ("ProfileError", message). `cache`: opened through the column cache (an entry there
    is used if sound)."""
    from xprof_widgets.errors import ProfileError
    from xprof_widgets.io import wire
    from xprof_widgets.io.xspace import read_xspace

    try:
        space = read_xspace(path, cache=cache)
        lines = []
        h = hashlib.sha256()
        for plane in space.planes:
            h.update(repr((plane.id, plane.name, plane.message.SerializeToString(deterministic=True))).encode())
            for line in plane.lines:
                if len(line):
                    starts, stops = line._stat_runs(None)
                    owner, _, _ = wire.repeated_run(space.data, starts, stops, 4)
                    per_event = np.bincount(owner, minlength=len(line))
                    stats = line.stats()  # every stat decoded
                    h.update(repr(stats.to_dict("list")).encode())
                else:
                    per_event = np.zeros(0, np.int64)
                offsets = line.start_ps - np.int64(line.timestamp_ns) * 1000
                cols = (line.metadata_id.astype(np.int64), offsets, line.event_duration_ps.astype(np.int64), per_event)
                lines.append(cols)
                fields = (line.id, line.name, line.display_id, line.display_name, line.timestamp_ns, line.duration_ps)
                h.update(repr(fields).encode())
                for a in cols:
                    h.update(np.ascontiguousarray(a).tobytes())
        return "ok", lines, h.hexdigest()
    except (ProfileError, wire.WireError) as error:  # (the stat count above reads the wire directly)
        return "ProfileError", str(error)


#: What `_cache_round` does to the entry before the second open.
CACHE_DAMAGE = ("none", "byte", "cut", "gone", "manifest-value", "file-link", "entry-link", "version-link")


def _leaves(value, out):
    """[(container, key)] of every int or str in a JSON value."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for k, v in items:
        if isinstance(v, (dict, list)):
            _leaves(v, out)
        elif isinstance(v, (int, str)) and not isinstance(v, bool):
            out.append((value, k))
    return out


def _changed_manifest_value(path, rng):
    """One int or str anywhere in an entry's manifest changed (+1, a letter added): well-formed
    JSON of the right layout and types, so only a checksum of the manifest itself finds it."""
    import json

    manifest = json.loads(path.read_text("utf-8"))
    leaves = _leaves(manifest, [])
    container, k = leaves[int(rng.integers(len(leaves)))]
    container[k] = container[k] + 1 if isinstance(container[k], int) else container[k] + "#"
    path.write_text(json.dumps(manifest), "utf-8")


def _tree(folder):
    """Everything under `folder`: {relative path: bytes} (links as their target's name)."""
    out = {}
    for p in sorted(Path(folder).rglob("*")):
        rel = str(p.relative_to(folder))
        if p.is_symlink():
            out[rel] = b"link:" + str(Path(p).readlink()).encode()
        elif p.is_file():
            out[rel] = p.read_bytes()
    return out


def _cache_round(path, rng, expected):
    """Findings of an open through the column cache after its entry for `path` was written
    and then damaged or linked out of the cache folder (one of CACHE_DAMAGE): the columns,
    line fields and stats must be `expected` (the file's, read without the cache), and
    nothing outside the cache folder may change."""
    import os
    import tempfile
    import time

    from xprof_widgets.io import column_cache
    from xprof_widgets.io.xspace import read_xspace

    names = (column_cache.ENV_DIR, column_cache.ENV_MIN_BYTES, column_cache.ENV_ENABLE, column_cache.ENV_MAX_BYTES)
    saved = {k: os.environ.get(k) for k in names}
    what = CACHE_DAMAGE[int(rng.integers(len(CACHE_DAMAGE)))]
    findings = []
    with tempfile.TemporaryDirectory() as tmp:
        root, outside = Path(tmp) / "cache", Path(tmp) / "outside"
        outside.mkdir()
        (outside / "keep.txt").write_text("not the cache's")
        try:
            os.environ.update({column_cache.ENV_DIR: str(root), column_cache.ENV_MIN_BYTES: "0"})
            os.environ.pop(column_cache.ENV_ENABLE, None)
            os.environ.pop(column_cache.ENV_MAX_BYTES, None)
            an_hour_ago = time.time() - 3600
            os.utime(path, (an_hour_ago, an_hour_ago))  # (a file just written is not cached)
            key = column_cache.source_key(path)
            column_cache.store(read_xspace(path, cache=False), key)
            entry = column_cache.entry_dir(key["path"])
            if not (entry / "manifest.json").is_file():
                return findings  # (not kept: nothing to damage)
            files = sorted(p for p in entry.iterdir() if p.is_file())
            victim = files[int(rng.integers(len(files)))]
            if what == "byte":
                data = bytearray(victim.read_bytes())
                if data:
                    data[int(rng.integers(len(data)))] ^= 1 << int(rng.integers(8))
                victim.write_bytes(bytes(data))
            elif what == "cut":
                victim.write_bytes(victim.read_bytes()[: int(rng.integers(max(victim.stat().st_size, 1)))])
            elif what == "gone":
                victim.unlink()
            elif what == "manifest-value":
                victim = entry / "manifest.json"
                _changed_manifest_value(victim, rng)
            elif what == "file-link":
                (outside / victim.name).write_bytes(victim.read_bytes())
                victim.unlink()
                victim.symlink_to(outside / victim.name)
            elif what == "entry-link":  # the entry itself kept outside, linked in
                entry.rename(outside / "entry")
                entry.symlink_to(outside / "entry", target_is_directory=True)
            elif what == "version-link":  # the version folder linked out, a cap that would prune it all
                entry.parent.rename(outside / "version")
                entry.parent.symlink_to(outside / "version", target_is_directory=True)
                os.environ[column_cache.ENV_MAX_BYTES] = "1"
            before = _tree(outside)
            got = _ours(path, cache=True)
            column_cache.wait_for_writers()  # (a damaged entry is written anew)
            if (got[0], got[-1]) != (expected[0], expected[-1]):
                findings.append(f"through the cache ({what} {victim.name}): {got[0]} {got[-1]!s:.200}")
            if _tree(outside) != before:
                findings.append(f"the cache ({what} {victim.name}) changed a folder outside it")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
    return findings


def check(path, cache=True):
    """Where the compiled loops, the numpy code and protobuf disagree on the file (a list of
    findings; empty when they agree); `cache`: and where an open through a damaged or
    linked column cache entry of it disagrees with them (`_cache_round`)."""
    from xprof_widgets.io import native, schema

    findings = []
    saved = native._LIB
    try:
        compiled = _ours(path) if native.available() else None
        native._LIB = None
        numpy_path = _ours(path)
    finally:
        native._LIB = saved
    if compiled is not None and (compiled[0], compiled[-1]) != (numpy_path[0], numpy_path[-1]):
        findings.append(
            f"compiled {compiled[0]} vs numpy {numpy_path[0]}: {compiled[-1]!s:.200} | {numpy_path[-1]!s:.200}"
        )
    try:
        ref = schema.XSpace.FromString(Path(path).read_bytes())
    except Exception:  # protobuf's DecodeError (and friends): the bytes are not an XSpace
        ref = None
    if ref is None:
        if numpy_path[0] != "ProfileError":
            findings.append("protobuf refuses the file, we open it")
        return findings
    if numpy_path[0] != "ok":
        findings.append(f"protobuf parses the file, we refuse it: {numpy_path[1]:.300}")
        return findings
    if cache:
        findings += _cache_round(path, np.random.default_rng(zlib.crc32(Path(path).name.encode())), numpy_path)
    want = [
        (
            np.array([e.metadata_id for e in line.events], np.int64),
            np.array([e.offset_ps for e in line.events], np.int64),
            np.array([e.duration_ps for e in line.events], np.int64),
            np.array([len(e.stats) for e in line.events], np.int64),
        )
        for plane in ref.planes
        for line in plane.lines
    ]
    got = numpy_path[1]
    if len(got) != len(want):
        findings.append(f"{len(got)} lines, protobuf {len(want)}")
        return findings
    names = ("metadata ids", "offsets", "durations", "stats per event")
    for i, (g, w) in enumerate(zip(got, want)):
        for name, a, b in zip(names, g, w):
            if a.shape != b.shape or not np.array_equal(a, b):
                findings.append(f"line {i}: {name} differ from protobuf's")
    return findings


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--count", type=int, default=100)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args(argv)
    tried, found = 0, []
    outcomes = {"ok": 0, "ProfileError": 0}
    with tempfile.TemporaryDirectory() as tmp:
        for seed in range(args.seed, args.seed + args.count):
            name, data = structured_mutant(seed)
            path = Path(tmp) / f"{name}.xplane.pb"
            path.write_bytes(data)
            findings = check(path)
            tried += 1
            outcomes["ok" if not findings and _ours(path)[0] == "ok" else "ProfileError"] += 1
            for f in findings:
                found.append((seed, f))
                print(f"seed {seed}: {f}", flush=True)
    print(f"{tried} mutants (seeds {args.seed}..{args.seed + args.count - 1}): {outcomes}; {len(found)} findings")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
