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


def _import_analyses():
    """The analyses' modules, each imported once (a fiftieth of a second: a tool imports
    its own when first asked, on its first view's clock); an error is left for the tool's
    own import to raise. The benchmarks import them before their clock, with the package."""
    import pkgutil
    from importlib import import_module

    from . import analysis

    for found in pkgutil.walk_packages(analysis.__path__, analysis.__name__ + "."):
        try:
            import_module(found.name)
        except Exception:  # (the tool's own import will say why)
            continue


def _import_widgets():
    """The analyses' modules, then the widgets' (Bokeh's models, anywidget, ipywidgets:
    half a second), each imported once; an error is left for the widget's own import to
    raise."""
    from importlib import import_module

    _import_analyses()
    for module in sorted(set(_WIDGETS.values())):
        try:
            import_module(module, __name__)
        except Exception:  # (the widget's own import will say why)
            continue


def _preload_widgets():
    """In a notebook kernel, import the analyses' and the widgets' modules on a background
    thread as soon as the package is imported: the first tool and its widget find them
    imported. Scripts (no kernel) never pay for them; XPROF_WIDGETS_PRELOAD=0 turns it off."""
    import os
    import sys
    import threading

    if "ipykernel" in sys.modules and os.environ.get("XPROF_WIDGETS_PRELOAD", "1") != "0":
        threading.Thread(target=_import_widgets, name="xprof_widgets-preload", daemon=True).start()


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
