"""xw.capture against a real JAX profiler server running a real workload.

The server is a child process (`jax.profiler.start_server` on a free port, a
jitted matmul loop under StepTraceAnnotation); the capture client is XProf's
(`pip install xprof`, in the test extra). JAX itself is only needed by the
server: `pip install jax` (CPU) or the tests that need it skip.
"""

import importlib
import os
import shutil
import socket
import subprocess
import sys
import textwrap
import time
from importlib.util import find_spec
from pathlib import Path

import pytest

import xprof_widgets as xw
from xprof_widgets.errors import ProfileError

from .conftest import free_port

capture_mod = importlib.import_module("xprof_widgets.capture")  # xw.capture is the function

HAVE_CLIENT = capture_mod.available_client() is not None
needs_client = pytest.mark.skipif(not HAVE_CLIENT, reason=f"no capture client: {capture_mod.CLIENT_INSTALL}")
needs_jax = pytest.mark.skipif(
    find_spec("jax") is None,
    reason="jax is not installed (pip install jax): the profiler server under test is a JAX program",
)

SERVER = textwrap.dedent("""
    import sys, time
    import jax, jax.numpy as jnp

    jax.profiler.start_server(int(sys.argv[1]))

    @jax.jit
    def matmul_loop(x, w):
        for _ in range(4):
            x = jnp.tanh(x @ w)
        return x

    x, w = jnp.ones((128, 128)), jnp.full((128, 128), 0.01)
    matmul_loop(x, w).block_until_ready()  # compiled before any capture
    print("ready", flush=True)
    step, t0 = 0, time.monotonic()
    while time.monotonic() - t0 < 120:  # bounded: the fixture kills it long before
        with jax.profiler.StepTraceAnnotation("train", step_num=step):
            x = matmul_loop(x, w).block_until_ready()
        step += 1
        time.sleep(0.002)
""")


