"""The pytest plugin on a real `.pte` (the session's export of tiny-llama): what a user's
`pytest --eagle3-pte model.pte` runs. Its reference and tokenizer come from the fixture the
export sidecar names; the `.pte` golden applies (and the eager ones of the same fixture)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

pytestmark = pytest.mark.pte
pytest_plugins = ["pytester"]

PTE_GOLDEN = "tiny-llama__pte__cpu__float32__k4__n48"
FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_runners" / "fake_seed_runner.py"
BASELINE = Path(__file__).resolve().parents[2] / "bench" / "baselines" / "metrics.json"
USER_TEST = '''
def test_my_request(eagle3_check_request, eagle3_program):
    assert type(eagle3_program).__name__ == "PteBackend"
    verdict = eagle3_check_request("Hi there", max_new_tokens=8)
    assert verdict.status == "pass", verdict.message
'''


def test_a_users_pytest_run_on_a_pte(pytester, pte_program, hf_reference, pte_path):
    """pte_program and hf_reference: the modules the inline run loads, imported first (pytester
    drops an inline run's new modules, and torch refuses to register its libraries twice)."""
    pytester.makepyfile(test_user=USER_TEST)
    args = ["-p", "eagle3_check.pytest_plugin", "-p", "no:cacheprovider", f"--eagle3-pte={pte_path}",
            "--eagle3-max-new-tokens=8"]
    collected = pytester.runpytest(*args, "--collect-only", "-q")
    ids = [line for line in collected.outlines if line.startswith("eagle3::")]
    assert f"eagle3::goldens::{PTE_GOLDEN}/capital" in ids and "eagle3::suites::eos-bonus/bonus-is-stop" in ids
    assert not any("tiny-gemma4" in i for i in ids)  # goldens of other fixtures are not collected
    # -k matches each name of an item and its parents, never a node id: `prompts and hi` is eagle3::prompts::hi
    result = pytester.runpytest(*args, "-rs", "-v", "-k", f"eos-bonus/bonus-is-stop or (prompts and hi) or "
                                f"{PTE_GOLDEN}/capital or context/room-1-zero or my_request")
    result.assert_outcomes(passed=5, skipped=1)
    result.stdout.fnmatch_lines([
        "test_user.py::test_my_request PASSED*",
        "eagle3::suites::eos-bonus/bonus-is-stop PASSED*",
        "eagle3::prompts::hi PASSED*",
        f"eagle3::goldens::{PTE_GOLDEN}/capital PASSED*",
    ], consecutive=False)


# one of each item kind through the binary: a suite case, a prompt, a golden prompt, the user's
# own request (eagle3_check_request), and the .pte golden's baseline key
BIN_SELECT = f"one-token/max-new-2-full or (prompts and hi) or {PTE_GOLDEN}/capital or my_request or baseline"


@pytest.mark.parametrize("bug, outcomes, lines", [
    ("", dict(passed=4, skipped=1), [
        "test_user.py::test_my_request PASSED*",
        "eagle3::suites::one-token/max-new-2-full PASSED*",
        "eagle3::prompts::hi PASSED*",
        f"eagle3::goldens::{PTE_GOLDEN}/capital PASSED*",
        f"SKIPPED ?1? *metrics.json:*: baseline {PTE_GOLDEN}: the metrics baseline counts program calls, which a "
        "binary does not report: not gated"]),
    ("--fake_bug=extra-token", dict(failed=4, skipped=1), [
        "one-token/max-new-2-full FAIL (*): length: binary emitted 3 tokens, rules fix 2 (max_new)*",
        "  L *, K 4, tokens 3, rounds *, judged_by ids, returncode 0",
        "prompt 'hi' FAIL: length: binary emitted 9 tokens, rules fix 8 (max_new)*",
        "  L *, 9 tokens, * rounds, tau *, K 4, judged by ids, exit 0; positions * judged, 0 tie, * fail",
        "  runner: exec:* --fake_bug=extra-token",
        f"golden {PTE_GOLDEN} 'capital' differs:",
        f"  {PTE_GOLDEN} 'capital': tokens 49, golden 48"]),
], ids=["faithful", "lossy"])
def test_a_runner_binary_runs_the_items(pytester, pte_program, hf_reference, pte_path, bug, outcomes, lines):
    """--eagle3-runner-bin: the fake seed runner (fixtures/fake_runners; printing its [ids]) runs
    every item's requests on the .pte; the lossy one (one token past max new) fails each item with
    the exec verdict's forensics. Metrics are not gated for a binary: the baseline item skips."""
    pytester.makepyfile(test_user=USER_TEST)
    cmd = f"{sys.executable} {FAKE} --fake_ids=true {bug}".strip()
    result = pytester.runpytest(
        "-p", "eagle3_check.pytest_plugin", "-p", "no:cacheprovider", f"--eagle3-pte={pte_path}",
        "--eagle3-max-new-tokens=8", f"--eagle3-runner-bin={cmd}", "--eagle3-request-timeout=120",
        f"--eagle3-baseline={BASELINE}", "-k", f"{BIN_SELECT} and not tiny-llama__eager and not tiny-gemma4 and not "
        "int4 and not int8 and not random and not smollm2 and not gemma3", "-rs", "-v")
    result.assert_outcomes(**outcomes)
    result.stdout.fnmatch_lines(lines, consecutive=False)
    out = result.stdout.str()
    assert "Traceback" not in out and "eagle3_check/pytest_plugin" not in out


# --eagle3-data-path: an `export --external-data` program (weights in the .ptd beside the .pte)
PTD_SELECT = f"one-token/max-new-2-full or (prompts and hi) or {PTE_GOLDEN}/capital or my_request"


def _ptd_args(ptd_pte_path, *extra: str) -> list[str]:
    return ["-p", "eagle3_check.pytest_plugin", "-p", "no:cacheprovider", f"--eagle3-pte={ptd_pte_path}",
            "--eagle3-max-new-tokens=8", *extra, "-k", PTD_SELECT, "-v"]


def test_a_pte_with_external_data_runs_with_its_data_path(pytester, pte_program, hf_reference, ptd_pte_path):
    """In process: the program is loaded with the .ptd and every item passes (the .pte golden too:
    the same weights, placed outside the .pte)."""
    from eagle3_check.program.sidecar import data_path_for

    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest(*_ptd_args(ptd_pte_path, f"--eagle3-data-path={data_path_for(ptd_pte_path)}"))
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines([f"eagle3::goldens::{PTE_GOLDEN}/capital PASSED*"], consecutive=False)


def test_a_pte_that_needs_its_data_path_fails_each_item_with_the_clis_line(pytester, pte_program, hf_reference,
                                                                            ptd_pte_path, capfd):
    """Without --eagle3-data-path every item (and the user's fixture) fails with the one line
    `check --pte` gives for the same program, never a traceback. (The CLI's main runs in this process, its fd 1
    and 2 captured: a Python start and its imports fewer than a subprocess, ~5 s.)"""
    from eagle3_check.cli import main

    rc = main(["check", "--pte", str(ptd_pte_path), "--max-new-tokens", "4"])
    out, err = capfd.readouterr()
    assert rc == 2 and err.count("\n") == 1, err
    line = err.strip().removeprefix("error: ")
    assert "cannot be loaded" in line and "--data-path FILE.ptd" in line, line
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest(*_ptd_args(ptd_pte_path))
    result.assert_outcomes(failed=3, errors=1)  # the user's test errors in its fixture's setup
    out = result.stdout.str()
    # the failure reports, not the short summary (which CI=true prints in full too)
    report = result.outlines[:next(i for i, text in enumerate(result.outlines) if "short test summary" in text)]
    assert report.count(f"error: {line}") == 3, out[-3000:]
    assert sum(text.endswith(f"eagle3: {line}") for text in report) == 1, out[-3000:]
    assert "Traceback" not in out and "eagle3_check/pytest_plugin" not in out


def test_a_runner_binary_gets_the_data_path(pytester, pte_program, hf_reference, ptd_pte_path, runner_writable,
                                            monkeypatch):
    """--eagle3-runner-bin on the .ptd program: every request's argv carries the seed's --data_path
    (the fake seed runner loads the program with it and exits 1 without it)."""
    from binary_argv import gives

    from eagle3_check.program.sidecar import data_path_for

    tmp_path = runner_writable  # the binary writes its argv there (as root it runs as nobody)
    monkeypatch.setenv("FAKE_RUNNER_ARGV", str(tmp_path))
    ptd = data_path_for(ptd_pte_path)
    pytester.makepyfile(test_user=USER_TEST)
    result = pytester.runpytest(*_ptd_args(ptd_pte_path, f"--eagle3-data-path={ptd}",
                                           f"--eagle3-runner-bin={sys.executable} {FAKE} --fake_ids=true"))
    result.assert_outcomes(passed=4)
    argvs = [json.loads(p.read_text()) for p in sorted(tmp_path.glob("argv-*.json"))]
    assert len(argvs) >= 4 and all(gives(a, "--data_path", ptd) and gives(a, "--model_path", ptd_pte_path)
                                   for a in argvs), argvs
