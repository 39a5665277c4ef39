"""The verdict's and the chunk plan's exact behaviour at their edges, in milliseconds (what
`make mutate-harness` runs per mutant): every problem the verdict can find, with its index and
message; the forensics line of a position; the JSON status; the rule-4 chunk plans of the
chunked-prefill suite's worked examples."""

from __future__ import annotations

import pytest

from eagle3_check.judge.hf import Scores
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.judge.verdict import FAIL, PASS, TIE, Position, judge
from eagle3_check.runners.result import RunResult
from eagle3_check.runners.rules import MAX_NEW, STOP, prefill_chunk_size, prefill_chunks

TOL = tolerance_for("float32")
STOPS = frozenset({1})


def _scores(argmax: list[int]) -> Scores:
    n = len(argmax)
    return Scores(list(argmax), [10.0] * n, [5.0] * n, [0] * n, [10.0] * n, [1] * n)


def _run(tokens: list[int], accepted: list[int], k: int = 2, reason: str = MAX_NEW) -> RunResult:
    rounds = len(accepted)
    return RunResult(prompt_ids=[2, 3, 4], tokens=list(tokens), text="", rounds=rounds, accepted=list(accepted),
                     tau=(len(tokens) - 1) / rounds if rounds else 0.0, stop_reason=reason, k=k, max_new=64)


def test_a_stop_token_as_the_last_token_passes():
    v = judge(_run([5, 1], [1], reason=STOP), _scores([5, 1, 9]), STOPS, 64, 256, TOL)
    assert (v.status, v.message, v.expected_len, v.expected_reason) == (PASS, "identical (2 tokens, stop)", 2, STOP)
    assert v.to_json()["status"] == "pass" and v.to_json()["expected_len"] == 2


def test_tokens_after_a_stop_token_fail_at_the_index_after_it():
    v = judge(_run([5, 1, 7], [1]), _scores([5, 1, 7, 9]), STOPS, 64, 256, TOL)
    assert v.status == FAIL and v.index == 2 and v.got == 7 and v.want == 7
    assert v.message == ("stop token 1 at index 1, then 1 more tokens (length: runner emitted 3 tokens, "
                         "rules fix 2 (stop))")
    assert v.to_json()["status"] == "fail"


def test_no_token_at_all():
    v = judge(_run([], []), _scores([5]), STOPS, 64, 256, TOL)
    assert (v.status, v.index, v.message) == (FAIL, 0, "length: the runner emitted no token (the prefill token "
                                                         "is always emitted)")
    assert v.expected_len is None and v.expected_reason is None and v.judged == 0


def test_stopped_early_names_the_next_token_and_fixes_no_reason():
    """K = 2, one round a = 2, max new 64: the rules go on after 4 tokens; the reference's next is 9."""
    v = judge(_run([5, 6, 7, 8], [2]), _scores([5, 6, 7, 8, 9]), STOPS, 64, 256, TOL)
    assert (v.status, v.index) == (FAIL, 4)
    assert v.message == "length: runner emitted 4 tokens and stopped early, the rules go on; the reference's next token is 9"
    assert v.expected_reason is None and v.expected_len == 4 and v.identical == 4  # EARLY: the length replayed so far


def test_stopped_early_without_a_next_row():
    """The reference has no row past the run (e.g. the self reference at the context end): no next token."""
    v = judge(_run([5, 6, 7, 8], [2]), _scores([5, 6, 7, 8]), STOPS, 64, 256, TOL)
    assert v.message == "length: runner emitted 4 tokens and stopped early, the rules go on"
    assert v.expected_reason is None and v.expected_len == 4


def test_more_tokens_than_the_accepted_counts_give():
    """One round of a = 0 gives 2 tokens; a run reporting it but emitting 3 fails at index 2."""
    v = judge(_run([5, 6, 7], [0]), _scores([5, 6, 7, 8]), STOPS, 64, 256, TOL)
    assert (v.status, v.index) == (FAIL, 2)
    assert v.message == "length: runner emitted 3 tokens, rules fix 2 (the accepted counts [0] it reports)"


def test_max_new_boundary_fixes_the_length_and_reason():
    v = judge(_run([5, 6, 7], [2]), _scores([5, 6, 7, 8]), STOPS, 3, 256, TOL)
    assert (v.status, v.expected_len, v.expected_reason, v.message) == (PASS, 3, MAX_NEW, "identical (3 tokens, max_new)")
    v = judge(_run([5, 6, 7], [2]), _scores([5, 6, 7, 8]), STOPS, 2, 256, TOL)
    assert (v.status, v.index) == (FAIL, 2) and v.message == "length: runner emitted 3 tokens, rules fix 2 (max_new)"


