"""The differences of runs from a golden (`diff_golden`): an exact comparison a person can act on.

Per prompt, at most two differences are reported: the first differing token (its index,
both ids and the reference margin recorded there: a tiny margin points at numerics, a
large one at a logic change) and the first differing stat, in the order rounds, accepted
count of a round, tau, stop reason, and text (only when the ids agree: a detokenizer
change). Prompt ids are compared first: if they differ, the tokenizer or the options
changed and nothing after them is comparable.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from eagle3_check.gating.golden import Golden, GoldenPrompt, load_golden
from eagle3_check.run.crash import CRASHED
from eagle3_check.run.result import RunResult


@dataclass
class GoldenDiff:
    golden: str  # the golden's key stem
    prompt_id: str
    field: str  # prompt_ids | tokens | length | ... | k | missing | crashed
    message: str
    index: int | None = None  # first differing token (tokens) or round (accepted)
    got: object = None
    want: object = None
    margin: float | None = None  # the recorded reference margin at a differing token
    tie: bool = False  # that margin is within the golden's tie tolerance: a numerical tie, reported as one

    def to_json(self) -> dict:
        return asdict(self)


def runs_by_prompt(report_or_runs) -> dict[str, RunResult]:
    """Accepts a CheckReport, a {prompt_id: RunResult} mapping, or (prompt_id, RunResult) pairs /
    RequestOutcome-like objects (with .prompt_id and .run)."""
    if hasattr(report_or_runs, "outcomes"):
        report_or_runs = report_or_runs.outcomes
    if isinstance(report_or_runs, Mapping):
        return dict(report_or_runs)
    out: dict[str, RunResult] = {}
    for item in report_or_runs:
        pid, run = (item.prompt_id, item.run) if hasattr(item, "run") else item
        out[pid] = run
    return out


def diff_golden(report_or_runs, golden: Golden | str | Path) -> list[GoldenDiff]:
    """Exact comparison of runs with a golden: [] when identical, else one or two diffs a prompt
    (the first differing token, and the first differing stat)."""
    g = golden if isinstance(golden, Golden) else load_golden(golden)
    runs = runs_by_prompt(report_or_runs)
    stem = g.key.stem
    diffs: list[GoldenDiff] = []
    for want in g.prompts:
        pid = want.prompt_id
        run = runs.get(pid)
        if run is None:
            diffs.append(GoldenDiff(stem, pid, "missing", f"{stem} '{pid}': no run for this prompt"))
            continue
        if run.stop_reason == CRASHED:  # crash.crashed_run: the reason is its one note
            diffs.append(GoldenDiff(stem, pid, "crashed", f"{stem} '{pid}': {'; '.join(run.notes) or 'crashed'}"))
            continue
        if run.k != g.key.k:
            diffs.append(GoldenDiff(stem, pid, "k", f"{stem} '{pid}': run used K = {run.k}, golden K = {g.key.k}",
                                    got=run.k, want=g.key.k))
            continue
        if list(run.prompt_ids) != want.prompt_ids:
            i = _first_diff(run.prompt_ids, want.prompt_ids)
            diffs.append(GoldenDiff(
                stem, pid, "prompt_ids",
                f"{stem} '{pid}': prompt ids differ at {i} (tokenizer or options changed): "
                f"got {_at(run.prompt_ids, i)}, golden {_at(want.prompt_ids, i)}",
                index=i, got=_at(run.prompt_ids, i), want=_at(want.prompt_ids, i)))
            continue
        tok = token_diff(stem, pid, list(run.tokens), want, g.tie_tolerance)
        if tok:
            diffs.append(tok)
        stat = _stat_diff(stem, pid, run, want, tokens_differ=tok is not None)
        if stat:
            diffs.append(stat)
    return diffs


def _first_diff(a: list, b: list) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def _at(seq: list, i: int):
    return seq[i] if i < len(seq) else None


def token_diff(stem: str, pid: str, got: list[int], want: GoldenPrompt, tie_tolerance: float) -> GoldenDiff | None:
    """The first differing token; a tie (still a difference) where the recorded margin there is
    within the golden's tie tolerance."""
    i = _first_diff(got, want.tokens)
    if got == want.tokens:
        return None
    margin = want.margins[i] if i < len(want.margins) else None
    if i < len(got) and i < len(want.tokens):
        tie = margin is not None and margin <= tie_tolerance
        what = f"a tie: margin within the recorded tolerance {tie_tolerance:.3g}; " if tie else ""
        msg = (f"{stem} '{pid}': token {i} differs: got {got[i]}, golden {want.tokens[i]} "
               f"({what}reference margin there {margin:.3g}; {i} tokens before it identical)")
        return GoldenDiff(stem, pid, "tokens", msg, i, got[i], want.tokens[i], margin, tie)
    msg = (f"{stem} '{pid}': emitted {len(got)} tokens, golden {len(want.tokens)} "
           f"(first {i} identical; first extra/missing: got {_at(got, i)}, golden {_at(want.tokens, i)})")
    return GoldenDiff(stem, pid, "length", msg, i, _at(got, i), _at(want.tokens, i), margin)


def _stat_diff(stem: str, pid: str, run: RunResult, want: GoldenPrompt, tokens_differ: bool) -> GoldenDiff | None:
    if run.rounds != want.rounds:
        return GoldenDiff(stem, pid, "rounds", f"{stem} '{pid}': rounds {run.rounds}, golden {want.rounds} "
                          f"(tau {run.tau:.3f}, golden {want.tau:.3f})",
                          got=run.rounds, want=want.rounds)
    if list(run.accepted) != want.accepted:
        j = _first_diff(list(run.accepted), want.accepted)
        return GoldenDiff(stem, pid, "accepted",
                          f"{stem} '{pid}': accepted count of round {j}: got {_at(run.accepted, j)}, "
                          f"golden {_at(want.accepted, j)}", index=j,
                          got=_at(run.accepted, j), want=_at(want.accepted, j))
    if run.tau != want.tau:
        return GoldenDiff(stem, pid, "tau", f"{stem} '{pid}': tau {run.tau:.4f}, golden {want.tau:.4f}",
                          got=run.tau, want=want.tau)
    if run.stop_reason != want.stop_reason:
        return GoldenDiff(stem, pid, "stop_reason",
                          f"{stem} '{pid}': stop reason '{run.stop_reason}', golden '{want.stop_reason}'",
                          got=run.stop_reason, want=want.stop_reason)
    if not tokens_differ and run.text != want.text:
        i = _first_diff(list(run.text), list(want.text))
        return GoldenDiff(stem, pid, "text",
                          f"{stem} '{pid}': same tokens, text differs at char {i} (detokenizer changed): "
                          f"got {run.text[i:i + 20]!r}, golden {want.text[i:i + 20]!r}", index=i,
                          got=run.text, want=want.text)
    return None



def format_diffs(diffs: list[GoldenDiff]) -> str:
    if not diffs:
        return "golden: identical"
    ties = sum(d.tie for d in diffs)
    head = "golden: DIFFERS" + (f" ({ties} of them ties)" if ties else "")
    return "\n".join([head, *(f"  {d.message}" for d in diffs)])
