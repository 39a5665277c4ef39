"""A failing golden prompt shrunk (`golden verify --shrink`): fewer new tokens and a smaller K that
still diverge from the golden's recorded tokens the same way.

A golden records the tokens of one prompt, so the prompt is kept (`KEPT_PROMPT`); what shrinks is
max new tokens and K. The expected tokens of a candidate with max new tokens m are the recorded
tokens' first m (greedy output does not depend on K, and a run capped at m emits the first m of
the run capped at the golden's max new); a candidate past the recorded length of a run that did
not end by a stop token has no expected tokens and is not tried. A candidate is run as
`golden verify` runs a prompt (the route's runner, graph-owned outputs, `guarded_run`: a crash is
the prompt's finding) and compared by `golden_diff`'s own token rule, so its message has the same
form and `shrink.search.failure_kind` tells the same way. Only the diffs of the tokens (`tokens`,
`length`, `crashed`) shrink: a stat diff (rounds, accepted counts, tau) is recorded for the
golden's K and max new tokens exactly, and says so.

Worked example: a runner that emits one token past max new tokens on a golden of K 4, max new
48: the prompt is kept, max new tokens shrinks to 1 (the bonus and one extra), K to 1.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from eagle3_check.jobs.check.shrink import request_probe
from eagle3_check.jobs.golden.diff import GoldenDiff, token_diff
from eagle3_check.jobs.golden.file import Golden, GoldenPrompt
from eagle3_check.program.contract import read_metadata
from eagle3_check.program.owned import graph_owned
from eagle3_check.runners.in_process import as_runner
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.rules import STOP
from eagle3_check.shrink.search import (
    Bounds,
    Failure,
    Request,
    ShrinkResult,
    budget_shares,
    failure_kind,
    shrink,
)

SHRINKS = ("tokens", "length", "crashed")  # the diff fields that shrink
KEPT_PROMPT = "prompt (the golden records tokens for this prompt only)"
STOPPED = (STOP,)  # the stop reason after which the recorded tokens are complete


@dataclass
class GoldenShrink:
    golden: str  # the golden's key stem
    prompt_id: str
    diff: GoldenDiff
    result: ShrinkResult | None = None
    note: str = ""  # why it was not shrunk


def expected_tokens(want: GoldenPrompt, max_new: int) -> list[int] | None:
    """The recorded tokens a run capped at `max_new` must emit (None: the golden does not say)."""
    if max_new <= len(want.tokens):
        return list(want.tokens[:max_new])
    return list(want.tokens) if want.stop_reason in STOPPED else None


def golden_failure(stem: str, want: GoldenPrompt, tokens: list[int], tie_tolerance: float,
                   crash: str | None = None) -> Failure | None:
    """How a run's `tokens` (or its `crash`) differ from `want` (already cut to the request), or None."""
    if crash is not None:
        msg = f"{stem} '{want.prompt_id}': {crash}"
        return Failure(failure_kind(msg), msg, None, list(want.tokens), None)
    d = token_diff(stem, want.prompt_id, tokens, want, tie_tolerance)
    if d is None:
        return None
    return Failure(failure_kind(d.message), d.message, d.index, list(want.tokens), list(tokens))


def golden_probe(program, tokenizer, golden: Golden, want: GoldenPrompt, runner):
    """A probe running one request of the golden's prompt as `run_golden` does."""
    owned = graph_owned(program)
    stem = golden.key.stem

    def run_one(req: Request, prompt, opts) -> Failure | None:
        expected = expected_tokens(want, req.max_new_tokens)
        if expected is None:
            return None
        cut = dataclasses.replace(want, tokens=expected, margins=list(want.margins[: len(expected)]))
        seam = as_runner(runner or ReferenceRunner())  # a fresh reference runner a probe, as before
        obs = seam.observe(owned, tokenizer, prompt.request(), opts, what=f"'{want.prompt_id}'")
        return golden_failure(stem, cut, obs.tokens or [], golden.tie_tolerance, crash=obs.failure)

    return request_probe(golden.run_options(), tokenizer, None, run_one)


def shrink_golden_diffs(outcome, goldens: dict[str, Golden], build, runner, budget_s: float,
                        on_probe=None) -> list[GoldenShrink]:
    """Shrinks the prompt of every token diff of `outcome` (a GateOutcome; `goldens`: stem -> its
    Golden; `build(key) -> (program, tokenizer)`), the budget shared out over the diffs still to go.
    The outcome's diffs are not touched."""
    firsts: dict[tuple[str, str], GoldenDiff] = {}
    for d in outcome.golden_diffs:
        firsts.setdefault((d.golden, d.prompt_id), d)  # the token diff comes first when there is one
    todo = [GoldenShrink(stem, pid, d) for (stem, pid), d in firsts.items() if stem in goldens]
    shrinkable = [g for g in todo if g.diff.field in SHRINKS]
    for g in todo:
        if g.diff.field not in SHRINKS:
            g.note = (f"not shrunk: a {g.diff.field} diff is recorded for the golden's K and max new tokens "
                      "exactly (only token diffs shrink)")
    cache: dict[str, tuple] = {}
    for g, share in zip(shrinkable, budget_shares(len(shrinkable), budget_s)):
        golden = goldens[g.golden]
        want = next(p for p in golden.prompts if p.prompt_id == g.prompt_id)
        if g.golden not in cache:
            cache[g.golden] = build(golden.key)
        program, tokenizer = cache[g.golden]
        probe = golden_probe(program, tokenizer, golden, want, runner)
        original = Request(tuple(want.prompt_ids), golden.key.max_new, golden.key.k)
        first = probe(original)
        if first is None or first.kind != failure_kind(g.diff.message) and g.diff.field != "crashed":
            g.note = "not shrunk: it does not differ the same way when run again"
            continue
        md = read_metadata(program.metadata())
        ids = len(want.prompt_ids)
        bounds = Bounds(frame_head=ids, min_prompt=ids, k_range=tuple(md.k_range))
        g.result = shrink(original, probe, bounds, share, on_probe=on_probe, original_failure=first)
        g.result.kept.append(KEPT_PROMPT)
    return todo
