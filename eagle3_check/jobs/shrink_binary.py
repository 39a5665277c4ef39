"""A runner binary's failing requests shrunk (`check --runner exec:... --shrink`): shrink/search.py's
search with a probe that runs one request through the binary as `jobs.check.binary.run_exec_check` does.

A binary takes its prompt as text (the seed's `--prompt`), so every candidate is text: the ids
between the frame (BOS and the chat template, `jobs.check.shrink.prompt_frame`) decoded, and tried only
when that text encodes back to the candidate's ids (`jobs.check.shrink.request_text`). Each probe
starts the binary once, so a binary's shrink costs a process start per probe (docs/shrinking.md).

Worked example: the fake runner with `--fake_bug=extra-token` (one token past max new tokens) on
the prompt 'count' (L 32), max new 64, K 4 shrinks to the template's frame (prompt text ''), max
new tokens 1, K 1.
"""

from __future__ import annotations

import dataclasses

from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.binary import ExecOutcome, ExecReport, run_exec_check
from eagle3_check.jobs.check.prompt_set import request_ids
from eagle3_check.jobs.check.shrink import prompt_frame, request_probe, request_text
from eagle3_check.program.contract import read_metadata
from eagle3_check.shrink.search import (
    Bounds,
    Failure,
    Request,
    ShrinkResult,
    budget_shares,
    failure_kind,
    normalise,
    shrink,
)
from eagle3_check.status import FAIL


def exec_kind(message: str) -> str:
    """A binary's failure kind: `failure_kind`, and for an error exit its first stderr line too (every
    error exit reads "exit status #"; a prompt the binary refuses is not the out-of-bounds reseed).

    'exit status 1; stderr: E [x.cpp:457] Index 48 is out of bounds ... | E [...] draft_decode failed' ->
    'exit status #; stderr: E […] Index # is out of bounds ...'."""
    head = failure_kind(message)
    if "stderr: " not in message:
        return head
    return f"{head}; stderr: {normalise(message.split('stderr: ', 1)[1].split(' | ', 1)[0])}"


def exec_failure(outcome: ExecOutcome) -> Failure | None:
    v = outcome.verdict
    if v.status != FAIL:
        return None
    got = list(outcome.output.ids) if outcome.output is not None and outcome.output.ids is not None else None
    return Failure(exec_kind(v.message), v.message, v.index, None, got)


KEPT_SPEC = "program spec (a runner binary runs the given .pte)"


def shrink_exec_report(report: ExecReport, prompts: list[Prompt], runner, program, tokenizer, reference, options,
                       tolerance, budget_s: float, on_probe=None) -> list[tuple[ExecOutcome, ShrinkResult]]:
    """Shrinks every failing request of a binary's `report` (`prompts`: its, in order), the budget
    shared out over the failing requests still to go; each result's `prompt_text` and `kept` are set
    (K is kept when the binary has no --chain flag)."""
    md = read_metadata(program.metadata())
    chain = runner.supports_chain() if hasattr(runner, "supports_chain") else True
    by_id = {p.id: (p, ids) for p, ids in zip(prompts, request_ids(tokenizer, prompts, options, md))}
    failing = [(o, f) for o in report.outcomes if (f := exec_failure(o)) is not None]
    out = []
    for (o, failure), share in zip(failing, budget_shares(len(failing), budget_s)):
        p, ids = by_id[o.prompt_id]
        frame = prompt_frame(tokenizer, options, ids)

        def run_one(req: Request, prompt: Prompt, opts) -> Failure | None:
            rep = run_exec_check(runner, program, tokenizer, reference, [prompt], opts, tolerance=tolerance)
            return exec_failure(rep.outcomes[0])

        probe = request_probe(options, tokenizer, frame, run_one)
        original = Request(tuple(ids), options.max_new_tokens, report.k)
        bounds = Bounds(*frame, md.min_prefill, tuple(md.k_range) if chain else (report.k, report.k))
        result = shrink(original, probe, bounds, share, on_probe=on_probe, original_failure=failure)
        result.prompt_text = p.text if result.shrunk == original else \
            request_text(tokenizer, options, list(result.shrunk.prompt_ids), frame)
        result.kept = [KEPT_SPEC] + ([] if chain else [f"K {report.k} (the binary has no --chain flag)"])
        out.append((o, result))
    return out


