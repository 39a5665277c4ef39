"""The binomial tie budget (judge/budget.py): the worked example, and the bound's behaviour."""

from __future__ import annotations

import math

import pytest

from eagle3_check.judge.budget import (
    BinomialBudget,
    allowed,
    allowed_ties,
    cdf,
    rate_upper,
)


def test_the_worked_example():
    u = rate_upper(20, 820)
    assert u == pytest.approx(0.0352, abs=5e-5)
    assert (allowed_ties(320, u), allowed_ties(3200, u)) == (23, 146)


def test_the_bound_is_the_binomial_quantile():
    n, p = 400, 0.03
    m = allowed_ties(n, p)
    assert 1 - cdf(m, n, p) <= 1e-3 < 1 - cdf(m - 1, n, p)


def test_rate_upper_is_clopper_pearson():
    # zero of 300: the rule-of-three neighbourhood (-ln 0.05 / 300 = 0.00999)
    assert rate_upper(0, 300) == pytest.approx(-math.log(0.05) / 300, rel=0.01)
    assert rate_upper(5, 5) == 1.0 and rate_upper(0, 0) == 1.0
    assert rate_upper(10, 1000) > 0.01 > rate_upper(10, 100000)


def test_share_tightens_with_positions():
    u = rate_upper(20, 820)
    shares = [allowed_ties(n, u) / n for n in (100, 1000, 10000)]
    assert shares[0] > shares[1] > shares[2] > u


def test_a_flat_share_keeps_its_floor():
    assert allowed(0.07, 818) == 57 and allowed(0.0, 818) == 0
    b = BinomialBudget(0.0352, "test")
    assert allowed(b, 320) == 23 and "23 of 320 positions" in b.describe(320)


def test_no_rate_allows_no_tie():
    assert allowed_ties(500, 0.0) == 0 and allowed_ties(0, 0.5) == 0
