"""XProf's op profile: a tree of device time by program, category,
deduplicated group, op and fused op (`op_stats_to_op_profile.cc`,
`op_profile_builder.cc`), with FLOPS and bandwidth utilisations.

The tree has one node per distinct op, so building it loops over ops, not
events; the per-op numbers come vectorised from `op_stats.device_op_metrics`.
GPU trees are XProf's: an IDLE node, no fused ops under an op (XProf's GPU
ops carry none). Without TPU or GPU ops the tree is built from XLA:CPU thunks
(beyond XProf): FLOPs then come from XLA's CPU cost rules (`flops_estimated`),
there is no IDLE node, and utilisations are NaN since the peaks are unknown.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import pandas as pd

from .core.op_stats import IDLE
from .core.run_stats import RunStats, as_stats
from .core.runlike import RunLike
from .core.xla_ops import ProgramModules
from .core.xla_ops import category as instruction_category


@dataclass
class OpNode:
    """One node of the op profile.

    Times in ps; flops and raw_flops in FLOPs; hbm_bytes, on_chip_read_bytes,
    on_chip_write_bytes in bytes. Utilisations are 0-1 as XProf stores them:
    `flops_utilization` = min(1, achieved/peak) x time_fraction (XProf's
    `metrics.flops`); `flops_utilization_of_time` the frontend's figure
    (achieved/peak); bandwidth utilisations are achieved/peak capped at 1.
    `wasted_time_fraction` = time_fraction x (1 - max(flops, hbm)), as XProf's
    frontend. `kind` is root, program, category, group, op, fused or idle.
    `flops_estimated`: some of the node's FLOPs/bytes were estimated from the
    HLO (GPU/CPU ops), not measured; utilisations are NaN where the peaks are
    unknown.
    """

    name: str
    kind: str
    category: str = ""
    time_ps: int = 0
    self_time_ps: int = 0
    normalized_time_ps: int = 0
    occurrences: int = 0
    flops: float = 0.0  # bf16-normalised FLOPs XProf uses for utilisation
    raw_flops: float = 0.0  # model FLOPs
    hbm_bytes: float = 0.0
    on_chip_read_bytes: float = 0.0
    on_chip_write_bytes: float = 0.0
    time_fraction: float = 0.0
    flops_utilization: float = 0.0
    uncapped_flops_utilization: float = 0.0
    hbm_utilization: float = 0.0
    on_chip_read_utilization: float = 0.0
    on_chip_write_utilization: float = 0.0
    expression: str = ""
    provenance: str = ""
    program_id: int = 0
    num_children: int = 0
    flops_estimated: bool = False
    children: list = field(default_factory=list)
    _has_children_time: bool = field(default=False, repr=False)

    @property
    def flops_utilization_of_time(self):
        """Achieved / peak FLOP rate (what XProf's UI shows), uncapped."""
        if not self.time_fraction:  # no time of its own (a fused op): 0, or unknown without a peak
            return self.uncapped_flops_utilization * 0.0
        return self.uncapped_flops_utilization / self.time_fraction

    @property
    def wasted_time_fraction(self):
        """Time fraction x (1 - max(FLOPS util, HBM util)), XProf's frontend."""
        util = max(self.flops_utilization_of_time, self.hbm_utilization)
        return self.time_fraction * (1 - min(util, 1.0))

    @property
    def avg_time_ps(self):
        return self.time_ps / self.occurrences if self.occurrences else 0.0

    def walk(self, depth=0, parent=None):
        """Yields (node, depth, parent) depth-first."""
        yield self, depth, parent
        for c in self.children:
            yield from c.walk(depth + 1, self)

    def paths(self, path=()):
        """Yields (the names from the root down to a node, the node), depth-first."""
        path = path + (self.name,)
        yield path, self
        for c in self.children:
            yield from c.paths(path)


@dataclass(eq=False, repr=False)
class OpProfile:
    """An op profile of one run: `.root` (OpNode), `.group_by`,
    `.exclude_idle`, `.reason` (why the tree is empty, else ""), `.source`
    ("tpu", "gpu" or "cpu", see `device_op_metrics`), `.notes` (what is
    estimated or unknown for GPU/CPU ops, else "")."""

    root: OpNode
    group_by: str
    exclude_idle: bool
    reason: str = ""
    source: str = "tpu"
    notes: str = ""

    @property
    def empty(self):
        """No op ran (the tree holds at most the IDLE node)."""
        return all(c.kind == "idle" for c in self.root.children)

    def to_dataframe(self) -> pd.DataFrame:
        """One row per node, depth-first: name, depth, parent, kind, category,
        time_ps, self_time_ps, avg_time_ps (ps), time_fraction, occurrences,
        flops, raw_flops (FLOPs), hbm_bytes (bytes), flops_utilization
        (achieved/peak), hbm_utilization, on_chip_read_utilization,
        on_chip_write_utilization, wasted_time_fraction (0-1, NaN when the
        peaks are unknown), expression, provenance, flops_estimated."""
        rows = []
        for n, d, p in self.root.walk():
            rows.append(
                {
                    "name": n.name,
                    "depth": d,
                    "parent": p.name if p else None,
                    "kind": n.kind,
                    "category": n.category,
                    "time_ps": n.time_ps,
                    "self_time_ps": n.self_time_ps,
                    "avg_time_ps": n.avg_time_ps,
                    "time_fraction": n.time_fraction,
                    "occurrences": n.occurrences,
                    "flops": n.flops,
                    "raw_flops": n.raw_flops,
                    "hbm_bytes": n.hbm_bytes,
                    "flops_utilization": n.flops_utilization_of_time,
                    "hbm_utilization": n.hbm_utilization,
                    "on_chip_read_utilization": n.on_chip_read_utilization,
                    "on_chip_write_utilization": n.on_chip_write_utilization,
                    "wasted_time_fraction": n.wasted_time_fraction,
                    "expression": n.expression,
                    "provenance": n.provenance,
                    "flops_estimated": n.flops_estimated,
                }
            )
        return pd.DataFrame(rows)

    def __repr__(self):
        nodes = sum(1 for _ in self.root.walk())
        return f"OpProfile(group_by={self.group_by!r}, exclude_idle={self.exclude_idle}, nodes={nodes})"


GROUP_BY = ("program", "category", "provenance")
NO_PROVENANCE = "(no framework op)"


def _is_fusion(category):
    return "fusion" in category.lower()


def _add(node, op, as_self=False):
    """Accumulates an op's metrics into a node (XProf: CombineOpMetrics, or
    UpdateNodeMetrics with `as_self` for root/program nodes)."""
    node.time_ps += int(op["self_time_ps"] if as_self else op["time_ps"])
    node.self_time_ps += int(op["self_time_ps"])
    node.normalized_time_ps += int(op["normalized_time_ps"])
    node.flops_estimated = node.flops_estimated or bool(op.get("flops_estimated", False))
    if not as_self:
        node.occurrences += int(op["occurrences"])
    if not as_self or op["children_time_ps"] == 0:
        node.flops += float(op["flops"])
        node.raw_flops += float(op["model_flops"])
        node.hbm_bytes += float(op["hbm_read_bytes"] + op["hbm_write_bytes"])
        node.on_chip_read_bytes += float(op["on_chip_read_bytes"])
        node.on_chip_write_bytes += float(op["on_chip_write_bytes"])


def _fused_children(modules: ProgramModules, ops):
    """{(program_id, op name): [(name, category, nested), ...]} from the HLO protos:
    fused computation instructions except parameters and tuples, in order, nested
    fusions kept nested (the TPU path reads XProf's own; XLA:CPU thunks have none)."""

    def expand(instr):
        kids = []
        for comp in instr.called if instr.opcode == "fusion" else []:
            for i in comp.instructions:
                if i.opcode in ("parameter", "tuple"):
                    continue
                kids.append((i.name, instruction_category(i), expand(i)))
        return kids

    out = {}
    for pid, name in set(zip(ops["program_id"], ops["name"])):
        instr = modules.instruction(int(pid), name)
        if instr is not None and instr.opcode == "fusion":
            out[(int(pid), name)] = expand(instr)
    return out


def _op_node(op, pid, fused):
    """The node of one HLO op (a row of the op metrics) with its fused ops below it."""
    leaf = OpNode(
        name=op["name"],
        kind="op",
        category=op["category"],
        expression=op["expression"] or "",
        provenance=op["provenance"],
        program_id=pid,
    )
    leaf.children = _fused_nodes(fused.get((pid, op["name"]), []))
    return leaf


def _fused_nodes(kids):
    nodes = []
    for name, cat, sub in kids:
        n = OpNode(name=name, kind="fused", category=cat, occurrences=1)
        n.children = _fused_nodes(sub)
        nodes.append(n)
    return nodes


def op_profile(
    source: RunStats | RunLike, group_by="program", exclude_idle=False, top_n=100, sort_by="time"
) -> OpProfile:
    """XProf's op profile of the device ops of a run's statistics (`core.run_stats.RunStats`;
    a run: its stats read in this process); fused ops from the run's HLO modules.

    group_by: "program" (program -> category -> deduplicated group -> op ->
    fused ops), "category" (category -> group -> op -> fused ops) or
    "provenance" (the framework op path, split at "/", one level a component
    -> op -> fused ops; ops without one under "(no framework op)").
    exclude_idle: leave out the IDLE node and use the busy time as the total.
    top_n: children kept per node below the program/category level (XProf:
    100). sort_by: "time" (XProf) or "wasted_time". Times in ps.
    """
    if group_by not in GROUP_BY:
        raise ValueError(f"group_by must be one of {GROUP_BY}, not {group_by!r}")
    stats = as_stats(source)
    db = stats.op_metrics
    root = OpNode(name=f"by_{group_by}", kind="root")
    if db.empty and not db.total_time_ps:
        return OpProfile(root, group_by, exclude_idle, reason=db.reason, source=db.source, notes=db.notes)
    ops = db.ops[~db.ops["name"].astype(str).str.startswith("region")]
    # XProf's GPU op profile has no fused ops (its GPU ops carry no children).
    fused = _fused_children(stats.modules, ops) if db.source != "gpu" else {}
    programs: dict = {}
    categories: dict = {}
    groups: dict = {}
    if group_by == "provenance":
        _by_provenance(root, ops, fused)
    for op in ops.to_dict("records") if group_by != "provenance" else []:
        _add(root, op, as_self=True)
        pid = int(op["program_id"])
        parent = root
        if group_by == "program":
            prog = programs.get(pid)
            if prog is None:
                prog = programs[pid] = OpNode(name=db.program_names.get(pid, "main"), kind="program", program_id=pid)
                root.children.append(prog)
            _add(prog, op, as_self=True)
            parent = prog
        if op["children_time_ps"] > 0:
            continue
        ckey = (id(parent), op["category"])
        cat = categories.get(ckey)
        if cat is None:
            cat = categories[ckey] = OpNode(name=op["category"], kind="category")
            parent.children.append(cat)
        gname = op["deduplicated_name"] or op["name"]
        gkey = (id(cat), gname)
        grp = groups.get(gkey)
        if grp is None:
            grp = groups[gkey] = OpNode(name=gname, kind="group")
            cat.children.append(grp)
        leaf = _op_node(op, pid, fused)
        grp.children.append(leaf)
        for n in (cat, grp, leaf):
            _add(n, op)
    if not exclude_idle and db.source in ("tpu", "gpu"):
        idle = OpNode(name=IDLE, kind="idle", category=IDLE, time_ps=db.idle_time_ps, self_time_ps=db.idle_time_ps)
        _add(
            root,
            {
                "time_ps": db.idle_time_ps,
                "self_time_ps": db.idle_time_ps,
                "normalized_time_ps": 0,
                "occurrences": 0,
                "children_time_ps": 0,
                "flops": 0,
                "model_flops": 0,
                "hbm_read_bytes": 0,
                "hbm_write_bytes": 0,
                "on_chip_read_bytes": 0,
                "on_chip_write_bytes": 0,
            },
            as_self=True,
        )
        root.children.append(idle)
    total = db.total_op_time_ps if exclude_idle else db.total_time_ps
    root.time_ps = total
    p = db.peaks
    for n, _, _ in root.walk():
        _utilisations(n, total, p)
    level = {"program": 2, "category": 1, "provenance": 1}[group_by]
    _sort_and_prune(root, top_n, level, sort_by)
    _finalize_groups(root)
    return OpProfile(root, group_by, exclude_idle, reason=db.reason, source=db.source, notes=db.notes)


def _by_provenance(root, ops, fused):
    """root -> one node per framework-op path component -> op -> fused ops."""
    nodes = {}
    for op in ops.to_dict("records"):
        _add(root, op, as_self=True)
        if op["children_time_ps"] > 0:
            continue
        parent = root
        parts = [p for p in str(op["provenance"] or "").split("/") if p] or [NO_PROVENANCE]
        for part in parts:
            key = (id(parent), part)
            node = nodes.get(key)
            if node is None:
                node = nodes[key] = OpNode(name=part, kind="provenance")
                parent.children.append(node)
            _add(node, op)
            parent = node
        pid = int(op["program_id"])
        leaf = _op_node(op, pid, fused)
        _add(leaf, op)
        parent.children.append(leaf)


def _utilisations(n, total, p):
    t = n.time_ps
    n.time_fraction = t / total if total else 0.0
    if math.isnan(p["peak_flops"]):  # no known peak (a CPU): no utilisation, timed or not
        n.flops_utilization = n.uncapped_flops_utilization = math.nan
        n.hbm_utilization = n.on_chip_read_utilization = n.on_chip_write_utilization = math.nan
        return
    if t <= 0:
        return
    secs = t * 1e-12
    rate = n.flops / secs
    if n.normalized_time_ps:
        rate *= t / n.normalized_time_ps
    unc = rate / p["peak_flops"] if p["peak_flops"] else 0.0
    n.uncapped_flops_utilization = unc * n.time_fraction
    n.flops_utilization = min(unc, 1.0) * n.time_fraction
    bw = lambda b, peak: min(b / secs / peak, 1.0) if peak else 0.0  # noqa: E731
    n.hbm_utilization = bw(n.hbm_bytes, p["peak_hbm_bw"])
    n.on_chip_read_utilization = bw(n.on_chip_read_bytes, p["peak_on_chip_read_bw"])
    n.on_chip_write_utilization = bw(n.on_chip_write_bytes, p["peak_on_chip_write_bw"])


def _sort_and_prune(node, k, level, sort_by):
    node.num_children = len(node.children)
    for c in node.children:
        _sort_and_prune(c, k, level - 1, sort_by)
    keep = len(node.children) if level > 0 else k
    if node.kind in ("op", "fused") and _is_fusion(node.category):
        key = lambda c: -c.raw_flops  # noqa: E731
    elif sort_by == "wasted_time":
        key = lambda c: -c.wasted_time_fraction  # noqa: E731
    else:
        key = lambda c: -c.time_ps  # noqa: E731
    node.children = sorted(node.children, key=key)[:keep]


def _finalize_groups(node):
    """Single-op groups become their op; others are named "<top op> and its
    duplicate(s)" and take the top op's details (XProf's finalisation)."""
    for i, c in enumerate(node.children):
        if c.kind == "group":
            if len(c.children) == 1:
                node.children[i] = c.children[0]
            elif c.children:
                top = c.children[0]
                c.name = f"{top.name} and its duplicate(s)"
                c.category, c.expression, c.program_id = top.category, top.expression, top.program_id
                if not _is_fusion(top.category):
                    c.provenance = top.provenance
        else:
            _finalize_groups(c)
