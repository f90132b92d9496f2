"""Many hosts as map, then reduce: each host file to a small summary, the summaries combined.

A TPU pod or a multi-node GPU job writes one XSpace per host, 16 to 1,000 files. XProf
converts every host to an OpStats, one after another in one process, and combines them
(`op_stats_combiner.cc`, with `step_intersection.cc` aligning the hosts' steps). Here
the per-host part runs wherever the caller's executor puts it (a process pool, Dask
workers that read the files themselves): `summarize(run)` turns a one-host run into a
`HostSummary` that holds DataFrames of ops, steps and allocators, no events; a
`Combiner` folds them in as they arrive, in the driver, keeping running tables and a
light summary per host: its memory grows with the distinct ops and steps, not
with the events, nor with every host's tables.

How hosts combine, as XProf's combiner:

* **Device op metrics** (op profile, HLO stats, top ops): rows of the same op (program
  id, name) summed over hosts, the first host's metadata kept; device time, op time
  and idle summed; peaks from the first host with a device. XLA:CPU thunks (beyond
  XProf) are summed the same way.
* **Steps**: XProf aligns every worker's steps with those of the "chief" (the worker
  with the shortest stepped span) by their overlap in time, keeps the steps all
  workers share, and on GPUs and CPUs shows the first host's steps of that range
  (its core 0 is the combined step's only entry). A host without a device in a run
  with devices is a coordinator: no steps of its own.
* **Input ops, host ops, GPU ops, module latencies**: concatenated over hosts and
  grouped as the one-process analyses group them over files.
* **Run environment**: distinct host names, device cores summed, the last device
  type seen.

`combine([one])` is that host on its own: the per-host view. tests/test_pod.py checks
that `combine` over every host equals the one-process analyses of `overview`,
`input_pipeline` and `op_stats` on the corpus runs, and that 16 copies of one host add
up (times x16) or stay equal (averages).

Not in the summary: kernel reports and the host parts of the framework op stats and
the roofline model (each tool maps its own part over the hosts when it is opened:
`Run.map_hosts`), the memory profile and trace (one host at a time, as XProf).
"""

from __future__ import annotations

import hashlib
import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from .core.availability import tool_status
from .core.environment import combine_devices, device_type
from .core.gpu_ops import GPU_OP_COLUMNS, gpu_device_ops, gpu_tf_ops, merge_gpu_device_ops
from .core.grouping import eager_events
from .core.host_ops import HOST_OP_COLUMNS, host_op_metrics, merge_host_ops
from .core.input_analysis import (
    InputPipelineResult,
    analyze_input_pipeline,
    host_input_ops,
    host_step_table,
    merge_input_ops,
)
from .core.op_stats import SUM_COLUMNS, DeviceOpMetrics, device_op_metrics
from .core.planes import gpu_planes, tensor_core_planes
from .core.steps import STEP_COLUMNS, align_steps
from .overview import (
    OverviewResult,
    assemble_overview,
    executions_latency,
    module_executions,
    tpu_duty_cycle,
)

#: `progress(hosts_done, hosts_total)`, called in the calling thread as host summaries arrive.
HostsProgress = Callable[[int, int], None]


class Executor(Protocol):
    """Where per-host work runs: anything with `concurrent.futures`' `submit` whose futures
    have `add_done_callback` and `result` (a `ProcessPoolExecutor`, a
    `dask.distributed.Client`, `InProcessExecutor`)."""

    def submit(self, fn: Callable, /, *args: Any, **kwargs: Any) -> Any: ...


PER_HOST_COLUMNS = [
    "host",
    "hostname",
    "device_type",
    "device_cores",
    "steps",
    "step_time_ms",
    "max_step_time_ms",
    "idle_pct",
    "input_pct",
    "memory_peak_bytes",
    "memory_id_at_peak",
    "op_time_ms",
    "seconds",
    "error",
]


