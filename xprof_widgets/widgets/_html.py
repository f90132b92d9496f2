"""HTML pieces every tool widget uses: escaping, notices, selectors, stat cards.

Names in a profile (ops, modules, hosts) are untrusted: everything that puts
text into a widget's HTML goes through `esc`. The classes used here (`xw-stats`, `xw-note`, ...)
are styled in js/src/styles/ (built into static/widget.css, every widget's `_css`).
"""

import html
import json

import pandas as pd


def esc(value):
    """Text made safe for HTML; None and pandas NA become empty."""
    if value is None or value is pd.NA:
        return ""
    return html.escape(str(value))


def data_json(value):
    """A JSON value for an HTML attribute, always written in double quotes:
    `data-params="{data_json(params)}"`. json.dumps leaves ' < > & alone, and a name from
    a profile may hold any of them: escaped here, the page reads the JSON back unchanged."""
    return html.escape(json.dumps(value), quote=True)


def notice(text):
    """A plain message in place of a tool (why there is no data, and what to do)."""
    return f'<div class="xw-notice" style="font: 13px system-ui; padding: 8px">{esc(text)}</div>'


def note(text, testid="graph-note"):
    """A note under a tool's numbers (e.g. what became of kernels run in CUDA graphs); "" for
    no text."""
    return f'<div class="xw-note" data-testid="{esc(testid)}">{esc(text)}</div>' if text else ""


def options(values, selected):
    """<option> elements for a <select>, `selected` marked."""
    return "".join(f'<option value="{esc(v)}"{" selected" if v == selected else ""}>{esc(v)}</option>' for v in values)


def stat_cards(stats):
    """Summary cards from (key, label, text) triples; `data-stat=key` lets tests read them."""
    cards = "".join(
        f'<div class="xw-stat"><div class="xw-label">{esc(label)}</div>'
        f'<div class="xw-value" data-stat="{esc(key)}">{esc(text)}</div></div>'
        for key, label, text in stats
    )
    return f'<div class="xw-stats">{cards}</div>'


def sortable_headers(labels, sort_by):
    """`<th>`s that ask for a sort on their column when clicked (a "sort" request with
    `{"column": key}`); `labels`: column key -> header text; `sort_by` is underlined."""
    return "".join(
        f'<th data-request="sort" data-params="{data_json({"column": key})}"'
        f"{' class=sorted' if key == sort_by else ''}>{esc(label)}</th>"
        for key, label in labels.items()
    )


def plain_table(testid, headers, rows, count=None, *, scroll=True):
    """A plain `<table>` (the look: common.css): `headers` a list of header texts, or the
    `<th>`s already built; `rows` the `<tr>`s (their cells escaped by the caller);
    `data-rows` says `count` (default: how many rows). In a scroll box unless `scroll=False`."""
    rows = list(rows)
    head = headers if isinstance(headers, str) else "".join(f"<th>{esc(h)}</th>" for h in headers)
    table = (
        f'<table data-testid="{esc(testid)}" data-rows="{len(rows) if count is None else count}">'
        f"<thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"
    )
    return f'<div class="xw-scroll">{table}</div>' if scroll else table
