"""Several `eagle3-check` commands in one child process: one Python start and one import of the CLI
and of what it loads (torch, transformers, the ExecuTorch runtime: 4-5 s of CPU a process on the
2-core machine) instead of one each. Used by tests/pte/test_gate_abort.py,
tests/pte/test_hostile_binary_routes.py and tests/runners/isolate/test_hostile_isolation.py.

Each command is `main(argv)` (an argv that starts with `pytest`: `pytest.main` on the rest, a pytest session
as a user's run of the pytest plugin) with its own fd 1 and fd 2 (the files they write, the output of the
processes it starts included), its exit status and its own environment variables on top of the
child's; `before` is code run before each command (a memo cleared, so each command starts as it
would in a process of its own). Each command's result is one JSON line on the child's real fd 1 as
soon as it ends, so a command that ends or stops the child is named: the ones before it keep their
results, and it and the ones after it have none.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

CHILD = """
import hashlib, json, os, sys, tempfile
from eagle3_check.cli import main

real = os.dup(1)
for rid, argv, env, keep in json.loads(sys.argv[1]):
    exec(sys.argv[2])
    os.environ.update(env)
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        sys.stdout.flush(), sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out.fileno(), 1), os.dup2(err.fileno(), 2)
        try:
            try:
                if argv[:1] == ["pytest"]:  # a pytest session (a user's run of the pytest plugin)
                    import pytest
                    rc = int(pytest.main(argv[1:]))
                else:
                    rc = main(argv)
            except SystemExit as e:
                rc = e.code
        finally:
            sys.stdout.flush(), sys.stderr.flush()
            os.dup2(saved[0], 1), os.dup2(saved[1], 2)
            os.close(saved[0]), os.close(saved[1])
        out.seek(0), err.seek(0)
        result = {"returncode": rc, "stdout": out.read().decode("utf-8", "replace"),
                  "stderr": err.read().decode("utf-8", "replace")}
    if keep:  # the command's stdout kept as a file, then that file's digest as the command left it
        with open(keep, "w") as f:
            f.write(result["stdout"])
    result["digests"] = {p: hashlib.sha256(open(p, "rb").read()).hexdigest() if os.path.exists(p) else None
                         for p in env.get("DIGESTS", "").split(os.pathsep) if p}
    os.write(real, ("cli_child " + json.dumps([rid, result]) + "\\n").encode())
"""


def run_commands(commands: list[tuple], *, env: dict, cwd: Path | str, timeout: float,
                 before: str = "") -> tuple[dict[str, dict], str]:
    """Runs `commands`, each (id, argv, env, keep): argv after `eagle3-check` (or `pytest` and its arguments), env
    the variables set for it (DIGESTS: a path list whose files' sha256 the result records right after the
    command), keep a path to write its stdout to (or ""). Returns ({id: {returncode, stdout, stderr, digests}} for the commands that
    ended, what the child said at its end: its exit status and stderr's tail, or that it ran past `timeout`)."""
    todo = json.dumps([list(c) for c in commands])
    try:
        p = subprocess.run([sys.executable, "-c", CHILD, todo, before], cwd=cwd, env=env, capture_output=True,
                           text=True, timeout=timeout)
        out, end = p.stdout, f"the child exited {p.returncode}; its stderr ends: {p.stderr[-2000:]}"
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"").decode("utf-8", "replace") if isinstance(e.stdout, bytes) else (e.stdout or "")
        end = f"the child ran past {timeout} s (stopped or hung) and was killed"
    results = {}
    for line in out.splitlines():
        if line.startswith("cli_child "):
            rid, result = json.loads(line[len("cli_child "):])
            results[rid] = result
    return results, end


def digest(path: Path) -> str | None:
    """sha256 of the file now (None: no such file), to compare with a result's `digests`."""
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.exists() else None


def result_of(results: tuple[dict[str, dict], str], rid: str) -> dict:
    """Command `rid`'s result; a failure naming it and how the child ended where it has none (the child ended or
    was stopped during it or before it)."""
    got, end = results
    assert rid in got, f"command {rid!r} has no result: {end}"
    return got[rid]
