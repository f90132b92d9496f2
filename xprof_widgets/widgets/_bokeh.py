"""The one place that knows how a widget's data crosses to the browser.

Every tool widget subclasses :class:`BokehWidget`. Python builds Bokeh
figures and HTML; the shared front end (``js/src/widget.js``, built into
``static/widget.js``) embeds them with BokehJS, which it loads once per page
over the comm (``static/bokeh.js`` sent as a binary buffer, never stored in
the widget state or the saved notebook). Data moves as numpy buffers:

* Python to browser: :meth:`BokehWidget.push_columns` replaces the data of a
  named ``ColumnDataSource`` in every view of the widget.
* Browser to Python: a view sends ``request`` messages (from HTML elements
  with a ``data-request`` attribute, or from a figure tagged with
  :meth:`BokehWidget.request_on_range`); :meth:`BokehWidget.on_request`
  answers with JSON content and named numpy columns.
* Tapping a glyph of a named source sets the ``selected`` trait to
  ``{"figure", "source", "index", "id", "ids"}``, ``id`` being the value of the
  source's ``id`` column (stable across data swaps). Setting ``selected``
  from Python selects the rows with that id in the page.
* Hovering a glyph of a named source (the figure needs a ``HoverTool`` for
  that renderer) calls :meth:`BokehWidget.on_hover` with the hovered id.

See docs/frontend.md for the message formats.
"""

from __future__ import annotations

import logging
import pathlib
from collections.abc import Mapping
from typing import Any

import anywidget
import bokeh
import numpy as np
import pandas as pd
import traitlets
from bokeh.embed import json_item
from bokeh.model import Model

__all__ = ["BokehWidget", "encode_columns"]

log = logging.getLogger(__name__)

STATIC_DIR = pathlib.Path(__file__).resolve().parent.parent / "static"
WIDGET_JS = STATIC_DIR / "widget.js"
BOKEH_JS = STATIC_DIR / "bokeh.js"

# Tag on a Bokeh Plot: the front end sends a request of this kind whenever
# the plot's x range changes (see request_on_range).
RANGE_TAG = "xprof:range-request:"

# Typed arrays the front end builds without copying. Other numeric dtypes
# are converted: 64-bit integers become float64 (exact below 2**53, so send
# times relative to a start, not absolute picoseconds), bool becomes uint8.
_BINARY_DTYPES = {"float64", "float32", "int32", "uint32", "int16", "uint16", "int8", "uint8"}

# Shown instead of the widget when the package was installed without its
# built front end (a source checkout where `npm run build` in js/ never ran);
# importing must still work there.
_MISSING_FRONT_END_ESM = """
export default { render({ el }) {
  const pre = document.createElement("pre");
  pre.textContent = "xprof_widgets: front end not built (run `npm install && npm run build` in js/)";
  el.appendChild(pre);
} };
"""

_bokeh_bundle: bytes | None = None


def _bokeh_bundle_bytes() -> bytes:
    """The BokehJS ESM bundle, read once per kernel."""
    global _bokeh_bundle
    if _bokeh_bundle is None:
        _bokeh_bundle = BOKEH_JS.read_bytes()
    return _bokeh_bundle


