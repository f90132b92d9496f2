"""The graph viewer (XProf's graph viewer tool): the HLO neighbourhood of an op read back from the
HloProto itself (operands and users by instruction id, an independent breadth-first walk with
XLA's pruning rules), fused computations opened, the layout (operands above users, boxes apart,
an opened fusion's box holding only its own ops), the op profile's times on the nodes, the
messages for ambiguous and unknown names, a 10,000-instruction module in well under 2 s, and the
widget: traits, clicks, fusions opened by a click, names escaped, a run without HLO modules."""

from __future__ import annotations

import html
import itertools
import json
import re
import types
from functools import cache

import numpy as np
import pytest
import traitlets

import xprof_widgets as xw
from xprof_widgets.analysis.graph_viewer import (
    NODE_HEIGHT,
    NODE_WIDTH,
    X_GAP,
    OpNotFoundError,
    graph_viewer,
    layered_layout,
)
from xprof_widgets.io.hlo import parse_hlo_proto

from .conftest import PROFILES, corpus_run
from .hlo_corpus import layered_hlo_proto

STEP = "jit_step(30)"  # the shipped sample's training step: 157 instructions, 20 fusions


@cache
def _run(logdir="jax_mlp_cpu"):
    return xw.sample_run() if logdir == "jax_mlp_cpu" else corpus_run(logdir)


@cache
def _proto_graph(logdir, module):
    """From the HloProto alone: {name: (computation name, opcode, [operand names], called ids)},
    users by name, computations by id."""
    proto = parse_hlo_proto(_run(logdir).hlo_protos[module]).hlo_module
    instrs, users, comps = {}, {}, {}
    for comp in proto.computations:
        by_id = {i.id: i.name for i in comp.instructions}
        comps[comp.id] = comp
        for i in comp.instructions:
            ops = [by_id[o] for o in i.operand_ids]
            instrs[i.name] = (comp.name, i.opcode, ops, list(i.called_computation_ids))
            for o in dict.fromkeys(ops):
                users.setdefault(o, []).append(i.name)
    return instrs, users, comps


def _reference_walk(logdir, module, op, radius):
    """Breadth-first from `op` inside its computation, XLA's rules: no tuple's operands and no
    constant's users but the centre's (RenderGraphNeighborhoodAround)."""
    instrs, users, _ = _proto_graph(logdir, module)
    dist = {op: 0}
    frontier = [op]
    for d in range(1, radius + 1):
        nxt = []
        for n in frontier:
            _, opcode, ops, _ = instrs[n]
            ins = [] if (opcode == "tuple" and n != op) else ops
            outs = [] if (opcode == "constant" and n != op) else users.get(n, [])
            for m in ins + outs:
                if m not in dist:
                    dist[m] = d
                    nxt.append(m)
        frontier = nxt
    return dist


# --- the neighbourhood ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "logdir, module, op",
    [
        ("jax_mlp_cpu", STEP, "dot.1"),
        ("jax_mlp_cpu", STEP, "compare_select_fusion.1"),
        ("jax_mlp_cpu", STEP, "constant.19"),
        ("jax_transformer_cpu", "jit_step(34)", "copy_bitcast_fusion.6"),
        ("tpu_v6e_inference", "jit_f(12190760917235803885)", "copy-done.4"),
    ],
)
def test_radius_one_is_the_operands_and_users_the_proto_names(logdir, module, op):
    instrs, users, _ = _proto_graph(logdir, module)
    view = graph_viewer(_run(logdir), op, module=module, radius=1)
    _, _, operands, _ = instrs[op]
    assert set(view.nodes["name"]) == {op} | set(operands) | set(users.get(op, []))
    assert view.nodes.loc[view.nodes["is_centre"], "name"].tolist() == [op]
    # Edges: exactly the centre's operands (with their positions) and its users' edges from the centre.
    into = view.edges[view.edges["dst"] == op].sort_values("operand_index")
    assert into["src"].tolist() == operands and into["operand_index"].tolist() == list(range(len(operands)))
    for user in users.get(op, []):
        got = view.edges[(view.edges["src"] == op) & (view.edges["dst"] == user)]["operand_index"].tolist()
        assert sorted(got) == [k for k, o in enumerate(instrs[user][2]) if o == op]
    # Every edge shown is an operand edge of the proto.
    for s, d, k in view.edges[["src", "dst", "operand_index"]].itertuples(index=False):
        assert instrs[d][2][k] == s


