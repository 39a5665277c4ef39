"""The counts and tie budget of a judged report: one rule for `check` (CheckReport) and
`check --runner exec:...` (ExecReport).

A report's requests are counted by verdict status, its positions by outcome; ties pass while
the tie positions stay within the budget, a share of all judged positions. The JSON and tables
of both reports read these counts.
"""

from __future__ import annotations

from eagle3_check.status import FAIL, PASS, TIE


class JudgedReport:
    """Mixin of a report with `outcomes` (each with a `verdict`: status, judged, ties, fails) and a
    `tie_budget` (ties allowed, as a share of judged positions)."""

    COUNTS_IDENTICAL_POSITIONS = True  # its verdicts count identical positions (an exec verdict does not)

    def counts(self) -> dict[str, int]:
        """Requests and positions by outcome."""
        vs = [o.verdict for o in self.outcomes]
        c = {"requests": len(vs), "identical": sum(v.status == PASS for v in vs),
             "tie": sum(v.status == TIE for v in vs), "fail": sum(v.status == FAIL for v in vs),
             "positions": sum(v.judged for v in vs)}
        if self.COUNTS_IDENTICAL_POSITIONS:
            c["identical_positions"] = sum(v.identical for v in vs)
        c.update(tie_positions=sum(v.ties for v in vs), fail_positions=sum(v.fails for v in vs))
        return c

    @property
    def ties_allowed(self) -> int:
        """floor(share x positions), the float's rounding forgiven: 0.07 x 100 = 7.000000000000001 -> 7,
        0.29 x 100 = 28.999999999999996 -> 29."""
        return int(self.tie_budget * self.counts()["positions"] + 1e-9)

    @property
    def over_budget(self) -> bool:
        return self.counts()["tie_positions"] > self.ties_allowed

    @property
    def passed(self) -> bool:
        """At least one request, none failing, the ties within the budget."""
        return bool(self.outcomes) and self.counts()["fail"] == 0 and not self.over_budget
