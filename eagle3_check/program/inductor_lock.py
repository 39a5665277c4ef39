"""One AOTI compile at a time per inductor cache directory.

Measured on the H100 (torch 2.11, CUDA 13; bench/results/aoti-h100-2026-12-05b/concurrent-compiles.txt):
four processes compiling tiny fixtures into ONE inductor cache at once gave a package whose prefill
library loads a `.cubin` the package lacks (`aoti_probe.check_kernels` refused it: "model prefill loads 1
kernel file(s) the package lacks"); the same compiles with a cache each, or one after another in one
cache, all loaded and passed. So `export --aoti` holds an exclusive lock on a file in the cache directory
while it compiles: a second export sharing that cache waits for the first (and says so once), exports
with caches of their own do not wait. The lock is `flock`'s: released by the kernel when the holder
exits, killed or not, so a crashed export never leaves a stale lock behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

LOCK_NAME = "eagle3-check-aoti.lock"


def inductor_cache_dir() -> Path:
    """The directory inductor compiles into: TORCHINDUCTOR_CACHE_DIR, else torch's default
    (/tmp/torchinductor_USER); inductor's own answer (torch 2.11 and 2.13)."""
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    return Path(cache_dir())


def _note(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


@contextlib.contextmanager
def compile_lock(cache: Path | None = None, note: Callable[[str], None] = _note) -> Iterator[Path]:
    """Holds the exclusive lock of `cache` (default: inductor's cache directory) for the body; yields
    the lock file's path. Another holder: `note` says whom we wait for, once, then it blocks."""
    cache = Path(cache) if cache is not None else inductor_cache_dir()
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / LOCK_NAME
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            note(f"waiting for another AOTI compile sharing the inductor cache {cache} (one at a time: two at "
                 "once can pack a library without its kernels); TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) compiles "
                 "alongside it instead")
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield path
    finally:
        os.close(fd)  # closing the descriptor releases the lock
