"""ProfileWidget: every tool of a logdir in one widget, with run, host and tool selectors.

XProf's profile page in a notebook: pick a run of the logdir (runs written
while the widget is open appear on "Refresh"), a host, a tool; the tool's
widget is built on first use and kept. Tools without data for the run are
listed with the reason instead of an empty page. Opening a run shows a
progress bar with the bytes read, so a large profile never looks like a
frozen cell.
"""

from __future__ import annotations

import html
from pathlib import Path

import ipywidgets as w

from ..errors import ProfileError
from ..run import Run, list_runs, load_run

#: Tool name -> (label, widget class name in xprof_widgets).
TOOLS = {
    "overview": ("Overview", "OverviewWidget"),
    "input_pipeline": ("Input pipeline", "InputPipelineWidget"),
    "op_profile": ("HLO op profile", "OpProfileWidget"),
    "trace_viewer": ("Trace viewer", "TraceViewerWidget"),
    "memory_profile": ("Memory profile", "MemoryProfileWidget"),
    "memory_viewer": ("Memory viewer", "MemoryViewerWidget"),
}


def _widget_class(name):
    import xprof_widgets

    return getattr(xprof_widgets, name)


class ProfileWidget(w.VBox):
    """All tools for a logdir (or one run): `ProfileWidget("LOGDIR")`, `ProfileWidget(run)`.

    `.run` is the open run, `.tool` the tool shown (its widget: `.current`).
    """

    def __init__(self, logdir_or_run, tool="overview", **kwargs):
        super().__init__(**kwargs)
        if isinstance(logdir_or_run, Run):
            self.logdir, self._runs = None, {logdir_or_run.name: logdir_or_run.path}
            self._loaded = {logdir_or_run.name: logdir_or_run}
        else:
            self.logdir, self._runs, self._loaded = str(logdir_or_run), {}, {}
        self._built = {}  # (run, host, tool) -> widget
        self.run_select = w.Dropdown(description="Run")
        self.host_select = w.Dropdown(description="Host")
        self.tool_select = w.Dropdown(description="Tool", options=[(v[0], k) for k, v in TOOLS.items()], value=tool)
        self.refresh_button = w.Button(description="Refresh", tooltip="look for new runs in the logdir")
        self.progress = w.IntProgress(description="Reading", layout=w.Layout(display="none", width="50%"))
        self.status = w.HTML()
        self.body = w.Box(layout=w.Layout(width="100%"))
        self.children = [
            w.HBox([self.run_select, self.host_select, self.tool_select, self.refresh_button]),
            self.progress, self.status, self.body,
        ]
        self.refresh_button.on_click(lambda _: self.refresh())
        self.refresh()
        self.run_select.observe(lambda _: self._show_run(), "value")
        self.host_select.observe(lambda _: self._show(), "value")
        self.tool_select.observe(lambda _: self._show(), "value")
        self._show_run()

    @property
    def run(self):
        return self._loaded.get(self.run_select.value)

    @property
    def tool(self):
        return self.tool_select.value

    @property
    def current(self):
        return self.body.children[0] if self.body.children else None

    def refresh(self):
        """Look for runs again (new runs in the logdir show up, the newest first)."""
        if self.logdir is not None:
            try:
                runs = list_runs(self.logdir)
            except ProfileError as error:
                self.status.value = f"<b>{html.escape(str(error))}</b>"
                return
            self._runs = dict(zip(runs["run"], runs["path"]))
        names = sorted(self._runs, reverse=True)  # XProf's run folders are timestamps: newest first
        current = self.run_select.value
        self.run_select.options = names
        self.run_select.value = current if current in names else (names[0] if names else None)

    def _open(self, name):
        """Load a run, showing the bytes read as they come."""
        if name in self._loaded:
            return self._loaded[name]
        path = self._runs[name]
        files = sorted(Path(path).glob("*.xplane.pb*")) if Path(path).is_dir() else []
        total = sum(f.stat().st_size for f in files) or 1
        self.progress.max, self.progress.value = total, 0
        self.progress.layout.display = ""
        self.progress.description = "Reading"
        try:
            run = load_run(path)
            done = 0
            for host, f in zip(run.hosts, files):
                self.progress.description = f"Reading {host}"
                run.xspace(host)
                done += f.stat().st_size
                self.progress.value = done
        finally:
            self.progress.layout.display = "none"
        self._loaded[name] = run
        return run

    def _show_run(self):
        name = self.run_select.value
        if name is None:
            self.status.value = "<b>No runs in this logdir yet.</b> Capture one, then press Refresh."
            self.body.children = []
            return
        try:
            run = self._open(name)
        except ProfileError as error:
            self.status.value = f"<b>{html.escape(str(error))}</b>"
            self.body.children = []
            return
        hosts = run.hosts
        self.host_select.options = hosts
        self.host_select.value = hosts[0]
        self._show()

    def _status_html(self, run):
        missing = [(TOOLS[t][0], reason) for t, ok, reason in run.tool_status().itertuples(index=False)
                   if not ok and t in TOOLS]
        if not missing:
            return ""
        items = "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(reason)}</li>" for label, reason in missing)
        return f'<details data-testid="missing-tools"><summary>{len(missing)} tools without data</summary>' \
               f"<ul>{items}</ul></details>"

    def _show(self):
        run, host, tool = self.run, self.host_select.value, self.tool
        if run is None or host is None:
            return
        self.status.value = self._status_html(run)
        key = (run.name, host, tool)
        if key not in self._built:
            cls = _widget_class(TOOLS[tool][1])
            kwargs = {"host": host} if tool in ("overview", "input_pipeline", "trace_viewer", "memory_profile") else {}
            try:
                self._built[key] = cls(run, **kwargs)
            except ProfileError as error:
                self._built[key] = w.HTML(f"<b>{html.escape(str(error))}</b>")
        self.body.children = [self._built[key]]


__all__ = ["ProfileWidget", "TOOLS"]
