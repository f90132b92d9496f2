"""Two runs side by side: step time and its breakdown, HLO ops, memory peaks.

XProf has no such tool; this puts the numbers the other tools compute for
each run (`overview`, `hlo_stats` with `op_profile`'s utilisations,
`memory_viewer`, `memory_profile`) next to each other, with b - a and b / a,
so that "what changed between these two runs" has an answer in numbers and
in sentences. Nothing is recomputed: every number is the run's own.

Matching: HLO modules are matched by name; a module name carries the
program id (`jit_step(30)`), which differs between runs when the programs
were compiled in another order or changed (TPU ids are fingerprints). So
modules with the same name and id pair first, then the rest by the name
without the id, in program-id order. Ops pair by (module pair, HLO op name).
Allocators pair by memory id.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..format import change, size_short
from .core.steps import BREAKDOWN_COLUMNS, BREAKDOWN_LABELS

#: Step breakdown rows, in XProf's order, with the words people read.
STEP_QUANTITIES = {
    "step_time_ms": "Step time",
    **BREAKDOWN_LABELS,
    "host_to_device_ms": "Host to device",
    "device_compute_16bit_ms": "Device compute, 16-bit",
    "device_compute_32bit_ms": "Device compute, 32-bit",
}
#: Columns of XProf's step breakdown that do not overlap (they add up to the step time).
DISJOINT_BREAKDOWN = list(BREAKDOWN_COLUMNS)

STEP_COLUMNS = ["quantity", "label", "a_ms", "b_ms", "delta_ms", "ratio", "change_percent"]
OP_COLUMNS = [
    "program",
    "program_a",
    "program_b",
    "hlo_op_name",
    "category",
    "present",
    "occurrences_a",
    "occurrences_b",
    "total_time_a_ps",
    "total_time_b_ps",
    "delta_ps",
    "ratio",
    "avg_time_a_ps",
    "avg_time_b_ps",
    "flop_rate_a_gflops",
    "flop_rate_b_gflops",
    "flops_utilization_a",
    "flops_utilization_b",
    "hbm_utilization_a",
    "hbm_utilization_b",
]
MODULE_COLUMNS = [
    "name",
    "module_a",
    "module_b",
    "matched_by",
    "peak_heap_a_bytes",
    "peak_heap_b_bytes",
    "delta_bytes",
    "ratio",
]
ALLOCATOR_COLUMNS = ["memory_id", "peak_bytes_in_use_a", "peak_bytes_in_use_b", "delta_bytes", "ratio"]

#: How many ops the summary names as regressions / improvements.
SUMMARY_OPS = 3

log = logging.getLogger(__name__)

_PROGRAM = re.compile(r"^(.*)\((\d+)\)$")


@dataclass
class CompareResult:
    """Run b against run a (`name_a`, `name_b`); every delta is b - a, every ratio b / a.

    steps: one row a quantity: `quantity` (`step_time_ms` = the average step
        time, then the average of each breakdown column used by either run),
        `label`, `a_ms`, `b_ms`, `delta_ms`, `ratio`, `change_percent`
        (100 x delta / a). NaN on the side of a run without steps.
    step_count_a, step_count_b: steps in each run; avg_step_time_a_ms,
        avg_step_time_b_ms: the runs' own `overview().avg_step_time_ms`
        (None without steps).
    ops: one row an HLO op of either run, by |delta_ps| descending: `program`
        (the module, `a / b` when the ids differ), `program_a`, `program_b`,
        `hlo_op_name`, `category`, `present` ("both", "a only", "b only"),
        occurrences, `total_time_*_ps` (0 where the op did not run), `delta_ps`,
        `ratio`, `avg_time_*_ps`, `flop_rate_*_gflops` (GFLOP/s), and
        `flops_utilization_*`, `hbm_utilization_*` (0-1, achieved / peak;
        NaN where the peak is unknown or the op is absent).
    modules: one row an HLO module of either run: `name` (without program id),
        `module_a`, `module_b`, `matched_by`, `peak_heap_*_bytes` (the memory
        viewer's peak heap, device memory), `delta_bytes`, `ratio`.
    allocators: one row a memory id (allocator) of either run: the memory
        profile's `peak_bytes_in_use_*`, `delta_bytes`, `ratio`.
    steps_reason, ops_reason, modules_reason, allocators_reason: "" when the
        part compares both runs, else why not (in words).
    summary: the comparison in sentences.
    """

    name_a: str
    name_b: str
    steps: pd.DataFrame
    ops: pd.DataFrame
    modules: pd.DataFrame
    allocators: pd.DataFrame
    step_count_a: int = 0
    step_count_b: int = 0
    avg_step_time_a_ms: float | None = None
    avg_step_time_b_ms: float | None = None
    steps_reason: str = ""
    ops_reason: str = ""
    modules_reason: str = ""
    allocators_reason: str = ""
    summary: list = field(default_factory=list)

    @property
    def ops_only_a(self) -> pd.DataFrame:
        """Ops that ran in a and not in b."""
        return self.ops[self.ops["present"] == "a only"]

    @property
    def ops_only_b(self) -> pd.DataFrame:
        """Ops that ran in b and not in a."""
        return self.ops[self.ops["present"] == "b only"]

    @property
    def ops_in_both(self) -> pd.DataFrame:
        """Ops that ran in both runs."""
        return self.ops[self.ops["present"] == "both"]

    def __str__(self):
        return "\n".join(self.summary)

    def __repr__(self):
        return f"<CompareResult {self.name_a!r} -> {self.name_b!r}: {len(self.ops)} ops, {len(self.modules)} modules>"


def _ratio(b, a):
    """b / a, NaN where a is 0 or missing."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(a != 0, b / a, np.nan)


def _both_reasons(run_a, why_a, run_b, why_b):
    """One reason when both runs give the same, else each run's."""
    if why_a == why_b:
        return why_a
    return f"run a ({run_a.name}): {why_a}; run b ({run_b.name}): {why_b}"


def _why(run, what, error):
    return f"{what} of run {run.name} could not be computed ({type(error).__name__}: {error})"


# --- steps ----------------------------------------------------------------------


def _overview(run):
    try:
        return run.overview(), ""
    except Exception as e:
        return None, _why(run, "the overview", e)


def compare_steps(run_a, run_b):
    """(steps DataFrame, counts, averages, reason): see CompareResult.steps."""
    sides, reasons = [], []
    for tag, run in (("a", run_a), ("b", run_b)):
        ov, err = _overview(run)
        if ov is None:
            reasons.append(err)
        elif ov.steps.empty:
            reasons.append(
                f"run {tag} ({run.name}) has no steps: {ov.reason}"
                if ov.reason
                else f"run {tag} ({run.name}) has no steps"
            )
            ov = None
        sides.append(ov)
    means = []
    for ov in sides:
        if ov is None:
            means.append({})
            continue
        m = {c: float(ov.steps[c].mean()) for c in STEP_QUANTITIES if c in ov.steps and c != "step_time_ms"}
        m["step_time_ms"] = float(ov.avg_step_time_ms)  # the run's own number, as its overview page shows it
        means.append(m)
    used = [q for q in STEP_QUANTITIES if q == "step_time_ms" or any(abs(m.get(q, 0.0)) > 0 for m in means)]
    a = np.array([means[0].get(q, np.nan) for q in used], dtype=np.float64)
    b = np.array([means[1].get(q, np.nan) for q in used], dtype=np.float64)
    ratio = _ratio(b, a)
    steps = pd.DataFrame(
        {
            "quantity": used,
            "label": [STEP_QUANTITIES[q] for q in used],
            "a_ms": a,
            "b_ms": b,
            "delta_ms": b - a,
            "ratio": ratio,
            "change_percent": 100 * (ratio - 1),
        },
        columns=STEP_COLUMNS,
    )
    counts = [0 if ov is None else len(ov.steps) for ov in sides]
    avgs = [None if ov is None else float(ov.avg_step_time_ms) for ov in sides]
    return steps, counts, avgs, "; ".join(reasons)


# --- programs and ops ----------------------------------------------------------------


def split_program(name):
    """`jit_step(30)` -> ("jit_step", 30); a name without an id -> (name, None)."""
    m = _PROGRAM.match(str(name))
    return (m.group(1), int(m.group(2))) if m else (str(name), None)


def pair_programs(names_a, names_b):
    """Pairs (name_a or None, name_b or None, matched_by) of module names.

    Per name without the id: one module in each run pairs whatever the ids
    ("name and program id" when they agree, else "name"). With several (JAX
    compiles `jit__normal` once per shape), the same ids pair first, then the
    rest in program-id order (the k-th of a with the k-th of b); matched_by
    then says "... k of N": a guess, as ids shift when another module was
    compiled in between.
    """
    groups = {}
    for side, names in ((0, names_a), (1, names_b)):
        for n in dict.fromkeys(names):
            base, pid = split_program(n)
            groups.setdefault(base, ([], []))[side].append((-1 if pid is None else pid, n))
    pairs = []
    for la, lb in groups.values():
        la, lb = [n for _, n in sorted(la)], [n for _, n in sorted(lb)]
        if len(la) == len(lb) == 1:
            pairs.append((la[0], lb[0], "name and program id" if la[0] == lb[0] else "name"))
            continue
        k = max(len(la), len(lb))
        same = [n for n in la if n in set(lb)]
        pairs += [(n, n, f"name and program id, one of {k}") for n in same]
        la, lb = [n for n in la if n not in same], [n for n in lb if n not in same]
        left = max(len(la), len(lb))
        for i in range(left):
            na = la[i] if i < len(la) else None
            nb = lb[i] if i < len(lb) else None
            how = f"name, {i + 1} of {left} by program id" if na and nb else ("a only" if na else "b only")
            pairs.append((na, nb, how))
    return pairs


#: matched_by values of pairs that are certain (one module of that name in each run).
SURE_MATCH = ("name", "name and program id")


def _program_label(a, b):
    if a is None or b is None:
        return a if b is None else b
    return a if a == b else f"{a} / {b}"


def _op_table(run):
    """(hlo_stats with utilisations, reason) of one run."""
    try:
        stats = run.hlo_stats()
    except Exception as e:
        return None, _why(run, "the HLO stats", e)
    if stats.empty:
        return None, stats.attrs.get("reason", "") or "no HLO ops"
    keys = ["program_id", "program", "hlo_op_name"]
    ops = stats.groupby(keys, sort=False, as_index=False, observed=True).agg(
        category=("category", "first"),
        occurrences=("occurrences", "sum"),
        total_time_ps=("total_time_ps", "sum"),
        flop_rate_gflops=("flop_rate_gflops", "first"),
    )
    util = pd.DataFrame(columns=["program_id", "hlo_op_name", "flops_utilization", "hbm_utilization"])
    try:
        prof = run.op_profile(group_by="program", top_n=1 << 30)
        rows = [
            (n.program_id, n.name, n.flops_utilization_of_time, n.hbm_utilization)
            for n, _, _ in prof.root.walk()
            if n.kind == "op"
        ]
        if rows:
            util = pd.DataFrame(rows, columns=util.columns).drop_duplicates(["program_id", "hlo_op_name"])
    except Exception as e:
        log.debug("no op profile utilisations for run %s: %s", run.name, e)
    ops = ops.merge(util, on=["program_id", "hlo_op_name"], how="left")
    if not np.isfinite(ops[["flops_utilization", "hbm_utilization"]].to_numpy(dtype=np.float64)).any():
        ops[["flops_utilization", "hbm_utilization"]] = np.nan  # peaks unknown (CPU): NaN, not 0
    ops["program"] = ops["program"].astype(str)
    return ops, ""


def compare_ops(run_a, run_b):
    """(ops DataFrame, reason): see CompareResult.ops."""
    (ta, ra), (tb, rb) = _op_table(run_a), _op_table(run_b)
    if ta is None and tb is None:
        return pd.DataFrame(columns=OP_COLUMNS), "no HLO ops in either run: " + _both_reasons(run_a, ra, run_b, rb)
    reason = ""
    if ta is None or tb is None:
        tag, run, why = ("a", run_a, ra) if ta is None else ("b", run_b, rb)
        reason = f"run {tag} ({run.name}) has no HLO ops ({why}): the other run's ops are listed as theirs only"
    empty = pd.DataFrame(columns=(tb if ta is None else ta).columns)
    ta = empty if ta is None else ta
    tb = empty if tb is None else tb
    pairs = pair_programs(ta["program"].unique().tolist(), tb["program"].unique().tolist())
    pid_a = {a: i for i, (a, _, _) in enumerate(pairs) if a is not None}
    pid_b = {b: i for i, (_, b, _) in enumerate(pairs) if b is not None}
    ta = ta.assign(pair=ta["program"].map(pid_a))
    tb = tb.assign(pair=tb["program"].map(pid_b))
    cols = [
        "pair",
        "hlo_op_name",
        "program",
        "category",
        "occurrences",
        "total_time_ps",
        "flop_rate_gflops",
        "flops_utilization",
        "hbm_utilization",
    ]
    m = ta[cols].merge(tb[cols], on=["pair", "hlo_op_name"], how="outer", suffixes=("_a", "_b"), indicator=True)
    pair_a = np.array([p[0] for p in pairs], dtype=object)
    pair_b = np.array([p[1] for p in pairs], dtype=object)
    idx = m["pair"].to_numpy(dtype=np.int64)
    ta_time = m["total_time_ps_a"].fillna(0).to_numpy(dtype=np.int64)
    tb_time = m["total_time_ps_b"].fillna(0).to_numpy(dtype=np.int64)
    occ_a = m["occurrences_a"].fillna(0).to_numpy(dtype=np.int64)
    occ_b = m["occurrences_b"].fillna(0).to_numpy(dtype=np.int64)
    with np.errstate(divide="ignore", invalid="ignore"):
        avg_a = np.where(occ_a > 0, ta_time / np.maximum(occ_a, 1), np.nan)
        avg_b = np.where(occ_b > 0, tb_time / np.maximum(occ_b, 1), np.nan)
    out = pd.DataFrame(
        {
            "program": [_program_label(a, b) for a, b in zip(pair_a[idx], pair_b[idx])],
            "program_a": pair_a[idx],
            "program_b": pair_b[idx],
            "hlo_op_name": m["hlo_op_name"].astype(str).to_numpy(),
            "category": m["category_a"].fillna(m["category_b"]).astype(str).to_numpy(),
            "present": m["_merge"].map({"both": "both", "left_only": "a only", "right_only": "b only"}).astype(str),
            "occurrences_a": occ_a,
            "occurrences_b": occ_b,
            "total_time_a_ps": ta_time,
            "total_time_b_ps": tb_time,
            "delta_ps": tb_time - ta_time,
            "ratio": _ratio(tb_time, ta_time),
            "avg_time_a_ps": avg_a,
            "avg_time_b_ps": avg_b,
            "flop_rate_a_gflops": m["flop_rate_gflops_a"].astype(np.float64).to_numpy(),
            "flop_rate_b_gflops": m["flop_rate_gflops_b"].astype(np.float64).to_numpy(),
            "flops_utilization_a": m["flops_utilization_a"].astype(np.float64).to_numpy(),
            "flops_utilization_b": m["flops_utilization_b"].astype(np.float64).to_numpy(),
            "hbm_utilization_a": m["hbm_utilization_a"].astype(np.float64).to_numpy(),
            "hbm_utilization_b": m["hbm_utilization_b"].astype(np.float64).to_numpy(),
        },
        columns=OP_COLUMNS,
    )
    order = np.lexsort((out["hlo_op_name"].to_numpy(), -np.abs(out["delta_ps"].to_numpy())))
    return out.iloc[order].reset_index(drop=True), reason


# --- memory ----------------------------------------------------------------------


def _module_peaks(run):
    """({module: peak heap bytes}, reason) over the run's HLO modules."""
    try:
        names = run.modules["module"].tolist() if run.hlo_protos else []
    except Exception as e:
        return {}, _why(run, "the HLO modules", e)
    if not names:
        from .core.availability import NO_HLO_MODULES

        return {}, NO_HLO_MODULES
    peaks, failed = {}, []
    for name in names:
        try:
            peaks[name] = int(run.memory_viewer(name).peak_heap_bytes)
        except Exception:
            peaks[name] = np.nan
            failed.append(name)
    return peaks, (f"the memory viewer could not read {', '.join(failed)} of run {run.name}" if failed else "")


def compare_modules(run_a, run_b):
    """(modules DataFrame, reason): see CompareResult.modules."""
    (pa, ra), (pb, rb) = _module_peaks(run_a), _module_peaks(run_b)
    reasons = []
    if not pa and not pb:
        return pd.DataFrame(columns=MODULE_COLUMNS), "no HLO modules in either run: " + _both_reasons(
            run_a, ra, run_b, rb
        )
    for tag, run, why in (("a", run_a, ra), ("b", run_b, rb)):
        if why:
            reasons.append(f"run {tag} ({run.name}): {why}")
    pairs = pair_programs(list(pa), list(pb))
    a = np.array([pa.get(x, np.nan) if x else np.nan for x, _, _ in pairs], dtype=np.float64)
    b = np.array([pb.get(y, np.nan) if y else np.nan for _, y, _ in pairs], dtype=np.float64)
    out = pd.DataFrame(
        {
            "name": [split_program(x or y)[0] for x, y, _ in pairs],
            "module_a": [x for x, _, _ in pairs],
            "module_b": [y for _, y, _ in pairs],
            "matched_by": [h for _, _, h in pairs],
            "peak_heap_a_bytes": a,
            "peak_heap_b_bytes": b,
            "delta_bytes": b - a,
            "ratio": _ratio(b, a),
        },
        columns=MODULE_COLUMNS,
    )
    size = np.fmax(a, b)
    out = out.iloc[np.lexsort((out["name"].to_numpy(), -np.nan_to_num(size)))].reset_index(drop=True)
    return out, "; ".join(reasons)


def _allocator_peaks(run):
    try:
        first = run.memory_profile()
    except Exception as e:
        return {}, _why(run, "the memory profile", e)
    if not first.memory_ids:
        return {}, first.reason or "no allocator events"
    peaks = {}
    for mid in first.memory_ids:
        try:
            peaks[str(mid)] = int(run.memory_profile(mid).peak_bytes_in_use)
        except Exception:
            peaks[str(mid)] = np.nan
    return peaks, ""


def compare_allocators(run_a, run_b):
    """(allocators DataFrame, reason): see CompareResult.allocators."""
    (pa, ra), (pb, rb) = _allocator_peaks(run_a), _allocator_peaks(run_b)
    reasons = [
        f"run {t} ({r.name}) has no memory profile: {why}" for t, r, why in (("a", run_a, ra), ("b", run_b, rb)) if why
    ]
    ids = list(dict.fromkeys([*pa, *pb]))
    if not ids:
        return pd.DataFrame(columns=ALLOCATOR_COLUMNS), "no memory profile in either run: " + _both_reasons(
            run_a, ra, run_b, rb
        )
    a = np.array([pa.get(i, np.nan) for i in ids], dtype=np.float64)
    b = np.array([pb.get(i, np.nan) for i in ids], dtype=np.float64)
    out = pd.DataFrame(
        {
            "memory_id": ids,
            "peak_bytes_in_use_a": a,
            "peak_bytes_in_use_b": b,
            "delta_bytes": b - a,
            "ratio": _ratio(b, a),
        },
        columns=ALLOCATOR_COLUMNS,
    )
    return out, "; ".join(reasons)


# --- the comparison and its sentences ------------------------------------------------


def compare(run_a, run_b) -> CompareResult:
    """Compare run b with run a: step time and breakdown, HLO ops, module and
    allocator memory peaks of two Runs (`xw.compare` also takes paths). Parts a
    run cannot give are left empty with the reason in words; this does not raise
    for a run that lacks a tool. See CompareResult."""
    steps, counts, avgs, steps_reason = compare_steps(run_a, run_b)
    ops, ops_reason = compare_ops(run_a, run_b)
    modules, modules_reason = compare_modules(run_a, run_b)
    allocators, allocators_reason = compare_allocators(run_a, run_b)
    result = CompareResult(
        name_a=run_a.name,
        name_b=run_b.name,
        steps=steps,
        ops=ops,
        modules=modules,
        allocators=allocators,
        step_count_a=counts[0],
        step_count_b=counts[1],
        avg_step_time_a_ms=avgs[0],
        avg_step_time_b_ms=avgs[1],
        steps_reason=steps_reason,
        ops_reason=ops_reason,
        modules_reason=modules_reason,
        allocators_reason=allocators_reason,
    )
    result.summary = summarize(result)
    return result


def fmt_ms(ms):
    """A time in ms as people read it: 4 significant digits."""
    return "n/a" if ms is None or not np.isfinite(ms) else f"{ms:.4g} ms"


def _name(x):
    """A module name, or None for a missing one (None or NaN in a DataFrame)."""
    return x if isinstance(x, str) and x else None


def _op_phrase(row):
    program = _name(row.program_a) or _name(row.program_b)
    where = f" in {split_program(program)[0]}" if program else ""
    return (
        f"{row.hlo_op_name}{where} {fmt_ms(row.total_time_a_ps / 1e9)} -> {fmt_ms(row.total_time_b_ps / 1e9)}"
        f"{change(row.ratio)}"
    )


def summarize(r: CompareResult) -> list:
    """The comparison in sentences: step time, the breakdown's biggest move,
    the ops that got slower and faster, memory peaks, and what could not be
    compared."""
    out = []
    if r.avg_step_time_a_ms is not None and r.avg_step_time_b_ms is not None:
        step = r.steps.iloc[0]
        out.append(
            f"step time {fmt_ms(step.a_ms)} -> {fmt_ms(step.b_ms)}{change(step.ratio)} "
            f"(averages over {r.step_count_a} and {r.step_count_b} steps)"
        )
        parts = r.steps[r.steps["quantity"].isin(DISJOINT_BREAKDOWN)]
        if len(parts):
            big = parts.iloc[int(np.argmax(np.abs(parts["delta_ms"].to_numpy())))]
            out.append(
                f"biggest change in the step breakdown: {big.label.lower()} {fmt_ms(big.a_ms)} -> "
                f"{fmt_ms(big.b_ms)} ({big.delta_ms:+.4g} ms)"
            )
    if r.steps_reason:
        out.append(f"step time not compared: {r.steps_reason}")
    if len(r.ops):
        if r.step_count_a != r.step_count_b and r.step_count_a and r.step_count_b:
            out.append(
                f"op times are totals over the whole profile ({r.step_count_a} vs {r.step_count_b} steps): "
                "compare their averages per occurrence too"
            )
        both = r.ops_in_both
        slower = both[both["delta_ps"] > 0].head(SUMMARY_OPS)
        faster = both[both["delta_ps"] < 0].head(SUMMARY_OPS)
        if len(slower):
            out.append("biggest regressions: " + "; ".join(_op_phrase(x) for x in slower.itertuples()))
        if len(faster):
            out.append("biggest improvements: " + "; ".join(_op_phrase(x) for x in faster.itertuples()))
        na, nb = len(r.ops_only_a), len(r.ops_only_b)
        if na or nb:
            out.append(f"{na} op(s) only in run a, {nb} only in run b")
    if r.ops_reason:
        out.append(f"ops: {r.ops_reason}")
    mods = r.modules.dropna(subset=["peak_heap_a_bytes", "peak_heap_b_bytes"])
    mods = mods[mods["matched_by"].isin(SURE_MATCH)]  # the k-th jit__normal of each run may not be the same one
    if len(mods):
        top = mods.iloc[0]
        out.append(
            f"peak heap of the largest module, {top['name']}: {size_short(top.peak_heap_a_bytes)} -> "
            f"{size_short(top.peak_heap_b_bytes)}{change(top.ratio)}"
        )
        moved = mods.iloc[int(np.argmax(np.abs(mods["delta_bytes"].to_numpy())))]
        if moved["name"] != top["name"] and moved.delta_bytes != 0:
            out.append(
                f"biggest change in a module's peak heap: {moved['name']} {size_short(moved.peak_heap_a_bytes)}"
                f" -> {size_short(moved.peak_heap_b_bytes)}{change(moved.ratio)}"
            )
    if r.modules_reason:
        out.append(f"modules: {r.modules_reason}")
    a = r.allocators
    for memory_id, peak_a, peak_b, ratio in zip(
        a["memory_id"], a["peak_bytes_in_use_a"].astype(float), a["peak_bytes_in_use_b"].astype(float), a["ratio"]
    ):
        out.append(
            f"allocator {memory_id} peak in use: {size_short(peak_a)} -> {size_short(peak_b)}{change(float(ratio))}"
        )
    if r.allocators_reason:
        out.append(f"memory profile: {r.allocators_reason}")
    return out


__all__ = ["SURE_MATCH", "CompareResult", "compare", "pair_programs", "split_program", "summarize"]
