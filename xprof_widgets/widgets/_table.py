"""Sortable, filterable HTML tables of a DataFrame, for the table tools (kernel stats,
framework op stats, roofline model).

A table is a list of `Column`s over a DataFrame whose index is the row's stable id.
Clicking a header sends a `sort` request with `{"column": key}`; the widget toggles
the direction when the column is already the sorted one (`SortedTable.sort_on`). Every cell
goes through `esc`; JSON in attributes through `data_json`.
Their look: js/src/styles/table.css.
"""

from __future__ import annotations

import contextlib
import csv
import io
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import ClassVar

import numpy as np
import pandas as pd
import traitlets

from ._html import data_json, esc, options

# Values a text field sorts ascending by default; numbers (and booleans) sort descending.
_TEXT_KINDS = ("text", "code")


@dataclass(frozen=True)
class Column:
    """One column of a table: DataFrame column `key`, its `header`, and how its values
    read: "text", "code" (monospace text that wraps), "int", "float" (`digits`),
    "pct" (a fraction 0..1 shown as %), "bool" (Yes / No). A click on its header sorts
    numbers largest first and text A-Z first, unless `descending_first` says otherwise.
    `clamp` keeps long text (a kernel name of 500 characters) to that many lines, the
    whole value in the cell's title."""

    key: str
    header: str
    kind: str = "float"
    digits: int = 2
    wrap: bool = False
    descending_first: bool | None = None  # None: numbers descending, text ascending
    clamp: int = 0  # long text shows this many lines (0: all), the whole of it in its title
    sticky: bool = False  # stays at the left edge while the rest of a wide table scrolls

    def cell(self, value) -> str:
        """The `<td>` of one value."""
        if self.kind in _TEXT_KINDS:
            classes = " ".join(c for c, on in (("wrap", self.wrap), ("sticky", self.sticky)) if on)
            cls = f' class="{classes}"' if classes else ""
            text = esc(value)
            if self.clamp and len(str(value)) > 60 * self.clamp:
                text = f'<div class="xw-clamp" style="-webkit-line-clamp: {self.clamp}" title="{text}">{text}</div>'
            if self.kind == "code":
                text = f"<code>{text}</code>"
            return f"<td{cls}>{text}</td>"
        if self.kind == "bool":
            return f"<td>{'Yes' if bool(value) else 'No'}</td>"
        try:
            number = float(value)
        except (TypeError, ValueError):
            return f"<td>{esc(value)}</td>"
        if math.isnan(number):
            return '<td class="num">n/a</td>'
        if self.kind == "int":
            return f'<td class="num">{int(number):,}</td>'
        if self.kind == "pct":
            return f'<td class="num">{100 * number:,.{self.digits}f} %</td>'
        return f'<td class="num">{number:,.{self.digits}f}</td>'


def natural_descending(columns, key) -> bool:
    """Whether column `key` first sorts descending: numbers yes (largest first), text no."""
    for c in columns:
        if c.key == key:
            return c.kind not in _TEXT_KINDS if c.descending_first is None else c.descending_first
    raise KeyError(key)


@cache
def _column_table() -> dict[str, list[Column]]:
    table: dict[str, list[Column]] = {}
    text = (resources.files(__package__) / "table_columns.csv").read_text(encoding="utf-8")
    for row in csv.DictReader(io.StringIO(text, newline="")):
        look = dict(word.partition("=")[::2] for word in row["look"].split())
        column = Column(
            row["key"],
            row["header"],
            row["kind"],
            int(row["digits"] or 2),
            wrap="wrap" in look,
            descending_first=True if "descending" in look else False if "ascending" in look else None,
            clamp=int(look.get("clamp", 0)),
            sticky="sticky" in look,
        )
        table.setdefault(row["tool"], []).append(column)
    return table


def table_columns(tool: str) -> tuple[Column, ...]:
    """The columns of a table tool (XProf's name, e.g. "kernel_stats"), in order, as
    `table_columns.csv` beside this module lists them: key, XProf's header, kind, digits
    and look ("wrap", "ascending" or "descending" for the first click, "clamp=N", "sticky":
    the column stays in view while a wide table scrolls sideways)."""
    return tuple(_column_table()[tool])


