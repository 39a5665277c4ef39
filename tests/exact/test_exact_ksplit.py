"""The CUDA product's split of K (eagle3_check/exact/ksplit.py), on CPU without Triton: the count is a
function of K and N only (never M or the batch), its worked example for the 8B shape, and the slices
cover K from 0 exactly once, each a multiple of BLOCK_K but the last, none empty. The kernels that use
it run in tests/exact_triton_checks.py (Triton's interpreter) and the cuda cases of test_exact_kernels.py."""

from __future__ import annotations

import inspect

import pytest
from hypothesis import given
from hypothesis import strategies as st

from eagle3_check.exact.ksplit import BLOCK_K, k_slices, split_count


def test_the_count_is_chosen_from_k_and_n_only():
    assert list(inspect.signature(split_count).parameters) == ["k", "n"]
    assert list(inspect.signature(k_slices).parameters) == ["k", "count"]


@pytest.mark.parametrize(("layer", "k", "n", "slices", "length"), [
    ("q / o proj", 4096, 4096, 5, 832),  # 64 N tiles: cdiv(264, 64) = 5; round_up(cdiv(4096, 5) = 820, 32) = 832
    ("k / v proj", 4096, 1024, 8, 512),  # 16 N tiles: cdiv(264, 16) = 17, capped by cdiv(4096, 512) = 8
    ("gate / up", 4096, 14336, 2, 2048),  # 224 N tiles: cdiv(264, 224) = 2
    ("down proj", 14336, 4096, 5, 2880),  # 5; round_up(cdiv(14336, 5) = 2868, 32) = 2880: 4 x 2880 + 2816
    ("lm_head", 4096, 128256, 1, 4096),  # 2004 N tiles: one pass
    ("1.1b q / o proj", 2048, 2048, 4, 512),  # 32 N tiles: 9, capped by cdiv(2048, 512) = 4
    ("short K", 512, 64, 1, 512),  # no slice shorter than 512
    ("the cuda test's shape", 4096, 256, 8, 512),  # 4 N tiles: 66, capped at 8
])
def test_the_worked_example(layer, k, n, slices, length):
    assert k_slices(k, split_count(k, n)) == (slices, length), layer


def test_a_forced_count_on_small_shapes():
    """The interpreter checks force counts on K = 200: 2 -> 128 + 72, 3 -> 96 + 96 + 8; K = 40 has room for 2."""
    assert k_slices(200, 2) == (2, 128)
    assert k_slices(200, 3) == (3, 96)
    assert k_slices(40, 3) == (2, 32)
    assert k_slices(0, 1) == (1, BLOCK_K)


@given(st.integers(0, 50_000), st.integers(1, 300_000), st.integers(0, 64))
def test_the_slices_cover_k_once(k, n, forced):
    count = forced or split_count(k, n)  # 0: the rule's count, else a forced one (the tests' `splits=`)
    slices, length = k_slices(k, count)
    assert 1 <= slices <= count and length % BLOCK_K == 0
    starts = [s * length for s in range(slices)]
    assert all(start < k for start in starts[1:])  # no empty slice
    assert k <= slices * length < k + length or k == 0  # the last slice ends at K, in (0, length]
