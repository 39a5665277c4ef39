"""One runner process and its pipes, the harness's side: start it (forked where safe, else spawned),
send it frames, read its frames and its fd 1/2 output with `select` against a deadline, end its tree.

`IsolatedRunner` (runners/isolate/runner.py) decides what to send and what each way out means.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

from eagle3_check.runners.isolate import wire
from eagle3_check.runners.isolate.fork import Forked, can_fork, fork_child
from eagle3_check.runners.proc import BoundedOutput, children_of, end_tree

# How long a child whose reply pipe closed gets to finish exiting before it is called still running:
# a forked child that calls sys.exit runs the interpreter's shutdown (torch loaded), which took over 2 s
# on a loaded 2-core machine (then its `exit status 0` read as "still running (killed)").
EXIT_WAIT_S = 10.0


def status_line(code: int | None) -> str:
    if code is None:
        return "still running (killed)"
    if code < 0:
        name = signal.Signals(-code).name if -code in signal.valid_signals() else "?"
        return f"killed by signal {-code} ({name})"
    return f"exit status {code}"


# The runner processes alive now (their pids): ending one child's tree must not end a sibling's
# (`--workers N` holds N children, and end_tree sweeps the orphans reparented to us, which a sibling,
# also our child, would look like; its exit status reaped there read as "still running (killed)").
_LIVE: set[int] = set()


class ChildGone(Exception):
    """The child ended (or broke the protocol) while we waited for a frame."""


class Child:
    """One child process and its pipes."""

    def __init__(self, setup: dict, env: dict):
        from eagle3_check.runners.isolate.sandbox import plan, protect_harness

        protect_harness()  # the subreaper of what the child starts; non-dumpable when not root
        self.sandbox = setup["sandbox"] = plan()  # an unknown account: the InputError, before any fork
        req_r, self.req_w = os.pipe()
        self.rep_r, rep_w = os.pipe()
        if can_fork():  # the harness's imports carry over (runners/isolate/fork.py)
            self.proc = fork_child(req_r, rep_w, {self.req_w, self.rep_r})
        else:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "eagle3_check.runners.isolate.child", str(req_r), str(rep_w)],
                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                pass_fds=(req_r, rep_w), start_new_session=True, env=env)
        self.forked = isinstance(self.proc, Forked)
        self.before = children_of(os.getpid()) - {self.proc.pid}  # ours already: never this child's orphans
        _LIVE.add(self.proc.pid)
        os.close(req_r)
        os.close(rep_w)
        self.out_fd = self.proc.stdout.fileno()
        self.reader = wire.FrameReader()
        self.frames: list[bytes] = []
        self.output = BoundedOutput(16 * 1024, 16 * 1024)  # the current record's (IsolatedRunner._sink)
        self.open = {self.rep_r, self.out_fd}
        wire.send_pickle(self.req_w, setup)

    def send(self, obj) -> None:
        try:
            wire.send_pickle(self.req_w, obj)
        except OSError:
            pass  # a dead child: the read that follows sees it

    def next_message(self, deadline: float) -> dict:
        """The next whole frame as a validated dict; raises ChildGone or TimeoutError."""
        while not self.frames:
            if self.rep_r not in self.open:
                raise ChildGone("its reply pipe closed")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            ready, _, _ = select.select(list(self.open), [], [], min(left, 1.0))
            for fd in ready:
                data = os.read(fd, 1 << 16)
                if fd == self.out_fd:
                    if data:
                        self.output.write(data)
                    else:
                        self.open.discard(fd)
                    continue
                if not data:
                    self.open.discard(fd)
                    continue
                try:
                    self.frames += self.reader.feed(data)
                except wire.WireError as e:
                    raise ChildGone(f"protocol violated: {e}") from None
        try:
            return wire.decode_json(self.frames.pop(0))
        except wire.WireError as e:
            raise ChildGone(f"protocol violated: {e}") from None

    def drain(self, wait_s: float = 0.0) -> None:
        """Reads what output is there (and what arrives within `wait_s`) into the current record."""
        deadline = time.monotonic() + wait_s
        while self.out_fd in self.open:
            ready, _, _ = select.select([self.out_fd], [], [], max(deadline - time.monotonic(), 0))
            if not ready:
                return
            data = os.read(self.out_fd, 1 << 16)
            if not data:
                self.open.discard(self.out_fd)
                return
            self.output.write(data)

    def exit_code(self, wait_s: float) -> int | None:
        try:
            return self.proc.wait(timeout=wait_s)
        except subprocess.TimeoutExpired:
            return None

    def kill(self) -> int | None:
        """Ends the child's whole process tree; its exit status (None: it was still running)."""
        code = self.proc.poll()
        _LIVE.discard(self.proc.pid)
        end_tree(self.proc, self.before | _LIVE)
        self.drain(0.2)
        for fd in (self.req_w, self.rep_r):
            try:
                os.close(fd)
            except OSError:
                pass
        self.proc.stdout.close()
        from eagle3_check.runners.isolate.sandbox import remove

        remove(self.sandbox)  # its private directory, after its tree is gone
        return code
