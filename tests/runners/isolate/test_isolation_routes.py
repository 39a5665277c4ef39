"""Issue 30's fault probes on every route that runs a plug-in runner: `check --suite`, `check
--workers 2`, `golden verify` and the pytest plugin (`check`'s prompt set: test_isolation_probes.py;
the gate, which needs a `.pte`: tests/pte/test_isolation_gate.py). On each, the plug-in runs in its
own process (eagle3_check/runners/isolate): a plug-in that patches the verdict at import, exits (in run(),
at import, in its factory, at exit), writes to fd 1, lies to `to_json` or leaves a thread calling
the program fails every request, the exit code is 1 and the report is on disk (JUnit, or the one
JSON document on stdout). And Ctrl-C of the harness (a real SIGINT to a subprocess) stops the run
with exit 130 and the report of what was judged, marked interrupted.

Small on purpose: one edge case, two prompts of 6 new tokens, one golden prompt.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from test_isolation_probes import HEADER, PROBES

from eagle3_check.cli import main

pytest_plugins = ["pytester"]
ROOT = Path(__file__).resolve().parents[3]

# the Broke list of issue 30 (and the runner's own KeyboardInterrupt) -> what every request's message holds
BROKE = {
    "patches-the-reference-and-verdict": "",
    "os-exit-0-in-run": "the runner's process ended during request",
    "sys-exit-0-at-import": "not run: crashed",
    "sys-exit-0-in-the-factory": "sys.exit(0)",
    "atexit-os-exit-0": "",
    "writes-fd-1": "",
    "result-subclass-shows-other-tokens": "",
    "thread-keeps-calling-the-program": "",
    "keyboard-interrupt": "the runner raised KeyboardInterrupt",
}
PROMPTS = {"prompts": [{"id": "hi", "text": "Hi"}, {"id": "count", "text": "One two"}]}


def _plugin(tmp_path, monkeypatch, probe: str) -> str:
    code, factory, _ = PROBES[probe]
    name = f"route_{probe.replace('-', '_')}"
    (tmp_path / f"{name}.py").write_text(HEADER + code)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(ROOT), os.environ.get("PYTHONPATH", "")]))
    return f"{name}:{factory}"


def _cli(capsys, argv: list[str]):
    rc = main(argv)
    out = capsys.readouterr()
    assert "Traceback" not in out.err, out.err[-2000:]
    return rc, json.loads(out.out)  # stdout is exactly one JSON document


def _junit_statuses(path: Path) -> list[bool]:
    """Per testcase on disk: does it fail?"""
    return [c.find("failure") is not None or c.find("error") is not None
            for c in ET.parse(path).getroot().iter("testcase")]


@pytest.mark.parametrize("probe", list(BROKE), ids=list(BROKE))
def test_suite_route(probe, tmp_path, monkeypatch, capsys):
    spec = _plugin(tmp_path, monkeypatch, probe)
    junit = tmp_path / "suite.xml"
    rc, report = _cli(capsys, ["check", "--suite", "acceptance/partial", "--fixture", "tiny-llama", "--runner", spec,
                               "--json", "--junit", str(junit), "--no-progress"])
    cases = [c for r in report["reports"] for c in r["cases"]]
    assert rc == 1 and report["passed"] is False
    assert [c["status"] for c in cases] == ["fail"], cases
    assert BROKE[probe] in cases[0]["message"], cases[0]["message"]
    assert _junit_statuses(junit) == [True]
    assert report["reports"][0]["info"]["isolation"]["runner"] == spec


@pytest.mark.parametrize("probe", list(BROKE), ids=list(BROKE))
def test_workers_route(probe, tmp_path, monkeypatch, capsys):
    spec = _plugin(tmp_path, monkeypatch, probe)
    prompts, junit = tmp_path / "p.json", tmp_path / "workers.xml"
    prompts.write_text(json.dumps(PROMPTS))
    rc, report = _cli(capsys, ["check", "--fixture", "tiny-llama", "--workers", "2", "--prompts", str(prompts), "--runner", spec,
                               "--max-new-tokens", "6", "--json", "--junit", str(junit), "--no-progress"])
    assert rc == 1 and report["passed"] is False
    assert [r["verdict"]["status"] for r in report["requests"]] == ["fail", "fail"]
    assert all(BROKE[probe] in r["verdict"]["message"] for r in report["requests"]), report["requests"]
    assert _junit_statuses(junit) == [True, True]
    assert report["info"]["workers"] == 2 and report["info"]["isolation"]["processes"] >= 2


@pytest.fixture(scope="module")
def golden_file(tmp_path_factory):
    """A one-prompt golden of the default fixture, 6 new tokens (recorded by the reference runner)."""
    d = tmp_path_factory.mktemp("golden")
    assert main(["golden", "record", "--fixture", "tiny-llama", "--only", "hi", "--max-new-tokens", "6",
                 "--dir", str(d), "--no-progress"]) == 0
    return next(d.glob("*.json"))


@pytest.mark.parametrize("probe", list(BROKE), ids=list(BROKE))
def test_golden_verify_route(probe, golden_file, tmp_path, monkeypatch, capsys):
    spec = _plugin(tmp_path, monkeypatch, probe)
    rc, outcome = _cli(capsys, ["golden", "verify", str(golden_file), "--runner", spec, "--no-baseline", "--json",
                                "--no-progress"])
    assert rc == 1 and outcome["passed"] is False
    diffs = outcome["golden_diffs"]
    assert diffs, outcome
    assert BROKE[probe] in json.dumps(outcome), diffs


PLUGIN_TEST_ARGS = ["-p", "eagle3_check.pytest_plugin", "-p", "no:cacheprovider", "--eagle3-fixture", "tiny-llama",
                    "--eagle3-goldens", "none", "--eagle3-max-new-tokens", "6", "-k", "prompts"]


@pytest.mark.parametrize("probe", list(BROKE), ids=list(BROKE))
def test_pytest_plugin_route(probe, tmp_path, monkeypatch, pytester):
    spec = _plugin(tmp_path, monkeypatch, probe)
    prompts, junit = tmp_path / "p.json", tmp_path / "plugin.xml"
    prompts.write_text(json.dumps(PROMPTS))
    result = pytester.runpytest_inprocess(*PLUGIN_TEST_ARGS, "--eagle3-runner", spec, "--eagle3-prompts",
                                          str(prompts), f"--junitxml={junit}")
    assert result.ret == 1, result.stdout.str()[-2000:]
    outcomes = result.parseoutcomes()
    assert outcomes.get("failed") == 2 and not outcomes.get("passed"), outcomes
    assert _junit_statuses(junit) == [True, True]
    if BROKE[probe]:
        assert BROKE[probe] in result.stdout.str()


# --- Ctrl-C of the harness: a real SIGINT to a subprocess ---------------------------------------------

SLOW_SECOND = """
import os, time
from eagle3_check.runners.loop import ReferenceRunner
class R(ReferenceRunner):
    n = 0
    def run(self, program, tokenizer, prompt, options):
        R.n += 1
        if prompt == "One two" or R.n == 2:  # the second request (or case) of a process:
            # tell the test, then hang until the harness is interrupted
            open(os.environ["MARK"], "w").close()
            time.sleep(1000)
        return super().run(program, tokenizer, prompt, options)
