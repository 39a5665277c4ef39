"""A runner binary's process closed in as a plug-in's is (issue 47): `Launch` builds its Popen.

`Launch(argv0)` is made per process (a request, the `--help` probe); `inputs()` maps the files the
binary must read, `popen()` starts it, `close()` removes its private directory after its tree is gone.
In the forked child, before the binary's code runs (`_preexec`, the harness's code):

- root harness: a private mount namespace and a private PID namespace (unshare); the directories the
  binary needs that the account cannot traverse (its program file's directory, its `#!` interpreter,
  the harness's own Python prefix, `EAGLE3_CHECK_RUNNER_READS` entries) are lent read-only: the 0700
  directory that blocks them (e.g. /root) is covered by an empty tmpfs in that namespace and each
  needed directory bind-mounted back at its own path (nothing else of /root is visible). Then the uid
  and gid of the runner's account (`sandbox.account`: `nobody` by default, `-` keeps the harness's
  user), no supplementary groups;
- not root: a user namespace with a PID namespace (unshare(CLONE_NEWUSER|CLONE_NEWPID), its own uid
  mapped to itself): the binary is PID 1 of a namespace where no process of the harness has a PID,
  so it cannot name the harness to signal it (the harness is non-dumpable: `sandbox.protect_harness`);
  where the kernel refuses user namespaces this is skipped and the record says so;
- both: the namespace's first process is a waiter of ours (its exit status is the binary's), the
  binary starts its own session, gets `sandbox.LIMITS`, PR_SET_NO_NEW_PRIVS, PR_SET_PDEATHSIG (it dies
  with the waiter), cwd, TMPDIR and HOME in a private 0700 directory it owns, and no descriptor above 2
  but the inputs lent by descriptor (Popen's close_fds).

Inputs the account cannot reach (a .pte in pytest's 0700 tmp dir, a tokenizer under /root) are lent
by descriptor: `/proc/self/fd/N/NAME` (its directory's descriptor: siblings such as
tokenizer_config.json stay reachable) or `/proc/self/fd/N` (the file's own, when the directory itself
is closed to the account); the file's own mode still applies. A program file whose directory cannot
be lent is copied into the private directory (a script that finds its files through `dirname $0` then
fails: `hint()` says what to change). What is in force is written by `_preexec` into a pipe before the
binary's code runs (the harness's code, not the binary's word): `Launch.record`.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys

from eagle3_check.errors import InputError
from eagle3_check.runners.isolate import sandbox
from eagle3_check.runners.isolate.namespaces import (
    CLONE_NEWNS,
    CLONE_NEWUSER,
    libc,
    map_self,
    namespaces,
    waiter,
)

MS_RDONLY, MS_NOSUID, MS_NODEV, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 2, 4, 32, 4096, 16384, 1 << 18
READS_ENV = "EAGLE3_CHECK_RUNNER_READS"




def _call(name: str, *args) -> None:
    if getattr(libc(), name)(*args) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"{name}: {os.strerror(e)}")


def _searchable(st: os.stat_result, uid: int, gid: int) -> bool:
    bits = stat.S_IXUSR if st.st_uid == uid else stat.S_IXGRP if st.st_gid == gid else stat.S_IXOTH
    return bool(st.st_mode & bits)


def blocker(path: str, uid: int, gid: int) -> str | None:
    """The first directory on the way to `path` (its ancestors, and `path` itself when it is a
    directory) that uid/gid cannot search, or None. Example, /root mode 0700: blocker(
    '/root/.pyenv/bin', 65534, 65534) -> '/root'."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        d = os.sep.join(parts[:i])
        try:
            st = os.stat(d)
        except OSError:
            return None
        if not stat.S_ISDIR(st.st_mode):
            return None
        if not _searchable(st, uid, gid):
            return d
    return None


def closed(path: str, uid: int, gid: int) -> list[str]:
    """Every directory on the way to `path` that uid/gid cannot search (what `chmod o+x` would open)."""
    out, parts = [], os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        d = os.sep.join(parts[:i])
        with contextlib.suppress(OSError):
            st = os.stat(d)
            if stat.S_ISDIR(st.st_mode) and not _searchable(st, uid, gid):
                out.append(d)
    return out


def _hops(path: str) -> list[str]:
    """`path` made absolute and every target of the symlinks on its way (a venv's python -> /root/...)."""
    out, p = [os.path.abspath(path)], os.path.abspath(path)
    for _ in range(16):
        if not os.path.islink(p):
            break
        p = os.path.join(os.path.dirname(p), os.readlink(p))
        out.append(os.path.normpath(p))
    real = os.path.realpath(path)
    return out + ([real] if real not in out else [])


def interpreter(program: str) -> str | None:
    """The `#!` interpreter of a script (`/usr/bin/env NAME`: NAME on PATH), or None."""
    with contextlib.suppress(OSError):
        with open(program, "rb") as f:
            head = f.read(256)
        if head.startswith(b"#!"):
            words = head[2:].split(b"\n", 1)[0].decode("utf-8", "replace").split()
            if words and os.path.basename(words[0]) == "env" and len(words) > 1:
                return shutil.which(words[1])
            return words[0] if words else None
    return None