@dataclass
class HostSummary:
    """What the all-hosts tools need of one host file: small tables, no events.

    host: the host's name in the run (from its file name); path: its file.
    error: why the file could not be read ("" when it was; then nothing else is set).
    hostname: the first host name the file records ("" when none); device_type,
        device_cores: the file's run environment (as `overview`); has_gpu, has_tpu.
    op_metrics: the host's `op_stats.DeviceOpMetrics`.
    host_ops, gpu_ops: XProf's host op database and GPU device op database of the file
        (`core.host_ops.host_op_metrics`, `core.gpu_ops.gpu_device_ops`), eager marks included.
    duty_cycle_ps: (busy, idle) of the TPU tensor cores, None without TPU.
    module_ms: DataFrame (module, ms), one row per execution of an XLA module on a device.
    input_ops: the host's tf.data / enqueue ops (`input_pipeline.host_input_ops`).
    steps: the host's step table (device steps on GPUs, else host steps; XProf's
        columns, `begin_ps` absolute); steps_reason: why a host with a device has none
        ("" otherwise: the table says).
    memory: DataFrame, one row per allocator: memory_id, peak_bytes (heap + stack at
        its highest), capacity_bytes (heap + stack + free there).
    tool_status: [(XProf's tool name, has data, why not)] of the host.
    modules: {module `name(program_id)`: digest of its HloProto}.
    seconds: how long the summary took (the worker's clock).
    row: the host's row of the per-host table (`per_host_table`), made on the worker.
    light: True once a `Combiner` has folded in and let go of the op, host op, GPU op,
        input op and module tables (the scalars, steps and allocators stay).
    """

    host: str
    path: str
    error: str = ""
    hostname: str = ""
    device_type: str = "CPU"
    device_cores: int = 0
    has_gpu: bool = False
    has_tpu: bool = False
    op_metrics: DeviceOpMetrics | None = None
    host_ops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=HOST_OP_COLUMNS))
    gpu_ops: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=GPU_OP_COLUMNS))
    duty_cycle_ps: tuple[int, int] | None = None
    module_ms: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=["module", "ms"]))
    input_ops: pd.DataFrame = field(default_factory=pd.DataFrame)
    steps: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=STEP_COLUMNS))
    steps_reason: str = ""
    memory: pd.DataFrame = field(default_factory=pd.DataFrame)
    tool_status: list = field(default_factory=list)
    modules: dict = field(default_factory=dict)
    seconds: float = 0.0
    row: dict = field(default_factory=dict)
    light: bool = False

    @property
    def has_device(self) -> bool:
        return self.has_gpu or self.has_tpu


#: A host file up to this size is summarized with its lines' stats decoded once (see `summarize`).
SHARED_STATS_BYTES = 64 * 2**20


def summarize(run) -> HostSummary:
    """The `HostSummary` of a one-host run (the map step). Reads the host's file once;
    what it returns holds no event column."""
    began = time.perf_counter()
    host = run.hosts[0]
    space = run.xspace(host)
    # The analyses below read the same lines' stats (group ids, eager marks, allocator
    # stats): each line's are decoded once for all of them, and kept until the summary is
    # done; on a big host they are decoded per reader instead, so that a worker's memory
    # stays a few times its file.
    shared = [line for plane in space.planes for line in plane.lines] if space.size <= SHARED_STATS_BYTES else []
    with space.sharing_stats(shared):
        out = _summary(run, host, space)
    out.seconds = out.row["seconds"] = time.perf_counter() - began
    return out


