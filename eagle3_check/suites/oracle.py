"""Acceptance-controlled oracle draft: the real draft head runs (and is timed), then its ids
are replaced by the known greedy continuation, right with a chosen probability.

For benchmarks whose target has random weights, where no draft head can be trained to a
realistic acceptance within a short budget. Each absolute position q is drawn once as
"right" (probability `accept`) or "wrong"; a draft row at position p proposes the token for
p + 2 (DESIGN §1: row i pairs the feature at p with the token at p + 1), so it returns
`sequence[p + 2]` when q = p + 2 is right, else `sequence[p + 2] + 1 (mod V)`, never the
greedy token. With i.i.d. positions, a round accepts its j-th proposal with probability
`accept ** (j + 1)`, so tau ~ 1 + sum_j accept ** j (K = 4, accept = 0.8: tau ~ 3.36).

Worked example: sequence = prompt + greedy = [5, 6, 7, 8, 9], accept table right at 3, wrong
at 4; draft rows at positions [1, 2] propose [sequence[3], sequence[4] + 1] = [8, 10].

The replacement is one gather on the device: no host synchronisation is added.
"""

from __future__ import annotations

import torch

from eagle3_check.program.contract import ProgramWrapper, SpeculatorProgram, read_metadata
from eagle3_check.runners.device_loop import program_device


def oracle_table(
    sequence: list[int],  # prompt + greedy continuation, indexed by absolute position
    accept: float,
    vocab_size: int,
    max_seq_len: int,
    seed: int = 0,
) -> tuple[torch.Tensor, torch.Tensor]:  # proposal [max_seq_len + 2] int64, right [max_seq_len + 2] bool
    """proposal[q] = the id an oracle row proposes for position q; right[q] = it is the greedy one."""
    n = max_seq_len + 2
    seq = torch.zeros(n, dtype=torch.long)
    m = min(len(sequence), n)
    seq[:m] = torch.tensor(sequence[:m], dtype=torch.long)
    gen = torch.Generator().manual_seed(seed)
    right = torch.rand(n, generator=gen) < accept
    right[m:] = False
    return torch.where(right, seq, (seq + 1) % vocab_size), right


class OracleDraftProgram(ProgramWrapper):
    """Wraps a program: every method runs as is; draft_decode's ids come from the oracle table."""

    def __init__(self, inner: SpeculatorProgram, sequence: list[int], accept: float, seed: int = 0):
        super().__init__(inner)
        self.device = program_device(inner)
        md = read_metadata(inner.metadata())
        if md.vocab_size is None:
            raise ValueError("the oracle needs get_vocab_size in the program's metadata")
        table, self.right = oracle_table(sequence, accept, md.vocab_size, md.max_seq_len, seed)
        self.shifted = table[2:].to(self.device)  # shifted[p] = the proposal for position p + 2
        self.accept = accept

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        _, g = self.inner.draft_decode(tokens, feature, positions)  # the real head runs
        return self.shifted[positions.to(self.device)][None], g
