"""The tie budget as a statistical bound: how many ties a correct runner may show on n positions.

A flat share (`TIE_BUDGET`, 7 % in bf16) gives a run of 300 positions as much room per position as
one of 30,000, so it never gains power, and on SmolLM2 an int8-weight copy of the target (ties at
2.2x a correct runner's rate) passed inside it. With a calibration (judge/calibration.py) the
budget is derived from the measured rate of a correct runner instead:

1. `rate_upper(flips, rows)`: an upper confidence bound on that rate (one-sided Clopper-Pearson,
   95 %), so a calibration on few rows gives a wider budget, never a tighter one than it measured.
2. `allowed_ties(n, rate)`: the largest tie count a correct runner reaches on n positions with
   probability >= 1 - ALPHA (the binomial quantile); one more fails the run.

Worked example: a calibration of 820 rows with 20 flips (2.4 %) gives rate_upper 0.0352; on 320
positions a correct runner shows 11.3 ties on average and more than 23 with probability below
0.001, so `allowed_ties(320, 0.0352)` is 23; on 3,200 positions it is 146 (4.6 % of them, against
the 3.5 % rate: the bound tightens towards the rate as positions grow). Power comes from positions
on both sides: a program at twice a correct runner's rate is told apart only once its run and
the calibration hold enough of them (docs/calibration.md, "A statistical budget").

`allowed(budget, n)` applies either form: a float is the flat share of old (the embedded fixtures'
constants, `--tie-budget`), a `BinomialBudget` the bound above.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

ALPHA = 1e-3  # chance that a correct runner exceeds the budget on one run (a false FAIL)
CONFIDENCE = 0.95  # of the calibrated rate's upper bound


def _log_pmf(k: int, n: int, p: float) -> float:
    if p <= 0.0:
        return 0.0 if k == 0 else -math.inf
    if p >= 1.0:
        return 0.0 if k == n else -math.inf
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1) + k * math.log(p) + (n - k) * math.log1p(-p)


def cdf(m: int, n: int, p: float) -> float:
    """P[Binomial(n, p) <= m]."""
    if m < 0:
        return 0.0
    if m >= n:
        return 1.0
    return min(1.0, sum(math.exp(_log_pmf(k, n, p)) for k in range(m + 1)))


def allowed_ties(n: int, rate: float, alpha: float = ALPHA) -> int:
    """The smallest m with P[Binomial(n, rate) > m] <= alpha: the ties a correct runner stays within."""
    if n <= 0 or rate <= 0.0:
        return 0
    total, m = 0.0, 0
    while m < n:
        total += math.exp(_log_pmf(m, n, rate))
        if 1.0 - total <= alpha:
            return m
        m += 1
    return n


def rate_upper(flips: int, rows: int, confidence: float = CONFIDENCE) -> float:
    """The one-sided Clopper-Pearson upper bound of a rate seen as `flips` of `rows`: the largest p
    with P[Binomial(rows, p) <= flips] >= 1 - confidence (bisection, to 1e-7)."""
    if rows <= 0:
        return 1.0
    if flips >= rows:
        return 1.0
    lo, hi = flips / rows, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if cdf(flips, rows, mid) >= 1 - confidence:
            lo = mid
        else:
            hi = mid
    return round(hi, 7)


@dataclass(frozen=True)
class BinomialBudget:
    """A calibrated budget: `rate`, the upper bound of a correct runner's tie rate, and where it came from."""

    rate: float
    source: str  # "calibration <digest>: 20 flips of 820 rows (cpu bfloat16 eager)"

    def allowed(self, n: int) -> int:
        return allowed_ties(n, self.rate)

    def describe(self, n: int) -> str:
        return (f"{self.allowed(n)} of {n} positions (binomial bound, false-fail chance {ALPHA:g}, on a correct "
                f"runner's rate <= {self.rate:.4g}: {self.source})")


def allowed(budget: float | BinomialBudget, n: int) -> int:
    """The ties allowed on n judged positions: a flat share's floor, or the calibrated bound."""
    if isinstance(budget, BinomialBudget):
        return budget.allowed(n)
    return int(budget * n + 1e-9)


def share_text(budget: float | BinomialBudget, n: int, unit: str = " positions") -> str:
    """How the allowed ties were decided, for a report line: '7.0% of 818 positions' or the bound's source."""
    if isinstance(budget, BinomialBudget):
        return (f"binomial bound on {n} positions at a correct runner's rate <= {budget.rate:.4g}, "
                f"false-fail chance {ALPHA:g}: {budget.source}")
    return f"{budget:.1%} of {n}{unit}"


def budget_json(budget: float | BinomialBudget) -> dict:
    """The budget in a JSON report: {"share": x} (flat), or the calibrated rate and its source."""
    if isinstance(budget, BinomialBudget):
        return {"kind": "binomial", "rate": budget.rate, "alpha": ALPHA, "source": budget.source}
    return {"share": budget}


def noise_note(ties: int, allowed_n: int, positions: int, exact: bool = False) -> str | None:
    """What a PASS that used ties can and cannot see (issue 44 item 3: a program that passes within the
    tolerance's noise is told so), else None (no tie, a failing verdict, or exact mode: identity).
    Worked example, the 8B shape in bf16 on the H200 (docs/scale.md): 246 ties of 2048 positions, 334
    allowed -> '... a program whose tokens moved at 88 more positions would pass too ...'; at 334 ties of
    334 allowed -> '... one more tie position would fail it ...'."""
    if exact or ties <= 0 or ties > allowed_n:
        return None
    slack = allowed_n - ties
    seen = (f"a program whose tokens moved at {slack} more positions would pass too" if slack else
            "one more tie position would fail it")
    return (f"passed within the tolerance's noise: {ties} of {positions} positions are ties "
            f"({ties / positions:.1%}), up to {allowed_n} allowed; {seen}. For a verdict without a tolerance: "
            "--exact (docs/exact.md)")