def shrink_exec_gate(report, inputs, runner, program, hf, budget_s: float, on_probe=None, shares=None) -> list:
    """A binary's gate (`gate --runner exec:...`): each failing request case (`jobs.gate.shrink.failing_cases`)
    run again through the binary and shrunk (`shrink_exec_report`), as `jobs.gate.shrink.shrink_gate` does in
    process (`shares` as there); the result sits in the check's `details["shrunk"][case]`."""
    from eagle3_check.jobs.gate.shrink import failing_cases, gate_ks
    from eagle3_check.judge.self_ref import SelfReference

    todo = failing_cases(report, inputs.prompts, gate_ks(report))
    own = SelfReference(program)
    for g, share in zip(todo, shares if shares is not None else budget_shares(len(todo), budget_s)):
        ref = own if g.reference == "self" else hf
        opts = dataclasses.replace(inputs.options, chain_len=g.k)
        again = run_exec_check(runner, program, inputs.tokenizer, ref, [g.prompt], opts, tolerance=inputs.tolerance)
        if again.outcomes[0].verdict.status != FAIL:
            g.note = f"passes when run again through the binary ({again.outcomes[0].verdict.message})"
            continue
        [(_, g.result)] = shrink_exec_report(again, [g.prompt], runner, program, inputs.tokenizer, ref, opts,
                                             inputs.tolerance, share, on_probe=on_probe)
        chk = next(c for c in report.checks if c.name == g.check)
        chk.details.setdefault("shrunk", {})[g.case] = {**g.result.to_json(), "prompt_text": g.result.prompt_text}
    return todo


def shrink_exec_case(case, env, runner, budget_s: float, on_probe=None) -> tuple[ShrinkResult | None, dict | None, str]:
    """A failing suite case through a binary (`check --runner exec:... --suite NAME --shrink`): a plain
    case (`jobs.suites.shrink.plain`) a binary takes is run again as `check` runs a request through it, on the
    suite's one program, and shrunk (its spec is kept: the binary runs the given .pte). (result, its
    JSON for the case's details, a note why not when there is no result)."""
    from eagle3_check.jobs.suites.binary import _as_text, skip_reason
    from eagle3_check.jobs.suites.execute import case_setup
    from eagle3_check.jobs.suites.shrink import EnvReference, plain
    from eagle3_check.runners.options import stop_set
    from eagle3_check.suites.request import CaseSkip, pick_prompt

    why = plain(case) or skip_reason(case)
    if why:
        return None, None, f"not shrunk: {why}"
    setup = case_setup(case, env)
    base, md, k, options = setup.base, setup.md, setup.k, setup.options
    prompt, ids, _ = pick_prompt(case, env, base, md, k, options, [], stop_set(env.tokenizer, md, options).ids, [])
    try:
        text, options = _as_text(prompt, ids, options, env.tokenizer)
    except CaseSkip as e:
        return None, None, f"not shrunk: {e}"
    p = Prompt(case.name, text)
    ref = EnvReference(env, base)
    report = run_exec_check(runner, base, env.tokenizer, ref, [p], options, tolerance=env.tolerance)
    if report.outcomes[0].verdict.status != FAIL:
        return None, None, "not shrunk: it passes as a check request (only the case's own expectations fail it)"
    [(_, result)] = shrink_exec_report(report, [p], runner, base, env.tokenizer, ref, options, env.tolerance,
                                       budget_s, on_probe=on_probe)
    return result, {**result.to_json(), "prompt_text": result.prompt_text}, ""
