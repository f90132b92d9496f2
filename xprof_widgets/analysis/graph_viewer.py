"""XProf's graph viewer: the HLO graph around one op, laid out top-down.

XProf draws the neighbourhood of an instruction (XLA's
`RenderGraphNeighborhoodAround`, `xprof/convert/hlo_proto_to_graph_view.cc`):
every instruction at most `radius` edges away through operands and users, with
XLA's two pruning rules (a tuple's operands are not followed, a constant's
users are not followed: both fan out to much of the program and say little),
fusions shown closed or opened to their fused computation, and the device time
the profile measured on each op. This module computes the same neighbourhood
from the module's HloProto (`io.hlo`), and lays it out as a layered
(Sugiyama-style) drawing: operands above users, long edges bent through
placeholder points, a few barycentre sweeps to undo crossings.

Only the neighbourhood is visited and laid out (at most `max_nodes` nodes), so a
view costs the same in a 10,000-instruction module as in a small one, after the
module is parsed once.
"""

from __future__ import annotations

import difflib
import weakref
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import ProfileError
from ..io.hlo import hlo_module
from ..io.hlo_text import shape_text
from .core.availability import NO_HLO_MODULES
from .core.cache import per_run
from .core.modules import default_module
from .core.xla_ops import category, program_id_of, program_modules, source_text

# Layout units (the widget draws at about 55 px a unit): node boxes, the vertical
# distance between layers, the least gap between boxes, the width a bent edge takes.
NODE_WIDTH = 3.3  # 165 px: a 28-character label (io names, shapes) in full
NODE_HEIGHT = 0.8
LAYER_GAP = 1.5
X_GAP = 0.4
BEND_WIDTH = 0.3
CLUSTER_PAD = 0.35  # room between an opened fusion's nodes and what is around its box
CLUSTER_LABEL = 0.25  # room for the fusion's name above its top nodes
MAX_NODES = 400

NODE_COLUMNS = [
    "name",
    "opcode",
    "shape",
    "category",
    "computation",
    "fusion",
    "is_fusion",
    "is_centre",
    "distance",
    "time_ps",
    "self_time_ps",
    "occurrences",
    "flops",
    "time_fraction",
    "framework_op",
    "source",
    "operands_omitted",
    "users_omitted",
    "depth",
    "x",
    "y",
]
EDGE_COLUMNS = ["src", "dst", "operand_index", "kind", "path_x", "path_y"]
CLUSTER_COLUMNS = ["name", "computation", "parent", "is_centre", "nodes", "x0", "x1", "y0", "y1"]


