"""jobs.check.prompt_set.JudgedReport: the one rule by which `check` and `check --runner exec:...` count requests and
positions and spend the tie budget; each report's JSON keeps its own keys."""

from types import SimpleNamespace

import pytest

from eagle3_check.jobs.check.binary import ExecReport
from eagle3_check.jobs.check.prompt_set import CheckReport
from eagle3_check.judge.binary import ExecVerdict
from eagle3_check.judge.verdict import Verdict
from eagle3_check.status import FAIL, PASS, TIE


def _check(*verdicts, budget=0.0) -> CheckReport:
    return CheckReport(4, [SimpleNamespace(verdict=v) for v in verdicts], tie_budget=budget)


def _exec(*verdicts, budget=0.0) -> ExecReport:
    return ExecReport(4, [SimpleNamespace(verdict=v) for v in verdicts], tie_budget=budget)


def test_check_counts_requests_and_positions_by_outcome():
    r = _check(Verdict(PASS, "", identical=5), Verdict(TIE, "", identical=3, ties=2),
               Verdict(FAIL, "", identical=1, ties=1, fails=2))
    assert list(r.counts().items()) == [
        ("requests", 3), ("identical", 1), ("tie", 1), ("fail", 1), ("positions", 14),
        ("identical_positions", 9), ("tie_positions", 3), ("fail_positions", 2)]
    assert list(CheckReport(4).to_json()["counts"]) == list(r.counts())


def test_exec_counts_have_no_identical_positions():
    """An exec verdict counts judged, tie and failing positions: its JSON keeps the keys it always had."""
    r = _exec(ExecVerdict(PASS, "", judged=5), ExecVerdict(TIE, "", judged=6, ties=2),
              ExecVerdict(FAIL, "", judged=1, fails=1))
    assert list(r.counts().items()) == [
        ("requests", 3), ("identical", 1), ("tie", 1), ("fail", 1), ("positions", 12),
        ("tie_positions", 2), ("fail_positions", 1)]
    assert list(ExecReport(4).to_json()["counts"]) == list(r.counts())


@pytest.mark.parametrize("share, positions, allowed", [
    (0.07, 100, 7),  # 0.07 * 100 = 7.000000000000001
    (0.29, 100, 29),  # 0.29 * 100 = 28.999999999999996: the float's rounding forgiven
    (0.05, 59, 2),  # 2.95: floored
    (0.0, 100, 0),
], ids=["over-by-rounding", "under-by-rounding", "floored", "no-ties"])
def test_ties_allowed_is_the_floor_of_share_times_positions(share, positions, allowed):
    assert _check(Verdict(PASS, "", identical=positions), budget=share).ties_allowed == allowed
    assert _exec(ExecVerdict(PASS, "", judged=positions), budget=share).ties_allowed == allowed


@pytest.mark.parametrize("make", [
    lambda ties, budget: _check(Verdict(TIE, "", identical=20 - ties, ties=ties), budget=budget),
    lambda ties, budget: _exec(ExecVerdict(TIE, "", judged=20, ties=ties), budget=budget),
], ids=["check", "exec"])
@pytest.mark.parametrize("ties, passed", [(1, True), (2, False)], ids=["at-budget", "one-over"])
def test_a_report_passes_while_its_ties_are_within_the_budget(make, ties, passed):
    report = make(ties, 0.05)  # 0.05 * 20 positions: 1 tie allowed
    assert (report.ties_allowed, report.over_budget, report.passed) == (1, not passed, passed)


@pytest.mark.parametrize("make", [_check, _exec], ids=["check", "exec"])
def test_a_failing_request_or_no_request_fails_the_report(make):
    v = Verdict(FAIL, "", fails=1) if make is _check else ExecVerdict(FAIL, "", judged=1, fails=1)
    assert not make(v).passed
    assert not make().passed


def test_a_pass_that_used_ties_says_how_much_it_cannot_see():
    """Issue 44 item 3: a program that passes within the tolerance's noise is told so, with the slack
    (budget.noise_note's worked example: 246 ties of 2048, 334 allowed -> 88 more would pass too)."""
    r = _check(Verdict(TIE, "", identical=1802, ties=246), budget=334 / 2048)
    assert (r.passed, r.ties_allowed) == (True, 334)
    assert "246 of 2048 positions are ties (12.0%), up to 334 allowed" in r.noise_note
    assert "moved at 88 more positions would pass too" in r.noise_note and "--exact" in r.noise_note
    # no note: no tie, a failing verdict, exact mode
    assert _check(Verdict(PASS, "", identical=20), budget=0.1).noise_note is None
    assert _check(Verdict(TIE, "", identical=10, ties=10), budget=0.1).noise_note is None  # over budget: FAIL
    exact = _check(Verdict(TIE, "", identical=18, ties=2), budget=0.5)
    exact.info["numerics"] = "exact (shape-invariant kernels)"
    assert exact.noise_note is None  # the table and the JSON: tests/jobs/check/test_exact_check.py