def _summary(run, host, space) -> HostSummary:
    from .memory_profile import allocator_peaks

    kind, cores = device_type([space])
    has_gpu = bool(gpu_planes(space))
    has_tpu = bool(tensor_core_planes(space))
    eager = eager_events(space)
    out = HostSummary(
        host=host,
        path=str(run.files[host]),
        hostname=(space.hostnames[:1] or [""])[0],
        device_type=kind,
        device_cores=cores,
        has_gpu=has_gpu,
        has_tpu=has_tpu,
        op_metrics=device_op_metrics(run),
        host_ops=host_op_metrics(space, eager),
        gpu_ops=gpu_device_ops(run, space),
        duty_cycle_ps=tpu_duty_cycle(space) if has_tpu else None,
        module_ms=module_executions(space),
        input_ops=host_input_ops(space),
        tool_status=tool_status(run),
        modules={k: hashlib.sha1(v).hexdigest() for k, v in run.hlo_protos.items()},
    )
    out.steps, out.steps_reason = host_step_table(space)
    out.memory = allocator_peaks(run, host)
    out.row = _per_host_row(out)  # on the worker: the driver only collects rows
    return out


# --- the map: summaries from an executor ------------------------------------------------


class InProcessExecutor:
    """An executor that runs each task at once in the calling thread: host summaries
    without other processes (debugging, tests, one small host)."""

    def submit(self, fn, /, *args, **kwargs):
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as error:  # handed to the caller through the future
            future.set_exception(error)
        return future


def map_hosts(
    function: Callable,
    paths: Sequence,
    executor: Executor | None = None,
    progress: HostsProgress | None = None,
    on_result: Callable[[int, Any], None] | None = None,
) -> list:
    """`function(path)` for each of `paths` on `executor` (anything with
    `concurrent.futures`' `submit`: a process pool, a `dask.distributed.Client`; None: a
    process pool sized to the machine, made for this call and shut down after).

    Results are handled in this thread as they arrive (futures' done callbacks only post
    to a queue): `on_result(index, result)` if given, and then the result is let go (so a
    reduce can keep what it needs and no more; the list returned is then empty), else
    they are returned in order. `progress(done, total)` hears of each.
    """
    own = None
    if executor is None:
        own = executor = local_pool(len(paths))
    try:
        arrived: queue.SimpleQueue = queue.SimpleQueue()
        futures: list = []
        for i, path in enumerate(paths):
            future = executor.submit(function, path)
            future.add_done_callback(lambda _f, i=i: arrived.put(i))
            futures.append(future)
        if progress is not None:
            progress(0, len(paths))
        for done in range(1, len(paths) + 1):
            i = arrived.get()
            if on_result is not None:
                on_result(i, _result(futures[i], paths[i]))
                futures[i] = None  # a Dask future let go frees its result on the cluster too
            if progress is not None:
                progress(done, len(paths))
        return [] if on_result is not None else [_result(f, p) for f, p in zip(futures, paths, strict=True)]
    finally:
        if own is not None:
            own.shutdown(wait=True, cancel_futures=True)


def _result(future, path):
    """The future's result; a worker process that died (killed, out of memory) becomes a
    ProfileError naming the folder of the host files, and what to do (every task of a
    broken pool fails, not only the one that broke it)."""
    from concurrent.futures.process import BrokenProcessPool

    from ..errors import ProfileError

    try:
        return future.result()
    except BrokenProcessPool:
        folder = str(path).rsplit("/", 1)[0]
        raise ProfileError(
            folder,
            "a worker process of the pool died while it read the hosts (killed, or out of memory). "
            "load_run(..., executor=...) with fewer workers, or analysis.pod.InProcessExecutor() "
            "to read one host at a time, needs less memory",
        ) from None


def local_pool(tasks: int) -> Any:
    """A process pool with a worker per available core (at most `tasks`).

    A caller with one thread (a script) is forked: its workers start at once with the
    package imported. A caller with threads (a notebook kernel, ProfileWidget's reader)
    is never forked, since a lock another thread holds would stay held in the copy: its
    workers are forked from a fresh server process that imports the package once
    (multiprocessing's "forkserver", about a second the first time).
    """
    import multiprocessing
    import os
    import threading
    from concurrent.futures import ProcessPoolExecutor

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    methods = multiprocessing.get_all_start_methods()
    context: multiprocessing.context.BaseContext
    if threading.active_count() == 1 and "fork" in methods:
        context = multiprocessing.get_context("fork")
    elif "forkserver" in methods:
        server = multiprocessing.get_context("forkserver")
        server.set_forkserver_preload(["xprof_widgets.run"])
        context = server
    else:  # Windows, macOS without fork: fresh interpreters
        context = multiprocessing.get_context("spawn")
    return ProcessPoolExecutor(max_workers=max(1, min(cores, tasks)), mp_context=context)


