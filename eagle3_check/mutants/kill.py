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
    complete: bool = True  # every probe ran for every mutant (not stopped at first kills)

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
    first_kill: str | bool = False,
    ctx: Context | None = None,
    on_step: Callable[[str], None] | None = None,
) -> KillReport:
    """Runs the reference, then each mutant, through the probes.

    first_kill: False runs every probe; "group" stops a mutant's probes of one group (toy /
    suites and check) at that group's first kill; True (or "mutant") at its first kill."""
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
            if first_kill == "group":
                if any((PROBE_GROUP.get(n) == "toy") == (p.group == "toy") for n in row.failures):
                    continue
            elif first_kill and row.killed:
                break
            row.probes_run += 1
            problem = run_probe(p, runner, ctx)
            if problem:
                row.failures[p.name] = problem
        rows.append(row)
        if on_step:
            on_step(m.name)
    return KillReport(ref_failures, rows, [p.name for p in probes], complete=not first_kill)


PROBE_GROUP = {p.name: p.group for p in PROBES}


def format_kill_table(report: KillReport) -> str:
    """One row per mutant: its first kill among the edge suites / check and among the toy probes."""
    groups = PROBE_GROUP
    lines = []
    if report.reference_failures:
        lines.append("BROKEN PROBES: the reference runner fails them (fix the probe or the runner):")
        lines += [f"  {name}: {why}" for name, why in report.reference_failures.items()]
        lines.append("")

    def first(row: Row, toy: bool) -> str:
        hits = [n for n in row.failures if (groups.get(n, "toy") == "toy") == toy]
        return "-" if not hits else hits[0] + (f" (+{len(hits) - 1})" if len(hits) > 1 else "")

    width = max((len(r.name) for r in report.rows), default=6)
    header = (f"{'mutant'.ljust(width)}  {'status':8}  {'suites / check':28}  {'toy probes':28}  first reason")
    lines.append(header)
    for r in report.rows:
        if r.error:
            lines.append(f"{r.name.ljust(width)}  {'STALE':8}  {r.error}")
        elif r.killed:
            name, why = next(iter(r.failures.items()))
            lines.append(f"{r.name.ljust(width)}  {'killed':8}  {first(r, False):28}  {first(r, True):28}  "
                         f"{name}: {why}")
        else:
            lines.append(f"{r.name.ljust(width)}  {'SURVIVED':8}  bug: {r.bug}; the suites lack: {r.needs}")
    missed = [r for r in report.rows if r.killed and all(groups.get(n, "toy") == "toy" for n in r.failures)]
    ran_suites = any(groups.get(p) != "toy" for p in report.probes)
    if missed and ran_suites:
        lines.append("")
        lines.append("killed only by the toy probes (the edge suites and check lack these cases):")
        lines += [f"  {r.name}: {r.needs}" for r in missed]
    n_killed = sum(r.killed for r in report.rows)
    per_probe = {p: sum(p in r.failures for r in report.rows) for p in report.probes}
    lines.append("")
    label = "kills per probe" if report.complete else "first kills per probe (--all for every probe)"
    lines.append(f"{label}: " + ", ".join(f"{p} {n}" for p, n in per_probe.items()))
    lines.append(f"mutation score: {n_killed}/{len(report.rows)} killed ({100 * report.score:.0f} %), "
                 f"{len(report.probes)} probes; reference runner passes "
                 f"{len(report.probes) - len(report.reference_failures)}/{len(report.probes)}")
    return "\n".join(lines)