@pytest.fixture(scope="module")
def jax_server(tmp_path_factory):
    """Port of a JAX profiler server whose program runs jitted steps until killed."""
    script = tmp_path_factory.mktemp("server") / "server.py"
    script.write_text(SERVER)
    port = free_port()
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    proc = subprocess.Popen(
        [sys.executable, str(script), str(port)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        stdin=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        assert proc.stdout.readline().strip() == "ready", "the JAX server did not start"
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        yield port
    finally:
        proc.kill()
        proc.wait(timeout=10)


@needs_client
@needs_jax
def test_capture_from_a_running_jax_program(jax_server, tmp_path):
    run = xw.capture(f"localhost:{jax_server}", duration_ms=1000, logdir=tmp_path)
    assert isinstance(run, xw.Run)
    # Written where XProf writes: LOGDIR/plugins/profile/RUN/HOST.xplane.pb, and listed there.
    assert run.path.parent == tmp_path / "plugins" / "profile"
    assert xw.list_runs(tmp_path)["run"].tolist() == [run.name]
    events = run.events(plane="/host:CPU")
    assert len(events) > 1000
    names = set(events["name"].astype(str))
    assert "PjitFunction(matmul_loop)" in names
    # The loop's steps: ~2.5 ms each, so a 1 s capture holds well over 50 whole ones.
    ov = run.overview()
    assert ov.reason == ""
    assert len(ov.steps) > 50
    assert ov.steps["step_name"].astype(str).str.startswith("train").all()
    assert 0 < ov.avg_step_time_ms < 100
    # The server sends the HloProtos of what it compiled.
    assert "jit_matmul_loop" in set(run.modules["name"])
    # Every step runs the jitted function once.
    jitted = (events["name"] == "PjitFunction(matmul_loop)").sum()
    assert jitted >= len(ov.steps)


@needs_client
@needs_jax
def test_capture_widget(jax_server, tmp_path):
    from xprof_widgets.widgets.capture import CaptureWidget

    seen = []
    w = CaptureWidget(address=f"localhost:{jax_server}", duration_ms=300, logdir=str(tmp_path))
    w.on_capture(seen.append)
    run = w.capture()
    assert run is not None and seen == [run] and w.run is run and w.error == ""
    assert 'data-status="ok"' in w.message and run.name in w.message
    assert type(w.current).__name__ == "OverviewWidget"
    assert len(run.events()) > 0
    assert not w.capturing


@needs_client
def test_no_server_is_a_clear_fast_error():
    port = free_port()  # nothing listens on it now
    t0 = time.monotonic()
    with pytest.raises(xw.ProfileError) as e:
        xw.capture(port, duration_ms=500, connect_timeout_s=1)
    assert time.monotonic() - t0 < 3
    msg = str(e.value)
    assert f"localhost:{port}" in msg and "nothing is listening" in msg
    assert f"jax.profiler.start_server({port})" in msg


@needs_client
def test_widget_shows_the_error(tmp_path):
    from xprof_widgets.widgets.capture import CaptureWidget

    w = CaptureWidget(address=f"localhost:{free_port()}", duration_ms=100, logdir=str(tmp_path))
    assert w.capture() is None and w.run is None
    assert 'data-status="error"' in w.message and "nothing is listening" in w.message
    w.address = f"<b>bad</b>:{free_port()}"
    assert w.capture() is None and "no such host" in w.error
    assert "<b>bad</b>" not in w.message and "&lt;b&gt;bad&lt;/b&gt;" in w.message  # escaped
    w.address = "no-port"
    assert w.capture() is None and "has no port" in w.error


@needs_client
def test_a_server_that_never_answers_times_out(tmp_path):
    with socket.socket() as s:  # accepts TCP, never speaks gRPC
        s.bind(("127.0.0.1", 0))
        s.listen(4)
        port = s.getsockname()[1]
        t0 = time.monotonic()
        with pytest.raises(xw.ProfileError, match="sent no profile within 2 s"):
            xw.capture(port, duration_ms=200, logdir=tmp_path, timeout_s=2)
        assert time.monotonic() - t0 < 6


@needs_client
def test_not_a_profiler_server(tmp_path):
    import http.server
    import threading

    class Quiet(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

    srv = http.server.HTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        with pytest.raises(xw.ProfileError, match="no trace data.*Is a profiler server listening there"):
            xw.capture(srv.server_address[1], duration_ms=200, logdir=tmp_path, num_tracing_attempts=1)
    finally:
        srv.shutdown()
    assert not (tmp_path / "plugins").exists() or not list((tmp_path / "plugins").rglob("*.xplane.pb"))


def test_addresses():
    assert capture_mod.parse_address(9999) == [("localhost", 9999)]
    assert capture_mod.parse_address("9999") == [("localhost", 9999)]
    assert capture_mod.parse_address("grpc://10.0.0.2:8466, grpc://10.0.0.3:8466") == [
        ("10.0.0.2", 8466),
        ("10.0.0.3", 8466),
    ]
    assert capture_mod.parse_address("[::1]:6009") == [("::1", 6009)]
    with pytest.raises(ValueError, match="has no port"):
        capture_mod.parse_address("localhost")


def test_no_client_says_what_to_install(monkeypatch):
    monkeypatch.setattr(capture_mod, "available_client", lambda: None)
    with pytest.raises(ImportError, match="pip install xprof"):
        xw.capture(9999)


def test_reading_what_the_server_wrote_is_bounded_by_the_deadline(tmp_path, monkeypatch):
    """What the server wrote is read first in a child process, by the capture's deadline: a
    profile no reader finishes is a ProfileError, not a call that never returns."""
    folder = tmp_path / "plugins" / "profile" / "2026_01_01_00_00_00"
    folder.mkdir(parents=True)
    source = next(Path(xw.sample_run("cpu").path).glob("*.xplane.pb*"))
    shutil.copy(source, folder / source.name)
    started = time.monotonic()
    run = capture_mod._open_capture("localhost:1", str(tmp_path), {}, True, started + 30)
    assert len(run.events())  # a good profile opens
    monkeypatch.setattr(capture_mod, "_READ_SCRIPT", "import time; time.sleep(120)")  # a reader that spins
    monkeypatch.setattr(capture_mod, "MIN_READ_S", 1.0)
    started = time.monotonic()
    with pytest.raises(ProfileError, match="could not be read within"):
        capture_mod._open_capture("localhost:1", str(tmp_path), {}, True, started + 1)
    assert time.monotonic() - started < 20


def test_a_fifo_is_refused_not_waited_on(tmp_path):
    """A `*.xplane.pb` that is a FIFO (opening it would wait for a writer for good): a
    ProfileError naming it, at once."""
    import threading

    folder = tmp_path / "plugins" / "profile" / "run"
    folder.mkdir(parents=True)
    fifo = folder / "host.xplane.pb"
    os.mkfifo(fifo)
    outcome = []

    def load(path):
        try:
            xw.load_run(path)
        except ProfileError as error:
            outcome.append(str(error))

    for path in (fifo, folder):  # the file named, and the run folder holding it
        thread = threading.Thread(target=load, args=(path,), daemon=True)
        thread.start()
        thread.join(30)
        assert not thread.is_alive(), f"load_run({path}) waited on the FIFO"
    assert str(fifo) in outcome[0] and "pipe" in outcome[0]
    assert len(outcome) == 2  # the folder: no profile file in it
    from xprof_widgets.io.xspace import read_xspace

    with pytest.raises(ProfileError, match="not a regular file"):
        read_xspace(fifo)  # as a pool's worker reads a host file