def test_a_tie_and_a_failure_together():
    t = TOL.at(10.0)
    scores = Scores([5, 6, 7, 9], [10.0] * 4, [10.0 - t / 2] * 4, [0] * 4, [10.0, 10.0 - t / 2, 10.0, 2.0],
                    [1, 2, 1, 9])
    v = judge(_run([5, 8, 7], [1]), scores, STOPS, 3, 256, TOL)
    assert (v.status, v.ties, v.identical, v.fails, v.tie_at) == (TIE, 1, 2, 0, [1])
    assert v.message.startswith("1 tie in 3 tokens (max_new); first at token 1: runner 8, reference 6")
    # the tie's margin t / 4: below half the tolerance, so no "another program?" note (judge/verdict.py)
    bad = Scores([5, 6, 7, 9], [10.0] * 4, [10.0 - t / 4] * 4, [0] * 4, [10.0, 10.0 - t / 4, 2.0, 2.0],
                 [1, 2, 9, 9])
    v = judge(_run([5, 8, 3], [1]), bad, STOPS, 3, 256, TOL)
    assert (v.status, v.index, v.got, v.want, v.rank) == (FAIL, 2, 3, 7, 9)
    assert v.message.endswith("(1 of 3 positions fail; 1 tie)")


def test_position_describe_is_exact():
    tie = Position(3, TIE, 8, 6, 0.5, 0.25, 2, 1.0)
    assert tie.describe() == ("at token 3: runner 8, reference 6 (margin 0.5 <= tolerance 1, runner's token rank 2, "
                              "0.25 below the top)")
    fail = Position(4, FAIL, 8, 6, 2.0, 3.0, None, 1.0)
    assert fail.describe() == ("at token 4: runner 8, reference 6 (margin 2 vs tolerance 1, runner's token rank "
                               "unknown, 3 below the top)")
    past = Position(5, FAIL, 8, None, float("inf"), float("inf"), None, 0.0)
    assert past.describe() == "at token 5: runner 8, no reference row (past the context end)"


@pytest.mark.parametrize("max_prefill, window, chunk", [(32, 16, 16), (32, None, 16), (32, 64, 32), (1, None, 1),
                                                        (3, None, 1), (2, 0, 1)])
def test_prefill_chunk_size(max_prefill, window, chunk):
    assert prefill_chunk_size(max_prefill, window) == chunk


@pytest.mark.parametrize("L, plan", [(40, [16, 15, 9])])
def test_prefill_chunks_worked_example(L, plan):
    assert prefill_chunks(L, 32, 9, None) == plan


@pytest.mark.parametrize("L, plan", [(31, [16, 15]), (32, [16, 16]), (33, [16, 11, 6]), (17, [11, 6]),
                                     (37, [16, 15, 6]), (49, [16, 16, 11, 6]), (6, [6]), (16, [16]),
                                     (22, [16, 6]), (21, [15, 6])])
def test_prefill_chunks_of_the_chunked_suite_spec(L, plan):
    """max prefill 32, min prefill 6, no window: chunk 16 (chunked.py's worked plans)."""
    assert prefill_chunks(L, 32, 6, None) == plan and sum(plan) == L


def test_prefill_chunks_when_the_chunk_is_below_min_prefill():
    """chunk 2, min prefill 3, L = 10: 2, 2, 2, then 4 left: 2 would leave 2 < 3, so 4 - 3 = 1; then 3 in one."""
    assert prefill_chunks(10, 4, 3, None) == [2, 2, 2, 1, 3]
    assert prefill_chunks(3, 4, 3, None) == [3]
    assert prefill_chunks(0, 32, 6, None) == []


def test_judge_position_fields():
    from eagle3_check.judge.verdict import judge_position

    scores = _scores([5, 6])
    same = judge_position(1, 6, scores, TOL)
    assert (same.index, same.status, same.got, same.want, same.margin, same.gap, same.rank, same.tolerance) == (
        1, PASS, 6, 6, 5.0, 0.0, 1, TOL.at(10.0))
    past = judge_position(2, 9, scores, TOL)
    assert (past.index, past.status, past.got, past.want, past.margin, past.gap, past.rank, past.tolerance) == (
        2, FAIL, 9, None, float("inf"), float("inf"), None, 0.0)


