"""ProfileWidget: every tool of a logdir in one widget, with run, host and tool selectors.

XProf's profile page in a notebook: pick a run of the logdir (runs written
while the widget is open appear on "Refresh"), a host, a tool; the tool's
widget is built on first use and kept. Tools without data for the run are
listed with the reason instead of an empty page.

Opening a run never freezes the cell: in a Jupyter kernel the run is read in
a background thread (the cell returns at once) while a progress bar shows the
bytes read ("Reading HOST: 120.0 / 185.0 MB", then "Decoding HOST"), and the
tool appears when it is ready. Outside a kernel (scripts, tests) it is read
in the calling thread unless `background=True`. Either way `wait()` blocks
until the selected run is open and its tool shown, and raises the
ProfileError the widget shows if the run could not be read.
"""

from __future__ import annotations

import contextlib
import contextvars
import html
import threading
from concurrent.futures import Future

import ipywidgets as w

from ..errors import ProfileError
from ..io import fs
from ..io.xspace import XSPACE_SUFFIXES, host_of
from ..run import Run, list_runs, load_run
from ..tools import TOOLS as _REGISTRY

#: XProf's tool name -> its registry entry (`xprof_widgets.tools`), in menu order.
TOOLS = {t.name: t for t in _REGISTRY}
#: Older short names still accepted for `tool=`.
_ALIASES = {"overview": "overview_page", "input_pipeline": "input_pipeline_analyzer"}


def _widget_class(name):
    import xprof_widgets

    return getattr(xprof_widgets, name)


