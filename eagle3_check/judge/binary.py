"""Judging one run of a runner binary against the greedy reference (`--runner exec:...`).

Three modes, and the verdict says which one judged:
- ids: the binary printed `[ids] a,b,c` on stderr; the ids' bytes must be what stdout
  printed. Given the reference's teacher-forced `Scores` over the binary's own ids and a
  tolerance, every position is judged as `judge.verdict` judges a runner (identical /
  tie / fail, all failing positions counted, the first one's forensics); the length rules
  then run on the binary's ids plus the reference's next token after them (row n). Without
  scores the ids are compared exactly with the greedy reference (first difference fails).
- bytes: no ids. stdout's token bytes must equal the reference tokens' byte pieces
  concatenated (`byte_pieces`), for the N tokens the summary line reports. A byte
  difference cannot be called a tie (there are no token boundaries to judge), so it
  fails; the message gives the reference margin there.
- recovered: no ids, but the reference can score and re-decode (`recover`, a tolerance given):
  the ids are recovered from the bytes by aligning them with the reference's top tokens
  (`judge.recover`) and then judged as printed ids are, ties counted; a byte the reference's
  top tokens cannot continue fails with its offset.
All modes check N against the length DESIGN §2 fixes (`rules.allowed_lengths`), the header
(L, K, max_new) against the request, and R / tau against N.

What bytes cannot prove: two token sequences with the same bytes are indistinguishable (a
runner emitting " a" + "b" where the reference has " ab" passes), and the per-round
accepted counts are unknown, so where the context limit ends a run the rules allow a range
of N (below). Ids close the first gap; nothing the seed prints closes the second.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass

from eagle3_check.judge.hf import Scores
from eagle3_check.judge.recover import Recovery, recover_ids
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.judge.verdict import judge_position
from eagle3_check.runners.binary.byte_pieces import BytePieces
from eagle3_check.runners.binary.protocol import ExecOutput
from eagle3_check.runners.rules import CONTEXT, allowed_lengths
from eagle3_check.runners.seam import Observation
from eagle3_check.status import FAIL, PASS, TIE, Status

IDS, BYTES, RECOVERED = "ids", "bytes", "recovered"  # RECOVERED: ids recovered from the bytes (`recover`)


@dataclass
class ExecVerdict:
    status: Status  # pass | tie | fail
    message: str
    mode: str | None = None  # ids | bytes (None: the run produced nothing to judge)
    index: int | None = None  # first differing token (or the token whose bytes differ)
    got: int | None = None
    want: int | None = None
    margin: float | None = None
    expected: dict[int, str] | None = None  # N allowed by the rules -> its stop reason
    rank: int | None = None  # the binary's token's rank under the reference at `index` (ids mode, scored)
    judged: int = 0  # positions judged (0: nothing judged, e.g. a crash)
    ties: int = 0  # positions that differ within the tolerance (ids mode, scored)
    fails: int = 0  # failing positions (ids mode, scored; else 1 for a failure)
    tie_at: list[int] | None = None

    def to_json(self) -> dict:
        return {**asdict(self), "status": str(self.status)}


@dataclass(frozen=True)
class Request:
    """What the harness knows of one request, independently of the binary."""

    prompt_len: int  # L, from the harness's own prompt ids
    k: int
    max_new_tokens: int
    max_seq_len: int
    stop_ids: frozenset[int]
    k_asked: int | None = None  # the --chain the binary was given, when its profile maps it to another K

    def allowed(self, reference: list[int]) -> dict[int, str]:
        """Every N the rules allow given the greedy reference, with its stop reason (`rules.allowed_lengths`)."""
        return allowed_lengths(reference, self.stop_ids, self.max_new_tokens, self.prompt_len, self.k,
                               self.max_seq_len)


def _describe(allowed: dict[int, str]) -> str:
    if len(allowed) == 1:
        (n, why), = allowed.items()
        return f"{n} ({why})"
    return ", ".join(f"{n} ({why})" for n, why in sorted(allowed.items()))


def header_problems(out: ExecOutput, req: Request) -> list[str]:
    """The header and the stats against the request and against N."""
    probs = []
    max_new = min(req.max_new_tokens, req.max_seq_len - req.prompt_len)
    if out.prompt_len != req.prompt_len:
        probs.append(f"header: binary encoded L = {out.prompt_len} prompt tokens, the request is {req.prompt_len}")
    if out.k != req.k:
        clamp = (f" (--chain={req.k_asked}, which the binary's profile runs as K = {req.k}: <= 0 is get_chain_len, "
                 "then clamped to [1, 7])" if req.k_asked is not None and req.k_asked != req.k else "")
        probs.append(f"header: binary runs K = {out.k}, the request asks K = {req.k}{clamp}")
    if out.max_new != max_new:
        probs.append(f"header: max_new = {out.max_new}, rules give min({req.max_new_tokens}, "
                     f"{req.max_seq_len} - {req.prompt_len}) = {max_new}")
    n, r = out.tokens, out.rounds
    if n < 1:
        probs.append(f"stats: generated {n} tokens; the prefill bonus is always emitted")
    elif (r == 0) != (n == 1) or (r and not math.ceil((n - 1) / (req.k + 1)) <= r <= n - 1):
        probs.append(f"stats: {n} tokens in {r} rounds is impossible (each round emits 1..K+1 = {req.k + 1})")
    tau = (n - 1) / r if r else 0.0
    if abs(out.tau - tau) > 5e-4 + 1e-9:
        probs.append(f"stats: tau = {out.tau:.3f}, but (N - 1) / R = ({n} - 1) / {r} = {tau:.3f}")
    return probs


def judge(out: ExecOutput, ref: list[int], margins: list[float], pieces: BytePieces | None,
          req: Request, scores: Scores | None = None, tolerance: Tolerance | None = None,
          recover: Callable[[ExecOutput], Recovery] | None = None) -> ExecVerdict:
    """The verdict of one parsed run (see the module doc for the modes). Bytes, and ids without
    `scores`, are judged exactly: any difference fails, a near-tie included (its margin is shown).
    Ids with `scores` (the reference over prompt + the binary's ids) and `tolerance` get the
    per-position, tie-aware verdict of `judge.verdict`; so do text-only runs given `recover`
    (the ids recovered from the bytes, `judge.recover`) and `tolerance`."""
    if out.ids is not None and scores is not None and tolerance is not None:
        v = _judge_ids_scored(out, scores, tolerance, pieces, req)
    elif out.ids is None and recover is not None and tolerance is not None and pieces is not None:
        v = _judge_recovered(out, recover(out), tolerance, req)
    else:
        allowed = req.allowed(ref)
        v = _judge_ids(out, ref, margins, pieces, allowed) if out.ids is not None \
            else _judge_bytes(out, ref, margins, pieces, allowed)
        v.expected = allowed
        v.judged = out.tokens if v.status == PASS else max(out.tokens, 1)
        v.fails = int(v.status == FAIL)
    extra = header_problems(out, req)
    if extra and v.status != FAIL:
        v.status, v.message, v.fails = FAIL, "; ".join(extra), max(v.fails, 1)
    elif extra:
        v.message = "; ".join([v.message, *extra])
    return v


def _length(n: int, allowed: dict[int, str], mode: str, ref: list[int], margins: list[float]) -> ExecVerdict:
    if n in allowed:
        label = "ids recovered from the bytes" if mode == RECOVERED else mode
        return ExecVerdict(PASS, f"identical by {label} ({n} tokens, {allowed[n]})", mode)
    want = ref[n] if n < len(ref) else None
    return ExecVerdict(FAIL, f"length: binary emitted {n} tokens, rules fix {_describe(allowed)}", mode,
                       index=min(n, max(allowed)), want=want if n < max(allowed) else None,
                       got=None, margin=margins[n] if n < len(margins) else None)


def _ids_problem(out, pieces) -> ExecVerdict | None:
    """The [ids] line against the summary's N and stdout's bytes."""
    ids = out.ids
    if len(ids) != out.tokens:
        return ExecVerdict(FAIL, f"[ids] line has {len(ids)} ids, the summary says {out.tokens} tokens", IDS)
    if pieces is not None and pieces.of(ids) != out.text:
        at = _first_diff(pieces.of(ids), out.text)
        i = pieces.locate(ids, at)
        return ExecVerdict(FAIL, f"the [ids] line and stdout disagree at byte {at} (token {i} of the ids)", IDS,
                           index=i)
    return None


def _judge_recovered(out: ExecOutput, rec: Recovery, tolerance: Tolerance, req: Request) -> ExecVerdict:
    """The recovered ids judged as printed ids are (`_judge_ids_scored`); the walk's failure (no
    reference candidate continues the bytes) fails at its token with its byte offset. The quirks
    met on the way are named in the message."""
    if rec.ids is None:
        return ExecVerdict(FAIL, f"bytes: {rec.failure}", RECOVERED, index=rec.index, judged=max(out.tokens, 1), fails=1)
    v = _judge_ids_scored(out, rec.scores, tolerance, None, req, ids=rec.ids, mode=RECOVERED)
    if rec.quirks:
        v.message = "; ".join([v.message, *rec.quirks])
    return v


def _judge_ids_scored(out, scores: Scores, tolerance: Tolerance, pieces, req: Request, ids: list[int] | None = None,
                      mode: str = IDS) -> ExecVerdict:
    """Every position of the binary's ids against the reference's rows (judge.verdict's
    rule), then the length rules over ids + the reference's next token (row n).
    Worked example: ids [5, 7, 9], rows argmax [5, 8, 9, 2]: index 1 is a tie if 7 is within the
    tolerance of 8 (else it fails); the length rules see [5, 7, 9, 2]: with max_new 3, N = 3 holds."""
    if ids is None:  # printed ids: checked against stdout's bytes first (recovered ids match them by construction)
        problem = _ids_problem(out, pieces)
        if problem:
            problem.judged, problem.fails = max(out.tokens, 1), 1
            return problem
        ids = out.ids
    pos = [judge_position(i, t, scores, tolerance) for i, t in enumerate(ids)]
    fails = [p for p in pos if p.status == FAIL]
    ties = [p for p in pos if p.status == TIE]
    counts = dict(judged=len(ids), ties=len(ties), fails=len(fails), tie_at=[p.index for p in ties])
    seq = list(ids) + list(scores.argmax[len(ids):len(ids) + 1])  # the binary's ids, then the next token
    allowed = req.allowed(seq)
    if fails:
        f = fails[0]
        more = f"; {len(fails)} failing positions" if len(fails) > 1 else ""
        return ExecVerdict(FAIL, f"diverged {f.describe()}{more}", mode, index=f.index, got=f.got, want=f.want,
                           margin=f.margin, rank=f.rank, expected=allowed, **counts)
    v = _length(len(ids), allowed, mode, seq, scores.margins)
    v.expected = allowed
    for key, value in counts.items():
        setattr(v, key, value)
    if v.status == FAIL:
        v.fails = max(v.fails, 1)
    elif ties:
        t = ties[0]
        v.status, v.index, v.got, v.want, v.margin, v.rank = TIE, t.index, t.got, t.want, t.margin, t.rank
        rest = v.message.replace("identical by", f"the other {len(ids) - len(ties)} identical by", 1)  # not all are
        v.message = f"{len(ties)} tie position(s) within the tolerance (first {t.describe()}); {rest}"
    return v


def _judge_ids(out, ref, margins, pieces, allowed) -> ExecVerdict:
    ids = out.ids
    problem = _ids_problem(out, pieces)
    if problem:
        return problem
    for i, (got, want) in enumerate(zip(ids, ref)):
        if got != want:
            return ExecVerdict(
                FAIL, f"diverged at token {i}: binary {got}, reference {want} (reference margin "
                f"{margins[i]:.3g}; binaries are judged exactly, a near-tie included)", IDS,
                index=i, got=got, want=want, margin=margins[i])
    return _length(len(ids), allowed, IDS, ref, margins)


def _judge_bytes(out, ref, margins, pieces, allowed) -> ExecVerdict:
    if pieces is None:
        return ExecVerdict(FAIL, "cannot judge: no [ids] line on stderr and the tokenizer is not byte-level BPE")
    n = out.tokens
    want = pieces.of(ref[:n])
    if out.text == want and n <= len(ref):
        return _length(n, allowed, BYTES, ref, margins)
    whole = pieces.whole_tokens(ref, out.text)
    if pieces.of(ref[:whole]) == out.text:  # stdout is exactly some reference prefix
        if whole != n:
            return ExecVerdict(FAIL, f"stdout carries the bytes of {whole} reference tokens, the summary says {n}",
                               BYTES, index=min(whole, n))
        return _length(n, allowed, BYTES, ref, margins)
    at = _first_diff(out.text, pieces.of(ref))
    i = pieces.locate(ref, at)
    if i >= len(ref):  # every reference token matched; stdout goes on
        return ExecVerdict(FAIL, f"length: binary emitted {n} tokens, rules fix {_describe(allowed)}; stdout "
                           f"goes on after all {len(ref)} reference tokens with {out.text[at:at + 24]!r}", BYTES,
                           index=len(ref))
    m = margins[i]
    hint = " (a small margin points at numerics, a large one at logic)"
    return ExecVerdict(
        FAIL, f"bytes differ at offset {at}, in reference token {i} (id {ref[i]} {pieces.pieces[ref[i]]!r}, "
        f"margin {m:.3g}): stdout has {out.text[at:at + 16]!r}; {whole} tokens before it match{hint}", BYTES,
        index=i, want=ref[i], margin=m)


def _first_diff(a: bytes, b: bytes) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def judge_observation(obs: Observation, ref: list[int], margins: list[float], pieces: BytePieces | None,
                      req: Request, score: Callable[[list[int]], Scores] | None = None,
                      tolerance: Tolerance | None = None, vocab_size: int | None = None,
                      decode: Callable[[list[int], int], list[int]] | None = None) -> tuple[ExecVerdict, ExecOutput | None]:
    """The verdict of one observation of a binary (`runners.seam.Observation`, `ExecRunner.observe`): its
    process's failure, an output off the protocol, or `judge`. With
    `score` (the reference's teacher-forced scores of the request's prompt + given tokens) and
    `tolerance`, a binary that prints its ids is judged per position, ties included; with
    `decode` too (the reference's greedy tokens after the prompt + a prefix), so is a text-only
    binary: its ids are recovered from the bytes (`judge.recover`). An `[ids]` id outside the
    vocabulary (`vocab_size`, else the byte pieces') fails the request, never the harness."""
    if obs.failure:  # the process failed (a status other than 0, or none: hung), or its output is off the protocol
        past = past_context(obs.process, ref, req) if obs.process.returncode != 0 else ""
        return ExecVerdict(FAIL, obs.failure + past, fails=1), None
    out = obs.output
    vocab = vocab_size or (max(pieces.pieces) + 1 if pieces is not None and pieces.pieces else None)
    bad = next((i for i, t in enumerate(out.ids or ()) if vocab and not 0 <= t < vocab), None)
    if bad is not None:
        return ExecVerdict(FAIL, f"output: [ids] id {out.ids[bad]} at index {bad} is outside the vocabulary "
                           f"(ids 0..{vocab - 1}); expected the ids the binary emitted", fails=1), None
    scores = score(list(out.ids)) if score is not None and tolerance is not None and out.ids is not None else None
    recover = None
    if score is not None and decode is not None and pieces is not None:
        def recover(o: ExecOutput) -> Recovery:
            obs.recovery = recover_ids(o.text, o.tokens, pieces, ref, score, decode)
            return obs.recovery
    return judge(out, ref, margins, pieces, req, scores, tolerance, recover), out


def past_context(proc, ref: list[int], req: Request) -> str:
    """Names the seed's reseed bug where it shows: an error exit whose stderr has the runtime's
    out-of-bounds line on a request the rules end by the context limit (main.cpp reseeds the draft
    after the last verify before checking the room left, writing positions up to
    anchor_pos + a + K - 1 >= max_seq_len)."""
    if proc.timed_out or b"out of bounds" not in proc.stderr.lower() or CONTEXT not in req.allowed(ref).values():
        return ""
    return (f" (the draft was reseeded past max_seq_len {req.max_seq_len} after the last verify: the seed's runner "
            "reseeds before checking the room left, ac69057c9b..6d2645a8ac; the rules end this run by the context "
            "limit without that call)")
