"""An on-disk cache of a profile's decoded event columns: reopening an unchanged file
is instant.

Decoding a 185 MB XSpace (ten million events) takes seconds, most of it finding and
decoding event records. What comes out is a few numpy columns per event (start,
duration, metadata id, and where the record and its stats sit in the file) plus the
planes' metadata. Those are written once, beside the user's other caches, as plain
`.npy` files and a JSON manifest (no pickle: a cache file is read as data, never run).
A second `read_xspace` of the same file maps the `.npy` files (`mmap`): nothing is
decoded, nothing is copied, and pages are read only when a tool touches them. The
file's own bytes are read only when a tool asks for stats (`XSpaceFile.data`).

Trust: an entry is used only when its manifest is whole (its own CRC-32: the line
names, times and rows it holds are served as they are), names this package version,
this format version, and the file's path, size, mtime, ctime and inode as they are now,
every array has the shape and type the manifest says and the CRC-32 the manifest
records for it (every byte of every array is checked at open: one damaged value is
found, ~0.1 s for ten million events, on two threads), the lines' rows tile the
columns, and record positions lie inside the file. Anything else (stale,
truncated, garbage, unreadable) makes `load` return None, so the file is decoded
again and the entry rewritten: a damaged cache is rebuilt, never an error, never
served. The cache acts only inside its folder: a link anywhere below it (an entry,
its `derived` folder, a version folder) is neither followed nor written through, and
only folders the cache wrote are ever deleted: an entry is the cache's when its folder
is named by a path digest and holds the cache's mark (`_MARK`, naming that digest with a
checksum), a writer's temporary folder when its name carries the digest and the writing
process's id and it holds the mark too; another process's temporary folder is removed only
once that process is gone. A user's own folders beside the cache's are never touched.
Entries are written on a background thread to a temporary folder and renamed into
place, so a reader never sees half an entry. Tools may keep an index they derive from
the columns in the same entry (`store_derived_later`: the trace viewer's rows and
bucket pyramid), trusted on the same terms.

Where: `$XPROF_WIDGETS_CACHE_DIR`, else the platform's user cache folder
(`$XDG_CACHE_HOME` or `~/.cache`, `~/Library/Caches`, `%LOCALAPPDATA%`) under
`xprof-widgets/columns`, one entry per file path, at most `MAX_BYTES` in all (the
entries used longest ago go first). `XPROF_WIDGETS_CACHE=0` (or `load_run(...,
cache=False)`) turns it off. Files under `MIN_FILE_BYTES` are not cached: they decode
in well under the time a cache saves. `cache_info()` says where it is, how big, and
which profiles it holds; `clear_cache()` empties it.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import sys
import threading
import time
import uuid
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

#: Bumped when what is written changes: entries of another format are not read.
FORMAT_VERSION = 2
ENV_ENABLE = "XPROF_WIDGETS_CACHE"
ENV_DIR = "XPROF_WIDGETS_CACHE_DIR"
ENV_MIN_BYTES = "XPROF_WIDGETS_CACHE_MIN_BYTES"
#: Smaller files decode in a fraction of a second: a cache entry would not pay for itself.
MIN_FILE_BYTES = 8 * 2**20
#: A file changed this recently may change again within the same mtime tick (coarse
#: clocks): such a file is read but not cached, so a cache can never outlive an edit.
RACY_SECONDS = 2.0
#: Entries are not written when the disk would be left with less than this free.
MIN_FREE_BYTES = 1 * 2**30
#: The most the cache holds (`XPROF_WIDGETS_CACHE_MAX_BYTES` to change it): past it, the
#: entries used longest ago are deleted when a new one is written. 4 GiB suits a laptop:
#: the entry of a 9.7 M event profile is about 0.5 GB, of a 49 M event one about 2.7 GB.
MAX_BYTES = 4 * 2**30
ENV_MAX_BYTES = "XPROF_WIDGETS_CACHE_MAX_BYTES"
#: A writer's temporary folder this old belongs to a process that died mid-write.
STALE_TEMP_SECONDS = 3600

# Per-event columns, in the order lines come in the file: (name, Line attribute).
COLUMNS = (
    ("start_ps", "start_ps"),
    ("duration_ps", "event_duration_ps"),
    ("metadata_id", "metadata_id"),
    ("record_pos", "record_pos"),
    ("stats_at", "stats_at"),
)
_LINE_FIELDS = ("id", "name", "display_id", "display_name", "timestamp_ns", "duration_ps")

_writers: list[threading.Thread] = []

#: The file that marks a folder as the cache's (see `_mark_text`).
_MARK = ".xprof-widgets-entry"
_ENTRY_NAME = re.compile(r"[0-9a-f]{32}")
_TEMP_NAME = re.compile(r"\.(?:tmp|old)-([0-9a-f]{32})-([0-9]+)-[0-9a-f]{32}")


def _mark_text(digest):
    """What the mark of the entry `digest` holds: the digest and a CRC-32 of the line, so
    a file a user happens to name alike is not taken for the cache's."""
    line = f"xprof-widgets column cache entry {digest}"
    return f"{line} crc32={zlib.crc32(line.encode()):08x}\n"


