"""The CUDA product's one tiling and its split of K: a pure function of (K, N), never of M or the batch.

Exact mode's product (exact/triton_kernels.py) computes an output tile of BLOCK_M x BLOCK_N, and its
K loop runs in steps of BLOCK_K, whatever M is. A one-row decode of a 4096 x 4096 layer has only
4096 / 64 = 64 such tiles, so 64 programs on the H200's 132 SMs. Here K is cut into `count` slices
of `length` (a multiple of BLOCK_K) from 0: program s sums its slice in order into an fp32 partial,
and one more pass adds the partials s = 0, 1, ..., count - 1 in that order. The count is chosen from
K and N only, so a row's sums (each slice's, then the slices') run in the same order whether it is
computed alone or among M rows, in a batch of one or of B: the row's bits do not depend on either.

The count: enough programs over the N tiles to fill about two waves of 132 SMs (TARGET_PROGRAMS),
and no slice shorter than MIN_SLICE (a short slice costs more in partials than it gains):

    count = max(1, min(cdiv(TARGET_PROGRAMS, cdiv(N, BLOCK_N)), cdiv(K, MIN_SLICE)))
    length = round_up(cdiv(K, count), BLOCK_K); count = cdiv(K, length)   (no empty slice)

Worked example (the 8B shape, Llama-3.1-8B's layers; tests/exact/test_exact_ksplit.py pins it):

    q / o proj   K 4096,  N 4096:   64 N tiles, cdiv(264, 64) = 5, cdiv(4096, 512) = 8    -> 5 slices:
                 length round_up(820, 32) = 832: 4 x 832 + 768 = 4096
    k / v proj   K 4096,  N 1024:   16 N tiles, cdiv(264, 16) = 17, 8                     -> 8 slices of 512
    gate / up    K 4096,  N 14336:  224 N tiles, cdiv(264, 224) = 2                        -> 2 slices of 2048
    down proj    K 14336, N 4096:   64 N tiles, 5, cdiv(14336, 512) = 28                  -> 5 slices:
                 length round_up(2868, 32) = 2880: 4 x 2880 + 2816 = 14336
    lm_head      K 4096,  N 128256: 2004 N tiles, cdiv(264, 2004) = 1                      -> 1 (one pass)
    any K <= 512                                                                          -> 1 (one pass)

Pure Python (no torch, no Triton): the rule is tested on CPU where Triton is absent.
"""

from __future__ import annotations

BLOCK_M, BLOCK_N, BLOCK_K = 64, 64, 32  # the one product tiling (every M)
TARGET_PROGRAMS = 2 * 132  # about two waves of an H100 / H200's 132 SMs
MIN_SLICE = 512  # the shortest slice of K the rule chooses: 16 steps of BLOCK_K


def _cdiv(a: int, b: int) -> int:
    return -(-a // b)


def split_count(k: int, n: int) -> int:
    """How many slices of K the product [*, K] @ [K, N] is cut into: from K and N only (no M, no B)."""
    return max(1, min(_cdiv(TARGET_PROGRAMS, _cdiv(n, BLOCK_N)), _cdiv(k, MIN_SLICE)))


def k_slices(k: int, count: int) -> tuple[int, int]:
    """(slices, length): K cut into about `count` slices of `length`, a multiple of BLOCK_K, from 0; the
    last one shorter where K is not a multiple. K 200, count 3: length round_up(67, 32) = 96 -> 96, 96, 8;
    K 40, count 3: length 32 -> 2 slices (32, 8), since no slice may be empty."""
    length = max(BLOCK_K, _cdiv(_cdiv(k, max(1, count)), BLOCK_K) * BLOCK_K)
    return max(1, _cdiv(k, length)), length
