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

Each host's summary holds its `core.run_stats.RunStats` (XProf's OpStats of the host,
every part built on the worker), folded by `core.run_stats.StatsCombiner`: every
all-hosts tool (overview, input pipeline, op profile, HLO stats, framework op stats,
kernel stats, roofline) is then a function of the combined stats, and the driver reads no
host file for them. Not in the summary: the memory profile and trace (one host at a time,
as XProf).
"""

from __future__ import annotations

import hashlib
import os
import queue
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass, field, replace
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..errors import ProfileError
from .core.input_analysis import InputPipelineResult
from .core.op_stats import DeviceOpMetrics
from .core.run_stats import RunStats, StatsCombiner, light, run_stats
from .core.steps import STEP_COLUMNS
from .input_pipeline import input_pipeline
from .overview import OverviewResult, overview

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
    """What the all-hosts tools need of one host file: its statistics, no events.

    host: the host's name in the run (from its file name); path: its file.
    error: why the file could not be read ("" when it was; then nothing else is set).
    stats: the host's `core.run_stats.RunStats`, every part built (`materialized`).
    memory: DataFrame, one row per allocator: memory_id, peak_bytes (heap + stack at
        its highest), capacity_bytes (heap + stack + free there).
    modules: {module `name(program_id)`: digest of its HloProto}.
    seconds: how long the summary took (the worker's clock).
    row: the host's row of the per-host table (`per_host_table`), made on the worker.
    light: True once a `Combiner` has folded in and let go of its tables
        (`core.run_stats.light`: the environment, scalars, steps and allocators stay).
    """

    host: str
    path: str
    error: str = ""
    stats: RunStats | None = None
    memory: pd.DataFrame = field(default_factory=pd.DataFrame)
    modules: dict = field(default_factory=dict)
    seconds: float = 0.0
    row: dict = field(default_factory=dict)
    light: bool = False

    @property
    def hostname(self) -> str:
        return self.stats.hosts[0].hostname if self.stats is not None else ""

    @property
    def steps(self) -> pd.DataFrame:
        """The host's own steps (device steps on GPUs, else host steps; XProf's columns,
        `begin_ps` absolute)."""
        return self.stats.step_db[0] if self.stats is not None else pd.DataFrame(columns=STEP_COLUMNS)


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

    out = HostSummary(
        host=host,
        path=str(run.files[host]),
        stats=run_stats(run).materialized(),
        modules={k: hashlib.sha1(v).hexdigest() for k, v in run.hlo_protos.items()},
    )
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


#: How long a host's task may wait for its result (seconds) before the call gives up on
#: it: `XPROF_WIDGETS_HOST_TIMEOUT_S` changes it.
HOST_TIMEOUT_S = 1800.0


def host_timeout_s() -> float:
    try:
        return float(os.environ.get("XPROF_WIDGETS_HOST_TIMEOUT_S", HOST_TIMEOUT_S))
    except ValueError:
        return HOST_TIMEOUT_S


def _stop_pool(pool) -> None:
    """Shut a pool of this module's own down without waiting, its worker processes ended:
    a Ctrl-C returns at once and no worker is left running."""
    processes = list((getattr(pool, "_processes", None) or {}).values())  # (shutdown lets go of them)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        try:
            process.terminate()
        except Exception:  # already gone
            pass


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

    No result for `host_timeout_s()` seconds (a reader that hangs): a ProfileError naming
    the hosts still out. An interrupt (Ctrl-C) or any error returns at once: the pool this
    call made is shut down without waiting, its workers ended; an executor's futures still
    running are cancelled.
    """
    own = None
    if executor is None:
        own = executor = local_pool(len(paths))
    finished = False
    futures: list = []
    try:
        arrived: queue.SimpleQueue = queue.SimpleQueue()
        for i, path in enumerate(paths):
            future = executor.submit(function, path)
            future.add_done_callback(lambda _f, i=i: arrived.put(i))
            futures.append(future)
        if progress is not None:
            progress(0, len(paths))
        limit = host_timeout_s()
        waiting = set(range(len(paths)))
        for done in range(1, len(paths) + 1):
            try:
                i = arrived.get(timeout=limit)
            except queue.Empty:
                late = sorted(waiting)
                names = ", ".join(str(paths[k]).rsplit("/", 1)[-1] for k in late[:5])
                raise ProfileError(
                    str(paths[late[0]]),
                    f"no result for {limit:.0f} s from {len(late)} host file(s) ({names}): their reading "
                    "hangs or is too slow (XPROF_WIDGETS_HOST_TIMEOUT_S sets the limit)",
                ) from None
            waiting.discard(i)
            if on_result is not None:
                on_result(i, _result(futures[i], paths[i]))
                futures[i] = None  # a Dask future let go frees its result on the cluster too
            if progress is not None:
                progress(done, len(paths))
        out = [] if on_result is not None else [_result(f, p) for f, p in zip(futures, paths, strict=True)]
        finished = True
        return out
    finally:
        if own is not None:
            if finished:
                own.shutdown(wait=True, cancel_futures=True)
            else:  # an error, a timeout or Ctrl-C: return now, leave nothing running
                _stop_pool(own)
        elif not finished:
            for future in futures:
                if future is not None:
                    future.cancel()