def _marked(folder, digest):
    try:
        return (folder / _MARK).read_text("ascii") == _mark_text(digest)
    except (OSError, ValueError):
        return False


def _temp_dir(folder):
    """A new temporary folder beside `folder` (an entry, or a derived index inside one),
    named by the entry's digest and this process, marked before anything is written."""
    return folder.parent / f".tmp-{folder.name}-{os.getpid()}-{uuid.uuid4().hex}"


def _alive(pid):
    """Whether process `pid` runs (this one always does)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (OSError, OverflowError, ValueError):  # no permission to signal it: it runs
        return True
    return True


def enabled(cache=None):
    """Whether to use the cache: `cache` if given, else the environment (on unless
    `XPROF_WIDGETS_CACHE` is 0, false, no or off)."""
    if cache is not None:
        return bool(cache)
    return os.environ.get(ENV_ENABLE, "1").strip().lower() not in ("0", "false", "no", "off")


def cache_root():
    """The folder entries go in (see the module doc)."""
    configured = os.environ.get(ENV_DIR)
    if configured:
        return Path(configured)
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "xprof-widgets" / "columns"


def _package_version():
    from .._version import __version__

    return __version__


def source_key(path):
    """What identifies one version of a file: its real path and what `stat` says."""
    real = os.path.realpath(path)
    st = os.stat(real)
    return {
        "path": real,
        "size": st.st_size,
        "mtime_ns": st.st_mtime_ns,
        "ctime_ns": st.st_ctime_ns,
        "inode": st.st_ino,
    }


def _no_links(folder):
    """Whether no part of `folder` below the cache root is a symbolic link (or a Windows
    junction): the cache neither reads nor writes through one."""
    root = cache_root()
    try:
        parts = Path(folder).relative_to(root).parts
    except ValueError:
        return False
    here = root
    for part in parts:
        here = here / part
        if os.path.islink(here) or (hasattr(os.path, "isjunction") and os.path.isjunction(here)):
            return False
    return True


def _checksum(array):
    """CRC-32 of an array's bytes (what the manifest records for each array)."""
    return zlib.crc32(memoryview(np.ascontiguousarray(array)).cast("B"))


def _checksums_match(arrays, expected):
    """Whether each array's CRC-32 is the one `expected` records for its name (computed
    on two threads: zlib lets go of the GIL)."""
    if set(arrays) - set(expected):
        return False
    names = list(arrays)
    if sum(a.nbytes for a in arrays.values()) < 2**22:
        return all(_checksum(arrays[n]) == expected[n] for n in names)
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=2) as pool:
        got = list(pool.map(lambda n: _checksum(arrays[n]), names))
    return all(g == expected[n] for g, n in zip(got, names))


