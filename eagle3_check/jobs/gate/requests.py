"""The gate's request checks: every prompt x K through the reference runner, judged against the
self reference and the HF reference, and the self reference judged against the HF reference.

Every request is judged position by position (`verdict.judge`): against the self reference's
teacher-forced rows (the program has no logits: any difference fails, never a tie) and against
the HF reference's (ties within the tolerance counted as ties). The self reference's greedy
tokens are judged against the HF reference's teacher-forced rows of those tokens the same way.
Each case carries its position counts as JUnit properties and the time of its own work, each
second counted once, so the checks' times add up to the wall time: a request's run and its
scoring by the self reference are the runner-vs-self case's; the HF scoring of the run is the
runner-vs-HF case's; the self reference's greedy decoding and its HF scoring are the
self-vs-HF case's. After a contract violation (e.g. draft ids outside the vocab) the remaining requests are
reported as skipped: the program is broken, running on would only repeat the message.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from eagle3_check.errors import ContractViolation
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.drift import PromptDrift, prompt_drift
from eagle3_check.jobs.check.prompt_set import reference_json
from eagle3_check.judge.hf import ReferenceResult, Scores
from eagle3_check.judge.self_ref import self_greedy, self_score
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.judge.verdict import FAIL, PASS, TIE, Verdict, judge, judge_position
from eagle3_check.program.contract import SpeculatorProgram, read_metadata
from eagle3_check.report.junit import JUnitCase
from eagle3_check.runners.crash import RunCrash, crash_reason, guarded_run
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions, stop_set
from eagle3_check.runners.result import RunResult
from eagle3_check.status import SKIP


@dataclass
class RequestCases:
    vs_self: list[JUnitCase] = field(default_factory=list)
    vs_hf: list[JUnitCase] = field(default_factory=list)
    self_vs_hf: list[JUnitCase] = field(default_factory=list)  # one per prompt
    drift: list[PromptDrift] = field(default_factory=list)  # one per prompt: self reference vs HF (jobs/check/drift.py)
    runs: int = 0
    tau: float | None = None  # over all runs: (emitted - 1) / rounds
    ref_self: dict[str, dict] = field(default_factory=dict)  # case -> jobs.check.prompt_set.reference_json (self reference)
    ref_hf: dict[str, dict] = field(default_factory=dict)  # case -> jobs.check.prompt_set.reference_json (HF reference)
    summaries: list[dict] = field(default_factory=list)  # RunResult.summary of every run, in run order


def reference_vs_reference(self_ref: ReferenceResult, hf: Scores, tol: Tolerance) -> JUnitCase:
    """The self reference's greedy tokens judged against the HF reference's rows over them
    (one row past the end, as for a run: the two may stop at different lengths)."""
    pos = [judge_position(i, t, hf, tol) for i, t in enumerate(self_ref.tokens)]
    fails = [p for p in pos if p.status == FAIL]
    ties = [p for p in pos if p.status == TIE]
    n = len(pos)
    props = _props(n - len(fails) - len(ties), len(ties), len(fails))
    if fails:
        return JUnitCase("", FAIL, f"self vs HF: diverged {fails[0].describe()} ({len(fails)} of {n} positions fail)",
                         properties=props)
    if ties:
        return JUnitCase("", TIE, f"self vs HF: {len(ties)} ties in {n} tokens; first {ties[0].describe()}",
                         properties=props)
    return JUnitCase("", PASS, f"identical ({n} tokens)", properties=props)


def _props(identical: int, ties: int, fails: int) -> dict[str, str]:
    return {"positions": str(identical + ties + fails), "identical_positions": str(identical),
            "tie_positions": str(ties), "fail_positions": str(fails)}


def _case(name: str, v: Verdict, secs: float) -> JUnitCase:
    return JUnitCase(name, v.status, v.message, secs, json.dumps(v.to_json()), _props(v.identical, v.ties, v.fails))


def run_requests(
    program: SpeculatorProgram,
    tokenizer,
    prompts: list[Prompt],
    options: RunOptions,
    ks: list[int],
    tolerance: Tolerance,
    hf=None,
    on_request: Callable[[int, int], None] | None = None,
    runner=None,
) -> RequestCases:
    """Every prompt x K, judged; `on_request(done, total)` after each request (progress); `runner`:
    a plug-in runner (`run()` returning a RunResult) judged instead of the reference runner."""
    md = read_metadata(program.metadata())
    stops = stop_set(tokenizer, md, options).ids
    runner = runner if runner is not None else ReferenceRunner()
    out = RequestCases()
    self_cache: dict[tuple, ReferenceResult] = {}
    runs: list[RunResult] = []
    broken = None

    def both(case: str, status: str, message: str, secs: float = 0.0) -> None:
        """The same outcome in both request checks; `secs` is paid by the runner-vs-self case."""
        out.vs_self.append(JUnitCase(case, status, message, secs))
        if hf is not None:
            out.vs_hf.append(JUnitCase(case, status, message, 0.0))

    total, done = len(ks) * len(prompts), 0
    for k in ks:
        opts = RunOptions(**{**options.__dict__, "chain_len": k})
        for p in prompts:
            if on_request and done:
                on_request(done, total)
            done += 1
            case = f"{p.id} K={k}" if len(ks) > 1 else p.id
            if broken:
                both(case, SKIP, f"not run after a contract violation: {broken}")
                continue
            t0 = time.perf_counter()
            try:
                run = guarded_run(runner, program, tokenizer, p.text, opts, what=f"'{case}'")
            except RunCrash as e:  # a contract violation or a crash fails the request, with the reason
                broken = str(e) if isinstance(e.__cause__, ContractViolation) else None
                both(case, FAIL, str(e), time.perf_counter() - t0)
                continue
            secs = time.perf_counter() - t0
            runs.append(run)
            out.summaries.append(run.summary(p.id))
            key = (tuple(run.prompt_ids), max(run.max_new, 1))
            t_ref = time.perf_counter()  # the two references' time is the self-vs-HF case's time
            if key not in self_cache:
                try:
                    self_cache[key] = self_greedy(program, run.prompt_ids, key[1], stops)
                except Exception as e:  # noqa: BLE001 - the program's own target crashed: a finding
                    both(case, FAIL, f"self reference failed: {crash_reason(e)}", secs)
                    continue
                if hf is not None:
                    sr = self_cache[key]
                    hf_rows = hf.score(run.prompt_ids, sr.tokens)
                    out.drift.append(prompt_drift(p.id, sr.tokens, hf_rows))
                    rr = reference_vs_reference(sr, hf_rows, tolerance)
                    rr.name = p.id
                    rr.seconds = time.perf_counter() - t_ref
                    out.self_vs_hf.append(rr)
            t_own = time.perf_counter()
            try:
                own = self_score(program, run.prompt_ids, list(run.tokens))
            except Exception as e:  # noqa: BLE001 - the program's own target crashed: a finding
                both(case, FAIL, f"self reference failed: {crash_reason(e)}", secs)
                continue
            v = judge(run, own, stops, opts.max_new_tokens, md.max_seq_len, tolerance)
            out.vs_self.append(_case(case, v, secs + time.perf_counter() - t_own))
            out.ref_self[case] = reference_json(own)
            if hf is not None:
                t_hf = time.perf_counter()
                scores = hf.score(run.prompt_ids, list(run.tokens))
                v = judge(run, scores, stops, opts.max_new_tokens, md.max_seq_len, tolerance)
                out.vs_hf.append(_case(case, v, time.perf_counter() - t_hf))
                out.ref_hf[case] = reference_json(scores)
    if on_request and total:
        on_request(total, total)
    rounds = sum(r.rounds for r in runs)
    out.runs = len(runs)
    out.tau = sum(len(r.tokens) - 1 for r in runs) / rounds if rounds else None
    return out


def runner_tau(program: SpeculatorProgram, tokenizer, prompts: list[Prompt], options: RunOptions,
               ks: list[int]) -> float | None:
    """tau = (emitted - 1) / rounds of the reference runner over prompts x K (as `run_requests`):
    the full-precision program's tau that a quantized program's drift is measured against."""
    runner = ReferenceRunner()
    emitted = rounds = 0
    for k in ks:
        opts = RunOptions(**{**options.__dict__, "chain_len": k})
        for p in prompts:
            run = runner.run(program, tokenizer, p.text, opts)
            emitted, rounds = emitted + len(run.tokens) - 1, rounds + run.rounds
    return emitted / rounds if rounds else None