# --- the reduce ---------------------------------------------------------------------------


@dataclass
class PodSummary:
    """The hosts of a run combined (see the module docstring).

    op_metrics: `DeviceOpMetrics` of all hosts; input_pipeline: `InputPipelineResult`;
    overview: `OverviewResult`; tool_status: [(tool, has data, why not)], a tool has
    data when any host has; per_host: DataFrame, one row a host (see `per_host_table`);
    module_hosts: {module: first host that holds it}; hosts: the hosts' summaries,
    light (`HostSummary.light`: their big tables were folded in and let go);
    gpu_tf_ops: the GPU TF-op database of all hosts (by framework op: occurrences,
    time_ps, is_eager; empty without GPU ops).
    """

    op_metrics: DeviceOpMetrics
    input_pipeline: InputPipelineResult
    overview: OverviewResult
    tool_status: list
    per_host: pd.DataFrame
    module_hosts: dict
    hosts: list
    gpu_tf_ops: pd.DataFrame = field(default_factory=pd.DataFrame)


def combine(summaries: Sequence[HostSummary]) -> PodSummary:
    """The all-hosts results of `summaries` (the reduce step), in host order. Hosts with
    an `error` are left out; at least one must have none."""
    combiner = Combiner()
    for i, summary in enumerate(summaries):
        combiner.add(i, summary)
    return combiner.result()


_FOLD_EVERY = 8  # hosts whose tables the combiner folds in one go


