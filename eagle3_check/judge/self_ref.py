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

`self_score` teacher-forces the runner's tokens the same way: row i is the program's greedy
token after prompt + t_0..t_{i-1}, from the same window (w copies of t_{i-1} at L+i-1.., or the
look-back window near the context end), so where the runner agrees with `self_greedy` the
rows are the very calls `self_greedy` makes.

A prompt beyond the program's max prefill is prefilled in the chunks of DESIGN §2 rule 4
(`rules.prefill_chunks`), the only way such a program can take it; a chunk below the program's
declared min prefill (the tail rule's) is sent as the seed's runner sends it, and a program that
refuses it fails with one line (`rules.prefill_chunk`).
"""

from __future__ import annotations

import math

import torch

from eagle3_check.judge.hf import ReferenceResult, Scores, valid_prefix
from eagle3_check.program.contract import Metadata, SpeculatorProgram, read_metadata
from eagle3_check.runners.rules import prefill_chunk, prefill_chunks


def _prefill(program: SpeculatorProgram, prompt_ids: list[int], md: Metadata) -> int:
    """The bonus after `prompt_ids`: one prefill, or the rule-4 chunks when L > max prefill."""
    L = len(prompt_ids)
    chunks = prefill_chunks(L, md.max_prefill, md.min_prefill, md.sliding_window) if L > md.max_prefill else [L]
    start = 0
    for t in chunks:
        bonus, _ = prefill_chunk(program.prefill, torch.tensor([prompt_ids[start : start + t]]),
                                 torch.arange(start, start + t), chunks, md)
        start += t  # bonus [1, 1], feature [1, t, H]
    return int(bonus.reshape(-1)[0])


def verify_window(md: Metadata) -> int:
    """The window length the self reference uses: the smallest the program was exported for."""
    return md.min_verify_len if md.min_verify_len is not None else md.chain_len + 1


def _next_id(program: SpeculatorProgram, seq: list[int], w: int, max_seq_len: int) -> int:
    """The program's greedy token after `seq` (its KV filled up to len(seq) - 2), one target_verify."""
    pos = len(seq) - 1  # position of the last token
    if pos + w - 1 <= max_seq_len - 1:
        window, start, pick = [seq[-1]] * w, pos, 0
    else:
        window, start, pick = seq[pos - w + 1 :], pos - w + 1, w - 1
    ids, _ = program.target_verify(torch.tensor([window]), torch.arange(start, start + w))  # [1, w], [1, w, H]
    return int(ids.reshape(-1)[pick])


def self_score(program: SpeculatorProgram, prompt_ids: list[int], tokens: list[int]) -> Scores:
    """Teacher-forced rows over prompt + tokens (rows past max_seq_len - 1 are left out); no logits,
    so margins are inf and the runner token's rank is unknown: any difference fails."""
    md = read_metadata(program.metadata())
    w = max(1, verify_window(md))
    toks = valid_prefix(tokens, md.vocab_size) if md.vocab_size else list(tokens)
    program.reset()
    argmax = [_prefill(program, prompt_ids, md)]
    seq = list(prompt_ids)
    for t in toks:  # row i + 1 from prompt + t_0..t_i; the last token's position must be < max_seq_len
        seq.append(t)
        if len(seq) - 1 > md.max_seq_len - 1:
            break
        argmax.append(_next_id(program, seq, w, md.max_seq_len))
    n = len(argmax)
    return Scores(argmax, [math.inf] * n, [-math.inf] * n, [-1] * n, [-math.inf] * min(n, len(toks)),
                  [None] * min(n, len(toks)))


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
    seq = list(prompt_ids) + [_prefill(program, prompt_ids, md)]
    limit = min(max_new, md.max_seq_len - L)
    while len(seq) - L < limit and seq[-1] not in stop_ids:
        seq.append(_next_id(program, seq, w, md.max_seq_len))
    tokens = seq[L:]
    return ReferenceResult(tokens=tokens, margins=[math.inf] * len(tokens), runner_up=[-1] * len(tokens))


class SelfReference:
    """`greedy(prompt_ids, max_new, stop_ids)` and `score(prompt_ids, tokens)` like `HFReference`,
    through the program itself."""

    name = "self"

    def __init__(self, program: SpeculatorProgram):
        self.program = program

    def greedy(self, prompt_ids: list[int], max_new: int, stop_ids: frozenset[int] = frozenset()) -> ReferenceResult:
        return self_greedy(self.program, prompt_ids, max_new, stop_ids)

    def score(self, prompt_ids: list[int], tokens: list[int]) -> Scores:
        return self_score(self.program, prompt_ids, tokens)
