"""Issue 47's held-out classes, each a named probe: a plug-in that attacks the harness from its own
process. Each runs the harness as a subprocess on every route (`check`, `check --suite one-token`,
`check --workers 2`, `golden verify`, the pytest plugin; `gate`: tests/pte/test_hostile_gate.py) with a
plug-in that does its attack in `run()` and then answers as the reference runner does, so the right verdict is PASS: the attack must change neither the exit code nor the report, nor
leave a process behind, nor a file written where it was not asked.

As root (here and in CI) the runner's process is `nobody` (runners/isolate/sandbox.py): the attacks on the
harness's memory, descriptors, signals and files fail with EPERM/EACCES; the probes say which
protection held (the plug-in records what each attempt got in its run's notes). Not as root, the
probes that need the uid change skip with the reason.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from cli_child import digest, result_of, run_commands

ROOT = Path(__file__).resolve().parents[3]
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs a root harness (CI runs as root)")
HEAD = '''import os, signal, sys, time
from eagle3_check.runners.loop import ReferenceRunner


class R(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        got = attack()
        run = super().run(program, tokenizer, prompt, options)
        run.notes.append(f"attack: {got}")
        return run


def make():
    return R()


def tried(fn):
    try:
        fn()
        return "done"
    except OSError as e:
        return type(e).__name__
'''
ATTACKS = {
    # the harness's memory: the write access that patching its verdict needs
    "patch-parent-mem": "def attack():\n    return tried(lambda: open(f'/proc/{os.getppid()}/mem', 'r+b'))\n",
    # fake JSON ahead of the real --json report, through the harness's own fd 1
    "write-parent-fd-1": ("def attack():\n    return tried(lambda: open(f'/proc/{os.getppid()}/fd/1', 'w')"
                          ".write('{\"passed\": true}\\n'))\n"),
    "sigstop-parent": "def attack():\n    return tried(lambda: os.kill(os.getppid(), signal.SIGSTOP))\n",
    "sigterm-parent": "def attack():\n    return tried(lambda: os.kill(os.getppid(), signal.SIGTERM))\n",
    "sigint-parent": "def attack():\n    return tried(lambda: os.kill(os.getppid(), signal.SIGINT))\n",
    # into the user's repository (goldens beside the goldens)
    "write-into-the-repository": ("def attack():\n"
                                  "    return tried(lambda: open(os.environ['REPO_TARGET'], 'w').write('pwned'))\n"),
    # a detached grandchild that outlives the check and rewrites its outputs afterwards
    "setsid-grandchild-rewrites-outputs": '''def attack():
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            os.execvp("sh", ["sh", "-c", f"sleep 3; echo PASS > {os.environ['TARGET']}; sleep {os.environ['MARK']}"])
        os._exit(0)
    return "started"
''',
    # floods its fd 1 and 2: bounded in the record, never on the harness's stdout
    "flood-outputs": '''def attack():
    chunk = b"x" * (1 << 20)
    for _ in range(64):
        os.write(1, chunk)
        os.write(2, chunk)
    return "flooded"
''',
}
NEEDS_ROOT = {"patch-parent-mem", "write-parent-fd-1", "sigstop-parent", "sigterm-parent", "sigint-parent",
              "write-into-the-repository"}
DENIED = {"patch-parent-mem": "PermissionError", "write-parent-fd-1": "PermissionError",
          "sigstop-parent": "PermissionError", "sigterm-parent": "PermissionError",
          "sigint-parent": "PermissionError", "write-into-the-repository": "PermissionError"}
ALL = "all-attacks"  # every attack above in one run(): what each route other than check's runs
GOT = {**DENIED, "setsid-grandchild-rewrites-outputs": "started", "flood-outputs": "flooded"}  # what run() notes


def code_of(attack: str) -> str:
    """The plug-in's attack() for `attack`; ALL: each of ATTACKS in turn, its result noted by name."""
    if attack != ALL:
        return ATTACKS[attack]
    parts = [code.replace("def attack():", f"def attack_{i}():") for i, code in enumerate(ATTACKS.values())]
    calls = ", ".join(f"'{name}: ' + attack_{i}()" for i, name in enumerate(ATTACKS))
    return "".join(parts) + f"def attack():\n    return '; '.join([{calls}])\n"


def expected_note(attack: str) -> str:
    """What run() notes when every attempt was stopped. Example: expected_note('sigstop-parent') ->
    'attack: PermissionError'."""
    if attack != ALL:
        return f"attack: {GOT[attack]}"
    return "attack: " + "; ".join(f"{name}: {GOT[name]}" for name in ATTACKS)


