"""`eagle3-check gate`: everything a new export must pass before it ships, in one verdict.

Checks, in order (a check that cannot run is skipped with the reason, never silently):
1. load      - the `.pte` loads through executorch.runtime and has the three methods;
2. metadata  - required keys, consistent ranges, vocab sizes vs tokenizer and target
               (`metadata_check.validate_metadata`);
3. edge suites - the case registry of issue 4 (`eagle3_check.suites`) on this program;
               skipped with --suite none or without a reference target;
4. runner vs self reference - bit-identical tokens (the lossless check, quantized or not);
5. runner vs HF reference   - bit-identical, with top-1/top-2 margin forensics;
6. self reference vs HF reference - the program's target equals the HF target;
   for a quantized program (`get_quantization`) 5 is not a pass/fail check (skipped, saying
   so) and 6 is "quantization drift" (`jobs/check/drift.py`): agreement, first divergence, rank under
   HF and tau against the full-precision program, failing only past --min-agreement /
   --max-tau-drop; the edge suites judge against the self reference;
7. golden    - `--golden FILE|DIR`, re-run and compared exactly (`jobs.golden.verify.gate_goldens`);
8. baseline  - `--baseline FILE`: a metrics baseline (`bench/baselines/metrics.json`) is
               compared exactly with the golden runs (`metrics.compare_metrics`, needs
               --golden); any other JSON with a 'tau': tau must not drop more than
               `tau_tolerance` below it.

The inputs, the report and its table live in `jobs/gate/model.py`; the report is JSON-serialisable
and converts to JUnit suites (`report/junit.py`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from eagle3_check.errors import InputError
from eagle3_check.jobs.check.drift import DriftReport
from eagle3_check.jobs.gate.model import (
    DRIFT,
    GateCheck,
    GateInputs,
    GateReport,
    format_table,
    skip_check,
    suite_junit_cases,
    summarize,
    timed,
)
from eagle3_check.jobs.gate.requests import run_requests, runner_tau
from eagle3_check.jobs.golden.tau_baseline import TAU_TOLERANCE, compare_tau
from eagle3_check.judge.budget import budget_json
from eagle3_check.judge.tie_rule import tie_rule
from eagle3_check.judge.verdict import FAIL
from eagle3_check.program.contract import SpeculatorProgram, program_dtype, read_metadata
from eagle3_check.program.metadata_check import target_facts, validate_metadata
from eagle3_check.program.quantize import program_quantization
from eagle3_check.report.junit import JUnitCase
from eagle3_check.status import PASS, SKIP

__all__ = ["DRIFT", "TAU_TOLERANCE", "GateCheck", "GateInputs", "GateReport", "format_table", "gate_suite_env",
           "request_checks", "run_gate"]


def request_checks(program: SpeculatorProgram, inputs: GateInputs, hf,
                   ks: list[int] | None = None) -> tuple[list[GateCheck], float | None]:
    """Runner vs self reference, runner vs HF reference, self vs HF (or, for a quantized program,
    its drift), over prompts x K (default: the gate inputs' ks, else the run's or the program's K); after
    `run_gate`'s load check, which set the tie tolerance and budget (`check --quantize` sets them)."""
    ks = ks or inputs.ks or [inputs.options.chain_len or read_metadata(program.metadata()).chain_len]
    step = inputs.on_step
    rc = run_requests(program, inputs.tokenizer, inputs.prompts, inputs.options, ks, inputs.tolerance, hf,
                      on_request=(lambda d, t: step("requests", d, t)) if step else None,
                      runner=inputs.plugin)
    # no tie budget: the self reference has no logits, so its verdicts are never ties (judge/self_ref.py)
    checks = [summarize("runner vs self reference", rc.vs_self, "requests")]
    quant = program_quantization(program.metadata())
    if hf is None:
        checks += [skip_check("runner vs HF reference", "no reference target given (--target or --fixture)"),
                   skip_check(DRIFT if quant else "self reference vs HF reference", "no reference target given")]
    elif quant is not None:
        checks += [skip_check("runner vs HF reference", f"quantized program ({quant.short()}): the runner is judged "
                         "against the self reference; its target's distance from HF is the drift check"),
                   drift_check(program, inputs, quant.short(), rc, ks)]
    else:
        checks += [summarize("runner vs HF reference", rc.vs_hf, "requests", tie_budget=inputs.tie_budget),
                   summarize("self reference vs HF reference", rc.self_vs_hf, "prompts", tie_budget=inputs.tie_budget)]
    checks[0].details.update(k=ks, tau=rc.tau, requests=rc.runs, reference=rc.ref_self, runs=rc.summaries)
    if hf is not None:  # per request: the reference's tokens and margins the verdict read
        checks[1].details["reference"] = rc.ref_hf
    for chk in checks:  # each second counted once (gate_requests.py says whose case pays for what)
        chk.seconds = sum(c.seconds for c in chk.cases)
    return checks, rc.tau


def drift_check(program, inputs: GateInputs, quantization: str, rc, ks: list[int]) -> GateCheck:
    """Self reference vs HF full precision for a quantized program (`jobs/check/drift.py`): one JUnit
    case per prompt (its agreement and first divergence), failing only past the thresholds."""
    fp_tau, note = None, inputs.full_precision_note
    fp = inputs.full_precision(program.metadata()) if inputs.full_precision is not None else None
    if fp is not None:
        fp_tau = runner_tau(fp, inputs.tokenizer, inputs.prompts, inputs.options, ks)
    rep = DriftReport(quantization, rc.drift, rc.tau, fp_tau, inputs.drift, fp_note="" if fp is not None else note)
    rep.judge()
    return GateCheck(DRIFT, rep.status, rep.message(), cases=rep.junit_cases(), details={"drift": rep.to_json()})


def gate_suite_env(program, inputs: GateInputs, hf):
    """The SuiteEnv the gate's edge suites run in: `SuiteEnv.fixed` on the gate's one program, its
    prompts' texts, its tolerance, and as reference the HF target `hf`, or for a quantized program its
    own greedy decoding (DESIGN §3). The edge-suite check (in process or through a binary) and the
    shrinker of its failing cases (jobs/gate/shrink_suites.py) build it here, so both judge alike."""
    from eagle3_check.jobs.suites.execute import SELF, SuiteEnv

    ref = SELF if program_quantization(program.metadata()) is not None else hf
    return SuiteEnv.fixed(program, inputs.tokenizer, ref, [p.text for p in inputs.prompts], inputs.tolerance,
                          fixture=inputs.fixture)


def edge_suites_check(program, inputs: GateInputs, hf) -> GateCheck:
    """The edge-suite registry (issue 4) on this one program: `SuiteEnv.fixed` ignores spec
    wishes, so cases needing another export shape skip."""
    _dtype_defaults(inputs, program)
    if not inputs.suite:
        return skip_check("edge suites", "disabled (--suite none)")
    if hf is None:
        return skip_check("edge suites", "no reference target given (--target or --fixture)")
    from eagle3_check.jobs.suites.report import run_suite
    from eagle3_check.suites import suite_cases

    env = gate_suite_env(program, inputs, hf)
    todo, done = suite_cases(inputs.suite), 0

    def on_case(result) -> None:
        nonlocal done
        done += 1
        if inputs.on_step:
            inputs.on_step("edge suites", done, len(todo))

    rep = run_suite(inputs.suite, todo, env, inputs.plugin, on_case=on_case)
    return summarize("edge suites", suite_junit_cases(rep.results), "cases", "passed", inputs.tie_budget)


def golden_check(program, inputs: GateInputs, keep: dict | None = None) -> GateCheck:
    """`--golden FILE|DIR` through `jobs.golden.verify.gate_goldens` (issue 7) on this program, with the gate's
    runner (a plug-in's, else the reference) on graph-owned outputs: re-run each golden's prompts with
    its recorded options, compare exactly; one case per prompt.
    The gating outcome (runs and, for a metrics baseline, metric diffs) goes into `keep`."""
    if inputs.golden is None:
        return skip_check("golden", "no --golden given")
    from eagle3_check.jobs.golden.metrics import is_metrics_baseline
    from eagle3_check.jobs.golden.verify import gate_goldens, total_prompts

    metrics = inputs.baseline if inputs.baseline and is_metrics_baseline(inputs.baseline) else None
    total, done = total_prompts([inputs.golden]), 0

    def on_prompt(pid) -> None:
        nonlocal done
        done += 1
        if inputs.on_step:
            inputs.on_step("golden", done, total)

    file = inputs.pte or getattr(program, "path", None)  # a program loaded from its file (a .pte, an AOTI package)
    backend = "pte" if inputs.pte else (getattr(program, "info", None) or {}).get("backend") if file else None
    out = gate_goldens([inputs.golden], metrics, build=lambda key: (program, inputs.tokenizer),
                       pte=file or "given", fixture=inputs.fixture, on_prompt=on_prompt, runner=inputs.plugin,
                       dtype=program_dtype(program) if file else None, run_backend=backend)
    if keep is not None:
        keep["outcome"] = out
    cases = []
    for stem, runs in out.runs.items():
        for pid in runs:
            mine = [d.message for d in out.golden_diffs if d.golden == stem and d.prompt_id == pid]
            cases.append(JUnitCase(f"{stem} {pid}", FAIL if mine else PASS, "; ".join(mine) or "identical"))
    cases += [JUnitCase(stem, SKIP, why) for stem, why in out.skipped.items()]
    chk = summarize("golden", cases, "golden requests")
    if not out.runs and out.skipped and not out.interrupted:  # fails by the skip rule: say how to record one
        from eagle3_check.jobs.golden.verify import no_golden_line

        chk.message = no_golden_line(out.skipped, inputs.pte, inputs.fixture,
                                     program_dtype(program) if inputs.pte else None, inputs.golden)
    return chk


def metrics_baseline_check(inputs: GateInputs, golden_outcome) -> GateCheck:
    """The exact metrics gate (issue 7) over the golden runs: one case per golden key."""
    from eagle3_check.jobs.golden.metrics import format_metric_diffs

    if golden_outcome is None:
        return GateCheck("baseline", FAIL, f"--baseline {inputs.baseline} is a metrics baseline (per golden) but no "
                         "--golden ran; expected --golden FILE|DIR. Fix: pass --golden golden/")
    cases = []
    for stem in golden_outcome.runs:
        mine = [d for d in golden_outcome.metric_diffs if d.key == stem]
        msg = format_metric_diffs(mine, inputs.baseline) if mine else "identical to the baseline"
        cases.append(JUnitCase(stem, FAIL if mine else PASS, msg))
    chk = summarize("baseline", cases, "metric sets", "equal to the baseline")
    if chk.status == FAIL:
        chk.message = format_metric_diffs(golden_outcome.metric_diffs, inputs.baseline)
    return chk


def baseline_check(inputs: GateInputs, tau: float | None, ks: list[int], golden_outcome=None) -> GateCheck:
    if inputs.baseline is None:
        return skip_check("baseline", "no --baseline given")
    from eagle3_check.jobs.golden.metrics import is_metrics_baseline

    if is_metrics_baseline(inputs.baseline):
        return metrics_baseline_check(inputs, golden_outcome)
    status, message, details = compare_tau(Path(inputs.baseline), tau, ks, inputs.tau_tolerance)
    return GateCheck("baseline", status, message, details=details)


def follow_dtype(inputs: GateInputs, dtype: str, info: dict, program=None) -> None:
    """The tie tolerance and budget the program's dtype calls for (DESIGN §3), unless given; recorded in `info`.
    `inputs.calibrate(program)`: the calibration of its target (measured on first use), where one applies."""
    # the one rule every job uses (judge/tie_rule.py); a given tolerance sets the budget's dtype
    cal = inputs.calibrate(program) if inputs.calibrate is not None and inputs.tolerance is None else None
    rule = tie_rule(inputs.tolerance.dtype if inputs.tolerance is not None else dtype, inputs.fixture, inputs.tie_budget,
                    cal)
    if inputs.tolerance is None:
        inputs.tolerance = rule.tolerance
    if inputs.tie_budget is None:
        inputs.tie_budget = rule.budget
    info.update(dtype=dtype, tie_tolerance=inputs.tolerance.describe(), tie_budget=inputs.tie_budget if isinstance(inputs.tie_budget, float)
                else budget_json(inputs.tie_budget),
                tie_budget_source=rule.source if inputs.tie_budget is rule.budget else "--tie-budget")


def _dtype_defaults(inputs: GateInputs, program) -> None:
    """A check called on its own (not through run_gate) gets the program dtype's tolerance and budget too."""
    if inputs.tolerance is None or inputs.tie_budget is None:
        follow_dtype(inputs, program_dtype(program), {})


def _warm(inputs: GateInputs) -> None:
    """Imports the runtime and (with a reference target) transformers while the load probe's child
    runs: each import's own error, if any, is raised where it was before, by the step that needs it."""
    import contextlib

    from eagle3_check.program.pte_backend import _runtime

    with contextlib.suppress(Exception):
        _runtime()
    if inputs.target_dir is not None:
        from eagle3_check.judge.hf import _transformers

        with contextlib.suppress(Exception):
            _transformers()


def run_gate(inputs: GateInputs, program: SpeculatorProgram | None = None,
             on_check: Callable[[GateCheck], None] | None = None) -> GateReport:
    """Runs every check; `program` defaults to `PteBackend(inputs.pte)`. Ctrl-C of the harness
    (runners/interrupt.py) ends it with the checks done so far and a failing "interrupted" check."""
    if inputs.runner is not None and not callable(getattr(inputs.runner, "checks", None)):
        raise InputError(f"GateInputs.runner is a {type(inputs.runner).__name__}", "a runner binary's gate "
                         "(jobs.gate.binary.BinaryGate)", "pass runner=BinaryGate(ExecRunner(spec))")
    report = GateReport(info={"pte": str(inputs.pte) if inputs.pte else None})
    try:
        _checks(report, inputs, program, on_check)
    except KeyboardInterrupt:
        report.info["interrupted"] = f"interrupted (SIGINT) after {len(report.checks)} checks; the rest was not run"
        report.checks.append(GateCheck("interrupted", FAIL, report.info["interrupted"]))
        if on_check:
            on_check(report.checks[-1])
    return report


def _checks(report: GateReport, inputs: GateInputs, program, on_check) -> None:
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

            # in a child first (a corrupt method can abort the runtime); meanwhile this process imports
            # what it loads next (the runtime, and transformers for the metadata and the HF reference)
            why = probe_load(inputs.pte, data_path=inputs.data_path, meanwhile=lambda: _warm(inputs))
            if why:
                return GateCheck("load", FAIL, why)
            program = PteBackend(inputs.pte, inputs.data_path)
        info = getattr(program, "info", {"backend": type(program).__name__})
        report.info.update(info)
        follow_dtype(inputs, program_dtype(program), report.info, program)
        return GateCheck("load", PASS, f"loaded ({', '.join(f'{k}={v}' for k, v in info.items())}; "
                         f"tie tolerance {report.info['tie_tolerance']}, tie budget "
                         + (f"{inputs.tie_budget:.1%})" if isinstance(inputs.tie_budget, float) else
                            f"a binomial bound: {report.info['tie_budget_source']})"))

    if add(timed("load", load)).status == FAIL:
        for name in ("metadata", "edge suites", "runner vs self reference", "runner vs HF reference",
                     "self reference vs HF reference", "golden", "baseline"):
            add(skip_check(name, "program did not load"))
        return

    def metadata() -> GateCheck:
        maxima = program.method_maxima() if hasattr(program, "method_maxima") else None
        sidecar = getattr(program, "sidecar", None) or {}  # a .pte's, read (and its digest checked) at load
        f = validate_metadata(program.metadata(), inputs.tokenizer.vocab_size, target_facts(inputs.target_dir), maxima,
                              sidecar.get("lowering"))
        details = {"raw": program.metadata(), "notes": f.notes, "problems": f.problems, "warnings": f.warnings}
        if not f.ok:
            cases = [JUnitCase(f"problem {i + 1}", FAIL, msg) for i, msg in enumerate(f.problems)]
            return GateCheck("metadata", FAIL, "; ".join(f.problems), cases=cases, details=details)
        warned = "".join(f"; warning: {w}" for w in f.warnings)
        return GateCheck("metadata", PASS, f"consistent ({len(f.notes)} notes){warned}", details=details)

    if add(timed("metadata", metadata)).status == FAIL:
        for name in ("edge suites", "runner vs self reference", "runner vs HF reference",
                     "self reference vs HF reference", "golden", "baseline"):
            add(skip_check(name, "metadata invalid"))
        return
    hf = inputs.hf_reference
    if hf is None and inputs.target_dir is not None:
        import torch

        from eagle3_check.judge.hf import HFReference

        hf = HFReference(inputs.target_dir, dtype=getattr(torch, inputs.tolerance.dtype))  # the program's dtype
    if inputs.runner is not None:  # a runner binary under gate: its own checks (jobs/gate/binary.py)
        checks, report.tau = inputs.runner.checks(program, inputs, hf, timed)
        for chk in checks:
            add(chk)
        report.info["runner"] = inputs.runner.name
        return
    md = read_metadata(program.metadata())
    ks = inputs.ks or [inputs.options.chain_len or md.chain_len]
    add(timed("edge suites", lambda: edge_suites_check(program, inputs, hf)))
    checks, tau = request_checks(program, inputs, hf, ks)
    for chk in checks:
        add(chk)
    report.tau = tau
    report.info["k"] = ks[0] if len(ks) == 1 else ks
    report.info.update(k_range=list(md.k_range), k_source=md.k_source)
    kept: dict = {}
    add(timed("golden", lambda: golden_check(program, inputs, kept)))
    add(timed("baseline", lambda: baseline_check(inputs, tau, ks, kept.get("outcome"))))
