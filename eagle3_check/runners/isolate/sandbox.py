"""The runner's process as another user in its own session (issue 47): what it cannot reach.

The child that loads a plug-in builds its program first (the harness's code, with the harness's
rights: the model files, the tokenizer, the HF cache), then, before the plug-in is imported,
`enter(plan)` closes it in:

- its own session and process group (`setsid`: fork.py; a spawned child: `start_new_session`);
- resource limits (`LIMITS`, hard and soft): address space is left alone (torch reserves large
  virtual ranges), the data segment (RLIMIT_DATA) is bounded instead;
- cwd, TMPDIR and HOME in a private directory (mode 0700, its own), removed with its process tree;
- when the harness is root: the uid and gid of an unprivileged account (`nobody` and its group by
  default; `EAGLE3_CHECK_RUNNER_USER` / `EAGLE3_CHECK_RUNNER_GROUP` name others, `-` keeps the
  harness's user), no supplementary groups. Another uid cannot open the harness's /proc/<pid>/mem
  or /proc/<pid>/fd, signal it, or write the files it owns. What it must still read (the plug-in's
  directory, the Python library under a 0700 /root, the checkout) it reaches through directory
  descriptors opened before the drop: each sys.path entry (and each loaded package's __path__ under
  it) that the account cannot traverse becomes `/proc/self/fd/N` — read and search only, the
  files' own modes still apply;
- PR_SET_NO_NEW_PRIVS (no setuid binary gives rights back) and PR_SET_PDEATHSIG (SIGKILL when the
  harness dies).

When the harness is not root, the harness itself is made non-dumpable (`protect_harness`:
PR_SET_DUMPABLE 0: a same-uid process can then open neither its /proc/<pid>/mem nor its
/proc/<pid>/fd) and the subreaper of its descendants; the child, as it starts (`early`), goes on as
PID 2 of a PID namespace of its own in a user namespace of its own (runners/isolate/namespaces.py),
where it cannot name the harness to signal it; where the kernel refuses one, a same-uid child can
still signal the harness (and the report says so).
`observed(pid)` reads what is in force from /proc (the parent's own reading, not the child's word):
the report's `info.isolation.protections`.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import os
import resource
import shutil
import stat
import sys
import tempfile

from eagle3_check.errors import InputError

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_NO_NEW_PRIVS = 38
USER_ENV, GROUP_ENV = "EAGLE3_CHECK_RUNNER_USER", "EAGLE3_CHECK_RUNNER_GROUP"
KEEP_USER = "-"
GIB = 1 << 30
# (resource, limit): the child's hard and soft limits. DATA: heap and private anonymous mappings
# (a remote program's tensors live in the harness; a --workers child's own program, a 2 GB tiny
# fixture at most, fits); NOFILE: its descriptors; NPROC: the processes and threads of its uid
# (torch's thread pool counts: one per core); FSIZE: the largest file it may write; CORE: none.
LIMITS = {"DATA": 64 * GIB, "NOFILE": 1024, "NPROC": 4096, "FSIZE": 1 * GIB, "CORE": 0}


def _libc():
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> bool:
    try:
        return _libc().prctl(option, value, 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False


def account() -> tuple[str, int, int] | None:
    """(name, uid, gid) the child drops to: None when the harness is not root or the user said `-`.
    An account that does not exist, or is root, is an InputError naming the variable."""
    if os.geteuid() != 0:
        return None
    name = os.environ.get(USER_ENV, "nobody")
    if name == KEEP_USER:
        return None
    import grp
    import pwd

    try:
        pw = pwd.getpwnam(name)
    except KeyError:
        raise InputError(f"{USER_ENV}={name}: no such account", "an existing unprivileged account for the runner's "
                         "process", f"create it (useradd --system {name}), or set {USER_ENV}=nobody "
                         f"({USER_ENV}={KEEP_USER} keeps the harness's user)") from None
    if pw.pw_uid == 0:
        raise InputError(f"{USER_ENV}={name} (uid 0)", "an unprivileged account",
                         f"name another account, e.g. {USER_ENV}=nobody")
    gid = pw.pw_gid
    group = os.environ.get(GROUP_ENV)
    if group:
        try:
            gid = grp.getgrnam(group).gr_gid
        except KeyError:
            raise InputError(f"{GROUP_ENV}={group}: no such group", "an existing group",
                             f"create it (groupadd --system {group}), or unset {GROUP_ENV}") from None
    if gid == 0:
        raise InputError(f"the runner's group (gid 0) of {name}", "an unprivileged group", f"set {GROUP_ENV}=nogroup")
    return pw.pw_name, pw.pw_uid, gid


_HOMES: dict[str, int] = {}  # the private directories not yet removed -> the pid that made them


@atexit.register
def _leftovers() -> None:
    """At the harness's exit: the private directories a path that failed part-way never removed (the
    dead child's, a start refused after its directory was made). Only the maker's: a forked child that
    runs atexit handlers must not remove the harness's."""
    for home, pid in list(_HOMES.items()):
        if pid == os.getpid():
            remove({"home": home})


