"""The logdir layout: `LOGDIR/plugins/profile/RUN/HOST.xplane.pb[.gz]`, one file per host
and a folder per capture (named by time, so the newest is the last by name). Local
folders and fsspec URLs alike (`fs`)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ..errors import ProfileError
from . import fs

XSPACE_SUFFIXES = (".xplane.pb", ".xplane.pb.gz")


def host_of(path: object) -> str:
    """The host name a profile file stands for: its name less `.xplane.pb[.gz]`."""
    name = Path(str(path)).name
    for suffix in XSPACE_SUFFIXES:
        if name.endswith(suffix):
            return name[: -len(suffix)]
    return name


PROFILE_SUBDIR = ("plugins", "profile")


def profile_files(folder: Path | str) -> list[Path | str]:
    """The profile files (`HOST.xplane.pb[.gz]`) directly in a run folder."""
    return [f for f in fs.listdir(folder)[1] if fs.name(f).endswith(XSPACE_SUFFIXES)]


def profile_root(logdir: Path | str) -> Path | str:
    """`LOGDIR/plugins/profile`, accepting that folder itself too."""
    if not fs.exists(logdir):
        raise ProfileError(logdir, "no such file or folder")
    if not fs.isdir(logdir):
        raise ProfileError(logdir, "is a file; list_runs takes a logdir folder")
    root = fs.join(logdir, *PROFILE_SUBDIR)
    if fs.isdir(root):
        return root
    parts = str(logdir).rstrip("/").split("/")
    if parts[-2:] == list(PROFILE_SUBDIR):
        return logdir
    raise ProfileError(
        logdir,
        "has no plugins/profile folder: pass the folder given to "
        "jax.profiler.start_trace / tf.profiler.experimental.start",
    )


def list_runs(logdir: Path | str) -> pd.DataFrame:
    """The runs (captures) in a logdir, newest last.

    `logdir` is a local folder or an fsspec URL (`gs://bucket/logdir`, needs
    fsspec). Returns a DataFrame with columns `run` (folder name), `path`,
    `hosts` (list of host names) and `size_bytes`. Raises ProfileError if
    `logdir` holds no `plugins/profile` folder.
    """
    root = profile_root(logdir)
    rows = []
    for folder in fs.listdir(root)[0]:
        try:
            files = profile_files(folder)
            size = sum(fs.size(f) for f in files)
        except ProfileError:  # removed while listed: not a run any more
            continue
        if files:
            rows.append(
                {
                    "run": fs.name(folder),
                    "path": str(folder),
                    "hosts": [host_of(fs.name(f)) for f in files],
                    "size_bytes": size,
                }
            )
    return pd.DataFrame(rows, columns=["run", "path", "hosts", "size_bytes"])
