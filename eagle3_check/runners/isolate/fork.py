"""Starting the runner's process by fork, where that is safe: it skips the child's imports.

A spawned child imports torch and transformers again (measured: about 6 s of CPU of the
embedded fixture's 13 s check on the shared 2-core machine), which isolation would pay on every
check. Forked from a harness that has imported them and nothing more (one Python thread, CUDA not
initialised, Linux), the child starts with them loaded and builds only its program. Anywhere else
(`can_fork()` false) the child is spawned (`python -m eagle3_check.runners.isolate.child`). Either way the
plug-in is imported only in the child, after the fork.

`Forked` is the little of `subprocess.Popen` that the harness uses (pid, poll, wait, returncode,
stdout), so `runners.proc.end_tree` ends a forked child's tree as it ends a spawned one's.
"""

from __future__ import annotations

import io
import os
import sys
import threading
import time


def can_fork() -> bool:
    """Fork is safe here: Linux, one Python thread, and torch (if loaded) has no CUDA context. tqdm's
    monitor thread (a progress bar of an earlier check, or of a model load, starts it) is stopped
    first: it only sleeps, and with it every later check in the process would spawn (6 s of imports)."""
    if not sys.platform.startswith("linux"):
        return False
    _stop_tqdm_monitor()
    if threading.active_count() != 1:
        return False
    torch = sys.modules.get("torch")
    return torch is None or not torch.cuda.is_initialized()


def _stop_tqdm_monitor() -> None:
    std = sys.modules.get("tqdm.std")
    if std is None:
        return
    std.tqdm.monitor_interval = 0  # no new monitor (its only job: warn about a slow bar's refresh)
    from tqdm._monitor import TMonitor

    for t in threading.enumerate():
        if isinstance(t, TMonitor):
            t.exit()  # sets its event and joins it


def reset_torch_thread_pool() -> None:
    """In a forked child, first thing, while it has one thread: torch's CPU thread pool is renewed once.
    torch marks the pool it inherited across fork as corrupt and replaces it on the next call that asks
    for it; when several fresh threads ask at once (transformers' threaded weight loading: each new
    thread's first parallel op sets its thread count), one of them can get no pool at all and raise
    `pool INTERNAL ASSERT FAILED` (ATen/ParallelOpenMP.cpp), which the target's load then reported as a
    corrupt weight file. Measured with torch 2.13.0 on this machine: 32 threads' first op in a forked
    child failed in 169 of 200 children without this call, in 0 of 200 with it (tests/runners/isolate/
    test_fork_thread_pool.py)."""
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.set_num_threads(torch.get_num_threads())  # asks for the pool here, in the only thread


class Forked:
    """A forked child: its pid, its exit status once reaped, the read end of its fd 1/2 pipe."""

    def __init__(self, pid: int, out_r: int):
        self.pid = pid
        self.returncode: int | None = None
        self.stdout = os.fdopen(out_r, "rb", buffering=0)

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:
                return self.returncode
            if pid:
                self.returncode = os.waitstatus_to_exitcode(status)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        import subprocess

        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(f"pid {self.pid}", timeout)
            time.sleep(0.01)
        return self.returncode


def _gaps(low: int, keep: tuple[int, ...]) -> list[tuple[int, int]]:
    """The ranges [a, b) from `low` up that hold none of `keep`. Example: _gaps(3, (7, 5)) ->
    [(3, 5), (6, 7), (8, MAXFD)]."""
    top = os.sysconf("SC_OPEN_MAX") if hasattr(os, "sysconf") else 65536
    out, a = [], low
    for k in sorted(set(keep)):
        if k >= a:
            out.append((a, k))
            a = k + 1
    return out + [(a, max(top, a))]


def fork_child(req_r: int, rep_w: int, keep: set[int]) -> Forked:
    """Forks the runner's process: in it, fd 0 is /dev/null, fd 1 and 2 a pipe to us, every other
    inherited descriptor closed but the protocol's two, its own session, then `child.main` on the
    protocol fds; it never returns into the harness's code. `keep`: the harness's ends of the
    protocol pipes (closed in the child, with the rest)."""
    out_r, out_w = os.pipe()
    pid = os.fork()
    if pid:
        os.close(out_w)
        return Forked(pid, out_r)
    code = 3
    try:
        reset_torch_thread_pool()
        os.setsid()
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(out_w, 1)
        os.dup2(out_w, 2)
        for low, high in _gaps(3, (req_r, rep_w)):  # every inherited descriptor above 2 but the protocol's:
            os.closerange(low, high)  # pytest's saved stdout and capture files, the harness's report files
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
        sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), line_buffering=True)  # not a capture of
        sys.stderr = io.TextIOWrapper(io.FileIO(2, "w", closefd=False), line_buffering=True)  # the parent's
        sys.__stdout__, sys.__stderr__ = sys.stdout, sys.stderr
        import faulthandler

        if faulthandler.is_enabled():  # the parent's (pytest's) writes to the parent's stderr: ours to fd 2
            faulthandler.enable(file=sys.stderr)
        from eagle3_check.runners.isolate.child import main

        code = main([str(req_r), str(rep_w)])
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(code)
