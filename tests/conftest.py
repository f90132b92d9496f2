"""Where the tests' real profiles come from, and what happens when one is missing.

`PROFILES / "name"` is a logdir and `REFERENCE / "name" / "SESSION"` XProf 2.24.2's output
for it, laid out as `../shared/profiles` is. They come from, in this order:

* the external corpus: the folder named by `XPROF_CORPUS` (default `../shared/profiles`,
  a checkout of the project's shared folder beside this one) when it is there;
* the small profiles vendored in `tests/data/profiles` (TPU inference, JAX on 8 AMD GPUs
  and on an NVIDIA H200, with XProf's references; licences in tests/data/profiles/README.md);
* the two samples shipped inside the package (`xw.sample_run()`, `xw.sample_run("gpu")`),
  which are the corpus' `jax_mlp_cpu` and `amd_jax_gemm_mi300`.

So a clone alone runs every test but those that need the big corpus; those skip, saying
which logdir they need and how to get it. Under `CI=true` a missing corpus is a failure.
"""

import atexit
import functools
import gzip
import os
import shutil
import socket
import tempfile
import types
from pathlib import Path

import pytest

import xprof_widgets

# The column cache (xprof_widgets/io/column_cache.py) writes beside the user's caches: the
# tests, and the processes they start, write into a folder of their own instead.
_COLUMN_CACHE = tempfile.mkdtemp(prefix="xprof-test-column-cache-")
os.environ["XPROF_WIDGETS_CACHE_DIR"] = _COLUMN_CACHE
atexit.register(shutil.rmtree, _COLUMN_CACHE, ignore_errors=True)

REPO = Path(__file__).resolve().parents[1]
CORPUS = Path(os.environ.get("XPROF_CORPUS") or REPO.parent / "shared" / "profiles")
VENDORED = REPO / "tests" / "data" / "profiles"
PACKAGE_DATA = Path(xprof_widgets.__file__).parent / "data"
SAMPLES = {"jax_mlp_cpu": PACKAGE_DATA / "sample", "amd_jax_gemm_mi300": PACKAGE_DATA / "sample_gpu"}
TOOLS = CORPUS.parent / "tools"  # tile_xplane.py, make_reference.py
IN_CI = os.environ.get("CI") == "true"
#: The corpus' logdirs (shared/profiles/README.md): a test that names one may need it.
CORPUS_LOGDIRS = (
    "jax_mlp_cpu",
    "jax_transformer_cpu",
    "tf_keras_cpu",
    "tf_gpu_multiworker",
    "tpu_v6e_inference",
    "amd_jax_gemm_mi300",
    "amd_jax_elementwise_mi300",
    "amd_jax_conv_mi300",
    # Vendored (tests/data/profiles): JAX 0.11 on an NVIDIA H200, with and without steps,
    # with XLA's command buffers (CUDA graphs) off, and with device loops (scan, fori_loop).
    "nvidia_jax_mlp_h200",
    "nvidia_jax_no_steps_h200",
    "nvidia_jax_mlp_no_graphs_h200",
    "nvidia_jax_scan_h200",
    "nvidia_jax_scan_no_graphs_h200",
    # A convolution net (cuDNN kernels, memsets) and a rematerialised scan recorded with the
    # Python tracer, graphs on and off: the programs issue 46's hunt found flows on.
    "nvidia_jax_conv_h200",
    "nvidia_jax_conv_no_graphs_h200",
    "nvidia_jax_remat_h200",
    "nvidia_jax_remat_no_graphs_h200",
)
HOW_TO_GET = (
    f"the profile corpus is not at {CORPUS}: set XPROF_CORPUS to a folder holding it "
    "(the project's shared/profiles, checked out beside this repository by default)"
)


def _assemble():
    """One folder laid out like the corpus, of links to wherever each logdir is found."""
    root = Path(tempfile.mkdtemp(prefix="xprof-test-profiles-"))
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    (root / "_reference").mkdir()
    for source in (CORPUS, VENDORED):
        if not source.is_dir():
            continue
        for entry in source.iterdir():
            if entry.name == "_reference":
                for ref in entry.iterdir():
                    if ref.is_dir() and not (root / "_reference" / ref.name).exists():
                        (root / "_reference" / ref.name).symlink_to(ref.resolve())
            elif (entry / "plugins").is_dir() and not (root / entry.name).exists():
                (root / entry.name).symlink_to(entry.resolve())
    for name, sample in SAMPLES.items():  # the shipped samples, un-gzipped as the corpus holds them
        if (root / name).exists():
            continue
        for gz in sample.glob("plugins/profile/*/*.xplane.pb.gz"):
            out = root / name / gz.relative_to(sample).with_suffix("")
            out.parent.mkdir(parents=True, exist_ok=True)
            with gzip.open(gz) as src, open(out, "wb") as dst:
                shutil.copyfileobj(src, dst)
    return root


