"""Finding runs in a logdir and opening one: the entry point of the API.

A logdir is what `jax.profiler.start_trace(LOGDIR)` or `tf.profiler` wrote:
`LOGDIR/plugins/profile/RUN/HOST.xplane.pb`, one file per host and a folder
per capture. `Run` opens a capture lazily: a host's file is read on first use.
"""

from __future__ import annotations

import functools
import os
import types
import warnings
from collections.abc import Callable, Collection, Sequence
from functools import cached_property
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from .analysis.core.availability import NO_HLO_MODULES
from .analysis.core.cache import derived
from .analysis.core.planes import plane_kind
from .errors import ProfileError
from .io import fs, hlo
from .io.logdir import host_of, list_runs, profile_files, profile_root
from .io.xspace import event_frame, inflate, read_xspace

if TYPE_CHECKING:
    from .analysis.compare import CompareResult
    from .analysis.core.run_stats import RunStats
    from .analysis.graph_viewer import GraphView
    from .analysis.inference_profile import InferenceProfile
    from .analysis.input_pipeline import InputPipelineResult
    from .analysis.memory_profile import MemoryProfileResult
    from .analysis.memory_viewer import MemoryViewerResult
    from .analysis.op_profile import OpProfile
    from .analysis.overview import OverviewResult
    from .analysis.pod import Executor, HostsProgress, HostSummary, PodSummary
    from .analysis.trace import Trace
    from .analysis.utilization import KernelUtilization
    from .io.xspace import XSpaceFile

#: A local path (str or os.PathLike) or an fsspec URL string (`gs://bucket/logdir`).
PathLike = str | os.PathLike
#: `progress(host, bytes_read, file_size)`, called as a host's file is read.
Progress = Callable[[str, int, int], None]


def load_run(
    path: PathLike | Sequence[PathLike],
    progress: Progress | None = None,
    executor: Executor | None = None,
    cache: bool | None = None,
    attribute_cuda_graphs: bool = True,
) -> Run:
    """Open a profile: a logdir (its newest run), a run folder, or `.xplane.pb` file(s).

    Paths are local or fsspec URLs (`gs://...`). Run folders are named by
    capture time (`2026_11_22_03_11_56`), so the newest is the last by name.
    Files may be gzip-compressed (`.xplane.pb.gz`). Raises ProfileError naming
    the path and what is wrong. `progress(host, bytes_read, file_size)`, if
    given, hears how reading the first host's file goes (see `Run.xspace`).

    `executor` runs the per-host work of the all-hosts tools (`Run.host_summaries`):
    anything with `concurrent.futures`' `submit`, such as a `ProcessPoolExecutor` or a
    `dask.distributed.Client` (its workers read the files themselves). None: a process
    pool sized to the machine, started only when a run of two or more hosts is asked
    for an all-hosts tool.

    `cache`: whether to keep the decoded columns of large local files in the on-disk
    column cache (`io.column_cache`; in the user's cache folder, or
    `$XPROF_WIDGETS_CACHE_DIR`), so that opening an unchanged file again, in any
    process, maps them instead of decoding the file. None: on, unless the environment
    says `XPROF_WIDGETS_CACHE=0`.

    `attribute_cuda_graphs`: give the kernels run inside CUDA graphs (XLA command buffers,
    JAX's default on NVIDIA GPUs) the HLO op each ran for (`analysis.core.command_buffers`),
    so that every tool shows their ops: beyond XProf, which counts them as idle time.
    False gives XProf's accounting, equal to its numbers.
    """
    open_run = functools.partial(
        Run, progress=progress, executor=executor, cache=cache, attribute_cuda_graphs=attribute_cuda_graphs
    )
    if isinstance(path, (list, tuple)):
        if not path:
            raise ProfileError("[]", "no profile files given")
        for f in path:
            if not fs.isfile(_local(f)):
                raise ProfileError(f, "no such file")
        return open_run(fs.name(_parent(_local(path[0]))), [_local(f) for f in path])
    p = _local(path)  # type: ignore[arg-type]  # (a sequence was handled above)
    if not fs.exists(p):
        raise ProfileError(p, "no such file or folder")
    if fs.isfile(p):
        return open_run(fs.name(_parent(p)), [p])
    if not fs.isdir(p):
        raise ProfileError(p, "is neither a profile file nor a folder (a device or a pipe?)")
    files = profile_files(p)
    if files:
        return open_run(fs.name(p), files)
    runs = list_runs(p)
    if runs.empty:
        raise ProfileError(profile_root(p), "holds no run with a .xplane.pb file")
    # The newest run that opens: the newest may still be being written (or be damaged).
    passed = []
    for _, newest in runs.iloc[::-1].iterrows():
        try:
            run = open_run(newest["run"], profile_files(_local(newest["path"])))
        except (ProfileError, FileNotFoundError) as error:
            passed.append(f"{newest['run']} ({error})")
            continue
        if passed:
            warnings.warn(
                f"opened run {run.name}, the newest that opens; passed over the newer {'; '.join(passed)}",
                UserWarning,
                stacklevel=2,
            )
        return run
    raise ProfileError(profile_root(p), f"holds no run that opens: {'; '.join(passed)}")


