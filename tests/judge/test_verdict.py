"""Verdicts: every emitted position judged against hand-made teacher-forced rows (DESIGN §3).

Tolerance in these tables: 4 ulp(bf16) -> at a top logit of 1.0, 4 x 2^-7 = 0.03125; at 0.25,
4 x 2^-9 = 0.0078125. Runs: L = 10, K = 2; accepted [2, 2] with max_new 6 -> the bonus token,
then 3 + 3 tokens capped at 6 (rules.expected_length).
"""

import math

import pytest

from eagle3_check.judge.hf import Scores
from eagle3_check.judge.tolerance import Tolerance, tolerance_for, ulp
from eagle3_check.judge.verdict import FAIL, PASS, TIE, Status, judge
from eagle3_check.runners.loop import RunResult

TOL = Tolerance("bfloat16", 4)
WANT = [210, 211, 212, 213, 214, 215, 216]  # argmax of rows 0..6 (row 6: the token after the run)


def scores(changes: dict[int, tuple] | None = None, top1: float = 1.0, n_rows: int = 7) -> Scores:
    """Rows where the runner's token is the argmax (margin 0.5), except `changes`:
    index -> (runner token, margin, gap, rank)."""
    rows = dict(argmax=list(WANT), top1=[top1] * 7, top2=[top1 - 0.5] * 7, runner_up=[9] * 7,
                given_logit=[top1] * 6, given_rank=[1] * 6)
    for i, (_, margin, gap, rank) in (changes or {}).items():
        rows["top2"][i], rows["given_logit"][i], rows["given_rank"][i] = top1 - margin, top1 - gap, rank
    return Scores(**{k: v[:n_rows] for k, v in rows.items()})


def run(tokens, accepted=(2, 2)):
    return RunResult(prompt_ids=list(range(10)), tokens=list(tokens), text="", rounds=len(accepted),
                     accepted=list(accepted), tau=0.0, stop_reason="max_new", k=2, max_new=6)


def with_tokens(changes: dict[int, tuple]) -> list[int]:
    toks = list(WANT[:6])
    for i, change in changes.items():
        toks[i] = change[0]
    return toks


CASES = [
    # id, changes {index: (runner token, margin, gap, rank)}, stops, max_new, accepted,
    # status, first index, (identical, ties, fails), words in the message
    ("identical", {}, (), 6, (2, 2), PASS, None, (6, 0, 0), "identical (6 tokens, max_new)"),
    ("tie-within-tolerance", {2: (9, 0.02, 0.02, 2)}, (), 6, (2, 2), TIE, 2, (5, 1, 0), "1 tie in 6 tokens"),
    ("runner-up-beyond-tolerance", {2: (9, 0.05, 0.05, 2)}, (), 6, (2, 2), FAIL, 2, (5, 0, 1),
     "diverged at token 2: runner 9, reference 212"),
    ("rank-4-within-tolerance-ties", {2: (9, 0.01, 0.02, 4)}, (), 6, (2, 2), TIE, 2, (5, 1, 0), "1 tie in 6 tokens"),
    ("rank-5-fails", {2: (9, 0.01, 0.02, 5)}, (), 6, (2, 2), FAIL, 2, (5, 0, 1), "rank 5"),
    ("tie-then-real-failure", {1: (9, 0.02, 0.02, 2), 4: (8, 1.0, 1.0, 2)}, (), 6, (2, 2), FAIL, 4, (4, 1, 1),
     "diverged at token 4"),
    ("every-failure-counted", {1: (9, 1.0, 1.0, 2), 4: (8, 1.0, 1.0, 2)}, (), 6, (2, 2), FAIL, 1, (4, 0, 2),
     "2 of 6 positions fail"),
    ("stop-token-then-more", {}, (212,), 6, (2, 2), FAIL, 3, (6, 0, 0), "stop token 212 at index 2, then 3 more"),
    ("stopped-early", {}, (), 8, (2, 2), FAIL, 6, (6, 0, 0), "runner emitted 6 tokens and stopped early, the rules go on"),
    ("max-new-overrun", {}, (), 5, (2, 2), FAIL, 5, (6, 0, 0), "rules fix 5 (max_new)"),
    ("more-tokens-than-rounds-allow", {}, (), 6, (2,), FAIL, 4, (6, 0, 0), "rules fix 4"),
]


