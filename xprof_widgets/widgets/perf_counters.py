"""PerfCountersWidget: the hardware counters a TPU profile sampled, as XProf's performance
counters tool shows them: every sample (host, chip, line, counter, value in decimal and
hex, description, set), and beside it each counter summed per chip, so a chip that differs
stands out. Shows what `Run.perf_counters()` computes."""

from __future__ import annotations

import traitlets

from ..run import as_run
from ._bokeh import BokehWidget
from ._html import esc, notice, plain_table, stat_cards

ROWS_SHOWN = 2000  # samples drawn in the table; all are in Run.perf_counters()


class PerfCountersWidget(BokehWidget):
    """XProf's performance counters for a run. `counter` filters the samples by counter
    name (a substring, "" for all)."""

    counter = traitlets.Unicode("", help="Counter name filter (substring; '' for all).").tag(sync=True)

    def __init__(self, run, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self.table = self.run.perf_counters()
        self.html = self._html()

    @traitlets.observe("counter")
    def _redraw(self, change):
        self.html = self._html()

    def on_request(self, kind, params):
        if kind == "counter":
            self.counter = str(params.get("value", ""))[:200]
            return {"ok": True}, None
        raise ValueError(f"unknown request {kind!r}")

    def _html(self):
        t = self.table
        if t.empty:
            return notice(f"No performance counters for run {self.run.name}: {t.attrs.get('reason', '')}")
        shown = t[t["counter"].str.contains(self.counter.lower(), regex=False)] if self.counter else t
        sums = shown.assign(v=shown["value"].astype(float)).pivot_table(
            index="counter", columns="chip", values="v", aggfunc="sum", sort=True
        )
        sum_rows = [
            f'<tr data-counter="{esc(name)}"><td>{esc(name)}</td>'
            + "".join(f"<td class=num>{v:,.0f}</td>" for v in row.to_numpy())
            + "</tr>"
            for name, row in sums.iterrows()
        ]
        rows = [
            f"<tr><td>{esc(r.host)}</td><td class=num>{r.chip}</td><td>{esc(r.kernel)}</td>"
            f"<td class=num>{r.sample}</td><td>{esc(r.counter)}</td><td class=num>{int(r.value):,}</td>"
            f"<td><code>{esc(r.value_hex)}</code></td><td>{esc(r.description)}</td><td>{esc(r.set)}</td></tr>"
            for r in shown.head(ROWS_SHOWN).itertuples(index=False)
        ]
        cards = stat_cards(
            [
                ("samples", "Counter samples", f"{len(t):,}"),
                ("counters", "Counters", f"{t['counter'].nunique()}"),
                ("chips", "Chips", f"{t['chip'].nunique()} on {t['host'].nunique()} host(s)"),
            ]
        )
        head = ["Host", "Chip", "Kernel", "Sample", "Counter", "Value", "Value (hex)", "Description", "Set"]
        return f"""
<div class="xw-pc">
  <div class="xw-head"><b>Performance counters</b> of run {esc(self.run.name)}</div>
  {cards}
  <label>Counter <input type="text" data-request="counter" data-testid="counter-filter"
    value="{esc(self.counter)}" size="24"></label>
  <h4>Each counter summed per chip</h4>
  {plain_table("counter-sums", ["Counter", *[f"Chip {c}" for c in sums.columns]], sum_rows)}
  <h4>Samples</h4>
  {plain_table("counter-samples", head, rows, count=len(shown))}
</div>"""


__all__ = ["PerfCountersWidget"]
