"""Mutation fuzzing: damaged real profiles through the reader, every analysis and every widget.

`mutants(seed, count)` makes damaged copies of small real profiles (bytes flipped, cut
short, lengths and varints made huge or negative, slices repeated or dropped, gzip
members broken); `campaign(paths)` runs each through `exercise` in a worker process
with a memory cap and a deadline. Every step must end in a result or a ProfileError:
anything else is a finding, and so is a worker that runs past the deadline (a hang) or
out of memory (a blowup).

    python -m tests.fuzz --count 2000 --seed 7      # a longer campaign than CI's
    python -m tests.fuzz --replay FILE              # one file, in this process, with the traceback

tests/test_fuzz.py runs a fixed-seed campaign in CI; tests/fuzz_atheris.py is the
coverage-guided target for the reader (optional `atheris`).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import resource
import selectors
import subprocess
import sys
import tempfile
import time
import traceback
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MEMORY_CAP = 4 * 2**30  # a worker's address space
DEADLINE_S = 60  # per mutant

# Small real profiles with something for every tool between them (the corpus' TF run adds
# tf.data and host allocators when it is here).
SOURCES = [
    REPO / "xprof_widgets/data/sample_gpu/plugins/profile/2026_02_20_13_54_10/tw003.xplane.pb.gz",
    REPO / "tests/data/mlp_widths/plugins/profile/w256/host.xplane.pb.gz",
    REPO / "tests/data/profiles/amd_jax_conv_mi300/plugins/profile/2026_02_20_13_53_59/tw003.xplane.pb",
    REPO / "tests/data/profiles/tpu_v6e_inference/plugins/profile/2025_tpu_inference/tpu_host.xplane.pb",
    # JAX 0.11 on an NVIDIA H200: steps to group, CUDA graphs, scope range ids and their tree.
    REPO / "tests/data/profiles/nvidia_jax_mlp_h200/plugins/profile/2026_11_26_01_22_22/vm.xplane.pb",
]
CORPUS_SOURCES = ["tf_keras_cpu/plugins/profile/2026_11_22_03_16_48/vm.xplane.pb"]


#: TPU runs made from the real v6e file (`tools/make_tpu_profiles.py`): steps, infeed,
#: counters, barrier waits, requests, SparseCores, all real but for what the runtime adds.
MADE_TPU = ("infeed", "counters", "barriers", "serving", "megascale", "sparsecore_planes")


def _made_tpu():
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_tpu_profiles", REPO / "tools" / "make_tpu_profiles.py")
    made = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(made)
    return [(f"tpu-{v}", made.make(v).SerializeToString()) for v in MADE_TPU]


def sources(corpus=None):
    """The real profiles to mutate, and TPU runs made from one: (name, decompressed bytes)."""
    out = _made_tpu()
    paths = list(SOURCES) + [Path(corpus) / s for s in CORPUS_SOURCES if corpus and (Path(corpus) / s).is_file()]
    for path in paths:
        data = path.read_bytes()
        out.append(
            (
                path.name.split(".xplane")[0] + "-" + path.parts[-2],
                gzip.decompress(data) if path.name.endswith(".gz") else data,
            )
        )
    return out


# --- mutations ----------------------------------------------------------------------------------


def varint(v):
    """`v` as a protobuf varint (negative numbers as their 64-bit two's complement)."""
    v &= (1 << 64) - 1
    out = bytearray()
    while True:
        b, v = v & 0x7F, v >> 7
        out.append(b | 0x80 if v else b)
        if not v:
            return bytes(out)


def _flip(rng, data):
    data = bytearray(data)
    for _ in range(rng.randint(1, 8)):
        i = rng.randrange(len(data))
        data[i] ^= 1 << rng.randrange(8)
    return bytes(data)


def _truncate(rng, data):
    return data[: rng.randrange(len(data))]


def _huge_varint(rng, data):
    """A varint somewhere (a length, an id, a time) replaced by a huge, negative or small value."""
    i = rng.randrange(len(data))
    while i < len(data) and data[i] & 0x80:  # the start of the next varint-looking run
        i += 1
    value = rng.choice([2**63, 2**64 - 1, 2**62, -1, -2, -1000, 2**31, 2**32 + 5, 0, 1 << 40])
    return data[:i] + varint(value) + data[i + 1 :]


def _repeat(rng, data):
    i = rng.randrange(len(data))
    j = min(len(data), i + rng.randint(1, 4096))
    return data[:j] + data[i:j] * rng.randint(1, 4) + data[j:]


def _drop(rng, data):
    i = rng.randrange(len(data))
    return data[:i] + data[i + rng.randint(1, 256) :]


def _insert(rng, data):
    i = rng.randrange(len(data))
    return data[:i] + bytes(rng.randrange(256) for _ in range(rng.randint(1, 32))) + data[i:]


MUTATIONS = [_flip, _truncate, _huge_varint, _repeat, _drop, _insert]

# Structured mutations: the file still parses as an XSpace, its contents are wrong.
_BAD_INTS = [-1, -2, -(2**40), 2**62, 2**63 - 1, 0, 1, 2**31, 10**18]


def _pick(rng, items):
    items = list(items)
    return rng.choice(items) if items else None


def _event(rng, space):
    line = _pick(rng, [ln for p in space.planes for ln in p.lines if ln.events])
    return (line, rng.choice(line.events)) if line is not None else (None, None)


def _s_event_times(rng, space):
    line, event = _event(rng, space)
    if event is not None:
        if rng.random() < 0.5:
            event.duration_ps = rng.choice(_BAD_INTS)
        else:
            event.offset_ps = rng.choice(_BAD_INTS)


def _s_line_time(rng, space):
    line = _pick(rng, [ln for p in space.planes for ln in p.lines])
    if line is not None:
        line.timestamp_ns = rng.choice(_BAD_INTS)


def _s_dangling_metadata(rng, space):
    plane = _pick(rng, [p for p in space.planes if p.event_metadata])
    if plane is None:
        return
    if rng.random() < 0.5:
        del plane.event_metadata[_pick(rng, plane.event_metadata.keys())]
    else:
        line, event = _event(rng, space)
        if event is not None:
            event.metadata_id = rng.choice([-5, 2**40, 987654])


def negate_metadata_id(plane, key):
    """Move event metadata `key` of `plane` to the id -key - 1, its events with it."""
    plane.event_metadata[-key - 1].CopyFrom(plane.event_metadata[key])
    plane.event_metadata[-key - 1].id = -key - 1
    for line in plane.lines:
        for event in line.events:
            if event.metadata_id == key:
                event.metadata_id = -key - 1


def _s_negative_ids(rng, space):
    plane = _pick(rng, [p for p in space.planes if p.event_metadata])
    if plane is not None:
        negate_metadata_id(plane, _pick(rng, plane.event_metadata.keys()))


def _stats(space):
    out = [st for p in space.planes for st in p.stats]
    for p in space.planes:
        for m in p.event_metadata.values():
            out.extend(m.stats)
        for line in p.lines[:20]:
            for e in line.events[:200]:
                out.extend(e.stats)
    return out


def _s_stat_kind(rng, space):
    """A stat of the wrong kind (a number where a string is read, garbage bytes, a dangling ref...)."""
    stat = _pick(rng, _stats(space))
    if stat is None:
        return
    choice = rng.randrange(6)
    if choice == 0:
        stat.str_value = rng.choice(["", "\x00\xff", "not a number", "é" * 300])
    elif choice == 1:
        stat.int64_value = rng.choice(_BAD_INTS)
    elif choice == 2:
        stat.bytes_value = bytes(rng.randrange(256) for _ in range(rng.randint(0, 64)))
    elif choice == 3:
        stat.ref_value = rng.choice([0, 2**63, 424242])
    elif choice == 4:
        stat.compressed_str_value = rng.choice([b"\x1f\x8b garbage", bytes(range(40)), b""])
    else:
        stat.double_value = rng.choice([float("nan"), float("inf"), -1e300])


def _s_planes(rng, space):
    """Planes dropped, repeated, renamed, emptied."""
    if not space.planes:
        return
    i = rng.randrange(len(space.planes))
    choice = rng.randrange(4)
    if choice == 0:
        del space.planes[i]
    elif choice == 1:
        space.planes.add().CopyFrom(space.planes[i])
    elif choice == 2:
        space.planes[i].name = rng.choice(
            ["/host:CPU", "/device:GPU:0", "/device:TPU:0", "/host:metadata", "", "/device:GPU:x"]
        )
    else:
        del space.planes[i].lines[:]


def _s_hlo(rng, space):
    """A compiled module damaged: bytes flipped, a dimension huge or negative, a deep tuple, no name,
    a call-graph cycle (an instruction calling its own computation, or the entry)."""
    from xprof_widgets.io import schema
    from xprof_widgets.io.hlo import HLO_PROTO_STAT

    stats = []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for m in plane.event_metadata.values():
            stats.extend(st for st in m.stats if names.get(st.metadata_id) == HLO_PROTO_STAT)
    stat = _pick(rng, stats)
    if stat is None:
        return
    if rng.random() < 0.3:
        stat.bytes_value = _flip(rng, stat.bytes_value)
        return
    proto = schema.message_class("xla.HloProto")()
    try:
        proto.ParseFromString(stat.bytes_value)
    except Exception:
        stat.bytes_value = _flip(rng, stat.bytes_value)
        return
    instructions = [i for c in proto.hlo_module.computations for i in c.instructions]
    choice = rng.randrange(5)
    if choice == 4 and instructions:  # a cycle: its own computation, or the entry, called again
        computation = rng.choice(list(proto.hlo_module.computations))
        if computation.instructions:
            callee = rng.choice([computation.id, proto.hlo_module.entry_computation_id])
            rng.choice(list(computation.instructions)).called_computation_ids.append(callee)
    elif choice == 0 and instructions:
        shape = rng.choice(instructions).shape
        if shape.dimensions:
            shape.dimensions[rng.randrange(len(shape.dimensions))] = rng.choice([2**40, -3, 2**62])
    elif choice == 1 and instructions:
        shape = rng.choice(instructions).shape
        for _ in range(rng.choice([50, 400])):
            shape = shape.tuple_shapes.add()
    elif choice == 2:
        proto.hlo_module.name = ""
    elif instructions:
        rng.choice(instructions).operand_ids.append(rng.choice([-1, 2**40]))
    stat.bytes_value = proto.SerializeToString()


def _hlo_stats(space):
    from xprof_widgets.io.hlo import HLO_PROTO_STAT

    stats = []
    for plane in space.planes:
        names = {k: m.name for k, m in plane.stat_metadata.items()}
        for m in plane.event_metadata.values():
            stats.extend(st for st in m.stats if names.get(st.metadata_id) == HLO_PROTO_STAT)
    return stats


def _s_call_dag(rng, space):
    """A module whose calls fan out: D computations each calling the next K times (no cycle),
    called from the entry: K**(D-1) copies of the last one's work once unrolled (issue 46: the
    CUDA-graph attribution expanded every copy)."""
    from xprof_widgets.io import schema

    stat = _pick(rng, _hlo_stats(space))
    if stat is None:
        return
    proto = schema.message_class("xla.HloProto")()
    try:
        proto.ParseFromString(stat.bytes_value)
    except Exception:
        return
    module = proto.hlo_module
    entry = next((c for c in module.computations if c.id == module.entry_computation_id), None)
    instructions = [i for c in module.computations for i in c.instructions]
    if entry is None or not instructions:
        return
    template = next((i for i in instructions if i.opcode == "fusion"), instructions[0])
    next_id = max([c.id for c in module.computations] + [i.id for i in instructions]) + 1
    depth, fan_out = rng.choice([6, 8, 10]), rng.choice([4, 8])
    callee = None
    for d in range(depth, 0, -1):
        comp = module.computations.add(name=f"fuzz_dag_{d}", id=next_id)
        next_id += 1
        for k in range(1 if callee is None else fan_out):
            instr = comp.instructions.add()
            instr.CopyFrom(template)
            instr.id, instr.name = next_id, f"fuzz_dag_{d}_{k}"
            next_id += 1
            if callee is not None:
                instr.opcode = "call"
                del instr.called_computation_ids[:]
                instr.called_computation_ids.append(callee)
        comp.root_id = comp.instructions[-1].id
        callee = comp.id
    call = entry.instructions.add()
    call.CopyFrom(template)
    call.id, call.name, call.opcode = next_id, "fuzz_dag_call", "call"
    del call.called_computation_ids[:]
    call.called_computation_ids.append(callee)
    stat.bytes_value = proto.SerializeToString()


def _s_launch_sequences(rng, space):
    """A GPU line's kernels each made a launch of its own (a correlation id apiece: many
    distinct launch sequences), or every launch made to span the whole line (each kernel
    that names its op then runs inside every launch)."""
    for plane in space.planes:
        if not plane.name.startswith("/device:GPU"):
            continue
        ids = {m.name: k for k, m in plane.stat_metadata.items()}
        corr = ids.get("correlation_id")
        lines = [ln for ln in plane.lines if len(ln.events) > 1]
        if corr is None or not lines:
            continue
        line = rng.choice(lines)
        spread = rng.random() < 0.5
        end = max(e.offset_ps + e.duration_ps for e in line.events)
        for k, e in enumerate(line.events):
            for st in e.stats:
                if st.metadata_id == corr:
                    st.uint64_value = 10**6 + k if spread else st.uint64_value
            if not spread:
                e.duration_ps = max(end - e.offset_ps, 1)
        return


STRUCTURED = [
    _s_event_times,
    _s_line_time,
    _s_dangling_metadata,
    _s_negative_ids,
    _s_stat_kind,
    _s_planes,
    _s_hlo,
    _s_call_dag,
    _s_launch_sequences,
]


def _structured(rng, data):
    from xprof_widgets.io import schema

    space = schema.XSpace()
    space.ParseFromString(data)
    for _ in range(rng.randint(1, 4)):
        rng.choice(STRUCTURED)(rng, space)
    return space.SerializeToString()


def mutants(seed, count, corpus=None):
    """`count` damaged profiles: (name, bytes, gzipped or not), the same for the same seed."""
    rng = random.Random(seed)
    base = sources(corpus)
    for k in range(count):
        name, data = base[k % len(base)]
        # Most mutants stay readable XSpaces with wrong contents (they reach the tools); the
        # others are damaged bytes (they test the reader).
        ops = [_structured] if rng.random() < 0.7 else [rng.choice(MUTATIONS) for _ in range(rng.randint(1, 3))]
        for op in ops:
            if data:
                data = op(rng, data)
        packed = rng.random() < 0.15
        if packed:
            data = gzip.compress(data, compresslevel=1)
            if rng.random() < 0.5 and len(data) > 20:  # and damage the gzip member itself
                data = _flip(rng, data)
        yield f"{k:04d}-{name}-{'+'.join(op.__name__[1:] for op in ops)}", data, packed


# --- what every mutant goes through -------------------------------------------------------------


def _steps(path):
    """(step name, callable) for everything a user can do with a profile file."""
    import xprof_widgets as xw

    state = {}

    def load():
        state["run"] = xw.load_run(path)

    def run():
        return state["run"]

    def widget(cls, **kwargs):
        def build():
            w = cls(run(), **kwargs)
            w.to_html()
            if cls is xw.TraceViewerWidget:
                # What a page may ask, whatever the trace holds (none of its events included).
                span_ms = max(w.window_ps[1] - w.window_ps[0], 10**6) / 1e9
                for kind, params in (("search", {"value": "fusion"}), ("next", {}), ("prev", {}), ("zoom-out", {})):
                    w.on_request(kind, params)
                for part in (1, 16, 4096):  # the whole trace, then zoomed in
                    w.on_request(
                        "view",
                        {
                            "figure": "timeline",
                            "x_start": 0.0,
                            "x_end": span_ms / part,
                            "width_px": 800,
                            "y_start": None,
                            "y_end": None,
                        },
                    )

        return build

    def memory_profiles():
        mp = run().memory_profile()
        for memory_id in mp.memory_ids[:4]:
            r = run().memory_profile(memory_id=memory_id)
            _ = r.breakdown_at_peak
            if len(r.timeline):
                r.breakdown_at(int(r.timeline["time_ps"].iloc[len(r.timeline) // 2]))

    def memory_viewers():
        for module in list(run().modules["module"])[:3]:
            mv = run().memory_viewer(module)
            mv.buffers_by_size()

    def trace():
        t = run().trace()
        q = t.query(t.start_ps, t.end_ps, 1000)
        t.search("fusion")
        # The details of a few events (what a tap shows): every stat read and shown.
        real = q[q["index"] >= 0]
        for track, index in list(zip(real["track"].tolist(), real["index"].tolist()))[:: max(len(real) // 8, 1)]:
            t.event(track, index)

    return [
        ("load_run", load),
        ("events", lambda: run().events()),
        ("devices", lambda: run().devices),
        ("tool_status", lambda: run().tool_status()),
        ("overview", lambda: run().overview()),
        ("input_pipeline", lambda: run().input_pipeline()),
        ("op_profile", lambda: [run().op_profile(group_by=g) for g in ("program", "category", "provenance")]),
        ("hlo_stats", lambda: run().hlo_stats()),
        ("memory_profile", memory_profiles),
        ("memory_viewer", memory_viewers),
        ("trace", trace),
        ("kernel_stats", lambda: run().kernel_stats()),
        ("framework_op_stats", lambda: run().framework_op_stats()),
        ("roofline_model", lambda: run().roofline_model()),
        ("pod_viewer", lambda: run().pod_viewer()),
        ("perf_counters", lambda: run().perf_counters()),
        ("utilization_viewer", lambda: run().utilization_viewer()),
        ("kernel_utilization", lambda: run().kernel_utilization()),
        ("megascale_stats", lambda: run().megascale_stats()),
        ("cuda_graph_kernels", lambda: run().cuda_graph_kernels()),
        ("smart_suggestions", lambda: run().smart_suggestions()),
        ("inference_profile", lambda: run().inference_profile()),
        ("OverviewWidget", widget(xw.OverviewWidget)),
        ("PodViewerWidget", widget(xw.PodViewerWidget)),
        ("PerfCountersWidget", widget(xw.PerfCountersWidget)),
        ("UtilizationViewerWidget", widget(xw.UtilizationViewerWidget)),
        ("KernelUtilizationWidget", widget(xw.KernelUtilizationWidget)),
        ("MegascaleStatsWidget", widget(xw.MegascaleStatsWidget)),
        ("InferenceProfileWidget", widget(xw.InferenceProfileWidget)),
        ("InputPipelineWidget", widget(xw.InputPipelineWidget)),
        ("OpProfileWidget", widget(xw.OpProfileWidget)),
        ("TraceViewerWidget", widget(xw.TraceViewerWidget)),
        ("MemoryProfileWidget", widget(xw.MemoryProfileWidget)),
        ("MemoryViewerWidget", widget(xw.MemoryViewerWidget)),
    ]


def exercise(path):
    """Run every step on the profile at `path`: {step: "ok" | "ProfileError" | finding}.
    After a ProfileError from load_run nothing else can run; after one from a tool the
    others still do."""
    from xprof_widgets.errors import ProfileError

    out = {}
    for name, step in _steps(path):
        try:
            step()
            out[name] = "ok"
        except ProfileError as error:
            out[name] = "ProfileError"
            if str(path) not in str(error) and Path(path).name not in str(error):
                out[name] = f"ProfileError not naming the file: {error}"
            if name == "load_run":
                break
        except MemoryError:
            out[name] = "blowup: MemoryError"
        except Exception as error:
            frame = traceback.extract_tb(error.__traceback__)[-1]
            where = f"{Path(frame.filename).relative_to(REPO) if frame.filename.startswith(str(REPO)) else frame.filename}:{frame.lineno}"
            out[name] = f"{type(error).__name__} at {where}: {str(error)[:200]}"
            if name == "load_run":
                break
    return out


def _worker():
    """Read mutant paths from stdin, one per line; write one JSON line of results per path."""
    if os.environ.get("XPROF_FUZZ_MEMORY_CAP", "1") != "0":  # 0: under AddressSanitizer (DEVELOP.md)
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))
    for line in sys.stdin:
        path = line.strip()
        started = time.perf_counter()
        results = exercise(path)
        print(json.dumps({"path": path, "results": results, "seconds": time.perf_counter() - started}), flush=True)


class _Worker:
    def __init__(self):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz", "--worker"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            bufsize=1,
        )
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.process.stdout, selectors.EVENT_READ)

    def run(self, path, deadline_s):
        """The mutant's results, or None if the worker ran past the deadline or died."""
        self.process.stdin.write(f"{path}\n")
        self.process.stdin.flush()
        if not self.selector.select(timeout=deadline_s):
            return None
        line = self.process.stdout.readline()
        return json.loads(line) if line else None

    def kill(self):
        self.process.kill()
        self.process.wait()


def campaign(paths, deadline_s=DEADLINE_S, warmup_s=60):
    """Every path through `exercise` in worker processes: {path: results}; a mutant that
    runs past `deadline_s` is {"worker": "hang"}, one that kills the worker {"worker": "died"}."""
    out = {}
    worker = _Worker()
    first = True
    try:
        for path in paths:
            started = time.perf_counter()
            reply = worker.run(path, deadline_s + (warmup_s if first else 0))  # the first pays for imports
            first = False
            if reply is None:
                hung = time.perf_counter() - started >= deadline_s
                out[str(path)] = {"worker": "hang" if hung else "died (memory?)"}
                worker.kill()
                worker, first = _Worker(), True
                continue
            out[str(path)] = reply["results"]
    finally:
        worker.kill()
    return out


def summary(results):
    """Counts of outcomes over all mutants: tried, ProfileError (at load), ok, findings."""
    counts = Counter()
    findings = []
    for path, steps in results.items():
        counts["tried"] += 1
        if "worker" in steps:
            counts[steps["worker"].split()[0]] += 1
            findings.append((path, "worker", steps["worker"]))
            continue
        if steps.get("load_run") == "ProfileError":
            counts["ProfileError at load"] += 1
        bad = {k: v for k, v in steps.items() if v not in ("ok", "ProfileError")}
        if bad:
            counts["other"] += 1
            findings.extend((path, k, v) for k, v in bad.items())
        elif steps.get("load_run") == "ok":
            counts["opened, every step a result or a ProfileError"] += 1
    return counts, findings


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m tests.fuzz")
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--count", type=int, default=300)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--corpus", default=os.environ.get("XPROF_CORPUS") or str(REPO.parent / "shared" / "profiles"))
    ap.add_argument("--keep", help="folder to write the mutants to (default: a temporary one)")
    ap.add_argument("--replay", help="run one file through every step here, showing tracebacks")
    args = ap.parse_args(argv)
    if args.worker:
        _worker()
        return 0
    if args.replay:
        import xprof_widgets  # noqa: F401 - imports first, so the timing is the steps'

        for name, step in _steps(args.replay):
            started = time.perf_counter()
            try:
                step()
                print(f"{name}: ok ({time.perf_counter() - started:.2f} s)")
            except Exception:
                print(f"{name}: {traceback.format_exc()}")
                if name == "load_run":
                    break
        return 0
    folder = Path(args.keep or tempfile.mkdtemp(prefix="xprof-fuzz-"))
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data, packed in mutants(args.seed, args.count, args.corpus):
        path = folder / f"{name}.xplane.pb{'.gz' if packed else ''}"
        path.write_bytes(data)
        paths.append(path)
    started = time.perf_counter()
    results = campaign(paths)
    counts, findings = summary(results)
    print(f"{len(paths)} mutants in {time.perf_counter() - started:.0f} s (kept in {folder})")
    for k, v in counts.items():
        print(f"  {k}: {v}")
    distinct = Counter(what.split(": ")[0] for _, _, what in findings)
    print("distinct findings (kind and place: mutants):")
    for what, n in distinct.most_common():
        example = next(Path(p).name + " " + step for p, step, w in findings if w.split(": ")[0] == what)
        print(f"  {what}: {n}  (e.g. {example})")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