@pytest.mark.parametrize(
    "logdir, module, op, radius",
    [
        ("jax_mlp_cpu", STEP, "dot.1", 2),
        ("jax_mlp_cpu", STEP, "ynn_fusion.4", 3),
        ("jax_mlp_cpu", "jit__normal(8)", None, 4),
        ("jax_transformer_cpu", "jit_step(34)", "dot.35", 3),
    ],
)
def test_neighbourhood_equals_an_independent_walk_of_the_proto(logdir, module, op, radius):
    run = _run(logdir)
    if op is None:
        op = parse_hlo_proto(run.hlo_protos[module]).hlo_module.computations[-1].instructions[-1].name
    view = graph_viewer(run, op, module=module, radius=radius)
    want = _reference_walk(logdir, module, op, radius)
    assert dict(zip(view.nodes["name"], view.nodes["distance"])) == want
    instrs, users, _ = _proto_graph(logdir, module)
    shown = set(want)
    expected_edges = sorted((o, n, k) for n in shown for k, o in enumerate(instrs[n][2]) if o in shown)
    assert sorted(view.edges[["src", "dst", "operand_index"]].itertuples(index=False, name=None)) == expected_edges
    # Neighbours left out are counted.
    for name, ops_out, users_out in view.nodes[["name", "operands_omitted", "users_omitted"]].itertuples(index=False):
        assert ops_out == sum(1 for o in instrs[name][2] if o not in shown)
        assert users_out == sum(1 for u in users.get(name, []) if u not in shown)


def test_radius_limits_the_view():
    run = _run()
    sizes = []
    previous = set()
    for radius in range(6):
        view = graph_viewer(run, "dot.1", module=STEP, radius=radius)
        names = set(view.nodes["name"])
        assert view.nodes["distance"].max() <= radius
        assert previous <= names
        previous = names
        sizes.append(len(names))
    assert sizes[0] == 1 and sizes == sorted(sizes) and sizes[-1] > sizes[1]
    with pytest.raises(ValueError, match="radius"):
        graph_viewer(run, "dot.1", radius=-1)
    small = graph_viewer(run, "dot.1", radius=5, max_nodes=10)
    assert len(small.nodes) == 10 and small.truncated
    # Issue 46: a huge radius ends where the graph does, the same view as a radius past it.
    whole = graph_viewer(run, "dot.1", module=STEP, radius=10**9)
    assert set(whole.nodes["name"]) == set(graph_viewer(run, "dot.1", module=STEP, radius=200).nodes["name"])


# --- fusions ----------------------------------------------------------------------------------


def _fused_names(module, fusion, logdir="jax_mlp_cpu"):
    instrs, _, comps = _proto_graph(logdir, module)
    return {i.name for i in comps[instrs[fusion][3][0]].instructions}, comps[instrs[fusion][3][0]]


@pytest.mark.parametrize("fusion", ["compare_select_fusion.1", "ynn_fusion.7", "add_subtract_fusion"])
def test_an_opened_fusion_shows_its_fused_computation(fusion):
    run = _run()
    instrs, users, _ = _proto_graph("jax_mlp_cpu", STEP)
    names, comp = _fused_names(STEP, fusion)
    view = graph_viewer(run, fusion, module=STEP, radius=1, expand=True)
    assert view.expanded == (fusion,)
    inside = view.nodes[view.nodes["fusion"] == fusion]
    assert set(inside["name"]) == names
    assert (inside["computation"] == comp.name).all() and inside["time_ps"].isna().all()
    # The fusion node itself is replaced: its operands feed its parameters, its root its users.
    assert fusion not in set(view.nodes["name"])
    params = {i.name: i.parameter_number for i in comp.instructions if i.opcode == "parameter"}
    into = view.edges[view.edges["kind"] == "into fusion"]
    assert sorted(zip(into["src"], into["dst"], into["operand_index"])) == sorted(
        (instrs[fusion][2][k], p, k) for p, k in params.items()
    )
    root = next(i.name for i in comp.instructions if i.id == comp.root_id)
    out = view.edges[view.edges["kind"] == "out of fusion"]
    assert set(out["src"]) == {root} and set(out["dst"]) == set(users[fusion])
    assert set(view.nodes["name"]) == names | set(instrs[fusion][2]) | set(users[fusion])
    cluster = view.clusters.set_index("name").loc[fusion]
    assert cluster["nodes"] == len(names) and cluster["computation"] == comp.name and cluster["is_centre"]
    # Closed, it is one node again; naming its fused computation opens it.
    closed = graph_viewer(run, fusion, module=STEP, radius=1)
    assert fusion in set(closed.nodes["name"]) and closed.clusters.empty
    by_computation = graph_viewer(run, comp.name, module=STEP, radius=1)
    assert by_computation.op == fusion and set(by_computation.nodes["name"]) == set(view.nodes["name"])


