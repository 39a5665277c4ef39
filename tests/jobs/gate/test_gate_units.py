"""The gate's own logic on the toy program, in well under a second a test (so `make mutate-harness`
can run it per mutant): every check's status and message, the skips and their reasons, the
tie-budget boundary of a summary, load and metadata failures, the tau baseline, the report's
JSON, JUnit and table."""

from __future__ import annotations

import json

import pytest

from eagle3_check.errors import OptionError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.gate.gate import run_gate
from eagle3_check.jobs.gate.model import (
    GateCheck,
    GateInputs,
    GateReport,
    format_table,
    summarize,
    timed,
)
from eagle3_check.judge.self_ref import SelfReference
from eagle3_check.report.junit import JUnitCase
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import FAIL, PASS, SKIP, TIE
from eagle3_check.suites.toy import ToyProgram

PROMPTS = [Prompt("hi", "Hi"), Prompt("sky", "The sky")]
NAMES = ["load", "metadata", "edge suites", "runner vs self reference", "runner vs HF reference",
         "self reference vs HF reference", "golden", "baseline"]


def _inputs(tokenizer, **kw) -> GateInputs:
    base = dict(pte=None, tokenizer=tokenizer, target_dir=None, prompts=PROMPTS,
                options=RunOptions(max_new_tokens=12), suite=None)
    return GateInputs(**{**base, **kw})


def test_gate_on_the_toy_runs_every_check(tokenizer):
    toy = ToyProgram()
    report = run_gate(_inputs(tokenizer, hf_reference=SelfReference(toy)), toy)
    got = {c.name: (c.status, c.message) for c in report.checks}
    assert list(got) == NAMES and report.passed
    assert got["load"][0] == PASS and got["load"][1].startswith("loaded (backend=ToyProgram; tie tolerance ")
    assert got["metadata"][0] == PASS and got["metadata"][1].startswith("consistent (")
    assert got["edge suites"] == (SKIP, "disabled (--suite none)")
    for name in NAMES[3:5]:
        assert got[name] == (PASS, "2/2 requests identical")
    assert got["self reference vs HF reference"] == (PASS, "2/2 prompts identical")
    assert got["golden"] == (SKIP, "no --golden given") and got["baseline"] == (SKIP, "no --baseline given")
    tau = report.check("runner vs self reference").details["tau"]
    assert report.info["k"] == 4 and report.tau == tau and 3 < tau <= 5  # the toy draft is right: a = K
    js = report.to_json()
    assert js["passed"] is True and [c["name"] for c in js["checks"]] == NAMES
    assert [s.name for s in report.junit_suites()] == NAMES
    assert f"GATE: PASS   tau = {tau:.2f}   (None)" in format_table(report)


def test_without_a_reference_the_hf_checks_and_the_suites_skip(tokenizer):
    toy = ToyProgram()
    report = run_gate(_inputs(tokenizer, suite="edge", ks=[2, 3]), toy)
    got = {c.name: (c.status, c.message) for c in report.checks}
    assert got["edge suites"] == (SKIP, "no reference target given (--target or --fixture)")
    assert got["runner vs HF reference"] == (SKIP, "no reference target given (--target or --fixture)")
    assert got["self reference vs HF reference"] == (SKIP, "no reference target given")
    assert got["runner vs self reference"] == (PASS, "4/4 requests identical")
    assert report.info["k"] == [2, 3] and report.passed
    assert report.check("runner vs self reference").details["k"] == [2, 3]


def test_a_program_that_does_not_load_skips_the_rest(tokenizer, tmp_path):
    report = run_gate(_inputs(tokenizer, pte=tmp_path / "missing.pte"))
    assert report.checks[0].name == "load" and report.checks[0].status == FAIL
    assert [(c.name, c.status, c.message) for c in report.checks[1:]] == [
        (n, SKIP, "program did not load") for n in NAMES[1:]]
    assert not report.passed and "GATE: FAIL" in format_table(report)


def test_invalid_metadata_fails_and_skips_the_rest(tokenizer):
    toy = ToyProgram(vocab_size=256)  # the tokenizer names 512 ids: more than the program's vocab
    report = run_gate(_inputs(tokenizer), toy)
    meta = report.check("metadata")
    assert meta.status == FAIL and meta.cases and all(c.status == FAIL for c in meta.cases)
    assert [(c.name, c.status, c.message) for c in report.checks[2:]] == [
        (n, SKIP, "metadata invalid") for n in NAMES[2:]]


