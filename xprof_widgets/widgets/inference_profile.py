"""InferenceProfileWidget: a server's requests, how long they took and where the time went,
as XProf's inference profile shows them: the average latency and throughput, the requests
at XProf's percentiles with each one's breakdown (host preprocessing, host runtime, data
transfers, device compute, host postprocessing, idle) as a table and stacked bars; where
the server batches requests, each request's size and wait for its batch, a row per padded
batch size, and the batches (latency, padding, efficiency, delay, device time, programs).
One model at a time (`model`, a menu where the run has several). Shows what
`Run.inference_profile()` computes."""

from __future__ import annotations

import numpy as np
import traitlets
from bokeh.palettes import Category10

from ..analysis.inference_profile import TENSOR_PERCENTILES
from ..run import as_run
from ._bokeh import BokehWidget, hover_and_tap, one_of
from ._html import esc, notice, options, plain_table, stat_cards

PARTS = {
    "host_preprocessing_ms": "Host preprocess",
    "host_runtime_ms": "Host runtime",
    "data_transfer_h2d_ms": "Data transfer H2D",
    "data_transfer_d2h_ms": "Data transfer D2H",
    "device_compute_ms": "Device compute",
    "host_postprocess_ms": "Host postprocess",
    "idle_ms": "Idle time",
}