def lends(needed: list[str], uid: int, gid: int) -> dict[str, list[str]]:
    """{blocked directory: [the needed directories under it]}: what the mount namespace lends.
    A needed directory under another needed one goes with it; one that is itself closed to the
    account (its own mode) cannot be lent this way (it is left out: the caller copies or names it).
    Example, /root 0700: lends(['/root/.pyenv/versions/3.11.7', '/work/venv'], 65534, 65534)
    -> {'/root': ['/root/.pyenv/versions/3.11.7']}."""
    out: dict[str, list[str]] = {}
    for d in sorted({os.path.realpath(n) for n in needed}):
        block = blocker(d, uid, gid)
        if block is None or block == d or not _searchable(os.stat(d), uid, gid) or any(d.startswith(x + os.sep) for x in out.get(block, [])):
            continue
        out.setdefault(block, []).append(d)
    return out


def _under(path: str, lent: dict[str, list[str]]) -> bool:
    return any(path == d or path.startswith(d + os.sep) for ds in lent.values() for d in ds)


class Launch:
    """One protected start of a runner binary (see the module doc)."""

    def __init__(self, program: str, spec: str = "", flag: str = "--runner", on_start=None):
        """`on_start(protections)`: called once the binary runs (its ExecRunner keeps the last)."""
        sandbox.protect_harness()  # the subreaper; non-dumpable when not root
        self.spec, self.flag, self.on_start = spec or program, flag, on_start
        self.plan = sandbox.plan()  # the account (an unknown one: InputError) and the private directory
        self.user = self.plan["user"]
        self.fds: list[int] = []
        self.record: dict = {}
        self.lent: dict[str, list[str]] = {}
        self.copied = None
        self.program = shutil.which(program) if os.sep not in program else os.path.abspath(program)
        self.program = self.program or program
        if self.user:
            try:
                self._reach_program()
            except BaseException:  # refused (InputError) or failed after the private directory was made
                self.close()
                raise

    def _reach_program(self) -> None:
        uid, gid = self.user[1], self.user[2]
        interp = interpreter(self.program)
        needed = [os.path.dirname(h) for h in _hops(self.program)]
        for p in [interp] if interp else []:
            needed += [os.path.dirname(h) for h in _hops(p)]
        needed.append(os.path.realpath(sys.base_prefix))  # a runner script run by the harness's own Python
        needed += [p for p in os.environ.get(READS_ENV, "").split(os.pathsep) if p]
        self.lent = lends(needed, uid, gid) if namespaces() else {}
        if any(blocker(h, uid, gid) and not _under(os.path.dirname(h), self.lent) for h in _hops(self.program)):
            self.copied = os.path.join(self.plan["home"], os.path.basename(self.program))
            shutil.copyfile(os.path.realpath(self.program), self.copied)
            os.chmod(self.copied, 0o755)
            os.chown(self.copied, uid, gid)
        for p in [interp] if interp else []:
            hop = next((h for h in _hops(p) if blocker(h, uid, gid) and not _under(os.path.dirname(h), self.lent)), None)
            if hop:
                shut = " ".join(closed(hop, uid, gid))
                raise InputError(
                    f"{self.flag} {self.spec}: its interpreter {p} is out of reach of the runner's account "
                    f"{self.user[0]} (uid {uid}; closed to it: {shut})",
                    "a program and interpreter the runner's account can read",
                    f"chmod o+x {shut}, or set {sandbox.USER_ENV}={sandbox.KEEP_USER} "
                    "(the binary then runs as the harness's user)")

    def inputs(self, *paths):
        """Each input file as the binary can open it: as given, or lent by descriptor (module doc)."""
        return tuple(None if p is None else self._input(str(p)) for p in paths)

    def _input(self, path: str) -> str:
        path = os.path.abspath(path)  # its cwd is the private directory
        if not self.user or not blocker(path, self.user[1], self.user[2]) or not os.path.exists(path):
            return path
        d = os.path.dirname(path)
        if _searchable(os.stat(d), self.user[1], self.user[2]):  # only an ancestor blocks: lend the directory
            fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
            self.fds.append(fd)
            return f"/proc/self/fd/{fd}/{os.path.basename(path)}"
        fd = os.open(path, os.O_RDONLY)
        self.fds.append(fd)
        return f"/proc/self/fd/{fd}"

    def popen(self, argv: list[str], **kwargs) -> subprocess.Popen:
        """Starts `argv` closed in; Popen's own arguments (stdin, stdout, stderr) pass through."""
        argv = [self.copied or self.program, *argv[1:]]
        env = {**os.environ, **dict.fromkeys(("TMPDIR", "HOME", "TMP", "TEMP"), self.plan["home"])}
        rec_r, rec_w = os.pipe()
        flags = namespaces()
        libc()  # loaded here, not in the forked child
        try:
            proc = subprocess.Popen(argv, cwd=self.plan["home"], env=env, pass_fds=tuple(self.fds), close_fds=True,
                                    preexec_fn=lambda: _preexec(self, rec_w, flags), **kwargs)
        finally:
            os.close(rec_w)
            with os.fdopen(rec_r, "rb") as f:
                got = f.read(1 << 16)
            self._release_fds()
        with contextlib.suppress(ValueError):
            self.record = json.loads(got.decode() or "{}")
        if self.on_start:
            self.on_start(self.protections())
        return proc

    def _release_fds(self) -> None:
        """The descriptors `inputs()` lent: the started binary holds its own copies, or no start came."""
        for fd in self.fds:
            os.close(fd)
        self.fds = []

    def close(self) -> None:
        """Its private directory removed; descriptors lent for a start that never came, closed."""
        self._release_fds()
        sandbox.remove(self.plan)

    def hint(self, code: int | None, stderr: bytes) -> str:
        """One line naming what to change when a dropped binary failed to reach a file, else ''."""
        if not self.user or not (code in (126, 127) or b"Permission denied" in stderr[-4000:]):
            return ""
        return (f"; it ran as {self.user[0]} (uid {self.user[1]}): a file it needs may be closed to that account "
                f"(give it by {READS_ENV}=DIR, chmod o+rx the directory, or set {sandbox.USER_ENV}="
                f"{sandbox.KEEP_USER} to keep the harness's user; docs/isolation.md)")

    def protections(self) -> dict:
        """What held the binary in (the record `_preexec` wrote), in `info.isolation.protections`'s words."""
        r = dict(self.record)
        return {**{k: r[k] for k in ("uid", "gid", "other_user", "no_new_privs", "own_session", "private_dir",
                                     "pid_namespace", "user_namespace", "limits", "lent", "copied") if k in r},
                **sandbox.protect_harness()}


