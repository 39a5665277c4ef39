"""`eagle3-check gate`: everything a new export must pass before it ships, in one verdict.

Checks, in order (a check that cannot run is skipped with the reason, never silently):
1. load      - the `.pte` loads through executorch.runtime and has the three methods;
2. metadata  - required keys, consistent ranges, vocab sizes vs tokenizer and target
               (`metadata_check.validate_metadata`);
3. edge suites - the case registry of issue 4 (`eagle3_check.suites`) on this program;
               skipped while that package is absent;
4. runner vs self reference - bit-identical tokens (the lossless check, quantized or not);
5. runner vs HF reference   - bit-identical, with top-1/top-2 margin forensics;
6. self reference vs HF reference - the program's target equals the HF target;
   for a quantized program (`get_quantization`) 5 is not a pass/fail check (skipped, saying
   so) and 6 is "quantization drift" (`gating/drift.py`): agreement, first divergence, rank under
   HF and tau against the full-precision program, failing only past --min-agreement /
   --max-tau-drop; the edge suites judge against the self reference;
7. golden    - `--golden FILE|DIR`, re-run and compared exactly (`gating.gate_goldens`);
8. baseline  - `--baseline FILE`: a metrics baseline (`bench/baselines/metrics.json`) is
               compared exactly with the golden runs (`metrics.compare_metrics`, needs
               --golden); any other JSON with a 'tau': tau must not drop more than
               `tau_tolerance` below it.

The report is JSON-serialisable and converts to JUnit suites (`gating/junit.py`).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.gating.drift import DriftReport, DriftThresholds, drift_table
from eagle3_check.gating.gate_requests import run_requests, runner_tau
from eagle3_check.gating.junit import JUnitCase, JUnitSuite
from eagle3_check.gating.tau_baseline import TAU_TOLERANCE, compare_tau
from eagle3_check.program.contract import SpeculatorProgram, read_metadata
from eagle3_check.program.metadata_check import target_facts, validate_metadata
from eagle3_check.program.quantize import program_quantization
from eagle3_check.reference.tolerance import Tolerance, default_budget, tolerance_for
from eagle3_check.reference.verdict import FAIL, TIE
from eagle3_check.run.crash import crash_reason
from eagle3_check.run.options import RunOptions
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
    runner: object | None = None  # an exec_runner.ExecRunner: a runner binary is gated instead (gating/exec_gate.py)
    on_step: Callable[[str, int, int], None] | None = None  # progress: (check, done, total) as cases finish
    plugin: object | None = None  # a plug-in runner (`run()` returning a RunResult) instead of the reference runner
    drift: DriftThresholds = field(default_factory=DriftThresholds)  # quantized programs only
    # The full-precision twin of a quantized program, built from its metadata (same shape);
    # None: tau drift is not measured, and the drift check says why.
    full_precision: Callable[[dict], SpeculatorProgram] | None = None
    full_precision_note: str = "no full-precision program given (gate from a fixture, or a sidecar naming the draft)"
    data_path: Path | None = None  # the .pte's external data file (.ptd), when it has one


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
                cases = [*cases, JUnitCase(c.name, FAIL, c.message, 0.0)]
            out.append(JUnitSuite(c.name, cases))
        return out


def _timed(name: str, fn: Callable[[], GateCheck]) -> GateCheck:
    t0 = time.perf_counter()
    try:
        chk = fn()
    except Eagle3CheckError as e:
        chk = GateCheck(name, FAIL, str(e))
    except Exception as e:  # noqa: BLE001 - a program or runner crashing inside a check fails that check
        chk = GateCheck(name, FAIL, crash_reason(e))
    chk.seconds = time.perf_counter() - t0
    return chk


def _skip(name: str, why: str) -> GateCheck:
    return GateCheck(name, SKIP, why)


def _summary(name: str, cases: list[JUnitCase], what: str, ok: str = "identical",
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
    allowed = int(tie_budget * positions + 1e-9)
    details.update(tie_positions=tie_pos, positions=positions, ties_allowed=allowed)
    if tie_pos > allowed:
        return GateCheck(name, FAIL, f"{counts} of {len(ran)} {what}{note}: {tie_pos} tie positions exceed "
                         f"the tie budget of {allowed} ({tie_budget:.1%} of {positions}); first tie: {ties[0].name}: "
                         f"{ties[0].message}", cases=cases, details=details)
    if not ties:
        return GateCheck(name, PASS, f"{len(ran)}/{len(ran)} {what} {ok}{note}", cases=cases, details=details)
    return GateCheck(name, PASS, f"{counts} of {len(ran)} {what} ({tie_pos} tie positions, budget {allowed})"
                     f"{note}", cases=cases, details=details)


def _run_requests(program: SpeculatorProgram, inputs: GateInputs, hf) -> tuple[list[GateCheck], float | None]:
    """Runner vs self reference, runner vs HF reference, self vs HF, over prompts x K."""
    _dtype_defaults(inputs, program)
    md = read_metadata(program.metadata())
    ks = inputs.ks or [inputs.options.chain_len or md.chain_len]
    step = inputs.on_step
    rc = run_requests(program, inputs.tokenizer, inputs.prompts, inputs.options, ks, inputs.tolerance, hf,
                      on_request=(lambda d, t: step("requests", d, t)) if step else None,
                      runner=inputs.plugin)
    checks = [_summary("runner vs self reference", rc.vs_self, "requests", tie_budget=inputs.tie_budget)]
    quant = program_quantization(program.metadata())
    if hf is None:
        checks += [_skip("runner vs HF reference", "no reference target given (--target or --fixture)"),
                   _skip(DRIFT if quant else "self reference vs HF reference", "no reference target given")]
    elif quant is not None:
        checks += [_skip("runner vs HF reference", f"quantized program ({quant.short()}): the runner is judged "
                         "against the self reference; its target's distance from HF is the drift check"),
                   drift_check(program, inputs, quant.short(), rc, ks)]
    else:
        checks += [_summary("runner vs HF reference", rc.vs_hf, "requests", tie_budget=inputs.tie_budget),
                   _summary("self reference vs HF reference", rc.self_vs_hf, "prompts", tie_budget=inputs.tie_budget)]
    checks[0].details.update(k=ks, tau=rc.tau, requests=rc.runs, reference=rc.ref_self, runs=rc.summaries)
    if hf is not None:  # per request: the reference's tokens and margins the verdict read
        checks[1].details["reference"] = rc.ref_hf
    return checks, rc.tau


DRIFT = "quantization drift"


def drift_check(program, inputs: GateInputs, quantization: str, rc, ks: list[int]) -> GateCheck:
    """Self reference vs HF full precision for a quantized program (`gating/drift.py`): one JUnit
    case per prompt (its agreement and first divergence), failing only past the thresholds."""
    fp_tau, note = None, inputs.full_precision_note
    fp = inputs.full_precision(program.metadata()) if inputs.full_precision is not None else None
    if fp is not None:
        fp_tau = runner_tau(fp, inputs.tokenizer, inputs.prompts, inputs.options, ks)
    rep = DriftReport(quantization, rc.drift, rc.tau, fp_tau, inputs.drift, fp_note="" if fp is not None else note)
    rep.judge()
    return GateCheck(DRIFT, rep.status, rep.message(), cases=rep.junit_cases(), details={"drift": rep.to_json()})


def edge_suites_check(program, inputs: GateInputs, hf) -> GateCheck:
    """The edge-suite registry (issue 4) on this one program: `SuiteEnv.fixed` ignores spec
    wishes, so cases needing another export shape skip. Skipped while the registry is absent."""
    _dtype_defaults(inputs, program)
    if not inputs.suite:
        return _skip("edge suites", "disabled (--suite none)")
    try:
        from eagle3_check.suites import suite_cases
        from eagle3_check.suites.execute import SuiteEnv
        from eagle3_check.suites.report import run_suite
    except ImportError:
        return _skip("edge suites", "edge-suite registry (eagle3_check.suites) not installed")
    if hf is None:
        return _skip("edge suites", "no reference target given (--target or --fixture)")
    from eagle3_check.suites.execute import SELF

    # A quantized program is judged against its own greedy decoding (DESIGN §3), not HF's.
    ref = SELF if program_quantization(program.metadata()) is not None else hf
    env = SuiteEnv.fixed(program, inputs.tokenizer, ref, [p.text for p in inputs.prompts], inputs.tolerance,
                         fixture=inputs.fixture)
    todo = suite_cases(inputs.suite)
    done = []

    def on_case(result) -> None:
        done.append(result)
        if inputs.on_step:
            inputs.on_step("edge suites", len(done), len(todo))

    rep = run_suite(inputs.suite, todo, env, inputs.plugin, on_case=on_case)
    cases = [JUnitCase(r.name, r.status, r.message, r.seconds) for r in rep.results]
    return _summary("edge suites", cases, "cases", "passed", inputs.tie_budget)


def golden_check(program, inputs: GateInputs, keep: dict | None = None) -> GateCheck:
    """`--golden FILE|DIR` through `gating.gate_goldens` (issue 7) on this program: re-run each
    golden's prompts with its recorded options, compare exactly; one case per prompt.
    The gating outcome (runs and, for a metrics baseline, metric diffs) goes into `keep`."""
    if inputs.golden is None:
        return _skip("golden", "no --golden given")
    try:
        from eagle3_check.gating.golden_check import gate_goldens
    except ImportError:
        return GateCheck("golden", FAIL, f"--golden {inputs.golden} given but eagle3_check.gating.golden_check is not "
                         "installed; expected it. Fix: drop --golden or update eagle3_check")
    from eagle3_check.gating.golden_check import total_prompts
    from eagle3_check.gating.metrics import is_metrics_baseline

    metrics = inputs.baseline if inputs.baseline and is_metrics_baseline(inputs.baseline) else None
    total, done = total_prompts([inputs.golden]), []

    def on_prompt(pid) -> None:
        done.append(pid)
        if inputs.on_step:
            inputs.on_step("golden", len(done), total)

    out = gate_goldens([inputs.golden], metrics, build=lambda key: (program, inputs.tokenizer),
                       pte=inputs.pte or "given", fixture=inputs.fixture, on_prompt=on_prompt)
    if keep is not None:
        keep["outcome"] = out
    cases = []
    for stem, runs in out.runs.items():
        for pid in runs:
            mine = [d.message for d in out.golden_diffs if d.golden == stem and d.prompt_id == pid]
            cases.append(JUnitCase(f"{stem} {pid}", FAIL if mine else PASS, "; ".join(mine) or "identical"))
    cases += [JUnitCase(stem, SKIP, why) for stem, why in out.skipped.items()]
    return _summary("golden", cases, "golden requests")


def metrics_baseline_check(inputs: GateInputs, golden_outcome) -> GateCheck:
    """The exact metrics gate (issue 7) over the golden runs: one case per golden key."""
    from eagle3_check.gating.metrics import format_metric_diffs

    if golden_outcome is None:
        return GateCheck("baseline", FAIL, f"--baseline {inputs.baseline} is a metrics baseline (per golden) but no "
                         "--golden ran; expected --golden FILE|DIR. Fix: pass --golden golden/")
    cases = []
    for stem in golden_outcome.runs:
        mine = [d for d in golden_outcome.metric_diffs if d.key == stem]
        msg = format_metric_diffs(mine, inputs.baseline) if mine else "identical to the baseline"
        cases.append(JUnitCase(stem, FAIL if mine else PASS, msg))
    chk = _summary("baseline", cases, "metric sets", "equal to the baseline")
    if chk.status == FAIL:
        chk.message = format_metric_diffs(golden_outcome.metric_diffs, inputs.baseline)
    return chk


def _baseline(inputs: GateInputs, tau: float | None, ks: list[int], golden_outcome=None) -> GateCheck:
    if inputs.baseline is None:
        return _skip("baseline", "no --baseline given")
    from eagle3_check.gating.metrics import is_metrics_baseline

    if is_metrics_baseline(inputs.baseline):
        return metrics_baseline_check(inputs, golden_outcome)
    status, message, details = compare_tau(Path(inputs.baseline), tau, ks, inputs.tau_tolerance)
    return GateCheck("baseline", status, message, details=details)


def program_dtype(program) -> str:
    """The dtype a program computes in: a `.pte` reads it from its feature output (`PteBackend.dtype`),
    an eager program from its weights; float32 when the program does not say."""
    dtype = getattr(program, "dtype", "float32")
    return dtype if isinstance(dtype, str) else str(dtype).removeprefix("torch.")


def follow_dtype(inputs: GateInputs, dtype: str, info: dict) -> None:
    """The tie tolerance and budget the program's dtype calls for (DESIGN §3), unless given; recorded in `info`."""
    if inputs.tolerance is None:
        inputs.tolerance = tolerance_for(dtype)
    if inputs.tie_budget is None:
        inputs.tie_budget = default_budget(inputs.tolerance.dtype)
    info.update(dtype=dtype, tie_tolerance=inputs.tolerance.describe(), tie_budget=inputs.tie_budget)


