"""Verdicts: a wrong runner is caught with first-divergence forensics; ties need a small margin."""

import dataclasses

import pytest

from eagle3_check.hf_reference import ReferenceResult
from eagle3_check.runner import RunResult
from eagle3_check.verdict import FAIL, PASS, TIE, compare

REF = ReferenceResult(tokens=[210, 211, 212, 213, 214, 215], margins=[2.0, 1.5, 0.00001, 3.0, 1.0, 1.0],
                      runner_up=[9, 9, 9, 9, 9, 9])


def result(tokens, accepted):
    return RunResult(prompt_ids=list(range(10)), tokens=tokens, text="", rounds=len(accepted),
                     accepted=accepted, tau=0.0, stop_reason="max_new", k=2, max_new=6)


def judge(run, max_new=6):
    return compare(run, REF, frozenset(), max_new, 64, tolerance=1e-4)


def test_identical_run_passes():
    v = judge(result([210, 211, 212, 213, 214, 215], [2, 2]))
    assert v.status == PASS and v.expected_len == 6


def test_divergence_reports_index_both_tokens_and_margin():
    v = judge(result([210, 211, 212, 999, 214, 215], [2, 2]))
    assert (v.status, v.index, v.got, v.want, v.margin) == (FAIL, 3, 999, 213, 3.0)
    assert "diverged at token 3: runner 999, reference 213" in v.message


def test_divergence_below_tolerance_is_a_tie():
    v = judge(result([210, 211, 777], [1]))
    assert (v.status, v.index, v.margin) == (TIE, 2, 0.00001)


@pytest.mark.parametrize(
    "tokens, accepted, why",
    [
        pytest.param([210, 211, 212, 213], [2], "stopped early", id="too-short"),
        pytest.param([210, 211, 212, 213, 214], [2, 1], "rules fix 6", id="short-of-max-new"),
        pytest.param([210, 211, 212, 213, 214, 215], [2], "emitted 6 tokens, rules fix 4", id="more-tokens-than-rounds-allow"),
    ],
)
def test_wrong_length_fails(tokens, accepted, why):
    v = judge(result(tokens, accepted))
    assert v.status == FAIL and why in v.message


def test_emitting_past_max_new_fails():
    run = dataclasses.replace(result([210, 211, 212, 213, 214, 215], [2, 2]))
    v = judge(run, max_new=5)
    assert v.status == FAIL and "rules fix 5" in v.message