def _lend(lent: dict[str, list[str]]) -> None:
    """In the child's own mount namespace: each blocked directory covered by an empty tmpfs, each
    needed directory under it bind-mounted back, read-only."""
    _call("mount", None, b"/", None, MS_REC | MS_PRIVATE, None)
    for block, dirs in lent.items():
        fds = {d: os.open(d, os.O_PATH | os.O_DIRECTORY) for d in dirs}  # before the tmpfs hides them
        _call("mount", b"tmpfs", block.encode(), b"tmpfs", MS_NOSUID | MS_NODEV, b"mode=0755")
        for d, fd in fds.items():
            os.makedirs(d, mode=0o755, exist_ok=True)
            _call("mount", f"/proc/self/fd/{fd}".encode(), d.encode(), None, MS_BIND | MS_REC, None)
            _call("mount", None, d.encode(), None, MS_REMOUNT | MS_BIND | MS_RDONLY | MS_NOSUID | MS_NODEV, None)
            os.close(fd)


def _preexec(launch: Launch, rec_w: int, flags: int) -> None:
    """The forked child, before exec (see the module doc). Raises on a step that fails: Popen then
    raises SubprocessError in the harness and no binary code runs."""
    rec: dict = {"pid_namespace": bool(flags), "user_namespace": bool(flags & CLONE_NEWUSER)}
    uid, gid = os.getuid(), os.getgid()
    os.umask(0o022)
    os.setsid()  # the waiter's session: the harness's Ctrl-C is not sent to it
    if flags:
        _call("unshare", flags)
        if flags & CLONE_NEWUSER:
            with contextlib.suppress(OSError):
                map_self(uid, gid)
        if flags & CLONE_NEWNS:
            _lend(launch.lent)
            rec["lent"] = sorted(d for ds in launch.lent.values() for d in ds)
        waiter()  # returns in the namespace's first process, which runs the binary
        os.setsid()  # its own session (the waiter's group stays out of reach of its kill(0))
    for name, value in sandbox.LIMITS.items():
        what = getattr(resource, f"RLIMIT_{name}")
        hard = resource.getrlimit(what)[1]
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(what, (value, value))
    who = launch.user
    if who:
        os.setgroups([])
        os.setgid(who[2])
        os.setuid(who[1])
    if libc().prctl(sandbox.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
    libc().prctl(sandbox.PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)  # again: the uid change cleared it
    os.chdir(launch.plan["home"])
    rec.update(uid=who[1] if who else uid, gid=who[2] if who else gid,
               other_user=bool(who), no_new_privs=True, own_session=True, private_dir=True,
               limits={"Max data size": str(sandbox.LIMITS["DATA"]), "Max open files": str(sandbox.LIMITS["NOFILE"]),
                       "Max processes": str(sandbox.LIMITS["NPROC"]), "Max file size": str(sandbox.LIMITS["FSIZE"])},
               copied=launch.copied is not None)
    os.write(rec_w, json.dumps(rec).encode())
