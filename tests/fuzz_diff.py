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
* the compiled loops and the numpy code always give the same columns, or the same error.

    python -m tests.fuzz_diff --count 500 --seed 1    # a longer run than CI's

tests/test_fuzz_diff.py runs a fixed set of seeds in CI.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import sys
import tempfile
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
    """(name, bytes) of a rewritten, sometimes damaged, real profile."""
    from xprof_widgets.io import schema

    rng = np.random.default_rng(seed)
    path = source or SOURCES[seed % len(SOURCES)]
    raw = path.read_bytes()
    space = schema.XSpace.FromString(gzip.decompress(raw) if path.name.endswith(".gz") else raw)
    scramble = rng.random()  # the share of events rewritten
    damaged = rng.random() < 0.5
    return f"{path.name.split('.')[0]}-{seed}", rewrite_space(space, rng, scramble, damaged)


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


def _ours(path):
    """What our reader makes of the file: ("ok", [per line (metadata ids, offsets, durations,
    stats per event)], digest) or ("ProfileError", message)."""
    from xprof_widgets.errors import ProfileError
    from xprof_widgets.io import wire
    from xprof_widgets.io.xspace import read_xspace

    try:
        space = read_xspace(path, cache=False)
        lines = []
        h = hashlib.sha256()
        for plane in space.planes:
            for line in plane.lines:
                if len(line):
                    starts, stops = line._stat_runs(None)
                    owner, _, _ = wire.repeated_run(space.data, starts, stops, 4)
                    per_event = np.bincount(owner, minlength=len(line))
                    line.stats()  # every stat decoded
                else:
                    per_event = np.zeros(0, np.int64)
                offsets = line.start_ps - np.int64(line.timestamp_ns) * 1000
                cols = (line.metadata_id.astype(np.int64), offsets, line.event_duration_ps.astype(np.int64), per_event)
                lines.append(cols)
                for a in cols:
                    h.update(np.ascontiguousarray(a).tobytes())
        return "ok", lines, h.hexdigest()
    except (ProfileError, wire.WireError) as error:  # (the stat count above reads the wire directly)
        return "ProfileError", str(error)


def check(path):
    """Where the compiled loops, the numpy code and protobuf disagree on the file (a list of
    findings; empty when they agree)."""
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
