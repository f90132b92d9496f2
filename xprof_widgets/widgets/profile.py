"""ProfileWidget: every tool of a logdir in one widget, with run, host and tool selectors.

An anywidget (a HostWidget: the tool widget shown travels over its comm), so it
runs wherever anywidget does, marimo included.

XProf's profile page in a notebook: pick a run of the logdir (runs written
while the widget is open appear on "Refresh"), a host, a tool; the tool's
widget is built on first use and kept. Tools without data for the run are
listed with the reason instead of an empty page.

Opening a run never freezes the cell: in a Jupyter kernel the run is read in
a background thread (the cell returns at once) while a progress bar shows the
bytes read ("Reading HOST: 120.0 / 185.0 MB", then "Decoding HOST"), and the
tool appears when it is ready (the tools' widget modules are imported before, in the
cell: Bokeh's imports are not thread-safe). Outside a kernel (scripts, tests) it is read
in the calling thread unless `background=True`. Either way `wait()` blocks
until the selected run is open and its tool shown, and raises the
ProfileError the widget shows if the run could not be read.

A run of several hosts (a pod) is summarized host by host on the run's executor
(`Run.host_summaries`: a process pool, or Dask), the bar counting the hosts done;
the host menu starts with "All hosts" (XProf's combined view: the per-host tools get
no host), and a table of the hosts (mean step time with a bar each, longest step,
device idle, input %, memory peak) shows above the tool, hosts well above the median
step time marked, so a straggler stands out.
"""

from __future__ import annotations

import contextvars
import html
import threading
from concurrent.futures import Future

import numpy as np
import traitlets

from ..errors import ProfileError
from ..format import number, size
from ..io import fs
from ..io.logdir import XSPACE_SUFFIXES, host_of
from ..run import Run, list_runs, load_run
from ..tools import TOOLS as _REGISTRY
from ._bokeh import built_without_comm, export_html, import_bokeh_models
from ._host import HostWidget
from ._html import data_json, esc

#: XProf's tool name -> its registry entry (`xprof_widgets.tools`), in menu order.
TOOLS = {t.name: t for t in _REGISTRY}
#: The host menu's first entry on a run of several hosts: all hosts combined.
ALL_HOSTS = "All hosts"
#: A host whose mean step time is this much above the hosts' median is marked as a straggler.
STRAGGLER_RATIO = 1.1
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


