"""How a report words the protections an isolated runner ran under (`info.isolation.protections`,
read from /proc by `runners.isolate.sandbox.observed`): one line under the table of `check` and the suites.

Worked example: {"uid": 65534, "other_user": True, "no_new_privs": True, "own_session": True,
"private_dir": True, "limits": {...}, "subreaper": True, "harness_dumpable": True} ->
"isolation: the runner ran as uid 65534 (not the harness's), no_new_privs, its own session, a private
directory, limits data 64 GiB / files 1024 / processes 4096 / file size 1 GiB; the harness is the
subreaper of what it starts".

A runner binary's record (runners/isolate/binary_sandbox.py) may add "pid_namespace" (its own PID
namespace: no process of the harness has a PID there), "user_namespace" (a harness that is not root:
the namespace is owned by a user namespace of its own), "lent" (directories lent read-only) and
"copied". A runner of the harness's own uid in no PID namespace is said to be able to signal the
harness: the line never claims a protection that was not in force.
"""

from __future__ import annotations

LIMIT_WORDS = {"Max data size": "data", "Max open files": "files", "Max processes": "processes",
               "Max file size": "file size"}


def _size(v: str | None) -> str:
    if v is None or not v.isdigit():
        return str(v)
    n = int(v)
    return f"{n >> 30} GiB" if n >= 1 << 30 and n % (1 << 30) == 0 else str(n)


def protections_line(isolation: dict | None) -> str | None:
    """The line, or None when the runner was not isolated (or nothing could be read)."""
    p = (isolation or {}).get("protections")
    if not p:
        return None
    words = []
    if "uid" in p:
        words.append(f"the runner ran as uid {p['uid']}" + (" (not the harness's)" if p.get("other_user")
                                                            else " (the harness's own: not root, no drop)"))
    if "uid" in p and not p.get("other_user") and not p.get("pid_namespace"):
        words.append("it can signal the harness (the same user, no PID namespace)")
    words += [w for k, w in (("pid_namespace", "its own PID namespace" + (" in a user namespace of its own" if
                                                                          p.get("user_namespace") else "")),
                             ("no_new_privs", "no_new_privs"), ("own_session", "its own session"),
                             ("private_dir", "a private directory")) if p.get(k)]
    if p.get("lent"):
        words.append("lent read-only " + ", ".join(p["lent"]))
    if p.get("copied"):
        words.append("its program copied into the private directory")
    limits = p.get("limits") or {}
    if limits:
        words.append("limits " + " / ".join(f"{LIMIT_WORDS.get(k, k)} {_size(v)}" for k, v in limits.items()))
    harness = []
    if p.get("subreaper"):
        harness.append("the subreaper of what it starts")
    if p.get("harness_dumpable") is False:
        harness.append("not dumpable (no /proc/<pid>/mem or fd for a same-user process)")
    tail = f"; the harness is {' and '.join(harness)}" if harness else ""
    return f"isolation: {', '.join(words)}{tail}"
