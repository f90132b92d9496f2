"""XProf's profile tools as Jupyter widgets.

import xprof_widgets as xw
run = xw.load_run("LOGDIR")          # or xw.sample_run()
run.memory_viewer().peak_heap_bytes
xw.MemoryViewerWidget(run)           # in a notebook
"""

from ._version import __version__
from .capture import capture
from .errors import ProfileError
from .io.column_cache import cache_info, clear_cache
from .run import Run, compare, list_runs, load_run, sample_run
from .tools import WIDGETS as _WIDGETS


def _analysis_modules():
    """The analyses' modules by name, a package's subpackages found as it is imported."""
    import pkgutil

    from . import analysis

    for found in pkgutil.walk_packages(analysis.__path__, analysis.__name__ + "."):
        yield found.name


def _import_analyses():
    """The analyses' modules, each imported once (a fiftieth of a second: a tool imports
    its own when first asked, on its first view's clock); an error is left for the tool's
    own import to raise. The benchmarks import them before their clock, with the package."""
    from importlib import import_module

    for name in _analysis_modules():
        try:
            import_module(name)
        except Exception:  # (the tool's own import will say why)
            continue


def _widget_modules():
    """The modules a notebook kernel imports ahead (`_preload_widgets`): the analyses',
    the widgets' (anywidget, ipywidgets), then Bokeh's models, for the charts that Bokeh
    builds (not filled from a template; half a second)."""
    yield from _analysis_modules()
    yield from (f"{__name__}{module}" for module in sorted(set(_WIDGETS.values())))
    from .widgets._bokeh import BOKEH_MODEL_MODULES

    yield from BOKEH_MODEL_MODULES


def _preload_widgets():
    """In a notebook kernel, import the analyses' and the widgets' modules once the kernel
    is idle after the cell that imported the package: the first tool and its widget find
    them imported. They are imported on the kernel's own event loop, on its main thread, a
    module at a time (a cell sent meanwhile waits for one module at most), never on a
    thread of their own: Bokeh's imports are not thread-safe (a model class defined while
    another thread defines one fails to validate its defaults, "failed to validate
    WebDataSource.selection_policy"), and the user's cells import Bokeh too. Scripts (no
    kernel, or no loop running) never pay for them; XPROF_WIDGETS_PRELOAD=0 turns it off.
    An error is left for the module's own import to raise when a tool asks for it."""
    import asyncio
    import os
    import sys
    import threading
    from importlib import import_module

    if "ipykernel" not in sys.modules or os.environ.get("XPROF_WIDGETS_PRELOAD", "1") == "0":
        return
    if threading.current_thread() is not threading.main_thread():  # (a kernel's subshell)
        return
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:  # not imported from a cell on the kernel's loop
        return
    names = _widget_modules()

    def step():
        try:
            import_module(next(names))
        except StopIteration:
            return
        except Exception:  # (the tool's own import will say why)
            pass
        loop.call_soon(step)

    loop.call_soon(step)


_preload_widgets()


def __getattr__(name):
    # Widgets import anywidget and bokeh: only when asked for, so that the
    # analyses stay quick to import in scripts.
    if name in _WIDGETS:
        from importlib import import_module

        return getattr(import_module(_WIDGETS[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    # The widgets are attributes too (made on first use): a notebook's completion on `xw.`
    # offers them.
    return sorted(set(globals()) | set(_WIDGETS))


__all__ = [
    "ProfileError",
    "__version__",
    "Run",
    "cache_info",
    "capture",
    "clear_cache",
    "compare",
    "list_runs",
    "load_run",
    "sample_run",
    *_WIDGETS,
]
