"""Build hook: the compiled reading loops, and one clear line when the front end cannot be built.

The widgets' JavaScript (`xprof_widgets/static/`) is built from `js/` with Node.js
(hatch-jupyter-builder runs `npm run build`). A wheel or an sdist carries it built;
only a build from a git checkout needs Node.js 18+ and npm.

`xprof_widgets/io/_wire.c` (plain C, no Python API) is compiled into a shared library
beside it when a C compiler is found (`$CC`, else `cc`); the wheel is then tagged for this
platform. Without a compiler the build goes on, and the package reads profiles with numpy
alone (`xprof_widgets.io.native` says which).
"""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
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


class BuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version, build_data):
        root = Path(self.root)
        if self.target_name == "wheel" and _compile_native(root):
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
        if all((root / f).is_file() for f in STATIC):
            return
        if shutil.which("npm") is None:
            raise SystemExit(
                "xprof-widgets: building from a git checkout needs Node.js 18+ and npm for the widgets' "
                "front end (https://nodejs.org, or `apt install nodejs npm`); or install a wheel or sdist, "
                "which carry it built."
            )


NATIVE_SOURCE = "xprof_widgets/io/_wire.c"
# xprof_widgets/io/native.py loads it by this name.
NATIVE_LIBRARY = "xprof_widgets/io/libxwwire" + (
    ".dll" if sys.platform == "win32" else ".dylib" if sys.platform == "darwin" else ".so"
)


def _compile_native(root):
    """Compile _wire.c; True when the library was built. Portable flags: no -march."""
    source, library = root / NATIVE_SOURCE, root / NATIVE_LIBRARY
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    command = shlex.split(cc)
    if not source.is_file() or sys.platform == "win32" or shutil.which(command[0]) is None:
        return False
    built = library.with_name(library.name + ".tmp")  # then renamed: a process never loads half a file
    flags = ["-O2", "-std=c99", "-shared", "-fPIC", "-o", str(built), str(source)]
    try:
        subprocess.run(command + flags, check=True, capture_output=True, timeout=120)
        os.replace(built, library)
    except (OSError, subprocess.SubprocessError) as error:
        print(f"xprof-widgets: {NATIVE_SOURCE} not compiled ({error}); profiles are read with numpy alone")
        built.unlink(missing_ok=True)
        return False
    return True