def plan() -> dict:
    """The parent's side, per child: the account and a private directory it owns (mode 0700)."""
    who = account()
    home = tempfile.mkdtemp(prefix="eagle3-runner-")
    _HOMES[home] = os.getpid()
    os.chmod(home, 0o700)
    if who:
        os.chown(home, who[1], who[2])
    from eagle3_check.runners.isolate.namespaces import CLONE_NEWPID, CLONE_NEWUSER, allowed

    flags = CLONE_NEWUSER | CLONE_NEWPID
    ns = flags if who is None and os.geteuid() != 0 and allowed(flags) else 0  # not root: a PID namespace
    return {"user": who, "home": home, "ppid": os.getpid(), "namespaces": ns}


def remove(p: dict | None) -> None:
    """The private directory, after the child's tree is gone."""
    if p:
        shutil.rmtree(p["home"], ignore_errors=True)
        _HOMES.pop(p["home"], None)


_protected: dict | None = None


def protect_harness() -> dict:
    """Once per harness: the subreaper of its descendants and, when not root, non-dumpable."""
    global _protected
    if _protected is None:
        from eagle3_check.runners.proc import become_subreaper

        root = os.geteuid() == 0
        _protected = {"subreaper": become_subreaper(),
                      "harness_dumpable": True if root else not _prctl(PR_SET_DUMPABLE, 0)}
    return _protected


# --- the child's side -----------------------------------------------------------------------------

def _reachable(path: str, uid: int, gid: int, file: bool = False, search_only: bool = False) -> bool:
    """Can uid/gid (no supplementary groups) search every directory to `path` and read `path` (list
    it, a directory)? `search_only`: `path` itself needs read and search only through a descriptor,
    so only its own mode counts."""
    def allows(st, bits_other, bits_group, bits_user) -> bool:
        if st.st_uid == uid:
            return st.st_mode & bits_user == bits_user
        if st.st_gid == gid:
            return st.st_mode & bits_group == bits_group
        return st.st_mode & bits_other == bits_other

    path = os.path.abspath(path)
    parts = path.split(os.sep)
    try:
        for i in range(1, 1 if search_only else len(parts)):
            st = os.stat(os.sep.join(parts[:i]) or os.sep)
            if not allows(st, stat.S_IXOTH, stat.S_IXGRP, stat.S_IXUSR):
                return False
        if file:
            return allows(os.stat(path), stat.S_IROTH, stat.S_IRGRP, stat.S_IRUSR)
        return allows(os.stat(path), stat.S_IROTH | stat.S_IXOTH, stat.S_IRGRP | stat.S_IXGRP,
                      stat.S_IRUSR | stat.S_IXUSR)
    except OSError:
        return True  # not there: nothing to open for it


