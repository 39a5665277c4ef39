"""The kill run: every mutant, on every data placement, through every probe; a kill table.

The runner loop is one (`runners.loop.ReferenceRunner`); its data placement is a strategy
(`runners/placement.py`). Each mutant edits the loop, so each is run twice: with host lists
("host") and with device buffers ("device"), the latter over graph-owned outputs
(`Context.with_graphs`: emulated CUDA graphs on CPU, real ones on a GPU).

Each probe gets a fresh runner (a fresh mutant module), as each route a user runs starts a new
process: state a mutant keeps across requests is caught by the sequence inside one probe (the
state suite, toy:programs-in-sequence), never by what an earlier probe left behind.

The reference runner goes first on each placement and must pass every probe (a probe that
fails the reference is a broken probe, not a kill). A mutant is killed on a placement when
at least one probe fails it there (a wrong answer, a missing error, or a crash); a survivor
names the case the suites lack (`Mutant.needs`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from eagle3_check.mutants import BY_NAME, MUTANTS, Mutant, factory
from eagle3_check.mutants.engine import StaleMutant, build_runner_class
from eagle3_check.mutants.probes import PROBES, Context, Probe
from eagle3_check.runners.plugin import load_runner
from eagle3_check.table import format_rows

PLACEMENTS = ("host", "device")
REFERENCE = {"host": "reference", "device": "device"}  # plug-in aliases of the reference loop


@dataclass
class Row:
    name: str
    bug: str
    needs: str
    failures: dict[str, dict[str, str]] = field(default_factory=dict)  # placement -> probe -> reason
    probes_run: dict[str, int] = field(default_factory=dict)  # placement -> probes run
    error: str | None = None  # a stale mutant

    def killed_on(self, placement: str) -> bool:
        return bool(self.failures.get(placement))

    @property
    def killed(self) -> bool:
        """Killed on every placement it ran on."""
        return bool(self.probes_run) and all(self.killed_on(p) for p in self.probes_run)

    def to_json(self) -> dict:
        return {"mutant": self.name, "bug": self.bug, "killed": self.killed,
                "placements": {p: {"killed": self.killed_on(p), "killed_by": self.failures.get(p, {}),
                                   "probes_run": n} for p, n in self.probes_run.items()},
                "needs": None if self.killed else self.needs, "error": self.error}


@dataclass
class KillReport:
    reference_failures: dict[str, dict[str, str]]  # placement -> probe -> reason
    rows: list[Row]
    probes: list[str]
    placements: tuple[str, ...] = PLACEMENTS
    complete: bool = True  # every probe ran for every mutant (not stopped at first kills)
    groups_complete: bool = True  # each probe group ran up to its own first kill (not stopped at the first)
    dtype: str = "float32"
    device: str = "cpu"
    graphs: str = "emulate"  # what the device placement ran over

    def rows_on(self, placement: str) -> list[Row]:
        """The mutants that run on `placement` (a stale one counts everywhere, as not killed)."""
        return [r for r in self.rows if r.error or placement in r.probes_run]

    def score_on(self, placement: str) -> float:
        rows = self.rows_on(placement)
        return sum(r.killed_on(placement) for r in rows) / len(rows) if rows else 0.0

    @property
    def score(self) -> float:
        """The fraction of mutants killed on every placement."""
        return sum(r.killed for r in self.rows) / len(self.rows) if self.rows else 0.0

    @property
    def ok(self) -> bool:
        return (not any(self.reference_failures.values())
                and all(r.killed and not r.error for r in self.rows))

    def killed_by_suites_on(self, row: Row, placement: str) -> bool:
        """Killed on `placement` by check or an edge suite (not only by the toy probes)."""
        return any(PROBE_GROUP.get(n, "toy") != "toy" for n in row.failures.get(placement, {}))

    @property
    def suites_ok(self) -> bool:
        """check and the edge suites alone kill every mutant on every placement it runs on (the
        toy probes do not depend on --dtype or --device: in bf16 or on CUDA only these count)."""
        ran = any(PROBE_GROUP.get(p, "toy") != "toy" for p in self.probes)
        return (ran and self.groups_complete and not any(r.error for r in self.rows)
                and all(self.killed_by_suites_on(r, p) for r in self.rows for p in r.probes_run))

    def to_json(self) -> dict:
        return {"ok": self.ok, "suites_ok": self.suites_ok, "score": self.score, "dtype": self.dtype,
                "device": self.device,
                "graphs": self.graphs, "placements": list(self.placements),
                "score_by_placement": {p: self.score_on(p) for p in self.placements},
                "probes": self.probes, "reference_failures": self.reference_failures,
                "mutants": [r.to_json() for r in self.rows]}


def run_probe(probe: Probe, runner, ctx: Context) -> str | None:
    try:
        return probe.fn(runner, ctx)
    except Exception as e:  # a crash of the runner under test is a kill, with its reason
        return f"crashed: {type(e).__name__}: {str(e).splitlines()[0][:120] if str(e) else ''}"


def mutant_runner(m: Mutant, placement: str):
    """The mutant's runner on `placement`; registered host mutants go through the plug-in loader."""
    if BY_NAME.get(m.name) is not m:
        return build_runner_class(m)(placement)
    if placement == "host":
        return load_runner(f"eagle3_check.mutants:{m.name}")
    return factory(m.name, placement)()


