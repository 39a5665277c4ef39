"""One skip rule (`status.overall` / `status.passes`) for `check --suite` and the gate: the same
cases on the same program give the same counts, the same skip reasons and the same verdict in
both, and every case carries its own time (issue 16 part 3)."""

from __future__ import annotations

import pytest

from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.gate.gate import GateInputs, run_gate
from eagle3_check.jobs.suites.execute import SuiteEnv
from eagle3_check.jobs.suites.report import format_suite_table, run_suite
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import FAIL, PASS, SKIP, TIE, overall, passes
from eagle3_check.suites import suite_cases


@pytest.mark.parametrize("statuses, want, ok", [
    pytest.param([PASS, PASS], PASS, True, id="all-pass"),
    pytest.param([PASS, SKIP], PASS, True, id="a-skip-never-fails-on-its-own"),
    pytest.param([PASS, TIE, SKIP], TIE, True, id="tie-passes"),
    pytest.param([PASS, FAIL, SKIP], FAIL, False, id="any-fail"),
    pytest.param([SKIP, SKIP], SKIP, False, id="none-ran-fails"),
    pytest.param([], SKIP, False, id="no-cases-fails"),
])
def test_overall(statuses, want, ok):
    assert overall(statuses) == want and passes(overall(statuses)) is ok


# on the default program (max_seq_len 256, max prefill 128) context/room-0 cannot fit and skips;
# chain/lo runs. "context" mixes both on this program.
@pytest.mark.parametrize("suite", ["context/room-0", "chain/lo"])
def test_check_suite_and_gate_count_and_judge_the_same_cases_alike(suite, program, tokenizer, fixture,
                                                                   hf_reference):
    prompts = [Prompt(p.id, p.text) for p in fixture.prompts()]
    env = SuiteEnv.fixed(program, tokenizer, hf_reference, [p.text for p in prompts], tolerance_for("float32"),
                         fixture=fixture.name)
    rep = run_suite(suite, suite_cases(suite), env)  # what `check --suite NAME` runs on a given program
    gate = run_gate(GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir, prompts=prompts[:1],
                               options=RunOptions(max_new_tokens=4), suite=suite, hf_reference=hf_reference,
                               fixture=fixture.name), program=program)
    chk = gate.check("edge suites")
    assert [(c.name, c.status, c.message) for c in chk.cases] == [(r.name, r.status, r.message) for r in rep.results]
    assert chk.to_json()["counts"] == rep.to_json()["counts"]
    assert (chk.status != FAIL) == rep.passed  # one verdict: a suite where nothing ran fails in both
    assert all(c.seconds > 0 for c in chk.cases) and all(r.seconds > 0 for r in rep.results)
    table = format_suite_table(rep)
    assert ("FAIL (no case ran)" in table) == (rep.status == SKIP)
    assert f"{rep.results[0].seconds:.2f}s" in table