def _result(future, path):
    """The future's result; a worker process that died (killed, out of memory) becomes a
    ProfileError naming the folder of the host files, and what to do (every task of a
    broken pool fails, not only the one that broke it)."""
    from concurrent.futures.process import BrokenProcessPool

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

    stats: the run's `core.run_stats.RunStats`, all hosts combined (every all-hosts tool
    is a function of it); overview: `OverviewResult` and input_pipeline:
    `InputPipelineResult` of it; per_host: DataFrame, one row a host (see
    `per_host_table`); module_hosts: {module: first host that holds it}; hosts: the hosts'
    summaries, light (`HostSummary.light`: their tables were folded in and let go).
    """

    stats: RunStats
    overview: OverviewResult
    input_pipeline: InputPipelineResult
    per_host: pd.DataFrame
    module_hosts: dict
    hosts: list

    @property
    def op_metrics(self) -> DeviceOpMetrics:
        return self.stats.op_metrics

    @property
    def tool_status(self) -> list:
        """[(tool, has data, why not)]: a tool has data when any host has."""
        return self.stats.tool_status


def combine(summaries: Sequence[HostSummary], run=None) -> PodSummary:
    """The all-hosts results of `summaries` (the reduce step), in host order. Hosts with
    an `error` are left out; at least one must have none. `run`: where the combined stats
    read the HLO modules (the op profile's fused ops)."""
    combiner = Combiner(run)
    for i, summary in enumerate(summaries):
        combiner.add(i, summary)
    return combiner.result()


class Combiner:
    """Folds host summaries into the all-hosts results as they arrive: their stats into a
    `core.run_stats.StatsCombiner` (running tables, the size of the distinct ops and steps),
    and a light summary per host, never every host's tables.

    XProf's combiner is ordered (the first host's metadata and steps win), and results
    arrive in any order: `add(index, summary)` keeps an early one until the hosts before
    it are in, then folds them in host order.
    """

    def __init__(self, run=None) -> None:
        self._waiting: dict[int, HostSummary] = {}
        self._next = 0
        self.hosts: list[HostSummary] = []  # light, in host order, errors included
        self._stats = StatsCombiner(run)
        self._ok = 0
        self._module_hosts: dict = {}
        self._rows: list[dict] = []

    def add(self, index: int, summary: HostSummary) -> None:
        """Summary of host number `index` (0-based, host order)."""
        self._waiting[index] = summary
        while self._next in self._waiting:
            self._fold(self._waiting.pop(self._next))
            self._next += 1

    def _fold(self, s: HostSummary) -> None:
        self._rows.append(s.row or _per_host_row(s))
        if s.error or s.stats is None:
            self.hosts.append(s)
            return
        self._stats.add(s.stats)
        self._ok += 1
        for name in s.modules:
            self._module_hosts.setdefault(name, s.host)
        self.hosts.append(replace(s, stats=light(s.stats), modules={}, light=True))

    @property
    def module_hosts(self) -> dict:
        """{module: the first host (so far) that holds it}."""
        return dict(self._module_hosts)

    def result(self) -> PodSummary:
        """The all-hosts results of the hosts added so far (at least one without an error)."""
        if not self._ok:
            raise ValueError("no host summary without an error to combine")
        stats = self._stats.result()
        return PodSummary(
            stats=stats,
            overview=overview(stats),
            input_pipeline=input_pipeline(stats),
            per_host=per_host_table(self._rows),
            module_hosts=dict(self._module_hosts),
            hosts=list(self.hosts),
        )


def _per_host_row(s: HostSummary) -> dict:
    """The per-host table's row of a (full) host summary; see `per_host_table`."""
    row: dict = dict.fromkeys(PER_HOST_COLUMNS, np.nan)
    row.update(host=s.host, error=s.error, seconds=s.seconds, hostname=s.hostname, steps=0, device_cores=0)
    if s.error or s.stats is None:
        return row
    ip = input_pipeline(s.stats)
    t = ip.steps["step_time_ms"].to_numpy(np.float64) if len(ip.steps) else np.zeros(0)
    db = s.stats.op_metrics
    device = db.source in ("tpu", "gpu") and db.total_time_ps > 0
    idle_pct = 100.0 * db.idle_time_ps / db.total_time_ps if device else np.nan
    peak = s.memory.iloc[int(np.argmax(s.memory["peak_bytes"].to_numpy()))] if len(s.memory) else None
    kind, cores = s.stats.device
    row.update(
        device_type=kind,
        device_cores=cores,
        steps=len(t),
        step_time_ms=float(t.mean()) if len(t) else np.nan,
        max_step_time_ms=float(t.max()) if len(t) else np.nan,
        idle_pct=idle_pct,
        input_pct=ip.input_percent if len(t) else np.nan,
        memory_peak_bytes=float(peak["peak_bytes"]) if peak is not None else np.nan,
        memory_id_at_peak=str(peak["memory_id"]) if peak is not None else "",
        op_time_ms=db.total_op_time_ps / 1e9,
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
