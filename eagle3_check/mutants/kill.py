"""The kill run: every mutant (loaded as a plug-in runner) through every probe; a kill table.

The reference runner goes first and must pass every probe (a probe that fails the
reference is a broken probe, not a kill). A mutant is killed when at least one probe
fails it (a wrong answer, a missing error, or a crash); a survivor names the case the
suites lack (`Mutant.needs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eagle3_check.mutants import BY_NAME, MUTANTS, Mutant
from eagle3_check.mutants.engine import StaleMutant, build_runner_class
from eagle3_check.mutants.probes import PROBES, Context, Probe
from eagle3_check.plugin import load_runner


@dataclass
class Row:
    name: str
    bug: str
    needs: str
    failures: dict[str, str] = field(default_factory=dict)  # probe name -> reason
    probes_run: int = 0
    error: str | None = None  # a stale mutant

    @property
    def killed(self) -> bool:
        return bool(self.failures)

    def to_json(self) -> dict:
        return {"mutant": self.name, "bug": self.bug, "killed": self.killed, "killed_by": self.failures,
                "probes_run": self.probes_run, "needs": None if self.killed else self.needs,
                "error": self.error}


@dataclass
class KillReport:
    reference_failures: dict[str, str]
    rows: list[Row]
    probes: list[str]

    @property
    def score(self) -> float:
        return sum(r.killed for r in self.rows) / len(self.rows) if self.rows else 0.0

    @property
    def ok(self) -> bool:
        return not self.reference_failures and all(r.killed and not r.error for r in self.rows)

    def to_json(self) -> dict:
        return {"ok": self.ok, "score": self.score, "probes": self.probes,
                "reference_failures": self.reference_failures, "mutants": [r.to_json() for r in self.rows]}


def run_probe(probe: Probe, runner, ctx: Context) -> str | None:
    try:
        return probe.fn(runner, ctx)
    except Exception as e:  # a crash of the runner under test is a kill, with its reason
        return f"crashed: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"


def kill_run(
    mutants: Iterable[Mutant] = MUTANTS,
    probes: Iterable[Probe] = PROBES,
    first_kill: bool = False,
    ctx: Context | None = None,
    on_step: Callable[[str], None] | None = None,
) -> KillReport:
    """Runs the reference, then each mutant, through the probes (all, or until the first kill)."""
    ctx = ctx or Context()
    probes = list(probes)
    reference = load_runner("reference")
    ref_failures = {}
    for p in probes:
        problem = run_probe(p, reference, ctx)
        if problem:
            ref_failures[p.name] = problem
    if on_step:
        on_step("reference")
    rows = []
    for m in mutants:
        row = Row(m.name, m.bug, m.needs)
        try:
            registered = BY_NAME.get(m.name) is m  # registered mutants go through the plug-in loader
            runner = load_runner(f"eagle3_check.mutants:{m.name}") if registered else build_runner_class(m)()
        except StaleMutant as e:
            row.error = str(e)
            rows.append(row)
            continue
        for p in probes:
            if first_kill and row.killed:
                break
            row.probes_run += 1
            problem = run_probe(p, runner, ctx)
            if problem:
                row.failures[p.name] = problem
        rows.append(row)
        if on_step:
            on_step(m.name)
    return KillReport(ref_failures, rows, [p.name for p in probes])


def format_kill_table(report: KillReport) -> str:
    lines = []
    if report.reference_failures:
        lines.append("BROKEN PROBES: the reference runner fails them (fix the probe or the runner):")
        lines += [f"  {name}: {why}" for name, why in report.reference_failures.items()]
        lines.append("")
    width = max((len(r.name) for r in report.rows), default=6)
    lines.append(f"{'mutant'.ljust(width)}  {'status':8}  killed by (first reason)")
    for r in report.rows:
        if r.error:
            lines.append(f"{r.name.ljust(width)}  {'STALE':8}  {r.error}")
        elif r.killed:
            first, why = next(iter(r.failures.items()))
            more = f" (+{len(r.failures) - 1} more)" if len(r.failures) > 1 else ""
            lines.append(f"{r.name.ljust(width)}  {'killed':8}  {first}{more}: {why}")
        else:
            lines.append(f"{r.name.ljust(width)}  {'SURVIVED':8}  bug: {r.bug}; the suites lack: {r.needs}")
    n_killed = sum(r.killed for r in report.rows)
    per_probe = {p: sum(p in r.failures for r in report.rows) for p in report.probes}
    lines.append("")
    lines.append("kills per probe: " + ", ".join(f"{p} {n}" for p, n in per_probe.items()))
    lines.append(f"mutation score: {n_killed}/{len(report.rows)} killed ({100 * report.score:.0f} %), "
                 f"{len(report.probes)} probes; reference runner passes "
                 f"{len(report.probes) - len(report.reference_failures)}/{len(report.probes)}")
    return "\n".join(lines)
