"""The gate's report, pinned to the character (`jobs/gate/model.py`): a check's JSON, the report's
JSON, its JUnit suites (one per check, the check's own failure added where no case failed), the
table (with and without the drift section) and the summary rule's corner cases."""

from __future__ import annotations

import time

import pytest

from eagle3_check.jobs.check.drift import DriftReport, DriftThresholds, PromptDrift, drift_table
from eagle3_check.jobs.gate.model import (
    DRIFT,
    GateCheck,
    GateReport,
    format_table,
    skip_check,
    summarize,
    timed,
)
from eagle3_check.report.junit import JUnitCase, JUnitSuite
from eagle3_check.status import FAIL, PASS, SKIP, TIE


def test_a_checks_json_has_every_field_counts_and_rounded_case_times():
    cases = [JUnitCase("a", PASS, "ok a", 1.23456), JUnitCase("b", TIE, "tie b", 0.0004),
             JUnitCase("c", SKIP, "why c")]
    chk = GateCheck("runner vs HF reference", PASS, "2/2 requests", 2.0004, cases=cases, details={"tau": 3.5})
    assert chk.to_json() == {
        "name": "runner vs HF reference", "status": PASS, "message": "2/2 requests", "seconds": 2.0,
        "details": {"tau": 3.5}, "counts": {"pass": 1, "tie": 1, "fail": 0, "skip": 1},
        "cases": [{"name": "a", "status": PASS, "message": "ok a", "seconds": 1.235},
                  {"name": "b", "status": TIE, "message": "tie b", "seconds": 0.0},
                  {"name": "c", "status": SKIP, "message": "why c", "seconds": 0.0}]}


def test_the_reports_json_holds_passed_tau_info_and_the_checks_in_order():
    checks = [GateCheck("load", PASS, "loaded"), skip_check("golden", "no --golden given")]
    report = GateReport(checks, info={"pte": "p.pte", "k": 4}, tau=2.5)
    assert report.to_json() == {"passed": True, "tau": 2.5, "info": {"pte": "p.pte", "k": 4},
                                "checks": [c.to_json() for c in checks]}
    assert report.check("golden") is checks[1] and report.check("baseline") is None


def test_junit_has_one_suite_per_check_and_the_checks_own_failure_where_no_case_failed():
    ran = [JUnitCase("hi", PASS, "identical", 0.5), JUnitCase("sky", TIE, "1 tie", 0.25)]
    failed = [JUnitCase("hi", FAIL, "diverged", 0.5)]
    report = GateReport([
        GateCheck("load", PASS, "loaded", 0.125),  # no cases: the check is its one case
        GateCheck("metadata", FAIL, "bad vocab", 0.0625),  # no cases, failed: that one case fails
        GateCheck("edge suites", PASS, "2 ran", 1.0, cases=ran),
        GateCheck("runner vs HF reference", FAIL, "ties over budget", 1.0, cases=ran),
        GateCheck("golden", FAIL, "1 fail", 0.5, cases=failed),
    ])
    assert report.junit_suites() == [
        JUnitSuite("load", [JUnitCase("load", PASS, "loaded", 0.125)]),
        JUnitSuite("metadata", [JUnitCase("metadata", FAIL, "bad vocab", 0.0625)]),
        JUnitSuite("edge suites", ran),
        JUnitSuite("runner vs HF reference", [*ran, JUnitCase("runner vs HF reference", FAIL, "ties over budget", 0.0)]),
        JUnitSuite("golden", failed),
    ]


def test_the_table_lists_every_check_and_the_verdict_line():
    report = GateReport([GateCheck("load", PASS, "loaded (backend=X)", 0.04),
                         GateCheck("metadata", FAIL, "vocab 9 > 8", 1.25),
                         skip_check(DRIFT, "no reference target given")],  # no drift details: no drift table
                        info={"pte": "out/p.pte"})
    assert format_table(report) == (
        "check               status  time  message\n"
        "load                PASS    0.0s  loaded (backend=X)\n"
        "metadata            FAIL    1.2s  vocab 9 > 8\n"
        "quantization drift  SKIP    0.0s  no reference target given\n"
        "\n"
        "GATE: FAIL   (out/p.pte)")
    report.checks[1].status, report.tau = PASS, 3.14159
    assert format_table(report).endswith("\n\nGATE: PASS   tau = 3.14   (out/p.pte)")