def _in_kernel():
    """True inside a Jupyter kernel (JupyterLab, Notebook, VS Code, Colab), where widget
    updates from a thread reach the page."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


def _mb(n):
    return f"{n / 1e6:,.1f}"


def _done(value=None):
    future = Future()
    future.set_result(value)
    return future


class ProfileWidget(w.VBox):
    """All tools for a logdir (or one run): `ProfileWidget("LOGDIR")`, `ProfileWidget(run)`.

    `.run` is the open run (None while it is being read), `.tool` the tool
    shown (its widget: `.current`). `background` reads runs in a thread so the
    cell returns at once; default: in a Jupyter kernel yes, elsewhere no.
    `wait()` (or the `ready` future) tells when the selected run is shown;
    `to_html(path)` exports the tool shown as a self-contained page.
    """

    def __init__(self, logdir_or_run, tool="overview_page", background=None, **kwargs):
        super().__init__(**kwargs)
        if isinstance(logdir_or_run, Run):
            self.logdir, self._runs = None, {logdir_or_run.name: logdir_or_run.path}
            self._loaded = {logdir_or_run.name: logdir_or_run}
        else:
            self.logdir, self._runs, self._loaded = str(logdir_or_run), {}, {}
        self.background = _in_kernel() if background is None else bool(background)
        self._opened = set()  # names of runs with every host read
        self._pending = {}  # run name -> Future of the thread reading it
        self._future = _done()
        self._lock = threading.RLock()
        self._setting = threading.local()  # .on: this thread sets the selectors, observers stand by
        self._built = {}  # (run, host, tool) -> widget
        self._errors = {}  # (run, host, tool) -> why that tool shows no page
        # Sized to their longest option (run names can be long), wrapping onto a new line when narrow.
        fit = dict(layout=w.Layout(width="auto", max_width="100%"), style={"description_width": "initial"})
        self.run_select = w.Dropdown(description="Run", **fit)
        self.host_select = w.Dropdown(description="Host", **fit)
        tool = _ALIASES.get(tool, tool)
        if tool not in TOOLS:
            raise ValueError(f"tool must be one of {list(TOOLS)}, not {tool!r}")
        self._wanted_tool = tool  # shown when the run has data for it
        self.tool_select = w.Dropdown(description="Tool", options=[(t.label, k) for k, t in TOOLS.items()],
                                      value=tool, **fit)
        self.refresh_button = w.Button(description="Refresh", tooltip="look for new runs in the logdir")
        self.progress = w.IntProgress(value=0, min=0, max=1, description="Reading")
        self.progress_label = w.HTML()
        self.progress_label.add_class("xw-profile-progress")
        self.loading = w.HBox([self.progress, self.progress_label], layout=w.Layout(display="none"))
        self.status = w.HTML()
        self.body = w.Box(layout=w.Layout(width="100%"))
        self.children = [
            w.HBox([self.run_select, self.host_select, self.tool_select, self.refresh_button],
                   layout=w.Layout(flex_flow="row wrap")),
            self.loading, self.status, self.body,
        ]
        for widget, name in ((self, "xw-profile"), (self.run_select, "xw-profile-run"),
                             (self.host_select, "xw-profile-host"), (self.tool_select, "xw-profile-tool"),
                             (self.refresh_button, "xw-profile-refresh"), (self.status, "xw-profile-status")):
            widget.add_class(name)  # for styling and for tests to find them on the page
        self.refresh_button.on_click(lambda _: self.refresh())
        self._list_runs()
        self.run_select.observe(lambda _: self._busy() or self._show_run(), "value")
        self.host_select.observe(lambda _: self._busy() or self._show(), "value")
        self.tool_select.observe(self._on_tool, "value")
        self._show_run()

    # --- what is shown ----------------------------------------------------------------

    @property
    def run(self):
        """The selected run once it is open (every host read), else None."""
        name = self.run_select.value
        return self._loaded.get(name) if name in self._opened else None

    @property
    def tool(self):
        return self.tool_select.value

    @property
    def current(self):
        return self.body.children[0] if self.body.children else None

    @property
    def ready(self):
        """A `concurrent.futures.Future` of the selected run: done (its result the Run,
        None when the logdir has no run) once the run is open and its tool shown."""
        return self._future

    def wait(self, timeout=None):
        """Block until the selected run is open and its tool shown; return the Run (None if
        the logdir has no run). Raises the ProfileError the widget shows when the run
        could not be read, TimeoutError after `timeout` seconds."""
        return self._future.result(timeout)

    def to_html(self, path=None, **kwargs):
        """The tool shown, as one self-contained HTML page (see `BokehWidget.to_html`):
        the text when `path` is None, else written there (the path is returned).

        Waits for the run to open first. A tool without data for the run
        exports the page that says why. Raises ProfileError when there is
        nothing to export: no run, a run that could not be read, or a tool
        that could not be built for it (the message says why).
        """
        run = self.wait()
        current = self.current
        export = getattr(current, "to_html", None)
        if export is None:
            label = TOOLS[self.tool].label
            if run is None:
                raise ProfileError(self.logdir or "ProfileWidget", "nothing to export: no run is shown")
            why = self._errors.get((run.name, self.host_select.value, self.tool), "it shows no page")
            raise ProfileError(run.path, f"nothing to export: the {label} tool has no view of this run ({why})")
        return export(path, **kwargs)

    # --- runs ---------------------------------------------------------------------------

    @contextlib.contextmanager
    def _quietly(self):
        """Set selectors from Python without their observers reacting (in this thread only:
        a change the page makes meanwhile, handled in the kernel's thread, still counts)."""
        self._setting.on = True
        try:
            yield
        finally:
            self._setting.on = False

    def _busy(self):
        return getattr(self._setting, "on", False)

    def refresh(self):
        """Look for runs again (new runs in the logdir show up, the newest first)."""
        if self._list_runs():
            self._show_run()

    def _list_runs(self):
        """Fill the run selector; True if the selected run changed."""
        if self.logdir is not None:
            try:
                runs = list_runs(self.logdir)
            except ProfileError as error:
                self.status.value = f"<b>{html.escape(str(error))}</b>"
                return False
            self._runs = dict(zip(runs["run"], runs["path"]))
        names = sorted(self._runs, reverse=True)  # XProf's run folders are timestamps: newest first
        current = self.run_select.value
        with self._quietly():
            self.run_select.options = names
            self.run_select.value = current if current in names else (names[0] if names else None)
        return self.run_select.value != current

    def _show_run(self):
        with self._lock:
            name = self.run_select.value
            if name is None:
                self.status.value = "<b>No runs in this logdir yet.</b> Capture one, then press Refresh."
                self.body.children = []
                self._future = _done()
                return
            if name in self._opened:
                self._future = _done(self._loaded[name])
                self._display(name)
                return
            self.status.value = ""
            self.body.children = []
            with self._quietly():
                self.host_select.options = []
            self._future = self._pending.get(name)
            if self._future is not None:  # being read already: show its progress again
                self.loading.layout.display = ""
                return
            self._future = self._pending[name] = Future()
            self.progress.value = 0
            self.progress_label.value = f"Opening {html.escape(name)}…"
            self.loading.layout.display = ""
            future = self._future
        if self.background:
            job = contextvars.copy_context().run  # prints and errors go to the cell that made the widget
            threading.Thread(target=job, args=(self._open, name, future), name=f"xprof-open-{name}",
                             daemon=True).start()
        else:
            self._open(name, future)
            error = future.exception()
            if error is not None and not isinstance(error, ProfileError):
                raise error

    def _open(self, name, future):
        """Read every host of run `name` (showing the bytes read), then show its tool."""
        try:
            run = self._read(name)
            with self._lock:
                self._loaded[name] = run
                self._opened.add(name)
                self._pending.pop(name, None)
                if self.run_select.value == name:
                    self._display(name, building=True)
            future.set_result(run)
        except BaseException as error:  # noqa: BLE001 - a thread: say what happened in the widget
            with self._lock:
                self._pending.pop(name, None)
                if self.run_select.value == name:
                    self.loading.layout.display = "none"
                    message = str(error) if isinstance(error, ProfileError) else \
                        f"could not open run {name}: {type(error).__name__}: {error}"
                    self.status.value = f"<b>{html.escape(message)}</b>"
                    self.body.children = []
            future.set_exception(error)

    def _read(self, name):
        run = self._loaded.get(name)
        if run is not None:
            files = run.files
        else:
            path = self._runs[name]
            listed = fs.listdir(path)[1] if fs.isdir(path) else []
            files = {host_of(fs.name(f)): f for f in listed if fs.name(f).endswith(XSPACE_SUFFIXES)}
        sizes = {}
        for host, f in files.items():
            try:
                sizes[host] = fs.size(f)
            except (OSError, ProfileError):
                sizes[host] = 0
        report = self._reporter(name, sizes)
        if run is None:
            run = load_run(self._runs[name], progress=report)
        for host in run.hosts:
            run.xspace(host, progress=report)
        return run

    def _reporter(self, name, sizes):
        """A `progress(host, bytes_read, file_size)` callback that moves the bar of run `name`."""
        seen = {}
        hosts = list(sizes)

        def report(host, done, total):
            if self.run_select.value != name:
                return  # another run is selected now: its own bar is shown
            seen[host] = (done, total)
            value = sum(sizes.get(h, t) * d / t for h, (d, t) in seen.items() if t)
            self.progress.max = top = max(1, sum(sizes.values()), int(value))
            self.progress.value = min(int(value), top)
            which = f" (host {hosts.index(host) + 1} of {len(hosts)})" if len(hosts) > 1 and host in hosts else ""
            if done >= total:
                text = f"Decoding {host}…{which}"
            else:
                text = f"Reading {host}: {_mb(done)} / {_mb(total)} MB{which}"
            self.progress_label.value = html.escape(text)

        return report

    def _display(self, name, building=False):
        """Show the open run `name`: its hosts, the missing tools and the selected tool."""
        run = self._loaded[name]
        if building:
            self.progress_label.value = html.escape(f"Building {TOOLS[self.tool].label}…")
        with self._quietly():
            self.host_select.options = run.hosts
            self.host_select.value = run.hosts[0]
            # The tool menu lists the tools with data for this run; the others are listed with why.
            status = run.tool_status().set_index("tool")
            have = [k for k in TOOLS if bool(status.at[k, "available"])] or list(TOOLS)
            self.tool_select.options = [(TOOLS[k].label, k) for k in have]
            self.tool_select.value = self._wanted_tool if self._wanted_tool in have else have[0]
        try:
            self._show()
        finally:
            self.loading.layout.display = "none"

    # --- tools --------------------------------------------------------------------------

    def _on_tool(self, change):
        if self._busy():
            return
        self._wanted_tool = change["new"]
        self._show()

    def _status_html(self, run):
        missing = [(TOOLS[t].label, reason) for t, ok, reason in run.tool_status().itertuples(index=False)
                   if not ok and t in TOOLS]
        if not missing:
            return ""
        items = "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(reason)}</li>" for label, reason in missing)
        count = f"{len(missing)} tool{'s' if len(missing) > 1 else ''} without data"
        return f'<details data-testid="missing-tools"><summary>{count}</summary><ul>{items}</ul></details>'

    def _show(self):
        with self._lock:
            run, host, tool = self.run, self.host_select.value, self.tool
            if run is None or host is None:
                return
            self.status.value = self._status_html(run)
            key = (run.name, host, tool)
            if key not in self._built:
                cls = _widget_class(TOOLS[tool].widget)
                kwargs = {"host": host} if TOOLS[tool].per_host else {}
                try:
                    self._built[key] = cls(run, **kwargs)
                except ProfileError as error:
                    self._errors[key] = str(error)
                    self._built[key] = w.HTML(f"<b>{html.escape(str(error))}</b>")
            self.body.children = [self._built[key]]


__all__ = ["ProfileWidget", "TOOLS"]
