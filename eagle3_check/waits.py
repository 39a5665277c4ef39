"""What a long wait tells the user, on stderr: a lock another process holds, and a long step.

A command that waits must say so (issue 52: `golden verify` printed nothing for ~5 minutes while
another process converted a fixture; a first Gemma 3 conversion ran ~20 minutes with no word
until its tensor step):
- `held(path, what)` takes an exclusive flock on `path`'s sidecar lock file (atomic.lock_path) and
  writes the holder's pid and time into it; while another process holds it, a line every
  `every_s` names what is waited for, the lock, its holder's pid and how long it has held it, e.g.
  `waiting for fixture gemma3-270m's conversion: ~/.cache/eagle3_check/.gemma3-270m-....convert.lock
  held by pid 4242 for 3 min 05 s`;
- `Steps` numbers the steps of a long job from its first (`[1/5] hashing the GGUF`), each with the
  time so far, and repeats a step's line every `every_s` while it runs.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

EVERY_S = 30.0  # a line this often while waiting: often enough that a newcomer sees it is alive


def clock(seconds: float) -> str:
    """12.3 -> '12 s'; 185 -> '3 min 05 s'."""
    s = int(seconds)
    return f"{s // 60} min {s % 60:02d} s" if s >= 60 else f"{s} s"


def _say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def holder(lock: Path) -> str:
    """Who holds `lock` and since when, from what it wrote into the file and the file's mtime:
    'pid 4242 for 3 min 05 s' ('pid unknown' when the holder wrote nothing)."""
    try:
        text = lock.read_text(errors="replace").split()
        age = time.time() - lock.stat().st_mtime
    except OSError:
        return "pid unknown"
    pid = text[0] if text and text[0].isdigit() else "unknown"
    return f"pid {pid} for {clock(age)}"


@contextlib.contextmanager
def held(path: str | Path, what: str, every_s: float = EVERY_S, say=_say) -> Iterator[None]:
    """Holds an exclusive flock on `path`'s sidecar lock file (atomic.lock_path); while another
    process holds it, `say`s every `every_s` what is waited for, whose lock it is and its age."""
    from eagle3_check.atomic import check_writable, lock_path, os_error

    lock = lock_path(check_writable(path, what))
    try:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o666)
    except OSError as e:
        raise os_error(lock, e, "lock file") from None
    try:
        start, next_line = time.monotonic(), 0.0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - start
                if waited >= next_line:
                    say(f"waiting for {what}: {lock} held by {holder(lock)} (waited {clock(waited)})")
                    next_line = waited + every_s
                time.sleep(min(0.5, every_s / 4))
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()} {time.strftime('%Y-%m-%dT%H:%M:%S')}\n".encode(), 0)
        yield
    finally:
        os.close(fd)  # closing releases the lock


class Steps:
    """A long job's numbered steps on stderr: `[i/n] what (t so far)`, repeated every `every_s`
    while a step runs (a daemon thread, stopped when the step ends)."""

    def __init__(self, job: str, total: int, every_s: float = EVERY_S * 2, say=_say):
        self.job, self.total, self.every_s, self.say = job, total, every_s, say
        self.start = time.monotonic()
        self.done = 0

    @contextlib.contextmanager
    def step(self, what: str) -> Iterator[None]:
        self.done += 1
        head = f"{self.job}: [{self.done}/{self.total}] {what}"
        self.say(f"{head} ({clock(time.monotonic() - self.start)} so far)")
        stop = threading.Event()

        def beat() -> None:
            began = time.monotonic()
            while not stop.wait(self.every_s):
                self.say(f"{head}: still running ({clock(time.monotonic() - began)} in this step)")

        t = threading.Thread(target=beat, daemon=True)
        t.start()
        try:
            yield
        finally:
            stop.set()
            t.join()
