"""The chunk rule's refusal on a program with a sliding window (`rules.prefill_chunk`): it names the
chunk the window gives and says where it came from (issue 31: the window, not max prefill / 2)."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.errors import ContractViolation, OptionError
from eagle3_check.runners.rules import prefill_chunk, prefill_chunks


class _Md:
    def __init__(self, min_prefill, max_prefill, sliding_window):
        self.min_prefill, self.max_prefill, self.sliding_window = min_prefill, max_prefill, sliding_window


def _refuse(tokens, positions):
    raise ContractViolation("prefill failed in the ExecuTorch runtime (shape guard)", "a successful execute", "check")


def _refusal(L, max_prefill, min_prefill, window) -> str:
    plan = prefill_chunks(L, max_prefill, min_prefill, window)
    short = min(plan)
    with pytest.raises(OptionError) as e:
        prefill_chunk(_refuse, torch.zeros(1, short), torch.arange(short), plan, _Md(min_prefill, max_prefill, window))
    return str(e.value)


def test_a_short_chunk_under_a_window_names_the_window_and_its_chunk():
    # window 16 (under max prefill 64, half 32): L = 33, min 9 -> [16, 8, 9], the 8 below min
    msg = _refusal(33, 64, 9, 16)
    assert "chunks [16, 8, 9]" in msg and "(chunk 16: the sliding window)" in msg, msg
    assert "ContractViolation: prefill failed in the ExecuTorch runtime (shape guard)" in msg, msg


def test_without_a_window_the_refusal_names_the_half():
    assert "(chunk 16: max prefill // 2)" in _refusal(33, 32, 9, None)


def test_a_window_plan_that_fits_is_the_rule_s_plan():
    assert prefill_chunks(40, 64, 4, 16) == [16, 16, 8] and prefill_chunks(40, 64, 4, None) == [32, 8]
