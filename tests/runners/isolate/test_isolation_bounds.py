"""Issue 47's bounds on a runner that attacks the harness outside the attacks of
tests/runners/isolate/test_hostile_isolation.py (whose plug-in header and routes these reuse): an account
that does not exist, a help probe or binary that forks and hangs, a runner that rewrites a file the check
reads, the harness's dumpability to its same-user runner, and the descriptors a runner forked inside
pytest inherits.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET

import pytest
from test_hostile_isolation import HEAD, ROOT, ROOT_ONLY, ROUTES, _alive

ACCOUNT_CHILD = ("import sys\nfrom eagle3_check.cli import main\nrc = main(sys.argv[1:])\n"
                 "print('torch imported:', 'torch' in sys.modules)\nsys.exit(rc)\n")


@ROOT_ONLY
@pytest.mark.parametrize("runner", ["plain_ref:make", "exec:/bin/true"])
def test_an_account_that_does_not_exist_is_a_one_line_error_before_torch(tmp_path, runner):
    (tmp_path / "plain_ref.py").write_text("from eagle3_check.runners.loop import ReferenceRunner as R\n"
                                           "def make():\n    return R()\n")
    (tmp_path / "m.pte").write_bytes(b"\0\0\0\0ET12" + bytes(56))  # a .pte by its identifier, for the binary
    pte = ["--pte", str(tmp_path / "m.pte")] if runner.startswith("exec:") else []
    env = {**os.environ, "EAGLE3_CHECK_RUNNER_USER": "no-such-account-47", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    p = subprocess.run([sys.executable, "-c", ACCOUNT_CHILD, *ROUTES["check"], "--runner", runner, *pte],
                       capture_output=True, env=env, timeout=300, text=True)
    assert p.returncode == 2, p.stderr[-1500:]
    assert "EAGLE3_CHECK_RUNNER_USER=no-such-account-47: no such account" in p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1, p.stderr
    assert p.stdout.strip() == "torch imported: False"


def _binary(tmp_path, name: str, body: str) -> str:
    script = tmp_path / name
    script.write_text("#!/bin/sh\n" + body)
    script.chmod(0o755)
    return f"exec:{script}"


def test_a_help_probe_that_hangs_and_forks_is_held_to_the_request_timeout(tmp_path):
    """The `--help` profile probe runs as a request does: its limit (here 3 s, not 60) and its tree kill."""
    from eagle3_check.runners.binary.runner import ExecRunner

    spec = _binary(tmp_path, "helpless.sh", "( setsid sh -c 'exec sleep 9999.48' & )\nexec sleep 9999.49\n")
    runner = ExecRunner(spec, timeout=3.0)
    t0 = time.monotonic()
    assert runner.profile_info()["found"].startswith("the newest profile")
    assert time.monotonic() - t0 < 3.0 + 2.0
    assert _alive("9999.48") == [] and _alive("9999.49") == []


def test_a_binary_that_forks_short_lived_processes_ends_within_the_bound(tmp_path):
    """A fork storm of short-lived children (zombies piling up under a parent that never reaps them)
    ends with its request: the sweep is bounded rounds of one /proc snapshot, not a walk per process."""
    from eagle3_check.runners.binary.runner import ExecRunner
    from eagle3_check.runners.options import RunOptions
    from eagle3_check.runners.proc import children_of

    spec = _binary(tmp_path, "storm.sh", "while :; do /bin/true & done\n")
    before = children_of(os.getpid())  # another test's process in this xdist worker is not the storm's
    t0 = time.monotonic()
    got = ExecRunner(spec, timeout=3.0).execute("m.pte", "tok.json", "Hi", RunOptions(max_new_tokens=4))
    assert got.timed_out and time.monotonic() - t0 < 3.0 + 5.0
    deadline = time.monotonic() + 5.0  # a loaded machine: the last children may still be exiting
    while children_of(os.getpid()) - before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert children_of(os.getpid()) - before == set()  # every one of the storm's reaped: no zombie left


def test_a_runner_that_rewrites_a_file_the_check_reads_fails_the_run_named(tmp_path, monkeypatch, capsys):
    """In process (where nothing stops the write): the prompt file rewritten during the run fails it,
    named in the JSON report, the JUnit file and on stderr (jobs/common/watch.py)."""
    from eagle3_check.cli import main

    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    (tmp_path / "rewriter.py").write_text(HEAD + f"def attack():\n    return tried(lambda: open({str(prompts)!r}, 'a')"
                                          ".write(' '))\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    junit = tmp_path / "out.xml"
    rc = main(["check", "--fixture", "tiny-llama", "--prompts", str(prompts), "--max-new-tokens", "6", "--runner",
               "rewriter:make", "--in-process", "--json", "--junit", str(junit), "--no-progress"])
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert rc == 1 and report["passed"] is False
    assert report["requests"][0]["verdict"]["status"] == "pass"  # the run itself was right
    assert report["info"]["files_changed"][0].startswith(f"{prompts} (was ")
    assert "error: the run changed 1 file(s) it reads" in out.err
    failing = [c.get("name") for c in ET.parse(junit).getroot().iter("testcase") if c.find("failure") is not None]
    assert failing == ["files-unchanged"]


def as_nobody(fn) -> dict:
    """Runs `fn()` in a fork of this (root) process dropped to nobody and made dumpable again (a user's process
    as it starts): a harness that is not root, its imports done before the drop. Returns what `fn` returned
    (JSON through a pipe; an exception as {"error": ...})."""
    import ctypes

    import eagle3_check.runners.isolate.namespaces as namespaces
    import eagle3_check.runners.isolate.sandbox as sandbox
    import eagle3_check.runners.proc  # noqa: F401 - imported before the drop

    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            os.setgroups([])
            os.setgid(65534)
            os.setuid(65534)
            ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE 1: a user's process as it starts
            sandbox._protected = None
            namespaces._ALLOWED.clear()
            os.write(w, json.dumps(fn()).encode())
        except BaseException as e:  # noqa: BLE001 - reported to the test
            os.write(w, json.dumps({"error": repr(e)}).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@ROOT_ONLY
def test_a_harness_that_is_not_root_is_not_dumpable_to_its_same_user_runner():
    """The non-root path, simulated: a process dropped to `nobody` and made dumpable again (as any process of a
    user is) can be read by its same-uid child; after `protect_harness` (subreaper, PR_SET_DUMPABLE 0) the child
    can open neither its /proc/<pid>/mem nor its /proc/<pid>/fd."""
    import eagle3_check.runners.isolate.sandbox as sandbox

    def tries(me: int) -> list[str]:
        out = []
        for attempt in (lambda: open(f"/proc/{me}/mem", "rb").close(), lambda: os.listdir(f"/proc/{me}/fd")):
            try:
                attempt()  # its memory; its descriptors (the way to its fd 1)
                out.append("opened")
            except PermissionError:
                out.append("denied")
        return out

    def attempts() -> dict:
        report, me = {}, os.getpid()
        for when in ("before", "after"):
            if when == "after":
                report["got"] = sandbox.protect_harness()
            r, w = os.pipe()
            kid = os.fork()
            if kid == 0:
                os.write(w, json.dumps(tries(me)).encode())
                os._exit(0)
            os.close(w)
            with os.fdopen(r, "rb") as f:
                report[when] = json.loads(f.read())
            os.waitpid(kid, 0)
        return report

    msg = as_nobody(attempts)
    assert msg["before"] == ["opened", "opened"], msg  # what the protection stops
    assert msg["got"] == {"subreaper": True, "harness_dumpable": False}, msg
    assert msg["after"] == ["denied", "denied"], msg


def test_the_runner_inherits_no_descriptor_of_pytest(tmp_path, monkeypatch, capfd):
    """Inside pytest (the plug-in route's process), the forked runner finds no inherited regular file to write
    fake JSON into (pytest's saved stdout and capture files): every descriptor above 2 but the protocol's is closed."""
    from eagle3_check.cli import main

    (tmp_path / "fd_hunter.py").write_text(HEAD + '''import stat
def attack():
    hit = []
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        try:
            if fd > 2 and stat.S_ISREG(os.fstat(fd).st_mode):
                os.write(fd, b'{"passed": true}\\n')
                hit.append(fd)
        except OSError:
            pass
    return f"wrote into {len(hit)} inherited file(s)"
''')
    monkeypatch.syspath_prepend(str(tmp_path))
    rc = main(["check", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "6", "--runner",
               "fd_hunter:make", "--json", "--no-progress"])
    out = capfd.readouterr()
    report = json.loads(out.out)  # one JSON document: nothing was written ahead of it
    assert rc == 0 and report["requests"][0]["run"]["notes"][-1] == "attack: wrote into 0 inherited file(s)"


def test_a_private_directory_left_by_a_failed_path_goes_at_the_harness_exit(tmp_path, monkeypatch):
    """runners/isolate/sandbox.py: every runner process's private directory is removed with its tree; one
    a path that failed part-way left (a child that never started) is removed at exit, by its maker only
    (a forked child running atexit handlers must not remove the harness's)."""
    import tempfile

    from eagle3_check.runners.isolate import sandbox

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    left, done = sandbox.plan()["home"], sandbox.plan()
    sandbox.remove(done)
    assert left in sandbox._HOMES and done["home"] not in sandbox._HOMES
    other = tmp_path / "eagle3-runner-of-another-process"
    other.mkdir()
    monkeypatch.setitem(sandbox._HOMES, str(other), os.getpid() + 1)
    sandbox._leftovers()
    assert not os.path.exists(left) and left not in sandbox._HOMES
    assert other.exists()  # not this process's
