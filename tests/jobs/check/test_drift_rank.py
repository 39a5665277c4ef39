"""Drift by rank (jobs/check/drift.py): the far-divergence statistic on hand-made HF rows.

Worked example (pinned below): the program emits [5, 7, 9, 3]; HF's rows, teacher-forced over
them, have argmax [5, 8, 9, 4] and rank the program's tokens [1, 2, 1, 250] with logits 0.5 and
12 below HF's top at the two divergences. So 4 positions, agreement 2/4, divergences at tokens 1
(rank 2, gap 0.5) and 3 (rank 250, gap 12); with --far-rank 200 one divergence is far, the far
share is 1/4 = 0.25 > --max-far-share 0.02; the mean gap is (0.5 + 12) / 4 = 3.125 > --max-mean-gap
0.6: FAIL on those two (agreement 0.5 >= 0.43). The histogram: 2: 1, >100: 1, every other bucket 0."""

from __future__ import annotations

import pytest

from eagle3_check.jobs.check.drift import (
    DEFAULT_FAR_RANK,
    DEFAULT_MAX_FAR_SHARE,
    DEFAULT_MAX_MEAN_GAP,
    DriftReport,
    DriftThresholds,
    drift_table,
    prompt_drift,
)
from eagle3_check.judge.hf import Scores
from eagle3_check.status import FAIL, PASS


def rows(argmax: list[int], ranks: list[int], gaps: list[float]) -> Scores:
    """HF rows with top-1 logit 20 everywhere (one row past the end), the runner-up 1 below, and
    the program's token `gap` below the top at its `rank`."""
    n = len(ranks)
    return Scores(argmax=argmax + [0], top1=[20.0] * (n + 1), top2=[19.0] * (n + 1), runner_up=[1] * (n + 1),
                  given_logit=[20.0 - g for g in gaps], given_rank=ranks)


def example(**thresholds) -> DriftReport:
    p = prompt_drift("p", [5, 7, 9, 3], rows([5, 8, 9, 4], [1, 2, 1, 250], [0.0, 0.5, 0.0, 12.0]))
    return DriftReport("int4-weight g32", [p], None, None, DriftThresholds(**{"far_rank": 200, "max_far_share": 0.02,
                                                                             **thresholds}), fp_note="not run")


def test_worked_example_is_pinned():
    rep = example().judge()
    p = rep.prompts[0]
    assert (p.positions, p.agree, p.first, p.rank, p.worst_rank) == (4, 2, 1, 2, 250)
    assert p.ranks == [2, 250] and p.gaps == [0.5, 12.0]
    assert (rep.far, rep.far_share) == (1, 0.25)
    assert rep.rank_histogram() == {"1": 0, "2": 1, "3-5": 0, "6-20": 0, "21-100": 0, ">100": 1}
    assert rep.mean_gap == 3.125
    assert rep.status == FAIL and rep.reasons == [
        "far divergences 0.250 > --max-far-share 0.02 (1 of 4 positions emit a token ranked past --far-rank 200 "
        "under HF; worst: prompt p, rank 250, 12.00 logits below HF's top)",
        "mean gap 3.125 > --max-mean-gap 0.6 (the program's tokens are on average 3.125 logits below HF's top "
        "over 4 positions)"]


@pytest.mark.parametrize("thresholds, status", [
    pytest.param({"far_rank": 250}, PASS, id="rank-250-is-not-past-250"),
    pytest.param({"max_far_share": 0.25}, PASS, id="share-equal-to-the-bound-passes"),
    pytest.param({"far_rank": 1, "max_far_share": 0.49}, FAIL, id="rank-1-makes-both-far"),
    pytest.param({"far_rank": 1, "max_far_share": 0.5}, PASS, id="both-far-at-the-bound"),
    pytest.param({"far_rank": 250, "max_mean_gap": 3.124}, FAIL, id="mean-gap-past-the-bound"),
])
def test_the_bounds_are_exclusive(thresholds, status):
    rep = example(**{"max_mean_gap": 3.125, **thresholds}).judge()
    assert rep.status == status, rep.reasons


def test_defaults_are_the_measured_ones():
    """docs/quantization.md derives them; a change must change that table too."""
    assert (DEFAULT_FAR_RANK, DEFAULT_MAX_FAR_SHARE, DEFAULT_MAX_MEAN_GAP) == (200, 0.02, 0.6)


def test_the_report_shows_the_rank_histogram_and_far_counts():
    rep = example().judge()
    d = rep.to_json()
    assert (d["divergences"], d["far"], d["far_share"]) == (2, 1, 0.25)
    lines = drift_table(d)
    assert lines[0].split() == ["prompt", "positions", "agreement", "first", "div", "program", "HF", "HF", "margin",
                                "rank", "worst", "rank", "far", "(>200)", "worst", "gap"]
    assert lines[1].split() == ["p", "4", "0.500", "1", "7", "8", "1", "2", "250", "1", "12"]
    assert lines[2] == "ranks under HF at the 2 divergences: 1: 0, 2: 1, 3-5: 0, 6-20: 0, 21-100: 0, >100: 1"
    assert "far divergences 1/4 = 0.250 (max 0.02); mean gap 3.125 (max 0.6)" in lines[3]
    assert lines[3].endswith("; ".join(rep.reasons))
    case = rep.junit_cases()[0]
    assert case.status == FAIL and case.properties["far_divergences"] == "1" and case.properties["worst_gap"] == "12"


def test_no_divergence_means_no_far_share():
    p = prompt_drift("q", [5, 8], rows([5, 8], [1, 1], [0.0, 0.0]))
    rep = DriftReport("int8-weight per-channel", [p], None, None, DriftThresholds()).judge()
    assert (rep.far, rep.far_share, rep.status, p.worst_rank) == (0, 0.0, PASS, None)
    assert sum(rep.rank_histogram().values()) == 0