"""

INTERRUPTED_ROUTES = {
    "check": ["check", "--fixture", "tiny-llama", "--prompts", "{prompts}", "--max-new-tokens", "6"],
    "workers": ["check", "--fixture", "tiny-llama", "--workers", "2", "--prompts", "{prompts}", "--max-new-tokens", "6"],
    "suite": ["check", "--suite", "acceptance", "--fixture", "tiny-llama"],
    "golden-verify": ["golden", "verify", str(ROOT / "golden" / "tiny-llama__eager__cpu__float32__k4__n48.json"),
                      "--no-baseline"],  # no --junit: its report is the JSON
}


@pytest.mark.parametrize("route", [pytest.param(r, marks=() if r == "check" else pytest.mark.slow)
                                   for r in INTERRUPTED_ROUTES], ids=list(INTERRUPTED_ROUTES))  # a subprocess: 10 s each
def test_sigint_writes_what_was_judged_and_exits_130(route, tmp_path, runner_writable):
    (tmp_path / "slow_second.py").write_text(SLOW_SECOND)
    prompts, junit, mark = tmp_path / "p.json", tmp_path / "out.xml", runner_writable / "second-started"
    prompts.write_text(json.dumps({"prompts": [*PROMPTS["prompts"], {"id": "three", "text": "Three"}]}))
    argv = [a.replace("{prompts}", str(prompts)) for a in INTERRUPTED_ROUTES[route]]
    env = {**os.environ, "MARK": str(mark), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT)])}
    junit_args = [] if route == "golden-verify" else ["--junit", str(junit)]
    proc = subprocess.Popen([sys.executable, "-m", "eagle3_check.cli", *argv, "--runner", "slow_second:R", "--json",
                             *junit_args, "--no-progress"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    deadline = time.monotonic() + 240
    while not mark.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert mark.exists(), proc.communicate()[1][-2000:]
    time.sleep(2.0)  # the first request is judged meanwhile (the second ran ahead, in its child)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert b"Traceback" not in err and b"interrupted (SIGINT)" in err
    report = json.loads(out)
    assert report["passed"] is False
    if route == "golden-verify":  # the golden's second prompt hung: no golden verified
        assert report["interrupted"].startswith("interrupted (SIGINT) after 0 of 1 goldens"), report
        assert report["goldens"] == [] and not junit.exists()
        return
    if route == "suite":
        (r,) = report["reports"]
        assert r["interrupted"].startswith("interrupted (SIGINT) after 1 of 5 cases"), r
        assert [c["status"] for c in r["cases"]] == ["pass"]
        judged = 1
    else:
        judged = len(report["requests"])  # 1 unless the machine is very slow: 0
        assert judged <= 1 and report["interrupted"].startswith(f"interrupted (SIGINT) after {judged} of 3"), report
        assert [o["verdict"]["status"] for o in report["requests"]] == ["pass"] * judged
    # the judged cases passed; the "interrupted" case says what was not run
    assert _junit_statuses(junit) == [False] * judged + [True]


def test_a_fresh_process_takes_the_suites_cases_after_a_crash(tmp_path, monkeypatch, capsys, runner_writable):
    """The first case's process exits; a fresh one (given the tokenizer again) runs the rest, which pass."""
    (tmp_path / "exits_once.py").write_text(f"""
import os
from eagle3_check.runners.loop import ReferenceRunner
class R(ReferenceRunner):
    def run(self, *a):
        if not os.path.exists({str(runner_writable / 'crashed')!r}):
            open({str(runner_writable / 'crashed')!r}, "w").close()
            os._exit(3)
        return super().run(*a)
""")
    monkeypatch.syspath_prepend(str(tmp_path))
    rc, report = _cli(capsys, ["check", "--suite", "one-token", "--fixture", "tiny-llama", "--runner", "exits_once:R",
                               "--json", "--no-progress"])
    (r,) = report["reports"]
    statuses = [c["status"] for c in r["cases"]]
    assert rc == 1 and statuses[0] == "fail" and "exit status 3" in r["cases"][0]["message"], r["cases"][0]
    assert statuses[1:] == ["pass"] * (len(statuses) - 1), r["cases"]
    assert r["info"]["isolation"]["processes"] == 2
