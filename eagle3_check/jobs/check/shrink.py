"""Shrinking the failing requests of a check report: the probe and the bounds, for every kind of runner.

`check_probe` runs one `shrink.search.Request` exactly as `run_check` runs a prompt (the runner isolated,
its calls recorded and audited, the reference teacher-forced, the verdict's rules), with the
prompt given as ids, max new tokens and K from the request; a FAIL verdict is a `shrink.search.Failure`.
`shrink_report` shrinks every failing request of a report within one shared budget and puts
each result beside its original (`RequestOutcome.shrunk`); the original verdicts and counts are
not touched. The frame a search keeps (`prompt_frame`) is BOS and the chat template's prefix
and suffix as they occur in the request's ids (the longest matching head and tail).

Worked example: a mutant that emits one token past max new tokens, prompt 'p1' of 12 ids (BOS +
11), max new 64: the shrunk request is BOS + the least ids the program's min prefill allows,
max new tokens 2 (the length rule breaks once max new tokens caps inside a round), K as small
as the bug allows.

Every probe is one request made from a candidate (`request_probe`, also the goldens' and a binary's).
A runner binary's report (`shrink_exec_report`) is shrunk with the same search, each candidate run as
`jobs.check.binary.run_exec_check` runs a request. A binary takes its prompt as text (the seed's
`--prompt`), so every candidate is text: the ids between the frame decoded, tried only when that text
encodes back to the candidate's ids; each probe starts the binary once (docs/shrinking.md). Worked
example: the fake runner with `--fake_bug=extra-token` (one token past max new tokens) on the prompt
'count' (L 32), max new 64, K 4 shrinks to the template's frame (prompt text ''), max new tokens 1, K 1.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from eagle3_check.errors import Eagle3CheckError
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.binary import ExecOutcome, ExecReport, run_exec_check
from eagle3_check.jobs.check.prompt_set import CheckReport, RequestOutcome, request_ids, run_check
from eagle3_check.program.contract import read_metadata
from eagle3_check.runners.options import RunOptions, prompt_ids
from eagle3_check.shrink.search import (
    DEFAULT_BUDGET_S,
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
from eagle3_check.tokenizer import Tokenizer

LIMIT_WORDS = ("max_seq_len", "context", "prefill", "position")  # a failure kind that involves the spec's limits


def outcome_failure(outcome: RequestOutcome) -> Failure | None:
    """A failing request's `Failure` (its verdict's rule as the kind), None when it passed or tied."""
    v = outcome.verdict
    if v.status != FAIL:
        return None
    expected = list(outcome.reference["tokens"]) if outcome.reference else None
    return Failure(failure_kind(v.message), v.message, v.index, expected, list(outcome.run.tokens))


def prompt_frame(tokenizer: Tokenizer, options: RunOptions, ids: list[int]) -> tuple[int, int]:
    """(head, tail): how many ids at the front (BOS, the template's prefix) and at the end (its
    suffix) a search keeps. Raw: BOS alone. The frame is matched in the ids themselves, so a
    tokenizer that merges across the prefix's edge keeps only what matches."""
    bos = [] if options.bos_id == -1 else [options.bos_id]
    pre = bos if options.raw else bos + tokenizer.encode(options.chat_prefix)
    suf = [] if options.raw else tokenizer.encode(options.chat_suffix)
    head = next((i for i, (a, b) in enumerate(zip(ids, pre)) if a != b), min(len(ids), len(pre)))
    rest = ids[head:]
    tail = next((i for i, (a, b) in enumerate(zip(reversed(rest), reversed(suf))) if a != b),
                min(len(rest), len(suf)))
    return head, tail


def check_probe(program, tokenizer: Tokenizer, reference, options: RunOptions, tolerance, runner,
                rebuild: Callable[[dict], tuple] | None = None,
                text_frame: tuple[int, int] | None = None) -> Callable[[Request], Failure | None]:
    """A probe running one request as `run_check` does. `rebuild(spec) -> (program, reference)`
    gives the program of a request's spec fields (None: the request has no spec). `text_frame`
    (head, tail): the original prompt was text, so the runner gets text again: the ids between
    the frame decoded (`request_text`); a candidate whose text does not encode back to its ids
    is not tried (it counts as passing)."""

    def run_one(req: Request, prompt: Prompt, opts: RunOptions) -> Failure | None:
        prog, ref = rebuild(req.spec_dict()) if req.spec and rebuild else (program, reference)
        report = run_check(prog, tokenizer, ref, [prompt], opts, tolerance, runner=runner)
        return outcome_failure(report.outcomes[0])

    return request_probe(options, tokenizer, text_frame, run_one)


