"""CaptureWidget: XProf's "Capture profile" dialog as a form in the notebook.

Address, duration and logdir in, a Capture button, a status line that says
what happened in words (the ProfileError's message when it failed), and the
captured run's overview below. `capture()` is what the button calls, so a
script or a test can press it too; `run` holds the last captured Run, and
`to_html(path)` exports the overview shown as a self-contained page.
"""

from __future__ import annotations

import ipywidgets

from ..capture import capture
from ..errors import ProfileError
from ._html import esc


class CaptureWidget(ipywidgets.VBox):
    """A form that captures a profile from a running profiler server and shows it.

    `address` is the server's `host:port` (or a port on this machine),
    `duration_ms` how long to trace, `logdir` where to write (empty: a new
    temporary folder). After a capture, `run` is the new Run (None before or
    after a failure) and `error` the last failure's message ("" when none).
    Callbacks given to `on_capture(fn)` get the Run.
    """

    def __init__(self, address="localhost:9999", duration_ms=1000, logdir="", show_overview=True, **kwargs):
        self.address = ipywidgets.Text(value=str(address), description="Address", placeholder="host:port")
        self.duration_ms = ipywidgets.BoundedIntText(value=int(duration_ms), min=1, max=3_600_000, step=100,
                                                     description="Duration (ms)")
        self.logdir = ipywidgets.Text(value=str(logdir or ""), description="Logdir",
                                      placeholder="empty: a new temporary folder")
        self.button = ipywidgets.Button(description="Capture", button_style="primary", icon="circle")
        self.status = ipywidgets.HTML(value=self._line("Ready: start the program's profiler server, then Capture."))
        self.result = ipywidgets.VBox()
        self.show_overview = show_overview
        self.run = None
        self.error = ""
        self._shown_error = ""  # why the captured run's overview is not shown
        self._callbacks = []
        self.button.on_click(lambda _b: self.capture())
        form = ipywidgets.HBox([self.address, self.duration_ms])
        super().__init__([form, ipywidgets.HBox([self.logdir, self.button]), self.status, self.result], **kwargs)

    @staticmethod
    def _line(text, kind="info"):
        color = {"info": "#444", "busy": "#4e79a7", "ok": "#2e7d32", "error": "#b00020"}[kind]
        return (f'<div class="xw-capture-status" data-status="{kind}" '
                f'style="font:13px system-ui;color:{color};padding:2px 0">{esc(text)}</div>')

    def on_capture(self, fn):
        """Call `fn(run)` after each successful capture."""
        self._callbacks.append(fn)

    def capture(self):
        """Capture now with the form's values; returns the Run, or None (the status says why)."""
        address = self.address.value.strip()
        self.button.disabled = True
        self.status.value = self._line(f"Capturing {self.duration_ms.value} ms from {address} ...", "busy")
        try:
            run = capture(address, duration_ms=self.duration_ms.value, logdir=self.logdir.value.strip() or None)
        except (ProfileError, ImportError, ValueError) as e:
            self.run, self.error = None, str(e)
            self.status.value = self._line(f"Capture failed: {e}", "error")
            return None
        finally:
            self.button.disabled = False
        self.run, self.error, self._shown_error = run, "", ""
        if not self.logdir.value.strip():
            self.logdir.value = str(run.path.parent.parent.parent)  # the logdir, so the next capture goes beside it
        self.status.value = self._line(f"Captured run {run.name} ({', '.join(run.hosts)}) in {run.path}", "ok")
        self.result.children = [self._show(run)]
        for fn in self._callbacks:
            fn(run)
        return run

    def _show(self, run):
        if self.show_overview:
            try:
                from .overview import OverviewWidget

                return OverviewWidget(run)
            except Exception as e:  # noqa: BLE001 - the capture worked; say why the page does not show
                self._shown_error = f"the overview could not be built: {e}"
                return ipywidgets.HTML(self._line(f"Captured, but the overview could not be built: {e}", "error"))
        return ipywidgets.HTML(self._line(f"Open it with xw.load_run({str(run.path)!r})"))

    def to_html(self, path=None, **kwargs):
        """The captured run's overview as one self-contained HTML page (see
        `BokehWidget.to_html`): the text when `path` is None, else written there
        (the path is returned). Raises ProfileError when no overview is shown:
        nothing captured yet, the capture failed, `show_overview=False`, or the
        overview could not be built (the message says which).
        """
        shown = self.result.children[0] if self.run is not None and self.result.children else None
        export = getattr(shown, "to_html", None)
        if export is not None:
            return export(path, **kwargs)
        if self.run is None:
            why = f"the last capture failed ({self.error})" if self.error else "no profile captured yet: press Capture"
            raise ProfileError(self.address.value.strip() or "CaptureWidget", f"nothing to export: {why}")
        why = self._shown_error or (
            f"this widget shows no overview (show_overview=False); export one with "
            f"xw.OverviewWidget(xw.load_run({str(self.run.path)!r})).to_html(path)")
        raise ProfileError(self.run.path, f"nothing to export: {why}")


__all__ = ["CaptureWidget"]
