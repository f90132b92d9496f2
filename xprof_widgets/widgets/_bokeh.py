"""The one place that knows how a widget's data crosses to the browser.

Every tool widget subclasses :class:`BokehWidget`. Python builds Bokeh
figures and HTML; the shared front end (``js/src/``, built into
``static/widget.js``, its CSS into ``static/widget.css``) embeds them with
BokehJS, which it loads once per page over the comm (``static/bokeh.js`` sent
as a binary buffer, never stored in the widget state or the saved notebook).
Data moves as numpy buffers:

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
* :meth:`BokehWidget.to_html` writes the current view as one self-contained
  page (front end, BokehJS, state and the last data sent per source inline;
  no kernel, no network), for sharing in a bug report.

See docs/frontend.md for the message formats.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import json
import logging
import os
import pathlib
import sys
import threading
from collections.abc import Mapping
from typing import Any

import anywidget
import bokeh
import ipywidgets
import numpy as np
import pandas as pd
import traitlets
from bokeh.core.serialization import Serializer
from bokeh.settings import settings

#: Bokeh's modules that define its model classes (and `json_item`): imported where a figure
#: is built by Bokeh, never at the top of a widget module. A chart filled from a template
#: (`_templates`) needs none of them, and they are most of a kernel's first import of a
#: widget (bokeh.models: 0.4 of 0.6 s). `import_bokeh_models` imports them ahead.
BOKEH_MODEL_MODULES = ("bokeh.models", "bokeh.plotting", "bokeh.layouts", "bokeh.document", "bokeh.embed")


def import_bokeh_models() -> None:
    """Import Bokeh's model modules (`BOKEH_MODEL_MODULES`) now, on this thread: for a
    caller whose widgets are built on another thread (Bokeh's imports are not thread-safe:
    a model class defined on two threads at once fails to validate its defaults)."""
    from importlib import import_module

    for name in BOKEH_MODEL_MODULES:
        import_module(name)


__all__ = [
    "LABEL_TEXT",
    "BokehWidget",
    "built_without_comm",
    "encode_columns",
    "hover_and_tap",
    "one_of",
    "selection_look",
    "strip_chrome",
]

log = logging.getLogger(__name__)

STATIC_DIR = pathlib.Path(__file__).resolve().parent.parent / "static"
WIDGET_JS = STATIC_DIR / "widget.js"
WIDGET_CSS = STATIC_DIR / "widget.css"
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

# Set while a widget is built to be shown inside another (HostWidget): it opens no comm
# of its own (its messages go through the host's), and the notebook's widget
# construction hook (marimo's opens a comm, and may only do so while a cell runs) is
# not called for it.
_without_comm = contextvars.ContextVar("xprof_widgets_without_comm", default=False)
_construction = threading.Lock()


def hover_and_tap(fig: Any, renderers: Any, tooltips: list, *, tap: bool = True, **hover: Any) -> None:
    """Give `fig` a hover with `tooltips` (Bokeh's `(label, "@column")` pairs) on
    `renderers` (one or a list) and, unless `tap=False`, a tap tool that selects their
    glyphs (what `selected` reports). `hover`: more HoverTool settings (`mode="vline"`)."""
    from bokeh.models import HoverTool, TapTool

    renderers = renderers if isinstance(renderers, list) else [renderers]
    fig.add_tools(HoverTool(renderers=renderers, tooltips=tooltips, **hover))
    if tap:
        fig.add_tools(TapTool(renderers=renderers))


def ranked_layout(n: int, right: float, labels: list[str]) -> dict[str, Any]:
    """`ranked_bars`' layout values for `n` bars up to `right`, labelled `labels` (what a
    chart template takes as parameters)."""
    return {
        "height": 70 + 22 * n,
        "y_start": n - 0.5,
        "ticks": list(range(n)),
        "overrides": dict(enumerate(labels)),
        "x_end": float(right or 1.0) * 1.04,
    }


#: `ranked_bars`' layout parameters as a chart template names them (`_templates`).
RANKED_PARAMS = {
    "title": "str",
    "height": "int",
    "y_start": "float",
    "ticks": "floats",
    "overrides": "labels",
    "x_end": "float",
}


def ranked_bars(
    *, title: str, height: int, y_start: float, ticks: list, overrides: dict, x_end: float, min_width: int = 360
) -> Any:
    """A figure for horizontal bars, the first on top, one per ranked item (kernels, ops,
    categories), laid out by `ranked_layout`: 22 px a bar, x from 0 to a little past the
    longest, each bar labelled on the y axis, no toolbar and no horizontal grid."""
    from bokeh.models import FixedTicker, Range1d
    from bokeh.plotting import figure

    fig = figure(
        height=height,
        sizing_mode="stretch_width",
        min_width=min_width,
        title=title,
        x_range=Range1d(start=0, end=x_end),
        y_range=Range1d(start=y_start, end=-0.5),
        tools="",
        toolbar_location=None,
    )
    fig.yaxis.ticker = FixedTicker(ticks=ticks)
    fig.yaxis.major_label_overrides = overrides
    fig.yaxis.major_label_text_font_size = "10px"
    fig.ygrid.grid_line_color = None
    fig.outline_line_color = None
    return fig


def one_of(value: Any, choices: Any, what: str) -> Any:
    """`value`, if it is one of `choices`; else a TraitError that lists them (`what`:
    "host", "module", ...). For trait validators."""
    if value not in choices:
        raise traitlets.TraitError(f"no {what} {value!r}; {what}s: {list(choices)}")
    return value


def a_host(run: Any, value: Any) -> Any:
    """`value`, if it is a host of `run` that was not left out: else a TraitError listing
    the hosts, or the run's ProfileError saying why the host was left out. For trait
    validators."""
    one_of(value, run.hosts, "host")
    if value in run.unreadable:
        raise run.left_out(value)
    return value


def selection_look(fade: float = 0.45) -> dict[str, Any]:
    """Glyph settings for how a tapped glyph looks in every chart: outlined, the
    others' fill faded to `fade`."""
    return {"selection_line_color": "#222", "selection_line_width": 2.5, "nonselection_fill_alpha": fade}


