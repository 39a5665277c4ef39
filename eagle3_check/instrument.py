"""An instrumented program wrapper: records every call (method, tokens, positions, shapes).

Cases assert on the record: call counts ("one target_verify per round, no standalone
decode"), the exact reseed tokens/positions, and that no KV position >= max_seq_len
was ever written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from eagle3_check.contract import SpeculatorProgram


@dataclass
class Call:
    method: str
    tokens: list[int]
    positions: list[int]
    feature: torch.Tensor | None  # [1, T, H] input feature (draft_decode only), on CPU
    out_ids: list[int]
    out_feature: torch.Tensor  # [1, T, H] returned feature / g, on CPU


class RecordingProgram(SpeculatorProgram):
    def __init__(self, inner: SpeculatorProgram):
        self.inner = inner
        self.calls: list[Call] = []

    def metadata(self) -> dict[str, Any]:
        return self.inner.metadata()

    def reset(self) -> None:
        self.calls.clear()
        self.inner.reset()

    def _record(self, method, tokens, positions, feature, out):
        ids, feat = out
        self.calls.append(Call(
            method,
            tokens.reshape(-1).tolist(),
            positions.reshape(-1).tolist(),
            None if feature is None else feature.detach().cpu().clone(),
            ids.reshape(-1).tolist(),
            feat.detach().cpu().clone(),
        ))
        return out

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        return self._record("prefill", tokens, positions, None, self.inner.prefill(tokens, positions))

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        return self._record("target_verify", tokens, positions, None, self.inner.target_verify(tokens, positions))

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        return self._record(
            "draft_decode", tokens, positions, feature, self.inner.draft_decode(tokens, feature, positions)
        )

    def of(self, method: str) -> list[Call]:
        return [c for c in self.calls if c.method == method]

    def max_position(self) -> int:
        return max((p for c in self.calls for p in c.positions), default=-1)


def call_problems(rec: RecordingProgram, run, max_seq_len: int) -> list[str]:
    """The call-log invariants of DESIGN §2 for a finished run (`run` is a RunResult); [] if all hold.

    - one prefill, first, of the prompt at positions 0..L-1;
    - one target_verify per round (no standalone decode), each [anchor, p0..pK-1] at
      anchor_pos..anchor_pos+K with anchor_pos = L + sum over earlier rounds of (a + 1);
    - K draft_decode calls per round (seed or reseed + K-1 chain steps), none without a round;
    - each reseed carries the round's emitted tokens (accepted proposals, corrected) at
      anchor_pos..anchor_pos+a;
    - no KV position >= max_seq_len, in any method.

    Worked example: L = 10, K = 2, accepted = [1, 0] -> calls: prefill 0..9; draft 0..9 (seed),
    draft 10 (chain); verify 10..12; draft 10..11 (reseed with the 2 emitted), draft 12;
    verify 12..14 -> 2 verifies, 4 draft calls.
    """
    out: list[str] = []
    L, k = len(run.prompt_ids), run.k
    pre = rec.of("prefill")
    if len(pre) != 1 or rec.calls[0].method != "prefill":
        out.append(f"expected one prefill as the first call, got {len(pre)} prefill call(s)")
    elif pre[0].tokens != run.prompt_ids or pre[0].positions != list(range(L)):
        out.append(f"prefill got {len(pre[0].tokens)} tokens at {_span(pre[0].positions)}, expected the prompt at 0..{L - 1}")
    verifies, drafts = rec.of("target_verify"), rec.of("draft_decode")
    if len(verifies) != run.rounds:
        out.append(f"{len(verifies)} target_verify calls for {run.rounds} rounds (expected one per round)")
    if len(drafts) != run.rounds * k:
        out.append(f"{len(drafts)} draft_decode calls for {run.rounds} rounds of K = {k} (expected {run.rounds * k})")
    anchor_pos, emitted = L, 1
    v_at = [i for i, c in enumerate(rec.calls) if c.method == "target_verify"]
    for r, (i, a) in enumerate(zip(v_at, run.accepted), start=1):
        v = rec.calls[i]
        want = list(range(anchor_pos, anchor_pos + k + 1))
        if v.positions != want:
            out.append(f"round {r}: target_verify at {_span(v.positions)}, expected {_span(want)}")
        if v.tokens[:1] != run.tokens[emitted - 1 : emitted]:
            out.append(f"round {r}: verify anchor {v.tokens[:1]} is not the last emitted token")
        block = run.tokens[emitted : emitted + a + 1]
        nxt = rec.calls[i + 1] if i + 1 < len(rec.calls) else None
        reseed = nxt if nxt is not None and nxt.method == "draft_decode" else None
        if reseed is not None and (reseed.tokens != block or reseed.positions != list(range(anchor_pos, anchor_pos + a + 1))):
            out.append(f"round {r}: reseed {reseed.tokens} at {_span(reseed.positions)}, expected the emitted "
                       f"{block} at {anchor_pos}..{anchor_pos + a}")
        anchor_pos, emitted = anchor_pos + a + 1, emitted + a + 1
    top = rec.max_position()
    if top >= max_seq_len:
        bad = next(c for c in rec.calls if c.positions and max(c.positions) == top)
        out.append(f"{bad.method} wrote KV position {top} >= max_seq_len {max_seq_len}")
    return out


def _span(positions: list[int]) -> str:
    return f"{positions[0]}..{positions[-1]}" if positions else "(none)"