def entry_dir(real_path):
    """The folder of a file's entry: one per path, so a changed file replaces its entry."""
    digest = hashlib.sha256(str(real_path).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return cache_root() / f"v{FORMAT_VERSION}" / digest


def _expected(key):
    return {"format": FORMAT_VERSION, "package": _package_version(), "source": key}


def load(key):
    """The cached columns of the file `key` (`source_key(path)`) describes, if there is a
    sound entry for that file as it was then, else None.

    Returns (manifest, {column: read-only array}, plane shells as a uint8 array).
    Never raises: whatever is wrong with an entry means "not cached".
    """
    try:
        folder = entry_dir(key["path"])
        if not _no_links(folder):
            return None
        manifest = _manifest(folder, key)
        if manifest is None:
            return None
        count, dtypes = manifest["events"], manifest["dtypes"]
        arrays = {name: _array(folder / f"{name}.npy", count, dtypes[name]) for name, _ in COLUMNS}
        if any(array is None for array in arrays.values()):
            return None
        shells = _plain(np.load(folder / "shells.npy", mmap_mode="r", allow_pickle=False))
        if shells.dtype != np.uint8 or shells.ndim != 1 or len(shells) != manifest["shell_bytes"]:
            return None
        if not _checksums_match({**arrays, "shells": shells}, manifest["crc32"]):
            return None
        if not _sound(manifest, arrays, len(shells), manifest["data_size"]):
            return None
        _touch(folder / "manifest.json")
        return manifest, arrays, shells
    except Exception:  # a cache entry is untrusted: any failure means "decode the file"
        return None


def _manifest(folder, key):
    """The manifest of the entry in `folder` if it is whole (its own CRC-32 matches: the
    line names, times and row ranges it holds are served as they are), of this format and
    package version, and of the file as `key` describes it; else None (raises if it cannot
    be read)."""
    manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
    if not isinstance(manifest, dict) or manifest.get(_MANIFEST_CRC) != _manifest_checksum(manifest):
        return None
    if any(manifest.get(k) != v for k, v in _expected(key).items()):
        return None
    return manifest


_MANIFEST_CRC = "manifest_crc32"


def _manifest_checksum(manifest):
    """CRC-32 of a manifest's content but its own checksum, as canonical JSON (what JSON
    reads back dumps to the same text: a manifest holds JSON values only)."""
    body = {k: v for k, v in manifest.items() if k != _MANIFEST_CRC}
    return zlib.crc32(json.dumps(body, sort_keys=True).encode("utf-8"))


def _array(path, length, dtype):
    """The `.npy` at `path`, memory-mapped read-only, if it is a 1-D array of `length`
    items of the dtype `dtype` (numpy's `dtype.str`), else None."""
    array = np.load(path, mmap_mode="r", allow_pickle=False)
    if array.shape != (length,) or array.dtype.str != dtype:
        return None
    return _plain(array)


def _plain(array):
    """A memmap as a plain read-only ndarray over the same pages (results of numpy
    operations on it are then plain arrays too, not memmaps)."""
    out = np.asarray(array) if array.size else np.zeros(array.shape, array.dtype)
    out.flags.writeable = False
    return out


def _sound(manifest, arrays, shell_bytes, file_size):
    """Whether the manifest's layout fits its arrays: line rows tile the columns in
    order, shells lie inside the shells file, record positions inside the source file."""
    at = 0
    for plane in manifest["planes"]:
        a, b = plane["shell"]
        if not 0 <= a <= b <= shell_bytes:
            return False
        for line in plane["lines"]:
            start, stop = line["rows"]
            if start != at or stop < start:
                return False
            at = stop
    if at != manifest["events"]:
        return False
    # Record positions lie inside the file (the checksums say the arrays are the ones
    # written; this says the manifest's file size and the positions agree).
    pos = arrays["record_pos"]
    return not len(pos) or (int(pos.min()) >= 0 and int(pos.max()) < file_size)


def store_later(space, key):
    """Write `space`'s entry on a background thread (not a daemon: the interpreter waits
    for it at exit, so a short script still leaves a whole entry behind)."""

    def write():
        _wait_for_quiet()
        store(space, key)

    _start_writer("xprof-widgets column cache", write)


def _start_writer(name, work):
    """Run `work` on a writer thread of low priority, waited for at exit (see `_writers`)."""

    def run():
        _yield_cpu()
        work()

    thread = threading.Thread(target=run, name=name, daemon=False)
    _writers.append(thread)
    thread.start()


def _yield_cpu():
    """Lower the calling thread's priority (Linux, where a thread has its own nice value):
    a writer runs while the user's first view is being built, and should not slow it."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), 19)
        except OSError:
            pass


#: A writer waits at most this long for the process's other threads to go quiet.
QUIET_MAX_WAIT_S = 10.0
#: ... quiet: they used at most this share of a core over the last `_QUIET_TICK_S`.
_QUIET_SHARE = 0.25
_QUIET_TICK_S = 0.05


def _wait_for_quiet():
    """Wait until the process's other threads have gone quiet (at most `QUIET_MAX_WAIT_S`).

    Writing an entry is a few hundred MB of page-cache copies and write-back, most of it
    in the kernel, where a nice value does little: run alongside the trace build, it
    made that build 0.6-0.9 s slower on 2 cores. So the writer waits for the moment the
    user's code waits, for the next cell or for this thread at exit (`wait_for_writers`,
    the interpreter's join): a notebook gets its entry between cells, a script at exit.
    """
    deadline = time.monotonic() + QUIET_MAX_WAIT_S
    others = time.process_time() - time.thread_time()
    at = time.monotonic()
    while at < deadline:
        time.sleep(_QUIET_TICK_S)
        now_others, now = time.process_time() - time.thread_time(), time.monotonic()
        if now_others - others <= _QUIET_SHARE * (now - at):
            return
        others, at = now_others, now


def wait_for_writers():
    """Wait for entries being written (tests, benchmarks)."""
    while _writers:
        _writers.pop().join()


def cacheable(key):
    """Whether a file should be cached: big enough to gain (`MIN_FILE_BYTES`, or
    `$XPROF_WIDGETS_CACHE_MIN_BYTES`), and not just written."""
    try:
        least = int(os.environ.get(ENV_MIN_BYTES, MIN_FILE_BYTES))
    except ValueError:
        least = MIN_FILE_BYTES
    return key["size"] >= least and time.time() - key["mtime_ns"] / 1e9 >= RACY_SECONDS


def unchanged(path, key):
    """Whether `path` is still the file `key` describes (it was not rewritten while read)."""
    try:
        return source_key(path) == key
    except OSError:
        return False


def store(space, key):
    """Write the entry of `space` (read from the file `key` describes). Never raises:
    a cache that cannot be written only means the next open decodes again."""
    folder = entry_dir(key["path"])
    tmp = _temp_dir(folder)
    try:
        lines = [line for plane in space.planes for line in plane.lines]
        if any(line.stats_at is None for line in lines):
            return
        count = sum(len(line) for line in lines)
        folder.parent.mkdir(parents=True, exist_ok=True)
        if not _no_links(folder):  # (checked once the folders above it exist)
            return
        if shutil.disk_usage(folder.parent).free < count * 40 + MIN_FREE_BYTES:
            return
        tmp.mkdir()
        (tmp / _MARK).write_text(_mark_text(folder.name), "ascii")
        # Each column in the narrowest type all its lines hold (metadata ids and record
        # positions int32, stats offsets uint16 where they fit: see xspace._narrow).
        dtypes = {
            name: np.result_type(*(getattr(line, attr).dtype for line in lines)).str if lines else "<i8"
            for name, attr in COLUMNS
        }
        crc = {}
        for name, attr in COLUMNS:
            crc[name] = _write_npy(
                tmp / f"{name}.npy", [getattr(line, attr) for line in lines], np.dtype(dtypes[name]), count
            )
        shells = [plane.message.SerializeToString() for plane in space.planes]
        with open(tmp / "shells.npy", "wb") as f:
            _write_header(f, np.dtype(np.uint8), sum(len(s) for s in shells))
            crc["shells"] = 0
            for s in shells:
                f.write(s)
                crc["shells"] = zlib.crc32(s, crc["shells"])
        planes, row, at = [], 0, 0
        for plane, shell in zip(space.planes, shells):
            described = []
            for line in plane.lines:
                fields = {k: getattr(line, k) for k in _LINE_FIELDS}
                described.append({**fields, "rows": [row, row + len(line)]})
                row += len(line)
            planes.append({"shell": [at, at + len(shell)], "lines": described})
            at += len(shell)
        manifest = {
            **_expected(key),
            "events": count,
            "data_size": int(space.size),  # the bytes positions index (inflated, for a .gz file)
            "dtypes": dtypes,
            "shell_bytes": at,
            "planes": planes,
            "errors": space.errors,
            "warnings": space.warnings,
            "hostnames": space.hostnames,
            "crc32": crc,
        }
        manifest[_MANIFEST_CRC] = _manifest_checksum(manifest)
        (tmp / "manifest.json").write_text(json.dumps(manifest), "utf-8")
        _replace(tmp, folder)
        _prune(folder.parent, keep=folder)
    except Exception:  # full disk, read-only home, a race with another writer
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def max_bytes():
    """The cache's cap in bytes: `$XPROF_WIDGETS_CACHE_MAX_BYTES`, else `MAX_BYTES`."""
    try:
        return int(os.environ.get(ENV_MAX_BYTES, MAX_BYTES))
    except ValueError:
        return MAX_BYTES


@dataclass(frozen=True)
class CacheInfo:
    """What the column cache holds (`cache_info()`)."""

    folder: Path  #: where entries are written
    enabled: bool  #: whether opening a profile uses it (`XPROF_WIDGETS_CACHE`)
    total_bytes: int  #: its size on disk, entries and unfinished writes
    max_bytes: int  #: past this, the entries used longest ago are deleted
    entries: pd.DataFrame  #: one row per profile: path, bytes, last_used (UTC), format

    def __repr__(self):
        state = "on" if self.enabled else "off (XPROF_WIDGETS_CACHE)"
        return (
            f"column cache at {self.folder} ({state}): {len(self.entries)} profile(s), "
            f"{self.total_bytes / 2**20:.1f} MiB of at most {self.max_bytes / 2**30:.1f} GiB"
        )


def _entries(root):
    """The folders the cache wrote under `root` (entries of every format version and
    writers' temporary folders), never following a link: [(folder, is a finished entry,
    the id of the process writing it: None for an entry)]. A folder is the cache's only
    when its name and mark say so (see the module doc); the rest is left alone."""
    found = []
    if not root.is_dir() or root.is_symlink():
        return found
    for version in root.iterdir():
        if not re.fullmatch(r"v[0-9]+", version.name) or version.is_symlink() or not version.is_dir():
            continue
        for child in version.iterdir():
            if child.is_symlink() or not child.is_dir():
                continue
            if _ENTRY_NAME.fullmatch(child.name):
                if _marked(child, child.name) or _unmarked_entry(child):
                    found.append((child, True, None))
                continue
            temp = _TEMP_NAME.fullmatch(child.name)
            if temp and (_marked(child, temp[1]) or not any(child.iterdir())):
                found.append((child, False, int(temp[2])))
    return found


def _unmarked_entry(folder):
    """An entry written before entries had marks: its manifest carries the cache's own
    checksum of itself, which no user's `manifest.json` does by chance."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
        return isinstance(manifest, dict) and manifest.get(_MANIFEST_CRC) == _manifest_checksum(manifest)
    except (OSError, ValueError, TypeError):
        return False


def _size(folder):
    """Bytes of the regular files below `folder` (links neither followed nor counted)."""
    total = 0
    for base, _dirs, files in os.walk(folder):  # os.walk does not follow links by default
        for name in files:
            try:
                st = os.lstat(os.path.join(base, name))
            except OSError:
                continue
            if stat.S_ISREG(st.st_mode):
                total += st.st_size
    return total


def cache_info():
    """Where the column cache is, how big, its cap, and which profiles it holds (`CacheInfo`)."""
    root = cache_root()
    rows = []
    total = 0
    for folder, finished, _ in _entries(root):
        size = _size(folder)
        total += size
        if not finished:
            continue
        try:
            manifest = json.loads((folder / "manifest.json").read_text("utf-8"))
            path = str(manifest["source"]["path"])
            used = (folder / "manifest.json").stat().st_mtime
        except (OSError, ValueError, KeyError, TypeError):
            path, used = None, folder.stat().st_mtime  # damaged: still the cache's, still counted
        rows.append({"path": path, "bytes": size, "last_used": pd.Timestamp(used, unit="s", tz="UTC")})
    entries = pd.DataFrame(rows, columns=["path", "bytes", "last_used"])
    entries = entries.sort_values("last_used", ascending=False, ignore_index=True)
    return CacheInfo(root, enabled(), total, max_bytes(), entries)


def clear_cache():
    """Delete every entry of the column cache (profiles reopen by decoding their files, and
    are cached again). Only folders the cache wrote are removed (not a temporary folder
    another running process is writing), links are never followed. Returns the bytes freed."""
    wait_for_writers()
    freed = 0
    for folder, _, writer in _entries(cache_root()):
        if writer is not None and writer != os.getpid() and _alive(writer):
            continue
        size = _size(folder)
        shutil.rmtree(folder, ignore_errors=True)
        if not folder.exists():
            freed += size
    return freed


def _touch(path):
    """Mark an entry as just used (pruning deletes the entries used longest ago)."""
    try:
        os.utime(path)
    except OSError:
        pass


def _prune(root, keep):
    """Delete what nobody will read: temporary folders of writers that died, and, while the
    cache holds more than its cap, the entries used longest ago (never `keep`). Only the
    cache's own folders count and go (`_entries`: links are neither followed nor removed)."""
    limit = max_bytes()
    now = time.time()
    entries = []
    for child, finished, writer in _entries(root.parent):
        try:
            if not finished:
                if writer != os.getpid() and (not _alive(writer) or now - child.stat().st_mtime > STALE_TEMP_SECONDS):
                    shutil.rmtree(child, ignore_errors=True)
                continue
            used = (child / "manifest.json").stat().st_mtime
            entries.append((used, _size(child), child))
        except OSError:
            continue  # another process removed it meanwhile
    total = sum(size for _, size, _ in entries)
    for _, size, child in sorted(entries, key=lambda e: e[0]):
        if total <= limit:
            break
        if child != keep:
            shutil.rmtree(child, ignore_errors=True)
            total -= size


def _write_header(f, dtype, count):
    np.lib.format.write_array_header_1_0(
        f, {"descr": np.lib.format.dtype_to_descr(dtype), "fortran_order": False, "shape": (count,)}
    )


def _write_npy(path, parts, dtype, count):
    """One `.npy` of the concatenation of `parts`, written part by part: no
    file-sized array is made to write it. Returns the CRC-32 of the array's bytes."""
    crc = 0
    with open(path, "wb") as f:
        _write_header(f, dtype, count)
        for part in parts:
            data = memoryview(np.ascontiguousarray(part, dtype=dtype)).cast("B")
            f.write(data)
            crc = zlib.crc32(data, crc)
    return crc


def _replace(tmp, folder):
    """Move the finished entry `tmp` to `folder`, replacing an older one there."""
    try:
        os.rename(tmp, folder)
        return
    except OSError:
        pass
    old = folder.parent / f".old-{folder.name}-{os.getpid()}-{uuid.uuid4().hex}"
    try:
        os.rename(folder, old)
    except OSError:
        return  # another process moved it first; its entry will do
    try:
        os.rename(tmp, folder)
    finally:
        shutil.rmtree(old, ignore_errors=True)


# --- what tools derive from the columns ------------------------------------------------------
#
# A tool whose index over the events costs seconds to build (the trace viewer's rows and
# bucket pyramid) keeps it in the file's entry too: `<entry>/derived/NAME/`, numpy arrays
# and a JSON manifest, trusted on the same terms as the columns (same source, format and
# package version; every array the length the manifest says).


def load_derived(space, name):
    """(meta, {array name: read-only array}) that `store_derived_later(space, name, ...)`
    wrote for this file as it is now, or None. Never raises."""
    key = getattr(space, "_source_key", None)
    if key is None:
        return None
    try:
        folder = entry_dir(key["path"]) / "derived" / name
        if not _no_links(folder):
            return None
        manifest = _manifest(folder, key)
        if manifest is None:
            return None
        arrays = {a: _array(folder / f"{a}.npy", length, dtype) for a, (dtype, length) in manifest["arrays"].items()}
        if any(array is None for array in arrays.values()):
            return None
        if not _checksums_match(arrays, manifest["crc32"]):
            return None
        return manifest["meta"], arrays
    except Exception:  # an untrusted entry: any failure means "build it again"
        return None


def text_codes(values):
    """A text column (a str or None per row) as derived data keeps it: (int64 codes into its
    distinct values, those values as a list for the meta), None as code -1."""
    codes, uniques = pd.factorize(pd.Series(values, dtype=object), use_na_sentinel=True)
    return codes.astype(np.int64), [str(u) for u in uniques]


def text_values(codes, texts):
    """`text_codes`' inverse: an object array (None at -1), or None where a code lies
    outside `texts` (what was kept does not fit together)."""
    codes = np.asarray(codes)
    values = np.array([*texts, None], dtype=object)
    if len(codes) and (codes.min() < -1 or codes.max() >= len(values) - 1):
        return None
    return values[codes]  # (-1 reads the last: None)


def store_derived_later(space, name, saved):
    """Write what `saved()` returns, (meta: JSON values, arrays: {name: 1-D numpy array}),
    as `name` in the entry of `space`'s file, on a background thread, after the entry's
    columns are written, once the process is quiet (`saved` is called then, so it holds
    what was built meanwhile). Does nothing for a file the cache does not keep."""
    key = getattr(space, "_source_key", None)
    if key is None:
        return
    earlier = list(_writers)

    def write():
        for thread in earlier:  # the columns' entry first: the derived data goes inside it
            thread.join()
        _wait_for_quiet()
        try:
            meta, arrays = saved()
        except Exception:  # what to save could not be gathered: nothing is cached
            return
        _store_derived(key, name, meta, arrays)

    _start_writer("xprof-widgets derived cache", write)


def _store_derived(key, name, meta, arrays):
    entry = entry_dir(key["path"])
    parent = entry / "derived"
    tmp = _temp_dir(parent / name)
    try:
        if not _no_links(entry) or _manifest(entry, key) is None:
            return  # the file's entry is another version's (or was not written): not ours to add to
        size = sum(a.nbytes for a in arrays.values())
        parent.mkdir(exist_ok=True)
        if not _no_links(parent / name) or shutil.disk_usage(parent).free < size + MIN_FREE_BYTES:
            return
        tmp.mkdir()
        described, crc = {}, {}
        for array_name, array in arrays.items():
            array = np.asarray(array)
            crc[array_name] = _write_npy(tmp / f"{array_name}.npy", [array], array.dtype, len(array))
            described[array_name] = [array.dtype.str, len(array)]
        manifest = {**_expected(key), "arrays": described, "meta": meta, "crc32": crc}
        manifest[_MANIFEST_CRC] = _manifest_checksum(manifest)
        (tmp / "manifest.json").write_text(json.dumps(manifest), "utf-8")
        _replace(tmp, parent / name)
    except Exception:  # as for the columns: a cache that cannot be written is no error
        pass
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
