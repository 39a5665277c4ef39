"""The gate's failing edge-suite cases, shrunk: as `check --suite NAME --shrink` shrinks them.

The cases are the gate's own (its GateInputs' suite), run in the env the gate built (`gate.gate_suite_env`:
its one program, its reference, its tolerance) through the runner the gate holds (its plug-in, a
child-process proxy of one, None for the reference runner, or a runner binary with
`shrink_case=jobs.suites.shrink.shrink_exec_case`). Each failing plain case is run again as `check` runs
a request and shrunk (`jobs.suites.shrink.shrink_case`); a forced case (its draft forced along its own
trajectory, ...) is not, and says why. The budget is the gate's: the caller hands out one share per
case from the generator it shares with the request cases (`shrink.search.budget_shares`). The gate's
verdicts are not touched: a result sits in the edge-suites check's `details["shrunk"][case]`.

Worked example: the gate of the tiny-llama program with the mutant `prompt_stripped` fails
`options/raw-edge-whitespace` ('\\n Count from one to ten. \\n', --raw); it shrinks to one
whitespace character (L 2), max new tokens 1, K 1.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.jobs.gate.gate import gate_suite_env
from eagle3_check.jobs.gate.model import GateReport
from eagle3_check.runners.options import RunOptions
from eagle3_check.shrink.search import ShrinkResult
from eagle3_check.status import FAIL
from eagle3_check.suites.case import Case

EDGE_SUITES = "edge suites"


@dataclass
class SuiteShrink:
    case: Case  # the failing edge-suite case
    options: RunOptions | None  # the run options the case runs with (its repro file's), when shrunk
    result: ShrinkResult | None = None
    note: str = ""  # why it was not shrunk ("not shrunk: ...")

    @property
    def name(self) -> str:
        return self.case.name


def failing_suite_cases(report: GateReport, suite: str | None) -> list[Case]:
    """The edge-suite cases that failed in the gate's report, in the suite's order."""
    chk = report.check(EDGE_SUITES)
    if chk is None or not suite:
        return []
    failed = {c.name for c in chk.cases if c.status == FAIL}
    if not failed:
        return []
    from eagle3_check.suites import suite_cases

    return [c for c in suite_cases(suite) if c.name in failed]


def shrink_gate_suites(report: GateReport, inputs, program, hf, shares: Iterator[float], runner,
                       shrink_case: Callable | None = None, on_probe=None) -> list[SuiteShrink]:
    """Shrinks every failing edge-suite case of `report` (`inputs`: its GateInputs; `hf`: its HF
    reference), one budget share each from `shares`, through `runner` (`shrink_case`: the
    in-process `jobs.suites.shrink.shrink_case` by default)."""
    todo = failing_suite_cases(report, inputs.suite)
    if not todo:
        return []
    if shrink_case is None:
        from eagle3_check.jobs.suites.shrink import shrink_case
    from eagle3_check.jobs.suites.execute import case_setup

    env = gate_suite_env(program, inputs, hf)
    chk = report.check(EDGE_SUITES)
    out = []
    for case, share in zip(todo, shares):
        try:
            result, shrunk, note = shrink_case(case, env, runner, share, on_probe=on_probe)
        except Eagle3CheckError as e:  # this case cannot be re-run as a request here: said, the others go on
            result, shrunk, note = None, None, f"not shrunk: {e}"
        out.append(SuiteShrink(case, case_setup(case, env).options if result else None, result, note))
        if shrunk is not None:
            chk.details.setdefault("shrunk", {})[case.name] = shrunk
    return out