class SortedTable(traitlets.HasTraits):
    """How a widget's table is sorted and how long it is, as the user changes it.

    A table widget mixes this in, sets `columns` and its own `sort_by` (an `Enum` of
    the column keys) and `sort_descending` (the natural direction of its default
    column), and redraws its table in `_redraw_table`. A new column starts in its
    natural direction (`natural_descending`); a click on the sorted column's header
    flips it (`sort_on`). Inside `quietly()` trait changes redraw nothing, nor do they
    before the widget sets `_ready` (in its constructor, once its data is in place).
    """

    columns: ClassVar[Sequence[Column]] = ()
    # Set by the widget (traits of its own: the column keys differ per table).
    sort_by: str
    sort_descending: bool
    # Requests that set the text trait of the same name to the page control's value.
    text_requests: ClassVar[tuple[str, ...]] = ()
    top_n = traitlets.Int(100, min=1, help="Table rows shown (all are in `table`).").tag(sync=True)
    hidden_columns = traitlets.List(
        traitlets.Unicode(), help="Keys of the table columns the user hid (the Columns menu)."
    ).tag(sync=True)
    _quiet = False
    _columns_open = False  # the Columns menu was just used: drawn open
    _ready = False  # the widget sets it once its data is in place: no redraw before

    def table_request(self, kind: str, params: dict) -> bool:
        """Answer a request every table widget takes: "sort" (a header clicked), "top_n",
        or one of `text_requests`. False for any other kind (the widget's own)."""
        if kind == "sort":
            self.sort_on(str(params["column"]))
        elif kind == "top_n":
            self.top_n = int(params["value"])
        elif kind == "show_column":
            key, show = str(params["column"]), bool(params.get("value"))
            hidden = [k for k in self.hidden_columns if k != key] + ([] if show else [key])
            self._columns_open = True
            self.hidden_columns = hidden
        elif kind in self.text_requests:
            setattr(self, kind, str(params.get("value", "")))
        else:
            return False
        return True

    def on_request(self, kind: str, params: dict) -> tuple[dict, None]:
        """A table widget's requests: `table_request`'s; a widget with more extends it."""
        if not self.table_request(kind, params):
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    def top_n_control(self, choices: Sequence[int]) -> str:
        """The "Show top" select (`choices`, and the current `top_n` if it is not one),
        then the Columns menu (`columns_control`)."""
        shown = [str(v) for v in sorted(set(choices) | {self.top_n})]
        return (
            '<label>Show top <select data-request="top_n" data-testid="top-n">'
            f"{options(shown, str(self.top_n))}</select></label>" + self.columns_control()
        )

    def columns_control(self, columns: Sequence[Column] | None = None) -> str:
        """The Columns menu: a checkbox per column (`columns`, the widget's by default) that
        shows or hides it; the sticky name column always stays."""
        columns = self.all_columns() if columns is None else columns
        hidden = set(self.hidden_columns)
        is_open = " open" if self._columns_open else ""
        self._columns_open = False  # open again after a toggle (the page is drawn anew), then as the user leaves it
        boxes = "".join(
            f'<label><input type="checkbox" data-request="show_column" '
            f'data-params="{data_json({"column": c.key})}" data-col="{esc(c.key)}"'
            f"{'' if c.key in hidden else ' checked'}> {esc(c.header)}</label>"
            for c in columns
            if not c.sticky
        )
        count = sum(1 for c in columns if c.key in hidden and not c.sticky)
        summary = f"Columns ({count} hidden)" if count else "Columns"
        return (
            f'<details class="xw-columns" data-testid="columns"{is_open}><summary>{summary}</summary>'
            f'<div class="xw-columns-list">{boxes}</div></details>'
        )

    def all_columns(self) -> Sequence[Column]:
        """The columns the table can show (a widget whose columns depend on the run overrides)."""
        return self.columns

    def visible(self, columns: Sequence[Column]) -> list[Column]:
        """`columns` less the ones the user hid (a sticky column always stays)."""
        hidden = set(self.hidden_columns)
        return [c for c in columns if c.sticky or c.key not in hidden]

    @contextlib.contextmanager
    def quietly(self) -> Iterator[None]:
        """Change traits without a redraw per change (the caller redraws once)."""
        self._quiet = True
        try:
            yield
        finally:
            self._quiet = False

    def sort_on(self, column: str) -> None:
        """A click on `column`'s header: flip the direction if sorted on it, else sort on it."""
        if column == self.sort_by:
            self.sort_descending = not self.sort_descending
        else:
            self.sort_by = column

    @traitlets.observe("sort_by")
    def _natural_direction(self, change):
        with self.quietly():
            self.sort_descending = natural_descending(self.columns, change["new"])
        self._redraw_table()

    @traitlets.observe("sort_descending", "top_n", "hidden_columns")
    def _sort_changed(self, change):
        if not self._quiet:
            self._redraw_table()

    # The widget's: its page, and whether it has no data (then its page is a sentence).
    html: str

    def _html(self) -> str:
        raise NotImplementedError

    @property
    def empty(self) -> bool:
        raise NotImplementedError

    def _redraw_table(self) -> None:
        """Redraw the page (the table is part of it) once the data is in place, not inside
        `quietly()`, and not for a widget without data. A widget may do more."""
        if self._ready and not self._quiet and not self.empty:
            self.html = self._html()

    def sorted(self, frame: pd.DataFrame) -> pd.DataFrame:
        """`frame` in the table's order (`sort_frame` on `sort_by`, text case-insensitively)."""
        text = any(c.key == self.sort_by and c.kind in _TEXT_KINDS for c in self.columns)
        return sort_frame(frame, self.sort_by, self.sort_descending, text)

    def table_html(self, frame, testid, *, columns=None, total_rows=None, select_in=None, selected=None) -> str:
        """The `<table>` of `frame` (already filtered, sorted and cut) over `columns` (the
        widget's by default): a header per column that sorts on click (arrow on the sorted
        one), a row per frame row. `select_in` = (figure, source): a click on a row
        selects its id (the frame's index) in that source of that figure; `selected` is
        the id drawn as selected. `data-rows` is `total_rows` (the rows that matched),
        `data-shown` the rows drawn."""
        columns = self.visible(self.columns if columns is None else columns)
        head = []
        for c in columns:
            on = c.key == self.sort_by
            arrow = f' <span class="xw-arrow">{"▼" if self.sort_descending else "▲"}</span>' if on else ""
            classes = " ".join(k for k, yes in (("sorted", on), ("sticky", c.sticky)) if yes)
            cls = f' class="{classes}"' if classes else ""
            head.append(
                f'<th data-request="sort" data-params="{data_json({"column": c.key})}" data-col="{esc(c.key)}"{cls}>'
                f'<span class="xw-th">{esc(c.header)}{arrow}</span></th>'
            )
        body = []
        records = frame[[c.key for c in columns]].itertuples(index=True, name=None)
        for rid, *values in records:
            extra = ""
            if select_in is not None:
                figure, source = select_in
                extra = f' data-select="{data_json({"figure": figure, "source": source, "id": int(rid)})}"'
            cls = ' class="sel"' if selected is not None and rid == selected else ""
            cells = "".join(c.cell(v) for c, v in zip(columns, values))
            body.append(f'<tr data-row="{esc(rid)}"{cls}{extra}>{cells}</tr>')
        total = len(frame) if total_rows is None else total_rows
        return (
            f'<table class="xw-table" data-testid="{esc(testid)}" data-rows="{total}" data-shown="{len(frame)}">'
            f"<thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(body)}</tbody></table>"
        )


def sort_frame(frame: pd.DataFrame, key: str, descending: bool, text: bool) -> pd.DataFrame:
    """`frame` sorted on `key`, ties kept in their order (stable); text case-insensitively."""
    if frame.empty:
        return frame
    values = frame[key]
    if text:
        order = values.astype(str).str.lower().to_numpy(object)
        codes = pd.Series(order).rank(method="dense").to_numpy(np.float64)
    else:
        codes = pd.to_numeric(values, errors="coerce").to_numpy(np.float64)
        codes = np.where(np.isnan(codes), -np.inf, codes)  # unknown values last when descending
    keys = -codes if descending else codes
    return frame.iloc[np.lexsort((np.arange(len(frame)), keys))]


def contains(values: pd.Series, needle: str) -> np.ndarray:
    """Rows whose text holds `needle` (case-insensitive, plain text, not a pattern)."""
    if not needle:
        return np.ones(len(values), bool)
    return values.astype(str).str.contains(needle, case=False, regex=False).to_numpy(bool)
