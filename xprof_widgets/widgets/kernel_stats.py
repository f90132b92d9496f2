"""KernelStatsWidget: every GPU kernel launch configuration, its time and its op.

Shows what `Run.kernel_stats()` computes, as XProf's kernel stats tool does: the
table of kernels with XProf's columns (sorted by a click on a header, filtered by
kernel name and op name, the top N shown), and beside it a bar chart of the total
time of the 20 longest kernels (coloured by TensorCore use). Beyond XProf, a click on
a row or a bar selects the kernel's op: the HLO op the kernel ran for, found through
the kernels' `hlo_op` / `program_id` stats (else the op profile's ops made from the
kernel's framework op), with the op details card (`selected_op`, as the op
profile's) and the table of that op's kernels.
"""

from __future__ import annotations

import re
from functools import cached_property

import numpy as np
import pandas as pd
import traitlets

from ..format import shorten
from ..run import as_run
from ._bokeh import RANKED_PARAMS, BokehWidget, hover_and_tap, ranked_bars, ranked_layout, selectable_bars
from ._html import data_json, esc, note, notice, stat_cards
from ._op_index import OpIndex
from ._table import SortedTable, contains, table_columns
from ._templates import ChartTemplate
from .op_details import op_details, op_details_html

CHART_KERNELS = 20  # bars in the chart: the longest kernels of the rows that match the filters
TOP_N_CHOICES = (10, 25, 100, 1000)
TENSOR_CORE = "#59a14f"
NO_TENSOR_CORE = "#4e79a7"
COLUMNS = table_columns("kernel_stats")  # XProf's headers: table_columns.csv
SORTABLE = tuple(c.key for c in COLUMNS)


# Words of C++ kernel names that tell kernels apart no better than their neighbours do.
_PLAIN_WORDS = {
    "Eigen",
    "internal",
    "TensorEvaluator",
    "TensorAssignOp",
    "TensorMap",
    "Tensor",
    "MakePointer",
    "GpuDevice",
    "DefaultDevice",
    "const",
    "int",
    "long",
    "short",
    "char",
    "unsigned",
    "signed",
    "bool",
    "half",
    "float",
    "double",
    "void",
    "true",
    "false",
    "std",
    "tensorflow",
    "functor",
    "random",
    "cutlass",
    "cub",
    "detail",
    "Index",
    "DSizes",
    "array",
    "IndexList",
    "type2index",
}
_WORD = re.compile(r"[A-Za-z_]\w*")


