"""The gate's edge-suite check through a runner binary counts its tie cases against the program's
dtype's tie budget, as the in-process gate does (it used none: budget 0, so a bf16 binary's edge
suites could never pass with a single tie; the real stack top on the seed's tiny-gemma4 export:
"62 tie positions exceed the tie budget of 0 (0.0% of 113)" while its requests had 7%)."""

from __future__ import annotations

import pytest

import eagle3_check.binary.suites as binary_suites
import eagle3_check.gating.gate as gate_mod
from eagle3_check.binary.gate import exec_gate_checks
from eagle3_check.binary.runner import ExecRunner
from eagle3_check.gating.gate import GateInputs
from eagle3_check.gating.gate_model import timed
from eagle3_check.run.options import RunOptions
from eagle3_check.status import FAIL, PASS, TIE
from eagle3_check.suites.execute import CaseResult
from eagle3_check.suites.report import SuiteReport
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