def test_a_fused_op_is_shown_inside_its_fusion():
    run = _run()
    names, comp = _fused_names(STEP, "compare_select_fusion.1")
    view = graph_viewer(run, "gt.1", module=STEP, radius=2)
    assert view.computation == comp.name and view.parent_fusion == "compare_select_fusion.1"
    assert "compare_select_fusion.1" in view.expanded
    assert set(view.nodes.loc[view.nodes["distance"] <= 2, "name"]) <= names | {
        "ynn_fusion.5",
        "ynn_fusion.7",
        "ps_1__1_.1",
        "ynn_fusion.4",
        "dot.1",
        "ynn_fusion.2",
    }
    # A fused parameter is one edge from the fusion's operand it stands for.
    far = graph_viewer(run, "param_0.19", module=STEP, radius=1)
    assert set(far.nodes["name"]) == {"param_0.19", "ynn_fusion.5", "select_n.1"}
    assert far.edges[far.edges["dst"] == "param_0.19"][["src", "kind"]].values.tolist() == [
        ["ynn_fusion.5", "into fusion"]
    ]


# --- layout -----------------------------------------------------------------------------------


def _check_layout(view):
    nodes = view.nodes.set_index("name")
    y = nodes["y"]
    for s, d in view.edges[["src", "dst"]].itertuples(index=False):
        assert y[s] > y[d], f"{s} is not above its user {d}"
    # Depth is the layer; boxes of one layer never overlap.
    assert np.allclose(nodes["y"], -nodes["depth"] * 1.5)
    for _, layer in view.nodes.groupby("depth"):
        xs = np.sort(layer["x"].to_numpy())
        assert (np.diff(xs) >= NODE_WIDTH + X_GAP - 1e-9).all()
    # Paths leave the bottom of their source and reach the top of their user.
    for s, d, px, py in view.edges[["src", "dst", "path_x", "path_y"]].itertuples(index=False):
        assert px[0] == pytest.approx(nodes.loc[s, "x"]) and py[0] == pytest.approx(y[s] - NODE_HEIGHT / 2)
        assert abs(px[-1] - nodes.loc[d, "x"]) < NODE_WIDTH / 2 and py[-1] == pytest.approx(y[d] + NODE_HEIGHT / 2)
        assert all(a > b for a, b in itertools.pairwise(py))
    # An opened fusion's box holds its own ops and no other box.
    for c in view.clusters.itertuples():
        mine = view.nodes["fusion"].eq(c.name) | view.nodes["name"].isin(
            view.nodes.loc[
                view.nodes["fusion"].isin(view.clusters.loc[view.clusters["parent"] == c.name, "name"]), "name"
            ]
        )
        for n in view.nodes.itertuples():
            overlaps = (
                n.x + NODE_WIDTH / 2 > c.x0
                and n.x - NODE_WIDTH / 2 < c.x1
                and n.y + NODE_HEIGHT / 2 > c.y0
                and n.y - NODE_HEIGHT / 2 < c.y1
            )
            assert overlaps == bool(mine[n.Index]), (c.name, n.name)


@pytest.mark.parametrize(
    "op, expand",
    [
        ("dot.1", False),
        ("ynn_fusion.4", False),
        ("tuple.1", False),
        ("compare_select_fusion.1", True),
        ("gt.1", False),
        ("add_subtract_fusion", True),
    ],
)
def test_layout_puts_operands_above_users(op, expand):
    view = graph_viewer(_run(), op, module=STEP, radius=3, expand=expand)
    _check_layout(view)
    centre = view.nodes[view.nodes["is_centre"]]
    assert centre.empty or float(centre["x"].iloc[0]) == 0.0


def test_layout_has_few_crossings_on_a_chain_and_a_diamond():
    # A chain is one column; a diamond's two arms sit either side of it, no crossings.
    chain = layered_layout(4, [0, 1, 2], [1, 2, 3])
    assert np.allclose(chain["x"], 0) and chain["depth"].tolist() == [0, 1, 2, 3]
    diamond = layered_layout(4, [0, 0, 1, 2], [1, 2, 3, 3], centre=0)
    assert diamond["depth"].tolist() == [0, 1, 1, 2]
    assert diamond["x"][1] == pytest.approx(-diamond["x"][2]) and diamond["x"][3] == pytest.approx(0)
    # A source feeding only a deep node sits just above it, not at the top.
    late = layered_layout(5, [0, 1, 2, 4], [1, 2, 3, 3])
    assert late["depth"][4] == 2
    # Two crossing edges are uncrossed by the sweeps.
    crossed = layered_layout(4, [0, 1], [3, 2])
    assert (crossed["x"][0] < crossed["x"][1]) == (crossed["x"][3] < crossed["x"][2])