def short_kernel_name(name, limit=46):
    """A kernel name that fits a label: no `void `; when too long, no namespaces and no
    parameters, and the template arguments become the few words in them that tell this
    kernel from its kin (the functor, the op: `EigenMetaKernel<TensorConversionOp, …>`);
    what is still too long is cut in the middle."""
    text = name.removeprefix("void ")
    if len(text) > limit:
        head, args, depth = [], [], 0
        for ch in text:  # one name's characters, not events
            if ch == "<":
                depth += 1
                args.append(" ")
            elif ch == ">" and depth:
                depth -= 1
                if depth == 0:
                    head.append("<>")
            elif depth:
                args.append(ch)
            elif ch == "(":
                break  # the parameters repeat the template arguments
            else:
                head.append(ch)
        words = []
        for word in _WORD.findall("".join(args)):
            if len(word) > 2 and word not in _PLAIN_WORDS and word not in words:
                words.append(word)
        inside = ", ".join(words[:3]) + (", …" if len(words) > 3 else "") if words else "…"
        base, sep, rest = "".join(head).strip().partition("<>")
        text = base.rsplit("::", 1)[-1] + (f"<{inside}>" if sep else "") + rest.replace("<>", "<…>")
    if len(text) > limit:
        keep = limit - 1
        text = text[: keep - keep // 3] + "…" + text[len(text) - keep // 3 :]
    return text


def kernel_hlo_ops(run) -> pd.DataFrame:
    """Which XLA op each kernel ran for: one row per (kernel_name, grid_dim, block_dim,
    program_id, hlo_op) over all hosts' GPU planes, with launches and duration_us (whole
    ns, as kernel stats count them), longest first. Kernels without an `hlo_op` and a
    `program_id` (TensorFlow kernels) are not in it."""
    from ..analysis.core.kernels import host_kernel_events, parse_kernel_details

    frames = []
    for space in run.xspaces():
        ev = host_kernel_events(run, space)
        if ev is None:
            continue
        ev = ev[ev["is_xla"].to_numpy(bool) & ev["has_program_id"].to_numpy(bool)]
        if ev.empty:
            continue
        # (Texts are Categoricals: launch dims per distinct details, spread by code.)
        launch = [parse_kernel_details(d) for d in ev["details"].cat.categories]
        dims = {k: np.array([",".join(str(x) for x in v[k]) for v in launch], dtype=object) for k in ("grid", "block")}
        details = ev["details"].cat.codes.to_numpy()
        hlo = ev["hlo_op"].cat.categories
        frames.append(
            pd.DataFrame(
                {
                    "kernel_name": ev["name"].to_numpy(object),
                    "grid_dim": dims["grid"][details],
                    "block_dim": dims["block"][details],
                    "program_id": ev["program_id"].to_numpy(np.uint64).astype(object),
                    "hlo_op": np.array([str(h).split("::")[-1] for h in hlo], dtype=object)[
                        ev["hlo_op"].cat.codes.to_numpy()
                    ],
                    "duration_ns": ev["duration_ns"].to_numpy(np.int64),
                }
            )
        )
    if not frames:
        return pd.DataFrame(
            columns=["kernel_name", "grid_dim", "block_dim", "program_id", "hlo_op", "launches", "duration_us"]
        )
    ev = pd.concat(frames, ignore_index=True)
    out = (
        ev.groupby(["kernel_name", "grid_dim", "block_dim", "program_id", "hlo_op"], sort=False)
        .agg(launches=("duration_ns", "size"), duration_ns=("duration_ns", "sum"))
        .reset_index()
    )
    out["duration_us"] = out.pop("duration_ns") / 1e3
    return out.sort_values("duration_us", ascending=False, kind="stable").reset_index(drop=True)


def _plain(value):
    """A JSON-able Python value of a numpy / pandas scalar."""
    if isinstance(value, (np.bool_, bool)):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


class KernelStatsWidget(SortedTable, BokehWidget):
    """XProf's GPU kernel stats of a run: the kernel table, a chart of the longest
    kernels, and the op details card of the selected kernel's op.

    `sort_by` (a column of `run.kernel_stats()`, or "rank"), `sort_descending`,
    `name_filter` (kernel name), `op_filter` (op name) and `top_n` (rows shown) are
    traits Python can read and set; `table` is the rows that match, in the order
    shown. `selected_kernel` is the selected row (with its `id`, the row's index in
    `run.kernel_stats()`), `selected_op` the op details of its op (see `op_details`;
    `{"kind": "framework op", ...}` when the op profile has no such op).
    `select_kernel(id)` selects a row.
    """

    columns = COLUMNS
    sort_by = traitlets.Enum(SORTABLE, "total_duration_us", help="The column the table is sorted on.").tag(sync=True)
    sort_descending = traitlets.Bool(True, help="Largest first (the default for numbers).").tag(sync=True)
    name_filter = traitlets.Unicode("", help="Show kernels whose name contains this (any case).").tag(sync=True)
    op_filter = traitlets.Unicode("", help="Show kernels whose op name contains this (any case).").tag(sync=True)
    selected_kernel = traitlets.Dict(help="The selected kernel's row, with its `id`; {} for none.").tag(sync=True)
    selected_op = traitlets.Dict(help="op_details() of the selected kernel's op; {} for none.").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        self._kernels_of_op = pd.DataFrame()
        super().__init__(**kwargs)
        self.stats = self.run.kernel_stats().copy()
        self.stats.insert(0, "rank", np.arange(1, len(self.stats) + 1))
        self._ready = True
        if self.stats.empty:
            self.html = notice(f"No kernel stats for run {self.run.name}: {self.stats.attrs.get('reason')}.")
            return
        self._redraw_chart()
        self.html = self._html()

    @property
    def empty(self):
        return self.stats.empty

    # --- state -------------------------------------------------------------------

    @traitlets.observe("name_filter", "op_filter")
    def _refilter(self, change):
        if self._ready and not self.empty:
            self._redraw_chart()
            self.html = self._html()

    tap_source = "kernels"

    def select_tapped(self, id):
        self.select_kernel(id)

    def clear_tapped(self):
        if self.selected_kernel:
            self.selected_kernel = {}
            self.selected_op = {}
            self._kernels_of_op = pd.DataFrame()
            self.html = self._html()

    @property
    def table(self):
        """The rows that match the filters, sorted as shown (index: the row's id)."""
        s = self.stats
        keep = contains(s["kernel_name"], self.name_filter) & contains(s["op_name"], self.op_filter)
        return self.sorted(s[keep])

    def select_kernel(self, id):
        """Select row `id` (its index in `run.kernel_stats()`): its bar, its row, its op's card."""
        if self.empty or not 0 <= int(id) < len(self.stats):
            raise KeyError(f"no kernel row {id!r}")
        i = int(id)
        row = self.stats.iloc[i]
        self.selected_kernel = {"id": i, **{c: _plain(row[c]) for c in self.stats.columns}}
        details, kernels = self._op_of(row)
        self._kernels_of_op = kernels
        self.selected_op = details
        want = {"figure": "kernels", "source": "kernels", "id": i}
        if {k: self.selected.get(k) for k in want} != want:
            self.selected = want
        self.html = self._html()

    @cached_property
    def _ops(self) -> OpIndex:
        """The op profile's ops by program and name, indexed on the first selection."""
        return OpIndex(self.run)

    @cached_property
    def _hlo(self) -> pd.DataFrame:
        """Which HLO op each kernel ran for (`kernel_hlo_ops`), on the first selection."""
        return kernel_hlo_ops(self.run)

    def _op_of(self, row):
        """(selected_op, that op's kernels) for a kernel row: the HLO op it ran for, else
        the op profile's longest op made from its framework op, else what kernel stats know."""
        hlo = self._hlo
        mine = hlo[
            (hlo["kernel_name"] == row["kernel_name"])
            & (hlo["grid_dim"] == row["grid_dim"])
            & (hlo["block_dim"] == row["block_dim"])
        ]
        for program_id, op_name in zip(mine["program_id"], mine["hlo_op"]):
            found = self._ops.op(program_id, op_name)
            if found is None:
                continue
            node, program = found
            kernels = hlo[(hlo["program_id"] == program_id) & (hlo["hlo_op"] == op_name)]
            return op_details(node, program), self._with_ids(kernels, row["op_name"])
        if row["op_name"]:
            nodes = self._ops.framework_op(row["op_name"])
            same = self.stats[self.stats["op_name"] == row["op_name"]]
            kernels = pd.DataFrame(
                {
                    "kernel_name": same["kernel_name"],
                    "grid_dim": same["grid_dim"],
                    "block_dim": same["block_dim"],
                    "launches": same["occurrences"],
                    "duration_us": same["total_duration_us"],
                    "id": same.index,
                }
            )
            if nodes:
                node, program = nodes[0]
                details = op_details(node, program)
                if len(nodes) > 1:
                    details["note"] = (
                        f"{len(nodes)} HLO ops come from this framework op; this is the longest "
                        "(its kernels do not name their HLO op)."
                    )
                return details, kernels
            return {
                "name": row["op_name"],
                "kind": "framework op",
                "program": None,
                "occurrences": int(same["occurrences"].sum()),
                "total_time_ps": float(same["total_duration_us"].sum() * 1e6),
                "kernels": len(same),
                "reason": (self._ops.reason or "the op profile has no HLO op made from this framework op"),
            }, kernels
        return {}, pd.DataFrame()

    def _with_ids(self, kernels, op_name):
        """The kernels of an HLO op, each with the id of its kernel stats row (-1 if none)."""
        s = self.stats
        key = dict(zip(zip(s["kernel_name"], s["grid_dim"], s["block_dim"], s["op_name"]), s.index))
        ids = [
            key.get((k, g, b, op_name), -1)
            for k, g, b in zip(kernels["kernel_name"], kernels["grid_dim"], kernels["block_dim"])
        ]
        return kernels[["kernel_name", "grid_dim", "block_dim", "launches", "duration_us"]].assign(id=ids)

    # --- browser messages ----------------------------------------------------------

    text_requests = ("name_filter", "op_filter")

    # --- drawing -----------------------------------------------------------------

    def _redraw_chart(self):
        shown = self.table
        top = shown.sort_values("total_duration_us", ascending=False, kind="stable").head(CHART_KERNELS)
        if top.empty:
            self.set_figures({})
            return
        self.set_figures({"kernels": self._chart(top)})

    def _chart(self, top):
        n = len(top)
        tc = top["is_kernel_using_tensor_core"].to_numpy(bool)
        data = {
            "id": top.index.to_numpy(np.int32),
            "y": np.arange(n, dtype=np.float64),
            "total": top["total_duration_us"].to_numpy(np.float64),
            "avg": top["avg_duration_us"].to_numpy(np.float64),
            "launches": top["occurrences"].to_numpy(np.float64),
            "name": [shorten(k, 160) for k in top["kernel_name"]],
            "op": [o or "(none)" for o in top["op_name"]],
            "color": np.where(tc, TENSOR_CORE, NO_TENSOR_CORE).tolist(),
            "tc": np.where(tc, "uses TensorCore", "no TensorCore").tolist(),
        }
        labels = [f"{r}. {short_kernel_name(k)}" for r, k in zip(top["rank"], top["kernel_name"])]
        layout = ranked_layout(n, float(top["total_duration_us"].max()), labels)
        return KERNEL_CHART.item(title=f"Total time of the {n} longest kernels (µs)", data=data, **layout)

    def _card_html(self):
        k, op = self.selected_kernel, self.selected_op
        if not k:
            return '<div class="xw-card" data-op-card="">Click a kernel (a row or a bar) to see its op here.</div>'
        name = esc(k["kernel_name"])
        head = (
            f'<div class="xw-kernel" data-testid="selected-kernel"><b>Kernel</b> '
            f'<code class="xw-clamp" title="{name}">{name}</code> '
            f"(grid {esc(k['grid_dim'])}, block {esc(k['block_dim'])}, "
            f"{k['occurrences']:,} launches, {k['total_duration_us']:,.3f} µs)</div>"
        )
        if not op:
            card = (
                '<div class="xw-card" data-op-card="" data-testid="no-op">This kernel names no op (no `tf_op` '
                "or `hlo_op` stat on its launches), so there is no op to show.</div>"
            )
        elif op.get("kind") == "framework op":
            card = (
                f'<div class="xw-card" data-op-card="{esc(op["name"])}"><b data-testid="op-card-name">'
                f'{esc(op["name"])}</b><table style="font-size:12px">'
                f"<tr><td>Kind</td><td>framework op</td></tr>"
                f"<tr><td>Kernels</td><td>{op['kernels']:,} ({op['occurrences']:,} launches)</td></tr>"
                f"<tr><td>Kernel time</td><td>{op['total_time_ps'] / 1e6:,.3f} µs</td></tr></table>"
                f'<div class="xw-note">No HLO op details: {esc(op["reason"])}.</div></div>'
            )
        else:
            card = op_details_html(op, show_graph=self.hosted) + note(op.get("note"), "op-note")
        return head + card + self._kernels_of_op_html()

    def _kernels_of_op_html(self):
        kernels = self._kernels_of_op
        if kernels is None or kernels.empty:
            return ""
        chosen = self.selected_kernel.get("id")
        rows = []
        for name, grid, block, launches, us, rid in kernels[
            ["kernel_name", "grid_dim", "block_dim", "launches", "duration_us", "id"]
        ].itertuples(index=False):
            select = (
                f' data-select="{data_json({"figure": "kernels", "source": "kernels", "id": int(rid)})}"'
                if rid >= 0
                else ""
            )
            cls = ' class="sel"' if rid == chosen else ""
            rows.append(
                f'<tr{select}{cls}><td class="wrap" title="{esc(name)}">{esc(short_kernel_name(name, 40))}'
                f"</td><td>{esc(grid)}<br>{esc(block)}</td><td class=num>{int(launches):,}</td>"
                f"<td class=num>{us:,.3f}</td></tr>"
            )
        return (
            f'<div class="xw-op-kernels"><b>Kernels of this op</b> ({len(kernels)})'
            f'<table class="xw-table" data-testid="op-kernels" data-rows="{len(kernels)}"><thead><tr>'
            "<th>Kernel</th><th>Grid<br>block</th><th>Launches</th><th>µs</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table></div>"
        )

    def _html(self):
        s = self.stats
        table = self.table
        shown = table.head(self.top_n)
        total = float(s["total_duration_us"].sum())
        tc_time = float(s.loc[s["is_kernel_using_tensor_core"], "total_duration_us"].sum())
        eligible = float(s.loc[s["is_op_tensor_core_eligible"], "total_duration_us"].sum())

        def share(x):
            return f"{100 * x / total:.1f} %" if total > 0 else "n/a"

        stats = stat_cards(
            [
                ("kernels", "Kernels (launch configurations)", f"{len(s):,}"),
                ("launches", "Launches", f"{int(s['occurrences'].sum()):,}"),
                ("total_time", "Total kernel time", f"{total / 1e3:,.3f} ms"),
                ("tensor_core_time", "Time in TensorCore kernels", share(tc_time)),
                ("eligible_time", "Time in TensorCore-eligible ops", share(eligible)),
            ]
        )
        controls = (
            f'<label>Kernel name <input type="text" data-request="name_filter" value="{esc(self.name_filter)}" '
            f'placeholder="filter" data-testid="name-filter"></label>'
            f'<label>Op name <input type="text" data-request="op_filter" value="{esc(self.op_filter)}" '
            f'placeholder="filter" data-testid="op-filter"></label>' + self.top_n_control(TOP_N_CHOICES)
        )
        matched = f"{len(table):,} of {len(s):,} kernels match" if len(table) != len(s) else f"{len(s):,} kernels"
        cut = f", the first {len(shown):,} shown" if len(shown) < len(table) else ""
        chart = (
            '<div data-figure="kernels"></div>'
            if len(table)
            else ('<div class="xw-note" data-testid="no-match">No kernel matches the filters.</div>')
        )
        grid = self.table_html(
            shown,
            "kernel-table",
            total_rows=len(table),
            select_in=("kernels", "kernels"),
            selected=self.selected_kernel.get("id"),
        )
        return f"""
<div class="xw-ks">
  <div class="xw-head"><b>GPU kernel stats</b> {controls}</div>
  {stats}{note(s.attrs.get("notes", ""))}
  <div class="xw-top">
    <div class="xw-chart">{chart}</div>
    <div class="xw-side" data-testid="op-card-area">{self._card_html()}</div>
  </div>
  <div class="xw-rows" data-testid="row-count">{esc(matched + cut)}. Click a header to sort, a row to see its op.</div>
  <div class="xw-scroll xw-table-wrap">{grid}</div>
</div>"""


__all__ = ["KernelStatsWidget", "kernel_hlo_ops", "short_kernel_name"]


def _kernel_figure(*, data, **layout):
    from bokeh.models import NumeralTickFormatter

    fig = ranked_bars(**layout)
    bars = selectable_bars(fig, data, "kernels", "total", legend_field="tc")
    fig.xaxis.formatter = NumeralTickFormatter(format="0,0")
    hover_and_tap(
        fig,
        bars,
        [
            ("kernel", "@name"),
            ("op", "@op"),
            ("total", "@total{0,0.000} µs"),
            ("launches", "@launches{0,0}"),
            ("average", "@avg{0,0.000} µs"),
            ("", "@tc"),
        ],
    )
    # Bars are longest first: the bottom right corner is free for the key.
    fig.legend.location = "bottom_right"
    fig.legend.label_text_font_size = "11px"
    fig.legend.background_fill_alpha = 0.8
    return fig


KERNEL_CHART = ChartTemplate(
    "kernel_stats.kernels",
    _kernel_figure,
    {
        **RANKED_PARAMS,
        "data": {
            "id": np.int32,
            "y": np.float64,
            "total": np.float64,
            "avg": np.float64,
            "launches": np.float64,
            "name": str,
            "op": str,
            "color": str,
            "tc": str,
        },
    },
)
