"""What `eagle3-check gate` takes and gives: its inputs, one check's result, the report, the table.

`summarize` is the one rule that turns a check's cases into its verdict (skips never fail on their own,
nothing ran fails, ties count against the budget); the checks themselves are in `jobs/gate/gate.py`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.drift import DriftThresholds, drift_table
from eagle3_check.jobs.golden.tau_baseline import TAU_TOLERANCE
from eagle3_check.judge.budget import allowed as ties_allowed
from eagle3_check.judge.budget import noise_note, share_text
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.judge.verdict import FAIL, TIE
from eagle3_check.program.contract import SpeculatorProgram
from eagle3_check.report.junit import JUnitCase, JUnitSuite
from eagle3_check.runners.crash import crash_reason
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import PASS, SKIP, Status, overall, passes, skip_note
from eagle3_check.table import format_rows
from eagle3_check.tokenizer import Tokenizer


@dataclass
class GateInputs:
    pte: Path | None
    tokenizer: Tokenizer
    target_dir: Path | None  # the HF reference target (None: HF checks skipped)
    prompts: list[Prompt]
    options: RunOptions = field(default_factory=RunOptions)
    tolerance: Tolerance | None = None  # None: the program's dtype's (`program_dtype`)
    tie_budget: float | None = None  # ties allowed per check, a share of judged positions; None: the dtype's
    ks: list[int] | None = None  # chain lengths to run; None = the program's default K
    suite: str | None = "edge"  # edge-suite name (or case) to run; None = skip the suites
    golden: Path | None = None
    fixture: str | None = None  # the fixture the program was exported from: other goldens skip
    baseline: Path | None = None
    tau_tolerance: float = TAU_TOLERANCE
    hf_reference: object | None = None  # an HFReference to reuse (tests); built from target_dir otherwise
    runner: object | None = None  # a jobs.gate.binary.BinaryGate: a runner binary is gated instead (its checks)
    on_step: Callable[[str, int, int], None] | None = None  # progress: (check, done, total) as cases finish
    plugin: object | None = None  # a plug-in runner (`run()` returning a RunResult) instead of the reference runner
    drift: DriftThresholds = field(default_factory=DriftThresholds)  # quantized programs only
    # The full-precision twin of a quantized program, built from its metadata (same shape);
    # None: tau drift is not measured, and the drift check says why.
    full_precision: Callable[[dict], SpeculatorProgram] | None = None
    full_precision_note: str = "no full-precision program given (gate from a fixture, or a sidecar naming the draft)"
    data_path: Path | None = None  # the .pte's external data file (.ptd), when it has one
    # program -> its target's Calibration, or None where the constants apply (jobs/common/calibrate.py:
    # a reduced-precision .pte of a target they were not measured on); None: never calibrate
    calibrate: Callable[[SpeculatorProgram], object] | None = None


@dataclass
class GateCheck:
    name: str
    status: str  # pass | fail | skip
    message: str
    seconds: float = 0.0
    cases: list[JUnitCase] = field(default_factory=list)
    details: dict = field(default_factory=dict)

    def to_json(self) -> dict:
        return {"name": self.name, "status": self.status, "message": self.message,
                "seconds": round(self.seconds, 3), "details": self.details,
                "counts": {s: sum(c.status == s for c in self.cases) for s in Status},
                "cases": [{"name": c.name, "status": c.status, "message": c.message, "seconds": round(c.seconds, 3)}
                          for c in self.cases]}


@dataclass
class GateReport:
    checks: list[GateCheck] = field(default_factory=list)
    info: dict = field(default_factory=dict)
    tau: float | None = None
    shrunk_lines: list[str] = field(default_factory=list)  # --shrink: what to print after the table (not JSON)

    @property
    def passed(self) -> bool:
        return bool(self.checks) and all(c.status != FAIL for c in self.checks)

    def check(self, name: str) -> GateCheck | None:
        return next((c for c in self.checks if c.name == name), None)

    def to_json(self) -> dict:
        return {"passed": self.passed, "tau": self.tau, "info": self.info,
                "checks": [c.to_json() for c in self.checks]}

    def junit_suites(self) -> list[JUnitSuite]:
        out = []
        for c in self.checks:
            cases = c.cases or [JUnitCase(c.name, c.status, c.message, c.seconds)]
            if c.status == FAIL and not any(x.status == FAIL for x in cases):
                # nothing ran, or the ties exceeded the budget: the check's own failure, so the
                # JUnit failure count agrees with the verdict
                cases = [*cases, JUnitCase(c.name, FAIL, c.message)]  # no time of its own
            out.append(JUnitSuite(c.name, cases))
        return out


def timed(name: str, fn: Callable[[], GateCheck]) -> GateCheck:
    t0 = time.perf_counter()
    try:
        chk = fn()
    except Eagle3CheckError as e:
        chk = GateCheck(name, FAIL, str(e))
    except Exception as e:  # noqa: BLE001 - a program or runner crashing inside a check fails that check
        chk = GateCheck(name, FAIL, crash_reason(e))
    chk.seconds = time.perf_counter() - t0
    return chk


def suite_junit_cases(results) -> list[JUnitCase]:
    """Edge-suite results as the gate's cases, each with its judged and tie positions when the case
    judged tokens (details `identical` and `ties`), so the tie budget is a share of judged positions
    as for requests (DESIGN §3); a case without them (an error case, a skip) counts as one.
    Example: a tie case of 24 tokens, 1 of them a tie -> positions 24, tie_positions 1."""
    out = []
    for r in results:
        d = r.details or {}
        props = {} if "ties" not in d or "identical" not in d else {
            "positions": str(max(int(d["identical"]) + int(d["ties"]) + int(d.get("fails", 0)), 1)),
            "tie_positions": str(int(d["ties"]))}
        out.append(JUnitCase(r.name, r.status, r.message, r.seconds, properties=props))
    return out


def skip_check(name: str, why: str) -> GateCheck:
    return GateCheck(name, SKIP, why)


def summarize(name: str, cases: list[JUnitCase], what: str, ok: str = "identical",
             tie_budget: float = 0.0) -> GateCheck:
    """Counts "N identical, M tie, F fail" over the cases that ran; skipped cases are counted and
    named, never dropped. The skip rule is `status.overall` / `status.passes`, the one `check
    --suite` applies: a skipped case never fails on its own, a check whose cases all skipped fails
    (it was asked to test something and tested nothing). Fails on any failure, or on more tie
    positions than `tie_budget` x judged positions (cases without position counts count as one
    position each)."""
    ran = [c for c in cases if c.status != SKIP]
    skips = [c for c in cases if c.status == SKIP]
    fails = [c for c in ran if c.status == FAIL]
    ties = [c for c in ran if c.status == TIE]
    note = skip_note((c.name, c.message) for c in skips)
    details = {"identical": len(ran) - len(fails) - len(ties), "tie": len(ties), "fail": len(fails),
               "skip": len(skips)}
    if not passes(overall(c.status for c in cases)) and not fails:  # nothing ran
        return GateCheck(name, FAIL, f"no cases ran{note}", cases=cases, details=details)
    counts = f"{len(ran) - len(fails) - len(ties)} {ok}, {len(ties)} tie, {len(fails)} fail"
    if fails:
        return GateCheck(name, FAIL, f"{counts} of {len(ran)} {what}{note}; first failure: {fails[0].name}: "
                         f"{fails[0].message}", cases=cases, details=details)
    positions = sum(int(c.properties.get("positions", 1)) for c in ran)
    tie_pos = sum(int(c.properties.get("tie_positions", c.status == TIE)) for c in ran)
    allowed = ties_allowed(tie_budget, positions)
    details.update(tie_positions=tie_pos, positions=positions, ties_allowed=allowed)
    if tie_pos > allowed:
        return GateCheck(name, FAIL, f"{counts} of {len(ran)} {what}{note}: {tie_pos} tie positions exceed "
                         f"the tie budget of {allowed} ({share_text(tie_budget, positions, unit='')}); first tie: {ties[0].name}: "
                         f"{ties[0].message}", cases=cases, details=details)
    if not ties:
        return GateCheck(name, PASS, f"{len(ran)}/{len(ran)} {what} {ok}{note}", cases=cases, details=details)
    details["note"] = noise_note(tie_pos, allowed, positions)  # what a pass on ties cannot see (the JSON report)
    return GateCheck(name, PASS, f"{counts} of {len(ran)} {what} ({tie_pos} tie positions, budget {allowed})"
                     f"{note}", cases=cases, details=details)


DRIFT = "quantization drift"


def format_table(report: GateReport, verdict: str = "GATE", about: str | None = None) -> str:
    """The checks' table, the drift table when a quantized program was judged, then the verdict line
    (`verdict`: GATE, or `check --quantize`'s label; `about`: what was judged, default the .pte)."""
    rows = [("check", "status", "time", "message")]
    for c in report.checks:
        rows.append((c.name, c.status.upper(), f"{c.seconds:.1f}s", c.message))
    lines = format_rows(rows)
    drift = report.check(DRIFT)
    if drift is not None and "drift" in drift.details:
        d = drift.details["drift"]
        lines += ["", f"quantization drift ({d['quantization']}; self reference vs HF full precision, teacher-forced):"]
        lines += drift_table(d)
    tau = f"   tau = {report.tau:.2f}" if report.tau is not None else ""
    if "run_options" in report.info:  # where the chat template, BOS, EOS and stops came from (runners/defaults.py)
        lines += ["", report.info["run_options"]["summary"]]
    from eagle3_check.runners.protections import protections_line

    lines += [p for p in [protections_line(report.info.get("isolation"))] if p]  # what held the runner in
    about = (report.info.get("pte") or report.info.get("aoti")) if about is None else about  # the program file
    lines += ["", f"{verdict}: {'PASS' if report.passed else 'FAIL'}{tau}   ({about})"]
    return "\n".join(lines)
