"""Atomic file writes: every file the tool writes goes through here.

A write goes to a temp file in the target's own directory, is flushed and fsynced, and then
`os.replace`d over the target: a reader (or a crash, `kill -9`, a full disk) sees the old file
or the new one, never a prefix. Where two writers can meet (goldens, the metrics baseline, the
`.pte` cache) `locked(path)` serialises them with `fcntl.flock` on a sidecar `.<name>.lock`.

`check_writable(path)` is the check a command runs before its work (a missing directory, a
directory in the way, an unwritable directory), so a long run is not lost at its end. An
`OSError` while writing (ENOSPC, EACCES, EROFS, ...) is a one-line `InputError`; the temp file
is removed and the old file is left as it was.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from eagle3_check.errors import InputError


def check_writable(path: str | Path, what: str = "output file") -> Path:
    """`path` as a Path if a file can be written there now; else a one-line InputError.

    The parent directory must exist (it is never created: a typo in a directory name is an
    error, not a new directory) and be writable; `path` must not be a directory."""
    p = Path(path)
    parent = p.parent
    if not parent.is_dir():
        raise InputError(f"{what} {p}: directory {parent} does not exist", "an existing directory",
                         f"create it (mkdir -p {parent}) or pass a path in an existing directory")
    if p.is_dir():
        raise InputError(f"{what} {p} is a directory", "a file path", "pass a file name inside it")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise InputError(f"{what} {p}: directory {parent} is not writable", "a writable directory",
                         "fix its permissions or pass a path in a writable directory")
    return p


def check_dir_creatable(path: str | Path, what: str) -> Path:
    """`path` as a Path if it is a directory, or one can be created there (the tool's own output
    directories: repro files, goldens, fixtures); else a one-line InputError, before the work:
    a file in the way, an ancestor that is a file, or an ancestor that is not writable."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise InputError(f"{what} {p} exists and is not a directory", "a directory (created when missing)",
                         "pass a directory path")
    ancestor = p
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"{what} {p}: {ancestor} is a file", "a directory path (created when missing)",
                         "pass a path whose parents are directories")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        state = "is not writable" if ancestor == p else f"cannot be created: {ancestor} is not writable"
        raise InputError(f"{what} {p} {state}", "a writable directory",
                         "fix its permissions or pass a path in a writable directory")
    return p


def os_error(p: Path, e: OSError, what: str = "file") -> InputError:
    """The one-line error for an OSError while writing `p` (the old file is intact)."""
    if e.errno == errno.ENOSPC or e.errno == errno.EDQUOT:
        return InputError(f"writing {what} {p}: no space left on device", "room for the file on its filesystem",
                          f"free space on the filesystem of {p.parent} or write elsewhere (the old file is intact)")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return InputError(f"writing {what} {p}: {e.strerror}", "a writable path",
                          "fix its permissions or pass a path in a writable directory (the old file is intact)")
    return InputError(f"writing {what} {p}: {e.strerror or e}", "a file the OS lets us write",
                      f"check {p.parent} (errno {e.errno}) or write elsewhere (the old file is intact)")


def _umask_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync_dir(d: Path) -> None:
    with contextlib.suppress(OSError):  # best effort: some filesystems refuse fsync on a directory
        fd = os.open(d, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


@contextlib.contextmanager
def atomic_path(path: str | Path, what: str = "file") -> Iterator[Path]:
    """Yields a temp path beside `path` for a writer that takes a path (safetensors, tokenizers,
    a copy); on a clean exit the temp file is fsynced and renamed over `path`."""
    p = check_writable(path, what)
    try:
        fd, tmp_name = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
        os.close(fd)
    except OSError as e:
        raise os_error(p, e, what) from None
    tmp = Path(tmp_name)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        os.chmod(tmp, _umask_mode())
        os.replace(tmp, p)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise os_error(p, e, what) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    _fsync_dir(p.parent)


@contextlib.contextmanager
def atomic_writer(path: str | Path, binary: bool = False, what: str = "file") -> Iterator[IO]:
    """Yields an open file for a writer that streams; the target is replaced only on a clean exit."""
    with atomic_path(path, what) as tmp:
        with open(tmp, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as f:
            yield f
            f.flush()


def write_text_atomic(path: str | Path, text: str, what: str = "file") -> Path:
    with atomic_writer(path, what=what) as f:
        f.write(text)
    return Path(path)


def write_bytes_atomic(path: str | Path, data: bytes, what: str = "file") -> Path:
    with atomic_writer(path, binary=True, what=what) as f:
        f.write(data)
    return Path(path)


def lock_path(path: str | Path) -> Path:
    """The sidecar lock of `path`: dir/name -> dir/.name.lock (kept: removing it would race)."""
    p = Path(path)
    return p.parent / f".{p.name}.lock"


@contextlib.contextmanager
def locked(path: str | Path, what: str = "file") -> Iterator[None]:
    """Holds an exclusive flock on `path`'s sidecar lock file (two writers of one file wait in turn)."""
    p = check_writable(path, what)
    try:
        fd = os.open(lock_path(p), os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise os_error(lock_path(p), e, "lock file") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock
