"""Namespaces for the runner's process (issue 47): can this process unshare them, a uid mapped to itself
in a fresh user namespace, and the waiters that put the runner at PID 2 of a PID namespace of its own.

`unshare(CLONE_NEWPID)` moves only the children of the caller, so `waiter()` forks twice: PID 1 of the
new namespace is ours (a namespace's init ignores every signal it has no handler for, its own
`abort()` included: a runner there could not end by a signal), the runner PID 2. Used by the runner
binary's start (`binary_sandbox`) and, when the harness is not root, by the plug-in's child (`sandbox`).
"""

from __future__ import annotations

import ctypes
import functools
import os
import signal
import sys

CLONE_NEWNS, CLONE_NEWUSER, CLONE_NEWPID = 0x00020000, 0x10000000, 0x20000000
PR_SET_PDEATHSIG = 1


@functools.cache
def libc():
    """libc through ctypes, loaded once in the harness: between fork and exec nothing is loaded (a lock
    another thread held at the fork would never be released in the child)."""
    return ctypes.CDLL(None, use_errno=True)


_ALLOWED: dict[int, bool] = {}


def allowed(flags: int) -> bool:
    """Can this process unshare `flags` (a user namespace when not root; mount and PID namespaces as
    root: a container may refuse them)? Asked once per flags, in a fork: nothing of ours changes."""
    if flags not in _ALLOWED:
        if not sys.platform.startswith("linux"):
            return _ALLOWED.setdefault(flags, False)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = 0 if libc().unshare(flags) == 0 else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        _ALLOWED[flags] = os.waitstatus_to_exitcode(status) == 0
    return _ALLOWED[flags]


def namespaces() -> int:
    """The namespaces a runner binary gets here: mount and PID as root, user and PID otherwise; 0
    where the kernel (or a container's seccomp) refuses them."""
    flags = CLONE_NEWNS | CLONE_NEWPID if os.geteuid() == 0 else CLONE_NEWUSER | CLONE_NEWPID
    return flags if allowed(flags) else 0


def map_self(uid: int, gid: int) -> None:
    """Inside a fresh user namespace: our own uid and gid mapped to themselves."""
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _only(keep: int) -> None:
    """This process's descriptors: /dev/null on 0-2 and `keep`, nothing else (Popen's pipes and error
    pipe closed: the harness reads them to the binary's end)."""
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    top = os.sysconf("SC_OPEN_MAX")
    os.closerange(3, keep)
    os.closerange(keep + 1, top)


def waiter() -> None:
    """Forks twice: PID 1 of the new PID namespace is ours (it reaps the namespace's orphans and sends
    the binary's wait status up a pipe: a namespace's init cannot end itself by a signal, nor can the
    binary if it were PID 1, so it is not); its child returns and runs the binary (PID 2). This
    process (the harness's child, outside the namespace) ends as the binary ended: its exit status,
    or the same signal. When PID 1 ends, the kernel kills whatever is left in the namespace."""
    r, w = os.pipe()
    init = os.fork()
    if init == 0:
        os.close(r)
        libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        binary = os.fork()
        if binary == 0:
            os.close(w)
            libc().prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            return  # the binary: `_preexec` goes on
        try:
            _only(w)
            while True:
                try:
                    pid, status = os.waitpid(-1, 0)
                except InterruptedError:
                    continue
                except ChildProcessError:
                    status = 255 << 8
                    break
                if pid == binary:
                    break
            os.write(w, str(status).encode())
        finally:
            os._exit(0)
    try:
        os.close(w)
        _only(r)
        got = b""
        while chunk := os.read(r, 64):
            got += chunk
        os.waitpid(init, 0)
        status = int(got) if got.isdigit() else 255 << 8
        if os.WIFSIGNALED(status):
            sig = os.WTERMSIG(status)
            signal.signal(sig, signal.SIG_DFL)
            os.kill(os.getpid(), sig)
        os._exit(os.waitstatus_to_exitcode(status) & 0xFF)
    finally:
        os._exit(255)
