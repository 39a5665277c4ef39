"""The verify outputs of bench/triton_persistent.py's one-kernel forward, computed in the kernel
(its `verify` config): the argmax of the logits and the draft's fc over the taps, so that a verify
is one launch: no argmax, concatenation or fc launches after it. Bench-only: not the library's path.

_argmax_tile: each lm_head tile's row maxima and their first columns, then the last tile to finish
reduces them (torch.argmax's pick: the first column of the row's max; a NaN logit is not handled).
_tap_rows: where the fc's K block k0 lies: the taps are hidden states hs[a] of the layers a in
aux (at most 3), each [T, H]; their concatenation along K is never stored.
"""

from __future__ import annotations

import triton
import triton.language as tl

NO_COLUMN = tl.constexpr(2**30)  # above any column: the min over "no maximum here"


@triton.jit
def _argmax_tile(y, omask, rn, tile, tiles, rm, mmask, am_v, am_i, am_n, ids_ptr, BLOCK_M: tl.constexpr,
                 NT: tl.constexpr):
    """y [BLOCK_M, BLOCK_N]: the stored logits tile `tile` (columns rn [BLOCK_N]) of `tiles`. Its row
    maxima [BLOCK_M] and their first columns go to am_v, am_i [tiles, BLOCK_M]; the last of the
    tiles (am_n counts them, then is reset) writes ids_ptr [M] int64. NT: a power of 2 >= tiles."""
    yf = tl.where(omask, y.to(tl.float32), float("-inf"))
    m = tl.max(yf, axis=1)
    first = tl.min(tl.where(yf == m[:, None], rn[None, :], NO_COLUMN), axis=1)
    tl.store(am_v + tile * BLOCK_M + rm, m)
    tl.store(am_i + tile * BLOCK_M + rm, first)
    tl.debug_barrier()
    done = tl.atomic_add(am_n, 1, sem="acq_rel")
    if done == tiles - 1:  # every tile's partial is stored: the first column of each row's max
        t = tl.arange(0, NT)
        tmask = (t < tiles)[:, None]
        slot = t[:, None] * BLOCK_M + rm[None, :]
        v = tl.load(am_v + slot, mask=tmask, other=float("-inf"), cache_modifier=".cg")
        i = tl.load(am_i + slot, mask=tmask, other=NO_COLUMN, cache_modifier=".cg")
        best = tl.max(v, axis=0)
        pick = tl.min(tl.where(v == best[None, :], i, NO_COLUMN), axis=0)
        tl.store(ids_ptr + rm, pick.to(tl.int64), mask=mmask)
        tl.store(am_n, 0)


@triton.jit
def _tap_rows(hs_ptr, k0, T, H: tl.constexpr, A0: tl.constexpr, A1: tl.constexpr, A2: tl.constexpr):
    """(rows of the tap holding K column k0 [T, H] inside hs [L + 1, T, H], k0's column in it):
    tap k0 // H is hs[A0], hs[A1] or hs[A2] (a K block never spans two taps: BLOCK_K divides H)."""
    tap = k0 // H
    layer = tl.where(tap == 0, A0, tl.where(tap == 1, A1, A2)).to(tl.int64)
    return hs_ptr + layer * T * H, tap * H