def _reroute_imports(uid: int, gid: int) -> None:
    """sys.path entries (and loaded packages' __path__ under them) the account cannot reach become
    /proc/self/fd/N of a directory opened now (see the module doc)."""
    moved: dict[str, str] = {}
    new_path = []
    for entry in sys.path:
        real = os.path.abspath(entry or os.getcwd())
        if os.path.isdir(real) and not _reachable(real, uid, gid):
            if real not in moved:
                moved[real] = f"/proc/self/fd/{os.open(real, os.O_RDONLY | os.O_DIRECTORY)}"
            entry = moved[real]
        new_path.append(entry)
    sys.path[:] = new_path
    for mod in list(sys.modules.values()):
        paths = getattr(mod, "__path__", None)
        if not isinstance(paths, list):
            continue
        for i, p in enumerate(paths):
            for real, fd_path in moved.items():
                if p == real or p.startswith(real + os.sep):
                    paths[i] = fd_path + p[len(real):]
                    break
    sys.path_importer_cache.clear()
    import importlib

    importlib.invalidate_caches()


class _Served:
    """A meta path finder that serves the plug-in's own module from the source read before the drop,
    where its directory is not even readable by the account (a 0700 directory, as pytest's tmp_path)."""

    def __init__(self, name: str, origin: str, source: bytes):
        self.name, self.origin, self.source = name, origin, source

    def find_spec(self, fullname, path=None, target=None):
        import importlib.util

        return importlib.util.spec_from_loader(fullname, self, origin=self.origin) if fullname == self.name else None

    def create_module(self, spec):
        return None

    def exec_module(self, module):
        module.__file__ = self.origin
        exec(compile(self.source, self.origin, "exec"), module.__dict__)  # noqa: S102 - the plug-in's own code


def _serve_plugin(spec: str, uid: int, gid: int) -> None:
    """The plug-in's top-level module, when its directory is out of the account's reach even through a
    descriptor: a single-file module is read now and served from memory; a package gets its own
    directory descriptor (its siblings in that directory stay out of reach: docs/isolation.md)."""
    import importlib.util

    top = spec.split(":", 1)[0].split(".", 1)[0]
    try:
        found = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return  # load_runner names it
    if found is None or not found.origin or not os.path.isfile(found.origin):
        return
    where = os.path.dirname(found.origin)
    if _reachable(found.origin, uid, gid, file=True):
        return
    if found.submodule_search_locations:
        if _reachable(where, uid, gid, search_only=True):
            return
        fd_path = f"/proc/self/fd/{os.open(where, os.O_RDONLY | os.O_DIRECTORY)}"
        found = importlib.util.spec_from_file_location(top, os.path.join(fd_path, "__init__.py"),
                                                       submodule_search_locations=[fd_path])
        sys.meta_path.insert(0, _Fixed(top, found))
        return
    with open(found.origin, "rb") as f:
        sys.meta_path.insert(0, _Served(top, found.origin, f.read()))


class _Fixed:
    def __init__(self, name: str, spec):
        self.name, self.spec = name, spec

    def find_spec(self, fullname, path=None, target=None):
        return self.spec if fullname == self.name else None


def enter(p: dict, spec: str) -> None:
    """The child's side, before the plug-in is imported (see the module doc); raises OSError when a
    step the plan asks for fails (the child then reports a crash at load: no request runs). What the
    child imports after it (from a checkout the account may not reach) is imported before: `child.preload`."""
    if os.getsid(0) != os.getpid():
        os.setsid()
    who = p.get("user")
    if who:
        _serve_plugin(spec, who[1], who[2])
        _reroute_imports(who[1], who[2])
    os.chdir(p["home"])
    for var in ("TMPDIR", "HOME", "TMP", "TEMP"):
        os.environ[var] = p["home"]
    tempfile.tempdir = None
    for name, value in LIMITS.items():
        what = getattr(resource, f"RLIMIT_{name}")
        soft, hard = resource.getrlimit(what)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(what, (value, value))
    if who:
        os.setgroups([])
        os.setgid(who[2])
        os.setuid(who[1])
    if not _prctl(PR_SET_NO_NEW_PRIVS, 1):
        raise OSError("prctl(PR_SET_NO_NEW_PRIVS) failed")
    _prctl(PR_SET_PDEATHSIG, 9)  # after the uid change (which clears it)
    if "entered" not in p and os.getppid() != p["ppid"]:  # the harness died before PDEATHSIG was set
        os._exit(3)


