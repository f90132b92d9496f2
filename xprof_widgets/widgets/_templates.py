"""Charts drawn from a template: a figure's json_item made once by Bokeh, then filled.

Building a chart's Bokeh models in Python costs 5-10 ms a figure (every property's
default made and checked, about 30 models for a bar chart), more than the analysis
behind some tools on a profile of tens of MB. A `ChartTemplate` names the values a chart
is drawn from (its title, its layout numbers, its data columns) and a function that
builds the figure from them with Bokeh. `tools/make_chart_templates.py` builds each
template's figure once, with a marker value for each parameter, and writes its item
(`bokeh.embed.json_item`'s, by `_bokeh._json_item`) to `chart_templates.json` with where
each marker landed. Drawing then copies that item and writes the values there, each
encoded by Bokeh's own serializer, and gives its models fresh ids: the same item Bokeh
builds, in a tenth of a millisecond.

Where the file was made for another Bokeh than the one installed, or has no such
template, the figure is built by Bokeh as before. The tests compare the two items for
every template on many values, and the file with a fresh build.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import bokeh
import numpy as np
from bokeh.core.serialization import Serializer
from bokeh.settings import settings
from bokeh.util.serialization import make_id

#: The templates' items, made by `tools/make_chart_templates.py`.
TEMPLATE_FILE = Path(__file__).with_name("chart_templates.json")
#: Every template defined, by name (the widget modules define theirs when imported).
TEMPLATES: dict[str, ChartTemplate] = {}

_MARK = 987_650_000  # marker numbers start here: no chart draws such a value
_MARK_TEXT = "\\u0001xw:"  # how a marker text starts, as JSON writes it


class ChartTemplate:
    """A chart drawn from `params` ({name: kind}) by `build(**values)` (a Bokeh figure).

    Kinds: "str", "int", "float", "floats" (a list of floats), "labels" (a dict of int
    to str: an axis' label overrides), "pairs" (a list of (str, str): a hover's
    tooltips), or a dict {column: numpy dtype or str} for a
    `ColumnDataSource`'s data (str: a list of strings). Every value the figure depends
    on must be a parameter: the template holds the rest as the first build made it."""

    def __init__(self, name: str, build: Callable[..., Any], params: Mapping[str, Any]) -> None:
        self.name, self.build, self.params = name, build, dict(params)
        TEMPLATES[name] = self

    def markers(self) -> dict[str, Any]:
        """A marker value per parameter, each its own (found again in the built item)."""
        out: dict[str, Any] = {}
        for k, (name, kind) in enumerate(self.params.items()):
            mark = _MARK + 16 * k
            if kind == "str":
                out[name] = f"\x01xw:{name}"
            elif kind == "int":
                out[name] = mark
            elif kind == "float":
                out[name] = mark + 0.5
            elif kind == "floats":
                out[name] = [mark + 0.25]
            elif kind == "labels":
                out[name] = {mark: f"\x01xw:{name}"}
            elif kind == "pairs":
                out[name] = [(f"\x01xw:{name}", f"\x01xw:{name}")]
            elif isinstance(kind, Mapping):
                out[name] = {
                    column: [f"\x01xw:{name}.{column}"] if dtype is str else np.full(1, mark + j, dtype=dtype)
                    for j, (column, dtype) in enumerate(kind.items())
                }
            else:
                raise ValueError(f"template {self.name}: parameter {name} of unknown kind {kind!r}")
        return out

    def made(self) -> dict[str, Any]:
        """{"item": the item built with the markers, "paths": {parameter: [its places]}}."""
        from ._bokeh import _json_item

        marks = self.markers()
        item = _as_json(_json_item(self.build(**marks)))
        item["doc"].pop("defs", None)  # (the process' DataModel classes: written at each draw)
        paths = {}
        for name, mark in marks.items():
            found = list(_paths_of(item, _as_json(_encoded(mark))))
            if not found:
                raise ValueError(f"template {self.name}: parameter {name} is not in the chart it builds")
            paths[name] = found
        # A marker inside a longer text (a parameter the build wrote into a string of its
        # own) would be drawn as the marker: every value must be a whole JSON value.
        rest = _as_json(item)
        for places in paths.values():
            for path in places:
                node = rest
                for key in path[:-1]:
                    node = node[key]
                node[path[-1]] = None
        if _MARK_TEXT in json.dumps(rest):
            raise ValueError(f"template {self.name}: a parameter is written inside other text of the chart")
        return {"item": item, "paths": paths}

    def item(self, **values: Any) -> dict[str, Any]:
        """The chart's json_item for these values: the template's, filled; else built."""
        from ._bokeh import _json_item, data_model_defs

        if set(values) != set(self.params):
            raise TypeError(f"template {self.name} takes {sorted(self.params)}, not {sorted(values)}")
        for name, kind in self.params.items():  # (a column the template lacks would not be drawn alike)
            if isinstance(kind, Mapping) and set(values[name]) != set(kind):
                raise TypeError(f"template {self.name}: {name} has columns {sorted(kind)}, not {sorted(values[name])}")
        shipped = _shipped().get(self.name)
        if shipped is None or settings.serialize_include_defaults():  # (defaults asked for: Bokeh's own)
            return _json_item(self.build(**values))
        text, paths = shipped
        # A fresh copy (parsing a few kB costs less than a deep copy) with fresh model ids:
        # BokehJS indexes the models of every document on the page by id.
        fresh: dict[str, str] = {}
        text = _MODEL_ID.sub(lambda m: m.group(1) + fresh.setdefault(m.group(2), make_id()) + '"', text)
        item = json.loads(text)
        for name, places in paths.items():
            # (No label overrides, the property's default, Bokeh leaves out: so does this.)
            default = self.params[name] == "labels" and not values[name]
            encoded = _encoded(values[name])
            for path in places:
                node = item
                for key in path[:-1]:
                    node = node[key]
                if default:
                    del node[path[-1]]
                else:
                    node[path[-1]] = encoded
        defs = data_model_defs()
        if defs is not None:  # (as Bokeh writes a document: after its roots)
            item["doc"]["defs"] = defs
        return item


#: A model id in an item's JSON text (the templates' markers hold no such text).
_MODEL_ID = re.compile(r'("(?:id|root_id)": ")(p\d+)"')


class _Serializer(Serializer):
    """Bokeh's Serializer, a list of texts taken as it is (what Bokeh writes for each text
    is the text: its walk, an encode call an element, was most of a fill with a thousand
    rows of text, 20 ms)."""

    def _encode_list(self, obj: list[Any]) -> Any:
        if all(type(item) is str for item in obj):
            return list(obj)
        return super()._encode_list(obj)


def _encoded(value: Any) -> Any:
    """`value` as Bokeh writes it into a document (plain values: no models, no buffers)."""
    return _Serializer(deferred=False).encode(value)


def _as_json(value: Any) -> Any:
    """`value` as JSON gives it back (tuples as lists): how items are compared."""
    return json.loads(json.dumps(value))


def _paths_of(node: Any, wanted: Any, path: tuple = ()) -> Any:
    """The paths (keys and indices from `node`) of every part of `node` equal to `wanted`."""
    if _same(node, wanted):
        yield list(path)
        return
    if isinstance(node, dict):
        for key, value in node.items():
            yield from _paths_of(value, wanted, (*path, key))
    elif isinstance(node, list):
        for k, value in enumerate(node):
            yield from _paths_of(value, wanted, (*path, k))


def _same(a: Any, b: Any) -> bool:
    """Equal as JSON values (1 and 1.0 and True are not)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


@functools.cache
def _shipped() -> dict[str, tuple[str, dict]]:
    """{template name: (its item as JSON text, its paths)} from TEMPLATE_FILE, where it was
    made for the Bokeh installed; else {} (every chart is then built by Bokeh)."""
    try:
        found = json.loads(TEMPLATE_FILE.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    if not isinstance(found, dict) or found.get("bokeh") != bokeh.__version__:
        return {}
    return {name: (t["text"], t["paths"]) for name, t in found.get("templates", {}).items()}


def made_file() -> dict[str, Any]:
    """TEMPLATE_FILE's content for every template the tool widgets define
    (`tools/make_chart_templates.py`)."""
    import importlib

    from ..tools import TOOLS

    for tool in TOOLS:  # (each widget module defines its templates when imported)
        importlib.import_module(tool.module, "xprof_widgets")
    templates = {}
    for name in sorted(TEMPLATES):
        made = TEMPLATES[name].made()
        # (Each item as JSON text: a process' first chart reads the file once, 0.3 ms, not
        # parsed and written again, 6 ms for all.)
        templates[name] = {"text": json.dumps(made["item"]), "paths": made["paths"]}
    return {"bokeh": bokeh.__version__, "templates": templates}
