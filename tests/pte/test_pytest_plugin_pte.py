"""The pytest plugin on a real `.pte` (the session's export of tiny-llama): what a user's
`pytest --eagle3-pte model.pte` runs. Its reference and tokenizer come from the fixture the
export sidecar names; the `.pte` golden applies (and the eager ones of the same fixture)."""

from __future__ import annotations

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

pytestmark = pytest.mark.pte
pytest_plugins = ["pytester"]

PTE_GOLDEN = "tiny-llama__pte__cpu__float32__k4__n48"
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
    result = pytester.runpytest(*args, "-rs", "-v", "-k", f"eos-bonus/bonus-is-stop or prompts::hi or {PTE_GOLDEN}/capital or "
                                "context/room-1-zero or my_request")
    result.assert_outcomes(passed=4, skipped=1)
    result.stdout.fnmatch_lines([
        "test_user.py::test_my_request PASSED*",
        "eagle3::suites::eos-bonus/bonus-is-stop PASSED*",
        f"eagle3::goldens::{PTE_GOLDEN}/capital PASSED*",
    ], consecutive=False)
