"""The gate's failing request checks, shrunk: runner vs self reference, runner vs HF reference.

Each failing case (a prompt at one K) is run again as `check` runs it (`jobs.check.prompt_set.run_check`:
the runner isolated, its calls audited, the same reference), and when it fails there it is shrunk
(`jobs.check.shrink.shrink_report`) within a share of the budget. A case that fails in both request
checks is shrunk once, against the self reference (the program's own target: the fair one, and no
HF model needed to replay it). The gate's own verdicts and counts are not touched: the result sits
in the check's `details["shrunk"][case]`.

Worked example: the gate of a .pte whose runner emits one token past max new tokens fails
'runner vs self reference' on every prompt; each is shrunk to BOS + the template, max new
tokens 2, K 1, replayed by `eagle3-check check --pte F --reference self --prompt '' -k 1
--max-new-tokens 2`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.binary import run_exec_check
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.jobs.check.shrink import shrink_exec_report, shrink_report
from eagle3_check.jobs.gate.model import GateReport
from eagle3_check.judge.self_ref import SelfReference
from eagle3_check.shrink.search import ShrinkResult, budget_shares
from eagle3_check.status import FAIL

REQUEST_CHECKS = {"runner vs self reference": "self", "runner vs HF reference": "hf"}


@dataclass
class GateShrink:
    check: str  # the gate check the case failed in
    case: str  # its case name ("p1", or "p1 K=3" over several K)
    prompt: Prompt
    k: int
    reference: str  # "self" or "hf": what the case is replayed against
    result: ShrinkResult | None = None
    note: str = ""  # why it was not shrunk


def failing_cases(report: GateReport, prompts: list[Prompt], ks: list[int]) -> list[GateShrink]:
    """The failing cases of the request checks, one per (prompt, K), the self reference's first."""
    names = {(f"{p.id} K={k}" if len(ks) > 1 else p.id): (p, k) for k in ks for p in prompts}
    out, seen = [], set()
    for chk in report.checks:
        if chk.name not in REQUEST_CHECKS:
            continue
        for case in chk.cases:
            if case.status == FAIL and case.name in names and case.name not in seen:
                seen.add(case.name)
                out.append(GateShrink(chk.name, case.name, *names[case.name], REQUEST_CHECKS[chk.name]))
    return out


def gate_ks(report: GateReport) -> list[int]:
    """The K values the request checks ran (the gate's info, else the first request check's details)."""
    ks = report.info.get("k")
    if ks is None:
        ks = next((c.details.get("k") for c in report.checks if c.name in REQUEST_CHECKS), None)
    return ks if isinstance(ks, list) else [ks] if ks is not None else []


def shrink_gate(report: GateReport, inputs, program, hf, budget_s: float, on_probe=None,
                shares: Iterator[float] | None = None) -> list[GateShrink]:
    """Shrinks every failing request case of `report` (`inputs`: its GateInputs; `hf`: its HF
    reference or None), the budget shared out over the cases still to go (`shares`: one share a
    case from a generator the caller shares with the gate's suite cases, in place of `budget_s`)."""
    todo = failing_cases(report, inputs.prompts, gate_ks(report))
    own = SelfReference(program)
    for g, share in zip(todo, shares if shares is not None else budget_shares(len(todo), budget_s)):
        ref = own if g.reference == "self" else hf
        opts = dataclasses.replace(inputs.options, chain_len=g.k)
        again = run_check(program, inputs.tokenizer, ref, [g.prompt], opts, inputs.tolerance, runner=inputs.plugin)
        if again.outcomes[0].verdict.status != FAIL:
            g.note = f"passes when run again as check runs it ({again.outcomes[0].verdict.message})"
            continue
        [(outcome, g.result)] = shrink_report(again, [g.prompt], program, inputs.tokenizer, ref, opts,
                                              inputs.tolerance, inputs.plugin, share, on_probe=on_probe)
        chk = next(c for c in report.checks if c.name == g.check)
        chk.details.setdefault("shrunk", {})[g.case] = outcome.shrunk
    return todo


def shrink_exec_gate(report, inputs, runner, program, hf, budget_s: float, on_probe=None, shares=None) -> list:
    """A binary's gate (`gate --runner exec:...`): each failing request case (`jobs.gate.shrink.failing_cases`)
    run again through the binary and shrunk (`shrink_exec_report`), as `jobs.gate.shrink.shrink_gate` does in
    process (`shares` as there); the result sits in the check's `details["shrunk"][case]`."""
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