def graphs_for(ctx: Context) -> str:
    """The device placement runs over graph-owned outputs: real CUDA graphs on a GPU, else emulated."""
    return "cuda" if str(ctx.device).startswith("cuda") else "emulate"


def kill_run(
    mutants: Iterable[Mutant] = MUTANTS,
    probes: Iterable[Probe] = PROBES,
    first_kill: str | bool = False,
    ctx: Context | None = None,
    on_step: Callable[[str], None] | None = None,
    placements: Iterable[str] = PLACEMENTS,
) -> KillReport:
    """Runs the reference, then each mutant, through the probes, on each placement.

    first_kill: False runs every probe; "group" stops a mutant's probes of one group (toy /
    suites and check) at that group's first kill; True (or "mutant") at its first kill
    (per placement)."""
    ctx = ctx or Context()
    probes = list(probes)
    placements = tuple(placements)
    ctxs = {p: ctx if p == "host" else ctx.with_graphs(graphs_for(ctx)) for p in placements}
    ref_failures: dict[str, dict[str, str]] = {}
    for place in placements:
        reference = load_runner(REFERENCE[place])
        ref_failures[place] = {}
        for p in probes:
            problem = run_probe(p, reference, ctxs[place])
            if problem:
                ref_failures[place][p.name] = problem
    if on_step:
        on_step("reference")
    rows = []
    for m in mutants:
        row = Row(m.name, m.bug, m.needs)
        rows.append(row)
        for place in placements:
            if place not in m.placements:  # a placement's own code: the other never runs it
                continue
            try:
                mutant_runner(m, place)
            except StaleMutant as e:
                row.error = str(e)
                break
            fails = row.failures.setdefault(place, {})
            row.probes_run[place] = 0
            for p in probes:
                if first_kill == "group":
                    if any((PROBE_GROUP.get(n) == "toy") == (p.group == "toy") for n in fails):
                        continue
                elif first_kill and fails:
                    break
                row.probes_run[place] += 1
                # a fresh runner (a fresh mutant module) per probe, as each route starts in a new process:
                # state a runner keeps from one request to the next is caught inside a probe's own sequence
                problem = run_probe(p, mutant_runner(m, place), ctxs[place])
                if problem:
                    fails[p.name] = problem
        if on_step:
            on_step(m.name)
    return KillReport(ref_failures, rows, [p.name for p in probes], placements, complete=not first_kill,
                      groups_complete=first_kill in (False, "group"),
                      dtype=ctx.dtype, device=str(ctx.device), graphs=graphs_for(ctx))


