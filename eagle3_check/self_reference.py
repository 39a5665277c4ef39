"""The self reference (DESIGN §3): greedy decoding through the program's own target methods.

`prefill`, then `target_verify` with one token of look-ahead. The verify window has the
program's smallest exported length w (`get_min_verify_len`; without a range, K + 1, the
one window known to work): `[last, last, ...]` at positions `pos..pos+w-1`, whose first
verify id is the greedy token for `pos + 1`. The padding slots are overwritten by the next
step (rollback by overwrite) and hidden by the causal mask meanwhile.

Near the context end, where `pos + w - 1` would pass `max_seq_len - 1`, the window looks
back instead: the last w tokens at `pos-w+1..pos`, and the last verify id is used. That
re-writes known slots with the same tokens; it only happens in the final w - 1 steps.

Worked example (w = 2): prompt of L = 3 -> prefill gives t0 (position 3);
target_verify([t0, t0], [3, 4]) -> ids[0] = t1 (position 4); target_verify([t1, t1], [4, 5])
-> t2; ... It isolates the speculative loop from the target implementation: the lossless
check that holds even for a quantized export. The program exposes no logits, so the result
has no margins (inf): every divergence from it is a failure, never a tie.
"""

from __future__ import annotations

import math

import torch

from eagle3_check.contract import Metadata, SpeculatorProgram, read_metadata
from eagle3_check.hf_reference import ReferenceResult


def verify_window(md: Metadata) -> int:
    """The window length the self reference uses: the smallest the program was exported for."""
    return md.min_verify_len if md.min_verify_len is not None else md.chain_len + 1


def self_greedy(
    program: SpeculatorProgram,
    prompt_ids: list[int],
    max_new: int,
    stop_ids: frozenset[int] = frozenset(),
) -> ReferenceResult:
    """Up to `max_new` greedy tokens (never past max_seq_len), ending right after a stop token."""
    md = read_metadata(program.metadata())
    w = max(1, verify_window(md))
    L = len(prompt_ids)
    program.reset()
    bonus, _ = program.prefill(torch.tensor([prompt_ids]), torch.arange(L))  # [1, 1], [1, L, H]
    seq = list(prompt_ids) + [int(bonus.reshape(-1)[0])]
    limit = min(max_new, md.max_seq_len - L)
    while len(seq) - L < limit and seq[-1] not in stop_ids:
        pos = len(seq) - 1  # position of the last token
        if pos + w - 1 <= md.max_seq_len - 1:
            window, start, pick = [seq[-1]] * w, pos, 0
        else:
            window, start, pick = seq[pos - w + 1 :], pos - w + 1, w - 1
        ids, _ = program.target_verify(torch.tensor([window]), torch.arange(start, start + w))  # [1, w], [1, w, H]
        seq.append(int(ids.reshape(-1)[pick]))
    tokens = seq[L:]
    return ReferenceResult(tokens=tokens, margins=[math.inf] * len(tokens), runner_up=[-1] * len(tokens))


class SelfReference:
    """`greedy(prompt_ids, max_new, stop_ids)` like `HFReference`, through the program itself."""

    name = "self"

    def __init__(self, program: SpeculatorProgram):
        self.program = program

    def greedy(self, prompt_ids: list[int], max_new: int, stop_ids: frozenset[int] = frozenset()) -> ReferenceResult:
        return self_greedy(self.program, prompt_ids, max_new, stop_ids)
