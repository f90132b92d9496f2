"""Build hook: say in one line what to do when the front end cannot be built.

The widgets' JavaScript (`xprof_widgets/static/`) is built from `js/` with Node.js
(hatch-jupyter-builder runs `npm run build`). A wheel or an sdist carries it built;
only a build from a git checkout needs Node.js 18+ and npm.
"""

import shutil
from pathlib import Path

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

# The built front end (js/build.mjs); pyproject.toml lists the same files.
STATIC = (
    "xprof_widgets/static/widget.js",
    "xprof_widgets/static/widget.css",
    "xprof_widgets/static/bokeh.js",
    "xprof_widgets/static/export.js",
    "xprof_widgets/static/export.css",
)


class FrontEndCheck(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        root = Path(self.root)
        if all((root / f).is_file() for f in STATIC):
            return
        if shutil.which("npm") is None:
            raise SystemExit(
                "xprof-widgets: building from a git checkout needs Node.js 18+ and npm for the widgets' "
                "front end (https://nodejs.org, or `apt install nodejs npm`); or install a wheel or sdist, "
                "which carry it built."
            )