PROFILES = _assemble()
REFERENCE = PROFILES / "_reference"
AVAILABLE = {p.name for p in PROFILES.iterdir() if p.name != "_reference"} | {p.name for p in REFERENCE.iterdir()}


@functools.cache
def corpus_run(name, session=None, attribute_cuda_graphs=False):
    """The Run of corpus logdir `name` (its newest run, or run folder `session`), opened once
    per test session and shared: tests read it, none changes it. With XProf's accounting of
    kernels run in CUDA graphs (idle), the tests' referee, unless `attribute_cuda_graphs`."""
    path = PROFILES / name if session is None else PROFILES / name / "plugins" / "profile" / session
    return xprof_widgets.load_run(path, attribute_cuda_graphs=attribute_cuda_graphs)


def first_sessions():
    """(logdir, run folder) of the first run of every corpus logdir this checkout has: what a
    test that compares a tool with XProf on each corpus run is parametrized by."""
    return [
        (name, p.parent.name)
        for name in CORPUS_LOGDIRS
        if name in AVAILABLE
        for p in sorted((PROFILES / name).glob("plugins/profile/*/*.xplane.pb"))[:1]
    ]


def session_files(name, session):
    """The host files of run folder `session` of corpus logdir `name`, sorted."""
    return sorted((PROFILES / name / "plugins" / "profile" / session).glob("*.xplane.pb"))


def free_port():
    """A TCP port nothing listens on now, on 127.0.0.1."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def host_copies(src, root, hosts):
    """A run folder under `root` (LOGDIR/plugins/profile/x) holding a copy of the host file
    `src` for each name in `hosts` (`h1.xplane.pb`, ...): a many-host run of a real host.
    Returns the copies' paths."""
    folder = Path(root) / "plugins" / "profile" / "x"
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{host}.xplane.pb" for host in hosts]
    for p in paths:
        shutil.copy(src, p)
    return paths


def profile_files():
    """Every real profile file the tests can read."""
    return sorted(PROFILES.glob("*/plugins/profile/*/*.xplane.pb"))


def add_stat(stats, metadata_id, value):
    """Append an XStat to a repeated `stats` field of a hand-made XSpace: a str as str_value,
    anything else as int64_value."""
    stat = stats.add(metadata_id=metadata_id)
    if isinstance(value, str):
        stat.str_value = value
    else:
        stat.int64_value = value
    return stat


def pytest_sessionstart(session):
    if IN_CI and not CORPUS.is_dir():
        pytest.exit(f"CI=true and {HOW_TO_GET}; CI runs every test on the full corpus.", returncode=1)


def _named_logdirs(item):
    """Corpus logdirs a test names: in its parameters or its own source."""
    import inspect

    found = set()
    for value in getattr(getattr(item, "callspec", None), "params", {}).values():
        found.update(n for n in CORPUS_LOGDIRS if n in str(value))
    try:
        source = inspect.getsource(item.function)
    except (OSError, TypeError, AttributeError):
        source = ""
    found.update(n for n in CORPUS_LOGDIRS if f'"{n}"' in source or f"'{n}'" in source)
    # Module constants the test reads (`LOGDIR = PROFILES / "tf_keras_cpu"`): a browser test
    # only learns in the kernel that a logdir is missing.
    module = getattr(item, "module", None)
    for name in getattr(getattr(item, "function", None), "__code__", types.SimpleNamespace(co_names=())).co_names:
        value = getattr(module, name, None)
        if isinstance(value, (str, Path)):
            found.update(n for n in CORPUS_LOGDIRS if n in Path(value).parts)
    return found


def _missing_logdir(item, excinfo):
    """The corpus logdir a failure came from not finding, or None: a missing logdir's path
    in the error, or a missing logdir the test names."""
    missing = sorted(n for n in _named_logdirs(item) if n not in AVAILABLE)
    text = []
    exc = excinfo.value if excinfo is not None else None
    while exc is not None:
        text.append(str(exc))
        text.extend(str(a) for a in getattr(exc, "args", ()))
        exc = exc.__cause__ or exc.__context__
    text = " ".join(text)
    for base in (str(REFERENCE) + "/", str(PROFILES) + "/"):
        at = text.find(base)
        while at >= 0:
            name = text[at + len(base) :].split("/", 1)[0].split("'", 1)[0].split(" ", 1)[0]
            if name and name != "_reference" and name not in AVAILABLE:
                return name
            at = text.find(base, at + 1)
    return missing[0] if missing else None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """A test that failed for want of a corpus logdir is skipped, saying how to get it
    (failed, with that said, under CI=true)."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or call.excinfo is None:
        return
    name = _missing_logdir(item, call.excinfo)
    if name is None:
        return
    reason = f"needs the corpus logdir {name!r}: {HOW_TO_GET}"
    if IN_CI:
        report.longrepr = f"{reason}\n\n{report.longrepr}"
        return
    report.outcome = "skipped"
    report.longrepr = (str(item.path), item.location[1] or 0, f"Skipped: {reason}")
