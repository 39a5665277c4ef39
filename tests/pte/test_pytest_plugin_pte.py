"""The pytest plugin on a real `.pte` (the session's export of tiny-llama): what a user's
`pytest --eagle3-pte model.pte` runs. Its reference and tokenizer come from the fixture the
export sidecar names; the `.pte` golden applies (and the eager ones of the same fixture)."""

from __future__ import annotations

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
        "int4 and not int8 and not random", "-rs", "-v")
    result.assert_outcomes(**outcomes)
    result.stdout.fnmatch_lines(lines, consecutive=False)
    out = result.stdout.str()
    assert "Traceback" not in out and "eagle3_check/pytest_plugin" not in out
