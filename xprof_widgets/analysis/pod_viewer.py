"""XProf's pod viewer (`pod_viewer`): every step on every core of every host, the step's time
there split into XProf's nine categories (`op_stats_to_pod_viewer.cc`,
`op_stats_to_pod_stats.cc`), so the slowest core of a step, and why, stands out.

The rows come from the run's statistics (`core.pod_stats`): each host's steps per core,
every step kept, the steps all hosts share, core ids made global (host index x 1000 + the
host's core id), as XProf combines hosts. XProf 2.24.2 leaves the pod viewer's channel and
all-reduce databases empty and chip and node ids 0; so do we.
"""

from __future__ import annotations

import pandas as pd

from .core.pod_stats import POD_CATEGORIES, POD_COLUMNS, combine_pod_steps, pod_breakdown
from .core.run_stats import RunStats, as_stats
from .core.runlike import RunLike
from .core.tpu_steps import NO_TPU_STEPS_REASON

CHANNEL_COLUMNS = ["channel_id", "hlo_names", "occurrences", "data_size_bytes", "duration_us", "send_delay_us"]
ALL_REDUCE_COLUMNS = ["name", "occurrences", "duration_us", "data_size_bytes", "replica_groups"]
NO_STEPS = (
    "no steps on any core: XProf's pod viewer shows each step of each core. On TPU the TensorCores' "
    "`Steps` lines give the steps (a training loop's); elsewhere step markers do: wrap each step in "
    "jax.profiler.StepTraceAnnotation('train', step_num=i) (JAX) or "
    "tf.profiler.experimental.Trace('train', step_num=i, _r=1) (TensorFlow)"
)


def pod_viewer(source: RunStats | RunLike) -> pd.DataFrame:
    """XProf's pod viewer of a run: one row per (step_num, core_id), with the host, chip_id
    and node_id, total_duration_us (the step on that core), the time of each of XProf's
    categories (a column each, named as XProf names them: "Device compute", ...,
    "All others"; µs) and the bottleneck (the largest). `.attrs`: `categories` (their
    names, in XProf's order), `device_type`, `channels` and `all_reduce_ops` (DataFrames,
    empty as XProf's), `reason` (why there is no row, "" otherwise)."""
    stats = as_stats(source)
    tpu, generic = combine_pod_steps(stats.pod_steps)
    out = pod_breakdown(tpu, generic)
    out.attrs["categories"] = list(POD_CATEGORIES)
    out.attrs["device_type"] = stats.device[0]
    out.attrs["channels"] = pd.DataFrame(columns=CHANNEL_COLUMNS)
    out.attrs["all_reduce_ops"] = pd.DataFrame(columns=ALL_REDUCE_COLUMNS)
    out.attrs["reason"] = "" if len(out) else (stats.step_db[1] or NO_TPU_STEPS_REASON if stats.has_tpu else NO_STEPS)
    return out


def slowest_cores(pod: pd.DataFrame) -> pd.DataFrame:
    """The slowest core of each step: `pod_viewer`'s row, one a step, of the core that worked
    longest in it (its step time less "All others", the time no op of it ran: on TPU every
    core of a host shares the step's time, and the others wait for this one), the first of
    equals. Adds `busy_us` (that time) and `least_busy_us` (the step's least busy core's)."""
    if pod.empty:
        return pod.assign(busy_us=pd.Series(dtype=float), least_busy_us=pd.Series(dtype=float))
    busy = pod["total_duration_us"] - pod["All others"]
    g = busy.groupby(pod["step_num"], sort=True)
    out = pod.loc[g.idxmax().to_numpy()].reset_index(drop=True)
    out["busy_us"] = g.max().to_numpy()
    out["least_busy_us"] = g.min().to_numpy()
    return out


__all__ = ["POD_COLUMNS", "pod_viewer", "slowest_cores"]
