"""The statistics every tool reads of a run, built once per host and combined across hosts:
XProf's OpStats (`xplane_to_op_stats.cc` builds one per host, `op_stats_combiner.cc`
combines them, each tool is an `op_stats_to_*.cc` conversion of the result).

`RunStats` holds, as XProf's OpStats does:

============  ==============================================================================
part          what (XProf's field)
============  ==============================================================================
hosts         each host's run environment and peaks, in host order (`run_environment`,
              `perf_env`): `HostEnvironment`
op_metrics    the device op database (`device_op_metrics_db`): `op_stats.DeviceOpMetrics`
host_op_db    the host op database (`host_op_metrics_db`): (ops with IDLE last, total time,
              op time), None without host threads (`host_ops.host_op_db`)
gpu_ops       the GPU device ops with their framework op and eager mark, from which the TF-op
              database of the device comes (`gpu_ops.gpu_device_ops`, merged)
kernels       the kernel stats database (`kernel_stats_db`): `kernels.kernel_reports`' frame,
              or why there is none
step_db       the steps the input pipeline and the overview read (`step_db`): (steps, reason)
step_spans    each host's device step spans as the roofline model reads them
              (`steps.device_step_spans`)
input_ops     the tf.data and enqueue ops (`input_analysis.host_input_ops`, summed)
duty_cycles   each TPU host's (busy, idle) TensorCore time (`device_time.tpu_duty_cycle`)
module_ms     every execution of an XLA module on a device: module, ms
requests      every inference request of every host (`inference.host_inference`): its span,
              device and transfer time
batches       every inference batch of every host (`inference.host_inference`)
pod_steps     each host file's steps per core, every step kept (`pod_stats.HostPodSteps`): the
              pod viewer's, and on TPU the step database's
tool_status   [(XProf's tool name, has data, why not)]
attribute_cuda_graphs
              whether GPU kernels run in CUDA graphs were given their HLO ops
              (`command_buffers`), or left idle as XProf does
============  ==============================================================================

One host: `run_stats(run)` gives the run's, each part built the first time a tool asks for
it (a tool opened on its own builds only what it reads, as XProf's `OpStatsOptions` asks
only for what a tool needs), every part once per run. Many hosts: each host's worker builds
them all (`materialized`, no events, picklable) and `StatsCombiner` folds them in host
order into the run's. The tools (`analysis/*.py`) are functions of a `RunStats`.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd

from .availability import tool_status
from .cache import derived, kept
from .device_time import module_executions, no_module_executions, tpu_duty_cycle
from .environment import combine_devices, combine_perf_env, hardware, host_device, host_perf_env
from .gpu_ops import GPU_OP_COLUMNS, gpu_device_ops, gpu_tf_ops, merge_gpu_device_ops
from .grouping import eager_events
from .host_ops import HOST_OP_COLUMNS, combine_host_op_dbs, host_op_db
from .inference import host_batching_params, host_inference, no_batches, no_requests
from .input_analysis import (
    InputPipelineResult,
    analyze_input_pipeline,
    analyze_tpu_input_pipeline,
    host_input_ops,
    host_step_table,
    is_tpu_step_table,
    merge_input_ops,
)
from .kernels import all_hosts_reports, combine_kernel_reports
from .op_stats import SUM_COLUMNS, DeviceOpMetrics, device_op_metrics
from .planes import gpu_planes, has_tensor_cores, host_plane, tensor_core_planes
from .pod_stats import HostPodSteps, combine_pod_steps, host_pod_steps
from .runlike import RunLike
from .steps import device_step_spans, step_intersection
from .tpu_steps import CORE_COLUMNS, NO_TPU_STEPS_REASON, tpu_step_table
from .xla_ops import ProgramModules, program_modules


@dataclass(frozen=True)
class HostEnvironment:
    """One host's run environment and peaks (XProf's `RunEnvironment` and `PerfEnv` of a host).

    hostname: the first host name the file records ("" when none); device: (device type or
    None, cores) (`environment.host_device`); hardware: "TPU", "GPU" or "CPU"; perf: the
    peaks of its first device plane (`environment.plane_perf_env`), None without one;
    has_gpu, has_tpu: whether it has GPU planes, TPU TensorCore planes.
    mxu_percent, hbm_percent: the host plane's `matrix_unit_utilization_percent` and
    `hbm_utilization_percent` stats (the TPU runtime's own measure over the capture), 0.0
    without them, as XProf reads them.
    """

    hostname: str
    device: tuple[str | None, int]
    hardware: str
    perf: dict | None
    has_gpu: bool
    has_tpu: bool
    mxu_percent: float = 0.0
    hbm_percent: float = 0.0


def host_environment(space) -> HostEnvironment:
    """`HostEnvironment` of one host file."""
    kind, perf = host_perf_env(space)
    return HostEnvironment(
        hostname=(space.hostnames[:1] or [""])[0],
        device=host_device(space),
        hardware=kind,
        perf=perf,
        has_gpu=bool(gpu_planes(space)),
        has_tpu=bool(tensor_core_planes(space)),
        mxu_percent=_host_stat_percent(space, "matrix_unit_utilization_percent"),
        hbm_percent=_host_stat_percent(space, "hbm_utilization_percent"),
    )


def _host_stat_percent(space, name) -> float:
    """A number stat of the file's host plane (0.0 where absent or not a finite number)."""
    plane = host_plane(space)
    value = plane.stats.get(name) if plane is not None else None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return 0.0
    return float(value)


# --- the parts, built from a run's files in this process ------------------------------------


def _hosts(run):
    return [host_environment(s) for s in run.xspaces()]


def _host_op_db(run):
    spaces = run.xspaces()
    return host_op_db(spaces, [eager_events(s) for s in spaces])


def _gpu_ops(run):
    return merge_gpu_device_ops([gpu_device_ops(run, s) for s in run.xspaces()])


def _step_db(run):
    spaces = run.xspaces()
    if any(has_tensor_cores(s) for s in spaces):  # XProf's TPU steps: every host's cores
        return tpu_step_db(run_stats(run).pod_steps)
    return host_step_table(spaces[0])


def tpu_step_db(pod_steps) -> tuple[pd.DataFrame, str]:
    """(steps, reason) of TPU hosts: XProf's TPU step table over the steps all hosts share,
    every TensorCore of every host taking part (`pod_stats.combine_pod_steps`)."""
    cores, _ = combine_pod_steps(pod_steps)
    steps = tpu_step_table(cores if cores is not None else pd.DataFrame(columns=CORE_COLUMNS))
    reasons = [h.reason for h in pod_steps if h.reason]
    return steps, "" if len(steps) else (reasons[0] if reasons else NO_TPU_STEPS_REASON)


def _requests(run):
    return pd.concat([host_inference(s)[0] for s in run.xspaces()], ignore_index=True)


def _batches(run):
    return pd.concat([host_inference(s)[1] for s in run.xspaces()], ignore_index=True)


def _batching_params(run):
    return merge_batching_params(host_batching_params(s) for s in run.xspaces())


def merge_batching_params(hosts) -> dict:
    """Hosts' {model id: batching parameters} as one: the first host to have a model's wins
    (XProf's `CombineModelIdDatabases`)."""
    out: dict = {}
    for params in hosts:
        for model, values in params.items():
            out.setdefault(model, values)
    return out


def _pod_steps(run):
    return [host_pod_steps(s) for s in run.xspaces()]


def _step_spans(run):
    return [device_step_spans(s, hardware(s)) for s in run.xspaces()]


def _input_ops(run):
    return merge_input_ops([host_input_ops(s) for s in run.xspaces()])


def _duty_cycles(run):
    return [tpu_duty_cycle(s) for s in run.xspaces() if tensor_core_planes(s)]


def _module_ms(run):
    return pd.concat([module_executions(s) for s in run.xspaces()], ignore_index=True)


#: Each part and how it is built from a run whose files this process reads.
BUILDERS: dict[str, Callable[[Any], Any]] = {
    "hosts": _hosts,
    "op_metrics": device_op_metrics,
    "host_op_db": _host_op_db,
    "gpu_ops": _gpu_ops,
    "kernels": all_hosts_reports,
    "step_db": _step_db,
    "step_spans": _step_spans,
    "input_ops": _input_ops,
    "duty_cycles": _duty_cycles,
    "module_ms": _module_ms,
    "pod_steps": _pod_steps,
    "requests": _requests,
    "batches": _batches,
    "batching_params": _batching_params,
    "tool_status": tool_status,
    "attribute_cuda_graphs": lambda run: bool(run.attribute_cuda_graphs),
}
PARTS = tuple(BUILDERS)


class RunStats:
    """XProf's OpStats of a run (see the module docstring): its parts, as properties, and
    what follows from them. Built by `run_stats(run)` (parts on first use) or `combine`
    (all parts, from hosts' `materialized` stats)."""

    def __init__(self, run: RunLike | None = None, **parts: Any) -> None:
        unknown = set(parts) - set(PARTS)
        if unknown:
            raise TypeError(f"not a part of RunStats: {sorted(unknown)}")
        self._run = run
        self._parts = parts

    def _part(self, name: str) -> Any:
        if name in self._parts:
            return self._parts[name]
        run = self._run
        if run is None:
            raise LookupError(f"this RunStats was built without its {name!r}")
        return derived(self, name, lambda: BUILDERS[name](run))

    def build_ahead(self, name: str, first: Callable[[RunLike], None] | None = None) -> None:
        """Start building part `name` on a thread, for a tool that reads it after another
        part: the compiled stat decoding releases the GIL, so a host's op database
        (decoding every host thread's `tf_op`) is built while the device's op database is
        (framework op stats, overview: 150 -> 139 ms on the 45 MB AMD file). A caller that
        asks for the part meanwhile waits for it (`derived`'s lock); an error is left for
        that caller to meet (the part is built again there). Nothing where the part is
        built already or there is no run to build it from. `first(run)`, where given, runs
        on the thread before the part is built (`grouping.gpu_stats_first`: the GPU stats
        the tool reads first, decoded with it)."""
        run = self._run
        if run is None or name in self._parts or kept(self, name):
            return

        def build():
            try:
                if first is not None:
                    first(run)
                self._part(name)
            except Exception:  # (raised again to the caller that asks for the part)
                pass

        threading.Thread(target=build, name=f"xprof-widgets {name}", daemon=True).start()

    def materialized(self) -> RunStats:
        """Every part built, and nothing else held (no run, no events): what a host's worker
        sends back."""
        return RunStats(None, **{name: self._part(name) for name in PARTS})

    def __getstate__(self) -> dict:
        # Sent to another process: the parts only (built first if a run was given).
        return {"_run": None, "_parts": self._parts if self._run is None else self.materialized()._parts}

    # --- the parts ---

    @property
    def hosts(self) -> list[HostEnvironment]:
        return self._part("hosts")

    @property
    def op_metrics(self) -> DeviceOpMetrics:
        return self._part("op_metrics")

    @property
    def host_op_db(self) -> tuple[pd.DataFrame, int, int] | None:
        return self._part("host_op_db")

    @property
    def gpu_ops(self) -> pd.DataFrame:
        return self._part("gpu_ops")

    @property
    def kernels(self) -> pd.DataFrame | str:
        return self._part("kernels")

    @property
    def step_db(self) -> tuple[pd.DataFrame, str]:
        return self._part("step_db")

    @property
    def step_spans(self) -> list:
        return self._part("step_spans")

    @property
    def input_ops(self) -> pd.DataFrame:
        return self._part("input_ops")

    @property
    def duty_cycles(self) -> list[tuple[int, int]]:
        return self._part("duty_cycles")

    @property
    def module_ms(self) -> pd.DataFrame:
        return self._part("module_ms")

    @property
    def requests(self) -> pd.DataFrame:
        return self._part("requests")

    @property
    def batches(self) -> pd.DataFrame:
        return self._part("batches")

    @property
    def batching_params(self) -> dict:
        """{model id: TF Serving's batching parameters} (`inference.host_batching_params`)."""
        return self._part("batching_params")

    @property
    def pod_steps(self) -> list[HostPodSteps]:
        return self._part("pod_steps")

    @property
    def tool_status(self) -> list:
        return self._part("tool_status")

    @property
    def attribute_cuda_graphs(self) -> bool:
        return self._part("attribute_cuda_graphs")

    # --- what follows from them ---

    @property
    def hostnames(self) -> list[str]:
        """The distinct host names, in host order."""
        return list(dict.fromkeys(h.hostname for h in self.hosts))

    @property
    def device(self) -> tuple[str, int]:
        """The run's (device type, cores), as XProf combines run environments."""
        kind, cores = combine_devices(h.device for h in self.hosts)
        return str(kind), cores

    @property
    def has_gpu(self) -> bool:
        return any(h.has_gpu for h in self.hosts)

    @property
    def has_tpu(self) -> bool:
        return any(h.has_tpu for h in self.hosts)

    @property
    def perf_env(self) -> dict:
        """The peaks the tools divide by, all hosts combined (`environment.combine_perf_env`)."""
        return combine_perf_env([(h.hardware, h.perf) for h in self.hosts], self.device)

    @property
    def host_ops(self) -> pd.DataFrame:
        """The host op database without IDLE, by op name (the index): occurrences,
        self_time_ps, is_eager."""
        db = self.host_op_db
        if db is None:
            return pd.DataFrame(columns=HOST_OP_COLUMNS).set_index("name")
        return db[0].iloc[:-1][HOST_OP_COLUMNS].set_index("name")

    @property
    def gpu_tf_ops(self) -> pd.DataFrame:
        """XProf's TF-op database of the GPU device ops (`gpu_ops.gpu_tf_ops`)."""
        return derived(self, "gpu_tf_ops", lambda: gpu_tf_ops(self.gpu_ops))

    @property
    def is_training(self) -> bool:
        """XProf's run environment `is_training`: some XLA program computes a gradient
        (`ProgramModules.is_training`); False without programs."""
        try:
            modules = self.modules
        except LookupError:
            return False
        return modules.is_training()

    @property
    def modules(self) -> ProgramModules:
        """The run's XLA programs (`xla_ops.program_modules`): read from the run's HLO protos,
        not part of the statistics (a combined RunStats reads them from the run it was given)."""
        if self._run is None:
            raise LookupError("this RunStats was built without its run: no HLO modules")
        return program_modules(self._run)


def as_stats(source: RunStats | RunLike) -> RunStats:
    """What a tool reads: `source` if it is a `RunStats`, else the run's stats read in this
    process (`run_stats`)."""
    return source if isinstance(source, RunStats) else run_stats(source)


def input_pipeline_result(stats: RunStats) -> InputPipelineResult:
    """XProf's input pipeline analysis of the stats' steps and input ops
    (`input_analysis.analyze_input_pipeline`); the step database's reason when it has no
    steps. Once per RunStats (the overview shows part of it): shared, do not change it."""

    def compute():
        steps, reason = stats.step_db
        analyze = analyze_tpu_input_pipeline if is_tpu_step_table(steps) else analyze_input_pipeline
        res = analyze(steps.copy(), stats.input_ops)
        if reason:
            res.reason = reason
        return res

    return derived(stats, "input_pipeline", compute)


def run_stats(run: RunLike) -> RunStats:
    """The `RunStats` of `run` read in this process (every host file here), its parts built
    on first use; one per run."""
    return derived(run, "run_stats", lambda: RunStats(run))


# --- many hosts: combined ---------------------------------------------------------------------


class StatsCombiner:
    """Folds hosts' materialized `RunStats`, in host order, into the run's (XProf's
    `CombineAllOpStats`), a few hosts at a time, keeping running tables: its memory grows
    with the distinct ops and steps, not with the hosts.

    How each part combines, as XProf's combiner:

    * op_metrics: rows of one op (program id, name) summed over the hosts of the run's kind
      of ops (TPU, else GPU, else XLA:CPU thunks), the first host's metadata kept; device
      time, op time and idle summed; peaks from the first host with ops.
    * host_op_db, gpu_ops, input_ops: rows of one op summed (first type, first order, eager
      if any); kernels: every host's reports sorted and cut again.
    * step_db: XProf's step intersection (`steps.step_intersection`): the steps all workers
      share, of the first host; a host without a device in a run with devices is a
      coordinator (no steps of its own); the first host's reason when it has none.
    * hosts, step_spans, duty_cycles, module_ms, pod_steps, requests: each host's, in host order; on
      TPU the step database is XProf's TPU step table over every host's cores
      (`tpu_step_db`).
    * tool_status: a tool has data when any host has.
    """

    #: Hosts' tables are folded in batches of at least this many, and of an eighth of the
    #: hosts in so far: a fold costs pandas' per-call overhead (tens of ms), so 1,000 hosts
    #: take about 40 folds, not 125, and the hosts waiting stay a fraction of the run.
    _FOLD_EVERY = 8

    def __init__(self, run: RunLike | None = None) -> None:
        self._run = run
        self._count = 0
        self._pending: list[RunStats] = []
        self._hosts: list[HostEnvironment] = []
        self._dbs: dict[str, dict] = {}
        self._first_db: DeviceOpMetrics | None = None
        self._host_op_db: tuple | None = None
        self._gpu_ops: pd.DataFrame | None = None
        self._kernels: pd.DataFrame | str | None = None
        self._input_ops: pd.DataFrame | None = None
        self._steps: list[tuple[pd.DataFrame, str, bool]] = []
        self._step_spans: list = []
        self._duty: list = []
        self._module_ms: list[pd.DataFrame] = []
        self._pod_steps: list[HostPodSteps] = []
        self._requests: list[pd.DataFrame] = []
        self._batches: list[pd.DataFrame] = []
        self._batching_params: dict = {}
        self._tool_status: list | None = None
        self._graphs: bool | None = None

    def add(self, stats: RunStats) -> None:
        """The next host's stats (`RunStats.materialized`)."""
        self._count += 1
        self._hosts.extend(stats.hosts)
        has_device = any(h.has_gpu or h.has_tpu for h in stats.hosts)
        steps, reason = stats.step_db
        self._steps.append((steps, reason, has_device))
        self._step_spans.extend(stats.step_spans)
        self._duty.extend(stats.duty_cycles)
        self._pod_steps.extend(stats.pod_steps)
        if len(stats.requests):
            self._requests.append(stats.requests)
        if len(stats.batches):
            self._batches.append(stats.batches)
        self._batching_params = merge_batching_params([self._batching_params, stats.batching_params])
        if len(stats.module_ms):
            self._module_ms.append(stats.module_ms)
        if self._graphs is None:
            self._graphs = stats.attribute_cuda_graphs
        status = stats.tool_status
        if self._tool_status is None:
            self._tool_status = list(status)
        else:
            self._tool_status = [
                (t, have or other, "" if have or other else why)
                for (t, have, why), (_, other, _) in zip(self._tool_status, status)
            ]
        self._pending.append(stats)
        if len(self._pending) >= max(self._FOLD_EVERY, self._count // 8):
            self._fold()

    def _fold(self) -> None:
        """The tables of the hosts waiting, folded into the running ones in host order: sums
        and firsts come out the same in one group-by over several hosts as host by host, and
        pandas' cost is per call."""
        batch, self._pending = self._pending, []
        if not batch:
            return
        for s in batch:
            self._fold_op_metrics(s.op_metrics)
        for acc in self._dbs.values():  # the batch's op tables in one group-by
            if acc["pending"]:
                tables = acc["pending"] if acc["ops"] is None else [acc["ops"], *acc["pending"]]
                acc["ops"], acc["pending"] = _merge_ops(tables), []
        self._input_ops = merge_input_ops([self._input_ops, *(s.input_ops for s in batch)])
        self._host_op_db = combine_host_op_dbs([self._host_op_db, *(s.host_op_db for s in batch)])
        if any(not s.gpu_ops.empty for s in batch):
            self._gpu_ops = merge_gpu_device_ops([s.gpu_ops for s in batch], merged=self._gpu_ops)
        kernels = [s.kernels for s in batch]
        self._kernels = combine_kernel_reports(kernels if self._kernels is None else [self._kernels, *kernels])

    def _fold_op_metrics(self, db: DeviceOpMetrics) -> None:
        """XProf's `OpMetricsDbCombiner`, one host at a time, kept apart by kind of ops until
        all are in."""
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
                "pending": [],  # op tables of this batch, merged at the end of `_fold`
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
            acc["pending"].append(db.ops)

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

    def result(self) -> RunStats:
        """The run's stats from the hosts added so far (at least one)."""
        if not self._count:
            raise ValueError("no host stats to combine")
        self._fold()
        return RunStats(
            self._run,
            hosts=list(self._hosts),
            op_metrics=self._op_metrics(),
            host_op_db=self._host_op_db,
            gpu_ops=self._gpu_ops if self._gpu_ops is not None else pd.DataFrame(columns=GPU_OP_COLUMNS),
            kernels=self._kernels,
            step_db=(
                tpu_step_db(self._pod_steps)
                if any(h.tpu is not None for h in self._pod_steps)
                else combined_step_db(self._steps)
            ),
            step_spans=list(self._step_spans),
            input_ops=self._input_ops if self._input_ops is not None else pd.DataFrame(),
            duty_cycles=list(self._duty),
            module_ms=(pd.concat(self._module_ms, ignore_index=True) if self._module_ms else no_module_executions()),
            pod_steps=list(self._pod_steps),
            requests=pd.concat(self._requests, ignore_index=True) if self._requests else no_requests(),
            batches=pd.concat(self._batches, ignore_index=True) if self._batches else no_batches(),
            batching_params=dict(self._batching_params),
            tool_status=list(self._tool_status or []),
            attribute_cuda_graphs=bool(self._graphs),
        )


def combine(stats: Iterable[RunStats], run: RunLike | None = None) -> RunStats:
    """The run's `RunStats` from its hosts' (materialized, in host order); `run`: where a
    combined RunStats reads the HLO modules."""
    combiner = StatsCombiner(run)
    for s in stats:
        combiner.add(s)
    return combiner.result()


def combined_step_db(hosts: Sequence[tuple[pd.DataFrame, str, bool]]) -> tuple[pd.DataFrame, str]:
    """(steps, reason) of several hosts, from each host's (steps, reason, has a device), in
    host order: the first host's steps of the range all workers share."""
    steps, reason, first_is_worker = hosts[0]
    if reason:
        return steps.iloc[:0], reason
    if len(hosts) == 1:
        return steps, ""
    accelerated = any(d for _, _, d in hosts)
    workers = [d or not accelerated for _, _, d in hosts]
    if not workers[0]:  # the first host is a coordinator: XProf's combined steps are empty
        return steps.iloc[:0], ""
    tables = [s if w and not r else None for (s, r, _), w in zip(hosts, workers)]
    firsts, n = step_intersection(tables)
    return steps.iloc[firsts[0] : firsts[0] + n].reset_index(drop=True), ""


def _merge_ops(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Op tables (hosts in order) as one: rows of one op (program id, name) summed, the
    first's metadata kept (GPUs: `num_cores` summed, every host's devices being its own;
    `is_eager` if any). One group-by for all: the same as merging them two at a time."""
    if len(tables) == 1:
        return tables[0]
    a = tables[0]
    ops = pd.concat(tables, ignore_index=True)
    sums = [c for c in (*SUM_COLUMNS, "kernels", "num_cores") if c in ops]
    g = ops.groupby(["program_id", "name"], sort=False)
    out = g.first().drop(columns=sums).join(g[sums].sum())
    if "is_eager" in ops:
        out["is_eager"] = g["is_eager"].any()
    return out.reset_index()[list(a.columns)]


def light(stats: RunStats) -> RunStats:
    """`stats` without its tables (ops, host ops, GPU ops, kernels, input ops, module
    executions): the scalars, environment, steps and step spans a run keeps of each host once
    they are combined."""
    db = stats.op_metrics
    db = DeviceOpMetrics(
        db.ops.iloc[:0], db.total_time_ps, db.total_op_time_ps, {}, db.peaks, db.reason, db.source, db.notes
    )
    return RunStats(
        None,
        hosts=stats.hosts,
        op_metrics=db,
        step_db=stats.step_db,
        pod_steps=stats.pod_steps,
        requests=stats.requests,
        batches=stats.batches,
        step_spans=stats.step_spans,
        duty_cycles=stats.duty_cycles,
        tool_status=stats.tool_status,
        attribute_cuda_graphs=stats.attribute_cuda_graphs,
    )
