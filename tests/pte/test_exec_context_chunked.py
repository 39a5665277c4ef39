"""The context cases through a binary whose profile chunks (the fake stack top on the default kv_window
export: max_seq_len 256, prefill [1, 128]): L + K near max_seq_len needs L past max prefill, which
the stack top takes in chunks, so the cases run (as they do in process under that profile) instead
of skipping with a limit the binary does not have; a binary that does not chunk skips them, naming
the prefill range it cannot go past."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.jobs.suites.binary import run_exec_suite  # noqa: E402
from eagle3_check.jobs.suites.execute import SuiteEnv  # noqa: E402
from eagle3_check.judge.tolerance import tolerance_for  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend  # noqa: E402
from eagle3_check.runners.binary.runner import ExecRunner  # noqa: E402
from eagle3_check.suites import suite_cases  # noqa: E402

pytestmark = pytest.mark.pte

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_runners" / "fake_seed_runner.py"
NAMES = ("context/room-0", "context/cap-at-end")


@pytest.mark.slow  # two fake runs on 250-token prompts, then two refusals (~40 s on two busy cores)
def test_context_cases_run_chunked_through_a_chunking_binary(kvwin_pte_path, tokenizer, hf_reference, fixture,
                                                             monkeypatch):
    cases = [c for c in suite_cases("context") if c.name in NAMES]
    env = SuiteEnv.fixed(PteBackend(kvwin_pte_path), tokenizer, hf_reference, [p.text for p in fixture.prompts()],
                         tolerance_for("float32"), fixture=fixture.name)
    top = {r.name: r for r in run_exec_suite("context", cases, env, ExecRunner(f"exec:{sys.executable} {FAKE}")).results}
    assert set(top) == set(NAMES) and all(r.status == "pass" for r in top.values()), \
        {n: (r.status, r.message) for n, r in top.items()}
    assert all(r.details["L"] > 128 and len(r.details["chunks"]) > 1 for r in top.values()), top
    monkeypatch.setenv("FAKE_PROFILE", "k-runtime")  # #20345: no chunking, L past max prefill is an error
    kr = run_exec_suite("context", cases, env, ExecRunner(f"exec:{sys.executable} {FAKE}")).results
    assert all(r.status == "skip" and "fits this program's prefill range [1, 128]" in r.message for r in kr), kr
