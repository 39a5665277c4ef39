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