def selectable_bars(fig: Any, data: dict[str, Any], name: str, right: str, **glyph: Any) -> Any:
    """Bars of `ranked_bars` from `data` (columns y, `right` and color) in a source named
    `name` (what a tap reports), a tapped one outlined and the others faded
    (`selection_look`); `glyph`: more hbar settings (a legend field)."""
    from bokeh.models import ColumnDataSource

    return fig.hbar(
        y="y",
        right=right,
        height=0.72,
        source=ColumnDataSource(data, name=name),
        fill_color="color",
        line_color=None,
        selection_fill_color="color",
        **selection_look(),
        **glyph,
    )


# Glyph settings for text drawn on a chart (labels inside bars, boxes and wedges).
LABEL_TEXT = {"text_font_size": "10px", "text_baseline": "middle", "text_color": "#111"}


#: `figure(**NO_AXES)`: a figure with no axes and no grids (a pie, a sunburst, a graph): none
#: made, so none serialized (a figure builds and serializes in two thirds of the time).
NO_AXES = {"x_axis_type": None, "y_axis_type": None}


def strip_chrome(fig: Any, axes: str = "xy") -> None:
    """No Bokeh logo on `fig`, and no axis or grid lines for the dimensions in `axes`."""
    fig.toolbar.logo = None
    for dim in axes:
        getattr(fig, f"{dim}axis").visible = False
        getattr(fig, f"{dim}grid").visible = False


@contextlib.contextmanager
def built_without_comm():
    """Widgets built inside this block open no comm: for tools shown inside a HostWidget."""
    with _construction:
        hook = ipywidgets.Widget._widget_construction_callback
        ipywidgets.Widget._widget_construction_callback = None
        token = _without_comm.set(True)
        try:
            yield
        finally:
            _without_comm.reset(token)
            ipywidgets.Widget._widget_construction_callback = hook


def _bokeh_bundle_bytes() -> bytes:
    """The BokehJS ESM bundle, read once per kernel."""
    global _bokeh_bundle
    if _bokeh_bundle is None:
        _bokeh_bundle = BOKEH_JS.read_bytes()
    return _bokeh_bundle


