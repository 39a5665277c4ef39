"""The gate's section of the Config: `gate`'s own flags (the suite it runs is the suites' section,
its drift thresholds `DriftOptions`)."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.errors import OptionError
from eagle3_check.jobs.common.section import Section


@dataclass(frozen=True)
class GateOptions(Section):
    COMMANDS = ("gate",)
    all_k: bool = False  # every K of the program's verify range, not only its default
    golden: str | None = None  # --golden FILE|DIR: the goldens the gate verifies
    baseline: str | None = None  # --baseline FILE: the metrics baseline
    tau_tolerance: float | None = None
    report: str | None = None  # --report FILE: the gate's report

    def check_values(self) -> None:
        """The values that need no other option, checked where the Config is built (jobs/common/validate.py)."""
        tau = self.tau_tolerance
        if tau is not None and not tau >= 0:
            raise OptionError(f"--tau-tolerance {tau:g}", "a tau drop >= 0", "pass e.g. --tau-tolerance 0.05")
