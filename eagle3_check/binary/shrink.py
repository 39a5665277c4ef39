"""A runner binary's failing requests shrunk (`check --runner exec:... --shrink`): gating/shrink.py's
search with a probe that runs one request through the binary as `binary.check.run_exec_check` does.

A binary takes its prompt as text (the seed's `--prompt`), so every candidate is text: the ids
between the frame (BOS and the chat template, `shrink_check.prompt_frame`) decoded, and tried only
when that text encodes back to the candidate's ids (`shrink_check.request_text`). Each probe
starts the binary once, so a binary's shrink costs a process start per probe (docs/shrinking.md).

Worked example: the fake runner with `--fake_bug=extra-token` (one token past max new tokens) on
the prompt 'count' (L 32), max new 64, K 4 shrinks to the template's frame (prompt text ''), max
new tokens 1, K 1.
"""

from __future__ import annotations

import dataclasses

from eagle3_check.binary.check import ExecOutcome, ExecReport, run_exec_check
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.gating.check import request_ids
from eagle3_check.gating.shrink import (
    Bounds,
    Failure,
    Request,
    ShrinkResult,
    budget_shares,
    failure_kind,
    shrink,
)
from eagle3_check.gating.shrink_check import prompt_frame, request_text
from eagle3_check.program.contract import read_metadata
from eagle3_check.status import FAIL


def exec_failure(outcome: ExecOutcome) -> Failure | None:
    v = outcome.verdict
    if v.status != FAIL:
        return None
    got = list(outcome.output.ids) if outcome.output is not None and outcome.output.ids is not None else None
    return Failure(failure_kind(v.message), v.message, v.index, None, got)


def shrink_exec_report(report: ExecReport, prompts: list[Prompt], runner, program, tokenizer, reference, options,
                       tolerance, budget_s: float, on_probe=None) -> list[tuple[ExecOutcome, ShrinkResult]]:
    """Shrinks every failing request of a binary's `report` (`prompts`: its, in order), the budget
    shared out over the failing requests still to go; each result's `prompt_text` is set."""
    md = read_metadata(program.metadata())
    by_id = {p.id: (p, ids) for p, ids in zip(prompts, request_ids(tokenizer, prompts, options, md))}
    failing = [(o, f) for o in report.outcomes if (f := exec_failure(o)) is not None]
    out = []
    for (o, failure), share in zip(failing, budget_shares(len(failing), budget_s)):
        p, ids = by_id[o.prompt_id]
        frame = prompt_frame(tokenizer, options, ids)

        def probe(req: Request, frame=frame) -> Failure | None:
            opts = dataclasses.replace(options, max_new_tokens=req.max_new_tokens, chain_len=req.k)
            text = request_text(tokenizer, opts, list(req.prompt_ids), frame)
            if text is None:
                return None
            rep = run_exec_check(runner, program, tokenizer, reference, [Prompt("shrink", text)], opts,
                                 tolerance=tolerance)
            return exec_failure(rep.outcomes[0])

        original = Request(tuple(ids), options.max_new_tokens, report.k)
        bounds = Bounds(*frame, md.min_prefill, tuple(md.k_range))
        result = shrink(original, probe, bounds, share, on_probe=on_probe, original_failure=failure)
        result.prompt_text = p.text if result.shrunk == original else \
            request_text(tokenizer, options, list(result.shrunk.prompt_ids), frame)
        out.append((o, result))
    return out
