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
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import pandas as pd
import traitlets

from ._html import data_json, esc

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

    def cell(self, value) -> str:
        """The `<td>` of one value."""
        if self.kind in _TEXT_KINDS:
            cls = ' class="wrap"' if self.wrap else ""
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


class SortedTable(traitlets.HasTraits):
    """How a widget's table is sorted and how long it is, as the user changes it.

    A table widget mixes this in, sets `columns` and its own `sort_by` (an `Enum` of
    the column keys) and `sort_descending` (the natural direction of its default
    column), and redraws its table in `_redraw_table`. A new column starts in its
    natural direction (`natural_descending`); a click on the sorted column's header
    flips it (`sort_on`). Inside `quietly()` trait changes redraw nothing.
    """

    columns: ClassVar[Sequence[Column]] = ()
    # Requests that set the text trait of the same name to the page control's value.
    text_requests: ClassVar[tuple[str, ...]] = ()
    top_n = traitlets.Int(100, min=1, help="Table rows shown (all are in `table`).").tag(sync=True)
    _quiet = False

    def table_request(self, kind: str, params: dict) -> bool:
        """Answer a request every table widget takes: "sort" (a header clicked), "top_n",
        or one of `text_requests`. False for any other kind (the widget's own)."""
        if kind == "sort":
            self.sort_on(str(params["column"]))
        elif kind == "top_n":
            self.top_n = int(params["value"])
        elif kind in self.text_requests:
            setattr(self, kind, str(params.get("value", "")))
        else:
            return False
        return True

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

    @traitlets.observe("sort_descending", "top_n")
    def _sort_changed(self, change):
        if not self._quiet:
            self._redraw_table()

    def _redraw_table(self) -> None:
        raise NotImplementedError


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


def table_html(frame, columns, sort_by, descending, testid, total_rows=None, row_attrs=None, selected=None):
    """The `<table>` of `frame` (already filtered, sorted and cut): a header per column that
    sorts on click (arrow on the sorted one), a row per frame row. `row_attrs(id)` gives
    extra attributes of a row (its id is the frame's index); `selected` is the id
    drawn as selected. `data-rows` is `total_rows` (the rows that matched), `data-shown`
    the rows drawn."""
    head = []
    for c in columns:
        on = c.key == sort_by
        arrow = f' <span class="xw-arrow">{"▼" if descending else "▲"}</span>' if on else ""
        head.append(
            f'<th data-request="sort" data-params="{data_json({"column": c.key})}" data-col="{esc(c.key)}"'
            f'{" class=sorted" if on else ""}><span class="xw-th">{esc(c.header)}{arrow}</span></th>'
        )
    body = []
    records = frame[[c.key for c in columns]].itertuples(index=True, name=None)
    for rid, *values in records:
        extra = row_attrs(rid) if row_attrs is not None else ""
        cls = ' class="sel"' if selected is not None and rid == selected else ""
        cells = "".join(c.cell(v) for c, v in zip(columns, values))
        body.append(f'<tr data-row="{esc(rid)}"{cls}{extra}>{cells}</tr>')
    total = len(frame) if total_rows is None else total_rows
    return (
        f'<table class="xw-table" data-testid="{esc(testid)}" data-rows="{total}" data-shown="{len(frame)}">'
        f"<thead><tr>{''.join(head)}</tr></thead><tbody>{''.join(body)}</tbody></table>"
    )
