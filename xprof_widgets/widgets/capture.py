"""CaptureWidget: XProf's "Capture profile" dialog as a form in the notebook.

Address, duration and logdir in, a Capture button, a status line that says
what happened in words (the ProfileError's message when it failed), and the
captured run's overview below. `capture()` is what the button calls, so a
script or a test can press it too; `run` holds the last captured Run, and
`to_html(path)` exports the overview shown as a self-contained page. An
anywidget (a HostWidget: the overview travels over its comm), so it runs
wherever anywidget does, marimo included.
"""

from __future__ import annotations

import traitlets

from ..capture import capture
from ..errors import ProfileError
from ._bokeh import built_without_comm
from ._host import HostWidget
from ._html import data_json, esc


def _line(text, kind="info"):
    color = {"info": "#444", "busy": "#4e79a7", "ok": "#2e7d32", "error": "#b00020"}[kind]
    return (
        f'<div class="xw-capture-status" data-status="{kind}" '
        f'style="font:13px system-ui;color:{color};padding:2px 0">{esc(text)}</div>'
    )


class CaptureWidget(HostWidget):
    """A form that captures a profile from a running profiler server and shows it.

    Traits: `address` (the server's `host:port`, or a port on this machine),
    `duration_ms` (how long to trace), `logdir` (where to write; empty: a new
    temporary folder), `status` (HTML: what happened). After a capture, `run` is
    the new Run (None before or after a failure) and `error` the last failure's
    message ("" when none). Callbacks given to `on_capture(fn)` get the Run.
    """

    OWN_REQUESTS = frozenset({"set", "capture"})

    address = traitlets.Unicode("localhost:9999", help="host:port of the profiler server.")
    duration_ms = traitlets.Int(1000, help="How long to trace (ms).")
    logdir = traitlets.Unicode("", help="Where to write the profile; empty: a new temporary folder.")
    message = traitlets.Unicode(help="HTML: what the last capture did.")
    capturing = traitlets.Bool(False, help="True while a capture runs.")

    def __init__(self, address="localhost:9999", duration_ms=1000, logdir="", show_overview=True, **kwargs):
        self.show_overview = show_overview
        self.run = None
        self.error = ""
        self._shown_error = ""  # why the captured run's overview is not shown
        self._note = ""  # HTML shown in place of the overview
        self._callbacks = []
        self._ready = False
        super().__init__(**kwargs)
        self.address, self.duration_ms, self.logdir = str(address), int(duration_ms), str(logdir or "")
        self.message = _line("Ready: start the program's profiler server, then Capture.")
        self._ready = True
        self._compose()

    @traitlets.validate("duration_ms")
    def _check_duration(self, proposal):
        if not 1 <= proposal["value"] <= 3_600_000:
            raise traitlets.TraitError("duration_ms must be between 1 and 3,600,000")
        return proposal["value"]

    @traitlets.observe("address", "duration_ms", "logdir", "message", "capturing")
    def _redraw(self, change):
        if self._ready:
            self._compose()

    def _frame(self, tool_html):
        def field(name, label, value, placeholder="", kind="text"):
            params = data_json({"name": name})
            return (
                f'<label>{label} <input type="{kind}" data-request="set" data-params="{params}" '
                f'data-testid="capture-{name}" value="{esc(value)}" placeholder="{esc(placeholder)}"></label>'
            )

        disabled = " disabled" if self.capturing else ""
        return f"""
<div class="xw-capture">
  <div class="xw-capture-form">
    {field("address", "Address", self.address, "host:port")}
    {field("duration_ms", "Duration (ms)", self.duration_ms, kind="number")}
    {field("logdir", "Logdir", self.logdir, "empty: a new temporary folder")}
    <button data-request="capture" data-testid="capture-button"{disabled}>● Capture</button>
  </div>
  {self.message}
  <div class="xw-capture-result">{self._note}{tool_html}</div>
</div>"""

    def on_request(self, kind, params):
        if kind == "set":
            name, value = params.get("name"), params.get("value")
            if name not in ("address", "duration_ms", "logdir"):
                raise ValueError(f"unknown field {name!r}")
            try:
                setattr(self, name, int(value) if name == "duration_ms" else str(value))
            except (ValueError, traitlets.TraitError) as error:
                self.message = _line(f"{name}: {error}", "error")
        elif kind == "capture":
            self.capture()
        else:
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    def on_capture(self, fn):
        """Call `fn(run)` after each successful capture."""
        self._callbacks.append(fn)

    def capture(self):
        """Capture now with the form's values; returns the Run, or None (the status says why)."""
        address = self.address.strip()
        self.capturing = True
        self.message = _line(f"Capturing {self.duration_ms} ms from {address} ...", "busy")
        try:
            run = capture(address, duration_ms=self.duration_ms, logdir=self.logdir.strip() or None)
        except (ProfileError, ImportError, ValueError) as e:
            self.run, self.error = None, str(e)
            self.message = _line(f"Capture failed: {e}", "error")
            return None
        finally:
            self.capturing = False
        self.run, self.error, self._shown_error = run, "", ""
        if not self.logdir.strip():
            self.logdir = str(run.path.parent.parent.parent)  # the logdir, so the next capture goes beside it
        self.message = _line(f"Captured run {run.name} ({', '.join(run.hosts)}) in {run.path}", "ok")
        self._show(run)
        for fn in self._callbacks:
            fn(run)
        return run

    def _show(self, run):
        self._note = ""
        if self.show_overview:
            try:
                from .overview import OverviewWidget

                with built_without_comm():  # shown in this widget, through its comm
                    overview = OverviewWidget(run)
                self._host(overview)
                return
            except Exception as e:
                self._shown_error = f"the overview could not be built: {e}"
                self._note = _line(f"Captured, but the overview could not be built: {e}", "error")
        else:
            self._note = _line(f"Open it with xw.load_run({str(run.path)!r})")
        self._host(None)

    def to_html(self, path=None, **kwargs):
        """The captured run's overview as one self-contained HTML page (see
        `BokehWidget.to_html`): the text when `path` is None, else written there
        (the path is returned). Raises ProfileError when no overview is shown:
        nothing captured yet, the capture failed, `show_overview=False`, or the
        overview could not be built (the message says which).
        """
        if self.run is not None and self.current is not None:
            return self.current.to_html(path, **kwargs)
        if self.run is None:
            why = f"the last capture failed ({self.error})" if self.error else "no profile captured yet: press Capture"
            raise ProfileError(self.address.strip() or "CaptureWidget", f"nothing to export: {why}")
        why = self._shown_error or (
            f"this widget shows no overview (show_overview=False); export one with "
            f"xw.OverviewWidget(xw.load_run({str(self.run.path)!r})).to_html(path)"
        )
        raise ProfileError(self.run.path, f"nothing to export: {why}")


__all__ = ["CaptureWidget"]
