"""The gate's edge-suite check (through a runner binary, and in process: `jobs.gate.model.suite_junit_cases`)
counts its tie positions against the program's dtype's tie budget, a share of judged positions as
for requests. Through a binary it used no budget (0: the real stack top on the seed's tiny-gemma4
export, "62 tie positions exceed the tie budget of 0 (0.0% of 113)" while its requests had 7%),
and both gates counted each case as one position (a case of 24 tokens with one tie was 1 of 1)."""

from __future__ import annotations

import pytest

import eagle3_check.jobs.gate.gate as gate_mod
import eagle3_check.jobs.suites.binary as binary_suites
from eagle3_check.jobs.gate.binary import exec_gate_checks
from eagle3_check.jobs.gate.gate import GateInputs
from eagle3_check.jobs.gate.model import suite_junit_cases, timed
from eagle3_check.jobs.suites.judging import CaseResult
from eagle3_check.jobs.suites.report import SuiteReport
from eagle3_check.runners.binary.runner import ExecRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import FAIL, PASS, TIE
from eagle3_check.suites.toy import ToyProgram


@pytest.mark.parametrize("budget,status", [(0.1, PASS), (0.05, FAIL)], ids=["within-10pct", "over-5pct"])
def test_binary_edge_suites_take_the_gates_tie_budget(tokenizer, monkeypatch, budget, status):
    results = [CaseResult(f"c{i}", TIE if i < 2 else PASS, "ok") for i in range(20)]  # 2 tie cases of 20
    monkeypatch.setattr(binary_suites, "run_exec_suite", lambda *a, **k: SuiteReport("edge", results))
    monkeypatch.setattr(gate_mod, "gate_suite_env", lambda *a: None)
    inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=None, prompts=[], options=RunOptions(),
                        suite="edge", tie_budget=budget)
    checks, _ = exec_gate_checks(ExecRunner("exec:/bin/true"), ToyProgram(), inputs, object(), timed)
    edge = next(c for c in checks if c.name == "edge suites")
    assert edge.status == status, edge.message
    assert status == PASS or f"exceed the tie budget of 1 ({budget:.1%} of 20)" in edge.message


def test_the_budget_is_a_share_of_judged_positions_not_of_cases(tokenizer, monkeypatch):
    """A case that judged 24 tokens counts 24 positions (its ties among them), as a request does: 2
    tie cases of 20 (10% of cases) are 2 tie positions of 480, within 5%."""
    results = [CaseResult(f"c{i}", TIE if i < 2 else PASS, "ok", {"identical": 23 if i < 2 else 24,
                                                                 "ties": int(i < 2)}) for i in range(20)]
    cases = suite_junit_cases(results)
    assert cases[0].properties == {"positions": "24", "tie_positions": "1"}
    assert suite_junit_cases([CaseResult("err", PASS, "error exit 1", {"L": 3})])[0].properties == {}
    monkeypatch.setattr(binary_suites, "run_exec_suite", lambda *a, **k: SuiteReport("edge", results))
    monkeypatch.setattr(gate_mod, "gate_suite_env", lambda *a: None)
    inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=None, prompts=[], options=RunOptions(),
                        suite="edge", tie_budget=0.05)
    checks, _ = exec_gate_checks(ExecRunner("exec:/bin/true"), ToyProgram(), inputs, object(), timed)
    edge = next(c for c in checks if c.name == "edge suites")
    assert edge.status == PASS and edge.details["positions"] == 480 and edge.details["tie_positions"] == 2, edge