def test_verdict_json_status_is_a_plain_string():
    v = judge(_run([5, 1], [1], reason=STOP), _scores([5, 1, 9]), STOPS, 64, 256, TOL)
    js = v.to_json()
    assert type(js["status"]) is str and js["status"] == "pass"
    assert set(js) == {"status", "message", "index", "got", "want", "margin", "rank", "expected_len",
                       "expected_reason", "identical", "ties", "fails", "tie_at", "tie_margins", "tie_tolerances",
                       "ties_above_measured"}


def test_tie_verdict_forensics_and_plural():
    t = TOL.at(10.0)
    scores = Scores([5, 6, 7, 9], [10.0] * 4, [10.0 - t / 2] * 4, [0] * 4, [10.0, 10.0 - t / 4, 10.0 - t / 3, 2.0],
                    [1, 2, 3, 9])
    v = judge(_run([5, 8, 4], [1]), scores, STOPS, 3, 256, TOL)
    assert (v.status, v.index, v.got, v.want, v.rank, v.ties, v.tie_at) == (TIE, 1, 8, 6, 2, 2, [1, 2])
    assert v.margin == pytest.approx(t / 2) and (v.expected_len, v.expected_reason) == (3, MAX_NEW)
    assert (v.tie_margins, v.tie_tolerances) == ([pytest.approx(t / 2)] * 2, [t, t])  # per tie, as at index 1
    assert v.message.startswith("2 ties in 3 tokens (max_new); first at token 1")
    fail = judge(_run([5, 6, 7], [0]), _scores([5, 6, 7, 8]), STOPS, 64, 256, TOL)
    assert (fail.status, fail.expected_len, fail.expected_reason) == (FAIL, 2, None)  # EARLY: no reason fixed
    stop = judge(_run([5, 1, 7], [1]), _scores([5, 1, 7, 9]), STOPS, 64, 256, TOL)
    assert (stop.expected_len, stop.expected_reason) == (2, STOP)


@pytest.mark.parametrize("L, window, plan", [(40, 10, [10, 10, 10, 10]), (1, None, [1]), (17, None, [16, 1])])
def test_prefill_chunks_window_and_a_one_token_tail(L, window, plan):
    assert prefill_chunks(L, 32, 1, window) == plan


def test_a_row_without_the_runners_logit_is_a_failure_with_unknown_rank():
    """A reference row whose given logit / rank is missing (fewer given rows than argmax rows): no tie."""
    from eagle3_check.judge.verdict import judge_position

    scores = Scores([5, 6], [10.0, 10.0], [10.0, 10.0], [0, 0], [10.0], [1])
    p = judge_position(1, 7, scores, TOL)
    assert (p.status, p.gap, p.rank, p.margin) == (FAIL, float("inf"), None, 0.0)


@pytest.mark.parametrize("args, want", [
    (([1, 5], {1}, 10, 5, 2, 64, []), (1, STOP)),  # the bonus is a stop token
    (([5, 6], {1}, 1, 5, 2, 64, []), (1, MAX_NEW)),  # max new tokens 1
    (([5, 6], {1}, 10, 63, 2, 64, []), (1, "context")),  # max_seq_len - L = 1 caps max_new
    (([5, 6, 7, 8, 9, 10, 11, 12, 13], set(), 100, 10, 4, 20, [4, 1]), (8, "context")),  # the docstring's example
    (([5, 6], set(), 10, 5, 2, 64, [4]), (3, "stopped early")),  # the reference is too short to judge
    (([5, 6, 7], set(), 10, 10, 4, 16, [0]), (2, "stopped early")),  # 11 + 4 = 15 = max_seq_len - 1: go on
    (([5, 6, 7], set(), 10, 10, 4, 15, [0]), (2, "context")),  # 11 + 4 = 15 > 14: the context rule
    (([5, 6, 7, 8, 9, 10, 11, 12, 13, 14], set(), 100, 10, 4, 20, [4, 1, 0]), (8, "context")),  # a round past the limit is not replayed
    ((list(range(5, 15)), set(), 100, 10, 1, 14, [1, 1, 1]), (4, "context")),  # max_new = 14 - 10 cuts round 2
])
def test_expected_length(args, want):
    from eagle3_check.runners.rules import expected_length

    ref, stops, *rest = args
    got = expected_length(ref, frozenset(stops), *rest)
    assert (got.length, got.reason) == want
