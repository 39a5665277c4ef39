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
