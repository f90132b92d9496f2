"""What every benchmark here does the same way: run a measurement in a fresh
process, give XProf a fresh copy of the file, take medians."""

import contextlib
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from pathlib import Path


def measure(cmd, env=None, cwd=None):
    """Run `cmd` (a fresh Python process; `env`: its environment, else this one's; `cwd`:
    its folder, else this one's) and return the JSON object on its last output line."""
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=cwd).stdout
    return json.loads(out.strip().splitlines()[-1])


def uncached(**extra):
    """This environment with the column cache off (and `extra`): every repeat decodes the
    file, as a first open does, and nothing is written into the user's cache folder."""
    return {**os.environ, "XPROF_WIDGETS_CACHE": "0", **extra}


@contextlib.contextmanager
def fresh_copy(path):
    """A copy of `path` in a temporary folder: XProf caches results beside its input."""
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / Path(path).name
        shutil.copy(path, copy)
        yield copy


def median(rows, key):
    """The median of `key` over a list of measurement dicts."""
    return statistics.median(r[key] for r in rows)
