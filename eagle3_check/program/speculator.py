"""The speculator module: target adapter + draft head behind the three contract methods.

This is the eager reference implementation of DESIGN §1; `program/eager.py` wraps it as a
program and `program/export.py` lowers the same module to a `.pte`.
"""

from __future__ import annotations

import torch
from torch import nn

from eagle3_check.program.draft import Eagle3DraftHead
from eagle3_check.program.target import TargetAdapter


class Eagle3Speculator(nn.Module):
    def __init__(self, target: TargetAdapter, draft: Eagle3DraftHead):
        super().__init__()
        self.target = target
        self.draft = draft

    def prefill(
        self,
        tokens: torch.Tensor,  # [1, T]
        positions: torch.Tensor,  # [T]
    ) -> tuple[torch.Tensor, torch.Tensor]:  # next_token [1, 1], feature [1, T, H]
        logits, taps = self.target(tokens, positions)
        next_token = logits[:, -1:, :].argmax(dim=-1)
        return next_token, self.draft.fuse(taps)

    def target_verify(
        self,
        tokens: torch.Tensor,  # [1, C]
        positions: torch.Tensor,  # [C]
    ) -> tuple[torch.Tensor, torch.Tensor]:  # verify_ids [1, C], feature [1, C, H]
        logits, taps = self.target(tokens, positions)
        return logits.argmax(dim=-1), self.draft.fuse(taps)

    def draft_decode(
        self,
        tokens: torch.Tensor,  # [1, T]
        feature: torch.Tensor,  # [1, T, H]
        positions: torch.Tensor,  # [T]
    ) -> tuple[torch.Tensor, torch.Tensor]:  # ids [1, T], g [1, T, H]
        logits, g = self.draft(tokens, feature, positions)
        return self.draft.to_target_ids(logits.argmax(dim=-1)), g

    def target_verify_kv(
        self,
        tokens: torch.Tensor,  # [1, C]
        positions: torch.Tensor,  # [C]
        kv_window: torch.Tensor,  # [V] int32, V = anchor_pos + C
    ) -> tuple[torch.Tensor, torch.Tensor]:  # verify_ids [1, C], feature [1, C, H]
        """The newer target_verify form (DESIGN §1, from #20344 on). kv_window's contents are
        unused and so is its length here: the seed bounds a CUDA SDPA key loop with it, while this
        target's attention already masks every slot after positions[-1]."""
        del kv_window
        return self.target_verify(tokens, positions)
