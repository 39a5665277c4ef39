"""Graph-owned outputs without a graph: each method's outputs live in one buffer of its own.

A CUDA graph's outputs, and an ExecuTorch program's memory-planned outputs, are buffers the
program owns: an output is valid only until the next call of the same method, which overwrites
it. `OutputBuffers` gives any program that discipline on CPU (`EagerBackend(reuse_outputs=True)`,
the mutant probes' toy program): `own(method, ids, feature)` copies the outputs into the
method's buffer (sized for `rows` positions, allocated on first use) and returns views of it.

Worked example (rows 64): draft_decode at positions 0..9 returns ids = buf[:, :10]; the chain
step at position 10 then writes buf[:, :1], so reading the seed's ids[0, 0] after that step gives
the step's proposal, not the seed's: a runner that reads an output late fails on CPU.

`graph_owned(program)` gives a program that does not own its outputs that discipline through a
wrapper (`OwnedOutputs`), so every route (`check`, the suites, `golden verify`, the gate's golden
check) judges a runner on outputs that live only until the method's next call.
"""

from __future__ import annotations

import torch

from eagle3_check.program.contract import ProgramWrapper, SpeculatorProgram


class OutputBuffers:
    def __init__(self, rows: int):
        self.rows = rows
        self._out: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}  # method -> ([1, S], [1, S, H])

    def own(self, method: str, ids: torch.Tensor, feature: torch.Tensor):  # [1, T], [1, T, H]
        """Views of the method's buffer holding `ids` and `feature` (see module doc)."""
        bufs = self._out.get(method)
        n, t = ids.shape[1], feature.shape[1]
        rows = max(self.rows, n, t)
        if (bufs is None or bufs[1].shape[2] != feature.shape[2] or bufs[1].dtype != feature.dtype
                or bufs[0].dtype != ids.dtype or bufs[0].shape[1] < rows):
            bufs = self._out[method] = (torch.zeros(1, rows, dtype=ids.dtype, device=ids.device),
                                        torch.zeros(1, rows, feature.shape[2], dtype=feature.dtype,
                                                    device=feature.device))
        bufs[0][:, :n].copy_(ids)
        bufs[1][:, :t].copy_(feature)
        return bufs[0][:, :n], bufs[1][:, :t]


class OwnedOutputs(ProgramWrapper):
    """`inner` with graph-owned outputs: each method's outputs copied into its one buffer (module doc)."""

    owns_outputs = True

    def __init__(self, inner: SpeculatorProgram):
        super().__init__(inner)
        self.buffers = OutputBuffers(int(inner.metadata().get("get_max_seq_len", 1)))

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H] (graph-owned)
        return self.buffers.own("prefill", *self.inner.prefill(tokens, positions))

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H] (graph-owned)
        return self.buffers.own("target_verify", *self.inner.target_verify(tokens, positions))

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H] (graph-owned)
        return self.buffers.own("draft_decode", *self.inner.draft_decode(tokens, feature, positions))


def graph_owned(program: SpeculatorProgram) -> SpeculatorProgram:
    """`program` itself when it already returns graph-owned outputs (an eager program with
    `reuse_outputs`, an `OwnedOutputs`), else wrapped in `OwnedOutputs`."""
    if getattr(program, "reuse_outputs", False) or getattr(program, "owns_outputs", False):
        return program
    return OwnedOutputs(program)
