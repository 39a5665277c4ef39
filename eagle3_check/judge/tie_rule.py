"""The tie rule of a run: its tolerance, tie rank and tie budget, and where they came from, decided in
one place for every job (check, suites, golden, gate, `--quantize`, the pytest plugin).

In order:
1. `--tie-budget X` given: the dtype's (or calibrated) tolerance, the flat share X.
2. A calibration (judge/calibration.py) of the program's target, dtype, device and kernels: its
   measured tolerance and the binomial budget on its measured rate (judge/budget.py).
3. Otherwise the built-in constants: the tolerance of the dtype and the budget of the fixture they
   were measured on (`FIXTURE_BUDGET`), else the dtype's (docs/calibration.md). In float32 the
   constants always apply: no correct runner flipped a token there (budget 0), and a calibrated rate
   of zero flips would still allow some.
The source is named in every report (`describe`).
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.judge.budget import BinomialBudget, allowed
from eagle3_check.judge.tolerance import Tolerance, default_budget, tolerance_for


@dataclass(frozen=True)
class TieRule:
    tolerance: Tolerance
    budget: float | BinomialBudget  # a flat share of judged positions, or the calibrated bound
    source: str  # where the tolerance and budget came from

    def allowed(self, positions: int) -> int:
        return allowed(self.budget, positions)

    def budget_text(self, positions: int) -> str:
        """'57 (7.0% of 818 positions)' or the binomial bound's description."""
        if isinstance(self.budget, BinomialBudget):
            return self.budget.describe(positions)
        return f"{self.allowed(positions)} ({self.budget:.1%} of {positions} positions)"

    def describe(self) -> str:
        return f"tie tolerance {self.tolerance.describe()}; {self.source}"


def tie_rule(dtype: str, fixture: str | None = None, given_budget: float | None = None, calibration=None) -> TieRule:
    """The rule for a run in `dtype` (module docstring); `calibration` a judge.calibration.Calibration."""
    if calibration is not None and dtype != "float32":
        tol = calibration.tolerance()
        if given_budget is not None:
            return TieRule(tol, given_budget, f"tolerance from {calibration.describe_source()}; budget --tie-budget")
        return TieRule(tol, calibration.budget(), f"measured: {calibration.describe_source()}")
    tol = tolerance_for(dtype)
    if given_budget is not None:
        return TieRule(tol, given_budget, "built-in tolerance; budget --tie-budget")
    own = fixture if fixture and default_budget(dtype, fixture) != default_budget(dtype) else None
    where = f"measured on {own}" if own else ("no flip measured in float32" if dtype == "float32" else
                                                "measured on SmolLM2, Gemma 3 and the tiny fixtures")
    return TieRule(tol, default_budget(dtype, fixture), f"built-in constants ({where}: docs/calibration.md)")


SELF_SOURCE = ("none: vs self, the program's own greedy decoding (no margins, so never a tie: identical at every "
               "position or a fail; judge/self_ref.py)")


def self_rule(dtype: str) -> TieRule:
    """The rule of `--reference self`: tolerance 0, budget 0, said so (not the dtype's constants, which a
    report would otherwise print as if they applied)."""
    return TieRule(Tolerance(dtype, 0.0), 0.0, SELF_SOURCE)