def test_a_tau_report_baseline(tokenizer, tmp_path):
    toy = ToyProgram()
    tau = run_gate(_inputs(tokenizer), toy).tau
    for base, want in ((tau, PASS), (tau + 0.05, PASS), (tau + 0.06, FAIL)):
        path = tmp_path / f"tau{base}.json"
        path.write_text(json.dumps({"tau": base, "k": 4}))
        chk = run_gate(_inputs(tokenizer, baseline=path), toy).check("baseline")
        assert chk.status == want, chk.message


def _case(name: str, status: str, positions: int = 10, ties: int = 0) -> JUnitCase:
    return JUnitCase(name, status, f"{name} message", properties={"positions": str(positions),
                                                                  "tie_positions": str(ties)})


@pytest.mark.parametrize("tie_positions, status", [(1, PASS), (2, FAIL)])
def test_summary_tie_budget_boundary(tie_positions, status):
    """10% of 10 + 10 judged positions allows 2 ties: 1 + 1 pass, 1 + 2 fail."""
    cases = [_case("a", TIE, ties=1), _case("b", TIE if tie_positions > 1 else PASS, ties=tie_positions - 1)]
    chk = summarize("x", cases, "requests", tie_budget=0.1)
    assert chk.status == PASS  # 2 tie positions in 20: within 2 allowed
    cases = [_case("a", TIE, ties=1), _case("b", TIE, ties=tie_positions)]
    chk = summarize("x", cases, "requests", tie_budget=0.1)
    assert chk.status == status and chk.details["ties_allowed"] == 2
    assert chk.details["tie_positions"] == 1 + tie_positions and chk.details["positions"] == 20
    if status == FAIL:
        assert chk.message.startswith("0 identical, 2 tie, 0 fail of 2 requests: 3 tie positions exceed the tie "
                                      "budget of 2 (10.0% of 20); first tie: a: a message")
    else:
        assert chk.message == "0 identical, 2 tie, 0 fail of 2 requests (2 tie positions, budget 2)"


def test_summary_counts_skips_fails_and_nothing_run():
    chk = summarize("x", [_case("a", PASS), _case("s", SKIP), _case("f", FAIL)], "requests")
    assert chk.status == FAIL and chk.message == (
        "1 identical, 0 tie, 1 fail of 2 requests, 1 skipped (first: s: s message); first failure: f: f message")
    assert chk.details == {"identical": 1, "tie": 0, "fail": 1, "skip": 1}
    assert summarize("x", [_case("s", SKIP)], "cases").status == FAIL  # the one skip rule: none ran fails
    assert summarize("x", [_case("s", SKIP)], "cases").message == "no cases ran, 1 skipped (first: s: s message)"
    ok = summarize("x", [_case("a", PASS), _case("b", PASS)], "cases", "passed")
    assert (ok.status, ok.message) == (PASS, "2/2 cases passed")


def test_timed_turns_errors_into_failed_checks():
    def user_error() -> GateCheck:
        raise OptionError("K = 9", "K in [1, 7]", "pass -k 4")

    def crash() -> GateCheck:
        raise ZeroDivisionError("division by zero")

    a, b = timed("a", user_error), timed("b", crash)
    assert (a.name, a.status) == ("a", FAIL) and "K = 9" in a.message
    assert (b.status, b.message) == (FAIL, "crashed: ZeroDivisionError: division by zero")
    assert a.seconds >= 0 and b.seconds >= 0


def test_report_json_counts_and_passed():
    chk = GateCheck("c", PASS, "ok", 1.23456, cases=[_case("a", PASS), _case("b", SKIP)])
    js = chk.to_json()
    assert js["seconds"] == 1.235 and js["counts"]["pass"] == 1 and js["counts"]["skip"] == 1
    assert [c["name"] for c in js["cases"]] == ["a", "b"]
    assert not GateReport().passed  # no check ran: never a pass
    assert GateReport([chk, GateCheck("s", SKIP, "why")]).passed
    assert not GateReport([chk, GateCheck("f", FAIL, "no")]).passed