def encode_columns(columns: Mapping[str, Any]) -> tuple[list[dict], list[memoryview]]:
    """Turn named columns into the wire format: (metadata list, binary buffers).

    Numeric columns travel as one binary buffer each (no copy when already a
    contiguous array of a supported dtype); string and object columns travel
    as JSON lists, or dictionary-encoded when values repeat (``table``: each
    distinct string once, codes in a uint16/uint32 buffer; the page expands
    them). datetime64 columns become float64 milliseconds since the
    epoch, Bokeh's convention. All columns must have the same length.
    """
    meta: list[dict] = []
    buffers: list[memoryview] = []
    length = None
    for name, values in columns.items():
        array = np.asarray(values)
        if array.ndim != 1:
            raise ValueError(f"column {name!r} must be one-dimensional, got shape {array.shape}")
        if length is None:
            length = len(array)
        elif len(array) != length:
            raise ValueError(f"column {name!r} has {len(array)} rows, expected {length}")
        if array.dtype.kind == "M":
            array = array.astype("datetime64[ns]").astype(np.int64) / 1e6
        elif array.dtype.kind == "b":
            array = array.astype(np.uint8)
        elif array.dtype.kind in "iu" and array.dtype.name not in _BINARY_DTYPES:
            array = array.astype(np.float64)
        elif array.dtype.kind == "f" and array.dtype.name not in _BINARY_DTYPES:
            array = array.astype(np.float64)
        if array.dtype.kind in "iuf":
            array = np.ascontiguousarray(array.astype(array.dtype.newbyteorder("<"), copy=False))
            meta.append({"name": str(name), "dtype": array.dtype.name, "buffer": len(buffers)})
            buffers.append(memoryview(array).cast("B"))
        else:
            text = [None if v is None else str(v) for v in array.tolist()]
            codes, table = pd.factorize(pd.Series(text, dtype=object), use_na_sentinel=False)
            if len(text) >= 64 and 2 * len(table) <= len(text):
                # Repeated strings (event names): each distinct value once, codes as a buffer.
                codes = codes.astype(np.uint16 if len(table) < 2**16 else np.uint32)
                meta.append({"name": str(name), "dtype": codes.dtype.name, "buffer": len(buffers),
                             "table": [None if v is None else str(v) for v in table]})
                buffers.append(memoryview(np.ascontiguousarray(codes.astype(codes.dtype.newbyteorder("<")))).cast("B"))
            else:
                meta.append({"name": str(name), "values": text})
    return meta, buffers


def _as_item(figure: Any) -> dict:
    if isinstance(figure, Model):
        return json_item(figure)
    if isinstance(figure, Mapping) and "doc" in figure and "root_id" in figure:
        return dict(figure)
    raise TypeError(f"expected a Bokeh model or a json_item() dict, got {type(figure).__name__}")