class Combiner:
    """Folds host summaries into the all-hosts results as they arrive, so the driver
    keeps running tables (their size that of the distinct ops and input ops) and
    a light summary per host, never every host's tables.

    XProf's combiner is ordered (the first host's metadata and steps win), and results
    arrive in any order: `add(index, summary)` keeps an early one until the hosts before
    it are in, then folds them in host order.
    """

    def __init__(self) -> None:
        self._waiting: dict[int, HostSummary] = {}
        self._next = 0
        self.hosts: list[HostSummary] = []  # light, in host order, errors included
        self._ok: list[HostSummary] = []
        self._dbs: dict[str, dict] = {}  # op metrics by source (see combine_op_metrics)
        self._first_db: DeviceOpMetrics | None = None
        self._input_ops: pd.DataFrame | None = None
        self._host_ops: pd.DataFrame | None = None
        self._gpu_ops: pd.DataFrame | None = None
        self._module_ms: list[pd.DataFrame] = []
        self._tool_status: list | None = None
        self._module_hosts: dict = {}
        self._rows: list[dict] = []
        self._pending: list[HostSummary] = []  # full summaries whose tables wait to be folded

    def add(self, index: int, summary: HostSummary) -> None:
        """Summary of host number `index` (0-based, host order)."""
        self._waiting[index] = summary
        while self._next in self._waiting:
            self._fold(self._waiting.pop(self._next))
            self._next += 1

    def _fold(self, s: HostSummary) -> None:
        self._rows.append(s.row or _per_host_row(s))
        if s.error:
            self.hosts.append(s)
            return
        self._pending.append(s)
        if len(self._pending) >= _FOLD_EVERY:
            self._fold_tables()
        if self._tool_status is None:
            self._tool_status = list(s.tool_status)
        else:
            self._tool_status = [
                (t, have or other, "" if have or other else why)
                for (t, have, why), (_, other, _) in zip(self._tool_status, s.tool_status)
            ]
        for name in s.modules:
            self._module_hosts.setdefault(name, s.host)
        light = _light(s)
        self.hosts.append(light)
        self._ok.append(light)

    def _fold_tables(self) -> None:
        """Folds the tables of the hosts waiting in `_pending` into the running ones, in
        host order: a few hosts at a time, as sums and firsts come out the same in one
        group-by over several hosts as host by host, and pandas' cost is per call."""
        batch, self._pending = self._pending, []
        if not batch:
            return
        for s in batch:
            self._fold_op_metrics(s.op_metrics)
        self._input_ops = merge_input_ops([self._input_ops, *(s.input_ops for s in batch)])
        self._host_ops = merge_host_ops([self._host_ops, *(s.host_ops for s in batch)])
        if any(not s.gpu_ops.empty for s in batch):
            self._gpu_ops = merge_gpu_device_ops([s.gpu_ops for s in batch], merged=self._gpu_ops)
        self._module_ms.extend(s.module_ms for s in batch if len(s.module_ms))

    def _fold_op_metrics(self, db: DeviceOpMetrics | None) -> None:
        """XProf's `OpMetricsDbCombiner`, one host at a time, kept apart by kind of ops
        until all are in (the run's kind is the first of TPU, GPU, XLA:CPU any host has)."""
        if db is None:
            return
        if self._first_db is None:
            self._first_db = db
        if db.empty and not db.total_time_ps:
            return
        acc = self._dbs.get(db.source)
        if acc is None:
            self._dbs[db.source] = {
                "first": db,
                "count": 1,
                "names": dict(db.program_names),
                "total": db.total_time_ps,
                "op_time": db.total_op_time_ps,
                "peaks": db.peaks if not db.empty else None,
                "ops": None if db.empty else db.ops,
            }
            return
        acc["count"] += 1
        for pid, name in db.program_names.items():
            acc["names"].setdefault(pid, name)
        acc["total"] += db.total_time_ps
        acc["op_time"] += db.total_op_time_ps
        if not db.empty:
            if acc["peaks"] is None:
                acc["peaks"] = db.peaks
            acc["ops"] = db.ops if acc["ops"] is None else _merge_ops(acc["ops"], db.ops)

    def result(self) -> PodSummary:
        """The all-hosts results of the hosts added so far (at least one without an error)."""
        self._fold_tables()
        ok = self._ok
        if not ok:
            raise ValueError("no host summary without an error to combine")
        db = self._op_metrics()
        ip = combine_input_pipeline(ok, self._input_ops if self._input_ops is not None else pd.DataFrame())
        gpu_tf = gpu_tf_ops(self._gpu_ops)
        return PodSummary(
            op_metrics=db,
            input_pipeline=ip,
            overview=self._overview(db, ip, gpu_tf),
            tool_status=list(self._tool_status or []),
            per_host=per_host_table(self._rows),
            module_hosts=dict(self._module_hosts),
            hosts=list(self.hosts),
            gpu_tf_ops=gpu_tf,
        )

    def _op_metrics(self) -> DeviceOpMetrics:
        acc = next((self._dbs[k] for k in ("tpu", "gpu", "cpu") if k in self._dbs), None)
        if acc is None:
            assert self._first_db is not None
            return self._first_db
        first = acc["first"]
        if acc["count"] == 1:
            return first
        peaks = acc["peaks"] if acc["peaks"] is not None else first.peaks
        total, op_time, names = acc["total"], acc["op_time"], acc["names"]
        if acc["ops"] is None:
            return DeviceOpMetrics(
                first.ops, total, op_time, names, peaks, reason=first.reason, source=first.source, notes=first.notes
            )
        out = acc["ops"].copy()
        if first.source == "gpu":
            out["hbm_bytes"] = out["hbm_read_bytes"] + out["hbm_write_bytes"]
            out["has_breakdown"] = out["hbm_bytes"] > 0
        else:
            out["normalized_time_ps"] = out["time_ps"]
        return DeviceOpMetrics(out, total, op_time, names, peaks, reason="", source=first.source, notes=first.notes)

    def _overview(self, db, ip, gpu_tf) -> OverviewResult:
        """The overview page from the hosts' parts, as `overview.overview` builds it from files."""
        ok = self._ok
        kind, cores = combine_devices((s.device_type, s.device_cores) for s in ok)
        return assemble_overview(
            ip,
            db,
            hostnames={s.hostname for s in ok},
            device=(kind, cores),
            host_ops=self._host_ops.set_index("name") if self._host_ops is not None else pd.DataFrame(),
            gpu_ops=gpu_tf,
            duty_cycles=[s.duty_cycle_ps for s in ok if s.duty_cycle_ps] if any(s.has_tpu for s in ok) else None,
            has_gpu=any(s.has_gpu for s in ok),
            latency=executions_latency(self._module_ms),
        )


