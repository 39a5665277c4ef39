"""The differences of runs from a golden (`diff_golden`): an exact comparison a person can act on.

Per prompt, at most two differences are reported: the first differing token (its index,
both ids and the reference margin recorded there: a tiny margin points at numerics, a
large one at a logic change) and the first differing stat, in the order rounds, accepted
count of a round, tau, stop reason, and text (only when the ids agree: a detokenizer
change). Prompt ids are compared first: if they differ, the tokenizer or the options
changed and nothing after them is comparable.

Tokens hold on every backend of a golden's fixture and dtype (its margins are outside the tie
tolerance), but acceptance is the draft's: on another backend than the golden's (an eager golden
run on a `.pte`), in a reduced precision, the draft's near-ties round the other way and rounds,
accepted counts and tau move with correct tokens (`stats_exact`, DESIGN §3). There those three
are reported as notes, not differences; everywhere else they are exact.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

from eagle3_check.jobs.golden.file import Golden, GoldenPrompt, load_golden
from eagle3_check.runners.crash import CRASHED
from eagle3_check.runners.result import RunResult


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


# the stats that follow the draft's numerics (compared exactly only where `stats_exact`)
ACCEPTANCE_STATS = ("rounds", "accepted", "tau")


def stats_exact(golden_backend: str, golden_dtype: str, run_backend: str | None,
                golden_sha256: str | None = None, run_sha256: str | None = None) -> bool:
    """Whether a run's rounds, accepted counts and tau must equal the golden's. In float32 always:
    the backends agree to ~1e-6 (the committed tiny-llama `.pte` golden equals its eager twin,
    `tests/pte/test_golden_pte.py`). In a reduced precision the draft's near-ties round differently
    on each program: SmolLM2's bf16 golden `code-explain-recursion` runs 9 rounds eager and 10 on
    its XNNPACK export (docs/goldens.md "Across backends"), and 9 or 10 on two exports of the same
    spec (a draft margin of 0.0625 to 0.125 at round 4). So there acceptance is exact on an eager
    golden's own backend (the fixture is the program) and on a `.pte` golden's very program (its
    `program_sha256`, compared with the run's), and a note everywhere else."""
    if golden_dtype == "float32":
        return True
    if (run_backend or golden_backend) != golden_backend:
        return False
    return golden_backend != "pte" or (golden_sha256 is not None and golden_sha256 == run_sha256)


def acceptance_note(what: str, key, run_backend: str | None, golden_sha256: str | None = None,
                    run_sha256: str | None = None, draft: str = "") -> str:
    """The note for an acceptance stat that `stats_exact` does not compare (`what`: the difference;
    `draft`: the golden's draft near-ties, draft_margins.describe)."""
    backend = run_backend or key.backend
    if backend != key.backend:
        why = (f"an {key.backend} golden run on a {backend} program in {key.dtype} (acceptance follows the draft's "
               f"numerics there; tokens compared exactly; record a {backend} golden to compare it exactly)")
    elif golden_sha256 is None:
        why = (f"a {key.dtype} pte golden that does not name the program it was recorded on (acceptance is exact on "
               "that program alone; tokens compared exactly; re-record it on this .pte with `eagle3-check golden "
               "record --pte FILE --force` to compare it exactly)")
    else:
        why = (f"a {key.dtype} pte golden recorded on program sha256 {golden_sha256[:12]}, run on "
               f"{(run_sha256 or 'an unnamed program')[:12]} (acceptance follows the draft's numerics, which rounding "
               "settles differently on each export; tokens compared exactly; record a golden on this .pte to compare "
               "it exactly)")
    return f"{what}: {why}" + (f"; {draft}" if draft else "")


def diff_golden(report_or_runs, golden: Golden | str | Path, run_backend: str | None = None,
                notes: list[str] | None = None, run_sha256: str | None = None) -> list[GoldenDiff]:
    """Exact comparison of runs with a golden: [] when identical, else one or two diffs a prompt
    (the first differing token, and the first differing stat). `run_backend` is the backend the
    runs ran on (None: the golden's) and `run_sha256` the `.pte` they ran on; where `stats_exact` says
    no, an acceptance stat that differs is appended to `notes` instead (with why and the golden's
    draft near-ties up to that round), not returned."""
    from eagle3_check.jobs.golden.draft_margins import describe

    g = golden if isinstance(golden, Golden) else load_golden(golden)
    exact = stats_exact(g.key.backend, g.key.dtype, run_backend, g.program_sha256, run_sha256)
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
        acceptance = _acceptance_diff(stem, pid, run, want)
        if acceptance and not exact:
            if notes is not None:
                first = _first_diff(list(run.accepted), want.accepted)  # the first round that differs
                notes.append(acceptance_note(acceptance.message, g.key, run_backend, g.program_sha256, run_sha256,
                                             describe(want.draft_near_ties, first)))
            acceptance = None
        stat = acceptance or _stat_diff(stem, pid, run, want, tokens_differ=tok is not None)
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


def _acceptance_diff(stem: str, pid: str, run: RunResult, want: GoldenPrompt) -> GoldenDiff | None:
    """The first differing acceptance stat (ACCEPTANCE_STATS, in that order), or None."""
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
    return None


def _stat_diff(stem: str, pid: str, run: RunResult, want: GoldenPrompt, tokens_differ: bool) -> GoldenDiff | None:
    """The first differing stat after acceptance: the stop reason, then the text (same tokens only)."""
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



def compared_line(prompts: int, differs: bool) -> str:
    """The golden comparison's line: "identical" only for prompts that were compared; zero prompts
    compared is said as such (no golden applied: the verdict fails by the skip rule)."""
    if not prompts:
        return "golden: nothing compared (no golden ran)"
    return "golden: DIFFERS" if differs else "golden: identical"


def format_diffs(diffs: list[GoldenDiff]) -> str:
    if not diffs:
        return "golden: identical"
    ties = sum(d.tie for d in diffs)
    head = "golden: DIFFERS" + (f" ({ties} of them ties)" if ties else "")
    return "\n".join([head, *(f"  {d.message}" for d in diffs)])
