"""Capturing a profile from a running program, as XProf's "Capture profile" button.

The program to profile starts a profiler server (`jax.profiler.start_server(PORT)`
or `tf.profiler.experimental.server.start(PORT)`); `capture(ADDRESS)` asks it
for `duration_ms` of trace, which the server sends back and the client writes
as `LOGDIR/plugins/profile/RUN/HOST.xplane.pb`; the new run is then opened with
`load_run`.

The client is the one XProf's own capture uses: `xprof`'s
`_pywrap_profiler_plugin.trace` (the same call `python -m jax.collect_profile`
makes; `jax.profiler` itself has no remote-capture call). Older installs that
have `tensorboard_plugin_profile` or TensorFlow's `profiler_client` instead
work too. The client runs in a child process: it can be stopped when the
server never answers, a crash in its native code cannot take the kernel down,
and its gRPC library does not meet the one a framework loaded in the kernel.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from importlib.util import find_spec

from .errors import ProfileError
from .io import fs

#: What to install for a capture client (XProf's, small, no framework needed).
CLIENT_INSTALL = "pip install xprof"
#: Packages that bring a client, in the order tried.
CLIENT_PACKAGES = ("xprof", "tensorboard_plugin_profile", "tensorflow")

START_SERVER_HINT = (
    "start the profiler server in the program to profile, e.g. jax.profiler.start_server({port}) "
    "or tf.profiler.experimental.server.start({port}), and check the host and port"
)

# Runs in the child: tries each client, prints one JSON line {"client"} or {"error"}.
_CLIENT_SCRIPT = r"""
import json, sys
a = json.loads(sys.argv[1])
def xprof_like(module):
    client = __import__(module, fromlist=["_pywrap_profiler_plugin"])._pywrap_profiler_plugin
    client.trace(a["address"], a["logdir"], "", True, a["duration_ms"], a["attempts"], a["options"])
def tensorflow(_):
    from tensorflow.python.profiler import profiler_client, profiler_v2
    o = a["options"]
    options = profiler_v2.ProfilerOptions(host_tracer_level=o["host_tracer_level"],
        python_tracer_level=o["python_tracer_level"], device_tracer_level=o["device_tracer_level"],
        delay_ms=o["delay_ms"] or None)
    profiler_client.trace(a["address"], a["logdir"], a["duration_ms"], "", a["attempts"], options)
clients = {"xprof": (xprof_like, "xprof.convert"),
           "tensorboard_plugin_profile": (xprof_like, "tensorboard_plugin_profile.convert"),
           "tensorflow": (tensorflow, None)}
fn, module = clients[a["client"]]
try:
    fn(module)
    out = {"client": a["client"]}
except Exception as e:
    out = {"error": f"{type(e).__name__}: {e}"}
