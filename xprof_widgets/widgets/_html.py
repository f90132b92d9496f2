"""HTML pieces every tool widget uses: escaping, notices, selectors, stat cards, base CSS.

Names in a profile (ops, modules, hosts) are untrusted: everything that puts
text into a widget's HTML goes through `esc`.
"""

import html
import json

import pandas as pd

# Shared look; a widget scopes it under its own root class (e.g. ".xw-mv"). Controls get
# their borders back: some hosts (marimo) reset them.
CONTROLS_CSS = """
{root} select, {root} input, {root} button {{ font: inherit; border: 1px solid #aaa; border-radius: 3px;
  padding: 1px 4px; background: #fff; color: inherit; }}
{root} button {{ cursor: pointer; background: #f4f4f4; }}
"""

BASE_CSS = """
{root} {{ font: 13px/1.4 system-ui, sans-serif; color: #222; max-width: 100%; }}
{root} .xw-head {{ display: flex; flex-wrap: wrap; gap: 4px 12px; align-items: center; margin-bottom: 6px; }}
{root} .xw-head > * {{ white-space: nowrap; }}
{root} .xw-scroll {{ overflow: auto; min-width: 0; max-width: 100%; }}
{root} .xw-note {{ color: #666; }}
{root} select, {root} input, {root} button {{ font: inherit; border: 1px solid #aaa; border-radius: 3px;
  padding: 1px 4px; background: #fff; color: inherit; }}
{root} button {{ cursor: pointer; background: #f4f4f4; }}
{root} .xw-stats {{ display: flex; flex-wrap: wrap; gap: 6px; margin-bottom: 6px; }}
{root} .xw-stat {{ border: 1px solid #ddd; border-radius: 4px; padding: 3px 8px; min-width: 100px; }}
{root} .xw-label {{ color: #666; font-size: 11px; }}
{root} .xw-value {{ font-weight: 600; }}
"""


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