def compare(run_a: Run | PathLike, run_b: Run | PathLike) -> CompareResult:
    """Compare run b with run a (Runs or paths): step time and breakdown, HLO ops, module and
    allocator memory peaks, and the sentences that sum them up (`CompareResult`)."""
    from .analysis.compare import compare as compare_runs

    return compare_runs(as_run(run_a), as_run(run_b))


def as_run(run_or_path: Run | PathLike, progress: Progress | None = None) -> Run:
    """`run_or_path` if it is a Run, else `load_run(run_or_path)`: what every widget and
    `compare` accept."""
    return run_or_path if isinstance(run_or_path, Run) else load_run(run_or_path, progress=progress)


def _local(path: PathLike) -> Path | str:
    """Local paths as Path; URLs stay strings."""
    return str(path) if fs.is_url(path) else Path(path)


def _parent(path: Path | str) -> Path | str:
    return str(path).rsplit("/", 1)[0] if fs.is_url(path) else Path(path).parent


SAMPLES = {"cpu": "sample", "gpu": "sample_gpu"}


def sample_run(kind: str = "cpu") -> Run:
    """A small real profile shipped inside the package (see xprof_widgets/data/README.md).

    "cpu": JAX 0.10.2 on CPU, 20 training steps of an MLP under
    `jax.profiler.StepTraceAnnotation`, with its 16 compiled HLO modules: steps, host
    threads, memory viewer, an op profile of XLA:CPU.
    "gpu": JAX 0.8 on an AMD Instinct MI300X (ROCm), bf16 GEMMs of five sizes, from AMD's
    TraceLens test data (MIT): GPU kernels with their XLA ops, XProf's op profile and HLO
    stats with FLOPs and bandwidths, the derived GPU trace lines, an allocator's memory
    profile, 16 HLO modules. No step markers.
    """
    if kind not in SAMPLES:
        raise ValueError(f"kind must be one of {sorted(SAMPLES)}, not {kind!r}")
    folder = Path(str(resources.files("xprof_widgets").joinpath("data"))) / SAMPLES[kind] / "plugins" / "profile"
    run = next(p for p in folder.iterdir() if p.is_dir())
    return Run(run.name, list(profile_files(run)))


def host_summary(path: PathLike, attribute_cuda_graphs: bool = True) -> HostSummary:
    """The small per-host results of one host file (`analysis.pod.HostSummary`): what
    executors run for `Run.host_summaries`, in a worker that reads the file itself. A file
    that cannot be read or analysed gives a summary whose `error` says why: the run goes
    on without that host and says so (`Run.unreadable`). `attribute_cuda_graphs` as in
    `load_run`."""
    from .analysis.pod import HostSummary, summarize

    def failed(problem: str) -> HostSummary:
        return HostSummary(host=host_of(fs.name(_local(path))), path=str(path), error=problem)

    try:
        return summarize(_one_host(path, attribute_cuda_graphs))
    except ProfileError as error:
        return failed(error.problem)
    except Exception as error:  # what no check foresaw: this host is left out, saying why
        return failed(f"could not be analysed ({type(error).__name__}: {error})")


def on_host(function: Callable[[Any], Any], path: PathLike, attribute_cuda_graphs: bool = True) -> Any:
    """`function(run)` of the one-host run of a host file (a `Run.map_hosts` task, run
    where the executor puts it); None when the file cannot be read."""
    try:
        run = _one_host(path, attribute_cuda_graphs)
    except ProfileError:
        return None
    return function(run)


def _one_host(path: PathLike, attribute_cuda_graphs: bool = True) -> Run:
    """The run of one host file, in a worker (raises ProfileError)."""
    return Run(fs.name(_parent(_local(path))), [_local(path)], attribute_cuda_graphs=attribute_cuda_graphs)