def export_html(views, path=None, *, title=None, widget_class=None, subject=None):
    """The static page of `views` (`BokehWidget._export_parts` of one widget, or of several
    with a `label` each: a page with a menu of them; see `_export.export_page`): its HTML
    when `path` is None, else written there (UTF-8) and the path returned. `widget_class`
    and `subject` name the page (default: the first view's); the title follows from them."""
    from .._version import __version__
    from . import _export  # the page template: only when exporting

    first = views[0]
    widget_class = first["widget"] if widget_class is None else widget_class
    subject = first["subject"] if subject is None else subject
    try:
        bundle = _bokeh_bundle_bytes()
    except OSError as error:
        raise RuntimeError(
            f"BokehJS bundle missing ({error}); rebuild the package front end (npm run build in js/)"
        ) from error
    page = _export.export_page(
        title=title if title is not None else (f"{widget_class} \u2014 {subject}" if subject else widget_class),
        widget_class=widget_class,
        subject=subject,
        esm=first["esm"],
        bokeh_js=bundle,
        bokeh_version=bokeh.__version__,
        views=views,
        package_version=__version__,
        css=first["css"],
    )
    if path is None:
        return page
    path = pathlib.Path(path)
    path.write_text(page, encoding="utf-8")
    return path


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
            buffers.append(array.data.cast("B"))
        else:
            text = [None if v is None else str(v) for v in array.tolist()]
            codes, table = pd.factorize(pd.Series(text, dtype=object), use_na_sentinel=False)
            if len(text) >= 64 and 2 * len(table) <= len(text):
                # Repeated strings (event names): each distinct value once, codes as a buffer.
                codes = codes.astype(np.uint16 if len(table) < 2**16 else np.uint32)
                meta.append(
                    {
                        "name": str(name),
                        "dtype": codes.dtype.name,
                        "buffer": len(buffers),
                        "table": [None if v is None else str(v) for v in table],
                    }
                )
                buffers.append(np.ascontiguousarray(codes.astype(codes.dtype.newbyteorder("<"))).data.cast("B"))
            else:
                meta.append({"name": str(name), "values": text})
    return meta, buffers


def _range_kind(item: Any) -> str | None:
    """The request kind of the first plot in a json_item tagged by request_on_range, if any."""
    stack = [item]
    while stack:
        value = stack.pop()
        if isinstance(value, str):
            if value.startswith(RANGE_TAG):
                return value[len(RANGE_TAG) :]
        elif isinstance(value, Mapping):
            stack.extend(value.values())
        elif isinstance(value, (list, tuple)):
            stack.extend(value)
    return None


def _as_item(figure: Any) -> dict:
    if isinstance(figure, Mapping) and "doc" in figure and "root_id" in figure:
        return dict(figure)
    from bokeh.model import Model

    if isinstance(figure, Model):
        if figure.document is None:
            return _json_item(figure)
        from bokeh.embed import json_item

        return dict(json_item(figure))
    raise TypeError(f"expected a Bokeh model or a json_item() dict, got {type(figure).__name__}")


def _json_item(figure: Any) -> dict:
    """`bokeh.embed.json_item(figure)` of a figure in no document, in a quarter of the time:
    what `Document.to_json` writes for a document holding only `figure`, without putting
    the figure in one (adding and removing a root walks every model twice, 3 ms a figure),
    without the validation and the Python-callback search `json_item` walks every model
    for again (our figures have no Python callbacks; their tests check what they draw),
    each model by `_SetValuesSerializer`. The same item but for the document's own ids."""
    from bokeh.document import Document

    serializer = _set_values_serializer()(deferred=False)
    # A new document's settings, with ids of their own (BokehJS indexes the models of every
    # document on the page by id, and two items with one id break that index), kept alive
    # until the figure is serialized too: Bokeh's serializer knows models by id(), and one
    # freed could lend its id to a value of the figure.
    settings_model = Document()._config
    config = serializer.encode(settings_model)
    roots = serializer.encode([figure])
    doc: dict[str, Any] = {"version": bokeh.__version__, "title": "", "config": config, "roots": roots}
    defs = data_model_defs()
    if defs is not None:
        doc["defs"] = defs
    del settings_model  # (alive up to here)
    return {"target_id": None, "root_id": roots[0]["id"], "doc": doc, "version": bokeh.__version__}