@pytest.mark.parametrize("changes, stops, max_new, accepted, status, index, counts, words",
                         [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_verdict_table(changes, stops, max_new, accepted, status, index, counts, words):
    v = judge(run(with_tokens(changes), accepted), scores(changes), frozenset(stops), max_new, 64, TOL)
    assert (v.status, v.index, (v.identical, v.ties, v.fails)) == (status, index, counts), v.message
    assert words in v.message


def test_a_failure_carries_its_forensics():
    v = judge(run(with_tokens({3: (999, 0.5, 0.7, 5)})), scores({3: (999, 0.5, 0.7, 5)}), frozenset(), 6, 64, TOL)
    assert (v.index, v.got, v.want, v.margin, v.rank) == (3, 999, 213, 0.5, 5)


def test_a_tie_is_never_pass_and_keeps_its_own_count_in_json():
    v = judge(run(with_tokens({2: (9, 0.02, 0.02, 2)})), scores({2: (9, 0.02, 0.02, 2)}), frozenset(), 6, 64, TOL)
    js = v.to_json()
    assert v.status != PASS and js["status"] == "tie" and (js["ties"], js["identical"], js["tie_at"]) == (1, 5, [2])
    assert isinstance(v.status, Status) and v.status == "tie"


@pytest.mark.parametrize("top1, status", [(1.0, TIE), (0.25, FAIL)], ids=["ulp-at-1.0-tie", "ulp-at-0.25-fails"])
def test_the_tolerance_scales_with_the_logit_magnitude(top1, status):
    change = {2: (9, 0.02, 0.02, 2)}  # 0.02 <= 0.03125 at 1.0, > 0.0078125 at 0.25
    v = judge(run(with_tokens(change)), scores(change, top1=top1), frozenset(), 6, 64, TOL)
    assert v.status == status, v.message


def test_without_logits_any_difference_fails_never_a_tie():
    """The self reference's rows: margins inf, ranks unknown."""
    s = Scores(list(WANT), [math.inf] * 7, [-math.inf] * 7, [-1] * 7, [-math.inf] * 6, [None] * 6)
    v = judge(run(with_tokens({2: (9, 0, 0, 2)})), s, frozenset(), 6, 64, TOL)
    assert (v.status, v.index, v.fails) == (FAIL, 2, 1)


def test_a_position_without_a_reference_row_fails():
    v = judge(run(WANT[:6]), scores(n_rows=4), frozenset(), 6, 64, TOL)
    assert (v.status, v.index, v.fails) == (FAIL, 4, 2) and "no reference row" in v.message


@pytest.mark.parametrize("dtype, x, want", [("bfloat16", 1.4, 2**-7), ("float32", 12.0, 2**-20),
                                            ("bfloat16", -0.3, 2**-9), ("float32", 1.0, 2**-23)],
                         ids=["bf16-1.4", "fp32-12", "bf16-neg-0.3", "fp32-1"])
def test_ulp_worked_examples(dtype, x, want):
    assert ulp(dtype, x) == want


def test_top_two_breaks_an_exact_tie_by_the_lowest_id_and_shows_margin_0():
    import torch

    from eagle3_check.judge.hf import top_two

    (i1, v1), (i2, v2) = top_two(torch.tensor([[1.0, 3.0, 3.0], [5.0, 1.0, 2.0]]))
    assert (i1.tolist(), i2.tolist(), (v1 - v2).tolist()) == ([1, 0], [2, 2], [0.0, 3.0])


@pytest.mark.parametrize("budget, passed", [(0.0, False), (0.25, True), (0.2, False)],
                         ids=["fp32-budget-0-fails", "quarter-allows-3-of-12", "fifth-allows-2-of-12"])
def test_a_report_over_its_tie_budget_fails_and_says_so(budget, passed):
    """Two requests of 6 positions: 3 ties in all (ties allowed = int(budget x 12))."""
    from eagle3_check.jobs.check.prompt_set import CheckReport, RequestOutcome, format_table

    tie2 = {1: (9, 0.02, 0.02, 2), 2: (8, 0.02, 0.02, 2)}
    outcomes = [RequestOutcome(pid, run(with_tokens(ch)), judge(run(with_tokens(ch)), scores(ch), frozenset(), 6, 64, TOL))
                for pid, ch in (("a", tie2), ("b", {4: (9, 0.02, 0.02, 2)}))]
    report = CheckReport(k=2, outcomes=outcomes, tie_budget=budget)
    assert report.counts() == {"requests": 2, "identical": 0, "tie": 2, "fail": 0, "positions": 12,
                               "identical_positions": 9, "tie_positions": 3, "fail_positions": 0}
    assert report.passed == passed and report.to_json()["tie_budget"]["exceeded"] == (not passed)
    table = format_table(report)
    assert "requests: 0 identical, 2 tie, 0 fail (of 2)" in table
    assert ("exceed the tie budget" in table) == (not passed) and ("verdict: PASS" in table) == passed


def test_a_run_short_of_max_new_stopped_early():
    """accepted [2, 1]: 1 + 3 + 2 = 6 tokens the rules fix (max_new 6); the run emitted 5."""
    v = judge(run(WANT[:5], (2, 1)), scores(), frozenset(), 6, 64, TOL)
    assert (v.status, v.index, v.identical) == (FAIL, 5, 5)
    assert "emitted 5 tokens and stopped early, rules fix 6 (max_new); the reference's next token is 215" in v.message


@pytest.mark.parametrize("share, noted", [(0.3, False), (0.9, True)], ids=["within-the-measured-shifts", "above-them"])
def test_a_tie_above_every_measured_shift_is_named_but_passes(share, noted):
    """bf16 at a top logit of 24: a tie at 0.9 x the tolerance lies above every shift a correct runner
    showed (the tolerance is twice them): the verdict says so and still ties; at 0.3 x it says nothing."""
    tol = tolerance_for("bfloat16")
    m = share * tol.at(24.0)
    change = {2: (9, m, m, 2)}
    v = judge(run(with_tokens(change)), scores(change, top1=24.0), frozenset(), 6, 64, tol)
    assert v.status == TIE and v.ties == 1
    assert v.ties_above_measured == noted and ("another program?" in v.message) == noted, v.message