class Run:
    """One capture: a profile file per host, read on first use.

    `name` is the run folder's name, `hosts` the host names, `files` a
    {host: path} dict. The first host's file is read at once (`progress` as
    in `xspace`), so a bad file fails here.
    """

    def __init__(
        self,
        name: str,
        files: Sequence[PathLike],
        progress: Progress | None = None,
        executor: Executor | None = None,
        cache: bool | None = None,
        attribute_cuda_graphs: bool = True,
    ) -> None:
        self.name = str(name)
        #: Whether kernels run in CUDA graphs get their HLO op (see `load_run`); False: XProf's accounting.
        self.attribute_cuda_graphs = bool(attribute_cuda_graphs)
        #: Whether files are read through the column cache (see `load_run`); None: the environment says.
        self.cache = cache
        #: Where the per-host work of all-hosts tools runs (see `load_run`); None: a local pool.
        self.executor = executor
        self.files = {host_of(fs.name(_local(f))): _local(f) for f in files}
        if not self.files:
            raise ProfileError(name, "holds no .xplane.pb file")
        #: {host: why its file could not be read ("FILE: why")}: hosts left out of the run (a
        #: warning says so). A file found bad when the run opens (its header, or the first
        #: host's whole file) is not among `hosts`; one found bad later stays in `hosts`, so
        #: the list never changes under the user, and asking for it raises a ProfileError
        #: "host X was left out: FILE: why" (`xspace`).
        self.unreadable: dict[str, str] = {}
        for host, path in list(self.files.items()):
            try:
                _check_header(path)
            except ProfileError as error:
                self._leave_out(host, error, opening=True)
        self._spaces: dict[str, XSpaceFile] = {}
        #: {module: first host holding it}, once the hosts' summaries are in (`pod`).
        self._module_hosts: dict | None = None
        while True:  # fail now, not in the first widget, if no file is good
            try:
                self.xspace(progress=progress)
                break
            except ProfileError as error:
                self._leave_out(self.hosts[0], error, opening=True)

    def _leave_out(self, host: str, error: ProfileError, opening: bool = False) -> None:
        """Leave out a host whose file cannot be read (out of `hosts` too while the run
        opens); raise if it was the last."""
        if host in self.unreadable:
            return
        if opening:
            del self.files[host]
        self.unreadable[host] = str(error)
        if not self.readable_hosts:
            if len(self.unreadable) == 1:
                raise error
            raise ProfileError(self.name, "no host's file could be read: " + "; ".join(self.unreadable.values()))
        warnings.warn(f"run {self.name}: host {host} is left out: {error}", UserWarning, stacklevel=4)

    def __repr__(self) -> str:
        return f"<Run {self.name!r}: hosts {self.hosts}>"

    @property
    def hosts(self) -> list[str]:
        """Host names, one per profile file (those left out since the run opened included:
        see `unreadable`)."""
        return list(self.files)

    @property
    def readable_hosts(self) -> list[str]:
        """`hosts` but those left out (`unreadable`) so far."""
        return [h for h in self.files if h not in self.unreadable]

    def left_out(self, host: str) -> ProfileError:
        """The ProfileError "host X was left out: FILE: why" of a host in `unreadable`."""
        why = self.unreadable[host]
        path = str(self.files[host])
        problem = why[len(path) + 2 :] if why.startswith(path + ": ") else why
        return ProfileError(path, problem, host=host)

    @property
    def path(self) -> Path | str:
        """The run folder."""
        return _parent(next(iter(self.files.values())))

    def xspace(self, host: str | None = None, progress: Progress | None = None) -> XSpaceFile:
        """The XSpaceFile of `host` (default: the first), read on first use.

        `progress(host, bytes_read, file_size)`, if given, is called as the file
        is read (a chunk at a time; remote files once, when read), never if it
        was read before; decoding follows its last call.
        """
        host = self.readable_hosts[0] if host is None else host
        if host not in self.files:
            raise KeyError(f"no host {host!r} in run {self.name!r}; hosts: {self.hosts}")
        if host in self.unreadable:
            raise self.left_out(host)
        if host not in self._spaces:
            path = self.files[host]
            report = None if progress is None else (lambda done, total: progress(host, done, total))
            data = _read_remote(str(path)) if fs.is_url(path) else None
            if data is not None and report is not None:
                report(len(data), len(data))
            try:
                self._spaces[host] = read_xspace(path, data=data, progress=report, cache=self.cache)
            except ProfileError as error:
                if host == self.readable_hosts[0] and not self._spaces:
                    raise  # the run is opening (see __init__)
                self._leave_out(host, error)
                raise self.left_out(host) from None
        return self._spaces[host]

    def xspaces(self) -> list[XSpaceFile]:
        """Every readable host's XSpaceFile, in host order (`host_spaces` without names)."""
        return [space for _, space in self.host_spaces()]

    def host_spaces(self, only: Collection[str] | None = None) -> list[tuple[str, XSpaceFile]]:
        """(host, XSpaceFile) of every host (or of the hosts in `only`), in host order. A
        host whose file cannot be read is left out (named in `unreadable`, with a warning)."""
        out = []
        for host in self.hosts:
            if host in self.unreadable or (only is not None and host not in only):
                continue
            try:
                out.append((host, self.xspace(host)))
            except ProfileError:
                pass  # (`xspace` has left it out)
        return out

    # --- many hosts: per-host summaries, combined ------------------------------------

    @property
    def pooled(self) -> bool:
        """True when all-hosts tools come from per-host summaries (`host_summaries`):
        a run of two or more hosts, or any run given an `executor`."""
        return self.executor is not None or len(self.files) >= 2

    def host_summaries(
        self, executor: Executor | None = None, progress: HostsProgress | None = None
    ) -> list[HostSummary]:
        """Every host's `analysis.pod.HostSummary`, in host order, light (what `pod()`
        keeps of a host once its tables are folded in: scalars, steps, allocator peaks; see
        `HostSummary.light`). Computed once per run, by `pod()`: `executor` and `progress`
        as there."""
        return [s for s in self.pod(executor, progress).hosts if not s.error]

    def pod(self, executor: Executor | None = None, progress: HostsProgress | None = None) -> PodSummary:
        """The hosts combined as XProf combines them (`analysis.pod.PodSummary`): op
        metrics, input pipeline, overview, kernel reports, tool status and the per-host
        table; computed once per run.

        Each host file is read by a task on `executor` (default: the run's, else a process
        pool sized to the machine) that returns its small tables, folded in here as they
        arrive: the driver never holds every host's events, nor every host's tables.
        `progress(done, total)` hears of each host as it is done. A host whose file cannot
        be read is left out of the run (named in `unreadable`, with a warning). The
        combined op metrics become the run's own, so the op profile and HLO stats read no
        host file again.
        """
        from .analysis.pod import Combiner, map_hosts

        def compute() -> PodSummary:
            hosts = list(self.hosts)
            combiner = Combiner(self)
            paths = [self.files[h] for h in hosts]
            task = functools.partial(host_summary, attribute_cuda_graphs=self.attribute_cuda_graphs)
            map_hosts(task, paths, executor or self.executor, progress, on_result=combiner.add)
            for summary in combiner.hosts:
                if summary.error:  # (raises when no host is left)
                    self._leave_out(summary.host, ProfileError(summary.path, summary.error))
            # (The combined overview reads the modules: from the first host holding each.)
            self._module_hosts = combiner.module_hosts
            combined = combiner.result()
            derived(self, "device_op_metrics", lambda: combined.op_metrics)
            return combined

        cached = self.__dict__.get("_derived", {})
        if progress is not None and "pod" in cached:
            done = len(cached["pod"].hosts)
            progress(done, done)  # computed before: say so at once
        return derived(self, "pod", compute)

    def stats(self) -> RunStats:
        """The run's statistics, as XProf's OpStats (`analysis.core.run_stats.RunStats`): the
        run environment and peaks, the device and host op databases, GPU kernel reports,
        steps, input ops, ... Every all-hosts tool is a function of them. One host: its
        parts are built the first time a tool asks; several hosts: each host's are built
        on the run's executor and combined (`pod()`)."""
        from .analysis.core.run_stats import run_stats

        return self.pod().stats if self.pooled else run_stats(self)

    def map_hosts(self, function: Callable[[Any], Any], progress: HostsProgress | None = None) -> list:
        """`function(run of one host)` for each host of this run, in host order, each on
        the run's executor (default: a process pool sized to the machine) in a worker
        that reads the host's file itself: how a tool outside the per-host summaries
        (e.g. `core.kernels.kernel_reports`) gets every host's part without the driver
        reading them. `function` must be picklable (a module-level function); a host
        whose file cannot be read gives None."""
        from .analysis.pod import map_hosts

        paths = [self.files[h] for h in self.hosts]
        task = functools.partial(on_host, function, attribute_cuda_graphs=self.attribute_cuda_graphs)
        return map_hosts(task, paths, self.executor, progress)

    def pod_host(self, host: str) -> PodSummary:
        """One host on its own, as `pod()` for a run of that host alone. Its summary is
        computed again, in full (on the run's executor if it has one, else here: one host
        file read, then let go)."""
        from .analysis.pod import InProcessExecutor, combine

        if host not in self.files:
            raise KeyError(f"no host {host!r} in run {self.name!r}; hosts: {self.hosts}")
        if len(self.files) == 1:
            return self.pod()

        def compute() -> PodSummary:
            executor = self.executor or InProcessExecutor()
            task = functools.partial(host_summary, attribute_cuda_graphs=self.attribute_cuda_graphs)
            return combine([executor.submit(task, self.files[host]).result()], run=self)

        return derived(self, ("pod_host", host), compute)

    def per_host(self) -> pd.DataFrame:
        """One row a host, to spot a straggler: host, step_time_ms (mean of its own steps),
        max_step_time_ms, idle_pct (device time no op ran, %), input_pct,
        memory_peak_bytes (its largest allocator peak), op_time_ms, seconds, ... (see
        `analysis.pod.per_host_table`). Hosts left out of the run come last, with `error`
        saying why."""
        table = self.pod().per_host
        missing = {h: why for h, why in self.unreadable.items() if h not in set(table["host"])}
        if not missing:  # (a host that failed in its worker has its row already)
            return table
        left_out = pd.DataFrame({"host": list(missing), "steps": 0, "device_cores": 0, "error": list(missing.values())})
        return pd.concat([table, left_out], ignore_index=True)[table.columns]

    # --- what is in the profile -------------------------------------------------

    @cached_property
    def devices(self) -> pd.DataFrame:
        """Device and host planes: DataFrame with host, plane, kind (TPU/GPU/CPU), model,
        cores, peak_flops (FLOP/s), peak_flops_source, peak_hbm_bw (bytes/s) and
        memory_bytes.

        TPU planes carry their peaks. A GPU's model and peaks are XProf's, from the
        plane's vendor, capability, cores and clock (`analysis.core.gpu_device`: "AMD GPU -
        gfx942", cores x clock x FLOPs per core and cycle; 0 where XProf knows no
        number, e.g. a plane without a vendor); NaN where nothing applies (the host).
        """
        from .analysis.core.gpu_device import gpu_model_name, gpu_peaks

        rows = []
        for space in self.xspaces():
            for plane in space.planes:
                kind = plane_kind(plane.name)
                if kind is None:
                    continue
                st = plane.stats
                peak_tflops = st.get("peak_teraflops_per_second")
                peak_hbm_gbs = st.get("peak_hbm_bw_gigabytes_per_second")
                if kind == "GPU":
                    peaks = gpu_peaks(st)
                    model = gpu_model_name(st) or "GPU"
                    flops, source, hbm = peaks["peak_flops"], peaks["source"], peaks["peak_hbm_bw"]
                else:
                    model = st.get("device_type_string") or kind
                    flops = float(peak_tflops) * 1e12 if peak_tflops else np.nan
                    source = "profile" if peak_tflops else ""
                    hbm = float(peak_hbm_gbs) * 1e9 if peak_hbm_gbs else np.nan
                rows.append(
                    {
                        "host": space.host,
                        "plane": plane.name,
                        "kind": kind,
                        "model": model,
                        "cores": st.get("core_count", np.nan),
                        "peak_flops": flops,
                        "peak_flops_source": source,
                        "peak_hbm_bw": hbm,
                        "memory_bytes": st.get("memory_size", np.nan),
                    }
                )
        return pd.DataFrame(
            rows,
            columns=[
                "host",
                "plane",
                "kind",
                "model",
                "cores",
                "peak_flops",
                "peak_flops_source",
                "peak_hbm_bw",
                "memory_bytes",
            ],
        )

    def events(self, plane: str | None = None, line: str | None = None, host: str | None = None) -> pd.DataFrame:
        """Events as a DataFrame: host, plane, line, name (Categoricals), start_ps
        (absolute) and duration_ps (int64), metadata_id (int32 where every id fits, as
        in real profiles, else int64). `plane`/`line`/`host` filter by name.
        """
        spaces = self.xspaces() if host is None else [self.xspace(host)]
        return event_frame(spaces, plane=plane, line=line)

    @cached_property
    def hlo_protos(self) -> dict[str, bytes]:
        """{module name `name(program_id)`: serialized xla.HloProto} over all hosts.

        Modules whose bytes are not an HloProto are left out, named with their file and
        why in `unreadable_modules` (and a warning): the others still show."""
        protos, self.unreadable_modules, self._module_files = {}, {}, {}
        for host, space in self._spaces_with_modules():
            found = hlo.hlo_protos_from_xspace(types.SimpleNamespace(planes=[p.message for p in space.planes]))
            for key, data in found.items():
                try:
                    hlo.check_hlo_proto(data, key)
                except ProfileError as error:
                    self.unreadable_modules[key] = f"{self.files[host]}: {error}"
                    continue
                protos[key] = data
                self._module_files[key] = self.files[host]
        if self.unreadable_modules:
            first = next(iter(self.unreadable_modules.values()))
            warnings.warn(
                f"{len(self.unreadable_modules)} HLO module(s) of run {self.name} could not be read and "
                f"are left out (run.unreadable_modules says why), e.g. {first}",
                UserWarning,
                stacklevel=3,
            )
        return protos

    def _spaces_with_modules(self) -> list[tuple[str, XSpaceFile]]:
        """(host, XSpaceFile) of the hosts to read HLO modules from: every host, or on a
        pooled run the first host holding each module (SPMD hosts share theirs), so the
        driver does not read every host for the modules. Only once the hosts' summaries are
        in (`pod()`, or while it combines them): the modules alone are no reason to start
        the per-host work."""
        hosts_of = self._module_hosts
        if hosts_of is None and "pod" in self.__dict__.get("_derived", {}):
            hosts_of = self.pod().module_hosts
        if not self.pooled or len(self.files) < 2 or hosts_of is None:
            return self.host_spaces()
        needed = {self.readable_hosts[0], *hosts_of.values()}
        return self.host_spaces(only=needed)

    @property
    def modules(self) -> pd.DataFrame:
        """Compiled HLO modules: DataFrame with module, program_id, sizes (bytes)."""
        from .analysis.core.modules import list_modules

        return list_modules(self.hlo_protos)

    @property
    def tools(self) -> list[str]:
        """XProf's names of the tools that have data in this run (`overview_page`,
        `input_pipeline_analyzer`, `op_profile`, `hlo_stats`, `trace_viewer`,
        `memory_profile`, `memory_viewer`, ...; the registry is `xprof_widgets.tools`)."""
        return [t for t, ok, _ in self._tool_status() if ok]

    def tool_status(self) -> pd.DataFrame:
        """Every tool (XProf's name) with whether it has data here and, if not, why."""
        return pd.DataFrame(self._tool_status(), columns=["tool", "available", "reason"])

    def _tool_status(self) -> list[tuple[str, bool, str]]:
        from .analysis.core.availability import tool_status

        if self.pooled:
            return self.pod().tool_status
        return derived(self, "tool_status", lambda: tool_status(self))  # (asked for by every widget)

    # --- analyses ------------------------------------------------------------------

    def memory_viewer(self, module: str | None = None, memory_space: int = 0) -> MemoryViewerResult:
        """XProf's memory viewer for one compiled module (default: the largest).

        `module` is a name like `jit_step(30)` (see `run.modules`); `memory_space`
        0 is device memory (HBM). Returns a MemoryViewerResult (sizes in bytes).
        """
        from .analysis.core.modules import default_module
        from .analysis.memory_viewer import memory_viewer

        protos = self.hlo_protos
        if not protos:
            raise ProfileError(self.path, NO_HLO_MODULES)
        if module is None:
            module = default_module(protos)
        if module not in protos:
            raise KeyError(f"no module {module!r} in run {self.name!r}; modules: {sorted(protos)}")
        try:
            return memory_viewer(protos[module], memory_space=memory_space, module_name=module)
        except ProfileError as error:  # name the file the module is in
            raise ProfileError(self._module_files.get(module, self.path), f"module {error}") from None

    def graph_viewer(
        self,
        op: str | None = None,
        module: str | None = None,
        radius: int = 2,
        expand: bool | str | Sequence[str] = False,
        max_nodes: int = 400,
    ) -> GraphView:
        """XProf's graph viewer: the HLO graph around `op` (an instruction or computation name;
        default the op with the most device time), `radius` edges out through operands and
        users, laid out top-down. `module` (`name(program_id)`) picks the module when the name
        is in several; `expand` opens fusions (True: the centre). Returns a GraphView (`.nodes`,
        `.edges`, `.clusters` DataFrames; times in ps)."""
        from .analysis.graph_viewer import graph_viewer

        return graph_viewer(self, op, module=module, radius=radius, expand=expand, max_nodes=max_nodes)

    def hlo_stats(self) -> pd.DataFrame:
        """One row per HLO op on the devices (XProf's HLO stats): times in ps,
        FLOP rates in GFLOP/s, bandwidths in GiB/s. Empty, with `.attrs["reason"]`,
        when the run has no device ops."""
        from .analysis.hlo_stats import hlo_stats

        return derived(self, "hlo_stats", lambda: hlo_stats(self.stats())).copy()  # (see framework_op_stats)

    def cuda_graph_kernels(self) -> pd.DataFrame:
        """The GPU kernels that ran inside CUDA graphs (XLA command buffers), every host: one
        row per host, program, command buffer, kernel and the op it was attributed (missing
        where it was left idle: `reason` says why), with launches and time_ps (ps). Computed whatever
        `attribute_cuda_graphs` says (the tools use it only when it is True); empty when no
        kernel ran in a graph. See `analysis.core.command_buffers`."""
        from .analysis.core.command_buffers import graph_kernels

        return graph_kernels(self)

    def kernel_stats(self) -> pd.DataFrame:
        """XProf's GPU kernel stats: one row per (kernel, launch configuration, op), durations
        in µs. Empty, with `.attrs["reason"]`, when the run launched no GPU kernels."""
        from .analysis.kernel_stats import kernel_stats

        # Once per run, a copy each time.
        return derived(self, "kernel_stats", lambda: kernel_stats(self.stats())).copy()

    def framework_op_stats(self, exclude_idle: bool = False) -> pd.DataFrame:
        """XProf's framework op stats (TF / JAX ops on host and device, IDLE included unless
        `exclude_idle`): times in µs, rates in GFLOP/s and GiB/s, percentages as fractions."""
        from .analysis.framework_op_stats import framework_op_stats

        # Once per run and choice (the widget asks again); a copy each time: frames are mutable.
        key = ("framework_op_stats", exclude_idle)
        return derived(self, key, lambda: framework_op_stats(self.stats(), exclude_idle=exclude_idle)).copy()

    def roofline_model(self) -> pd.DataFrame:
        """XProf's roofline model: one row per op and step (and `Total`), with the device roofs
        (peak FLOP/s, bandwidths, ridge points) in `.attrs`. Empty, with `.attrs["reason"]`,
        without a GPU or TPU."""
        from .analysis.roofline import roofline_model

        return derived(self, "roofline_model", lambda: roofline_model(self.stats())).copy()  # (see framework_op_stats)

    def pod_viewer(self) -> pd.DataFrame:
        """XProf's pod viewer: one row per (step, core) of every host, the step's time on that
        core split into XProf's categories (µs) and its bottleneck; see
        `analysis.pod_viewer.pod_viewer`. Empty, with `.attrs["reason"]`, without steps."""
        from .analysis.pod_viewer import pod_viewer

        return derived(self, "pod_viewer", lambda: pod_viewer(self.stats())).copy()  # (see framework_op_stats)

    def inference_profile(self) -> InferenceProfile:
        """XProf's inference profile: a server's requests sampled at percentiles with each
        one's latency breakdown, the average latency and the throughput; see
        `analysis.inference_profile.InferenceProfile`. Without requests, `.reason` says why."""
        from .analysis.inference_profile import inference_profile

        return derived(self, "inference_profile", lambda: inference_profile(self.stats()))

    def smart_suggestions(self) -> pd.DataFrame:
        """XProf's smart suggestions: a row per rule that fires (rule_name, suggestion_text,
        XProf's HTML), empty when none does; see `analysis.smart_suggestion`. Reads each
        host's events (the TensorCores' barrier waits)."""
        from .analysis.smart_suggestion import smart_suggestions

        return derived(self, "smart_suggestions", lambda: smart_suggestions(self)).copy()

    def perf_counters(self) -> pd.DataFrame:
        """XProf's performance counters: every hardware counter sample of the run's TPU (or
        GPU) planes, a row each (host, chip, kernel, sample, counter, value, value_hex,
        description, set); see `analysis.perf_counters`. Empty, with `.attrs["reason"]`,
        without counter samples."""
        from .analysis.perf_counters import perf_counters

        return derived(self, "perf_counters", lambda: perf_counters(self)).copy()  # (see framework_op_stats)

    def megascale_stats(self, host: str | None = None) -> pd.DataFrame:
        """XProf's megascale stats: the multi-slice (DCN) collectives of TensorCore 0, a row
        per rendezvous (slack, stall, observed duration, each op's time, occurrences, bytes
        sent, required bandwidth) of `host`, or of every host combined (None); see
        `analysis.megascale`. Empty, with `.attrs["reason"]`, without megascale data."""
        from .analysis.megascale import megascale_stats

        key = f"megascale_stats:{host}"
        return derived(self, key, lambda: megascale_stats(self, host)).copy()

    def utilization_viewer(self) -> pd.DataFrame:
        """XProf's utilization viewer: a TPU chip's utilization metrics from the hardware
        counters sampled, a row per metric of each sample line (host, device, sample, node,
        name, achieved, peak, unit); see `analysis.utilization`. Empty, with
        `.attrs["reason"]`, without counter samples on a chip XProf reads (TPU v6e)."""
        from .analysis.utilization import utilization_viewer

        return derived(self, "utilization_viewer", lambda: utilization_viewer(self)).copy()

    def kernel_utilization(
        self,
        kernel: str = "",
        duration_us: float | None = None,
        force_duration: bool = False,
        device_id: int | None = None,
    ) -> KernelUtilization:
        """XProf's kernel utilization: per device and counter line (a kernel), the matrix
        units' utilization, their cycles by precision and every other unit's utilization
        (%); see `analysis.utilization.kernel_utilization` for the options."""
        from .analysis.utilization import kernel_utilization

        return kernel_utilization(self, kernel, duration_us, force_duration, device_id)

    def op_profile(
        self, group_by: str = "program", exclude_idle: bool = False, top_n: int = 100, sort_by: str = "time"
    ) -> OpProfile:
        """XProf's HLO op profile: program (or category) -> category -> op -> fused ops,
        with time (ps) and FLOPS / bandwidth utilisation per node. `sort_by` is
        "time" or "wasted_time". Returns an OpProfile (`.root`, `.to_dataframe()`)."""
        from .analysis.op_profile import op_profile

        return op_profile(self.stats(), group_by=group_by, exclude_idle=exclude_idle, top_n=top_n, sort_by=sort_by)

    def overview(self, host: str | None = None) -> OverviewResult:
        """XProf's overview page: step time (ms) and its breakdown, input %, duty
        cycle, op placement, precision, top operations, run environment and a
        recommendation. Without steps, `.reason` says how to add step markers.

        On a run of several hosts (see `pooled`) the default is all hosts combined as
        XProf combines them (`pod()`), `host` that host on its own."""
        from .analysis.overview import overview

        if self.pooled:
            return (self.pod() if host is None else self.pod_host(host)).overview
        # Once: widgets ask again (ProfileWidget, OverviewWidget, compare).
        return derived(self, "overview", lambda: overview(self.stats()))

    def input_pipeline(self, host: str | None = None) -> InputPipelineResult:
        """XProf's input pipeline analysis: steps (ms) with their breakdown, the % of
        step time waiting for input, the host-side breakdown (µs), the tf.data input
        ops and a recommendation. Without steps, `.reason` says how to add markers.
        CPU-only runs today; GPU/TPU device steps are not computed yet.

        On a run of several hosts (see `pooled`) the default is all hosts combined as
        XProf combines them (`pod()`), `host` that host on its own."""
        from .analysis.input_pipeline import input_pipeline

        if self.pooled:
            return (self.pod() if host is None else self.pod_host(host)).input_pipeline
        return derived(self, "input_pipeline", lambda: input_pipeline(self.stats()))

    def memory_profile(self, memory_id: str | None = None, host: str | None = None) -> MemoryProfileResult:
        """XProf's memory profile: allocator timeline, summary and breakdown at peak.

        `memory_id` picks the allocator (see `.memory_ids`; default the first),
        `host` the host (default the first, as XProf reads one). Returns a
        MemoryProfileResult (bytes, ps); without allocator events it is empty
        and its `reason` says why. Raises KeyError for an unknown `memory_id`.
        """
        from .analysis.memory_profile import memory_profile

        # Widgets ask again for the ids and on every switch: once per host file and allocator.
        return derived(
            self.xspace(host),
            ("memory_profile", memory_id),
            lambda: memory_profile(self, memory_id=memory_id, host=host),
        )

    def trace(self, host: str | None = None) -> Trace:
        """The trace of `host` (default: the first): tracks, window queries, event details, search.

        Built once per host (see `analysis.trace.Trace`).
        """
        from .analysis.trace import trace

        return trace(self, host)


def _check_header(path: Path | str) -> None:
    """Cheap check that a file can be an XSpace: not empty, starts like one."""
    head = fs.read_head(path, 2)
    if not head:
        raise ProfileError(path, "is empty (0 bytes): the profiler wrote nothing")
    # An XSpace starts with a plane (field 1, length-delimited: byte 0x0a), or
    # errors/warnings/hostnames (0x12, 0x1a, 0x22); .gz files with gzip's magic.
    if head != b"\x1f\x8b" and head[0] not in (0x0A, 0x12, 0x1A, 0x22):
        raise ProfileError(path, f"does not start like an XSpace profile (first byte {head[0]:#04x})")


def _read_remote(url: str) -> bytes | bytearray:
    """A remote file's bytes, gunzipped if needed."""
    data = fs.read_bytes(url)
    if data[:2] == b"\x1f\x8b":
        data = inflate(data, url)
    return data


if TYPE_CHECKING:
    from .analysis.core.runlike import RunLike

    def _runs_are_run_like(run: Run) -> RunLike:
        """mypy checks here that a Run has all an analysis may ask of it."""
        return run
