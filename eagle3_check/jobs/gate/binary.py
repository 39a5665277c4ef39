"""`gate --pte FILE --runner exec:PATH`: the gate's runner checks with a runner binary as the runner.

Load and metadata are the program's own (jobs/gate/gate.py). Then, through the binary: the edge suites
a binary can take (`jobs.suites.binary`), binary vs self reference (the program's own greedy
decoding: the lossless check) and binary vs HF reference (`jobs.check.binary`), the golden
(`jobs.golden.binary`), and a tau baseline. Self vs HF and the metrics baseline do not involve the
runner, or need program-call counts a binary does not report: they skip with the reason.

The gate gets the binary as a `BinaryGate` (`GateInputs.runner`) and asks it for these checks,
so the gate's core (`jobs.gate.gate`) imports nothing of this module, which sits above it. Not folded
into `gate.py`: its checks run on the other jobs' binary routes, each distinct request in one process
(`OncePerRequest`), and skip what needs a call log or the harness's program.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from eagle3_check.jobs.check.binary import run_exec_check
from eagle3_check.judge.binary import FAIL, PASS, TIE
from eagle3_check.program.contract import read_metadata
from eagle3_check.report.junit import JUnitCase
from eagle3_check.runners.binary.runner import ExecRunner, program_file


@dataclass
class BinaryGate:
    """A runner binary under gate (`GateInputs.runner`): its name and its runner checks."""

    runner: ExecRunner

    @property
    def name(self) -> str:
        return self.runner.name

    def checks(self, program, inputs, hf, timed) -> tuple[list, float | None]:
        return exec_gate_checks(self.runner, program, inputs, hf, timed)


class OncePerRequest:
    """The gate's runner binary, one process per distinct request: the binary vs self and vs HF
    checks send the same prompts with the same options (and an edge case may send one of them
    again), and the seed's CLI takes one prompt per process, so each distinct request runs once and
    its output is judged wherever it was asked (14 processes instead of 28 for a fixture's prompt
    set). A request is its argv (the program file, the tokenizer file, the prompt and every flag): a
    different one is a new process. Everything else is the runner's."""

    def __init__(self, runner: ExecRunner):
        self.runner = runner
        self.runs: dict[tuple[str, ...], object] = {}  # argv -> its ProcessRun

    def __getattr__(self, name: str):
        return getattr(self.runner, name)

    def execute(self, model, tokenizer, prompt: str, options, data_path=None):
        argv = tuple(self.runner.command.request(str(model), str(tokenizer), prompt, options,
                                                 str(data_path) if data_path else None))
        if argv not in self.runs:
            self.runs[argv] = self.runner.execute(model, tokenizer, prompt, options, data_path)
        return self.runs[argv]

    def observe(self, program, tokenizer, prompt: str, options, what: str = ""):
        """The seam's one request (check's request loop calls it), the binary's own `observe` over this
        `execute`: without it the loop would reach the runner's own and start every process again."""
        return ExecRunner.observe(self, program, tokenizer, prompt, options, what)


