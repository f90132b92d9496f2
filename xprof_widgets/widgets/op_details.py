"""OpDetailsCard: what one HLO op (or a group of ops) did, as XProf's op details card.

One component for every tool that selects an op: the op profile pins it on a
click, the trace viewer will show it for a selected XLA op event. `op_details`
turns an op-profile node into plain numbers; `op_details_html` draws them;
`OpDetailsCard` is the same card as a widget of its own (`card.op = details`).
"""

from __future__ import annotations

import traitlets

from ..format import duration, percent
from ._bokeh import BokehWidget
from ._html import data_json, esc


def op_details(node, program=None):
    """Plain, JSON-able details of an op-profile node (OpNode).

    Times in ps; rates per second: `tflops_per_s` (TFLOP/s), bandwidths in GB/s
    (1e9 bytes/s); utilisations and `time_fraction` in 0..1 (NaN: unknown peak).
    """
    seconds = node.time_ps * 1e-12

    def rate(amount, unit):
        return amount / seconds / unit if seconds > 0 else 0.0

    return {
        "name": node.name,
        "kind": node.kind,
        "category": node.category,
        "program": program,
        "expression": node.expression,
        "provenance": node.provenance,
        "occurrences": int(node.occurrences),
        "total_time_ps": float(node.time_ps),
        "avg_time_ps": float(node.avg_time_ps),
        "time_fraction": float(node.time_fraction),
        "tflops_per_s": rate(node.flops, 1e12),
        "hbm_gb_per_s": rate(node.hbm_bytes, 1e9),
        "on_chip_read_gb_per_s": rate(node.on_chip_read_bytes, 1e9),
        "on_chip_write_gb_per_s": rate(node.on_chip_write_bytes, 1e9),
        "flops_utilization": float(node.flops_utilization_of_time),
        "hbm_utilization": float(node.hbm_utilization),
        "wasted_time_fraction": float(node.wasted_time_fraction),
    }


def op_details_html(details, show_graph=False):
    """The card's HTML for `op_details(...)` output ({} or None: a prompt to pick one).

    An HLO op (one with a program) gets XProf's link to the graph viewer: a "Show in graph
    viewer" button when `show_graph` (the card is inside ProfileWidget, which opens the
    graph viewer on it), else the line of Python that opens it."""
    if not details:
        return '<div class="xw-card" data-op-card="">Click an op to see its details here.</div>'
    rows = [
        ("Category", details.get("category")),
        ("Program", details.get("program")),
        ("Occurrences", f"{details['occurrences']:,}"),
        ("Total time", f"{duration(details['total_time_ps'])} ({percent(details['time_fraction'])} of the profile)"),
        ("Average time", duration(details["avg_time_ps"]) if details["occurrences"] else None),
        ("FLOP rate", f"{details['tflops_per_s']:,.3f} TFLOP/s"),
        ("FLOPS utilization", percent(details["flops_utilization"])),
        ("HBM bandwidth", _bandwidth(details["hbm_gb_per_s"], details["hbm_utilization"])),
        ("On-chip read", _bandwidth(details["on_chip_read_gb_per_s"], details["hbm_utilization"], peak=False)),
        ("On-chip write", _bandwidth(details["on_chip_write_gb_per_s"], details["hbm_utilization"], peak=False)),
        ("Wasted time", percent(details["wasted_time_fraction"])),
        ("Framework op", details.get("provenance")),
    ]
    body = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in rows if v not in (None, ""))
    expr = details.get("expression")
    code = f'<pre class="xw-expr" data-testid="op-expression">{esc(expr)}</pre>' if expr else ""
    return (
        f'<div class="xw-card" data-op-card="{esc(details["name"])}" style="border:1px solid #ccc;'
        f'border-radius:4px;padding:6px 10px;margin-top:6px;font:13px/1.4 system-ui,sans-serif">'
        f'<b data-testid="op-card-name">{esc(details["name"])}</b>'
        f'<table style="font-size:12px">{body}</table>{code}{_graph_link(details, show_graph)}</div>'
    )


def _bandwidth(gb_per_s, utilization, peak=True):
    """A bandwidth for the card. Where the device's memory peak is unknown (a CPU: NaN
    utilization) and nothing was measured, "n/a" as in the tables, never "0.00 GB/s"."""
    unknown = utilization != utilization  # NaN
    if unknown and not gb_per_s:
        return "n/a"
    text = f"{gb_per_s:,.2f} GB/s"
    if not peak:
        return text
    return f"{text} (peak unknown)" if unknown else f"{text} ({percent(utilization)} of peak)"


def _graph_link(details, show_graph):
    program = details.get("program")
    if not program or details.get("kind") not in ("op", "fused", "group"):
        return ""
    if show_graph:
        params = data_json({"op": details["name"], "module": program})
        return (
            f'<button data-request="show-graph" data-params="{params}" data-testid="show-in-graph">'
            "Show in graph viewer</button>"
        )
    return (
        f'<div class="xw-note" data-testid="graph-code" style="font-size:11px;color:#666">In the graph viewer: '
        f"<code>xw.GraphViewerWidget(run, op={esc(repr(details['name']))}, module={esc(repr(program))})</code></div>"
    )


class OpDetailsCard(BokehWidget):
    """The op details card as a widget of its own: set `card.op = op_details(node)` (or link
    it to another widget's `selected_op` with `traitlets.dlink`). An anywidget like the
    tools (marimo included); its HTML is `card.html`."""

    op = traitlets.Dict(help="op_details(...) of the op shown; {} for none.")

    def __init__(self, op=None, **kwargs):
        super().__init__(**kwargs)
        self.op = op or {}
        self.html = op_details_html(self.op)

    @traitlets.observe("op")
    def _draw(self, change):
        self.html = op_details_html(change["new"])