def request_probe(options: RunOptions, tokenizer: Tokenizer, text_frame: tuple[int, int] | None,
                  run_one: Callable[[Request, Prompt, RunOptions], Failure | None]) -> Callable[[Request], Failure | None]:
    """The one probe of every job (check, its binary route, goldens): a shrink candidate made a request (the
    options with its max new tokens and K; its prompt ids, or with `text_frame` (head, tail), the original
    being text, the text between the frame, `request_text`: a candidate whose text does not encode back to
    its ids is not tried, it counts as passing), then `run_one(candidate, prompt, options)`: the job's run
    of it over the runner seam (runners/seam.py) and its failure, or None."""

    def probe(req: Request) -> Failure | None:
        opts = dataclasses.replace(options, max_new_tokens=req.max_new_tokens, chain_len=req.k)
        if text_frame is None:
            return run_one(req, Prompt("shrink", "", ids=tuple(req.prompt_ids)), opts)
        text = request_text(tokenizer, opts, list(req.prompt_ids), text_frame)
        return None if text is None else run_one(req, Prompt("shrink", text), opts)

    return probe


def request_text(tokenizer: Tokenizer, options: RunOptions, ids: list[int], frame: tuple[int, int]) -> str | None:
    """The prompt text whose request ids are `ids` (the ids between the frame decoded), or None
    when that text does not encode back to exactly `ids`."""
    head, tail = frame
    text = tokenizer.decode(ids[head: len(ids) - tail])
    try:
        again = prompt_ids(tokenizer, text, options)
    except Eagle3CheckError:
        return None
    return text if again == ids else None


def shrink_report(report: CheckReport, prompts: list[Prompt], program, tokenizer: Tokenizer, reference,
                  options: RunOptions, tolerance, runner, budget_s: float = DEFAULT_BUDGET_S,
                  on_probe=None, spec: dict | None = None, spec_floors: dict | None = None,
                  rebuild=None) -> list[tuple[RequestOutcome, ShrinkResult]]:
    """Shrinks every failing request of `report` (`prompts`: the report's, in its order), the
    budget shared out evenly over the failing requests still to go; sets `outcome.shrunk`.
    `spec` / `spec_floors` / `rebuild`: the program spec fields to shrink where a failure involves
    the program's limits (`LIMIT_WORDS` in its kind), their floors, and how to rebuild the program."""
    md = read_metadata(program.metadata())
    by_id = dict(zip((p.id for p in prompts), request_ids(tokenizer, prompts, options, md)))
    failing = [(o, f) for o in report.outcomes if (f := outcome_failure(o)) is not None]
    out = []
    texts = {p.id: p.text for p in prompts if p.ids is None}  # text prompts: the runner gets text
    for (o, failure), share in zip(failing, budget_shares(len(failing), budget_s)):
        ids = by_id[o.prompt_id]
        limits = bool(spec and rebuild) and any(w in failure.kind for w in LIMIT_WORDS)
        original = Request(tuple(ids), options.max_new_tokens, report.k,
                           tuple(spec.items()) if limits else ())
        head, tail = prompt_frame(tokenizer, options, ids)
        probe = check_probe(program, tokenizer, reference, options, tolerance, runner, rebuild,
                            (head, tail) if o.prompt_id in texts else None)
        bounds = Bounds(head, tail, md.min_prefill, tuple(md.k_range), dict(spec_floors or {}) if limits else {})
        result = shrink(original, probe, bounds, share, on_probe=on_probe, original_failure=failure)
        text = None if o.prompt_id not in texts else texts[o.prompt_id] if result.shrunk.prompt_ids == tuple(ids) \
            else request_text(tokenizer, options, list(result.shrunk.prompt_ids), (head, tail))
        result.prompt_text = text
        o.shrunk = {**result.to_json(), "prompt_text": text}
        out.append((o, result))
    return out


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
