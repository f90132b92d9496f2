"""HostWidget: a tool widget shown inside another widget's view, through one comm.

ProfileWidget and CaptureWidget put controls (selectors, a form) above a tool
widget. They are anywidgets, not ipywidgets containers, so that they run
wherever anywidget does (JupyterLab, Notebook, VS Code, Colab, marimo): the
host's HTML is its own frame around the tool's HTML, its figures are the
tool's figures, and the messages of the tool (data pushes, replies to the
page's requests, taps, hovers) travel over the host's comm. The tool widget
itself is an ordinary one (`host.current`): its traits and methods work as
when it is shown alone, but it is built without a comm of its own
(`built_without_comm`: marimo lets a comm open only while a cell runs, and a host
builds tools when the page asks) and its messages go to the host's view.
"""

from __future__ import annotations

from typing import Any

import traitlets

from ._bokeh import BokehWidget


class HostWidget(BokehWidget):
    """A BokehWidget that shows a tool widget (`current`) inside its own frame.

    Subclasses implement `_frame(tool_html)`, the page's HTML around the tool's, list
    the request kinds they answer themselves in `OWN_REQUESTS` (others go to the
    tool), and call `_host(tool)` to change the tool shown (None: only the frame).
    """

    OWN_REQUESTS: frozenset = frozenset()

    def __init__(self, **kwargs: Any) -> None:
        self._tool: BokehWidget | None = None
        super().__init__(**kwargs)

    @property
    def current(self) -> BokehWidget | None:
        """The tool widget shown, or None."""
        return self._tool

    # --- what subclasses use ----------------------------------------------------------

    def _host(self, tool: BokehWidget | None) -> None:
        """Show `tool` (a BokehWidget) in the frame, or nothing (None)."""
        old = self._tool
        if old is tool:
            self._compose()
            return
        if old is not None:
            old.unobserve(self._follow_tool, names=["html", "figures", "selected"])
            old.__dict__.pop("send", None)  # its messages go to its own comm again
            old._host_widget = None
        self._tool = tool
        if tool is not None:
            tool.send = self._send_from_tool  # pushes and replies reach this widget's views
            tool._host_widget = self
            tool.observe(self._follow_tool, names=["html", "figures", "selected"])
        self.figures = dict(tool.figures) if tool is not None else {}
        self.selected = dict(tool.selected) if tool is not None else {}
        self._compose()

    def _compose(self) -> None:
        """Redraw the page: the frame around the tool's HTML."""
        self.html = self._frame(self._tool.html if self._tool is not None else "")

    def _frame(self, tool_html: str) -> str:
        raise NotImplementedError

    # --- plumbing -----------------------------------------------------------------------

    def _send_from_tool(self, content: Any, buffers: Any = None) -> None:
        BokehWidget.send(self, content, buffers)

    def _follow_tool(self, change: Any) -> None:
        if change["name"] == "figures":
            self.figures = dict(change["new"])
        elif change["name"] == "html":
            self._compose()
        elif change["name"] == "selected" and change["new"] != self.selected:
            self.selected = dict(change["new"])

    @traitlets.observe("selected")
    def _selected_to_tool(self, change: Any) -> None:
        if self._tool is not None and change["new"] != self._tool.selected:
            self._tool.selected = dict(change["new"])

    def _handle_message(self, widget: Any, content: Any, buffers: list) -> None:
        own = isinstance(content, dict) and (
            content.get("type") == "load-bokeh"
            or (content.get("type") == "request" and content.get("kind") in self.OWN_REQUESTS)
        )
        if own or self._tool is None:
            super()._handle_message(widget, content, buffers)
        else:  # the tool answers, through this widget's comm (see _host)
            self._tool._handle_message(self._tool, content, buffers)

    def on_request(self, kind: str, params: dict) -> tuple[dict, Any]:
        raise ValueError(f"unknown request {kind!r}")

    def to_html(self, path=None, **kwargs):
        """The tool shown as one self-contained HTML page (see `BokehWidget.to_html`)."""
        if self._tool is None:
            raise RuntimeError(f"{type(self).__name__} shows no tool to export")
        return self._tool.to_html(path, **kwargs)


__all__ = ["HostWidget"]