def exec_gate_checks(runner: ExecRunner, program, inputs, hf, timed) -> tuple[list, float | None]:
    """The gate's checks after metadata, through `runner`. `timed(name, fn)` runs one check
    (jobs.gate.model.timed). Returns (checks, tau of the self-reference requests)."""
    from eagle3_check.jobs.gate.model import GateCheck, skip_check, suite_junit_cases, summarize
    from eagle3_check.program.quantize import program_quantization

    once = OncePerRequest(runner)  # every check's processes, shared by identical requests
    md = read_metadata(program.metadata())
    quant = program_quantization(program.metadata())  # DESIGN §3: a quantized program is judged against itself
    checks, tau = [], None

    def suites():
        if not inputs.suite:
            return skip_check("edge suites", "disabled (--suite none)")
        if hf is None:
            return skip_check("edge suites", "no reference target given (--target or --fixture)")
        from eagle3_check.jobs.gate.gate import gate_suite_env
        from eagle3_check.jobs.suites.binary import run_exec_suite
        from eagle3_check.suites import suite_cases

        env = gate_suite_env(program, inputs, hf)  # the in-process gate's env (and its shrinker's)
        rep = run_exec_suite(inputs.suite, suite_cases(inputs.suite), env, once)
        # skipped cases counted, with reasons; tie positions against the program's dtype's budget, as in process
        return summarize("edge suites", suite_junit_cases(rep.results), "cases", "passed", inputs.tie_budget or 0.0)

    def requests(name: str, reference):
        # the reference greedy-decodes and scores per request here (run_exec_check: reference.greedy,
        # reference.score); a batched HF scorer (judge/, issue 49) plugs in as `reference` (the same two
        # methods): by the vs-HF check every request's binary output is known (once.runs), so its
        # scores can come from one batched pass, computed on the first call
        nonlocal tau
        report = run_exec_check(once, program, inputs.tokenizer, reference, inputs.prompts, inputs.options,
                                tolerance=inputs.tolerance, tie_budget=inputs.tie_budget)
        cases = [JUnitCase(o.prompt_id, o.verdict.status if o.verdict.status in (PASS, TIE, FAIL) else FAIL,
                           f"[{o.verdict.mode or '-'}] {o.verdict.message}", o.process.seconds,
                           properties={"positions": str(max(o.verdict.judged, 1)),
                                       "tie_positions": str(o.verdict.ties)}) for o in report.outcomes]
        chk = summarize(name, cases, "requests", tie_budget=inputs.tie_budget)
        chk.details = {"k": report.k, "tau": report.tau, "judged_by": report.info["judged_by"]}
        if tau is None:
            tau = report.tau
        return chk

    def golden():
        if inputs.golden is None:
            return skip_check("golden", "no --golden given")
        from eagle3_check.jobs.golden.binary import golden_files, none_applies, verify_exec_goldens

        out = verify_exec_goldens(golden_files([inputs.golden]), runner, program_file(program), program,
                                  inputs.tokenizer)
        if not out.verified:  # the skip rule (status.passes): asked to verify goldens, none ran
            return GateCheck("golden", FAIL, none_applies(out, program_file(program), program, inputs.golden, True,
                                                          inputs.fixture),
                             details=out.to_json())
        status = PASS if out.passed else FAIL
        return GateCheck("golden", status, "; ".join(out.diffs) or f"{sum(out.verified.values())} golden requests "
                         "identical", details=out.to_json())

    from eagle3_check.judge.self_ref import SelfReference

    checks.append(timed("edge suites", suites))
    checks.append(timed("runner vs self reference", lambda: requests("runner vs self reference",
                                                                     SelfReference(program))))
    if hf is None:
        checks.append(skip_check("runner vs HF reference", "no reference target given (--target or --fixture)"))
    elif quant is not None:
        checks.append(skip_check("runner vs HF reference", f"quantized program ({quant.short()}): the runner is judged "
                            "against the self reference; run the gate without --runner exec:... for its drift"))
    else:
        checks.append(timed("runner vs HF reference", lambda: requests("runner vs HF reference", hf)))
    checks.append(skip_check("self reference vs HF reference", "does not involve the runner: run the gate without "
                        "--runner exec:... for it"))
    checks.append(timed("golden", golden))
    checks.append(timed("baseline", lambda: _baseline(inputs, tau, md)))
    return checks, tau


def _baseline(inputs, tau: float | None, md):
    from eagle3_check.jobs.gate.model import GateCheck, skip_check
    from eagle3_check.jobs.golden.metrics import is_metrics_baseline
    from eagle3_check.jobs.golden.tau_baseline import compare_tau

    if inputs.baseline is None:
        return skip_check("baseline", "no --baseline given")
    if is_metrics_baseline(inputs.baseline):
        return skip_check("baseline", "a metrics baseline counts program calls, which a binary does not report")
    k = inputs.options.chain_len or md.chain_len
    status, message, details = compare_tau(Path(inputs.baseline), tau, [k], inputs.tau_tolerance)
    return GateCheck("baseline", status, message, details=details)