# --- times, names, messages ----------------------------------------------------------------------


def test_nodes_carry_the_op_profiles_times():
    run = _run()
    profile = run.op_profile(top_n=10**9)
    timed = {n.name: n for n, _, _ in profile.root.walk() if n.kind == "op"}
    view = graph_viewer(run, "dot.1", module=STEP, radius=2)
    for row in view.nodes.itertuples():
        if row.name in timed:
            assert row.time_ps == timed[row.name].time_ps and row.occurrences == timed[row.name].occurrences
            assert row.flops == pytest.approx(timed[row.name].flops)
        else:
            assert np.isnan(row.time_ps) and np.isnan(row.flops)
    assert view.nodes.set_index("name").loc["dot.1", "time_ps"] > 0
    # Without a profile (HloProtos only) the graph is the same, with no times.
    bare = graph_viewer(dict(run.hlo_protos), "dot.1", module=STEP, radius=2)
    assert bare.nodes["name"].tolist() == view.nodes["name"].tolist() and bare.nodes["time_ps"].isna().all()


def test_ambiguous_and_unknown_names_say_what_to_do():
    run = _run()
    with pytest.raises(ValueError) as err:
        graph_viewer(run, "mul.1")
    text = str(err.value)
    assert "4 modules" in text and "jit_multiply(10)" in text and STEP in text and "module=" in text
    assert graph_viewer(run, "mul.1", module="jit_multiply(10)").module == "jit_multiply(10)"
    with pytest.raises(KeyError) as err:
        graph_viewer(run, "dot.99")
    assert isinstance(err.value, OpNotFoundError)
    assert str(err.value).startswith("no op or computation named 'dot.99'") and "did you mean" in str(err.value)
    assert "dot.1" in str(err.value)
    with pytest.raises(KeyError, match="no module 'nope"):
        graph_viewer(run, "dot.1", module="nope(1)")
    with pytest.raises(KeyError, match="no fusion named 'fusion.404'"):
        graph_viewer(run, "dot.1", module=STEP, expand=["fusion.404"])
    # No modules at all: an empty view that says why.
    empty = graph_viewer({}, "dot.1")
    assert empty.empty and "no HLO modules" in empty.reason


def test_default_op_is_the_busiest():
    run = _run()
    view = graph_viewer(run)
    ops = run.op_profile(top_n=10**9)
    busiest = max((n for n, _, _ in ops.root.walk() if n.kind == "op"), key=lambda n: n.time_ps)
    assert (view.module, view.op) == (STEP, busiest.name)


# --- scale ------------------------------------------------------------------------------------------


def _laid_out(monkeypatch):
    """The node counts `layered_layout` is called with, recorded while the test runs."""
    import xprof_widgets.analysis.graph_viewer as gv

    sizes, layout = [], gv.layered_layout

    def recording(n, *args, **kwargs):
        sizes.append(n)
        return layout(n, *args, **kwargs)

    monkeypatch.setattr(gv, "layered_layout", recording)
    return sizes


def test_a_10000_instruction_module_lays_out_the_neighbourhood_only(monkeypatch):
    """A view of a big module costs its parse plus a neighbourhood's layout: the layout runs
    once, on the nodes shown, never on the module. (Its time is measured in
    benchmarks/bench_graph_viewer.py, not here: a timed test fails on a loaded machine.)"""
    protos = {"big(1)": layered_hlo_proto()}
    total = sum(len(c.instructions) for c in parse_hlo_proto(protos["big(1)"]).hlo_module.computations)
    assert total >= 10_000
    sizes = _laid_out(monkeypatch)
    view = graph_viewer(protos, "fusion.100", radius=3)
    assert 10 < len(view.nodes) < 400 and view.nodes["distance"].max() == 3
    assert sizes == [len(view.nodes)]
    _check_layout(view)
    # Opening the fusion and a wide radius: cut at max_nodes, and only those are laid out.
    sizes.clear()
    wide = graph_viewer(protos, "fusion.100", radius=8, expand=True)
    assert wide.truncated and len(wide.nodes) == 400
    assert sizes == [400]
    _check_layout(wide)