def harness_env(tmp_path, target: Path) -> dict:
    """TARGET: the report file a detached grandchild would rewrite; REPO_TARGET: a file beside the goldens."""
    return {**os.environ, "OMP_NUM_THREADS": "1", "MARK": mark(tmp_path),
            "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)]), **targets(tmp_path, target)}


def targets(out_dir: Path, target: Path) -> dict:
    """The attacks' targets of one command: `target` (TARGET) and a goldens directory in `out_dir` (REPO_TARGET)."""
    (out_dir / "golden").mkdir(exist_ok=True)
    return {"TARGET": str(target), "REPO_TARGET": str(out_dir / "golden" / "pwned.json")}


# the attacks that leave a process behind (a forked grandchild whose `sleep 3` ends in a write): only these
# are waited out; after any other attack no process of the runner's is left to write later
DELAYED = {name for name, code in ATTACKS.items() if "os.fork()" in code} | {ALL}


def outlived(tmp_path, report: Path, attack: str = ALL, before: str | None = None) -> bool:
    """After the harness exited: did a detached grandchild rewrite `report` (since `before`, its sha256 when the
    harness's command ended; default: now) or stay alive? Where `attack` started one (DELAYED), its `sleep 3` is
    waited out (4 s) while any process of the run is left: one whose command line or environment carries the
    test's MARK (every process the harness started has it in its environment; this test's own process does not).
    None left: nothing can write later, so no wait."""
    before = digest(report) if before is None else before
    deadline = time.monotonic() + 4
    while attack in DELAYED and time.monotonic() < deadline and _alive(mark(tmp_path)):
        time.sleep(0.1)
    return digest(report) != before or _alive(mark(tmp_path)) != []


def _harness(tmp_path, attack: str, argv: list[str], target: Path) -> tuple[subprocess.CompletedProcess, float]:
    (tmp_path / f"{attack.replace('-', '_')}.py").write_text(HEAD + code_of(attack))
    env = harness_env(tmp_path, target)
    t0 = time.monotonic()
    p = subprocess.run([sys.executable, "-m", "eagle3_check.cli", *argv, "--runner", f"{attack.replace('-', '_')}:make",
                        "--json", "--no-progress"], capture_output=True, env=env, timeout=300, cwd=tmp_path)
    return p, time.monotonic() - t0


def mark(tmp_path) -> str:
    """The sleep a detached grandchild ends in, unique to the test (its tmp dir's inode): two workers
    running the attack at once must not see each other's sleepers."""
    return f"9999.{tmp_path.stat().st_ino}"


def _alive(marker: str) -> list[int]:
    """The live processes whose command line (the grandchild's `sleep MARK`) or environment (MARK=...,
    inherited by everything the harness started) carries `marker`."""
    out = []
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                if any(marker.encode() in Path(f"/proc/{name}/{part}").read_bytes() for part in ("cmdline", "environ")):
                    out.append(int(name))
            except OSError:
                pass
    return out


ROUTES = {"check": ["check", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "6"],
          "suite": ["check", "--suite", "one-token", "--fixture", "tiny-llama"],
          "workers": ["check", "--fixture", "tiny-llama", "--workers", "2", "--prompts", "{prompts}",
                      "--max-new-tokens", "6"],
          "golden-verify": ["golden", "verify", str(ROOT / "golden" / "tiny-llama__eager__cpu__float32__k4__n48.json"),
                            "--no-baseline"]}  # no --junit: its report is the JSON


# all the attacks in one plug-in on every route (the pytest plugin: below; gate: tests/pte/test_hostile_gate.py),
# each attack's result noted by its name (expected_note), so a leak names its attack in `make check`; each attack
# alone on check's route is `slow` (`make slow`: 8 runs of ~5 s that all-attacks-check covers; one attack that
# stops the harness would also stop the attacks after it in all-attacks, and the lone runs show each on its own).
# The all-attacks routes share one harness process (all_attacks_run), one work unit under -n 2 --dist loadgroup.
SHARED = pytest.mark.shared("hostile-all-attacks")
CASES = [pytest.param(a, "check", marks=pytest.mark.slow, id=f"{a}-check") for a in ATTACKS] + [
    pytest.param(ALL, r, marks=SHARED, id=f"{ALL}-{r}") for r in ROUTES]


def _argv(route: str, out_dir: Path, report: Path) -> list[str]:
    """The route's command, its prompts file in `out_dir`, its JUnit file `report` (golden verify: none, its report
    is the JSON the test keeps as `report`)."""
    argv = [a.replace("{prompts}", str(_prompts(out_dir))) for a in ROUTES[route]]
    return [*argv, *(["--junit", str(report)] if route != "golden-verify" else [])]


def _prompts(out_dir: Path) -> Path:
    prompts = out_dir / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}, {"id": "count", "text": "One two"}]}))
    return prompts


def _report_file(out_dir: Path, route: str) -> Path:
    return out_dir / ("report.json" if route == "golden-verify" else "out.xml")


