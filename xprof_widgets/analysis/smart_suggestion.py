"""XProf's smart suggestions (`smart_suggestion`): rules that read a run's numbers and say, in
a sentence with those numbers, what bounds it and what to try.

XProf 2.24.2's open-source build runs one rule (`smart_suggestion/all_rules.h`
`RegisterAllRulesFor3P`): **BarrierCoresRule**. Its signal is XProf's event-time fraction
analyzer (`xspace_to_event_time_fraction_analyzer.cc`) for `barrier-cores`, the TensorCores
waiting for each other:

* per host file and TensorCore plane, the events of any line whose name contains
  `barrier-cores`, in a step of that plane (a group with both a step marker and ops there;
  the event's group is that of the step it overlaps), with a device duration other than 0
  and 1.25 ns (libtpu's placeholders): per (step, plane) their summed duration over the
  plane's step time (its longest marker of the step);
* of the steps with such events, the first and last dropped when there are three or more
  (of two, one shorter than 1 % of the other);
* the rule fires when the mean over every (step, plane) of every host is at least 10 %;
  with three hosts or more, a host whose own mean (over its steps of the mean over its
  planes) is an outlier (modified z-score over 3.5, from the median and the median absolute
  deviation) is named as a straggler.

The other rules in XProf's sources (input, host processing, data transfer, TensorCore
idle, collectives, compute, memory, debug print, data shuffle, SparseCore) are not
registered in its open-source build, so XProf never shows them; neither do we.
"""

from __future__ import annotations

import html

import numpy as np
import pandas as pd

from .core.runlike import RunLike
from .core.tpu_steps import core_steps, line_groups

BARRIER = "barrier-cores"
#: XProf's threshold (`kSpecialOpBoundThresholdInPercent`): % of step time at barrier-cores.
BARRIER_BOUND_PERCENT = 10.0
#: Device durations libtpu writes for a barrier-cores event that did not wait (ps).
_PLACEHOLDER_PS = (0, 1250)
#: Modified z-score beyond which a host is a straggler, and its constant (Iglewicz-Hoaglin).
_STRAGGLER_Z = 3.5
_Z_SCALE = 0.6745
_MIN_MAD = 0.1
COLUMNS = ["rule_name", "suggestion_text"]


def event_time_fractions(space, name: str = BARRIER) -> pd.DataFrame:
    """XProf's event-time fractions of one host file: one row per (step_num, plane) with the
    share of the plane's step time spent in events named like `name` (see the module doc),
    incomplete steps dropped. Columns: step_num, plane, fraction."""
    rows: dict[tuple[int, str], float] = {}
    step_ps: dict[int, int] = {}
    for plane, merged, markers, ops in core_steps(space):
        if ops.empty:
            continue
        steps = set(markers["group"].tolist()) & set(ops["group"].tolist())
        longest = markers.groupby("group")["duration_ps"].max()
        ids = [i for i, m in plane.message.event_metadata.items() if name in m.name]
        if not ids:
            continue
        for line in plane.lines:
            if not len(line) or line.name == "Steps":
                continue
            mine = np.flatnonzero(np.isin(line.metadata_id, ids))
            if not len(mine):
                continue
            st = line.stats(names=["device_duration_ps"], events=mine)
            if "device_duration_ps" not in st:
                continue
            dur = pd.to_numeric(st["device_duration_ps"], errors="coerce").to_numpy(float)
            groups = line_groups(merged, line)[mine]
            for g, d in zip(groups.tolist(), dur.tolist()):
                if g < 0 or g not in steps or np.isnan(d) or (name == BARRIER and d in _PLACEHOLDER_PS):
                    continue
                total = int(longest.get(g, 0))
                if total <= 0:
                    continue
                # XProf adds each event's share as a float (32 bits) to a double.
                rows[(g, plane.name)] = rows.get((g, plane.name), 0.0) + float(np.float32(d / total))
                step_ps[g] = total
    kept = sorted(step_ps)
    if len(kept) >= 3:
        kept = kept[1:-1]
    elif len(kept) == 2:
        a, b = kept
        if step_ps[b] < 0.01 * step_ps[a]:
            kept = [a]
        elif step_ps[a] < 0.01 * step_ps[b]:
            kept = [b]
    out = pd.DataFrame(
        [(g, p, f) for (g, p), f in rows.items() if g in set(kept)], columns=["step_num", "plane", "fraction"]
    )
    return out.sort_values(["step_num", "plane"], kind="stable").reset_index(drop=True)


