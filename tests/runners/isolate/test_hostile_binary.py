"""Issue 47's attacks from a runner BINARY (`--runner exec:`), each a named probe: a shell script that
signals the harness, reads its memory, writes to its fd 1 or into the repository, from a request and
from the `--help` profile probe (runners/isolate/binary_sandbox.py). The harness is a subprocess (a
SIGSTOP that got through would stop it, not pytest) running `ExecRunner.execute`; the script says what
each attempt got on its stderr, which the harness prints with the protections read back.

As root (here, CI) the binary runs as `nobody` in its own mount and PID namespaces; a harness that is
not root is simulated by a process of this test dropped to `nobody` (imports done before the drop):
there the binary runs in a user and PID namespace of its own, and the harness is non-dumpable.
The routes (`check`, `--suite`, `gate`) with a `.pte`: tests/pte/test_hostile_binary_routes.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from test_isolation_bounds import as_nobody

import eagle3_check.runners.binary.runner as binary_runner
import eagle3_check.runners.isolate.binary_sandbox as bs
import eagle3_check.runners.isolate.namespaces as nsmod
import eagle3_check.runners.isolate.sandbox as sandbox
import eagle3_check.runners.proc  # noqa: F401 - imported before a drop
from eagle3_check.runners.options import RunOptions

ROOT = Path(__file__).resolve().parents[3]
# Each attack as sh; $H is the harness's pid, $REPO a file in the repository; it prints "ATTACK <what> rc=N".
ATTACKS = {
    "bin-sigstop-harness": 'kill -STOP "$H"; echo "ATTACK sigstop rc=$?" >&2',
    "bin-sigterm-harness": 'kill -TERM "$H"; echo "ATTACK sigterm rc=$?" >&2',
    "bin-signal-0-harness": 'kill -0 "$H"; echo "ATTACK signal-0 rc=$?" >&2',  # may it signal at all?
    "bin-read-harness-mem": 'dd if=/proc/$H/mem bs=1 count=1 >/dev/null 2>&1; echo "ATTACK mem rc=$?" >&2',
    "bin-write-harness-fd-1": 'echo \'{"passed": true}\' > /proc/$H/fd/1; echo "ATTACK fd1 rc=$?" >&2',
    "bin-write-into-the-repository": 'echo pwned > "$REPO"; echo "ATTACK repo rc=$?" >&2',
}
HARNESS = '''import json, os, sys
from eagle3_check.runners.binary.runner import ExecRunner
from eagle3_check.runners.options import RunOptions
r = ExecRunner(sys.argv[1], timeout=20.0, profile=None if sys.argv[2] == "help" else "chunked-prefill")
os.environ["H"] = str(os.getpid())
if sys.argv[2] == "help":
    r.profile_info()
    print(json.dumps({"protections": r.protections}))
else:
    p = r.execute("m.pte", "tok.json", "Hi", RunOptions(max_new_tokens=4))
    print(json.dumps({"code": p.returncode, "stderr": p.stderr.decode(), "protections": r.protections}))
'''


def _script(where: Path, name: str, body: str, help_only: bool = False) -> str:
    s = where / name
    pre = 'case "$*" in *--help*) ;; *) exit 0;; esac\n' if help_only else ""
    s.write_text(f"#!/bin/sh\n{pre}{body}\necho ATTACK-DONE >&2\n")
    s.chmod(0o755)
    return f"exec:{s}"


def _run_harness(spec: str, mode: str, repo_file: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "REPO": str(repo_file), "OMP_NUM_THREADS": "1"}
    p = subprocess.run([sys.executable, "-c", HARNESS, spec, mode], capture_output=True, env=env, timeout=120)
    assert p.returncode == 0, p.stderr.decode()[-2000:]  # not stopped, not killed
    lines = p.stdout.decode().splitlines()
    assert len(lines) == 1, lines  # nothing written ahead of the harness's own line
    return json.loads(lines[0])


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs a root harness (CI runs as root)")
@pytest.mark.parametrize("attack", list(ATTACKS), ids=list(ATTACKS))
def test_a_binary_attacks_the_harness_as_root(attack, tmp_path):
    repo_file = ROOT / "golden" / f"pwned-{attack}.json"
    got = _run_harness(_script(tmp_path, "hostile.sh", ATTACKS[attack]), "request", repo_file)
    assert "ATTACK-DONE" in got["stderr"], got  # the script ran to its end
    line = next(x for x in got["stderr"].splitlines() if x.startswith("ATTACK "))
    assert not line.endswith(" rc=0"), got["stderr"]  # every attempt failed
    assert not repo_file.exists()
    prot = got["protections"]
    assert prot["other_user"] and prot["uid"] == 65534 and prot["no_new_privs"] and prot["own_session"], prot
    assert prot["pid_namespace"] and prot["private_dir"] and prot["copied"], prot  # (its tmp dir is 0700: a copy)


@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs a root harness (CI runs as root)")
def test_the_help_probe_runs_closed_in_too(tmp_path):
    """`bin-help-probe-sigstop-harness`: the `--help` profile probe is started as a request is."""
    repo_file = ROOT / "golden" / "pwned-help.json"
    spec = _script(tmp_path, "hostile_help.sh", ATTACKS["bin-sigstop-harness"] + "\n" + ATTACKS[
        "bin-write-into-the-repository"], help_only=True)
    got = _run_harness(spec, "help", repo_file)
    assert got["protections"]["other_user"] and got["protections"]["pid_namespace"], got
    assert not repo_file.exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="simulates a non-root harness by dropping to nobody (needs root)")
@pytest.mark.skipif(not nsmod.allowed(nsmod.CLONE_NEWUSER | nsmod.CLONE_NEWPID) and os.geteuid() != 0,
                    reason="no user namespaces here")
def test_a_harness_that_is_not_root_puts_the_binary_in_its_own_pid_namespace(runner_writable):
    """`bin-nonroot-signal-harness`: not root, a same-uid binary could signal the harness; in its own
    user and PID namespace it cannot name it (kill: ESRCH), and the harness is non-dumpable (its mem
    is denied). Without the namespace (the control) the same `kill -0` succeeds."""
    body = "\n".join(ATTACKS[a] for a in ("bin-signal-0-harness", "bin-read-harness-mem"))
    script = runner_writable / "hostile_nonroot.sh"
    script.write_text(f"#!/bin/sh\n{body}\n")
    script.chmod(0o755)

    def attack():
        os.environ["H"] = str(os.getpid())
        if not nsmod.allowed(nsmod.CLONE_NEWUSER | nsmod.CLONE_NEWPID):
            return {"skip": "the kernel refuses a user namespace to nobody here"}
        launch = bs.Launch(str(script))
        code, _, err = binary_runner.run_tree([str(script)], 20.0, launch)
        control = subprocess.run(["/bin/sh", str(script)], capture_output=True, text=True, timeout=20)
        return {"code": code, "err": err.decode(), "prot": launch.protections(), "control": control.stderr}

    got = as_nobody(attack)
    if "skip" in got:
        pytest.skip(got["skip"])
    assert "error" not in got, got
    assert "ATTACK signal-0 rc=0" in got["control"], got  # what the namespace stops
    assert "ATTACK signal-0 rc=1" in got["err"] and "ATTACK mem rc=1" in got["err"], got
    prot = got["prot"]
    assert prot["pid_namespace"] and prot["user_namespace"] and not prot["other_user"], prot
    assert prot["harness_dumpable"] is False and prot["no_new_privs"], prot
    from eagle3_check.runners.protections import protections_line

    line = protections_line({"protections": prot})
    assert "its own PID namespace in a user namespace of its own" in line and "can signal" not in line, line


@pytest.mark.skipif(os.geteuid() != 0, reason="simulates a non-root harness by dropping to nobody (needs root)")
def test_a_plugin_child_of_a_harness_that_is_not_root_gets_its_own_pid_namespace():
    """`plugin-nonroot-signal-harness`: the plug-in's child (`sandbox.early`, as it starts) goes on as PID 2 of
    a PID namespace of its own; `observed` finds it there from /proc and says so; it cannot name the
    harness (kill: ESRCH) nor open its memory."""

    def attack():
        harness = os.getpid()
        p = sandbox.plan()
        if not p["namespaces"]:
            return {"skip": "the kernel refuses a user namespace to nobody here"}
        r, w = os.pipe()
        go_r, go_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(r)
            sandbox.early(p)  # as the child starts (runners/isolate/child.py)
            tried = []
            for fn in (lambda: os.kill(harness, 0), lambda: open(f"/proc/{harness}/mem", "rb").close()):
                try:
                    fn()
                    tried.append("done")
                except OSError as e:
                    tried.append(type(e).__name__)
            os.write(w, json.dumps(tried).encode())
            os.close(w)
            os.read(go_r, 1)  # held until the harness has read /proc
            os._exit(0)
        os.close(w)
        with os.fdopen(r, "rb") as f:
            tried = json.loads(f.read())
        seen = sandbox.observed(pid, p)
        os.write(go_w, b"x")
        os.waitpid(pid, 0)
        sandbox.remove(p)
        return {"tried": tried, "seen": seen}

    got = as_nobody(attack)
    if "skip" in got:
        pytest.skip(got["skip"])
    assert got.get("tried") == ["ProcessLookupError", "PermissionError"], got
    seen = got["seen"]
    assert seen["pid_namespace"] and seen["user_namespace"] and seen["uid"] == 65534, seen


def test_an_interpreter_out_of_reach_is_one_line_naming_the_fix(tmp_path, monkeypatch):
    """A script whose `#!` interpreter sits in a directory closed to the account (and not lendable: the
    directory itself is 0700) is refused before it starts, naming what to change."""
    if os.geteuid() != 0:
        pytest.skip("the uid drop needs a root harness")
    interp_dir = tmp_path / "closed"
    interp_dir.mkdir(mode=0o700)
    interp = interp_dir / "sh"
    interp.symlink_to("/bin/sh")
    spec = _script(tmp_path, "closed.sh", "echo hi")
    Path(spec[5:]).write_text(f"#!{interp}\necho hi\n")
    homes = tmp_path / "homes"  # where its private directory is made: refused, none is left behind
    homes.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(homes))
    from eagle3_check.errors import InputError
    from eagle3_check.runners.binary.runner import ExecRunner

    with pytest.raises(InputError) as e:
        ExecRunner(spec, timeout=5.0, profile="chunked-prefill").execute("m.pte", "t.json", "Hi",
                                                                          RunOptions(max_new_tokens=2))
    msg = str(e.value)
    assert "out of reach of the runner's account nobody" in msg and f" {interp_dir}, or set" in msg, msg
    assert "EAGLE3_CHECK_RUNNER_USER=-" in msg and "\n" not in msg
    assert list(homes.iterdir()) == []  # it had copied the script into one before the refusal


def test_lends_are_the_blocked_directory_and_what_is_needed_under_it(runner_writable):
    """The decision, on a tree built here: /T/closed (0700) holds open/bin (0755) and shut (0700)."""
    if os.geteuid() != 0:
        pytest.skip("needs files of another owner than nobody (root)")
    closed = runner_writable / "closed"
    (closed / "open" / "bin").mkdir(parents=True)
    (closed / "shut").mkdir()
    closed.chmod(0o700)
    (closed / "shut").chmod(0o700)
    got = bs.lends([str(closed / "open" / "bin"), str(closed / "open"), str(closed / "shut"), "/usr/bin"],
                   65534, 65534)
    assert got == {str(closed): [str(closed / "open")]}  # bin goes with open; shut is closed itself; /usr/bin open
    assert bs.blocker(str(closed / "open" / "bin"), 65534, 65534) == str(closed)
