"""UtilizationViewerWidget and KernelUtilizationWidget: how busy each unit of a TPU chip was,
from the hardware counters libtpu sampled, as XProf's utilization viewer and kernel
utilization tools compute it (`Run.utilization_viewer()`, `Run.kernel_utilization()`).

The utilization viewer shows one sample (a counter line of a device) at a time: every
metric with its achieved count, the peak and a bar of the share, grouped by node
(TensorCore, SparseCores). Kernel utilization shows a row per kernel (counter line): its
duration, the matrix units' utilization and its cycles by precision; a click on a kernel
shows its other units' utilization as bars.
"""

from __future__ import annotations

import traitlets

from ..run import as_run
from ._bokeh import BokehWidget
from ._html import data_json, esc, notice, plain_table, stat_cards

#: Samples offered in the viewer's menu at most (all are in Run.utilization_viewer()).
MAX_SAMPLES = 500


def _bar(percent: float) -> str:
    """A bar of `percent` (clipped to 0-100 for its width; the number says the value)."""
    width = max(0.0, min(100.0, percent))
    return f'<div class="xw-util-bar" style="width:{width:.1f}%"></div>'


class UtilizationViewerWidget(BokehWidget):
    """XProf's utilization viewer for a run. `sample` is the sample shown: "host/device/line
    id" ("" for the first)."""

    sample = traitlets.Unicode("", help="The sample shown: 'host/device/sample'.").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self.table = self.run.utilization_viewer()
        keys = self.table[["host", "device", "sample"]].drop_duplicates()
        self.samples = [f"{h}/{d}/{s}" for h, d, s in keys.itertuples(index=False)]
        if self.samples and self.sample not in self.samples:
            self.sample = self.samples[0]
        self.html = self._html()

    @traitlets.validate("sample")
    def _check_sample(self, proposal):
        value = proposal["value"]
        if value and value not in getattr(self, "samples", [value]):
            raise traitlets.TraitError(f"no sample {value!r}; samples: {self.samples[:20]}")
        return value

    @traitlets.observe("sample")
    def _redraw(self, change):
        if hasattr(self, "table"):
            self.html = self._html()

    def on_request(self, kind, params):
        if kind == "sample":
            self.sample = str(params.get("value", ""))
            return {"ok": True}, None
        raise ValueError(f"unknown request {kind!r}")

    def _html(self):
        t = self.table
        if t.empty:
            return notice(f"No utilization viewer for run {self.run.name}: {t.attrs.get('reason', '')}")
        host, device, sample = self.sample.rsplit("/", 2)
        rows = t[(t["host"] == host) & (t["device"].astype(str) == device) & (t["sample"].astype(str) == sample)]
        body = []
        for r in rows.itertuples(index=False):
            share = 100.0 * r.achieved / r.peak if r.peak else 0.0
            node = f"SparseCore {r.node}" if _sparse(r.name) else "TensorCore"
            body.append(
                f"<tr><td>{esc(node)}</td><td>{esc(r.name)}</td><td class=num>{r.achieved:,.0f}</td>"
                f"<td class=num>{r.peak:,.0f}</td><td>{esc(r.unit)}</td><td class=num>{share:.2f}</td>"
                f'<td class="xw-util-cell">{_bar(share)}</td></tr>'
            )
        menu = "".join(
            f'<option value="{esc(k)}"{" selected" if k == self.sample else ""}>{esc(_sample_label(k))}</option>'
            for k in self.samples[:MAX_SAMPLES]
        )
        cards = stat_cards(
            [
                ("samples", "Samples", f"{len(self.samples):,}"),
                ("devices", "Devices", f"{t[['host', 'device']].drop_duplicates().shape[0]}"),
                ("metrics", "Metrics in this sample", f"{len(rows)}"),
            ]
        )
        head = ["Node", "Metric", "Achieved", "Peak", "Unit", "% of peak", ""]
        return f"""
<div class="xw-pc xw-util">
  <div class="xw-head"><b>Utilization viewer</b> of run {esc(self.run.name)}</div>
  {cards}
  <label>Sample <select data-request="sample" data-testid="sample">{menu}</select></label>
  {plain_table("utilization", head, body)}
</div>"""


def _sparse(name: str) -> bool:
    return name.startswith(("TEC ", "SC ", "SCS"))