def _stragglers(host_means: dict[str, float]) -> list[tuple[str, float]]:
    """XProf's straggler hosts (`GetHostStragglers`): with three hosts or more, those whose
    modified z-score (from the median and the median absolute deviation, as XProf picks
    them: the element at n * 50 / 100 of the sorted values) is beyond 3.5."""
    if len(host_means) < 3:
        return []
    values = sorted(host_means.values())
    median = values[len(values) * 50 // 100]
    deviations = sorted(abs(v - median) for v in values)
    mad = deviations[len(deviations) * 50 // 100]
    out = []
    for host, v in host_means.items():
        if mad == 0:
            z = float("inf") if abs(v - median) > 1e-6 else 0.0
        else:
            z = _Z_SCALE * (v - median) / max(mad, _MIN_MAD)
        if abs(z) > _STRAGGLER_Z:
            out.append((host, v))
    return sorted(out)


def barrier_cores_suggestion(percent: float, stragglers: list[tuple[str, float]]) -> str:
    """XProf's BarrierCoresRule text (HTML, as XProf writes it, host names escaped) for
    `percent` % of each step at barrier-cores and the straggler hosts [(host, their %)]."""
    if stragglers:
        items = "".join(
            f"<li>Host <b>{html.escape(host)}</b> average barrier-cores time fraction: <b>{pct:.1f}%</b></li>"
            for host, pct in stragglers
        )
        balance = (
            "<li><b>Investigate Stragglers:</b> The following hosts are identified as potential stragglers "
            f"with significantly different barrier time fraction compared to others:<ul>{items}</ul></li>"
        )
    else:
        balance = (
            "<li><b>Investigate Workload Balance:</b> Check for stragglers, i.e., workers that are "
            "significantly slower than others. Uneven workloads can cause faster workers to wait at the "
            "barrier.</li>"
        )
    return (
        "<p>Your program is likely bottlenecked by <b>TPU barrier-cores</b> operations: <b> an average of "
        f"{percent:.1f}% of each step time</b> is spent on these operations. This often indicates a "
        "synchronization issue between workers in a distributed training setup. Please consider the "
        f"following optimizations:</p><ul>{balance}"
        "<li><b>Optimize Collective Operations:</b> Operations like AllReduce involve synchronization. Ensure "
        "they are used efficiently. Check the size of data being communicated.</li>"
        "<li><b>Check Network:</b> Network latency or bandwidth can be a bottleneck for distributed "
        "operations, causing workers to wait longer at barriers.</li>"
        "<li><b>Improve Data Input Pipeline:</b> Ensure your data loading and preprocessing pipeline is "
        "efficient and balanced across all workers. A slow input pipeline on one worker can stall all "
        "others.</li></ul>"
    )


def smart_suggestions(run: RunLike) -> pd.DataFrame:
    """XProf's smart suggestions for a run: one row per rule that fires (rule_name,
    suggestion_text: XProf's HTML). `.attrs["barrier_cores_percent"]`: the signal (% of each
    step at barrier-cores, NaN without such events); `.attrs["stragglers"]`: [(host, %)]."""
    fractions, host_means = [], {}
    for space in run.xspaces():
        t = event_time_fractions(space)
        if t.empty:
            continue
        fractions.append(t["fraction"].to_numpy(np.float32))
        name = (space.hostnames[:1] or [""])[0]
        if name:
            host_means[name] = float(t.groupby("step_num")["fraction"].mean().mean()) * 100
    out = pd.DataFrame(columns=COLUMNS)
    percent = float(np.concatenate(fractions).mean(dtype=np.float64)) * 100 if fractions else float("nan")
    stragglers = _stragglers(host_means)
    if fractions and percent >= BARRIER_BOUND_PERCENT:
        out = pd.DataFrame([("BarrierCoresRule", barrier_cores_suggestion(percent, stragglers))], columns=COLUMNS)
    out.attrs["barrier_cores_percent"] = percent
    out.attrs["stragglers"] = stragglers
    return out


__all__ = ["BARRIER", "barrier_cores_suggestion", "event_time_fractions", "smart_suggestions"]