PROBE_GROUP = {p.name: p.group for p in PROBES}


def format_kill_table(report: KillReport) -> str:
    """One row per mutant, one column per placement: its first kill among the edge suites /
    check and its first among the toy probes."""
    groups = PROBE_GROUP
    places = report.placements
    lines = [f"kill table: {report.dtype} on {report.device}; placements: "
             + ", ".join(p if p == "host" else f"{p} (over {'emulated' if report.graphs == 'emulate' else report.graphs} CUDA graphs)" for p in places)]
    for place, fails in report.reference_failures.items():
        if fails:
            lines.append(f"BROKEN PROBES: the reference runner on {place} fails them (fix the probe or the runner):")
            lines += [f"  {name}: {why}" for name, why in fails.items()]
    lines.append("")

    def first(fails: dict[str, str], toy: bool) -> str:
        hits = [n for n in fails if (groups.get(n, "toy") == "toy") == toy]
        return "-" if not hits else hits[0] + (f" (+{len(hits) - 1})" if len(hits) > 1 else "")

    def cell(row: Row, place: str) -> str:
        if place not in row.probes_run:
            return f"n/a ({'/'.join(BY_NAME[row.name].placements)} only)" if row.name in BY_NAME else "not run"
        fails = row.failures.get(place, {})
        if not fails:
            return "SURVIVED"
        return f"killed: {first(fails, False)} | {first(fails, True)}"

    rows = [("mutant", *(p + ": suites/check | toy" for p in places))]
    # a stale mutant's error goes in the first placement's column, the others stay blank
    rows += [(r.name, f"STALE  {r.error}", *[""] * (len(places) - 1)) if r.error
             else (r.name, *(cell(r, p) for p in places)) for r in report.rows]
    lines += format_rows(rows)
    survivors = [r for r in report.rows if not r.error and not r.killed]
    if survivors:
        lines.append("")
        lines.append("SURVIVED (the bug; the case the suites lack):")
        for r in survivors:
            where = ", ".join(p for p in places if p in r.probes_run and not r.killed_on(p))
            lines.append(f"  {r.name} on {where}: bug: {r.bug}; the suites lack: {r.needs}")
    ran_suites = any(groups.get(p) != "toy" for p in report.probes)
    missed = {r.name: ([p for p in places if r.killed_on(p)
                        and all(groups.get(n, "toy") == "toy" for n in r.failures[p])], r.needs)
              for r in report.rows}
    missed = {name: v for name, v in missed.items() if v[0]}
    if missed and ran_suites:
        lines.append("")
        lines.append("killed only by the toy probes (the edge suites and check lack these cases):")
        lines += [f"  {name} ({', '.join(where)}): {needs}" for name, (where, needs) in missed.items()]
    lines.append("")
    label = "kills per probe" if report.complete else "first kills per probe (--all for every probe)"
    for place in places:
        per_probe = {p: sum(p in r.failures.get(place, {}) for r in report.rows) for p in report.probes}
        lines.append(f"{label} ({place}): " + ", ".join(f"{p} {n}" for p, n in per_probe.items()))
    n = len(report.probes)
    for place in places:
        rows = report.rows_on(place)
        killed = sum(r.killed_on(place) for r in rows)
        alone = ""
        if ran_suites and report.groups_complete:
            by_suites = sum(report.killed_by_suites_on(r, place) for r in rows)
            alone = f" ({by_suites}/{len(rows)} by check and the edge suites alone)"
        lines.append(f"{place}: {killed}/{len(rows)} killed ({100 * report.score_on(place):.0f} %){alone}; "
                     f"reference runner passes {n - len(report.reference_failures.get(place, {}))}/{n} probes")
    n_killed = sum(r.killed for r in report.rows)
    lines.append(f"mutation score: {n_killed}/{len(report.rows)} killed ({100 * report.score:.0f} %) "
                 f"on every placement, {n} probes, {report.dtype}")
    return "\n".join(lines)