class InferenceProfileWidget(BokehWidget):
    """XProf's inference profile for a run; `model` is the model shown ("" for the first)."""

    model = traitlets.Unicode("", help="The model whose requests are shown.").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self.profile = self.run.inference_profile()
        if self.profile.requests.empty:
            self.html = notice(f"No inference profile for run {self.run.name}: {self.profile.reason}")
            return
        if not self.model:
            self.model = self.profile.models[0]
        self._draw()

    @traitlets.validate("model")
    def _check_model(self, proposal):
        value = proposal["value"]
        return one_of(value, self.profile.models, "model") if value and hasattr(self, "profile") else value

    @traitlets.observe("model")
    def _redraw(self, change):
        if change["old"] and hasattr(self, "profile") and not self.profile.requests.empty:
            self._draw()

    def on_request(self, kind, params):
        if kind == "model":
            self.model = str(params.get("value", ""))
            return {"ok": True}, None
        raise ValueError(f"unknown request {kind!r}")

    @property
    def shown(self):
        """The ModelProfile of the model shown."""
        return self.profile.per_model[self.model]

    def _draw(self):
        self.set_figures({"requests": self._figure()})
        self.html = self._html()

    def _figure(self):
        from bokeh.models import ColumnDataSource, FixedTicker, Range1d
        from bokeh.plotting import figure

        r = self.shown.requests
        used = [c for c in PARTS if r[c].abs().sum() > 0]
        data = {c: r[c].to_numpy(np.float64) for c in used}
        data["x"] = np.arange(len(r), dtype=np.float64)
        data["id"] = np.arange(len(r))
        data["label"] = [f"{p} %" if p[:1].isdigit() else p for p in r["percentile"]]
        data["request"] = r["request_id"].astype(str).tolist()
        data["latency"] = r["latency_ms"].to_numpy(np.float64)
        fig = figure(
            height=300,
            sizing_mode="stretch_width",
            title="Request latency at XProf's percentiles, by where it went (ms)",
            x_range=Range1d(-0.6, max(len(r), 3) - 0.4),
            tools="save",
            y_axis_label="ms",
        )
        palette = Category10[10]
        bars = fig.vbar_stack(
            used,
            x="x",
            width=0.7,
            source=ColumnDataSource(data, name="requests"),
            color=[palette[list(PARTS).index(c)] for c in used],
            legend_label=[PARTS[c] for c in used],
        )
        hover_and_tap(
            fig,
            bars,
            [("percentile", "@label"), ("request", "@request"), ("latency", "@latency{0.000} ms")]
            + [(PARTS[c], f"@{c}{{0.000}} ms") for c in used],
            tap=False,
        )
        fig.xaxis.ticker = FixedTicker(ticks=list(range(len(r))))
        fig.xaxis.major_label_overrides = dict(enumerate(data["label"]))
        fig.xgrid.visible = False
        fig.legend.orientation = "horizontal"
        fig.add_layout(fig.legend[0], "above")
        fig.toolbar.logo = None
        return fig

    def _html(self):
        p, m = self.profile, self.shown
        batches = p.all_batches[p.all_batches["model_id"] == self.model] if self.model != "ALL" else p.all_batches
        requests = p.all_requests if self.model == "ALL" else p.all_requests[p.all_requests["model_id"] == self.model]
        stats = [
            ("requests", "Requests", f"{len(requests):,}"),
            ("average_latency_ms", "Average latency", f"{m.average_latency_ms:,.3f} ms"),
            ("throughput", "Throughput", f"{m.throughput:,.1f} requests/s"),
        ]
        if p.has_batching:
            stats += [
                ("batches", "Batches", f"{len(batches):,}"),
                ("batch_average_latency_ms", "Batch latency", f"{m.batch_average_latency_ms:,.3f} ms"),
                ("batch_throughput", "Batch throughput", f"{m.batch_throughput:,.1f} batches/s"),
            ]
        batching = ["Request size", "Wait for batch (ms)", "Throughput"] if p.has_batching else []
        head = ["Percentile", "Request", "Latency", *batching, *PARTS.values()]
        rows = []
        for r in m.requests.to_dict("records"):
            cells = [f"<td>{esc(r['percentile'])}</td><td>{esc(r['request_id'])}</td>"]
            cells.append(f"<td class=num>{float(r['latency_ms']):,.3f}</td>")
            if p.has_batching:
                cells.append(f"<td class=num>{float(r['request_size']):,.0f}</td>")
                cells.append(f"<td class=num>{float(r['batching_delay_ms']):,.3f}</td><td>{esc(r['throughput'])}</td>")
            cells.extend(f"<td class=num>{float(r[c]):,.3f}</td>" for c in PARTS)
            rows.append("<tr>" + "".join(cells) + "</tr>")
        batch_table = ""
        if m.batches is not None:
            bhead = ["Percentile", "Batch", "Latency (ms)", "Padding", "Padded size", "Efficiency", "Delay (ms)"]
            bhead += ["Throughput", "Device compute (ms)", "Programs"]
            brows = [
                f"<tr><td>{esc(b['percentile'])}</td><td>{esc(b['batch_id'])}</td>"
                f"<td class=num>{b['latency_ms']:,.3f}</td><td class=num>{b['padding_amount']:,.0f}</td>"
                f"<td class=num>{b['batch_size_after_padding']:,.0f}</td>"
                f"<td class=num>{b['batching_efficiency']:.3f}</td>"
                f"<td class=num>{b['batching_delay_ms']:,.3f}</td><td>{esc(b['throughput'])}</td>"
                f"<td class=num>{b['device_compute_ms']:,.3f}</td><td>{esc(b['program_ids'])}</td></tr>"
                for b in m.batches.to_dict("records")
            ]
            batch_table = f"<h4>Batches at XProf's percentiles</h4>{plain_table('inference-batches', bhead, brows)}"
        params = ""
        if m.batching_params:  # TF Serving's batching settings of this model (XProf's labels)
            params = "<h4>Batching parameters</h4>" + plain_table(
                "batching-params",
                ["Parameter", "Value"],
                [
                    f'<tr data-param="{esc(k)}"><td>'
                    f"{esc(label)}</td><td class=num>{esc(m.batching_params[k])}</td></tr>"
                    for k, label in _PARAM_LABELS.items()
                ],
            )
        patterns = ""
        if m.tensor_patterns is not None:
            thead = ["Tensor pattern", "Count", *(f"p{p:g} (ms)" for p in TENSOR_PERCENTILES)]
            trows = [
                "<tr><td>"
                + "<br>".join(esc(part) for part in str(t["tensor_pattern"]).split("<br>"))
                + f"</td><td class=num>{int(t['count']):,}</td>"
                + "".join(f"<td class=num>{t[f'p{p:g}_ms']:,.6f}</td>" for p in TENSOR_PERCENTILES)
                + "</tr>"
                for t in m.tensor_patterns.to_dict("records")
            ]
            patterns = "<h4>Tensor transfer patterns (the TPU runtime's Linearize / Delinearize)</h4>" + (
                plain_table("tensor-patterns", thead, trows) if trows else "<p>None for this model.</p>"
            )
        choices = options(p.models, self.model)
        menu = (
            f'<label>Model <select data-request="model" data-testid="model">{choices}</select></label>'
            if len(p.models) > 1
            else f"model {esc(self.model)}"
        )
        return f"""
<div class="xw-inf">
  <div class="xw-head"><b>Inference profile</b> of run {esc(self.run.name)}, {menu}</div>
  {stat_cards(stats)}
  <div data-figure="requests"></div>
  <h4>Requests at XProf's percentiles (ms)</h4>
  {plain_table("inference-requests", head, rows)}
  {params}
  {batch_table}
  {patterns}
</div>"""


#: XProf's labels of TF Serving's batching parameters.
_PARAM_LABELS = {
    "num_batch_threads": "Number of batching threads",
    "batch_timeout_micros": "Batch timeout in microseconds",
    "max_batch_size": "Maximum size of a batch",
    "max_enqueued_batches": "Maximum number of enqueued batches",
    "allowed_batch_sizes": "Sizes that are allowed to form a batch",
}

__all__ = ["InferenceProfileWidget"]
