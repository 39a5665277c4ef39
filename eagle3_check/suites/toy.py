"""A toy program with a known target and a controllable draft, for pinning runner arithmetic.

Target: greedy next token of t is `next_token(t)` (200..499: never a default stop id),
whatever the position. Feature rows are `[position, token]`, so a test can read which
verify rows were used to reseed. Draft: the row at position p holds the token at p + 1 and
proposes the token for p + 2; it proposes right unless p + 2 is in `wrong_at`, where it
proposes `next_token(...) + 1`. `g` rows are `[position, -token]`. `target_verify` takes a window
C inside the declared verify range only (`verify_range`, get_min/max_verify_len), as an exported
method does: another C raises `VerifyRangeError`, the runtime's error (DESIGN §2: "a clamped K the
program's target_verify cannot take is the runtime's error").

The greedy reference of a prompt is `greedy(prompt, n)`: the chain of next_token.

A suite case can run on it (`Case.toy`): a second program every run has, whatever it was given
(one `.pte` in the gate), of another size or with a declared sliding window (the chunk plan's
input; the toy's tokens do not depend on it). Such a case is judged by the toy's own target.
"""

from __future__ import annotations

from typing import Any

import torch

from eagle3_check.program.contract import SpeculatorProgram

LO, SPAN = 200, 300


class VerifyRangeError(RuntimeError):
    """target_verify called with a window C outside the toy's verify range (an exported method's
    input bounds refuse it at run time)."""


def next_token(t: int) -> int:
    return LO + (t * 7 + 3) % SPAN


def greedy(prompt: list[int], n: int) -> list[int]:
    out, t = [], prompt[-1]
    for _ in range(n):
        t = next_token(t)
        out.append(t)
    return out


def previous_token(u: int) -> int:
    """The toy token t (in LO..LO+SPAN-1) with next_token(t) = u: 7t + 3 = u - LO (mod SPAN), and
    7 * 43 = 301 = 1 (mod 300). Worked example: u = 304 -> 43 * 101 = 4343 = 143 (mod 300) -> t = 443,
    and next_token(443) = 200 + 3104 % 300 = 304."""
    return LO + (43 * (u - LO - 3) - LO) % SPAN


def prompt_to(end: int, n: int, head: list[int]) -> list[int]:
    """Prompt ids `head + [t]` whose greedy output's n-th token (index n - 1) is `end` (a toy token)."""
    t = end
    for _ in range(n):
        t = previous_token(t)
    return [*head, t]


class ToyProgram(SpeculatorProgram):
    def __init__(
        self,
        max_seq_len: int = 64,
        min_prefill: int = 1,
        max_prefill: int = 32,
        chain_len: int = 4,
        verify_range: tuple[int, int] = (2, 8),
        wrong_at: set[int] | None = None,
        vocab_size: int = 512,
        sliding_window: int | None = None,
    ):
        self.wrong_at = set(wrong_at or ())
        self._md = {
            "get_chain_len": chain_len,
            "get_max_prefill_chunk": max_prefill,
            "get_min_prefill_chunk": min_prefill,
            "get_max_seq_len": max_seq_len,
            "get_vocab_size": vocab_size,
            "get_min_verify_len": verify_range[0],
            "get_max_verify_len": verify_range[1],
        }
        if sliding_window is not None:  # declared only: the toy target does not depend on position
            self._md["get_sliding_window"] = sliding_window

    def metadata(self) -> dict[str, Any]:
        return dict(self._md)

    @staticmethod
    def _feature(tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:  # -> [1, T, 2]
        return torch.stack([positions.float(), tokens[0].float()], dim=-1)[None]

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, 2]
        return torch.tensor([[next_token(int(tokens[0, -1]))]]), self._feature(tokens, positions)

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, 2]
        lo, hi = self._md.get("get_min_verify_len", 1), self._md.get("get_max_verify_len", 1 << 30)
        if not lo <= tokens.shape[1] <= hi:
            raise VerifyRangeError(f"target_verify: window C = {tokens.shape[1]} is outside the method's "
                                   f"bounds [{lo}, {hi}] (K = C - 1 the program cannot take)")
        ids = torch.tensor([[next_token(int(t)) for t in tokens[0]]])
        return ids, self._feature(tokens, positions)

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, 2], [T] -> [1, T], [1, T, 2]
        out = []
        for t, p in zip(tokens[0].tolist(), positions.tolist()):
            guess = next_token(t)
            out.append(guess + 1 if p + 2 in self.wrong_at else guess)
        g = torch.stack([positions.float(), -tokens[0].float()], dim=-1)[None]
        return torch.tensor([out]), g
