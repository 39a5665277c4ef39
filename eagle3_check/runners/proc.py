"""Processes the harness starts (an isolated runner's child, a runner binary): bounded reads, a
bounded wait, and the whole process tree ended.

- `BoundedOutput` keeps what a process writes as its head, its tail and its size: 500 MB on a
  binary's stderr costs `head + tail` bytes of memory, not 500 MB.
- `become_subreaper()` makes this process the subreaper of its descendants (Linux
  `prctl(PR_SET_CHILD_SUBREAPER)` through ctypes): a child that double-forks or calls `setsid`
  and whose parent exits is reparented to us instead of init, so `end_tree` still finds it.
- `end_tree(proc, before)` kills (SIGKILL) the process group of `proc`, every descendant of it
  (walked through /proc) and every orphan reparented to us since `before` (our children then),
  and reaps them: nothing a request started outlives it.
- `read_until(fds, sinks, deadline, done)` reads the pipes into their sinks with `select` until
  every pipe is at EOF, `done()` is true and the pipes are idle, or the deadline passes: never a
  `communicate()` without a timeout (a `setsid` child holding stdout keeps the pipe open).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import select
import signal
import sys
import time
from collections.abc import Callable

PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


class BoundedOutput:
    """The first `head` and the last `tail` bytes of a stream, and its total size."""

    def __init__(self, head: int = 64 * 1024, tail: int = 64 * 1024):
        self.head_limit, self.tail_limit = head, tail
        self.head = bytearray()
        self.tail = bytearray()
        self.size = 0

    def write(self, data: bytes) -> None:
        self.size += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > self.tail_limit:
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.size > len(self.head) + len(self.tail)

    def bytes(self) -> bytes:
        """Head and tail; between them, when bytes were dropped, a marker naming how many."""
        if not self.truncated:
            return bytes(self.head + self.tail)
        dropped = self.size - len(self.head) - len(self.tail)
        return bytes(self.head) + f"\n[... {dropped} bytes dropped ...]\n".encode() + bytes(self.tail)

    def text(self) -> str:
        return self.bytes().decode("utf-8", "replace")

    def last(self, n: int = 2000) -> str:
        """The last `n` characters (the tail of the output, for a reason line)."""
        return self.text()[-n:]

    def to_json(self) -> dict:
        return {"bytes": self.size, "truncated": self.truncated, "head": bytes(self.head).decode("utf-8", "replace"),
                "tail": bytes(self.tail).decode("utf-8", "replace")}


def become_subreaper() -> bool:
    """Marks this process as its descendants' subreaper (Linux); False where prctl is not there."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def _parents() -> dict[int, int]:
    """pid -> parent pid of every process in /proc (empty where there is no /proc)."""
    out: dict[int, int] = {}
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                with open(f"/proc/{name}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rfind(b")") + 2 :].split()  # after "(comm)": state, ppid, ...
            if len(fields) > 1:
                out[int(name)] = int(fields[1])
    return out


def children_of(pid: int) -> set[int]:
    """The direct children of `pid` now."""
    return {p for p, pp in _parents().items() if pp == pid}


def _below(parents: dict[int, int], roots: set[int]) -> set[int]:
    """Every process below `roots` in one snapshot of /proc (one pass over it, not one per process)."""
    kids: dict[int, list[int]] = {}
    for p, pp in parents.items():
        kids.setdefault(pp, []).append(p)
    below, stack = set(), list(roots)
    while stack:
        for k in kids.get(stack.pop(), ()):
            if k not in below:
                below.add(k)
                stack.append(k)
    return below


def descendants(pid: int) -> set[int]:
    """Every process below `pid` now (children, their children, ...)."""
    return _below(_parents(), {pid})


SWEEPS = 8  # rounds of snapshot, kill, reap in end_tree (a tree that forks while it is killed)
SWEEP_PAUSE_S = 0.02


def end_tree(proc, before: set[int] = frozenset()) -> None:
    """SIGKILL `proc` (a Popen started with `start_new_session=True`), its process group, its
    descendants and the orphans reparented to us that were not our children in `before`; reap them.
    Bounded: at most SWEEPS rounds of one /proc snapshot each (a binary forking short-lived processes
    left thousands of zombies, and a walk of /proc per process held the harness 400 s)."""
    me, keep = os.getpid(), set(before) | {proc.pid}
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(OSError):
        os.kill(proc.pid, signal.SIGKILL)
    for _ in range(SWEEPS):
        parents = _parents()
        orphans = {p for p, pp in parents.items() if pp == me} - keep  # reparented to us (the subreaper)
        victims = _below(parents, {proc.pid} | orphans) | orphans
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        for pid in orphans:  # ours to reap; a zombie's parent reaps it, or it comes to us next round
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
        if not victims:
            break
        time.sleep(SWEEP_PAUSE_S)
    with contextlib.suppress(Exception):
        proc.wait(timeout=5)
    for pid in children_of(me) - keep:  # the last round's, dead by now
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(pid, os.WNOHANG)


def read_until(fds: list[int], sinks: list, deadline: float, done: Callable[[], bool] = lambda: False,
               idle_s: float = 0.2) -> bool:
    """Reads each fd into its sink (`sink.write(bytes)`) until all are at EOF, or `done()` holds and
    no fd had data for `idle_s`, or `deadline` (time.monotonic) passes. True when every fd reached
    EOF. The fds are not closed."""
    open_fds = dict(zip(fds, sinks))
    quiet_since = None
    while open_fds:
        now = time.monotonic()
        if now >= deadline:
            return False
        wait = min(deadline - now, 0.05 if done() else 0.5)
        ready, _, _ = select.select(list(open_fds), [], [], wait)
        if not ready:
            if done():
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= idle_s:
                    return False
            continue
        quiet_since = None
        for fd in ready:
            data = os.read(fd, 1 << 16)
            if data:
                open_fds[fd].write(data)
            else:
                del open_fds[fd]
    return True


@contextlib.contextmanager
def captured_fd(fd: int = 1, keep: int = 64 * 1024):
    """What is written to file descriptor `fd` (stdout: `os.write(1, ...)`, `sys.__stdout__`) inside the
    block lands in the yielded BoundedOutput (head `keep` bytes, and the size), never on the real fd.
    An fd that cannot be duplicated (no real stdout) is left alone: the output then stays empty."""
    out = BoundedOutput(keep, 0)
    try:
        saved = os.dup(fd)
    except OSError:
        yield out
        return
    import tempfile

    _flush_std()
    with tempfile.TemporaryFile() as tmp:
        os.dup2(tmp.fileno(), fd)
        try:
            yield out
        finally:
            _flush_std()
            os.dup2(saved, fd)
            os.close(saved)
            size = os.fstat(tmp.fileno()).st_size
            tmp.seek(0)
            out.write(tmp.read(keep))
            out.size = size


def _flush_std() -> None:
    for stream in (sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(Exception):
            stream.flush()
