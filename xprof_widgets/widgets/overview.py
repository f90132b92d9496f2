"""OverviewWidget: the first page of a profile, as XProf's overview page.

Shows what `Run.overview()` computes: the summary (average step time and its
spread, waiting for input, device duty cycle, op placement, op time in eager
execution, precision), the recommendation, the step-time graph (each step
stacked by XProf's breakdown), the top operations by self time, and the run
environment.
Clicking a step selects it: `selected_step` says which time range it covers,
for the other widgets (the trace viewer).
"""

from __future__ import annotations

import numpy as np
import traitlets

from ..format import ms
from ..run import as_run
from ._bokeh import BokehWidget
from ._html import esc, note, plain_table, stat_cards
from .input_pipeline import step_range, steps_item

LATENCY_ROWS = 20  # modules shown; all are in OverviewResult.module_latency


_NO_DEVICE = (
    "This run has no accelerator (GPU or TPU) planes: the program ran on the host CPU. XProf's "
    "overview counts device cores and device ops only, so it shows 0 cores and no device ops too."
)


class OverviewWidget(BokehWidget):
    """XProf's overview page for a run. `selected_step` holds the clicked step
    ({step_number, step_name, begin_ps, end_ps, step_time_ms}; {} for none)."""

    selected_step = traitlets.Dict(help="The clicked step and its time range (ps); {} for none.").tag(sync=True)

    def __init__(self, run, host=None, **kwargs):
        self.run = as_run(run)
        self.host = host
        super().__init__(**kwargs)
        self.result = self.run.overview(host=host)
        if not self.result.steps.empty:
            self.set_figures({"steps": steps_item(self.result.steps, "Step-time graph (ms), by XProf's breakdown")})
        self.html = self._html()

    def on_tap(self, sel):
        ok = sel.get("source") == "steps" and sel.get("id") is not None
        self.selected_step = step_range(self.result.steps, sel["id"]) if ok else {}
        self.html = self._html()

    def _suggestions_html(self):
        """XProf's smart suggestions that fire for the run (all hosts), each as XProf words it
        (its HTML is ours: fixed text, numbers and escaped host names)."""
        if self.host is not None:
            return ""
        found = self.run.smart_suggestions()
        items = "".join(
            f'<div class="xw-suggestion" data-rule="{esc(r.rule_name)}">{r.suggestion_text}</div>'
            for r in found.itertuples(index=False)
        )
        return (
            f'<div class="xw-verdict" data-testid="smart-suggestions"><b>Smart suggestions</b>{items}</div>'
            if items
            else ""
        )

    def _summary_html(self):
        """XProf's performance summary: the step time and each component of its breakdown,
        average and standard deviation over the steps (ms)."""
        r = self.result
        parts = r.step_time_components()
        if parts.empty:
            return ""
        sigma = lambda v: "n/a with one step" if np.isnan(v) else f"{v:,.1f}"  # noqa: E731
        rows = [
            f"<tr><td><b>Step time</b></td><td class=num>{r.avg_step_time_ms:,.1f}</td>"
            f"<td class=num>{r.std_step_time_ms:,.1f}</td></tr>"
        ]
        rows += [
            f'<tr data-component="{esc(name)}"><td>{esc(row.label)}</td><td class=num>{row.avg_ms:,.1f}</td>'
            f"<td class=num>{sigma(row.sdv_ms)}</td></tr>"
            for name, row in parts.iterrows()
        ]
        return "<h4>Performance summary (ms per step)</h4>" + plain_table(
            "step-summary", ["", "Average", "Standard deviation"], rows
        )

    def _html(self):
        r = self.result
        stats = []
        if not r.steps.empty:
            stats += [
                ("avg_step_time_ms", "Average step time", f"{r.avg_step_time_ms:,.3f} ms"),
                ("std_step_time_ms", "Standard deviation", f"{r.std_step_time_ms:,.3f} ms"),
                ("input_percent", "Waiting for input", f"{r.input_percent:.1f} %"),
            ]
        if r.device_duty_cycle_percent is not None:
            stats.append(("device_duty_cycle_percent", "Device duty cycle", f"{r.device_duty_cycle_percent:.1f} %"))
        if r.mxu_utilization_percent is not None:  # TPU: the runtime's own measures
            stats.append(
                (
                    "mxu_utilization_percent",
                    "MXU / HBM utilization",
                    f"{r.mxu_utilization_percent:.1f} % / {r.hbm_utilization_percent:.1f} %",
                )
            )
        if r.op_placement:
            stats.append(
                (
                    "op_placement",
                    "Op placement (host / device)",
                    f"{r.op_placement.get('host_percent', 0):.1f} % / {r.op_placement.get('device_percent', 0):.1f} %",
                )
            )
            stats.append(
                (
                    "eager_percent",
                    "Op time in eager execution (host / device)",
                    f"{r.host_op_time_eager_percent:.1f} % / {r.device_op_time_eager_percent:.1f} %",
                )
            )
        if r.precision:
            stats.append(
                (
                    "precision",
                    "Device compute 16 / 32-bit",
                    f"{r.precision.get('16bit_percent', 0):.1f} % / {r.precision.get('32bit_percent', 0):.1f} %",
                )
            )
        env = stat_cards(
            [
                ("host_count", "Hosts", f"{r.host_count}"),
                ("device_type", "Device type", r.device_type),
                ("device_core_count", "Device cores", f"{r.device_core_count}"),
                ("is_training", "Task", "Training" if r.is_training else "Inference"),
            ]
        )
        no_steps = f'<div class="xw-note" data-testid="no-steps">{esc(r.reason)}</div>' if r.reason else ""
        step = (
            ""
            if not self.selected_step
            else (
                f'<div data-testid="selected-step">Selected {esc(self.selected_step["step_name"])}: '
                f"{self.selected_step['step_time_ms']:,.3f} ms</div>"
            )
        )
        rows = [
            f"<tr><td>{esc(op.operation)}</td><td>{esc(op.category)}</td><td class=num>{ms(op.self_time_ps)}</td>"
            f"<td class=num>{100 * op.self_time_fraction:.1f} %</td>"
            f"<td class=num>{100 * op.cumulative_time_fraction:.1f} %</td>"
            f"<td class=num>{op.occurrences:,}</td><td class=num>{op.flop_rate_gflops:,.2f}</td></tr>"
            for op in r.top_ops.itertuples(index=False)
        ]
        headers = ["Operation", "Category", "Self time", "Self %", "Cumulative %", "Occurrences", "GFLOP/s"]
        top = (
            plain_table("top-ops", headers, rows)
            if rows
            else f'<div class="xw-note" data-testid="no-top-ops">{esc(self._no_top_ops())}</div>'
        )
        lat_rows = [
            f"<tr><td>{esc(m.module)}</td><td class=num>{m.executions:,}</td><td class=num>{m.mean_ms:,.3f}</td>"
            f"<td class=num>{m.p50_ms:,.3f}</td><td class=num>{m.p90_ms:,.3f}</td><td class=num>{m.p99_ms:,.3f}</td>"
            f"<td class=num>{m.max_ms:,.3f}</td></tr>"
            for m in r.module_latency.head(LATENCY_ROWS).itertuples(index=False)
        ]
        headers = ["Module", "Executions", "Mean", "p50", "p90", "p99", "Max"]
        latency = (
            "<h4>XLA module latency (ms, per execution on a device core)</h4>"
            + plain_table("module-latency", headers, lat_rows, len(r.module_latency))
            if lat_rows
            else ""
        )
        inf = r.inference_latency
        inference = (
            "<h4>Inference session latency breakdown (ms)</h4>"
            + plain_table(
                "inference-latency",
                ["Percentile", "Host", "Device", "Host-device communication", "Total latency"],
                [
                    f"<tr><td>{esc(x.percentile)}</td><td class=num>{x.host_ms:,.3f}</td>"
                    f"<td class=num>{x.device_ms:,.3f}</td><td class=num>{x.communication_ms:,.3f}</td>"
                    f"<td class=num>{x.total_ms:,.3f}</td></tr>"
                    for x in inf.itertuples(index=False)
                ],
            )
            if len(inf)
            else ""
        )
        return f"""
<div class="xw-ov">
  <div class="xw-head"><b>Overview of run {esc(self.run.name)}</b></div>
  {stat_cards(stats) if stats else ""}
  {self._summary_html()}
  <div class="xw-verdict" data-testid="recommendation">{esc(r.recommendation)}</div>{self._suggestions_html()}
  {no_steps}
  <div data-figure="steps"></div>{step}
  {inference}
  {latency if r.steps.empty else ""}
  <h4>Top operations by self time</h4>
  {note(r.notes)}{top}
  {latency if not r.steps.empty else ""}
  <h4>Run environment</h4>
  {env}{self._no_device_note()}
</div>"""

    def _no_device_note(self):
        """Why a run on the host CPU shows 0 device cores (XProf shows the same)."""
        if self.result.device_core_count:
            return ""
        return f'<div class="xw-note" data-testid="no-device">{esc(_NO_DEVICE)} {esc(self._op_profile_pointer())}</div>'

    def _no_top_ops(self):
        if self.result.device_core_count:
            return "No device operations in this profile."
        return (
            "No device operations: XProf's top operations are ops that ran on a device, and this run "
            "has no device (see the run environment below)."
        )

    def _op_profile_pointer(self):
        if "op_profile" in self.run.tools:
            return (
                "The ops XLA ran on the host CPU, with their time and FLOPs, are in the op profile: "
                "xw.OpProfileWidget(run), or the op profile tool of ProfileWidget."
            )
        return ""


__all__ = ["OverviewWidget"]
