"""The page :meth:`BokehWidget.to_html` writes: one self-contained HTML file, no kernel, no network.

The page carries the widget's front end (``static/widget.js``, the same ESM
the notebook runs) and BokehJS (``static/bokeh.js``) inline, the widget's
synced state (``figures``, ``html``, ``selected``, ...) and the last data
Python sent per named source. A small stand-in for the anywidget model (the
page's loader, ``static/export.js``, built from ``js/src/export.js``) runs the
unchanged front end against that state:

* ``get`` / ``set`` / ``save_changes`` / ``on`` / ``off`` work on a local copy
  of the state (``set`` fires ``change:NAME`` like Backbone does);
* ``send({type: "load-bokeh"})`` is answered with the embedded bundle;
* ``send({type: "request"})`` is answered with a reply without data
  (``content: {static_export: true}``), so the view stops waiting and keeps
  what it shows;
* once the front end reports ``status = "ready"``, the recorded x ranges are
  replayed as ``range`` messages and the recorded data as ``push`` messages,
  then ``<html data-xprof-replayed="N">`` is set (N pushes; tests wait on it).

Nothing in the page is loaded from a URL but ``blob:`` URLs made from the
page's own text (BokehJS names a few URLs, e.g. help links, loading none). Text goes into ``<script type="text/plain">``
blocks as is when it cannot end the block early (no ``</script``, ``<!--``,
``<script``, NUL or CR), else base64; JSON has ``<``, ``>`` and ``&`` escaped.
The page's own style is ``static/export.css`` (``js/src/export.css``), then the
widget's CSS (its ``_css``: ``static/widget.css``).
"""

from __future__ import annotations

import base64
import datetime
import html
import json
import pathlib
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

__all__ = ["export_page", "script_block"]

# Sequences that change how an HTML parser reads a <script> element's text.
_UNSAFE_IN_SCRIPT = re.compile(r"</script|<!--|<script|[\x00\r]", re.IGNORECASE)

STATIC_DIR = pathlib.Path(__file__).resolve().parent.parent / "static"
# The stand-in for anywidget's model, and the loader (js/src/export.js, built by js/build.mjs).
EXPORT_JS = STATIC_DIR / "export.js"
# The page's banner and margins (js/src/export.css).
EXPORT_CSS = STATIC_DIR / "export.css"

# What would end the inline <script type="module"> that holds the loader early.
_ENDS_SCRIPT = re.compile(r"</script|<!--|<script", re.IGNORECASE)


def _loader() -> str:
    """The page's loader: static/export.js, which the built front end must hold."""
    try:
        text = EXPORT_JS.read_text(encoding="utf-8")
    except OSError as error:
        raise RuntimeError(
            f"static export loader missing ({error}); rebuild the package front end (npm run build in js/)"
        ) from error
    if _ENDS_SCRIPT.search(text):
        raise RuntimeError(f"{EXPORT_JS} cannot go inline in a page (it holds </script, <script or <!--)")
    return text


def _page_css() -> str:
    """The page's own style; without the built file, none (the page works unstyled)."""
    try:
        return EXPORT_CSS.read_text(encoding="utf-8")
    except OSError:
        return ""


def _ascii_html(text: str) -> str:
    """Escaped for HTML text and attributes, non-ASCII as character references (lone surrogates too)."""
    return html.escape(str(text)).encode("ascii", "xmlcharrefreplace").decode("ascii")


def _json_for_script(value: Any) -> str:
    """JSON that cannot end a <script> element early: <, > and & become \\u escapes."""
    text = json.dumps(value, ensure_ascii=True, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def script_block(element_id: str, data: bytes) -> str:
    """A ``<script type="text/plain">`` holding ``data``: as text when the HTML parser reads it back
    unchanged (UTF-8, nothing that ends or re-scopes a script element), else base64."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is not None and not _UNSAFE_IN_SCRIPT.search(text):
        return f'<script type="text/plain" id="{element_id}" data-encoding="text">{text}</script>'
    encoded = base64.b64encode(data).decode("ascii")
    return f'<script type="text/plain" id="{element_id}" data-encoding="base64">{encoded}</script>'


def _pushes(pushes: Iterable[tuple[Mapping[str, Any], list[bytes]]]) -> list[dict[str, Any]]:
    return [
        {"msg": dict(msg), "buffers": [base64.b64encode(bytes(b)).decode("ascii") for b in buffers]}
        for msg, buffers in pushes
    ]


def export_page(
    *,
    title: str,
    widget_class: str,
    subject: str,
    esm: bytes,
    bokeh_js: bytes,
    bokeh_version: str,
    views: Sequence[Mapping[str, Any]],
    package_version: str = "",
    css: str = "",
) -> str:
    """The page's HTML. ``views``: what it shows, each a mapping with ``widget`` (class
    name), ``state``, ``ranges`` and ``pushes`` (``(push message, its buffers)`` in replay
    order). One view is the page; several (a ProfileWidget's tools, each with a
    ``label``) get a menu (``data-testid="export-tool"``): the page shows the first and
    draws each on its first choice."""
    data: dict[str, Any] = {"bokeh_version": bokeh_version, "widget": widget_class}
    shown: list[dict[str, Any]] = [
        {
            "label": str(v.get("label", v["widget"])),
            "widget": str(v["widget"]),
            "state": dict(v["state"]),
            "ranges": [dict(r) for r in v["ranges"]],
            "pushes": _pushes(v["pushes"]),
        }
        for v in views
    ]
    if len(shown) == 1:
        data.update({k: shown[0][k] for k in ("state", "ranges", "pushes")})
    else:
        data["tools"] = shown
    exported = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    about = f"{_ascii_html(subject)} &mdash; " if subject else ""
    meta = f"exported {exported}; xprof-widgets {package_version}, BokehJS {bokeh_version}"
    loader = _loader()
    style = (_page_css() + "\n" + (css or "")).replace("</", "<\\/")  # CSS reads \/ as /; HTML cannot end it
    menu = ""
    if len(shown) > 1:
        labels = "".join(f'<option value="{k}">{_ascii_html(t["label"])}</option>' for k, t in enumerate(shown))
        menu = (
            f'<label class="xprof-export-tool">Tool <select id="xprof-export-tool" data-testid="export-tool">'
            f"{labels}</select></label> ({len(shown)} tools) &mdash; "
        )
    banner = (
        '<div class="xprof-export-banner" role="note" data-testid="export-banner">'
        f"Static export of <b>{_ascii_html(widget_class)}</b> &mdash; {about}{menu}"
        "no kernel: zoom/pan work, new data does not load"
        f'<span class="xprof-export-meta">{_ascii_html(meta)}</span></div>'
    )
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_ascii_html(title)}</title>",
            f"<style>{style}</style>",
            "</head>",
            "<body>",
            banner,
            '<div id="xprof-export-root"></div>',
            f'<script type="application/json" id="xprof-export-data">{_json_for_script(data)}</script>',
            script_block("xprof-export-widget", esm),
            script_block("xprof-export-bokeh", bokeh_js),
            f'<script type="module">{loader}</script>',
            "</body>",
            "</html>",
            "",
        ]
    )