def test_the_table_of_a_quantized_program_adds_the_drift_table():
    rep = DriftReport("int4-weight g32", [PromptDrift("hi", 10, 9, 4, 301, 302, 0.5, 2, 3)], 3.0, 3.25,
                      DriftThresholds())
    rep.judge()
    drift = GateCheck(DRIFT, rep.status, rep.message(), 0.5, cases=rep.junit_cases(), details={"drift": rep.to_json()})
    report = GateReport([GateCheck("load", PASS, "loaded", 0.25), drift], info={"pte": "q.pte"}, tau=3.0)
    assert format_table(report).split("\n") == [
        "check               status  time  message",
        "load                PASS    0.2s  loaded",
        f"quantization drift  PASS    0.5s  {rep.message()}",
        "",
        "quantization drift (int4-weight g32; self reference vs HF full precision, teacher-forced):",
        *drift_table(rep.to_json()),
        "",
        "GATE: PASS   tau = 3.00   (q.pte)"]


def test_timed_measures_the_checks_own_time():
    def slow() -> GateCheck:
        time.sleep(0.05)
        return GateCheck("x", PASS, "ok")

    chk = timed("x", slow)
    assert 0.05 <= chk.seconds < 5.0


def _plain(name: str, status: str) -> JUnitCase:  # a case without position counts: one position
    return JUnitCase(name, status, f"{name} says {status}")


def test_summary_without_a_budget_allows_no_tie():
    cases = [_plain("a", PASS), _plain("b", TIE)]
    chk = summarize("x", cases, "requests")
    assert (chk.name, chk.status, chk.cases) == ("x", FAIL, cases)
    assert chk.message == ("1 identical, 1 tie, 0 fail of 2 requests: 1 tie positions exceed the tie budget of 0 "
                           "(0.0% of 2); first tie: b: b says tie")


@pytest.mark.parametrize("budget, status", [pytest.param(0.5, PASS, id="half-of-2-allows-1"),
                                            pytest.param(0.49, FAIL, id="under-half-of-2-allows-0")])
def test_summary_counts_a_case_without_positions_as_one_position(budget, status):
    cases = [_plain("a", PASS), _plain("b", TIE)]
    chk = summarize("x", cases, "requests", tie_budget=budget)
    assert (chk.name, chk.status, chk.cases) == ("x", status, cases)
    assert chk.details == {"identical": 1, "tie": 1, "fail": 0, "skip": 0, "tie_positions": 1, "positions": 2,
                           "ties_allowed": 1 if status == PASS else 0,
                           **({"note": "passed within the tolerance's noise: 1 of 2 positions are ties (50.0%), up to "
                               "1 allowed; one more tie position would fail it. For a verdict without a tolerance: "
                               "--exact (docs/exact.md)"} if status == PASS else {})}
    if status == PASS:
        assert chk.message == "1 identical, 1 tie, 0 fail of 2 requests (1 tie positions, budget 1)"


def test_summary_keeps_name_cases_and_details_on_every_verdict():
    skipped = [_plain("s", SKIP)]
    none_ran = summarize("x", skipped, "cases")
    assert (none_ran.name, none_ran.cases) == ("x", skipped)
    assert none_ran.details == {"identical": 0, "tie": 0, "fail": 0, "skip": 1}
    failed = [_plain("a", PASS), _plain("f", FAIL)]
    chk = summarize("x", failed, "cases")
    assert (chk.name, chk.status, chk.cases) == ("x", FAIL, failed)
    passed = [_plain("a", PASS)]
    chk = summarize("x", passed, "cases")
    assert (chk.name, chk.status, chk.cases, chk.message) == ("x", PASS, passed, "1/1 cases identical")
    assert chk.details == {"identical": 1, "tie": 0, "fail": 0, "skip": 0, "tie_positions": 0, "positions": 1,
                           "ties_allowed": 0}
