"""What concurrent guarded runs print, captured once for all of them (jobs/check/twin_runs.py).

`runners.crash.guarded_run` fails a run that writes to stdout (it carries `--json`), catching it by
swapping sys.stdout and file descriptor 1 for the run. Both are the process's, so two runs at once
cannot each swap them. While `shared_output()` is on (one block, in the thread that starts the runs),
both are captured once for the whole block, and each guarded run reads what was written during its
own window (`run_output`): the sys.stdout text and the fd 1 bytes between its start and its end.

Output is never lost, only shared: another run's output inside a run's window counts as this run's too,
so when runs overlap, output fails every run that was going at the time (never none). A runner that
prints nothing gets the serial verdict; one that prints fails either way. What the starting thread
itself writes to stdout during the block is captured as well: only a job whose own output goes
elsewhere meanwhile turns it on (check's progress bar writes to stderr).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from contextlib import contextmanager

from eagle3_check.runners.proc import BoundedOutput, _flush_std, captured_fd
from eagle3_check.runners.watchdog import captured_stdout

KEEP = 64 * 1024  # bytes of fd 1 output a run's reason can quote (as captured_fd keeps)
_ACTIVE: list[SharedOutput] = []  # the block now on (at most one)


class SharedOutput:
    """sys.stdout's capture buffer and fd 1 (a temporary file while the block is on), read by windows."""

    def __init__(self, text: io.StringIO):
        self.text = text

    def marks(self) -> tuple[int, int]:
        """(characters on sys.stdout, bytes on fd 1) so far."""
        _flush_std()
        try:
            size = os.fstat(1).st_size
        except OSError:  # no fd 1 (captured_fd left it alone): nothing can be written there either
            size = 0
        return len(self.text.getvalue()), size

    @contextmanager
    def window(self) -> Iterator[tuple[io.StringIO, BoundedOutput]]:
        """(the text, the fd 1 bytes) written from entry to exit, filled at exit."""
        printed, raw = io.StringIO(), BoundedOutput(KEEP, 0)
        t0, b0 = self.marks()
        try:
            yield printed, raw
        finally:
            t1, b1 = self.marks()
            printed.write(self.text.getvalue()[t0:t1])
            if b1 > b0:
                raw.write(os.pread(1, min(b1 - b0, KEEP), b0))
                raw.size = b1 - b0


@contextmanager
def shared_output() -> Iterator[SharedOutput]:
    """sys.stdout and fd 1 captured for the block; every guarded run inside reads its window (module doc)."""
    with captured_stdout() as text, captured_fd(1):
        shared = SharedOutput(text)
        _ACTIVE.append(shared)
        try:
            yield shared
        finally:
            _ACTIVE.remove(shared)


@contextmanager
def run_output() -> Iterator[tuple[io.StringIO, BoundedOutput]]:
    """(what one guarded run printed to sys.stdout, what it wrote to fd 1): its own captures, or its
    window of the shared block's when one is on."""
    if _ACTIVE:
        with _ACTIVE[-1].window() as got:
            yield got
        return
    with captured_stdout() as printed, captured_fd(1) as raw:
        yield printed, raw
