"""The chunk rule's refusal on a program with a sliding window (`rules.runnable_chunks`): it names the
chunk the window gives and says where it came from (issue 31: the window, not max prefill / 2)."""

from __future__ import annotations

import pytest

from eagle3_check.errors import OptionError
from eagle3_check.run.rules import runnable_chunks


def test_a_short_chunk_under_a_window_names_the_window_and_its_chunk():
    # window 16 (under max prefill 64, half 32): L = 33, min 9 -> [16, 8, 9], the 8 below min
    with pytest.raises(OptionError) as e:
        runnable_chunks(33, 64, 9, 16)
    msg = str(e.value)
    assert "plans chunks [16, 8, 9]" in msg and "with chunk 16 (the sliding window)" in msg, msg


def test_without_a_window_the_refusal_names_the_half():
    with pytest.raises(OptionError) as e:
        runnable_chunks(33, 32, 9, None)
    assert "with chunk 16 (max prefill // 2)" in str(e.value)


def test_a_window_plan_that_fits_is_returned():
    assert runnable_chunks(40, 64, 4, 16) == [16, 16, 8] and runnable_chunks(40, 64, 4, None) == [32, 8]
