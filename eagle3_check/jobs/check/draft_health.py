"""Draft health: what greedy equality cannot see.

A wrong draft (misread rope, a dropped norm, the wrong target) still passes `check`: greedy
verification emits the target's tokens whatever the draft proposes; only acceptance drops.
Two numbers make it visible:

- **step-0 agreement**, teacher-forced through the program's own methods: over every request's
  sequence S (prompt + emitted), the share of positions p where the draft's first proposal from
  (token S[p+1], feature f_p) equals the target's greedy token for position p + 2. It does not
  depend on the runner: high agreement with low acceptance points at the runner, low agreement
  at the draft (or at how it was loaded).
- **acceptance against expectation**: tau and per-position acceptance (n_alpha) beside an
  expected tau (`check --expect-tau X`, else the fixture card's tau at this K when the run is
  the card's own: its prompts, its options, its K); a tau below `FAR` x expected is flagged.

Teacher forcing (worked example, prompt L = 3, S = [a, b, c | d, e, f], n = 6): prefill(a b c)
gives features f0..f2 and the greedy token for position 3 (V[2] = d); target_verify windows over
positions 3..5 (tokens d e f) give V[3..5] and f3..f5. draft_decode(tokens S[1:6] = b c d e f,
features f0..f4, positions 0..4): row p proposes position p + 2, and is scored against V[p + 1]
for p >= L - 2 = 1 (rows 1..4: labels V[2..5]); rows inside the prompt have no target label.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from eagle3_check.judge.self_ref import verify_window
from eagle3_check.program.contract import SpeculatorProgram, read_metadata
from eagle3_check.runners.rules import prefill_chunks

FAR = 0.8  # tau below FAR x the expected tau is flagged


def teacher_window(md) -> int:
    """The target_verify window teacher forcing walks the sequence with: the largest the program
    takes (its verify range's max, else the method's own bound, else K + 1). One call labels w
    positions and costs about what a w = 2 call costs (the weights are read once a call), so the
    smallest window (the self reference's, `verify_window`) would make draft health cost as many
    target forwards as the run itself: SmolLM2's verify range [2, 8], 64 tokens a request: 32 calls
    at w = 2, 8 at w = 8."""
    if md.max_verify_len is not None:
        return md.max_verify_len
    if md.verify_bounds is not None:
        return md.verify_bounds[1]
    return max(1, verify_window(md))


@torch.no_grad()
def step0_agreement(program: SpeculatorProgram, seq: list[int], prompt_len: int) -> tuple[int, int]:
    """(hits, rows) of the draft's teacher-forced step-0 proposals on `seq` (see module doc)."""
    md = read_metadata(program.metadata())
    n, L, w = len(seq), prompt_len, teacher_window(md)
    if n - L < 1 or L < 2:
        return 0, 0
    program.reset()
    s = torch.tensor([seq])  # [1, n]
    # a prompt past the max prefill (checked with --chunked-prefill) is prefilled in the rule-4 chunks
    chunks = prefill_chunks(L, md.max_prefill, md.min_prefill, md.sliding_window) if L > md.max_prefill else [L]
    feats, at = [], 0
    for t in chunks:
        bonus, feat = program.prefill(s[:, at : at + t], torch.arange(at, at + t))  # [1, 1], [1, t, H]
        feats.append(feat[0].clone())  # [t, H]; graph-owned outputs: the next prefill call overwrites feat
        at += t
    greedy = {L - 1: int(bonus.reshape(-1)[0])}  # position q -> target greedy token for q + 1
    start = L
    while start < n:
        begin = max(0, min(start, n - w, md.max_seq_len - w))  # look back near the ends
        window = seq[begin : begin + w] + [seq[-1]] * max(0, begin + w - n)  # padding: masked, rewritten
        ids, vfeat = program.target_verify(torch.tensor([window]), torch.arange(begin, begin + w))
        for i in range(w):
            if begin + i < n:
                greedy[begin + i] = int(ids.reshape(-1)[i])
        feats.append(vfeat[0, start - begin : n - begin].clone())  # [.., H]; copied before the next target_verify
        start = begin + w
    features = torch.cat(feats)[: n - 1]  # [n-1, H] f_0..f_{n-2}
    return _score(program, seq, L, md, features, greedy)


def _score(program, seq: list[int], L: int, md, features: torch.Tensor, greedy: dict[int, int]) -> tuple[int, int]:
    """(hits, rows): draft_decode over S[1:n] with features f_0..f_{n-2} ([n-1, H]) in prefill-sized
    chunks; row p proposes position p + 2, scored against greedy[p + 1] where known, for p >= L - 2."""
    n, s = len(seq), torch.tensor([seq])  # [1, n]
    hits = rows = 0
    chunk = max(1, md.max_prefill)
    for c in range(0, n - 1, chunk):
        pos = torch.arange(c, min(n - 1, c + chunk))  # rows p
        ids, _ = program.draft_decode(s[:, pos + 1], features[pos][None], pos)  # [1, T]
        for p, d in zip(pos.tolist(), ids.reshape(-1).tolist()):
            if p >= L - 2 and p + 1 in greedy:
                hits += int(d == greedy[p + 1])
                rows += 1
    return hits, rows


@torch.no_grad()
def step0_from_calls(program: SpeculatorProgram, calls, seq: list[int], prompt_len: int) -> tuple[int, int] | None:
    """(hits, rows) of step-0 agreement from a finished run's own call log (`instrument.Call`s, after its
    audit passed), or None when the log does not hold every feature f_0..f_{n-2} (then `step0_agreement`
    teacher-forces). No target forward: a prefill row, and a target_verify row i whose window tokens
    0..i are the final sequence's (the anchor and the accepted proposals), were computed on exactly the
    teacher-forced context (DESIGN §2: the KV before a window holds final tokens only). Worked example,
    L = 3, S = [a, b, c | d, e, f, g]: prefill(a b c) gives f0..f2 and greedy[2] = d; verify [d, e, x, y]
    at 3..6 accepting e (x != f): rows 0..1 give f3, f4 and greedy[3], greedy[4] = e, f; verify [f, g, ..]
    at 5..: rows 0..1 give f5, f6, greedy[5] = g, greedy[6] (the token after g). Only the last emitted
    token's successor can be missing (a corrected token ends the run unverified): fewer rows, same rule."""
    md = read_metadata(program.metadata())
    n, L = len(seq), prompt_len
    if n - L < 1 or L < 2:
        return 0, 0
    feats: dict[int, torch.Tensor] = {}
    greedy: dict[int, int] = {}
    for c in calls:
        if c.method not in ("prefill", "target_verify"):
            continue
        for i, (q, t) in enumerate(zip(c.positions, c.tokens)):
            if q >= n or t != seq[q]:
                break  # a rejected proposal: this row and the ones after it saw other tokens
            feats[q] = c.out_feature[0, i]  # [H]
            if c.method == "target_verify":
                greedy[q] = c.out_ids[i]
        if c.method == "prefill" and c.positions and c.positions[-1] == L - 1:
            greedy[L - 1] = c.out_ids[-1]  # the bonus: the last chunk's
    if any(q not in feats for q in range(n - 1)) or L - 1 not in greedy:
        return None
    features = torch.stack([feats[q] for q in range(n - 1)])  # [n-1, H]
    program.reset()  # the draft's cache is written from position 0, as teacher forcing does
    return _score(program, seq, L, md, features, greedy)


@dataclass
class DraftHealth:
    step0_agreement: float
    step0_rows: int
    tau: float
    n_alpha: list[float]
    expect_tau: float | None = None
    flags: list[str] = field(default_factory=list)
    expect_source: str | None = None  # "--expect-tau", or the card and K it came from

    def to_json(self) -> dict:
        return {"step0_agreement": self.step0_agreement, "step0_rows": self.step0_rows, "tau": self.tau,
                "n_alpha": self.n_alpha, "expect_tau": self.expect_tau, "expect_source": self.expect_source,
                "flags": self.flags}

    def lines(self) -> list[str]:
        alpha = " ".join(f"{a:.2f}" for a in self.n_alpha)
        exp = f" (expected {self.expect_tau:.2f}, {self.expect_source})" if self.expect_tau is not None else ""
        out = [f"draft health: step-0 agreement {self.step0_agreement:.3f} over {self.step0_rows} positions "
               f"(teacher-forced); tau {self.tau:.2f}{exp}; acceptance by position {alpha}"]
        return out + [f"draft health: FLAG {f}" for f in self.flags]


def card_expectation(card: dict | None, card_path: str, k: int, options, own_prompts: bool,
                     request=None) -> tuple[float | None, str]:
    """The card's tau at K when this run is the one the card measured, else (None, why not).

    The card ran the fixture's own request (`request`: its RunOptions as resolved from the
    fixture's own files, e.g. SmolLM2's ChatML frame or Gemma 3's raw text after BOS; default
    `RunOptions()`, the tiny fixtures' Gemma 4 frame) with `max_new_tokens=card["max_new_tokens"]`
    at K over the fixture's own prompts; any other prompt set or option changes tau, so no
    expectation."""
    from dataclasses import replace

    from eagle3_check.runners.options import RunOptions

    if card is None:
        return None, f"no card at {card_path}"
    row = card.get("k", {}).get(str(k))
    if not own_prompts or row is None:
        return None, "card not applicable: " + ("other prompts" if not own_prompts else f"no K={k} row")
    measured = replace(request or RunOptions(), max_new_tokens=card.get("max_new_tokens"), chain_len=None)
    if replace(options, chain_len=None) != measured:
        return None, "card not applicable: runner options differ from the card's defaults"
    return float(row["tau"]), f"card {card_path} at K={k}"


def step0_totals(program: SpeculatorProgram, outcomes) -> tuple[int, int]:
    """(hits, rows) of step-0 agreement over the requests' prompt ids and emitted tokens (sums:
    `check --workers` adds up each worker's)."""
    hits = rows = 0
    for o in outcomes:
        seq, L = list(o.run.prompt_ids) + list(o.run.tokens), len(o.run.prompt_ids)
        got = step0_from_calls(program, o.calls, seq, L) if getattr(o, "calls", None) else None
        h, r = got if got is not None else step0_agreement(program, seq, L)
        hits, rows = hits + h, rows + r
    return hits, rows


def assess(program: SpeculatorProgram | None, report, expect_tau: float | None = None,
           expect_source: str | None = None, step0: tuple[int, int] | None = None) -> DraftHealth:
    """Draft health of a `check` report (its requests' prompt ids and emitted tokens); `step0`:
    the (hits, rows) already counted elsewhere (by the workers), else counted here on `program`."""
    hits, rows = step0 if step0 is not None else step0_totals(program, report.outcomes)
    health = DraftHealth(hits / rows if rows else 0.0, rows, report.tau, report.n_alpha, expect_tau,
                         expect_source=expect_source if expect_tau is not None else None)
    if expect_tau is not None and report.tau < FAR * expect_tau:
        health.flags.append(
            f"tau {report.tau:.2f} is far below the expected {expect_tau:.2f} (< {FAR:.0%} of it): "
            "greedy equality still passes, but the draft proposes badly; check how it was loaded "
            "and that it was trained for this target")
    return health