sys.stdout.write("\n" + json.dumps(out) + "\n")
"""


def available_client():
    """The installed package whose capture client `capture` uses, or None."""
    for name in CLIENT_PACKAGES:
        try:
            if find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


def parse_address(address):
    """[(host, port)] of an address: a port number, `host:port`, `grpc://host:port`,
    `[::1]:port`, or several of those separated by commas (one per worker).
    Raises ValueError when a part has no port."""
    if isinstance(address, int):
        return [("localhost", address)]
    out = []
    for part in str(address).split(","):
        part = part.strip().removeprefix("grpc://")
        host, sep, port = part.rpartition(":")
        if not sep or not port.isdigit():
            if part.isdigit():
                host, port = "localhost", part
            else:
                raise ValueError(
                    f"profiler server address {part!r} has no port: write it as host:port, e.g. localhost:9999"
                )
        host = host.strip("[]") or "localhost"
        out.append((host, int(port)))
    if not out:
        raise ValueError("no profiler server address given")
    return out


def check_listening(address, timeout_s=2.0):
    """Raise ProfileError unless something accepts TCP connections at every
    part of `address` within `timeout_s` seconds each."""
    for host, port in parse_address(address):
        try:
            with socket.create_connection((host, port), timeout=timeout_s):
                pass
        except socket.gaierror as e:
            raise ProfileError(f"{host}:{port}", f"no such host ({e.strerror or e}): check the address") from None
        except OSError as e:
            why = "no answer" if isinstance(e, (TimeoutError, socket.timeout)) else (e.strerror or str(e))
            raise ProfileError(
                f"{host}:{port}",
                f"nothing is listening for a profile capture there ({why}): {START_SERVER_HINT.format(port=port)}",
            ) from None


def _xplane_files(logdir):
    """{path: (mtime, size)} of the profile files under `logdir/plugins/profile` (local logdirs)."""
    root = os.path.join(logdir, "plugins", "profile")
    out = {}
    if not os.path.isdir(root):
        return out
    for run in os.scandir(root):
        if run.is_dir():
            for f in os.scandir(run.path):
                if f.name.endswith((".xplane.pb", ".xplane.pb.gz")) and f.is_file():
                    st = f.stat()
                    out[f.path] = (st.st_mtime_ns, st.st_size)
    return out


def capture(
    address,
    duration_ms=1000,
    logdir=None,
    *,
    host_tracer_level=2,
    device_tracer_level=1,
    python_tracer_level=0,
    delay_ms=0,
    num_tracing_attempts=3,
    timeout_s=None,
    connect_timeout_s=2.0,
):
    """Capture `duration_ms` milliseconds of a running program's profile and open it.

    `address` is where the program's profiler server listens: a port on this
    machine (`9999`), `host:port`, `grpc://host:port`, or several comma-separated
    (one per worker). `logdir` is where the profile is written (a new
    `plugins/profile/RUN/` folder; default a new temporary folder). The tracer
    levels are XProf's capture options (host 0-3, device 0-1, Python 0-1);
    `delay_ms` waits before tracing starts; `num_tracing_attempts` retries a
    capture that collected nothing. `timeout_s` (default: duration times attempts
    plus 60 s) bounds the whole call: the capture, and the first reading of what the
    server wrote (in a child process, so that a profile no reader can finish is a
    ProfileError, not a call that never returns).

    Returns the new profile as a `Run`. Raises ImportError when no capture
    client is installed (it names the package), and ProfileError when nothing
    listens at the address, the server sends no trace, or no answer comes in
    time.
    """
    if duration_ms <= 0:
        raise ValueError(f"duration_ms must be positive, not {duration_ms}")
    client = available_client()
    if client is None:
        raise ImportError(
            "xw.capture needs a profiler capture client and none is installed: "
            f"{CLIENT_INSTALL} (XProf's own client; TensorFlow's works too). "
            "The program to profile needs its framework's profiler server, not this package."
        )
    hosts = parse_address(address)
    service_addr = ",".join(f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in hosts)
    check_listening(address, timeout_s=connect_timeout_s)
    if logdir is None:
        logdir = tempfile.mkdtemp(prefix="xprof_capture_")
    logdir = str(logdir)
    local = not fs.is_url(logdir)
    if local:
        logdir = os.path.abspath(os.path.expanduser(logdir))
        os.makedirs(logdir, exist_ok=True)
    before = _xplane_files(logdir) if local else {}
    if timeout_s is None:
        timeout_s = (duration_ms + delay_ms) / 1000 * max(1, num_tracing_attempts) + 60
    args = {
        "client": client,
        "address": service_addr,
        "logdir": logdir,
        "duration_ms": int(duration_ms),
        "attempts": int(num_tracing_attempts),
        "options": {
            "host_tracer_level": int(host_tracer_level),
            "device_tracer_level": int(device_tracer_level),
            "python_tracer_level": int(python_tracer_level),
            "delay_ms": int(delay_ms),
        },
    }
    started = time.monotonic()
    try:
        proc = _python(_CLIENT_SCRIPT, [json.dumps(args)], timeout_s)
    except subprocess.TimeoutExpired:
        raise ProfileError(
            service_addr,
            f"the profiler server sent no profile within {timeout_s:.0f} s (asked for {duration_ms} ms): "
            "it may be busy with another capture, or blocked; try again or raise timeout_s",
        ) from None
    result = _last_json(proc.stdout)
    if result is None:
        tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
        raise ProfileError(
            service_addr, f"the capture client ({client}) stopped with exit code {proc.returncode}: {tail}"
        )
    if "error" in result:
        raise ProfileError(
            service_addr, _explain(result["error"], proc.stderr, duration_ms, time.monotonic() - started)
        )
    return _open_capture(service_addr, logdir, before, local, started + timeout_s)


def _python(script, args, seconds):
    """`script` run by a fresh Python with `args`, its output captured, within `seconds`
    (raises subprocess.TimeoutExpired past them, the child killed)."""
    return subprocess.run(
        [sys.executable, "-c", script, *args],
        check=False,
        capture_output=True,
        text=True,
        timeout=seconds,
        stdin=subprocess.DEVNULL,
    )


def _last_json(stdout):
    for line in reversed(stdout.strip().splitlines()):
        try:
            out = json.loads(line)
        except ValueError:
            continue
        if isinstance(out, dict):
            return out
    return None


def _server_replies(stderr):
    """The client's per-server verdicts from its log: 'ADDR returned CODE: message'."""
    out = []
    for line in stderr.splitlines():
        if "capture_profile.cc" in line and " returned " in line:
            out.append(line.split("] ", 1)[-1].strip())
    return list(dict.fromkeys(out))  # once per attempt: say it once


