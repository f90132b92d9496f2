"""Paths of logdirs and profile files: local, or any fsspec URL (gs://, s3://, ...).

Local paths use pathlib. A string with a protocol (`gs://bucket/logdir`) is
read through fsspec when it is installed (`pip install fsspec gcsfs` for GCS);
otherwise the user gets a ProfileError that says what to install.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path, PurePosixPath
from typing import Any

from ..errors import ProfileError, os_errors


def is_url(path: object) -> bool:
    """True for `proto://...` paths other than plain files."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def _fs(url: str) -> Any:
    try:
        import fsspec
    except ImportError:
        raise ProfileError(url, "reading URLs needs fsspec: pip install fsspec (and gcsfs for gs://)") from None
    try:
        fs, _ = fsspec.core.url_to_fs(url)
    except (ImportError, ValueError) as e:
        raise ProfileError(url, f"no filesystem for this URL ({e})") from None
    return fs


def _strip(url: str) -> str:
    return url.split("://", 1)[1] if "://" in url else url


def _protocol(url: str) -> str:
    return url.split("://", 1)[0]


def join(path: Path | str, *parts: str) -> Path | str:
    """`path / part / ...` for local paths and URLs."""
    if is_url(path):
        return "/".join([str(path).rstrip("/"), *parts])
    return Path(path).joinpath(*parts)


def name(path: Path | str) -> str:
    """The last component of a path or URL."""
    return PurePosixPath(_strip(str(path)).rstrip("/")).name if is_url(path) else Path(path).name


def exists(path: Path | str) -> bool:
    return _fs(str(path)).exists(path) if is_url(path) else Path(path).exists()


def isdir(path: Path | str) -> bool:
    return _fs(str(path)).isdir(path) if is_url(path) else Path(path).is_dir()


def isfile(path: Path | str) -> bool:
    return _fs(str(path)).isfile(path) if is_url(path) else Path(path).is_file()


def listdir(path: Path | str) -> tuple[list[Any], list[Any]]:
    """(folders, files) directly inside `path`, each sorted, as paths of the same kind.
    Raises ProfileError when `path` is no folder (any more: runs come and go)."""
    if not is_url(path):
        gone = {FileNotFoundError: "no such folder (removed while it was read?)", NotADirectoryError: "is not a folder"}
        with os_errors(path, "listed", gone):
            entries = sorted(Path(path).iterdir())
        return [p for p in entries if p.is_dir()], [p for p in entries if p.is_file()]
    fs = _fs(str(path))
    proto = _protocol(str(path))
    folders: list[Any] = []
    files: list[Any] = []
    for entry in sorted(fs.ls(path, detail=True), key=lambda e: e["name"]):
        url = f"{proto}://{_strip(entry['name'])}"
        (folders if entry["type"] == "directory" else files).append(url)
    return folders, files


def size(path: Path | str) -> int:
    with os_errors(path, problems={FileNotFoundError: "no such file (removed while it was read?)"}):
        return _fs(str(path)).size(path) if is_url(path) else Path(path).stat().st_size


def read_bytes(path: str) -> bytes:
    """All bytes of a file at a URL (local files are read by xspace.read_padded)."""
    with os_errors(path):
        return _fs(str(path)).cat_file(path)


def check_regular(path: Path | str) -> None:
    """Raise ProfileError unless the local `path` is a regular file (opening a FIFO waits for
    a writer, a device may never end: neither is a profile). URLs are their store's files."""
    if is_url(path):
        return
    with os_errors(path):
        mode = os.stat(path).st_mode
    if stat.S_ISDIR(mode):
        raise ProfileError(path, "is a directory, not a .xplane.pb file")
    if not stat.S_ISREG(mode):
        raise ProfileError(path, "is not a regular file (a FIFO, socket or device): a profile is a file")


def read_head(path: Path | str, n: int = 2) -> bytes:
    """The first `n` bytes of a file."""
    check_regular(path)
    with os_errors(path), _fs(str(path)).open(path, "rb") if is_url(path) else open(path, "rb") as f:
        return f.read(n)