def test_largest_corpus_module_is_parsed_once(monkeypatch):
    import xprof_widgets.analysis.graph_viewer as gv

    run = _run("jax_transformer_cpu")
    graph_viewer(run, "dot.35", module="jit_step(34)", radius=1)
    from xprof_widgets.analysis.core import xla_ops

    parses = []
    for where in (gv, xla_ops):  # the two places a module is parsed from
        parse = where.hlo_module
        monkeypatch.setattr(where, "hlo_module", lambda *a, _parse=parse, **k: parses.append(a) or _parse(*a, **k))
    sizes = _laid_out(monkeypatch)
    view = graph_viewer(run, "dot.35", module="jit_step(34)", radius=6)
    assert parses == []  # the run's module, parsed by the first view, is reused
    assert len(view.nodes) > 100 and sizes == [len(view.nodes)]
    _check_layout(view)


# --- the widget ---------------------------------------------------------------------------------------


def _widget(*args, **kwargs):
    from xprof_widgets.widgets.graph_viewer import GraphViewerWidget

    return GraphViewerWidget(*args, **kwargs)


def _params(html_text, attr="data-params"):
    return [json.loads(html.unescape(m)) for m in re.findall(attr + r'="([^"]*)"', html_text)]


def test_widget_follows_its_traits_and_clicks():
    w = _widget(_run(), op="dot.1", module=STEP)
    assert (w.op, w.module, w.radius) == ("dot.1", STEP, 2)
    assert set(w.figures) == {"graph"}
    assert f'data-nodes="{len(w.view.nodes)}"' in w.html and 'data-op="dot.1"' in w.html
    assert 'data-testid="op-card-name">dot.1<' in w.html  # XProf's op details: the profile timed it
    # Clicks: a node re-centres; the centre fusion opens, then closes.
    w.selected = {"figure": "graph", "source": "nodes", "id": "compare_select_fusion.1"}
    assert w.op == "compare_select_fusion.1" and w.selected == {}
    w.selected = {"figure": "graph", "source": "nodes", "id": "compare_select_fusion.1"}
    assert w.expanded == ["compare_select_fusion.1"] and not w.view.clusters.empty
    assert "Close fused computation" in w.html
    w.selected = {"figure": "graph", "source": "nodes", "id": "compare_select_fusion.1"}
    assert w.expanded == [] and w.view.clusters.empty
    # Python sets the traits.
    w.radius = 1
    assert w.view.radius == 1 and w.view.nodes["distance"].max() == 1
    w.op = "mul.1"  # in this module (also in three others): the current module wins
    assert w.module == STEP and w.view.op == "mul.1"
    w.module = "jit_multiply(10)"
    assert w.view.module == "jit_multiply(10)"
    with pytest.raises(traitlets.TraitError, match="no op or computation named"):
        w.op = "dot.99"
    with pytest.raises(traitlets.TraitError):
        w.module = "nope(0)"
    w.color_by = "time"
    assert "device time" in w.html
    # The page's requests: back, radius, a typo (a sentence, not a traceback).
    w.on_request("op", {"value": "dot.2"})
    assert w.view.op == "dot.2" and w.module == STEP
    w.on_request("back", {})
    assert w.view.module == "jit_multiply(10)"
    reply, _ = w.on_request("op", {"value": "dot.99"})
    assert reply["ok"] is False and "no op or computation named 'dot.99'" in html.unescape(w.html)
    w.on_request("radius", {"value": "3"})
    assert w.radius == 3 and 'data-testid="graph-error"' not in w.html


def test_widget_on_a_run_without_modules_says_why():
    bare = types.SimpleNamespace(name="bare", hlo_protos={})
    w = _widget(bare)
    assert "No graph viewer for run bare" in w.html and "no HLO modules in the profile" in w.html
    assert w.figures == {}


def test_widget_on_tf_keras_cpu_says_why():
    w = _widget(PROFILES / "tf_keras_cpu")
    assert "no HLO modules in the profile" in w.html and w.figures == {}


def test_widget_escapes_names():
    payload = "'\"><img src=x onerror=alert(1)>"
    proto = parse_hlo_proto(_run().hlo_protos[STEP])
    for comp in proto.hlo_module.computations:
        comp.name += payload
        for i in comp.instructions:
            i.name += payload
            i.metadata.op_name += payload
    module = f"jit_step{payload}(30)"
    w = _widget(
        types.SimpleNamespace(name="evil" + payload, hlo_protos={module: proto.SerializeToString()}),
        op="dot.1" + payload,
        expand=False,
    )
    assert w.view.op == "dot.1" + payload
    assert "<img" not in w.html and payload not in w.html
    params = _params(w.html)
    assert {"name": "compare_select_fusion.1" + payload} in params  # attribute JSON reads back whole
    w.on_request("centre", {"name": "compare_select_fusion.1" + payload})
    w.on_request("toggle", {"name": "compare_select_fusion.1" + payload})
    assert "<img" not in w.html and w.view.clusters["name"].tolist() == ["compare_select_fusion.1" + payload]