class OpNotFoundError(KeyError):
    """No instruction or computation of that name: a KeyError whose text reads as a sentence."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


@dataclass
class GraphView:
    """The HLO graph around one op of one module.

    `nodes`: one row per instruction shown: name, opcode, shape (HLO text, with
    layout), category (XProf's), computation, fusion (the opened fusion whose fused
    computation holds it, "" outside), is_fusion (a closed fusion: can be opened),
    is_centre, distance (edges from the centre), time_ps and self_time_ps (device
    time over the profile, ps), occurrences, flops (FLOPs over the profile),
    time_fraction (of the profile's device time, 0-1), all NaN where the profile
    did not measure the op (fused instructions, ops that did not run, a view
    without a profile); framework_op, source (`file.py:12`), operands_omitted and
    users_omitted (neighbours not shown), depth (layer, 0 at the top), x and y
    (layout units, y down the page is negative; box centres).
    `edges`: src, dst (node names), operand_index (position of src among dst's
    operands; for an edge into an opened fusion the fusion's operand number),
    kind ("operand", "into fusion", "out of fusion"), path_x / path_y (polyline
    from src's bottom to dst's top, layout units).
    `clusters`: one row per opened fusion: name, computation (fused), parent
    (enclosing opened fusion or ""), is_centre, nodes (count), x0, x1, y0, y1
    (bounding box of its nodes' boxes). `reason` says why a view is empty.
    """

    module: str
    op: str
    nodes: pd.DataFrame
    edges: pd.DataFrame
    clusters: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=CLUSTER_COLUMNS))
    radius: int = 2
    computation: str = ""
    opcode: str = ""
    expanded: tuple = ()
    parent_fusion: str = ""
    truncated: bool = False
    reason: str = ""

    @property
    def empty(self):
        return self.nodes.empty

    def __repr__(self):
        if self.empty:
            return f"GraphView(empty: {self.reason})"
        return (
            f"GraphView({self.op!r} in {self.module}, radius {self.radius}: {len(self.nodes)} nodes, "
            f"{len(self.edges)} edges{', opened ' + ', '.join(self.expanded) if self.expanded else ''})"
        )


# --- where an op lives ---------------------------------------------------------------------


class _ModuleIndex:
    """What the neighbourhood walk needs of a module, built once per module: computations by
    name, the fusion instruction of each fused computation, parameters by number."""

    def __init__(self, module):
        self.module = module
        self.computations = {c.name: c for c in module.computations.values()}
        self.fusion_of = {}
        for comp in module.computations.values():
            for instr in comp.instructions:
                if instr.opcode == "fusion":
                    for called in instr.called:
                        self.fusion_of.setdefault(called.id, instr)
        self._params = {}

    def parameter(self, comp, number):
        if comp.id not in self._params:
            self._params[comp.id] = {p.proto.parameter_number: p for p in comp.instructions if p.opcode == "parameter"}
        return self._params[comp.id].get(number)

    def enclosing_fusions(self, instr):
        """The fusions whose fused computations hold `instr`, innermost first."""
        out = []
        comp = instr.computation
        while comp.is_fusion and comp.id in self.fusion_of:
            fusion = self.fusion_of[comp.id]
            out.append(fusion)
            comp = fusion.computation
        return out


_INDEXES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def module_index(module):
    """The _ModuleIndex of an io.hlo.HloModule (computations by name, fusions of fused
    computations, enclosing fusions), built once per module."""
    idx = _INDEXES.get(module)
    if idx is None:
        idx = _INDEXES[module] = _ModuleIndex(module)
    return idx


class RunModules:
    """A run's HLO modules by name (`protos`, `names()`, `get(name)` -> io.hlo.HloModule),
    parsed when first asked; a Run's are parsed once per run (`xla_ops.program_modules`)."""

    def __init__(self, source):
        if isinstance(source, Mapping):
            self.protos, self.run = dict(source), None
        else:
            self.protos, self.run = dict(getattr(source, "hlo_protos", {}) or {}), source
        self._parsed = {}

    def names(self):
        return list(self.protos)

    def get(self, key):
        if key not in self._parsed:
            pid = program_id_of(key)
            mod = None
            if self.run is not None and pid is not None:
                pm = program_modules(self.run)
                if pm.names.get(pid) == key:
                    mod = pm.module(pid)
            if mod is None:
                mod = hlo_module(self.protos[key], key)  # ProfileError if it does not parse
            self._parsed[key] = mod
        return self._parsed[key]


def _lookup(mod, name):
    """(instruction, computation) named `name` in `mod` (either may be None)."""
    return mod.instruction(name), module_index(mod).computations.get(name)


def find_op(run, op, module=None):
    """(module name, HloModule, instruction or computation) for `op` in `run`.

    `run` is a Run or a {module name: serialized HloProto} mapping. Without
    `module`, every module is searched: ValueError lists the modules when the name
    is in several, OpNotFoundError (a KeyError) suggests close names when it is in
    none. A computation's name finds the computation.
    """
    mods = run if isinstance(run, RunModules) else RunModules(run)
    keys = mods.names()
    if not keys:
        raise OpNotFoundError(f"no HLO modules to look for {op!r} in")
    if module is not None:
        if module not in mods.protos:
            raise OpNotFoundError(f"no module {module!r}; modules: {sorted(keys)}")
        keys = [module]
    found = []
    for key in keys:
        mod = mods.get(key)
        instr, comp = _lookup(mod, op)
        if instr is not None or comp is not None:
            found.append((key, mod, instr if instr is not None else comp))
    if len(found) == 1:
        return found[0]
    if found:
        names = [k for k, _, _ in found]
        shown = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "")
        raise ValueError(f"{op!r} is in {len(names)} modules ({shown}); pass module= to pick one")
    pool = []
    for key in keys:
        mod = mods.get(key)
        pool.extend(mod.instructions)
        pool.extend(module_index(mod).computations)
    close = difflib.get_close_matches(str(op), list(dict.fromkeys(pool)), n=5, cutoff=0.6)
    where = f"module {module}" if module is not None else f"any of the {len(mods.names())} modules"
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise OpNotFoundError(f"no op or computation named {op!r} in {where}{hint}")


# --- what the profile measured --------------------------------------------------------------

_TIME_FIELDS = ("time_ps", "self_time_ps", "occurrences", "flops", "time_fraction")


def op_times(run) -> dict:
    """{(program_id, op name): (time_ps, self_time_ps, occurrences, flops, time_fraction)}
    from the op profile's per-op metrics (`op_stats.device_op_metrics`), once per run;
    {} for a mapping of HloProtos (no profile)."""
    if isinstance(run, Mapping) or not hasattr(run, "xspace"):
        return {}
    return _op_times(run)


@per_run
def _op_times(run):
    from .core.op_stats import device_op_metrics

    db = device_op_metrics(run)
    ops = db.ops
    out = {}
    if not ops.empty:
        total = float(db.total_time_ps) or np.nan
        cols = [ops[c].to_numpy(dtype=np.float64) for c in ("time_ps", "self_time_ps", "occurrences", "flops")]
        for i, (pid, name) in enumerate(zip(ops["program_id"].tolist(), ops["name"].astype(str).tolist())):
            out[(int(pid), name)] = (cols[0][i], cols[1][i], cols[2][i], cols[3][i], cols[0][i] / total)
    return out


def busiest_ops(run, module, n=8) -> list:
    """The `n` ops of `module` with the most device time, busiest first: [(name, time_ps)]."""
    pid = program_id_of(module)
    rows = [(name, t[0]) for (p, name), t in op_times(run).items() if p == pid and t[0] > 0]
    return sorted(rows, key=lambda r: -r[1])[:n]


def default_op(run, module=None):
    """(module, op) to show first: the op with the most device time (in `module` if given),
    else the root of the entry computation of `module` (default: the largest module)."""
    mods = RunModules(run)
    times = op_times(run)
    pids = {program_id_of(k): k for k in mods.names()}
    best = None
    for (pid, name), t in times.items():
        key = pids.get(pid)
        if key is None or (module is not None and key != module) or not t[0] > 0:
            continue
        if best is None or t[0] > best[0]:
            try:
                if mods.get(key).instruction(name) is None:
                    continue
            except ProfileError:  # a module that does not parse has nothing to show
                continue
            best = (t[0], key, name)
    if best is not None:
        return best[1], best[2]
    key = module if module is not None else default_module(mods.protos)
    if key is None:
        return None, None
    mod = mods.get(key)
    root = mod.entry.root if mod.entry is not None else None
    return key, (root.name if root is not None else None)


# --- the neighbourhood ------------------------------------------------------------------------


class _Walk:
    """Operands and users of instructions in the graph where some fusions are open: an open
    fusion is replaced by its fused computation, whose parameters take the fusion's operands
    and whose root feeds the fusion's users."""

    def __init__(self, idx, opened):
        self.idx = idx
        self.opened = opened  # set of fusion instructions

    def is_open(self, instr):
        return instr.opcode == "fusion" and instr in self.opened and instr.fused_computation is not None

    def output(self, instr):
        """The node that stands for `instr`'s value (an open fusion's fused root)."""
        while self.is_open(instr) and instr.fused_computation.root is not None:
            instr = instr.fused_computation.root
        return instr

    def operands(self, instr):
        """[(node, operand index, kind)] feeding `instr`."""
        comp = instr.computation
        if instr.opcode == "parameter" and comp.is_fusion:
            fusion = self.idx.fusion_of.get(comp.id)
            if fusion is not None and fusion in self.opened:
                k = instr.proto.parameter_number
                if 0 <= k < len(fusion.operands):
                    return [(self.output(fusion.operands[k]), k, "into fusion")]
                return []
        return [(self.output(o), k, "operand") for k, o in enumerate(instr.operands)]

    def users(self, instr):
        """[node] that read `instr`'s value, each once."""
        out, seen = [], set()
        for user in instr.users:
            if user in seen:
                continue
            seen.add(user)
            if self.is_open(user):
                for k, o in enumerate(user.operands):
                    if o is instr:
                        p = self.idx.parameter(user.fused_computation, k)
                        if p is not None:
                            out.append(p)
            else:
                out.append(user)
        comp = instr.computation
        if comp.is_fusion and comp.root is instr:
            fusion = self.idx.fusion_of.get(comp.id)
            if fusion is not None and fusion in self.opened:
                out.extend(u for u in self.users(fusion) if u not in seen)
        return list(dict.fromkeys(out))

    def members(self, fusion, limit):
        """The instructions an open fusion stands for (nested open fusions replaced by theirs),
        the root's side first when there are more than `limit`."""
        comp = fusion.fused_computation
        out = []
        order = comp.post_order()[::-1] if len(comp.instructions) > limit else comp.instructions
        for instr in order:
            if len(out) >= limit:
                break
            if self.is_open(instr):
                out.extend(self.members(instr, limit - len(out)))
            else:
                out.append(instr)
        return out[:limit]


def _neighbourhood(walk, centre, radius, max_nodes):
    """Breadth-first from the centre, at most `radius` edges and `max_nodes` nodes: {node: distance}
    in visit order, and whether the node limit cut it short."""
    start = walk.members(centre, max_nodes) if walk.is_open(centre) else [centre]
    dist = dict.fromkeys(start, 0)
    exempt = set(start)
    truncated = walk.is_open(centre) and len(start) >= max_nodes
    frontier = start
    d = 0
    while frontier and d < radius:  # a huge radius ends where the graph does
        d += 1
        nxt = []
        for node in frontier:
            # XLA's rules: a tuple's operands and a constant's users fan out to much of the
            # program; the centre is exempt.
            ins = [] if (node.opcode == "tuple" and node not in exempt) else [o for o, _, _ in walk.operands(node)]
            outs = [] if (node.opcode == "constant" and node not in exempt) else walk.users(node)
            for m in ins + outs:
                if m not in dist:
                    if len(dist) >= max_nodes:
                        return dist, True
                    dist[m] = d
                    nxt.append(m)
        frontier = nxt
    return dist, truncated


def graph_viewer(run, op=None, module=None, radius=2, expand=False, max_nodes=MAX_NODES) -> GraphView:
    """The HLO graph around `op` (XProf's graph viewer), laid out top-down.

    `run`: a Run, or a {module name: serialized HloProto} mapping (no times then).
    `op`: an instruction name (fused ones too) or a computation name (its root is the
    centre; a fused computation opens its fusion); None: the op with the most device
    time. `module`: `name(program_id)`; None searches every module (ValueError when
    the name is in several, OpNotFoundError, a KeyError, when in none). `radius`:
    edges from the centre (0: the centre alone). `expand`: True opens the centre when
    it is a fusion; names (or one name) open those fusions, their fused instructions
    drawn inside a box in place of the fusion node. A fused instruction's enclosing
    fusions are always open. `max_nodes` caps the nodes shown (`truncated` then).
    A run without modules gives an empty view whose `reason` says why.
    """

    radius = int(radius)
    if radius < 0:
        raise ValueError(f"radius must be 0 or more, not {radius}")
    mods = RunModules(run)
    if not mods.names():
        return _empty(module or "", op or "", radius, NO_HLO_MODULES)
    if op is None:
        module, op = default_op(run, module)
        if op is None:
            return _empty(module or "", "", radius, "the module has no instructions")
    key, mod, found = find_op(mods, op, module)
    idx = module_index(mod)
    if hasattr(found, "instructions"):  # a computation: its fusion, or its root
        fusion = idx.fusion_of.get(found.id) if found.is_fusion else None
        if fusion is not None:
            centre, expand = fusion, _names(expand) | {fusion.name}
        elif found.root is not None:
            centre = found.root
        else:
            return _empty(key, op, radius, f"computation {op} has no instructions")
    else:
        centre = found
    opened = set()
    for name in _names(expand) if expand is not True else {centre.name}:
        instr = mod.instruction(name)
        comp = idx.computations.get(name) if instr is None else None
        if comp is not None and comp.is_fusion:  # a fused computation's name: its fusion
            instr = idx.fusion_of.get(comp.id)
        if instr is None:
            raise OpNotFoundError(f"no fusion named {name!r} in module {key} to open")
        if instr.opcode == "fusion":
            opened.add(instr)
    enclosing = idx.enclosing_fusions(centre)
    opened.update(enclosing)
    for f in list(opened):  # a fusion inside an open one can be open; its enclosing ones must be
        opened.update(idx.enclosing_fusions(f))
    walk = _Walk(idx, opened)
    dist, truncated = _neighbourhood(walk, centre, radius, max(1, int(max_nodes)))
    nodes = list(dist)
    pos = {n: i for i, n in enumerate(nodes)}

    # Edges among shown nodes; counts of neighbours left out.
    src, dst, opidx, kinds = [], [], [], []
    ops_omitted = np.zeros(len(nodes), dtype=np.int64)
    users_omitted = np.zeros(len(nodes), dtype=np.int64)
    for i, node in enumerate(nodes):
        for o, k, kind in walk.operands(node):
            j = pos.get(o)
            if j is None:
                ops_omitted[i] += 1
            else:
                src.append(j)
                dst.append(i)
                opidx.append(k)
                kinds.append(kind)
        users_omitted[i] = sum(1 for u in walk.users(node) if u not in pos)
    kind_arr = np.array(kinds, dtype=object)
    src_a, dst_a = np.array(src, dtype=np.int64), np.array(dst, dtype=np.int64)
    kind_arr[(kind_arr == "operand") & _out_of_fusion(nodes, src_a, dst_a)] = "out of fusion"

    # Which open fusion holds each node (innermost), for the boxes drawn around them.
    open_of = [_innermost_open(n, idx, opened) for n in nodes]
    outer = {f: _innermost_open(f, idx, opened) for f in opened}
    top_group = []
    for f in open_of:
        while f is not None and outer.get(f) is not None:
            f = outer[f]
        top_group.append(f)
    groups = {f: g for g, f in enumerate(dict.fromkeys(x for x in top_group if x is not None))}
    group = np.array([groups.get(f, -1) for f in top_group], dtype=np.int64)

    centre_pos = pos.get(centre, -1)
    order = np.array(opidx, dtype=np.int64)
    keep_top = np.array([n.opcode == "parameter" and n.computation.is_fusion for n in nodes], dtype=bool)
    near = np.fromiter(dist.values(), dtype=np.int64, count=len(nodes)) <= 1
    lay = layered_layout(
        len(nodes), src_a, dst_a, order, group=group, centre=max(centre_pos, 0), keep_top=keep_top, near=near
    )

    times = op_times(run)
    pid = program_id_of(key)
    tcols = {f: np.full(len(nodes), np.nan) for f in _TIME_FIELDS}
    for i, n in enumerate(nodes):
        t = times.get((pid, n.name)) if not n.computation.is_fusion else None
        if t is not None:
            for f, v in zip(_TIME_FIELDS, t):
                tcols[f][i] = v
    frame = pd.DataFrame(
        {
            "name": [n.name for n in nodes],
            "opcode": [n.opcode for n in nodes],
            "shape": [shape_text(n.shape) for n in nodes],
            "category": [category(n) for n in nodes],
            "computation": [n.computation.name for n in nodes],
            "fusion": ["" if f is None else f.name for f in open_of],
            "is_fusion": [n.opcode == "fusion" for n in nodes],
            "is_centre": [n is centre for n in nodes],
            "distance": np.fromiter(dist.values(), dtype=np.int64, count=len(nodes)),
            **tcols,
            "framework_op": [n.metadata.op_name for n in nodes],
            "source": [source_text(n) for n in nodes],
            "operands_omitted": ops_omitted,
            "users_omitted": users_omitted,
            "depth": lay["depth"],
            "x": lay["x"],
            "y": lay["y"],
        },
        columns=NODE_COLUMNS,
    )
    edges = pd.DataFrame(
        {
            "src": [nodes[j].name for j in src],
            "dst": [nodes[i].name for i in dst],
            "operand_index": order,
            "kind": kind_arr.astype(str) if len(kind_arr) else np.array([], dtype=str),
            "path_x": lay["path_x"],
            "path_y": lay["path_y"],
        },
        columns=EDGE_COLUMNS,
    )
    clusters = _clusters(open_of, opened, idx, centre, frame)
    comp = centre.computation
    parent = idx.fusion_of.get(comp.id) if comp.is_fusion else None
    return GraphView(
        module=key,
        op=centre.name,
        nodes=frame,
        edges=edges,
        clusters=clusters,
        radius=radius,
        computation=comp.name,
        opcode=centre.opcode,
        expanded=tuple(sorted(f.name for f in opened)),
        parent_fusion=parent.name if parent is not None else "",
        truncated=truncated,
    )


def _names(expand):
    if expand is True or not expand:
        return set()
    if isinstance(expand, str):
        return {expand}
    if isinstance(expand, Iterable):
        return {str(x) for x in expand}
    raise TypeError(f"expand must be a bool, a fusion name or names, not {type(expand).__name__}")


def _empty(module, op, radius, reason):
    return GraphView(
        module=module,
        op=op,
        nodes=pd.DataFrame(columns=NODE_COLUMNS),
        edges=pd.DataFrame(columns=EDGE_COLUMNS),
        radius=radius,
        reason=reason,
    )


def _innermost_open(instr, idx, opened):
    comp = instr.computation
    if comp.is_fusion:
        f = idx.fusion_of.get(comp.id)
        if f in opened:
            return f
    return None


def _out_of_fusion(nodes, src, dst):
    """Edges from a fused root to an instruction of another computation."""
    if not len(src):
        return np.zeros(0, dtype=bool)
    comps = np.array([id(n.computation) for n in nodes], dtype=np.int64)
    fused = np.array([n.computation.is_fusion for n in nodes], dtype=bool)
    return fused[src] & (comps[src] != comps[dst])


def _clusters(open_of, opened, idx, centre, frame):
    """One row per open fusion with nodes shown: its box around its (nested) nodes, the
    fusion's name written inside the top edge."""
    rows = []
    members = {}
    for i, f in enumerate(open_of):
        while f is not None:
            members.setdefault(f, []).append(i)
            f = _innermost_open(f, idx, opened)
    x, y = frame["x"].to_numpy(float), frame["y"].to_numpy(float)
    for f, ids in members.items():
        ids = np.array(ids)
        parent = _innermost_open(f, idx, opened)
        level = 0
        g = parent
        while g is not None:
            level += 1
            g = _innermost_open(g, idx, opened)
        pad = max(CLUSTER_PAD - 0.06 - 0.1 * level, 0.05)
        rows.append(
            {
                "name": f.name,
                "computation": f.fused_computation.name if f.fused_computation else "",
                "parent": parent.name if parent is not None else "",
                "is_centre": f is centre,
                "nodes": len(ids),
                "x0": float(x[ids].min() - NODE_WIDTH / 2 - pad),
                "x1": float(x[ids].max() + NODE_WIDTH / 2 + pad),
                "y0": float(y[ids].min() - NODE_HEIGHT / 2 - pad),
                "y1": float(y[ids].max() + NODE_HEIGHT / 2 + pad + CLUSTER_LABEL),
            }
        )
    return pd.DataFrame(rows, columns=CLUSTER_COLUMNS)


# --- layout -------------------------------------------------------------------------------------


def layered_layout(n, src, dst, operand_index=None, group=None, centre=0, keep_top=None, near=None, sweeps=24):
    """A layered drawing of a DAG of `n` nodes with edges src -> dst (operands above users).

    Layers by longest path from the sources (a source sits just above its first user);
    edges longer than one layer pass through bend points; node order in each layer by
    barycentre sweeps (down and up, keeping the order with fewest crossings); x by
    repeatedly centring each node over its neighbours, boxes never closer than X_GAP.
    Nodes of one `group` (>= 0: an opened fusion) are laid out on their own first and
    then move as one block spanning their layers, so the box drawn around them holds
    nothing else; edges passing beside a block keep to one side of it. `keep_top` nodes
    (a fused computation's parameters) stay in their group's top layer; edges between
    `near` nodes (the centre and its neighbours) pull hardest, so those stay close. Returns {"depth", "x",
    "y" (per node), "path_x", "path_y" (per edge,
    tuples from src's bottom to dst's top)}; the `centre` node is at x = 0. Layout
    units: NODE_WIDTH, NODE_HEIGHT, LAYER_GAP.
    """
    src = np.asarray(src, dtype=np.int64)
    dst = np.asarray(dst, dtype=np.int64)
    operand_index = np.zeros(len(src), np.int64) if operand_index is None else np.asarray(operand_index)
    group = np.full(n, -1, dtype=np.int64) if group is None else np.asarray(group, dtype=np.int64)
    if n == 0:
        return {"depth": np.zeros(0, np.int64), "x": np.zeros(0), "y": np.zeros(0), "path_x": [], "path_y": []}

    # Each group laid out alone; then it is one item, `height` layers tall, `width` wide.
    groups = np.unique(group[group >= 0])
    item = np.arange(n)
    off = np.zeros(n, dtype=np.int64)  # layer of a node inside its group
    dx = np.zeros(n)  # x of a node from its group's middle
    inner_bends = {}  # (src node, dst node) -> (x from the group's middle, layer inside the group)
    height = np.ones(n + len(groups), dtype=np.int64)
    width = np.full(n + len(groups), NODE_WIDTH)
    for gi, g in enumerate(groups):
        members = np.flatnonzero(group == g)
        local = np.full(n, -1, dtype=np.int64)
        local[members] = np.arange(len(members))
        inside = (group[src] == g) & (group[dst] == g)
        pinned = None if keep_top is None else np.asarray(keep_top, dtype=bool)[members]
        sub = _core(len(members), local[src[inside]], local[dst[inside]], keep_top=pinned, sweeps=sweeps)
        lx = sub["x"][: len(members)]
        mid = (lx.max() + lx.min()) / 2
        item[members] = n + gi
        off[members] = sub["layer"][: len(members)]
        dx[members] = lx - mid
        height[n + gi] = int(sub["layer"].max()) + 1
        width[n + gi] = lx.max() - lx.min() + NODE_WIDTH + 2 * CLUSTER_PAD
        for (a, b), chain in sub["bends"].items():
            inner_bends[(int(members[a]), int(members[b]))] = (sub["x"][chain] - mid, sub["ent_layer"][chain])

    # The outer drawing, of single nodes and groups.
    outer = item[src] != item[dst]
    n_items = n + len(groups)
    used = np.zeros(n_items, dtype=bool)
    used[item] = True
    near_item = np.zeros(n_items, dtype=bool)
    if near is not None:
        np.logical_or.at(near_item, item, np.asarray(near, dtype=bool))
    lay = _core(
        n_items,
        item[src[outer]],
        item[dst[outer]],
        off[src[outer]],
        off[dst[outer]],
        height,
        width,
        active=used,
        near=near_item,
        sweeps=sweeps,
    )
    layer = lay["layer"][item] + off
    x = lay["x"][lay["first"][item] + off] + dx
    shift = x[centre] if 0 <= centre < n else 0.0
    x = x - shift
    y = -layer.astype(np.float64) * LAYER_GAP

    # Polylines: src bottom, bend points, dst top at a port spread over the box in the order
    # the edges arrive from (left to right, then by operand index), so they do not cross there.
    first = lay["first"]
    bends_x, bends_y = [], []
    for a, b in zip(src.tolist(), dst.tolist()):
        if item[a] == item[b] and (a, b) in inner_bends:
            bx, bl = inner_bends[(a, b)]
            base = lay["x"][first[item[a]]]  # the group's middle (all its slices share it)
            bx, by = bx + base - shift, -(bl + lay["layer"][item[a]]) * LAYER_GAP
        elif item[a] != item[b]:
            chain = list(lay["bends"].get((int(first[item[a]] + off[a]), int(first[item[b]] + off[b])), ()))
            bx, by = lay["x"][chain] - shift, -lay["ent_layer"][chain] * LAYER_GAP
        else:
            bx = by = ()
        bends_x.append(tuple(map(float, bx)))
        bends_y.append(tuple(map(float, by)))
    arrive = np.array([bx[-1] if bx else x[a] for bx, a in zip(bends_x, src.tolist())])
    in_rank, in_count = _ports(dst, arrive, operand_index, n)
    path_x, path_y = [], []
    for e, (a, b) in enumerate(zip(src.tolist(), dst.tolist())):
        port = ((in_rank[e] + 0.5) / in_count[b] - 0.5) * NODE_WIDTH * 0.7
        px = (float(x[a]),) + bends_x[e] + (float(x[b] + port),)
        py = (float(y[a] - NODE_HEIGHT / 2),) + bends_y[e] + (float(y[b] + NODE_HEIGHT / 2),)
        if len(px) > 2:
            px, py = _straightened(px, py, x, y, (a, b))
        path_x.append(px)
        path_y.append(py)
    return {"depth": layer, "x": x, "y": y + 0.0, "path_x": path_x, "path_y": path_y}


def _straightened(px, py, x, y, ends):
    """A polyline with the bend points it does not need: from each point kept, straight to
    the farthest later point that the segment reaches crossing no box (its own two ends'
    boxes aside). The layout's bend points keep a long edge clear of the boxes it passes,
    but also take it out and back around boxes a straight line misses."""
    half_w, half_h = NODE_WIDTH / 2 + 0.05, NODE_HEIGHT / 2 + 0.05
    others = np.ones(len(x), bool)
    others[list(ends)] = False
    bx0, bx1 = x[others] - half_w, x[others] + half_w
    by0, by1 = y[others] - half_h, y[others] + half_h
    keep, i, last = [0], 0, len(px) - 1
    while i < last:
        j = last
        while j > i + 1 and _crosses(px[i], py[i], px[j], py[j], bx0, bx1, by0, by1):
            j -= 1
        keep.append(j)
        i = j
    return tuple(px[k] for k in keep), tuple(py[k] for k in keep)


def _crosses(x0, y0, x1, y1, bx0, bx1, by0, by1) -> bool:
    """Whether the segment (x0, y0)-(x1, y1) passes through any of the boxes (Liang-Barsky
    clipping, all boxes at once)."""
    if not len(bx0):
        return False
    lo, hi = np.zeros(len(bx0)), np.ones(len(bx0))
    for p, q in ((x0 - x1, x0 - bx0), (x1 - x0, bx1 - x0), (y0 - y1, y0 - by0), (y1 - y0, by1 - y0)):
        if p == 0:
            lo = np.where(q < 0, 2.0, lo)  # parallel to this side and outside it
        elif p < 0:
            lo = np.maximum(lo, q / p)
        else:
            hi = np.minimum(hi, q / p)
    return bool((lo < hi).any())


def _core(
    count, s, d, s_off=None, d_off=None, height=None, width=None, active=None, keep_top=None, near=None, sweeps=8
):
    """Layers, order and x of `count` items (an item may span `height` layers; an edge leaves
    item s at its layer `s_off` and enters item d at `d_off`). Returns {"layer" (per item),
    "first" (entity of an item's top layer), "ent_layer", "x" (per entity: an item's slice of
    a layer, or a bend point), "bends" {(entity, entity): bend entities in order}}."""
    s = np.asarray(s, dtype=np.int64)
    d = np.asarray(d, dtype=np.int64)
    s_off = np.zeros(len(s), np.int64) if s_off is None else np.asarray(s_off, dtype=np.int64)
    d_off = np.zeros(len(s), np.int64) if d_off is None else np.asarray(d_off, dtype=np.int64)
    height = np.ones(count, np.int64) if height is None else np.asarray(height, dtype=np.int64)
    width = np.full(count, NODE_WIDTH) if width is None else np.asarray(width, dtype=np.float64)
    active = np.ones(count, dtype=bool) if active is None else active
    layer = _layers(count, s, d, s_off, d_off, height, active, keep_top)

    # Entities: one per layer an item spans; an edge runs between entities.
    first = np.cumsum(height) - height
    n_ent = int(height.sum())
    ent_item = np.repeat(np.arange(count), height)
    ent_layer = np.repeat(layer, height) + (np.arange(n_ent) - np.repeat(first, height))
    es, ed = first[s] + s_off, first[d] + d_off
    pairs = np.unique(np.stack([es, ed], axis=1), axis=0) if len(es) else np.zeros((0, 2), np.int64)
    ps, pd_ = pairs[:, 0], pairs[:, 1]

    # Bend points: an edge spanning k layers gets k - 1 of them, chained.
    k = np.maximum(ent_layer[pd_] - ent_layer[ps] - 1, 0)
    n_bends = int(k.sum())
    owner = np.repeat(np.arange(len(pairs)), k)
    step = np.arange(n_bends) - np.repeat(np.cumsum(k) - k, k)
    bend_ids = n_ent + np.arange(n_bends)
    all_layer = np.concatenate([ent_layer, ent_layer[ps][owner] + 1 + step])
    chain_len = k + 2
    flat = np.empty(int(chain_len.sum()), dtype=np.int64)
    starts = np.cumsum(chain_len) - chain_len
    ends = starts + chain_len - 1
    middle = np.ones(len(flat), dtype=bool)
    middle[starts] = False
    middle[ends] = False
    flat[starts], flat[ends], flat[middle] = ps, pd_, bend_ids
    last = np.zeros(len(flat), dtype=bool)
    last[ends] = True
    seg_s, seg_d = flat[:-1][~last[:-1]], flat[1:][~last[:-1]]
    total = n_ent + n_bends
    present = np.concatenate([np.repeat(active, height), np.ones(n_bends, dtype=bool)])

    pos = _order(total, all_layer, seg_s, seg_d, present, sweeps)
    tall = np.flatnonzero(height > 1)
    if len(tall):
        chain = np.concatenate([np.full(n_ent, -1), owner])
        pos = _sides(pos, all_layer, ent_item, chain, tall, present)
    ent_width = np.concatenate([np.repeat(width, height), np.full(n_bends, BEND_WIDTH)])
    tie = np.concatenate([np.where(np.repeat(height, height) > 1, ent_item, -1), np.full(n_bends, -1)])
    near_ent = np.zeros(total, dtype=bool)
    if near is not None:
        near_ent[:n_ent] = np.repeat(np.asarray(near, dtype=bool), height)
        near_ent[n_ent:] = (near_ent[ps] & near_ent[pd_])[owner]
    x = _x_coordinates(total, all_layer, pos, seg_s, seg_d, ent_width, tie, present, near_ent)
    bends = dict(zip(map(tuple, pairs.tolist()), np.split(bend_ids, np.cumsum(k)[:-1]) if len(pairs) else []))
    return {"layer": layer, "first": first, "ent_layer": all_layer, "x": x, "bends": bends}


def _layers(count, s, d, s_off, d_off, height, active, keep_top=None, rounds=4):
    """Longest-path layers (an edge needs layer[d] + d_off > layer[s] + s_off), then each
    item moved, within what its operands and users allow, to the median of the layers its
    edges would like (just below an operand, just above a user): edges get short, and
    parameters and constants sit beside what reads them. `keep_top` items stay put."""
    layer = np.zeros(count, dtype=np.int64)
    for _ in range(count + 1):
        new = layer.copy()
        np.maximum.at(new, d, layer[s] + s_off + 1 - d_off)
        if np.array_equal(new, layer):
            break
        layer = new
    if len(s):
        # Per item: its in-edges (from s: the item must be at least layer[s] + gap_in) and
        # out-edges (to d: at most layer[d] - gap_out), as Python lists for a sequential sweep.
        gap_in = (s_off + 1 - d_off).tolist()
        gap_out = (d_off - 1 - s_off).tolist()
        ins = [[] for _ in range(count)]
        outs = [[] for _ in range(count)]
        for e, (a, b) in enumerate(zip(s.tolist(), d.tolist())):
            ins[b].append((a, gap_in[e]))
            outs[a].append((b, gap_out[e]))
        fixed = np.zeros(count, dtype=bool) if keep_top is None else np.asarray(keep_top, dtype=bool)
        lay = layer.tolist()
        movable = [i for i in np.argsort(layer, kind="stable").tolist() if not fixed[i] and (ins[i] or outs[i])]
        for r in range(rounds):
            moved = False
            for i in movable if r % 2 == 0 else movable[::-1]:
                low = [lay[a] + g for a, g in ins[i]]
                high = [lay[b] + g for b, g in outs[i]]
                lo = max(low) if low else -(10**9)
                hi = min(high) if high else 10**9
                wants = sorted(low + high)
                want = (
                    wants[(len(wants) - 1) // 2]
                    if len(wants) % 2
                    else (wants[len(wants) // 2] if not low else wants[(len(wants) - 1) // 2])
                )
                new = min(max(want, lo), hi)
                if new != lay[i]:
                    lay[i] = new
                    moved = True
            if not moved:
                break
        layer = np.array(lay, dtype=np.int64)
    return layer - (layer[active].min() if active.any() else 0)


def _order(total, layer, s, d, present, sweeps):
    """Position of each entity in its layer: barycentre sweeps, the order with fewest crossings kept."""
    n_layers = int(layer[present].max()) + 1 if present.any() else 1
    members = [np.flatnonzero((layer == li) & present) for li in range(n_layers)]
    pos = np.zeros(total, dtype=np.float64)
    for m in members:
        pos[m] = np.arange(len(m))
    by_upper = [np.flatnonzero(layer[s] == li) for li in range(n_layers)]
    best, best_crossings = pos.copy(), _crossings(pos, s, d, by_upper)
    for sweep in range(sweeps):
        if best_crossings == 0:
            break
        down = sweep % 2 == 0
        for li in range(1, n_layers) if down else range(n_layers - 2, -1, -1):
            m = members[li]
            if len(m) < 2:
                continue
            e = by_upper[li - 1] if down else by_upper[li]
            mine, other = (d[e], s[e]) if down else (s[e], d[e])
            local = np.full(total, -1, dtype=np.int64)
            local[m] = np.arange(len(m))
            sums = np.bincount(local[mine], weights=pos[other], minlength=len(m))
            counts = np.bincount(local[mine], minlength=len(m))
            bary = np.where(counts > 0, sums / np.maximum(counts, 1), pos[m])
            pos[m[np.lexsort((pos[m], bary))]] = np.arange(len(m))
        c = _crossings(pos, s, d, by_upper)
        if c < best_crossings:
            best, best_crossings = pos.copy(), c
    return _transpose(best, members, s, d) if best_crossings else best


def _transpose(pos, members, s, d, passes=4):
    """Swap neighbours in a layer wherever that uncrosses edges (to the layers above and
    below together), until no swap helps."""
    pos = pos.copy()
    up = [[] for _ in range(len(pos))]  # positions of each entity's neighbours above
    down = [[] for _ in range(len(pos))]
    for a, b in zip(s.tolist(), d.tolist()):
        up[b].append(a)
        down[a].append(b)

    def cost(u, v):
        """Crossings between u's and v's edges with u left of v."""
        c = 0
        for nbrs in (up, down):
            pu, pv = [pos[a] for a in nbrs[u]], [pos[b] for b in nbrs[v]]
            c += sum(1 for a in pu for b in pv if a > b)
        return c

    for _ in range(passes):
        improved = False
        for m in members:
            row = sorted(m.tolist(), key=lambda e: pos[e])
            for i in range(len(row) - 1):
                u, v = row[i], row[i + 1]
                if cost(v, u) < cost(u, v):
                    pos[u], pos[v] = pos[v], pos[u]
                    row[i], row[i + 1] = v, u
                    improved = True
        if not improved:
            break
    return pos


def _sides(pos, layer, ent_item, chain, tall, present):
    """Reorder the layers a tall item (a group) spans so that each bent edge passes it on one
    side all the way down: the side most of its bend points already had."""
    pos = pos.copy()
    item_of = np.full(len(pos), -1, dtype=np.int64)
    item_of[: len(ent_item)] = ent_item
    for it in tall:
        slices = np.flatnonzero((item_of == it) & present)
        if not len(slices):
            continue
        span = layer[slices]
        at = np.full(int(layer.max()) + 1, np.nan)
        at[span] = pos[slices]
        beside = np.flatnonzero(present & np.isin(layer, span) & (item_of != it))
        left = pos[beside] < at[layer[beside]]
        bend = chain[beside] >= 0
        if bend.any():
            c = chain[beside][bend]
            votes = np.bincount(c, weights=np.where(left[bend], 1.0, -1.0))
            left[bend] = votes[c] >= 0
        for li, sl in zip(span, slices):
            here = layer[beside] == li
            m, lm = beside[here], left[here]
            order = np.concatenate(
                [m[lm][np.argsort(pos[m[lm]], kind="stable")], [sl], m[~lm][np.argsort(pos[m[~lm]], kind="stable")]]
            )
            pos[order] = np.arange(len(order))
    return pos


def _crossings(pos, s, d, by_upper, limit=2000):
    """Edge crossings between adjacent layers (pairs of edges whose ends swap order)."""
    total = 0
    for e in by_upper:
        if len(e) < 2:
            continue
        e = e[:limit]
        a, b = pos[s[e]], pos[d[e]]
        swapped = (a[:, None] < a[None, :]) & (b[:, None] > b[None, :])
        total += int(np.count_nonzero(swapped))
    return total


def _x_coordinates(total, layer, pos, s, d, width, tie, present, near=None, rounds=6):
    """x of every entity: each layer's entities in order, pulled towards the mean x of their
    neighbours (alternately above, below, both), never closer than their widths allow.
    Entities with the same `tie` (>= 0: the layers of one group) share one x."""
    n_layers = int(layer[present].max()) + 1 if present.any() else 1
    members = []
    for li in range(n_layers):
        m = np.flatnonzero((layer == li) & present)
        members.append(m[np.argsort(pos[m], kind="stable")])
    x = np.zeros(total)
    offsets = []
    for m in members:
        sep = (width[m][:-1] + width[m][1:]) / 2 + X_GAP
        off = np.concatenate([[0.0], np.cumsum(sep)])
        x[m] = off - off[-1] / 2
        offsets.append(off)
    tied = tie >= 0
    # Straight long edges matter most: a segment between two bend points pulls hardest.
    bend = width == BEND_WIDTH
    weight = 1.0 + 3.0 * (bend[s] & bend[d]) + 1.0 * (bend[s] ^ bend[d])
    if near is not None:
        weight = weight * np.where(near[s] & near[d], 6.0, 1.0)
    seg_layer = layer[d]
    up_edges = [np.flatnonzero(seg_layer == li) for li in range(n_layers)]  # segments into layer li
    down_edges = [np.flatnonzero(layer[s] == li) for li in range(n_layers)]  # segments out of layer li
    for r in range(rounds):
        down = r % 2 == 0
        both = r >= rounds - 2
        for li in range(n_layers) if down else range(n_layers - 1, -1, -1):
            m, off = members[li], offsets[li]
            if not len(m):
                continue
            sums = np.zeros(total)
            counts = np.zeros(total)
            if down or both:
                e = up_edges[li]
                np.add.at(sums, d[e], weight[e] * x[s[e]])
                np.add.at(counts, d[e], weight[e])
            if not down or both:
                e = down_edges[li]
                np.add.at(sums, s[e], weight[e] * x[d[e]])
                np.add.at(counts, s[e], weight[e])
            want = np.where(counts[m] > 0, sums[m] / np.maximum(counts[m], 1e-12), x[m])
            if tied.any() and tied[m].any():
                full = x.copy()
                full[m] = want
                want = np.where(tied[m], _tie_mean(full, tie)[np.maximum(tie[m], 0)], want)
            x[m] = _place(want, off)
    if tied.any():  # one x per group; the others in each layer fitted around it
        x[tied] = _tie_mean(x, tie)[tie[tied]]
        for m in members:
            pins = np.flatnonzero(tied[m])
            if not len(pins):
                continue
            bounds = [-np.inf] + [x[m[p]] for p in pins] + [np.inf]
            cuts = [0] + [p for p in pins] + [len(m)]
            for j in range(len(cuts) - 1):
                lo_i = cuts[j] + (1 if j > 0 else 0)
                seg = m[lo_i : cuts[j + 1]]
                if not len(seg):
                    continue
                sep = (width[seg][:-1] + width[seg][1:]) / 2 + X_GAP
                off = np.concatenate([[0.0], np.cumsum(sep)])
                lo = bounds[j] + (width[m[cuts[j]]] + width[seg[0]]) / 2 + X_GAP if j > 0 else -np.inf
                hi = (
                    bounds[j + 1] - (width[m[cuts[j + 1]]] + width[seg[-1]]) / 2 - X_GAP
                    if j + 1 < len(cuts) - 1
                    else np.inf
                )
                x[seg] = _place_between(x[seg], off, lo, hi)
    return x


def _tie_mean(values, tie):
    ok = tie >= 0
    sums = np.bincount(tie[ok], weights=values[ok])
    counts = np.bincount(tie[ok])
    return sums / np.maximum(counts, 1)


def _place(want, off):
    """Positions as near `want` as the order and gaps (cumulative `off`) allow: the mean of
    the leftmost and rightmost feasible placements."""
    right = off + np.maximum.accumulate(want - off)
    left = off + np.minimum.accumulate((want - off)[::-1])[::-1]
    return (left + right) / 2


def _place_between(want, off, lo, hi):
    """`_place` with the first centre at least `lo` and the last at most `hi` (the room between
    two groups' blocks); where the room is too small, centred in it."""
    span = off[-1]
    if np.isfinite(lo) and np.isfinite(hi) and hi - lo < span:
        return (lo + hi) / 2 - span / 2 + off
    low = lo + off if np.isfinite(lo) else np.full(len(off), -np.inf)
    high = hi - (span - off) if np.isfinite(hi) else np.full(len(off), np.inf)
    return _place(np.clip(want, low, high), off)


def _ports(dst, arrive_x, operand_index, n):
    """Rank of each edge among its target's incoming edges (by the x it arrives from, then
    operand index), and the count of incoming edges per node."""
    m = len(dst)
    if not m:
        return np.zeros(0, np.int64), np.ones(n, np.int64)
    order = np.lexsort((np.arange(m), operand_index, np.round(arrive_x, 6), dst))
    counts = np.bincount(dst, minlength=n)
    first = np.cumsum(counts) - counts
    rank = np.empty(m, dtype=np.int64)
    rank[order] = np.arange(m) - first[dst[order]]
    return rank, np.maximum(counts, 1)
