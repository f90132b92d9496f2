"""PodViewerWidget: every step on every core of every host, and which core held the step up.

Shows what `Run.pod_viewer()` computes, as XProf's pod viewer does: the steps (each bar the
step's time, its slowest and least busy cores' busy time), and for the chosen step every core's time stacked by XProf's
categories (device compute, device to device, collectives, host compute, kernel launch,
input, output, compilation, all others), the slowest core marked, its bottleneck named.
A click on a step shows its cores; a click on a core selects it (`selected_core`: the step's
time range on that core, for the trace viewer; in a ProfileWidget its "Open in the trace
viewer" button shows it there).
"""

from __future__ import annotations

import numpy as np
import traitlets
from bokeh.palettes import Category10

from ..analysis.pod_viewer import slowest_cores
from ..run import as_run
from ._bokeh import BokehWidget, hover_and_tap
from ._html import data_json, esc, notice, plain_table, stat_cards

#: Cores drawn side by side; a pod of more shows this many of the step, the longest first.
MAX_CORES_SHOWN = 256


class PodViewerWidget(BokehWidget):
    """XProf's pod viewer for a run (the slowest core of a step: the one that worked longest
    in it, `analysis.pod_viewer.slowest_cores`). `step` is the step shown (XProf's step number);
    `selected_core` the clicked core ({step_num, core_id, host, begin_ps, end_ps,
    total_duration_us, bottleneck}; {} for none)."""

    step = traitlets.Int(0, help="The step whose cores are shown (its step number).").tag(sync=True)
    selected_core = traitlets.Dict(help="The clicked core's step and time range (ps); {} for none.").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self.pod = self.run.pod_viewer()
        self.categories = list(self.pod.attrs.get("categories", []))
        if self.pod.empty:
            self.html = notice(f"No pod viewer for run {self.run.name}: {self.pod.attrs.get('reason', '')}")
            return
        self.steps = self._step_table()
        longest = self.steps.sort_values("total_duration_us", ascending=False, kind="stable")
        self.step = int(longest["step_num"].iloc[0])  # the longest step first: what to look at
        self._draw()

    def _step_table(self):
        """One row a step: its slowest core (`slowest_cores`), the step's time, the spread."""
        return slowest_cores(self.pod)

    @traitlets.observe("step")
    def _step_changed(self, change):
        if hasattr(self, "steps"):
            self.selected_core = {}
            self._draw()

    def _cores(self):
        rows = self.pod[self.pod["step_num"] == self.step]
        if len(rows) > MAX_CORES_SHOWN:
            rows = rows.nlargest(MAX_CORES_SHOWN, "total_duration_us").sort_values("core_id")
        return rows.reset_index(drop=True)

    def _draw(self):
        self.set_figures({"steps": self._steps_figure(), "cores": self._cores_figure()})
        self.html = self._html()

    def _steps_figure(self):
        from bokeh.models import ColumnDataSource, Range1d
        from bokeh.plotting import figure

        s = self.steps
        n = len(s)
        src = ColumnDataSource(
            {
                "x": np.arange(n, dtype=np.float64),
                "id": np.arange(n),
                "ms": s["total_duration_us"].to_numpy(np.float64) / 1e3,
                "busy": s["busy_us"].to_numpy(np.float64) / 1e3,
                "least": s["least_busy_us"].to_numpy(np.float64) / 1e3,
                "step": s["step_num"].astype(str).tolist(),
                "core": [f"{h}:{c}" for h, c in zip(s["host"], s["core_id"])],
                "bottleneck": s["bottleneck"].astype(str).tolist(),
                "color": ["#e15759" if v == self.step else "#4e79a7" for v in s["step_num"]],
            },
            name="steps",
        )
        fig = figure(
            height=200,
            sizing_mode="stretch_width",
            title="Steps (ms): the step time, and the busy time of its slowest and least busy cores; "
            "click a step to see its cores",
            x_range=Range1d(-0.6, max(n, 3) - 0.4),
            tools="xpan,xwheel_zoom,reset",
            x_axis_label="step",
            y_axis_label="ms",
        )
        bars = fig.vbar(x="x", top="ms", width=0.8, source=src, color="color", nonselection_fill_alpha=0.5)
        fig.scatter(x="x", y="busy", source=src, marker="dash", size=12, color="#222222", legend_label="slowest core")
        fig.scatter(
            x="x", y="least", source=src, marker="dash", size=12, color="#f28e2b", legend_label="least busy core"
        )
        hover_and_tap(
            fig,
            bars,
            [
                ("step", "@step"),
                ("step time", "@ms{0.000} ms"),
                ("slowest core", "@core"),
                ("its busy time", "@busy{0.000} ms"),
                ("least busy core's", "@least{0.000} ms"),
                ("bottleneck", "@bottleneck"),
            ],
        )
        fig.xaxis.major_label_overrides = dict(enumerate(src.data["step"]))
        fig.xgrid.visible = False
        fig.toolbar.logo = None
        fig.legend.location = "top_right"
        return fig

    def _cores_figure(self):
        from bokeh.models import ColumnDataSource, FixedTicker, Range1d
        from bokeh.plotting import figure

        rows = self._cores()
        labels = [f"{h}:{c}" for h, c in zip(rows["host"], rows["core_id"])]
        used = [c for c in self.categories if rows[c].abs().sum() > 0] or self.categories[:1]
        data = {c: rows[c].to_numpy(np.float64) / 1e3 for c in used}
        # Numeric x with labels, as the other bar charts: the bundled BokehJS has no
        # categorical (FactorRange) axis.
        data["x"] = np.arange(len(rows), dtype=np.float64)
        data["core"] = labels
        data["id"] = np.arange(len(rows))
        data["total"] = rows["total_duration_us"].to_numpy(np.float64) / 1e3
        data["bottleneck"] = rows["bottleneck"].astype(str).tolist()
        src = ColumnDataSource(data, name="cores")
        fig = figure(
            height=320,
            sizing_mode="stretch_width",
            title=f"Step {self.step}: each core's time by XProf's categories (ms)",
            x_range=Range1d(-0.6, max(len(labels), 3) - 0.4),
            tools="xpan,xwheel_zoom,reset,save",
            y_axis_label="ms",
        )
        palette = Category10[10]
        colors = [palette[self.categories.index(c) % 10] for c in used]
        bars = fig.vbar_stack(
            used, x="x", width=0.8, source=src, color=colors, legend_label=used, nonselection_fill_alpha=0.35
        )
        busy = data["total"] - rows["All others"].to_numpy(np.float64) / 1e3
        slow = int(np.argmax(busy)) if len(rows) else 0  # the core the others waited for
        fig.scatter(
            x=[float(slow)],
            y=[data["total"][slow] * 1.03],
            marker="inverted_triangle",
            size=14,
            color="#e15759",
            legend_label="slowest core",
        )
        hover_and_tap(
            fig,
            bars,
            [("core", "@core"), ("step time", "@total{0.000} ms"), ("bottleneck", "@bottleneck")]
            + [(c, f"@{{{c}}}{{0.000}} ms") for c in used],
        )
        fig.xaxis.ticker = FixedTicker(ticks=list(range(len(labels))))
        fig.xaxis.major_label_overrides = dict(enumerate(labels))
        fig.xaxis.major_label_orientation = 0.8 if len(labels) > 8 else 0
        fig.xgrid.visible = False
        fig.legend.orientation = "horizontal"
        fig.add_layout(fig.legend[0], "above")
        fig.toolbar.logo = None
        return fig

    def on_tap(self, sel):
        source, at = sel.get("source"), sel.get("id")
        rows = self._cores() if source == "cores" else self.steps
        at = int(at) if isinstance(at, (int, float)) and 0 <= at < len(rows) else None  # (a page's id)
        if source == "steps" and at is not None:
            self.step = int(self.steps["step_num"].iloc[at])
        elif source == "cores" and at is not None:
            r = rows.iloc[at]
            self.selected_core = {
                "step_num": int(r.step_num),
                "core_id": int(r.core_id),
                "host": str(r.host),
                "begin_ps": int(r.begin_ps),
                "end_ps": int(r.end_ps),
                "total_duration_us": float(r.total_duration_us),
                "bottleneck": str(r.bottleneck),
            }
            self.html = self._html()
        elif not sel:
            self.selected_core = {}
            self.html = self._html()

    def _html(self):
        s = self.steps
        rows = self._cores()
        slow = rows.loc[(rows["total_duration_us"] - rows["All others"]).idxmax()] if len(rows) else None
        cards = stat_cards(
            [
                ("steps", "Steps", f"{len(s)}"),
                ("cores", "Cores", f"{self.pod['core_id'].nunique()} on {self.pod['host'].nunique()} host(s)"),
                ("step", "Step shown", f"{self.step}"),
                (
                    "slowest_core",
                    "Slowest core of the step",
                    f"{slow.host}:{slow.core_id}, {slow.total_duration_us / 1e3:,.3f} ms" if slow is not None else "-",
                ),
                ("bottleneck", "Its bottleneck", str(slow.bottleneck) if slow is not None else "-"),
            ]
        )
        head = ["Host", "Core", "Step time (ms)", "Bottleneck", *self.categories]
        body = []
        for d in rows.to_dict("records"):
            cells = "".join(f"<td class=num>{float(d[c]) / 1e3:,.3f}</td>" for c in self.categories)
            body.append(
                f'<tr data-core="{int(d["core_id"])}"><td>{esc(d["host"])}</td><td class=num>{int(d["core_id"])}</td>'
                f"<td class=num>{float(d['total_duration_us']) / 1e3:,.3f}</td><td>{esc(d['bottleneck'])}</td>"
                f"{cells}</tr>"
            )
        chosen = ""
        if self.selected_core:
            c = self.selected_core
            params = data_json({"host": c["host"], "begin_ps": c["begin_ps"], "end_ps": c["end_ps"]})
            # Inside a ProfileWidget the button opens the trace viewer there; on its own the
            # widget's `selected_core` is what a TraceViewerWidget follows (`trace.link(pod)`).
            button = (
                f'<button data-request="show-trace" data-params="{params}" data-testid="show-in-trace">'
                "Open in the trace viewer</button>"
                if self.hosted
                else "(a linked TraceViewerWidget shows it: <code>TraceViewerWidget(run).link(pod)</code>)"
            )
            chosen = (
                f'<div data-testid="selected-core">Selected core {esc(c["host"])}:{c["core_id"]}, step '
                f"{c['step_num']}: {c['total_duration_us'] / 1e3:,.3f} ms, bottleneck {esc(c['bottleneck'])}. "
                f"{button}</div>"
            )
        return f"""
<div class="xw-pod">
  <div class="xw-head"><b>Pod viewer</b> ({esc(self.pod.attrs.get("device_type", ""))})</div>
  {cards}
  <div data-figure="steps"></div>
  <div data-figure="cores"></div>{chosen}
  <h4>Cores of step {self.step}</h4>
  {plain_table("pod-cores", head, body)}
</div>"""


__all__ = ["PodViewerWidget"]
