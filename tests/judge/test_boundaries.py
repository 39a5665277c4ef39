"""The harness's own boundaries (issue 20 part 4): each pinned on both sides, so a harness that
moves one (a wider tolerance, a verdict that skips index 0, a golden compare that stops at 32
tokens, a metrics gate that lets one call pass) fails here.

- the tie tolerance: a margin / gap just under it is a tie, just over it a failure; rank top_n
  is a tie, top_n + 1 a failure (its size against the measurements: test_tolerance_behaviour.py);
- a bonus-only request (max new tokens 1, no round) whose one token is wrong fails at index 0;
- a golden differing only at token 35 or 40 of 41 (past the 32nd) differs there;
- metrics one target or draft call off the baseline differ (both directions).
"""

from __future__ import annotations

import math

import pytest

from eagle3_check.jobs.golden.diff import diff_golden
from eagle3_check.jobs.golden.file import Golden, GoldenKey, GoldenPrompt
from eagle3_check.jobs.golden.metrics import compare_metrics, compute_metrics
from eagle3_check.judge.hf import Scores
from eagle3_check.judge.tolerance import TOP_N, tolerance_for
from eagle3_check.judge.verdict import FAIL, PASS, TIE, judge, judge_position
from eagle3_check.runners.result import RunResult
from eagle3_check.runners.rules import MAX_NEW

TOP = 12.0  # a row's top logit


def _row(margin: float, gap: float, rank: int = 2) -> Scores:
    """One row whose argmax is token 5 (logit TOP), runner-up 6 at TOP - margin; the runner's token 7
    sits `gap` below the top at rank `rank`."""
    return Scores([5], [TOP], [TOP - margin], [6], [TOP - gap], [rank])


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("which", ["margin", "gap"])
def test_tie_just_under_and_just_over_the_tolerance(dtype, which):
    tol = tolerance_for(dtype)
    t = tol.at(TOP)
    for scale, want in ((0.99, TIE), (1.0, TIE), (1.01, FAIL), (10.0, FAIL)):
        margin = t * scale if which == "margin" else t / 2
        gap = t * scale if which == "gap" else t / 2
        got = judge_position(0, 7, _row(margin, gap), tol).status
        assert got == want, f"{which} = {scale} x tolerance ({dtype}): {got}, want {want}"


def test_tie_rank_boundary():
    tol = tolerance_for("float32")
    t = tol.at(TOP)
    assert judge_position(0, 7, _row(t / 2, t / 2, rank=TOP_N), tol).status == TIE
    assert judge_position(0, 7, _row(t / 2, t / 2, rank=TOP_N + 1), tol).status == FAIL
    assert judge_position(0, 7, _row(t / 2, t / 2, rank=None), tol).status == FAIL


def _bonus_only(token: int) -> RunResult:
    return RunResult(prompt_ids=[2, 3, 4], tokens=[token], text="", rounds=0, accepted=[], tau=0.0,
                     stop_reason=MAX_NEW, k=4, max_new=1)


def test_divergence_at_index_0_of_a_bonus_only_request():
    """max new tokens 1: the bonus alone; a wrong bonus fails at index 0 (not skipped as 'no round')."""
    scores = Scores([5, 9], [TOP, TOP], [TOP - 1.0, TOP - 1.0], [6, 6], [TOP - 3.0], [3])
    tol = tolerance_for("float32")
    ok = judge(_bonus_only(5), scores, frozenset({1}), 1, 256, tol)
    assert ok.status == PASS and ok.judged == 1
    bad = judge(_bonus_only(7), scores, frozenset({1}), 1, 256, tol)
    assert (bad.status, bad.index, bad.got, bad.want, bad.fails) == (FAIL, 0, 7, 5, 1)
    assert "at token 0" in bad.message


N = 41  # tokens in the long golden


def _golden(tokens: list[int]) -> Golden:
    key = GoldenKey("tiny-llama", "eager", "cpu", "float32", 4, N)
    rounds = 8  # 1 + 8 rounds of 5 = 41 tokens
    prompt = GoldenPrompt("p", "text", [2, 3], list(tokens), "", rounds, [4] * rounds, (N - 1) / rounds, MAX_NEW,
                          1.0, [1.0] * N)
    return Golden(key, {}, 1e-5, {}, [prompt])


def _run(tokens: list[int]) -> RunResult:
    return RunResult(prompt_ids=[2, 3], tokens=list(tokens), text="", rounds=8, accepted=[4] * 8,
                     tau=(len(tokens) - 1) / 8, stop_reason=MAX_NEW, k=4, max_new=N)


@pytest.mark.parametrize("index", [33, 35, 40])
def test_golden_difference_past_the_32nd_token(index):
    want = list(range(100, 100 + N))
    got = list(want)
    got[index] += 1
    g = _golden(want)
    assert diff_golden({"p": _run(want)}, g) == []
    (d,) = diff_golden({"p": _run(got)}, g)
    assert (d.field, d.index, d.got, d.want) == ("tokens", index, want[index] + 1, want[index])


def test_golden_length_difference_at_the_last_token():
    want = list(range(100, 100 + N))
    diffs = diff_golden({"p": _run(want[:-1])}, _golden(want))
    assert [(d.field, d.index) for d in diffs][0] == ("length", N - 1)


def _calls_run(prefill: int, verify: int, draft: int) -> RunResult:
    return RunResult(prompt_ids=[2], tokens=[5] * 11, text="", rounds=2, accepted=[4, 4], tau=5.0,
                     stop_reason=MAX_NEW, k=4, max_new=11,
                     method_calls={"prefill": prefill, "target_verify": verify, "draft_decode": draft})


@pytest.mark.parametrize("method, delta", [("draft", 1), ("draft", -1), ("verify", 1), ("prefill", -1)])
def test_metrics_gate_one_call_off(method, delta):
    calls = {"prefill": 1, "verify": 2, "draft": 8}
    base = compute_metrics([_calls_run(*calls.values())], 4).to_json()
    assert compare_metrics("key", compute_metrics([_calls_run(*calls.values())], 4), base) == []
    calls[method] += delta
    diffs = compare_metrics("key", compute_metrics([_calls_run(*calls.values())], 4), base)
    side = "draft" if method == "draft" else "target"
    assert {d.metric for d in diffs} == {f"{side}_forwards", f"{side}_per_token"}
    want = "regression" if delta > 0 else "improvement"
    assert {d.direction for d in diffs} == {want}
    fwd = next(d for d in diffs if d.metric == f"{side}_forwards")
    assert fwd.now - fwd.baseline == delta and not math.isclose(
        next(d for d in diffs if d.metric == f"{side}_per_token").now, base[f"{side}_per_token"])
