"""The gate's request checks: every prompt x K through the reference runner, judged against the
self reference and the HF reference, and the self reference judged against the HF reference.

The program has no logits, so the self reference has no margins: where it agrees with the HF
reference so far, the HF margin is borrowed for the tie forensics; elsewhere a divergence fails.
After a contract violation (e.g. draft ids outside the vocab) the remaining requests are
reported as skipped: the program is broken, running on would only repeat the message.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field

from eagle3_check.contract import SpeculatorProgram, read_metadata
from eagle3_check.crash import RunCrash, crash_reason, guarded_run
from eagle3_check.errors import ContractViolation
from eagle3_check.fixtures import Prompt
from eagle3_check.hf_reference import ReferenceResult
from eagle3_check.junit import JUnitCase
from eagle3_check.options import RunOptions, stop_set
from eagle3_check.runner import ReferenceRunner, RunResult
from eagle3_check.self_reference import self_greedy
from eagle3_check.verdict import FAIL, PASS, TIE, compare


@dataclass
class RequestCases:
    vs_self: list[JUnitCase] = field(default_factory=list)
    vs_hf: list[JUnitCase] = field(default_factory=list)
    self_vs_hf: list[JUnitCase] = field(default_factory=list)  # one per prompt
    runs: int = 0
    tau: float | None = None  # over all runs: (emitted - 1) / rounds


def borrow_margins(self_ref: ReferenceResult, hf: ReferenceResult | None) -> ReferenceResult:
    """The self reference with the HF margins where HF agrees with it so far (inf elsewhere)."""
    margins = list(self_ref.margins)
    if hf is not None:
        for i, (a, b) in enumerate(zip(self_ref.tokens, hf.tokens)):
            if a != b:
                break
            margins[i] = hf.margins[i]
    return ReferenceResult(self_ref.tokens, margins, self_ref.runner_up)


def reference_vs_reference(self_ref: ReferenceResult, hf: ReferenceResult, tol: float) -> tuple[str, str]:
    """(status, message): the self reference against the HF reference, token for token."""
    for i, (a, b) in enumerate(zip(self_ref.tokens, hf.tokens)):
        if a != b:
            m = hf.margins[i]
            status = TIE if m < tol else FAIL
            return status, (f"{'tie' if status == TIE else 'diverged'} at token {i}: self {a}, HF {b} "
                            f"(HF margin {m:.3g}, tolerance {tol:g})")
    if len(self_ref.tokens) != len(hf.tokens):
        return FAIL, f"length: self reference {len(self_ref.tokens)} tokens, HF reference {len(hf.tokens)}"
    return PASS, f"identical ({len(hf.tokens)} tokens)"


def run_requests(
    program: SpeculatorProgram,
    tokenizer,
    prompts: list[Prompt],
    options: RunOptions,
    ks: list[int],
    tolerance: float,
    hf=None,
) -> RequestCases:
    md = read_metadata(program.metadata())
    stops = stop_set(tokenizer, md, options).ids
    runner = ReferenceRunner()
    out = RequestCases()
    self_cache: dict[tuple, ReferenceResult] = {}
    hf_cache: dict[tuple, ReferenceResult] = {}
    runs: list[RunResult] = []
    broken = None

    def both(case: str, status: str, message: str, secs: float = 0.0) -> None:
        out.vs_self.append(JUnitCase(case, status, message, secs))
        if hf is not None:
            out.vs_hf.append(JUnitCase(case, status, message, secs))

    for k in ks:
        opts = RunOptions(**{**options.__dict__, "chain_len": k})
        for p in prompts:
            case = f"{p.id} K={k}" if len(ks) > 1 else p.id
            if broken:
                both(case, "skip", f"not run after a contract violation: {broken}")
                continue
            t0 = time.perf_counter()
            try:
                run = guarded_run(runner, program, tokenizer, p.text, opts)
            except RunCrash as e:  # a contract violation or a crash fails the request, with the reason
                broken = str(e) if isinstance(e.__cause__, ContractViolation) else None
                both(case, FAIL, str(e), time.perf_counter() - t0)
                continue
            secs = time.perf_counter() - t0
            runs.append(run)
            key = (tuple(run.prompt_ids), max(run.max_new, 1))
            t_ref = time.perf_counter()  # the two references' time is the self-vs-HF case's time
            if hf is not None and key not in hf_cache:
                hf_cache[key] = hf.greedy(run.prompt_ids, key[1], stops)
            if key not in self_cache:
                try:
                    self_cache[key] = self_greedy(program, run.prompt_ids, key[1], stops)
                except Exception as e:  # noqa: BLE001 - the program's own target crashed: a finding
                    both(case, FAIL, f"self reference failed: {crash_reason(e)}", secs)
                    continue
                if hf is not None:
                    status, message = reference_vs_reference(self_cache[key], hf_cache[key], tolerance)
                    out.self_vs_hf.append(JUnitCase(p.id, status, message, time.perf_counter() - t_ref))
            v = compare(run, borrow_margins(self_cache[key], hf_cache.get(key)), stops, opts.max_new_tokens,
                        md.max_seq_len, tolerance)
            out.vs_self.append(JUnitCase(case, v.status, v.message, secs, json.dumps(v.to_json())))
            if hf is not None:
                v = compare(run, hf_cache[key], stops, opts.max_new_tokens, md.max_seq_len, tolerance)
                out.vs_hf.append(JUnitCase(case, v.status, v.message, secs, json.dumps(v.to_json())))
    rounds = sum(r.rounds for r in runs)
    out.runs = len(runs)
    out.tau = sum(len(r.tokens) - 1 for r in runs) / rounds if rounds else None
    return out
