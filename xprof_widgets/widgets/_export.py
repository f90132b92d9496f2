"""The page :meth:`BokehWidget.to_html` writes: one self-contained HTML file, no kernel, no network.

The page carries the widget's front end (``static/widget.js``, the same ESM
the notebook runs) and BokehJS (``static/bokeh.js``) inline, the widget's
synced state (``figures``, ``html``, ``selected``, ...) and the last data
Python sent per named source. A small stand-in for the anywidget model runs
the unchanged front end against that state:

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
"""

from __future__ import annotations

import base64
import datetime
import html
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["export_page", "script_block"]

# Sequences that change how an HTML parser reads a <script> element's text.
_UNSAFE_IN_SCRIPT = re.compile(r"</script|<!--|<script|[\x00\r]", re.IGNORECASE)

_STYLE = """
html, body { margin: 0; background: #fff; }
body { font: 13px/1.4 system-ui, sans-serif; color: #222; }
.xprof-export-banner { position: sticky; top: 0; z-index: 10; background: #fff8e1; color: #5d4200;
  border-bottom: 1px solid #e6c65c; padding: 5px 12px; font-size: 12px; }
.xprof-export-banner .xprof-export-meta { color: #8a6d1e; margin-left: 8px; }
#xprof-export-root { padding: 10px 12px; }
"""

# The stand-in for anywidget's model, and the loader. Plain ES2020, no imports.
_SHIM = r"""
const byId = (id) => document.getElementById(id);
const DATA = JSON.parse(byId("xprof-export-data").textContent);

function fromBase64(text) {
  const binary = atob(text);
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) bytes[i] = binary.charCodeAt(i);
  return bytes;
}

function blockBytes(id) {
  const el = byId(id);
  return el.dataset.encoding === "base64" ? fromBase64(el.textContent) : new TextEncoder().encode(el.textContent);
}

function asView(bytes) {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

class StaticModel {
  constructor(state) {
    this.state = { ...state };
    this.listeners = new Map();
  }
  get(key) {
    return this.state[key];
  }
  set(key, value) {
    const before = JSON.stringify(this.state[key]);
    this.state[key] = value;
    if (JSON.stringify(value) !== before) this.emit(`change:${key}`, this, value);
  }
  save_changes() {}
  on(name, callback) {
    if (!this.listeners.has(name)) this.listeners.set(name, new Set());
    this.listeners.get(name).add(callback);
  }
  off(name, callback) {
    if (name == null) this.listeners.clear();
    else if (callback == null) this.listeners.delete(name);
    else this.listeners.get(name)?.delete(callback);
  }
  emit(name, ...args) {
    for (const callback of [...(this.listeners.get(name) ?? [])]) {
      try {
        callback(...args);
      } catch (error) {
        console.error("xprof_widgets static export:", error);
      }
    }
  }
  send(content) {
    // Answered after the caller returns, as a kernel would be.
    setTimeout(() => this.answer(content ?? {}), 0);
  }
  answer(content) {
    if (content.type === "load-bokeh") {
      const reply = { type: "bokeh", nonce: content.nonce, version: DATA.bokeh_version };
      if (content.version !== DATA.bokeh_version) {
        reply.error = `the page's front end wants BokehJS ${content.version}, the export holds ${DATA.bokeh_version}`;
        this.emit("msg:custom", reply, []);
      } else {
        this.emit("msg:custom", reply, [asView(blockBytes("xprof-export-bokeh"))]);
      }
    } else if (content.type === "request") {
      // A reply with no data: the view stops waiting and keeps what it shows.
      if (!this.toldNoKernel) console.info("xprof_widgets static export: no kernel, requests get no data");
      this.toldNoKernel = true;
      this.emit("msg:custom", {
        type: "reply", id: content.id, view: content.view, kind: content.kind,
        content: { static_export: true }, columns: [],
      }, []);
    }
  }
}

const model = new StaticModel(DATA.state);
const el = byId("xprof-export-root");
let replayed = false;

// The view as it was: x ranges first (their requests are answered without
// data), then the last data Python sent per source.
function replay() {
  if (replayed) return;
  replayed = true;
  for (const range of DATA.ranges) model.emit("msg:custom", { type: "range", ...range }, []);
  for (const push of DATA.pushes) {
    model.emit("msg:custom", push.msg, push.buffers.map((b) => asView(fromBase64(b))));
  }
  requestAnimationFrame(() => {
    document.documentElement.dataset.xprofReplayed = String(DATA.pushes.length);
  });
}

model.on("change:status", () => {
  if (model.get("status") === "ready") replay();
});

function showError(error) {
  console.error("xprof_widgets static export:", error);
  const pre = document.createElement("pre");
  pre.className = "xprof-error";
  pre.textContent = `xprof_widgets static export could not start: ${error?.message ?? error}`;
  el.appendChild(pre);
  document.documentElement.dataset.xprofReplayed = "error";
}

const url = URL.createObjectURL(new Blob([blockBytes("xprof-export-widget")], { type: "text/javascript" }));
import(url).then(
  async (module) => {
    URL.revokeObjectURL(url);
    const widget = module.default ?? module;
    try {
      await widget.initialize?.({ model });
      await widget.render({ model, el });
    } catch (error) {
      showError(error);
    }
  },
  (error) => {
    URL.revokeObjectURL(url);
    showError(error);
  },
);
"""


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


def export_page(
    *,
    title: str,
    widget_class: str,
    subject: str,
    esm: bytes,
    bokeh_js: bytes,
    bokeh_version: str,
    state: Mapping[str, Any],
    ranges: Iterable[Mapping[str, Any]],
    pushes: Iterable[tuple[Mapping[str, Any], list[bytes]]],
    package_version: str = "",
    css: str = "",
) -> str:
    """The page's HTML. ``pushes``: ``(push message, its buffers)`` in replay order."""
    data = {
        "bokeh_version": bokeh_version,
        "widget": widget_class,
        "state": dict(state),
        "ranges": [dict(r) for r in ranges],
        "pushes": [
            {"msg": dict(msg), "buffers": [base64.b64encode(bytes(b)).decode("ascii") for b in buffers]}
            for msg, buffers in pushes
        ],
    }
    exported = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    about = f"{_ascii_html(subject)} &mdash; " if subject else ""
    meta = f"exported {exported}; xprof-widgets {package_version}, BokehJS {bokeh_version}"
    style = (_STYLE + (css or "")).replace("</", "<\\/")  # CSS reads \/ as /; HTML then cannot end the block
    banner = (
        '<div class="xprof-export-banner" role="note" data-testid="export-banner">'
        f"Static export of <b>{_ascii_html(widget_class)}</b> &mdash; {about}"
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
            f'<script type="module">{_SHIM}</script>',
            "</body>",
            "</html>",
            "",
        ]
    )
