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