def data_model_defs() -> list | None:
    """What Bokeh's `Document.to_json` writes as a document's `defs`: the DataModel classes
    defined in the process (none of ours; a notebook's other libraries may define some),
    None without any (and none before any model class was: `bokeh.model` not imported)."""
    model = sys.modules.get("bokeh.model")
    if model is None:
        return None
    data_models = _data_models(len(model.Model.model_class_reverse_map))
    return Serializer(deferred=False).encode(data_models) if data_models else None


@functools.lru_cache(maxsize=1)
def _data_models(known: int) -> list:
    """The DataModel classes Bokeh knows (its `Document.to_json` writes them), looked for
    again only when `known`, the number of model classes, changes (0.5 ms a figure)."""
    from bokeh.core.has_props import is_DataModel
    from bokeh.model import Model

    return [m for m in Model.model_class_reverse_map.values() if is_DataModel(m)]


@functools.cache
def _set_values_serializer() -> type:
    """`_SetValuesSerializer`, defined at the first figure built by Bokeh (it needs Bokeh's
    `Model`, whose import this module leaves to then)."""
    from bokeh.model import Model

    model_to_serializable = Model.to_serializable

    class _SetValuesSerializer(Serializer):
        """Bokeh's Serializer, with each model that serializes as `Model` does encoded from
        the properties set on it (`_set_values`): Bokeh 3.9's `query_properties_with_values`
        makes the default of every property, set or not, before it leaves the unset ones
        out (most of a figure's serialization). The same representation (tests compare
        every chart)."""

        def _encode(self, obj: Any) -> Any:
            if isinstance(obj, Model) and type(obj).to_serializable is model_to_serializable:
                if settings.serialize_include_defaults():  # (defaults asked for: Bokeh's own way)
                    return super()._encode(obj)
                self.add_ref(obj, obj.ref)
                rep: dict[str, Any] = {"type": "object", "name": obj.__qualified_model__, "id": obj.id}
                attributes = {key: self.encode(value) for key, value in _set_values(obj).items()}
                if attributes:
                    rep["attributes"] = attributes
                return rep
            return super()._encode(obj)

    return _SetValuesSerializer


def _set_values(model: Any) -> dict[str, Any]:
    """`model.properties_with_values(include_defaults=False)` without making the defaults it
    leaves out: the serialized properties set on the model, themed, or with a default
    Bokeh keeps per instance (a model-valued default), in the model's property order."""
    from bokeh.core.property.wrappers import PropertyValueContainer

    chosen = set(model._property_values) | set(model._unstable_default_values)
    themed = model.themed_values()
    themed_keys = set(themed) if themed is not None else set()
    chosen |= themed_keys
    out = {}
    for key in model.properties(_with_props=True):
        if key not in chosen:
            continue
        descriptor = model.lookup(key)
        if not descriptor.serialized:
            continue
        value = descriptor.get_value(model)
        if key not in themed_keys and key in model._unstable_default_values:
            if isinstance(value, PropertyValueContainer):  # (an unmodified container default)
                continue
        out[key] = value
    return out