class BokehWidget(anywidget.AnyWidget):
    """Base class of every xprof widget: Bokeh figures plus HTML, with binary data transport.

    A subclass passes its figures (name -> Bokeh model) and its HTML body to
    ``__init__`` (or sets them later with :meth:`set_figures` and the ``html``
    trait). The HTML places each figure with an element
    ``<div data-figure="NAME"></div>``; figures without one are appended in
    order. Escaping text inside ``html`` is the subclass's job
    (``html.escape``). Override :meth:`on_request` and :meth:`on_hover` to
    answer the browser.
    """

    _esm = WIDGET_JS if WIDGET_JS.is_file() else _MISSING_FRONT_END_ESM

    figures = traitlets.Dict(help="Figure name -> bokeh.embed.json_item() output.").tag(sync=True)
    html = traitlets.Unicode("", help="The widget's HTML body; figures go into [data-figure=NAME].").tag(sync=True)
    status = traitlets.Unicode("", help='Set by the browser: "ready" once every figure drew, or "error: ...".').tag(
        sync=True
    )
    selected = traitlets.Dict(help="{figure, source, index, id, ids} of the tapped glyph; {} when nothing is.").tag(
        sync=True
    )

    def __init__(self, figures: Mapping[str, Any] | None = None, html: str = "", **kwargs: Any) -> None:
        super().__init__(html=html, **kwargs)
        if figures:
            self.set_figures(figures)
        self.on_msg(self._handle_message)

    # ---- what subclasses use ---------------------------------------------

    def set_figures(self, figures: Mapping[str, Any]) -> None:
        """Show these figures: name -> Bokeh model (or an existing json_item dict)."""
        self.figures = {str(name): _as_item(fig) for name, fig in figures.items()}

    @staticmethod
    def request_on_range(plot: Any, kind: str) -> Any:
        """Make the browser send a ``kind`` request whenever ``plot``'s x range changes.

        The request's params are ``{figure, x_start, x_end, y_start, y_end,
        width_px}`` in data units (and pixels for ``width_px``). Returns ``plot``.
        """
        plot.tags = [t for t in plot.tags if not (isinstance(t, str) and t.startswith(RANGE_TAG))] + [
            RANGE_TAG + kind
        ]
        return plot

    def set_x_range(self, figure: str, start: float, end: float) -> None:
        """Move the x range of ``figure``'s plots tagged with :meth:`request_on_range` in every
        view; each view then sends its range request for the new window."""
        self.send({"type": "range", "figure": str(figure), "start": float(start), "end": float(end)})

    def push_columns(self, source_name: str, columns: Mapping[str, Any], mode: str = "replace") -> None:
        """Replace (``mode="replace"``) or update (``"update"``: merge columns) the data of
        every ``ColumnDataSource`` named ``source_name`` in every view of this widget."""
        if mode not in ("replace", "update"):
            raise ValueError(f"mode must be 'replace' or 'update', not {mode!r}")
        meta, buffers = encode_columns(columns)
        self.send({"type": "push", "source": source_name, "mode": mode, "columns": meta}, buffers)

    def on_request(self, kind: str, params: dict) -> tuple[dict, Mapping[str, Any] | None]:
        """Answer a browser request. Override in subclasses.

        Returns ``(content, columns)``: ``content`` is JSON-able; if it holds
        ``"source": NAME`` the browser puts ``columns`` (name -> 1-D array) into
        the ColumnDataSource of that name (``"mode"``: "replace" or "update").
        Raise to send an error back; the kernel stays up.
        """
        raise NotImplementedError(f"{type(self).__name__} does not answer {kind!r} requests")

    def on_hover(self, source: str, id: Any, figure: str) -> None:
        """Called when the hovered glyph of the named ``source`` changes (``id`` None: none). Override."""

    # ---- message plumbing --------------------------------------------------

    def _handle_message(self, _widget: Any, content: Any, buffers: list) -> None:
        if not isinstance(content, dict):
            return
        kind = content.get("type")
        try:
            if kind == "load-bokeh":
                self._send_bokeh(content)
            elif kind == "request":
                self._answer(content)
            elif kind == "hover":
                self.on_hover(content.get("source"), content.get("id"), content.get("figure"))
        except Exception:  # a bad callback must not take the widget's comm down
            log.exception("xprof_widgets: error handling %r message", kind)

    def _send_bokeh(self, content: dict) -> None:
        reply = {"type": "bokeh", "nonce": content.get("nonce"), "version": bokeh.__version__}
        wanted = content.get("version")
        if wanted != bokeh.__version__:
            reply["error"] = f"the page wants BokehJS {wanted}, the kernel has bokeh {bokeh.__version__}"
            self.send(reply)
            return
        try:
            bundle = _bokeh_bundle_bytes()
        except OSError as error:
            reply["error"] = f"BokehJS bundle missing ({error}); rebuild the package front end (npm run build in js/)"
            self.send(reply)
            return
        self.send(reply, [bundle])

    def _answer(self, content: dict) -> None:
        reply: dict[str, Any] = {
            "type": "reply",
            "id": content.get("id"),
            "view": content.get("view"),
            "kind": content.get("kind"),
        }
        buffers: list = []
        try:
            result, columns = self.on_request(str(content.get("kind")), dict(content.get("params") or {}))
            result = dict(result or {})
            reply["content"] = result
            reply["source"] = result.get("source")
            reply["mode"] = result.get("mode", "replace")
            if isinstance(columns, Mapping):
                reply["columns"], buffers = encode_columns(columns)
            elif columns:  # raw buffers, passed through for a subclass with its own format
                buffers = [memoryview(b) for b in columns]
                reply["columns"] = []
        except Exception as error:
            log.exception("xprof_widgets: %s request %r failed", type(self).__name__, content.get("kind"))
            reply["error"] = f"{type(error).__name__}: {error}"
        self.send(reply, buffers)
