"""InferenceProfileWidget: a server's requests, how long they took and where the time went,
as XProf's inference profile shows them: the average latency and throughput, the requests
at XProf's percentiles with each one's breakdown (host preprocessing, host runtime, data
transfers, device compute, host postprocessing, idle) as a table and stacked bars.
Shows what `Run.inference_profile()` computes."""

from __future__ import annotations

import numpy as np
from bokeh.models import ColumnDataSource, FixedTicker, Range1d
from bokeh.palettes import Category10
from bokeh.plotting import figure

from ..analysis.inference_profile import COLUMNS
from ..run import as_run
from ._bokeh import BokehWidget, hover_and_tap
from ._html import esc, notice, plain_table, stat_cards

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
    """XProf's inference profile for a run."""

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self.profile = self.run.inference_profile()
        if self.profile.requests.empty:
            self.html = notice(f"No inference profile for run {self.run.name}: {self.profile.reason}")
            return
        self.set_figures({"requests": self._figure()})
        self.html = self._html()

    def _figure(self):
        r = self.profile.requests
        used = [c for c in PARTS if r[c].abs().sum() > 0]
        data = {c: r[c].to_numpy(np.float64) for c in used}
        data["x"] = np.arange(len(r), dtype=np.float64)
        data["id"] = np.arange(len(r))
        data["label"] = [p if p == "Average" else f"{p} %" for p in r["percentile"]]
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
        p = self.profile
        cards = stat_cards(
            [
                ("requests", "Requests", f"{len(p.all_requests):,}"),
                ("average_latency_ms", "Average latency", f"{p.average_latency_ms:,.3f} ms"),
                ("throughput", "Throughput", f"{p.throughput:,.1f} requests/s"),
            ]
        )
        head = ["Percentile", "Request", "Latency", *PARTS.values()]
        rows = [
            f"<tr><td>{esc(r['percentile'])}</td><td>{esc(r['request_id'])}</td>"
            + "".join(f"<td class=num>{float(r[c]):,.3f}</td>" for c in COLUMNS[2:])
            + "</tr>"
            for r in p.requests.to_dict("records")
        ]
        return f"""
<div class="xw-inf">
  <div class="xw-head"><b>Inference profile</b> of run {esc(self.run.name)}</div>
  {cards}
  <div data-figure="requests"></div>
  <h4>Requests at XProf's percentiles (ms)</h4>
  {plain_table("inference-requests", head, rows)}
</div>"""


__all__ = ["InferenceProfileWidget"]
