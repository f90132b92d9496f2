"""MegascaleStatsWidget: the collectives a multi-slice TPU program ran over the data center
network, as XProf's megascale stats shows them (`Run.megascale_stats()`): a row per
collective (rendezvous) with its slack (how late its data could have come without a
stall), its stall, each op's time, how often it ran, the bytes sent and the bandwidth it
needed; the collectives that stalled longest first. `host`: one host's collectives, or
every host combined ("" : all)."""

from __future__ import annotations

import traitlets

from ..format import size
from ..run import as_run
from ._bokeh import BokehWidget, a_host
from ._html import esc, notice, plain_table, stat_cards

ALL = ""


class MegascaleStatsWidget(BokehWidget):
    """XProf's megascale stats for a run; `host` is the host shown ("" for all hosts)."""

    host = traitlets.Unicode(ALL, help="The host shown ('' for every host combined).").tag(sync=True)

    def __init__(self, run, host=None, **kwargs):
        self.run = as_run(run)
        super().__init__(**kwargs)
        self.host = host or ALL
        self._draw()

    @traitlets.validate("host")
    def _check_host(self, proposal):
        value = proposal["value"]
        return value if value == ALL else a_host(self.run, value)

    @traitlets.observe("host")
    def _redraw(self, change):
        if hasattr(self, "table"):
            self._draw()

    def on_request(self, kind, params):
        if kind == "host":
            self.host = str(params.get("value", ""))
            return {"ok": True}, None
        raise ValueError(f"unknown request {kind!r}")

    def _draw(self):
        self.table = self.run.megascale_stats(self.host or None)
        self.html = self._html()

    def _html(self):
        t = self.table
        where = f"host {self.host}" if self.host else "all hosts"
        if t.empty:
            return notice(f"No megascale stats for {where} of run {self.run.name}: {t.attrs.get('reason', '')}")
        t = t.sort_values("total_stall_ms", ascending=False, kind="stable")
        worst = float(t["total_stall_ms"].max()) or 1.0
        rows = []
        for r in t.itertuples(index=False):
            bandwidth = "—" if r.slack_time_ms == 0 else f"{r.required_bandwidth_gbps:,.3f}"
            rows.append(
                f"<tr><td>{esc(r.rendezvous_name)}</td><td>{esc(r.transfer_type)}</td>"
                f"<td>{esc(r.send_op_name)}</td><td>{esc(r.recv_op_name)}</td>"
                f"<td class=num>{r.slack_time_ms:,.3f}</td><td class=num>{r.observed_duration_ms:,.3f}</td>"
                f"<td class=num>{r.stall_duration_ms:,.3f}</td><td class=num>{r.send_stall_ms:,.3f}</td>"
                f"<td class=num>{r.send_done_stall_ms:,.3f}</td><td class=num>{r.recv_stall_ms:,.3f}</td>"
                f"<td class=num>{r.recv_done_stall_ms:,.3f}</td><td class=num>{r.occurrences}</td>"
                f"<td class=num>{r.total_stall_ms:,.3f}</td>"
                f'<td class="xw-util-cell"><div class="xw-util-bar" '
                f'style="width:{100 * r.total_stall_ms / worst:.1f}%"></div></td>'
                f"<td class=num>{esc(size(r.net_tx_bytes))}</td><td class=num>{bandwidth}</td></tr>"
            )
        head = [
            "Rendezvous",
            "Transfer",
            "Send op",
            "Recv op",
            "Slack (ms)",
            "Observed (ms)",
            "Stall (ms)",
            "Send (ms)",
            "SendDone (ms)",
            "Recv (ms)",
            "RecvDone (ms)",
            "Occurrences",
            "Total stall (ms)",
            "",
            "Data sent",
            "Required bandwidth (Gbit/s)",
        ]
        cards = stat_cards(
            [
                ("collectives", "Collectives", f"{len(t)}"),
                ("occurrences", "Occurrences", f"{int(t['occurrences'].sum()):,}"),
                ("total_stall_ms", "Total stall", f"{t['total_stall_ms'].sum():,.3f} ms"),
                ("hosts", "Hosts read", ", ".join(t.attrs.get("hosts", [])) or "—"),
            ]
        )
        hosts = "".join(
            f'<option value="{esc(h)}"{" selected" if h == self.host else ""}>{esc(h or "All hosts")}</option>'
            for h in [ALL, *self.run.readable_hosts]
        )
        menu = f'<label>Host <select data-request="host">{hosts}</select></label>' if len(self.run.hosts) > 1 else ""
        return f"""
<div class="xw-pc xw-util">
  <div class="xw-head"><b>Megascale stats</b> of run {esc(self.run.name)}, {esc(where)} {menu}</div>
  {cards}
  <div class="xw-note">Slack: the time from a collective's send to its recv-done the TensorCore
  did other work, how late its data could have come without a stall. Times are averages over
  its occurrences. Recv is the recv ops' own time (XProf 2.24.2 shows 0 there).</div>
  {plain_table("megascale", head, rows)}
</div>"""


__all__ = ["MegascaleStatsWidget"]