def _dtype_defaults(inputs: GateInputs, program) -> None:
    """A check called on its own (not through run_gate) gets the program dtype's tolerance and budget too."""
    if inputs.tolerance is None or inputs.tie_budget is None:
        follow_dtype(inputs, program_dtype(program), {})


def run_gate(inputs: GateInputs, program: SpeculatorProgram | None = None,
             on_check: Callable[[GateCheck], None] | None = None) -> GateReport:
    """Runs every check; `program` defaults to `PteBackend(inputs.pte)`."""
    report = GateReport(info={"pte": str(inputs.pte) if inputs.pte else None})

    def add(chk: GateCheck) -> GateCheck:
        report.checks.append(chk)
        if on_check:
            on_check(chk)
        return chk

    def load() -> GateCheck:
        nonlocal program
        if program is None:
            from eagle3_check.program.pte_backend import PteBackend
            from eagle3_check.program.pte_probe import probe_load

            why = probe_load(inputs.pte, data_path=inputs.data_path)  # in a child first: a corrupt method can abort the runtime
            if why:
                return GateCheck("load", FAIL, why)
            program = PteBackend(inputs.pte, inputs.data_path)
        info = getattr(program, "info", {"backend": type(program).__name__})
        report.info.update(info)
        follow_dtype(inputs, program_dtype(program), report.info)
        return GateCheck("load", PASS, f"loaded ({', '.join(f'{k}={v}' for k, v in info.items())}; "
                         f"tie tolerance {report.info['tie_tolerance']}, tie budget {inputs.tie_budget:.1%})")

    if add(_timed("load", load)).status == FAIL:
        for name in ("metadata", "edge suites", "runner vs self reference", "runner vs HF reference",
                     "self reference vs HF reference", "golden", "baseline"):
            add(_skip(name, "program did not load"))
        return report

    def metadata() -> GateCheck:
        maxima = program.method_maxima() if hasattr(program, "method_maxima") else None
        f = validate_metadata(program.metadata(), inputs.tokenizer.vocab_size, target_facts(inputs.target_dir), maxima)
        details = {"raw": program.metadata(), "notes": f.notes, "problems": f.problems}
        if not f.ok:
            cases = [JUnitCase(f"problem {i + 1}", FAIL, msg) for i, msg in enumerate(f.problems)]
            return GateCheck("metadata", FAIL, "; ".join(f.problems), cases=cases, details=details)
        return GateCheck("metadata", PASS, f"consistent ({len(f.notes)} notes)", details=details)

    if add(_timed("metadata", metadata)).status == FAIL:
        for name in ("edge suites", "runner vs self reference", "runner vs HF reference",
                     "self reference vs HF reference", "golden", "baseline"):
            add(_skip(name, "metadata invalid"))
        return report
    hf = inputs.hf_reference
    if hf is None and inputs.target_dir is not None:
        import torch

        from eagle3_check.reference.hf import HFReference

        hf = HFReference(inputs.target_dir, dtype=getattr(torch, inputs.tolerance.dtype))  # the program's dtype
    if inputs.runner is not None:  # a runner binary under gate: gating/exec_gate.py
        from eagle3_check.gating.exec_gate import exec_gate_checks

        checks, report.tau = exec_gate_checks(program, inputs, hf, _timed)
        for chk in checks:
            add(chk)
        report.info["runner"] = inputs.runner.name
        return report
    add(_timed("edge suites", lambda: edge_suites_check(program, inputs, hf)))
    checks, tau = _run_requests(program, inputs, hf)
    for chk in checks:  # each second counted once (gate_requests.py says whose case pays for what)
        chk.seconds = sum(c.seconds for c in chk.cases)
        add(chk)
    report.tau = tau
    md = read_metadata(program.metadata())
    ks = inputs.ks or [inputs.options.chain_len or md.chain_len]
    report.info["k"] = ks[0] if len(ks) == 1 else ks
    report.info.update(k_range=list(md.k_range), k_source=md.k_source)
    kept: dict = {}
    add(_timed("golden", lambda: golden_check(program, inputs, kept)))
    add(_timed("baseline", lambda: _baseline(inputs, tau, ks, kept.get("outcome"))))
    return report


def format_table(report: GateReport) -> str:
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
    lines += ["", f"GATE: {'PASS' if report.passed else 'FAIL'}{tau}   ({report.info.get('pte')})"]
    return "\n".join(lines)