def _sample_label(key: str) -> str:
    host, device, sample = key.rsplit("/", 2)
    return f"{host}: TPU {device}, sample {sample}"


class KernelUtilizationWidget(BokehWidget):
    """XProf's kernel utilization for a run. `kernel` filters kernels by name (a
    substring); `kernel_row` is the row (of `Run.kernel_utilization().kernels`) whose other
    metrics are shown (-1: the first)."""

    kernel = traitlets.Unicode("", help="Kernel name filter (substring; '' for all).").tag(sync=True)
    kernel_row = traitlets.Int(-1, help="The kernel row whose metrics are shown.").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self.result = self.run.kernel_utilization()
        self.html = self._html()

    @traitlets.observe("kernel", "kernel_row")
    def _redraw(self, change):
        if hasattr(self, "result"):
            self.html = self._html()

    def on_request(self, kind, params):
        if kind == "kernel":
            self.kernel = str(params.get("value", ""))[:200]
        elif kind == "select":
            self.kernel_row = int(params.get("row", -1))
        else:
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    def _html(self):
        k, m = self.result.kernels, self.result.metrics
        if k.empty:
            return notice(f"No kernel utilization for run {self.run.name}: {self.result.reason}")
        shown = k[k["kernel"].str.contains(self.kernel, regex=False)] if self.kernel else k
        selected = self.kernel_row if self.kernel_row in shown.index else (int(shown.index[0]) if len(shown) else -1)
        rows = []
        for i, r in shown.iterrows():
            mark = " class=sel" if i == selected else ""
            rows.append(
                f'<tr data-request="select" data-params="{data_json({"row": int(i)})}"{mark}>'
                f"<td>{esc(r.host)}</td><td class=num>{r.device_id}</td>"
                f'<td class="wrap" title="{esc(r.kernel)}"><code>{esc(_short(r.kernel))}</code></td>'
                f"<td class=num>{r.duration_us:,.2f}</td>"
                f"<td class=num>{r.mxu_utilization:.2f}{' ⚠' if r.mxu_is_anomaly else ''}</td>"
                f'<td class="xw-util-cell">{_bar(r.mxu_utilization)}</td>'
                f"<td class=num>{r.bf16_percent:.2f}</td><td class=num>{r.int8_percent:.2f}</td>"
                f"<td class=num>{r.int4_percent:.2f}</td><td class=num>{r.fp8_percent:.2f}</td></tr>"
            )
        head = [
            "Host",
            "Device",
            "Kernel",
            "Duration (µs)",
            "MXU utilization %",
            "",
            "BF16 %",
            "INT8 %",
            "INT4 %",
            "FP8 %",
        ]
        detail = ""
        if selected >= 0:
            mine = m[m["kernel_row"] == selected]
            bars = [
                f"<tr><td>{esc(r.metric)}</td><td class=num>{r.percent:.2f}</td>"
                f'<td class="xw-util-cell">{_bar(r.percent)}</td></tr>'
                for r in mine.itertuples(index=False)
            ]
            name = k.at[selected, "kernel"]
            detail = (
                f"<h4>Units of <code>{esc(_short(name))}</code> (TPU {k.at[selected, 'device_id']})</h4>"
                + plain_table("kernel-metrics", ["Metric", "% of peak", ""], bars)
            )
        cards = stat_cards(
            [
                ("kernels", "Kernels", f"{len(k):,}"),
                ("devices", "Devices", f"{len(self.result.devices)}"),
                ("mxu", "Best MXU utilization", f"{k['mxu_utilization'].max():.2f} %"),
            ]
        )
        return f"""
<div class="xw-pc xw-util">
  <div class="xw-head"><b>Kernel utilization</b> of run {esc(self.run.name)}</div>
  {cards}
  <label>Kernel <input type="text" data-request="kernel" data-testid="kernel-filter"
    value="{esc(self.kernel)}" size="24"></label>
  {plain_table("kernels", head, rows)}
  {detail}
</div>"""


def _short(name: str, limit: int = 160) -> str:
    """A kernel's name to show: an HLO instruction's text (XProf names the counters of the
    first op so) by its name, the whole text in the cell's tooltip; else cut to `limit`."""
    if name.startswith("%") and " = " in name:
        return name.split(" = ", 1)[0]
    return name if len(name) <= limit else name[: limit - 1] + "…"


__all__ = ["KernelUtilizationWidget", "UtilizationViewerWidget"]
