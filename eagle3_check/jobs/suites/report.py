"""Running a list of cases and presenting the outcome: the table, JSON, and `--list`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from eagle3_check.jobs.suites.execute import SKIP, SuiteEnv, run_case
from eagle3_check.jobs.suites.judging import CaseResult
from eagle3_check.judge.verdict import FAIL
from eagle3_check.runners.result import PluginRunner
from eagle3_check.status import Status, overall, passes
from eagle3_check.suites.case import Case
from eagle3_check.table import format_rows


@dataclass
class SuiteReport:
    suite: str
    results: list[CaseResult] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    interrupted: str | None = None  # Ctrl-C of the harness stopped it (runners/interrupt.py): what was not run
    shrunk_lines: list[str] = field(default_factory=list)  # --shrink: what to print after the table (not JSON)

    @property
    def failed(self) -> list[CaseResult]:
        return [r for r in self.results if r.status == FAIL]

    @property
    def status(self) -> Status:
        """`status.overall`: the rule the gate applies to the same cases."""
        return overall(r.status for r in self.results)

    @property
    def passed(self) -> bool:
        return passes(self.status) and not self.interrupted  # a skipped case never fails; a suite where none ran does

    @property
    def seconds(self) -> float:
        return sum(r.seconds for r in self.results)

    def to_json(self) -> dict:
        stopped = {"interrupted": self.interrupted} if self.interrupted else {}
        return {**stopped, "suite": self.suite, "passed": self.passed, "status": str(self.status), "info": self.info,
                "counts": {s: sum(r.status == s for r in self.results) for s in Status},
                "seconds": round(self.seconds, 3), "cases": [r.to_json() for r in self.results]}


def run_suite(
    name: str,
    cases: list[Case],
    env: SuiteEnv,
    runner: PluginRunner | None = None,
    on_case: Callable[[CaseResult], None] | None = None,
    run_one: Callable[[Case, SuiteEnv, object], CaseResult] = run_case,
) -> SuiteReport:
    """Every case through `runner` by `run_one` (`execute.run_case`, or a binary's
    `jobs.suites.binary.run_exec_case`), in order; Ctrl-C ends it with what was judged."""
    report = SuiteReport(name)
    try:
        for case in cases:
            result = run_one(case, env, runner)
            report.results.append(result)
            if on_case:
                on_case(result)
    except KeyboardInterrupt:  # Ctrl-C of the harness: the report holds what was judged (runners/interrupt.py)
        from eagle3_check.runners.interrupt import interrupted_line

        report.interrupted = interrupted_line(len(report.results), len(cases), "cases")
    return report


def format_suite_table(report: SuiteReport) -> str:
    rows = [("case", "L", "K", "tokens", "rounds", "accepted", "stop", "time", "result")]
    for r in report.results:
        d = r.details
        acc = d.get("accepted")
        acc_s = "" if acc is None else ",".join(map(str, acc[:8])) + ("..." if len(acc) > 8 else "")
        rows.append((r.name, _s(d.get("L")), _s(d.get("K")), _s(d.get("tokens")), _s(d.get("rounds")),
                     acc_s, _s(d.get("stop")), f"{r.seconds:.2f}s", f"{r.status.upper()}: {r.message}"))
    lines = format_rows(rows)
    counts = report.to_json()["counts"]
    none_ran = " (no case ran)" if report.status == SKIP else ""
    lines.append("")
    if report.interrupted:
        none_ran += f" ({report.interrupted})"
    prof = report.info.get("profile")
    if prof:  # the runner's rules and how they were found (declared / detected / given)
        lines.append(f"runner profile {prof['name']} ({prof['pr']}, {prof['commit']}): {prof['found']}")
    from eagle3_check.runners.protections import protections_line

    lines += [p for p in [protections_line(report.info.get("isolation"))] if p]  # what held the runner in
    from eagle3_check.jobs.common.exact import numerics_line

    lines += numerics_line(report.info)  # --exact: the kernels, the verdict identity
    lines.append(f"suite {report.suite}: {'PASS' if report.passed else 'FAIL'}{none_ran} "
                 f"({counts['pass']} pass, {counts['tie']} tie, {counts['fail']} fail, {counts['skip']} skipped "
                 f"of {len(report.results)} cases, {report.seconds:.1f} s)")
    return "\n".join(lines)


def _s(v) -> str:
    return "" if v is None else str(v)
