"""Issue 47's hostile runner BINARY on every route that takes one (`check`, `check --suite`, `gate`,
`golden verify`): a shell script that finds the harness in /proc (by its command line), tries to stop
it, end it, read its memory, write to its fd 1 and into the repository, then runs the fake seed runner
(fixtures/fake_runners/fake_seed_runner) as it was asked, so the right verdict is PASS. Each attempt's
exit status lands in a file the binary's account may write; every one must have failed, the exit code
and the report must be the harness's own, and no file appears in the repository. As root (CI) the
binary is `nobody` in its own mount and PID namespaces (runners/isolate/binary_sandbox.py); the fake
seed runner's interpreter, under a 0700 /root here, is lent to it read-only. The four routes' commands run in
one harness process (tests/cli_child.py), each with its own output, exit status and attack record. The attacks one by one
(and a harness that is not root): tests/runners/isolate/test_hostile_binary.py.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest
from cli_child import result_of, run_commands

pytestmark = [pytest.mark.pte, pytest.mark.skipif(os.geteuid() != 0, reason="the uid drop needs a root harness")]
ROOT = Path(__file__).resolve().parents[2]
PTE_GOLDEN = "golden/tiny-llama__pte__cpu__float32__k4__n48.json"
HOSTILE = r'''#!/bin/sh
H=""
for d in /proc/[0-9]*; do  # the harness: the one process whose command line holds this test's marker
  if grep -q "eagle3_check.cli" "$d/cmdline" 2>/dev/null && grep -q "$MARK" "$d/cmdline" 2>/dev/null; then
    H=${d#/proc/}
  fi
done
{
  echo "harness=$H"
  kill -STOP "$H" 2>/dev/null; echo "sigstop rc=$?"
  kill -TERM "$H" 2>/dev/null; echo "sigterm rc=$?"
  dd if=/proc/$H/mem bs=1 count=1 >/dev/null 2>&1; echo "mem rc=$?"
  (echo '{"passed": true}' > /proc/$H/fd/1) 2>/dev/null; echo "fd1 rc=$?"
  (echo pwned > "$REPO") 2>/dev/null; echo "repo rc=$?"
} >> "$ATTACKS_OUT"
exec "$SEED" "$@"
'''
ROUTES = {  # argv after the interpreter; {pte}, {prompts}, {tmp}
    "check": ["check", "--pte", "{pte}", "--prompts", "{prompts}", "--max-new-tokens", "6", "--json"],
    "suite": ["check", "--pte", "{pte}", "--suite", "one-token/max-new-1", "--prompts", "{prompts}", "--json"],  # one case: the route, not the suite
    "gate": ["gate", "--pte", "{pte}", "--prompts", "{prompts}", "--max-new-tokens", "6", "--suite", "none",
             "--report", "{tmp}/gate.json"],
    "golden-verify": ["golden", "verify", PTE_GOLDEN, "--pte", "{pte}", "--no-baseline", "--json"],
}


@pytest.fixture(scope="module")
def routes_run(pte_path, module_runner_writable):
    """Every route's command in one child (tests/cli_child.py: one Python start and one import of the CLI,
    torch and the runtime instead of one a route, each `main(argv)` with its own fd 1, fd 2, exit status, attack
    record and repository file): (the results, the scratch directory of each route)."""
    script = module_runner_writable / "hostile_seed.sh"
    script.write_text(HOSTILE)
    script.chmod(0o755)
    todo, dirs = [], {}
    for route, argv in ROUTES.items():
        d = dirs[route] = module_runner_writable / route
        d.mkdir()
        d.chmod(0o777)  # the binary's account writes its attack record here
        prompts = d / "p.json"
        prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
        argv = [a.format(pte=pte_path, prompts=prompts, tmp=d) for a in argv]
        todo.append((route, [*argv, "--runner", f"exec:{script}", "--no-progress"],
                     {"ATTACKS_OUT": str(d / "attacks.txt"), "REPO": str(ROOT / "golden" / f"pwned-binary-{route}.json")},
                     ""))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHON": sys.executable, "OMP_NUM_THREADS": "1",
           "SEED": str(ROOT / "fixtures" / "fake_runners" / "fake_seed_runner"),
           "MARK": str(script)}  # (in the harness's command line: the --runner of each command)
    return run_commands(todo, env=env, cwd=ROOT, timeout=1800), dirs


@pytest.mark.parametrize("route", list(ROUTES), ids=list(ROUTES))
def test_a_hostile_binary_changes_nothing_on_the_route(route, routes_run):
    results, dirs = routes_run
    p, attacks, repo_file = result_of(results, route), dirs[route] / "attacks.txt", ROOT / "golden" / f"pwned-binary-{route}.json"
    assert p["returncode"] == 0, p["stdout"][-2000:] + p["stderr"][-2000:]  # not stopped, not ended, the verdict its own
    assert "Traceback" not in p["stderr"]
    if route != "gate":
        report = json.loads(p["stdout"])  # exactly one JSON document: nothing written ahead of it
        assert report["passed"] is True
    lines = attacks.read_text().splitlines()
    assert lines and all(line.startswith("harness=") and line != "harness=" for line in lines[::6]), lines
    tried = [line for line in lines if " rc=" in line]
    assert tried and not [t for t in tried if t.endswith(" rc=0")], lines  # every attempt failed
    assert not repo_file.exists()
    if route in ROUTES:  # every route's report says what held the binary in
        doc = {"check": lambda: report, "suite": lambda: report["reports"][0], "golden-verify": lambda: report,
               "gate": lambda: json.loads((dirs["gate"] / "gate.json").read_text())}[route]()
        prot = (doc["info"]["isolation"] if "info" in doc else doc["isolation"])["protections"]
        assert prot["other_user"] and prot["pid_namespace"] and prot["no_new_privs"] and prot["private_dir"], prot
    if route == "gate":
        assert "the runner ran as uid" in p["stdout"], p["stdout"][-1500:]
