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

from eagle3_check.program.contract import SpeculatorProgram, read_metadata
from eagle3_check.reference.self_ref import verify_window
from eagle3_check.run.rules import prefill_chunks

FAR = 0.8  # tau below FAR x the expected tau is flagged


@torch.no_grad()
def step0_agreement(program: SpeculatorProgram, seq: list[int], prompt_len: int) -> tuple[int, int]:
    """(hits, rows) of the draft's teacher-forced step-0 proposals on `seq` (see module doc)."""
    md = read_metadata(program.metadata())
    n, L, w = len(seq), prompt_len, max(1, verify_window(md))
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

    from eagle3_check.run.options import RunOptions

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
        h, r = step0_agreement(program, list(o.run.prompt_ids) + list(o.run.tokens), len(o.run.prompt_ids))
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