class ProfileWidget(HostWidget):
    """All tools for a logdir (or one run): `ProfileWidget("LOGDIR")`, `ProfileWidget(run)`.

    Traits Python can read and set: `run_name` (the selected run; `runs` lists the
    logdir's, newest first), `host` (`hosts`), `tool` (XProf's tool name; `tools`
    lists those with data for the run). `.run` is the open run (None while it is
    being read), `.current` the tool's widget. `loading`, `progress_text`,
    `progress_bytes` / `progress_total` describe the read in progress, `message` the
    tools without data (and why) or what went wrong. `background` reads runs in a
    thread so the cell returns at once; default: in a Jupyter kernel yes, elsewhere
    no. `wait()` (or the `ready` future) tells when the selected run is shown;
    `to_html(path)` exports the run's tools as one self-contained page with a tool menu.
    """

    OWN_REQUESTS = frozenset({"choose", "refresh", "show-graph", "show-trace"})

    runs = traitlets.List(traitlets.Unicode(), help="The logdir's run names, newest first.")
    run_name = traitlets.Unicode(None, allow_none=True, help="The selected run.")
    hosts = traitlets.List(traitlets.Unicode(), help="The hosts of the open run.")
    host = traitlets.Unicode(None, allow_none=True, help="The selected host.")
    tools = traitlets.List(traitlets.Unicode(), help="XProf names of the tools offered: those with data for the run.")
    tool = traitlets.Unicode(help="The tool shown (XProf's name).")
    loading = traitlets.Bool(False, help="True while the selected run is being read.")
    progress_text = traitlets.Unicode(help="What is being read or built.")
    progress_bytes = traitlets.Int(0, help="Bytes of the run read so far.")
    progress_total = traitlets.Int(1, help="Bytes of the run in all.")
    message = traitlets.Unicode(help="HTML: the tools without data and why, or what went wrong.")
    hosts_done = traitlets.Int(0, help="Hosts of a run of several hosts summarized so far.")

    def __init__(self, logdir_or_run, tool="overview_page", background=None, **kwargs):
        tool = _ALIASES.get(tool, tool)
        if tool not in TOOLS:
            raise ValueError(f"tool must be one of {list(TOOLS)}, not {tool!r}")
        if isinstance(logdir_or_run, Run):
            self.logdir, self._runs = None, {logdir_or_run.name: logdir_or_run.path}
            self._loaded = {logdir_or_run.name: logdir_or_run}
        else:
            self.logdir, self._runs, self._loaded = str(logdir_or_run), {}, {}
        self.background = _in_kernel() if background is None else bool(background)
        if self.background:
            # The tools' widget modules and Bokeh's models (the charts not filled from a
            # template build them) imported here, on the caller's thread: the thread that
            # reads a run builds its tool's widget, and Bokeh's imports are not thread-safe
            # (a model class defined on two threads at once fails to validate).
            for spec in TOOLS.values():
                _widget_class(spec.widget)
            import_bokeh_models()
        self._opened = set()  # names of runs with every host read
        self._pending = {}  # run name -> Future of the thread reading it
        self._future = _done()
        self._lock = threading.RLock()
        self._setting = threading.local()  # .on: this thread sets the selection, observers stand by
        self._built = {}  # (run, host, tool) -> widget, or the ProfileError's message
        self._wanted_tool = tool  # shown when the run has data for it
        super().__init__()
        with self._quietly():
            self.tools, self.tool = list(TOOLS), tool
        self._list_runs()
        self._show_run()

    # --- what is shown ----------------------------------------------------------------

    @property
    def run(self):
        """The selected run once it is open (every host read), else None."""
        name = self.run_name
        return self._loaded.get(name) if name in self._opened else None

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

    def to_html(self, path=None, *, tools="all", title=None):
        """The run's tools as one self-contained HTML page (see `BokehWidget.to_html`):
        the text when `path` is None, else written there (the path is returned).

        `tools`: "all" (default) puts every tool offered for the run and host in the
        page, behind a tool menu that works offline (each tool is built here if it was
        not shown yet; the one shown comes first); "shown" only the tool shown; or an XProf
        tool name or a list of them. Tools that could not be built for the run are left
        out (the widget says why). BokehJS and the front end are in the page once.

        Waits for the run to open first. Raises ProfileError when there is nothing to
        export: no run, a run that could not be read, or no tool that could be built
        for it (the message says why).
        """
        run = self.wait()
        if run is None:
            raise ProfileError(self.logdir or "ProfileWidget", "nothing to export: no run is shown")
        if isinstance(tools, str) and tools not in ("shown", "all"):
            tools = [tools]  # one tool's name (not its letters)
        if tools == "shown":
            names = [self.tool]
        elif tools == "all":
            names = [self.tool] + [t for t in self.tools if t != self.tool]
        else:
            names = [_ALIASES.get(t, t) for t in tools]
            unknown = [t for t in names if t not in TOOLS]
            if unknown:
                raise ValueError(f"no tool {unknown[0]!r}; tools: {list(TOOLS)}")
        built, why = [], {}
        for name in names:
            widget = self._tool_widget(run, self.host, name)
            if isinstance(widget, str):
                why[name] = widget
            else:
                built.append((name, widget))
        if not built:
            label = TOOLS[names[0]].label if names else "no"
            reason = why.get(names[0], "it shows no page") if names else "no tool was asked for"
            raise ProfileError(run.path, f"nothing to export: the {label} tool has no view of this run ({reason})")
        views = [{**widget._export_parts(), "label": TOOLS[name].label} for name, widget in built]
        if len(views) == 1:
            return export_html(views, path, title=title)
        return export_html(
            views, path, title=title, widget_class="ProfileWidget", subject=views[0]["subject"] or f"run {run.name}"
        )

    # --- the page -----------------------------------------------------------------------

    def _frame(self, tool_html):
        def select(what, values, selected, labels=None):
            opts = "".join(
                f'<option value="{html.escape(v)}"{" selected" if v == selected else ""}>'
                f"{html.escape(labels[v] if labels else v)}</option>"
                for v in values
            )
            params = data_json({"what": what})
            return (
                f'<label class="xw-profile-{what}">{what.capitalize()} <select data-request="choose" '
                f'data-params="{params}">{opts}</select></label>'
            )

        bar = (
            select("run", self.runs, self.run_name)
            + (select("host", self.hosts, self.host) if self.hosts else "")
            + select("tool", self.tools, self.tool, {k: TOOLS[k].label for k in TOOLS})
            + '<button class="xw-profile-refresh" data-request="refresh" title="look for new runs in the '
            'logdir">Refresh</button>'
        )
        loading = ""
        if self.loading:
            loading = (
                f'<div class="xw-profile-loading"><progress value="{self.progress_bytes}" '
                f'max="{max(self.progress_total, 1)}"></progress> <span class="xw-profile-progress">'
                f"{html.escape(self.progress_text)}</span></div>"
            )
        return f"""
<div class="xw-profile">
  <div class="xw-profile-bar">{bar}</div>
  {loading}
  <div class="xw-profile-status">{self.message}</div>
  {self._hosts_table()}
  <div class="xw-profile-body">{tool_html}</div>
</div>"""

    @traitlets.observe(
        "runs",
        "run_name",
        "hosts",
        "host",
        "tools",
        "tool",
        "loading",
        "progress_text",
        "progress_bytes",
        "progress_total",
        "message",
        "hosts_done",
    )
    def _redraw(self, change):
        if getattr(self, "_built", None) is not None:  # (set up)
            self._compose()

    def on_request(self, kind, params):
        if kind == "refresh":
            self.refresh()
        elif kind == "show-graph":
            self.show_in_graph(str(params["op"]), params.get("module"))
        elif kind == "show-trace":
            self.show_in_trace(str(params["host"]), int(params["begin_ps"]), int(params["end_ps"]))
        elif kind == "choose":
            what, value = params.get("what"), params.get("value")
            name = {"run": "run_name", "host": "host", "tool": "tool"}.get(what)
            if name is None:
                raise ValueError(f"unknown selector {what!r}")
            setattr(self, name, value)
        else:
            raise ValueError(f"unknown request {kind!r}")
        return {"ok": True}, None

    def show_in_graph(self, op, module=None):
        """Open the graph viewer on `op` (of `module`, `name(program_id)`): what the op
        details card's "Show in graph viewer" button does."""
        self.tool = "graph_viewer"
        viewer = self.current
        if viewer is not None and hasattr(viewer, "op"):
            with viewer.hold_trait_notifications():
                if module:
                    viewer.module = module
                viewer.op = op

    def show_in_trace(self, host, begin_ps, end_ps):
        """Open the trace viewer of `host` on [begin_ps, end_ps] (absolute ps): what the pod
        viewer's "Open in the trace viewer" button does for a core's step."""
        if host in self.hosts:
            self.host = host
        self.tool = "trace_viewer"
        viewer = self.current
        if viewer is not None and hasattr(viewer, "show_range"):
            viewer.show_range(begin_ps, end_ps, redraw=True)

    # --- runs ---------------------------------------------------------------------------

    class _Quiet:
        def __init__(self, setting):
            self.setting = setting

        def __enter__(self):
            self.setting.on = True

        def __exit__(self, *exc):
            self.setting.on = False

    def _quietly(self):
        """Set the selection from Python without its observers reacting (in this thread only:
        a change the page makes meanwhile, handled in the kernel's thread, still counts)."""
        return self._Quiet(self._setting)

    def _busy(self):
        return getattr(self._setting, "on", False)

    @traitlets.validate("run_name")
    def _check_run(self, proposal):
        if proposal["value"] is not None and proposal["value"] not in self._runs:
            raise traitlets.TraitError(f"no run {proposal['value']!r}; runs: {self.runs}")
        return proposal["value"]

    @traitlets.validate("tool")
    def _check_tool(self, proposal):
        value = _ALIASES.get(proposal["value"], proposal["value"])
        if value not in TOOLS:
            raise traitlets.TraitError(f"tool must be one of {list(TOOLS)}, not {value!r}")
        return value

    @traitlets.observe("run_name")
    def _on_run(self, change):
        if not self._busy():
            self._show_run()

    @traitlets.observe("host")
    def _on_host(self, change):
        if not self._busy():
            self._show()

    @traitlets.observe("tool")
    def _on_tool(self, change):
        if not self._busy():
            self._wanted_tool = change["new"]
            self._show()

    def refresh(self):
        """Look for runs again (new runs in the logdir show up, the newest first)."""
        if self._list_runs():
            self._show_run()

    def _list_runs(self):
        """Fill the run list; True if the selected run changed."""
        if self.logdir is not None:
            try:
                runs = list_runs(self.logdir)
            except ProfileError as error:
                self.message = f"<b>{html.escape(str(error))}</b>"
                return False
            self._runs = dict(zip(runs["run"], runs["path"]))
        names = sorted(self._runs, reverse=True)  # XProf's run folders are timestamps: newest first
        current = self.run_name
        with self._quietly():
            self.runs = names
            self.run_name = current if current in names else (names[0] if names else None)
        return self.run_name != current

    def _show_run(self):
        with self._lock:
            name = self.run_name
            if name is None:
                self.message = "<b>No runs in this logdir yet.</b> Capture one, then press Refresh."
                self._host(None)
                self._future = _done()
                return
            if name in self._opened:
                self._future = _done(self._loaded[name])
                self._display(name)
                return
            self.message = ""
            self._host(None)
            with self._quietly():
                self.hosts, self.host = [], None
            self._future = self._pending.get(name)
            if self._future is not None:  # being read already: show its progress again
                self.loading = True
                return
            self._future = self._pending[name] = Future()
            self.progress_bytes, self.progress_text, self.hosts_done = 0, f"Opening {name}…", 0
            self.loading = True
            future = self._future
        if self.background:
            job = contextvars.copy_context().run  # prints and errors go to the cell that made the widget
            threading.Thread(
                target=job, args=(self._open, name, future), name=f"xprof-open-{name}", daemon=True
            ).start()
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
                if self.run_name == name:
                    self._display(name, building=True)
            future.set_result(run)
        except BaseException as error:
            with self._lock:
                self._pending.pop(name, None)
                if self.run_name == name:
                    self.loading = False
                    message = (
                        str(error)
                        if isinstance(error, ProfileError)
                        else f"could not open run {name}: {type(error).__name__}: {error}"
                    )
                    self.message = f"<b>{html.escape(message)}</b>"
                    self._host(None)
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
        if run.pooled:  # every host summarized where the run's executor puts it, then combined
            run.pod(progress=self._host_counter(name))
            return run
        for host in run.hosts:
            run.xspace(host, progress=report)
        return run

    def _host_counter(self, name):
        """A `progress(hosts_done, hosts_total)` callback that moves the bar of run `name`."""

        def report(done, total):
            if self.run_name != name:
                return
            with self.hold_trait_notifications():
                self.hosts_done = done
                self.progress_total, self.progress_bytes = max(total, 1), done
                self.progress_text = f"Summarizing hosts: {done} of {total} done"

        return report

    def _reporter(self, name, sizes):
        """A `progress(host, bytes_read, file_size)` callback that moves the bar of run `name`."""
        seen = {}
        hosts = list(sizes)

        def report(host, done, total):
            if self.run_name != name:
                return  # another run is selected now: its own bar is shown
            seen[host] = (done, total)
            value = sum(sizes.get(h, t) * d / t for h, (d, t) in seen.items() if t)
            top = max(1, sum(sizes.values()), int(value))
            which = f" (host {hosts.index(host) + 1} of {len(hosts)})" if len(hosts) > 1 and host in hosts else ""
            if done >= total:
                text = f"Decoding {host}…{which}"
            else:
                text = f"Reading {host}: {_mb(done)} / {_mb(total)} MB{which}"
            with self.hold_trait_notifications():
                self.progress_total, self.progress_bytes, self.progress_text = top, min(int(value), top), text

        return report

    def _display(self, name, building=False):
        """Show the open run `name`: its hosts, the missing tools and the selected tool."""
        run = self._loaded[name]
        if building:
            self.progress_text = f"Building {TOOLS[self.tool].label}…"
        # The tool menu lists the tools with data for this run; the others are listed with why.
        status = run.tool_status().set_index("tool")
        have = [k for k in TOOLS if bool(status.at[k, "available"])] or list(TOOLS)
        several = run.pooled and len(run.hosts) > 1
        with self._quietly():
            self.hosts = ([ALL_HOSTS] if several else []) + list(run.hosts)
            self.host = self.hosts[0]
            self.tools = have
            self.tool = self._wanted_tool if self._wanted_tool in have else have[0]
        try:
            self._show()
        finally:
            self.loading = False

    # --- tools --------------------------------------------------------------------------

    def _status_html(self, run):
        missing = [
            (TOOLS[t].label, reason)
            for t, ok, reason in run.tool_status().itertuples(index=False)
            if not ok and t in TOOLS
        ]
        if not missing:
            return ""
        items = "".join(f"<li><b>{html.escape(label)}</b>: {html.escape(reason)}</li>" for label, reason in missing)
        count = f"{len(missing)} tool{'s' if len(missing) > 1 else ''} without data"
        return f'<details data-testid="missing-tools"><summary>{count}</summary><ul>{items}</ul></details>'

    def _hosts_table(self):
        """HTML: one row a host of the open run (several hosts only), its mean step time
        drawn as a bar, the hosts well above the median marked as stragglers."""
        run = self.run
        if run is None or not run.pooled or len(run.hosts) < 2 or self.loading:
            return ""
        table = run.per_host()
        step = table["step_time_ms"].to_numpy(float)
        known = step[np.isfinite(step)]
        top = float(known.max()) if len(known) else 0.0
        median = float(np.median(known)) if len(known) else 0.0
        rows = []
        for r, t in zip(table.itertuples(index=False), step):
            if r.error:  # left out of the run: say why in its row
                rows.append(
                    f'<tr data-host="{esc(r.host)}"><td>{esc(r.host)}</td><td colspan="8">{esc(r.error)}</td></tr>'
                )
                continue
            slow = bool(np.isfinite(t) and median > 0 and t > STRAGGLER_RATIO * median)
            width = 100.0 * t / top if np.isfinite(t) and top > 0 else 0.0
            bar = f'<div class="xw-host-bar" style="width:{width:.1f}%"></div>'  # (its length is data)
            mark = " data-straggler" if slow else ""
            peak = size(r.memory_peak_bytes) if np.isfinite(r.memory_peak_bytes) else "–"
            rows.append(
                f'<tr data-host="{esc(r.host)}"{mark}>'
                f"<td>{esc(r.host)}</td><td>{r.steps}</td>"
                f'<td data-col="step_time_ms">{number(r.step_time_ms, ".2f")}</td>'
                f'<td class="xw-host-bar-cell">{bar}</td>'
                f"<td>{number(r.max_step_time_ms, '.2f')}</td><td>{number(r.idle_pct, '.1f')}</td>"
                f"<td>{number(r.input_pct, '.1f')}</td><td>{esc(peak)}</td>"
                f"<td>{number(r.seconds, '.2f')}</td></tr>"
            )
        slow = int(np.sum(known > STRAGGLER_RATIO * median)) if median > 0 else 0
        summary = f"{len(table)} hosts" + (
            f", {slow} straggling (step time > {STRAGGLER_RATIO}x median)" if slow else ""
        )
        head = (
            "<tr><th>Host</th><th>Steps</th><th>Step time (ms)</th><th>Step time per host</th>"
            "<th>Longest step (ms)</th><th>Device idle %</th><th>Input %</th><th>Memory peak</th>"
            "<th>Summary (s)</th></tr>"
        )
        return (
            f'<details class="xw-profile-hosts" data-testid="per-host" open><summary>{esc(summary)}</summary>'
            f'<table class="xw-table">{head}'
            f"{''.join(rows)}</table></details>"
        )

    def _tool_widget(self, run, host, tool):
        """The widget of `tool` for `run` and `host`, built once (shown in this widget,
        through its comm), or the ProfileError's message when it cannot be built."""
        with self._lock:
            key = (run.name, host, tool)
            if key not in self._built:
                cls = _widget_class(TOOLS[tool].widget)
                kwargs = {"host": None if host == ALL_HOSTS else host} if TOOLS[tool].per_host else {}
                try:
                    with built_without_comm():
                        self._built[key] = cls(run, **kwargs)
                except ProfileError as error:
                    self._built[key] = str(error)  # said on the page instead of the tool
            return self._built[key]

    def _show(self):
        with self._lock:
            run, host, tool = self.run, self.host, self.tool
            if run is None or host is None:
                return
            built = self._tool_widget(run, host, tool)
            failed = isinstance(built, str)
            self.message = self._status_html(run) + (
                f'<div class="xw-profile-error"><b>{html.escape(built)}</b></div>' if failed else ""
            )
            self._host(None if failed else built)


__all__ = ["ProfileWidget", "TOOLS"]