def _explain(error, stderr, duration_ms, elapsed_s):
    replies = _server_replies(stderr)
    if replies:
        return (
            f"the capture returned no trace data: {'; '.join(replies)}. Is a profiler server listening there "
            "(the port given to jax.profiler.start_server / tf.profiler.experimental.server.start)?"
        )
    if "No trace event" in error or "no responses" in error:
        return (
            f"the capture returned no trace data in {duration_ms} ms ({error}). Is the program running "
            "(not paused, not finished)? Try a longer duration."
        )
    if "DEADLINE_EXCEEDED" in error:
        return f"the profiler server did not answer in time ({elapsed_s:.0f} s): {error}"
    return f"the capture failed: {error}"


#: A capture's first read of what the server wrote runs in a child process, given at least
#: this long even when the capture used up its time.
MIN_READ_S = 10.0

_READ_SCRIPT = """
import sys
from xprof_widgets.errors import ProfileError
from xprof_widgets.io.xspace import read_xspace
try:
    for path in sys.argv[1:]:
        read_xspace(path)
except ProfileError as error:
    print(str(error), file=sys.stderr)
    sys.exit(3)
"""


def _read_within(paths, deadline, where):
    """Read each profile file once in a child process, by `deadline` (time.monotonic()), so
    that this process never starts on a file no reader finishes (a damaged or hostile one
    may make a reader spin): ProfileError if it fails or runs out of time. (Files big
    enough for the column cache are then opened here from the entry the child wrote.)"""
    seconds = max(deadline - time.monotonic(), MIN_READ_S)
    try:
        done = _python(_READ_SCRIPT, list(paths), seconds)
    except subprocess.TimeoutExpired:
        raise ProfileError(
            where, f"the captured profile could not be read within {seconds:.0f} s (the capture's time limit)"
        ) from None
    if done.returncode == 3:
        raise ProfileError(where, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "cannot be read")
    if done.returncode != 0:
        tail = " ".join(done.stderr.strip().splitlines()[-2:])
        raise ProfileError(where, f"the captured profile could not be read (exit code {done.returncode}: {tail})")


def _open_capture(service_addr, logdir, before, local, deadline=None):
    from .run import load_run

    if not local:  # remote logdirs: the newest run the capture wrote
        return load_run(logdir)
    after = _xplane_files(logdir)
    new = sorted(p for p, stamp in after.items() if before.get(p) != stamp)
    if not new:
        raise ProfileError(
            service_addr,
            f"the capture finished but wrote no profile under {logdir}/plugins/profile: the server returned no data",
        )
    # One capture writes one run folder (one file per host); keep the newest folder's files.
    newest = max({os.path.dirname(p) for p in new})
    files = [p for p in new if os.path.dirname(p) == newest]
    if deadline is not None:
        _read_within(files, deadline, newest)
    run = load_run(files)
    if not any(len(ln) for space in run.xspaces() for plane in space.planes for ln in plane.lines):
        raise ProfileError(
            newest,
            "the captured profile holds no events: the program did nothing while it was traced "
            "(run the workload during the capture, or capture longer)",
        )
    return run


__all__ = ["CLIENT_INSTALL", "available_client", "capture", "check_listening", "parse_address"]