class BokehWidget(anywidget.AnyWidget):
    """Base class of every xprof widget: Bokeh figures plus HTML, with binary data transport.

    A subclass passes its figures (name -> Bokeh model) and its HTML body to
    ``__init__`` (or sets them later with :meth:`set_figures` and the ``html``
    trait). The HTML places each figure with an element
    ``<div data-figure="NAME"></div>``; figures without one are appended in
    order. Escaping text inside ``html`` is the subclass's job
    (``html.escape``). Override :meth:`on_request`, :meth:`on_hover` and
    :meth:`on_tap` (or set ``tap_source``) to answer the browser.
    """

    _esm = WIDGET_JS if WIDGET_JS.is_file() else _MISSING_FRONT_END_ESM
    # Every widget's CSS (js/src/widget.css), scoped under each widget's root class. Without
    # the built front end there is none: the ESM above then says what to do.
    _css = WIDGET_CSS if WIDGET_CSS.is_file() else ""

    figures = traitlets.Dict(help="Figure name -> bokeh.embed.json_item() output.").tag(sync=True)
    html = traitlets.Unicode("", help="The widget's HTML body; figures go into [data-figure=NAME].").tag(sync=True)
    status = traitlets.Unicode("", help='Set by the browser: "ready" once every figure drew, or "error: ...".').tag(
        sync=True
    )
    selected = traitlets.Dict(help="{figure, source, index, id, ids} of the tapped glyph; {} when nothing is.").tag(
        sync=True
    )

    def __init__(self, figures: Mapping[str, Any] | None = None, html: str = "", **kwargs: Any) -> None:
        # For to_html: the last data sent per source name (see _record_push) and the
        # x range last asked of each range-tagged figure (see _record_range).
        self._export_pushes: dict[str, dict] = {}
        self._export_ranges: dict[str, dict] = {}
        super().__init__(html=html, **kwargs)
        if figures:
            self.set_figures(figures)
        self.on_msg(self._handle_message)

    @property
    def hosted(self) -> bool:
        """True while shown inside another widget (ProfileWidget, CaptureWidget: a HostWidget)."""
        return getattr(self, "_host_widget", None) is not None

    def open(self) -> None:
        """Open the widget's comm, unless it is built to be shown inside a host (see built_without_comm)."""
        if not _without_comm.get():
            super().open()

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
        plot.tags = [t for t in plot.tags if not (isinstance(t, str) and t.startswith(RANGE_TAG))] + [RANGE_TAG + kind]
        return plot

    def set_x_range(self, figure: str, start: float, end: float, y: float | None = None) -> None:
        """Move the x range of ``figure``'s plots tagged with :meth:`request_on_range` in every
        view; each view then sends its range request for the new window. ``y``: a y value
        the views scroll to (their y range's length kept) where it is out of view."""
        message = {"type": "range", "figure": str(figure), "start": float(start), "end": float(end)}
        if y is not None:
            message["y"] = float(y)
        self.send(message)
        previous = self._export_ranges.get(str(figure), {})
        params = {**previous.get("params", {}), "figure": str(figure), "x_start": float(start), "x_end": float(end)}
        self._export_ranges[str(figure)] = {"kind": previous.get("kind"), "params": params, "answered": False}

    def push_columns(self, source_name: str, columns: Mapping[str, Any], mode: str = "replace") -> None:
        """Replace (``mode="replace"``) or update (``"update"``: merge columns) the data of
        every ``ColumnDataSource`` named ``source_name`` in every view of this widget."""
        if mode not in ("replace", "update"):
            raise ValueError(f"mode must be 'replace' or 'update', not {mode!r}")
        meta, buffers = encode_columns(columns)
        self._record_push(source_name, mode, meta, buffers)
        self.send({"type": "push", "source": source_name, "mode": mode, "columns": meta}, buffers)

    def on_request(self, kind: str, params: dict) -> tuple[dict, Mapping[str, Any] | None]:
        """Answer a browser request. Override in subclasses.

        Returns ``(content, columns)``: ``content`` is JSON-able; if it holds
        ``"source": NAME`` the browser puts ``columns`` (name -> 1-D array) into
        the ColumnDataSource of that name (``"mode"``: "replace" or "update").
        ``"also": {NAME: columns}`` replaces other sources in the same reply, so
        the page draws them together (one frame, not one per source).
        Raise to send an error back; the kernel stays up.
        """
        raise NotImplementedError(f"{type(self).__name__} does not answer {kind!r} requests")

    def on_hover(self, source: str, id: Any, figure: str) -> None:
        """Called when the hovered glyph of the named ``source`` changes (``id`` None: none). Override."""

    # The named source whose tapped glyph selects one row, and the trait that holds the
    # selected row's details ({} when none); see on_tap.
    tap_source: str | None = None
    tap_selection: str | None = None

    @traitlets.observe("selected")
    def _selected_changed(self, change: Any) -> None:
        self.on_tap(change["new"] or {})

    def on_tap(self, sel: dict) -> None:
        """Called when a glyph is tapped (``sel``: what ``selected`` holds) or the
        selection is cleared (``{}``). By default a tap on a glyph of ``tap_source``
        calls :meth:`select_tapped` with its id, a tap on nothing :meth:`clear_tapped`.
        Override for more."""
        if self.tap_source is not None and sel.get("source") == self.tap_source and sel.get("id") is not None:
            self.select_tapped(int(sel["id"]))
        elif not sel:
            self.clear_tapped()

    def select_tapped(self, id: int) -> None:
        """Select the row `id` of ``tap_source`` (tapped in a chart). Override."""

    def clear_tapped(self) -> None:
        """Drop the selection (a tap on no glyph): by default empty the ``tap_selection``
        trait and draw the HTML again (``_html()``)."""
        if self.tap_selection and getattr(self, self.tap_selection):
            setattr(self, self.tap_selection, {})
            self.html = self._html()  # type: ignore[attr-defined]

    # ---- static export -----------------------------------------------------

    def to_html(self, path: str | os.PathLike | None = None, *, title: str | None = None) -> str | pathlib.Path:
        """The current view as one self-contained HTML page, for sharing (e.g. in a bug report).

        The page holds this widget's front end and BokehJS inline, its synced
        state (figures, HTML, selection) and the last data Python sent to the
        page for each named source (pushes, and replies to the page's
        requests), with the x range last shown by each range-tagged figure.
        It opens from a file with no kernel and no network (nothing is loaded from
        a URL): zoom, pan, hover and tap work on what is there; anything that
        would ask Python for new data does nothing (a banner says so).

        If a range was set from Python (:meth:`set_x_range`) and no view has
        answered for it yet, the range's data is computed first by calling
        :meth:`on_request` as a view would. Size: about 1.33 MB (BokehJS) plus the
        widget's figures and data.

        Returns the HTML text when ``path`` is None; otherwise writes it there
        (UTF-8) and returns the path as a :class:`pathlib.Path`, so that a
        notebook cell ending in ``w.to_html("bug.html")`` shows the path, not
        the page.
        """
        return export_html([self._export_parts()], path, title=title)

    def _export_parts(self) -> dict[str, Any]:
        """What a static page needs of this widget: its class name (`widget`), `subject`,
        front end (`esm`, bytes) and `css`, synced `state`, x `ranges` and recorded
        `pushes` (see :meth:`to_html`; a ProfileWidget puts several in one page)."""
        self._refresh_ranges()
        state = self.get_state()
        esm = state.get("_esm") or _MISSING_FRONT_END_ESM
        css = state.get("_css") if isinstance(state.get("_css"), str) else ""
        synced = {}
        for name, value in state.items():
            if name.startswith("_") or name in ("status", "layout"):
                continue  # the page's front end sets status itself; layout is another widget
            try:
                json.dumps(value, allow_nan=False)
            except (TypeError, ValueError):
                continue
            synced[name] = value
        synced["status"] = ""
        return {
            "widget": type(self).__name__,
            "subject": self._export_subject(),
            "esm": esm.encode("utf-8") if isinstance(esm, str) else bytes(esm),
            "css": css,
            "state": synced,
            "ranges": [
                {"figure": figure, "start": entry["params"]["x_start"], "end": entry["params"]["x_end"]}
                for figure, entry in self._export_ranges.items()
                if figure in self.figures
            ],
            "pushes": self._recorded_pushes(),
        }

    def _export_subject(self) -> str:
        """What the page shows, for its title and banner: the run (or runs) and host."""
        parts = []
        name = getattr(getattr(self, "run", None), "name", None)
        result = getattr(self, "result", None)
        if name:
            parts.append(f"run {name}")
        elif getattr(result, "name_a", None) and getattr(result, "name_b", None):
            parts.append(f"{getattr(result, 'name_a', '')} vs {getattr(result, 'name_b', '')}")
        if self.has_trait("host") and getattr(self, "host", None):
            parts.append(f"host {self.host}")
        return ", ".join(str(p) for p in parts)

    def _record_push(self, source: str, mode: str, meta: list[dict], buffers: list) -> None:
        """Keep the last data sent to ``source`` (an "update" merges into it) for :meth:`to_html`.
        Buffers are copied: they may be views of arrays the caller changes later."""
        columns = {}
        for column in meta:
            column = dict(column)
            data = bytes(buffers[column.pop("buffer")]) if "buffer" in column else None
            columns[column["name"]] = (column, data)
        previous = self._export_pushes.pop(source, None)  # re-inserted last: replayed in the order sent
        if mode == "update" and previous is not None:
            previous["columns"].update(columns)
            self._export_pushes[source] = previous
        else:
            self._export_pushes[source] = {"mode": mode, "columns": columns}

    def _recorded_pushes(self) -> list[tuple[dict, list[bytes]]]:
        """The recorded data as push messages with their buffers."""
        pushes = []
        for source, record in self._export_pushes.items():
            meta: list[dict] = []
            buffers: list = []
            for column, data in record["columns"].values():
                column = dict(column)
                if data is not None:
                    column["buffer"] = len(buffers)
                    buffers.append(data)
                meta.append(column)
            pushes.append(({"type": "push", "source": source, "mode": record["mode"], "columns": meta}, buffers))
        return pushes

    def _encode_also(self, also: Mapping[str, Mapping[str, Any]], buffers: list) -> list[dict]:
        """Other sources a reply replaces too ({source: columns}): their wire entries, with their
        buffers appended to ``buffers``. The page applies them with the main source, in one frame."""
        entries = []
        for source, columns in also.items():
            meta, own = encode_columns(columns)
            self._record_push(str(source), "replace", meta, own)
            for column in meta:
                if "buffer" in column:
                    column["buffer"] += len(buffers)
            buffers.extend(own)
            entries.append({"source": str(source), "mode": "replace", "columns": meta})
        return entries

    def _record_range(self, kind: str, params: dict) -> None:
        """Note the x range a view asked about (a request from a range-tagged figure), answered."""
        if "figure" in params and "x_start" in params and "x_end" in params:
            self._export_ranges[str(params["figure"])] = {"kind": kind, "params": params, "answered": True}

    def _refresh_ranges(self) -> None:
        """Compute the data of ranges set from Python that no view has asked about yet."""
        for figure, entry in list(self._export_ranges.items()):
            if entry["answered"] or figure not in self.figures:
                continue
            kind = entry["kind"] or _range_kind(self.figures[figure])
            if kind is None:
                continue
            params = {"y_start": None, "y_end": None, "width_px": None, **entry["params"]}
            try:
                result, columns = self.on_request(kind, params)
                result = dict(result or {})
                self._encode_also(result.pop("also", None) or {}, [])
                if isinstance(columns, Mapping) and result.get("source") is not None:
                    meta, buffers = encode_columns(columns)
                    self._record_push(str(result["source"]), result.get("mode", "replace"), meta, buffers)
            except Exception:
                log.warning(
                    "xprof_widgets: %s could not compute the %r range for export",
                    type(self).__name__,
                    figure,
                    exc_info=True,
                )
                continue
            self._export_ranges[figure] = {"kind": kind, "params": params, "answered": True}

    @traitlets.observe("figures")
    def _forget_recorded_data(self, change: Any) -> None:
        # New figures are embedded afresh in every view: data sent to the old ones is gone there too.
        self._export_pushes = {}
        self._export_ranges = {}

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
                self.on_hover(content.get("source") or "", content.get("id"), content.get("figure") or "")
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
            also = result.pop("also", None) or {}
            if isinstance(columns, Mapping):
                reply["columns"], buffers = encode_columns(columns)
                if reply["source"] is not None:
                    self._record_push(str(reply["source"]), reply["mode"], reply["columns"], buffers)
            elif columns:  # raw buffers, passed through for a subclass with its own format
                buffers = [memoryview(b) for b in columns]
                reply["columns"] = []
            if also:
                reply["also"] = self._encode_also(also, buffers)
            self._record_range(str(content.get("kind")), dict(content.get("params") or {}))
        except Exception as error:
            log.exception("xprof_widgets: %s request %r failed", type(self).__name__, content.get("kind"))
            reply["error"] = f"{type(error).__name__}: {error}"
        self.send(reply, buffers)
