"""Verdicts (DESIGN §3): every emitted position judged against the teacher-forced reference.

The reference scores prompt + the runner's own tokens (`Scores`, one row per emitted token
plus one past the end). At emitted index i:
- the runner's token is the row's argmax: identical;
- else, where the row's top-1/top-2 margin AND top-1 minus the runner token's logit are both
  <= the tolerance at that row's top logit (`tolerance.Tolerance`) and the runner's token ranks
  within its top-N: a tie (never counted as identical);
- else: a failing position. Every failing position is counted; the first is reported with
  its forensics (index, both tokens, margin, the runner token's rank).
Ties at a margin above `Tolerance.noted_above` x the tolerance (above every margin shift measured
between a correct runner and the reference) are counted and named in the message: they pass (the
budget decides), but a correct runner has not made them, so they point at another program.
Then DESIGN §2's length and stop rules apply to the runner's own tokens: a stop token ends the
run (nothing after it), and `rules.expected_length` replays the run's accepted counts over its
tokens + the reference's next token after them (row n), which tells a run that stopped early.

Worked example: tokens [5, 7, 9], rows argmax [5, 8, 9, 2]: index 0 identical; index 1 a tie
if 7 is within the tolerance of 8 (else a failure); index 2 identical; row 3 (argmax 2) is the
next token: with max_new 3 the rules fix 3 tokens (max_new) and the length holds.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

from eagle3_check.judge.hf import Scores
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.runners.result import RunResult
from eagle3_check.runners.rules import EARLY, expected_length
from eagle3_check.status import FAIL, PASS, TIE, Status


@dataclass
class Position:
    """The judgement of one emitted index (forensics for a tie or a failure)."""

    index: int
    status: Status
    got: int
    want: int | None  # the reference's argmax (None: no reference row)
    margin: float  # reference top-1 minus top-2 (inf: the reference has no logits)
    gap: float  # reference top-1 minus the runner token's logit
    rank: int | None  # the runner token's rank in the row (1 = argmax; None: unknown)
    tolerance: float

    def describe(self) -> str:
        if self.want is None:
            return f"at token {self.index}: runner {self.got}, no reference row (past the context end)"
        rank = "unknown" if self.rank is None else str(self.rank)
        rel = "<=" if self.status == TIE else "vs"
        return (f"at token {self.index}: runner {self.got}, reference {self.want} (margin {self.margin:.3g} "
                f"{rel} tolerance {self.tolerance:.3g}, runner's token rank {rank}, {self.gap:.3g} below the top)")


def judge_position(i: int, got: int, scores: Scores, tolerance: Tolerance) -> Position:
    if i >= len(scores.argmax):
        return Position(i, FAIL, got, None, math.inf, math.inf, None, 0.0)
    want, top1 = scores.argmax[i], scores.top1[i]
    margin = top1 - scores.top2[i]
    tol = tolerance.at(top1)
    if got == want:
        return Position(i, PASS, got, want, margin, 0.0, 1, tol)
    gap = top1 - scores.given_logit[i] if i < len(scores.given_logit) else math.inf
    rank = scores.given_rank[i] if i < len(scores.given_rank) else None
    tie = margin <= tol and gap <= tol and rank is not None and rank <= tolerance.top_n
    return Position(i, TIE if tie else FAIL, got, want, margin, gap, rank, tol)


@dataclass
class Verdict:
    status: Status
    message: str
    index: int | None = None  # the first failure (or, for a tie, the first tie)
    got: int | None = None
    want: int | None = None
    margin: float | None = None  # reference top-1/top-2 margin at `index`
    rank: int | None = None  # the runner's token's rank at `index` (1 = argmax)
    expected_len: int | None = None
    expected_reason: str | None = None
    identical: int = 0  # judged positions, by outcome
    ties: int = 0
    fails: int = 0
    tie_at: list[int] = field(default_factory=list)
    tie_margins: list[float] = field(default_factory=list)  # the reference's top-1/top-2 margin at each tie_at
    tie_tolerances: list[float] = field(default_factory=list)  # the tie tolerance there
    ties_above_measured: int = 0  # ties at a margin above every shift measured (Tolerance.noted_above)

    @property
    def judged(self) -> int:
        return self.identical + self.ties + self.fails

    def to_json(self) -> dict:
        return {**asdict(self), "status": str(self.status)}


def judge(
    run: RunResult,
    scores: Scores,
    stop_ids: frozenset[int],
    max_new_tokens: int,
    max_seq_len: int,
    tolerance: Tolerance,
) -> Verdict:
    """Judges every emitted position of `run` against `scores` (see the module doc)."""
    tokens = list(run.tokens)
    n = len(tokens)
    pos = [judge_position(i, t, scores, tolerance) for i, t in enumerate(tokens)]
    ties = [p for p in pos if p.status == TIE]
    fails = [p for p in pos if p.status == FAIL]
    counts = dict(identical=n - len(ties) - len(fails), ties=len(ties), fails=len(fails),
                  tie_at=[p.index for p in ties], tie_margins=[p.margin for p in ties],
                  tie_tolerances=[p.tolerance for p in ties],
                  ties_above_measured=sum(p.margin > tolerance.noted_above * p.tolerance for p in ties))
    problems: list[tuple[int, str, Position | None]] = []  # (index, message, forensics)
    if fails:
        problems.append((fails[0].index, f"diverged {fails[0].describe()}", fails[0]))
    stop = next((i for i, t in enumerate(tokens) if t in stop_ids), None)
    if stop is not None and stop < n - 1:
        problems.append((stop + 1, f"stop token {tokens[stop]} at index {stop}, then {n - 1 - stop} more tokens", None))
    exp = None
    if n == 0:
        problems.append((0, "length: the runner emitted no token (the prefill token is always emitted)", None))
    else:
        after = [scores.argmax[n]] if n < len(scores.argmax) else []
        exp = expected_length(tokens + after, stop_ids, max_new_tokens, len(run.prompt_ids), run.k,
                              max_seq_len, run.accepted)
        if exp.reason == EARLY and exp.length < n:
            problems.append((exp.length, f"length: runner emitted {n} tokens, rules fix {exp.length} "
                             f"(the accepted counts {run.accepted} it reports)", None))
        elif exp.reason == EARLY or exp.length > n:
            nxt = f"; the reference's next token is {after[0]}" if after else ""
            fix = "the rules go on" if exp.reason == EARLY else f"rules fix {exp.length} ({exp.reason})"
            problems.append((n, f"length: runner emitted {n} tokens and stopped early, {fix}{nxt}", None))
        elif exp.length < n:
            problems.append((exp.length, f"length: runner emitted {n} tokens, rules fix {exp.length} ({exp.reason})", None))
    reason = exp.reason if exp and exp.reason != EARLY else None
    length = exp.length if exp else None
    tie_note = f"{len(ties)} tie{'s' * (len(ties) != 1)}" if ties else ""
    far = counts["ties_above_measured"]
    far_note = (f"; {far} of the ties at a margin above every shift a correct runner's logits showed "
                f"({tolerance.noted_above:g} x the tolerance, docs/calibration.md): another program?") if far else ""
    if problems:
        i, msg, p = min(problems, key=lambda x: x[0])
        extra = [f"{len(fails)} of {n} positions fail"] if fails else []
        extra += [tie_note + far_note] if ties else []
        extra += [m for j, m, _ in problems if m != msg]
        return Verdict(FAIL, msg + (f" ({'; '.join(extra)})" if extra else ""), index=i,
                       got=p.got if p else (tokens[i] if i < n else None),
                       want=p.want if p else (scores.argmax[i] if i < len(scores.argmax) else None),
                       margin=p.margin if p else None, rank=p.rank if p else None,
                       expected_len=length, expected_reason=reason, **counts)
    if ties:
        t = ties[0]
        return Verdict(TIE, f"{tie_note} in {n} tokens ({reason}); first {t.describe()}{far_note}", index=t.index,
                       got=t.got, want=t.want, margin=t.margin, rank=t.rank,
                       expected_len=length, expected_reason=reason, **counts)
    return Verdict(PASS, f"identical ({n} tokens, {reason})", expected_len=length, expected_reason=reason, **counts)