def early(p: dict) -> None:
    """Not root, as the child starts (before its program is built: the kernel refuses a user namespace to a
    process with threads, and the build may start some): the runner's process goes into a PID namespace of
    its own (`_own_pid_namespace`). Its build keeps the harness's rights: the same uid, mapped to itself."""
    if p.get("namespaces"):
        _prctl(PR_SET_PDEATHSIG, 9)  # the waiter that stays outside dies with the harness
        if os.getppid() != p["ppid"]:
            os._exit(3)
        p["entered"] = _own_pid_namespace(p["namespaces"])


def _own_pid_namespace(flags: int) -> bool:
    """Not root: the runner goes on as PID 2 of a PID namespace of its own, owned by a user namespace of
    its own (runners/isolate/namespaces.py's waiters above it): no process of the harness has a PID
    there, so it cannot name the harness to signal it. Where the kernel refuses (threads, a container),
    nothing changes (False) and `observed` reports no PID namespace."""
    from eagle3_check.runners.isolate import namespaces as ns

    if len(os.listdir("/proc/self/task")) != 1:
        return False
    uid, gid = os.getuid(), os.getgid()
    if _libc().unshare(flags) != 0:
        return False
    with contextlib.suppress(OSError):
        ns.map_self(uid, gid)
    ns.waiter()  # returns in the runner's process: PID 2, its parent our PID 1
    os.setsid()
    return True


def _in_namespace(pid: int) -> int | None:
    """The runner's process below `pid` when it went into a PID namespace of its own (PID 2 there)."""
    from eagle3_check.runners.proc import descendants

    for d in sorted(descendants(pid)):
        with contextlib.suppress(OSError):
            with open(f"/proc/{d}/status") as f:
                ns = next((line.split()[1:] for line in f if line.startswith("NSpid:")), [])
            if len(ns) >= 2 and ns[-1] == "2":
                return d
    return None


def observed(pid: int, p: dict | None) -> dict:
    """What is in force on process `pid` (or, in a PID namespace of its own, the runner's process below
    it), read from /proc by the parent, and the harness's own."""
    out: dict = {}
    inner = _in_namespace(pid) if (p or {}).get("namespaces") else None
    if inner:
        pid = inner
        out["pid_namespace"] = True
        with contextlib.suppress(OSError):
            out["user_namespace"] = os.readlink(f"/proc/{pid}/ns/user") != os.readlink("/proc/self/ns/user")
    with contextlib.suppress(OSError):
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        uid, gid = int(status["Uid"].split()[0]), int(status["Gid"].split()[0])
        out.update(uid=uid, gid=gid, other_user=uid != os.geteuid(), no_new_privs=status.get("NoNewPrivs") == "1",
                   own_session=os.getsid(pid) == pid, private_dir=bool(p) and os.path.isdir(p["home"]))
    with contextlib.suppress(OSError):
        limits = {}
        with open(f"/proc/{pid}/limits") as f:
            for line in f.readlines()[1:]:
                cols = line[26:].split()
                if len(cols) >= 2:
                    limits[line[:26].strip()] = cols[1]
        out["limits"] = {k: limits.get(k) for k in ("Max data size", "Max open files", "Max processes",
                                                      "Max file size")}
    return {**out, **protect_harness()}