@pytest.fixture(scope="module")
def all_attacks_run(tmp_path_factory):
    """ALL on every route, the routes' commands in one harness process (tests/cli_child.py: one Python start and
    one import of torch and transformers instead of one a route): each command with its own fd 1, fd 2, exit
    status, report file (TARGET) and goldens directory (REPO_TARGET), and the sha256 of its report file as the
    command left it (a grandchild that outlived one command cannot hide its write behind the next). Returns
    (the results, the harness's directory: MARK's and each route's `out_dir`)."""
    home = tmp_path_factory.mktemp("all-attacks")
    module = ALL.replace("-", "_")
    (home / f"{module}.py").write_text(HEAD + code_of(ALL))
    todo = []
    for route in [*ROUTES, "pytest-plugin"]:  # the last a pytest session in the same process (PLUGIN_ARGS, below)
        out_dir = home / route
        out_dir.mkdir()
        report = _report_file(out_dir, route)
        argv = (["pytest", *PLUGIN_ARGS, "--eagle3-runner", f"{module}:make", "--eagle3-prompts", str(_prompts(out_dir)),
                 f"--junitxml={report}"] if route == "pytest-plugin" else
                [*_argv(route, out_dir, report), "--runner", f"{module}:make", "--json", "--no-progress"])
        todo.append((route, argv, {**targets(out_dir, report), "DIGESTS": str(report)},
                     str(report) if route == "golden-verify" else ""))
    env = harness_env(home, home / "unused")  # (each command sets its own TARGET and REPO_TARGET)
    return run_commands(todo, env=env, cwd=home, timeout=1200), home


@pytest.mark.parametrize("attack, route", CASES)
def test_an_attack_from_the_runner_changes_nothing(attack, route, tmp_path, request):
    if (attack in NEEDS_ROOT or attack == ALL) and os.geteuid() != 0:
        pytest.skip("the uid drop needs a root harness (CI runs as root)")
    if attack == ALL:
        results, home = request.getfixturevalue("all_attacks_run")
        p, out_dir = result_of(results, route), home / route
        report_file = _report_file(out_dir, route)
        before = p["digests"][str(report_file)]
    else:  # alone on check's route (slow): a harness process of its own
        home = out_dir = tmp_path
        report_file = _report_file(out_dir, route)
        done, _ = _harness(tmp_path, attack, _argv(route, out_dir, report_file), report_file)
        p = {"returncode": done.returncode, "stdout": done.stdout.decode(), "stderr": done.stderr.decode("utf-8", "replace")}
        before = None
    assert p["returncode"] == 0, p["stderr"][-2000:]  # the run is correct: the attack changed nothing
    report = json.loads(p["stdout"])  # exactly one JSON document on stdout
    assert report["passed"] is True
    assert "Traceback" not in p["stderr"]
    info = report["reports"][0]["info"] if route == "suite" else report.get("info", {})
    if os.geteuid() == 0 and route != "golden-verify":  # (golden verify's JSON keeps no isolation info)
        prot = info["isolation"]["protections"]
        assert prot["other_user"] and prot["no_new_privs"] and prot["own_session"], prot
    notes = [n for r in report.get("requests", []) for n in r["run"]["notes"] if n.startswith("attack:")]
    if route in ("check", "workers"):
        assert notes and set(notes) == {expected_note(attack)}, notes
    assert not (out_dir / "golden" / "pwned.json").exists()
    if attack in ("flood-outputs", ALL) and route == "check":
        out = info["isolation"]["output"]
        assert out and all(o["output"]["truncated"] and len(o["output"]["head"]) <= 16 * 1024 for o in out)
    assert len(p["stdout"].encode()) < 1 << 20
    # the JUnit file (golden verify: the JSON) is still the harness's
    assert not outlived(home, report_file, attack, before=before)


# main() in a child that then says whether torch was imported: the account is checked where the
# config is built (jobs/common/validate.py), not after the target and the reference had loaded (7 s)
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


PLUGIN_ARGS = ["-p", "eagle3_check.pytest_plugin", "-p", "no:cacheprovider", "-q", "--eagle3-fixture", "tiny-llama",
               "--eagle3-goldens", "none", "--eagle3-max-new-tokens", "6", "-k", "prompts"]


@SHARED
@pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs a root harness (CI runs as root)")
def test_every_attack_from_the_runner_changes_nothing_on_the_pytest_plugin(all_attacks_run):
    """All the attacks in one plug-in on the pytest plugin's route: the harness is a pytest session (in the
    routes' harness process, all_attacks_run: a SIGSTOP that got through would stop it, not this session); its
    exit code and JUnit file stay its own."""
    results, home = all_attacks_run
    p, out_dir = result_of(results, "pytest-plugin"), home / "pytest-plugin"
    junit = _report_file(out_dir, "pytest-plugin")
    assert p["returncode"] == 0, p["stdout"][-2000:] + p["stderr"][-1000:]  # the run is correct: the attack changed nothing
    assert "2 passed" in p["stdout"] and '{"passed": true}' not in p["stdout"], p["stdout"][-2000:]
    cases = list(ET.parse(junit).getroot().iter("testcase"))
    assert len(cases) == 2 and all(c.find("failure") is None for c in cases)
    assert not (out_dir / "golden" / "pwned.json").exists()
    assert not outlived(home, junit, before=p["digests"][str(junit)])