def _merge_ops(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """Two op tables as one: rows of one op (program id, name) summed, the first's
    metadata kept (GPUs: `num_cores` summed, every host's devices being its own;
    `is_eager` if either)."""
    ops = pd.concat([a, b], ignore_index=True)
    sums = [c for c in (*SUM_COLUMNS, "kernels", "num_cores") if c in ops]
    g = ops.groupby(["program_id", "name"], sort=False)
    out = g.first().drop(columns=sums).join(g[sums].sum())
    if "is_eager" in ops:
        out["is_eager"] = g["is_eager"].any()
    return out.reset_index()[list(a.columns)]


def _light(s: HostSummary) -> HostSummary:
    """`s` without the tables the combiner folded in: what the driver keeps of a host."""
    db = s.op_metrics
    if db is not None:
        db = DeviceOpMetrics(
            db.ops.iloc[:0], db.total_time_ps, db.total_op_time_ps, {}, db.peaks, db.reason, db.source, db.notes
        )
    empty = pd.DataFrame()
    return replace(
        s,
        op_metrics=db,
        host_ops=pd.DataFrame(columns=HOST_OP_COLUMNS),
        gpu_ops=pd.DataFrame(columns=GPU_OP_COLUMNS),
        module_ms=pd.DataFrame(columns=["module", "ms"]),
        input_ops=empty,
        modules={},
        light=True,
    )


def combine_op_metrics(dbs: Sequence) -> DeviceOpMetrics:
    """The device op metrics of several hosts as one (XProf's `OpMetricsDbCombiner`):
    hosts of the first kind found (TPU, else GPU, else XLA:CPU) combined, rows of one op
    summed, its first host's metadata kept."""
    combiner = Combiner()
    for db in dbs:
        combiner._fold_op_metrics(db)
    return combiner._op_metrics()


def step_intersection(step_tables: Sequence[pd.DataFrame | None]) -> tuple[list[int], int]:
    """XProf's step intersection (`StepIntersection`): ([first step index of each host],
    number of steps all share). Each table needs begin_ps and step_time_ms; a host
    that is None takes no part (index 0)."""
    spans: list[tuple[np.ndarray, np.ndarray] | None] = []
    for t in step_tables:
        if t is None:
            spans.append(None)
            continue
        starts = t["begin_ps"].to_numpy(np.float64) if len(t) else np.zeros(0)
        duration = np.round(t["step_time_ms"].to_numpy(np.float64) * 1e9) if len(t) else np.zeros(0)
        spans.append((starts, starts + duration))
    workers = [i for i, s in enumerate(spans) if s is not None]
    if not workers:
        return [0] * len(spans), 0

    def stepped(i):
        b, e = spans[i]  # type: ignore[misc]  # (a worker's span is there)
        real = e > b
        return float(e[real].max() - b[real].min()) if real.any() else 0.0

    chief = min(workers, key=stepped)  # the first of equals, in host order
    chief_span = spans[chief]
    assert chief_span is not None  # (a worker)
    n_chief = len(chief_span[0])
    if n_chief == 0:
        return [0] * len(spans), 0
    align: dict[int, tuple[int, int, int]] = {}
    for i in workers:
        align[i] = (0, 0, n_chief) if i == chief else align_steps(spans[i], chief_span)
    begin = max(a[1] for a in align.values())
    end = min(a[1] + a[2] for a in align.values())
    if begin > end:
        return [0] * len(spans), 0
    first = [int(align[i][0] + begin - align[i][1]) if i in align else 0 for i in range(len(spans))]
    return first, int(end - begin)


def combine_input_pipeline(ok: Sequence[HostSummary], input_ops: pd.DataFrame | None = None) -> InputPipelineResult:
    """XProf's input pipeline of the hosts: the first host's steps of the range all
    workers share, the input ops of every host summed (`input_ops`: already summed)."""
    if input_ops is None:
        input_ops = merge_input_ops([s.input_ops for s in ok])
    first = ok[0]
    if first.steps_reason:
        res = analyze_input_pipeline(pd.DataFrame(columns=STEP_COLUMNS), input_ops)
        res.reason = first.steps_reason
        return res
    steps = first.steps
    if len(ok) > 1:
        accelerated = any(s.has_device for s in ok)
        workers = [s.has_device or not accelerated for s in ok]
        tables = [s.steps if w and not s.steps_reason else None for s, w in zip(ok, workers)]
        if not workers[0]:  # the first host is a coordinator: XProf's combined steps are empty
            steps = steps.iloc[:0]
        else:
            firsts, n = step_intersection(tables)
            steps = steps.iloc[firsts[0] : firsts[0] + n].reset_index(drop=True)
    return analyze_input_pipeline(steps, input_ops)


def _per_host_row(s: HostSummary) -> dict:
    """The per-host table's row of a (full) host summary; see `per_host_table`."""
    row: dict = dict.fromkeys(PER_HOST_COLUMNS, np.nan)
    row.update(host=s.host, error=s.error, seconds=s.seconds, hostname=s.hostname, steps=0, device_cores=0)
    if s.error:
        return row
    ip = combine_input_pipeline([s])
    t = ip.steps["step_time_ms"].to_numpy(np.float64) if len(ip.steps) else np.zeros(0)
    db = s.op_metrics
    device = db is not None and db.source in ("tpu", "gpu") and db.total_time_ps > 0
    idle_pct = 100.0 * db.idle_time_ps / db.total_time_ps if device and db is not None else np.nan
    peak = s.memory.iloc[int(np.argmax(s.memory["peak_bytes"].to_numpy()))] if len(s.memory) else None
    row.update(
        device_type=s.device_type,
        device_cores=s.device_cores,
        steps=len(t),
        step_time_ms=float(t.mean()) if len(t) else np.nan,
        max_step_time_ms=float(t.max()) if len(t) else np.nan,
        idle_pct=idle_pct,
        input_pct=ip.input_percent if len(t) else np.nan,
        memory_peak_bytes=float(peak["peak_bytes"]) if peak is not None else np.nan,
        memory_id_at_peak=str(peak["memory_id"]) if peak is not None else "",
        op_time_ms=db.total_op_time_ps / 1e9 if db is not None else np.nan,
    )
    return row


def per_host_table(rows: Sequence[dict]) -> pd.DataFrame:
    """One row a host, to spot a straggler: host, hostname, device_type, device_cores,
    steps (count), step_time_ms and max_step_time_ms (mean and longest of its own steps),
    idle_pct (device time no op ran, %; NaN without a device), input_pct (its own
    input %), memory_peak_bytes (the largest allocator peak, heap + stack) and
    memory_id_at_peak, op_time_ms (device op time), seconds (to summarize it), error.
    From the hosts' rows (`HostSummary.row`, made on each host's worker)."""
    return pd.DataFrame(rows, columns=PER_HOST_COLUMNS).astype({"steps": np.int64, "device_cores": np.int64})
