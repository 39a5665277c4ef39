"""The product phase of bench/triton_persistent.py's one-kernel verify forward (Triton, bf16):
out = epi(prologue(x) @ w^T) over a program's units (column tiles x K splits, round-robin over the
programs), triton_splitk's split-K scheme (the last of a tile's splits reduces them in split order,
deterministic) and triton_verify's rounding op for op. With it: _x_block (the prologue: x read
through L2, the RMSNorm from the producer's sum-of-squares partials), _count_tile (`flow`'s counts),
and the weight bytes a phase can start before its barrier (_first_block: registers; _prefetch: an
L2 bulk-prefetch hint). Bench-only: not the library's path.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton_attention import _flow_done
from triton_grid import _wait_count
from triton_ops import _dot, _ss_partial
from triton_outputs import _argmax_tile, _tap_rows
from triton_splitk import _epilogue
from triton_verify import _prefetch_rows


@triton.jit
def _prefetch(w_ptr, N, K, pid, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, EPI: tl.constexpr, COLS: tl.constexpr):
    """L2 prefetch of the first COLS K columns of this program's first unit's weight rows (a hint)."""
    if COLS > 0:
        tiles = tl.cdiv(N, BLOCK_N)
        if pid < tiles * SPLIT:
            tile, ks = pid % tiles, pid // tiles
            rn = tl.minimum(tile * BLOCK_N + tl.arange(0, BLOCK_N), N - 1).to(tl.int64)
            cols = tl.minimum(K // SPLIT, COLS)
            _prefetch_rows(w_ptr + rn * K + ks * (K // SPLIT), cols * 2, BLOCK_N)
            if EPI == 2:
                _prefetch_rows(w_ptr + (N + rn) * K + ks * (K // SPLIT), cols * 2, BLOCK_N)


@triton.jit
def _first_block(w_ptr, N, K: tl.constexpr, pid, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                 UP: tl.constexpr, PRE: tl.constexpr):
    """This program's first unit's first K block of w [BLOCK_N, BLOCK_K] (UP: the rows N + n, SwiGLU's up),
    loaded before the barrier that precedes the product (weights depend on nothing); zeros unless PRE."""
    if PRE:
        tiles = tl.cdiv(N, BLOCK_N)
        rn = (pid % tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
        kk = (pid // tiles) * (K // SPLIT) + tl.arange(0, BLOCK_K)
        if UP:
            rn = rn + N
        wmask = (rn < tl.where(pid < tiles * SPLIT, N * (1 + UP), 0))[:, None]  # no unit: nothing loaded
        return tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=wmask, other=0.0)
    else:
        return tl.zeros([BLOCK_N, BLOCK_K], dtype=w_ptr.dtype.element_ty)


@triton.jit
def _x_block(x_ptr, lnw_ptr, rstd, rm, kk, mmask, K: tl.constexpr, NORM: tl.constexpr, dt: tl.constexpr):
    """x[:, kk] [BLOCK_M, BLOCK_K] read through L2 (another SM wrote it); NORM: weight * (x * rstd).to(bf16),
    rounded as HF."""
    xt = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=mmask[:, None], other=0.0, cache_modifier=".cg")
    if NORM:
        xn = (xt.to(tl.float32) * rstd[:, None]).to(dt)
        lw = tl.load(lnw_ptr + kk)
        xt = (lw.to(tl.float32)[None, :] * xn.to(tl.float32)).to(dt)
    return xt


@triton.jit
def _count_tile(flow_ptr, c, DONE: tl.constexpr, DONE_COLS: tl.constexpr, NH: tl.constexpr, NKV: tl.constexpr,
                D: tl.constexpr):
    """The tile from column c is stored: count it (DONE 1: for its kv group, _flow_done; 2: for its
    slice of DONE_COLS columns), released after every thread's stores. DONE 0: nothing."""
    if DONE == 1:
        _flow_done(flow_ptr, c, NH, NKV, D)
    elif DONE == 2:
        tl.debug_barrier()
        tl.atomic_add(flow_ptr + c // DONE_COLS, 1, sem="release")


@triton.jit
def _product(x_ptr, w_ptr, out_ptr, res_ptr, lnw_ptr, ws_ptr, cnt_ptr, ss_in, ss_out, M, N, K: tl.constexpr, eps,
             pid, nprog, SS_SLOTS: tl.constexpr, SS_OUT: tl.constexpr, NORM: tl.constexpr, EPI: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, F32: tl.constexpr, wpre, wpre_up, PRE: tl.constexpr,
             flow_ptr, DONE: tl.constexpr, DONE_COLS: tl.constexpr, wait_ptr, wait_at, WAIT: tl.constexpr,
             err_ptr, POLL: tl.constexpr, NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr,
             TAPS: tl.constexpr, A0: tl.constexpr, A1: tl.constexpr, A2: tl.constexpr, am_v, am_i, am_n, ids_ptr,
             AM: tl.constexpr):
    """out[M, N] = epi(prologue(x) @ w^T) over this program's units (triton_splitk's math). PRE: the
    first unit's first K block is wpre (wpre_up) [BLOCK_N, BLOCK_K], loaded before the barrier
    (_first_block); its product is added after the loop (the loop streams the rest at once).
    `flow` (counts in place of grid barriers): DONE 1 counts each stored qkv tile for its kv group
    (_flow_done), DONE 2 for its slice of DONE_COLS columns (a consumer's K slice); WAIT: unit (tile,
    ks) first waits for wait_ptr[ks] >= wait_at (its K slice's producers, triton_grid._wait_count).
    `verify` (bench/triton_outputs.py): TAPS = H: x is the taps hs[A0 | A1 | A2] of hs [L + 1, M, H]
    (the draft's fc); AM > 0: the argmax of each row into ids_ptr (AM: a power of 2 >= the tiles)."""
    dt = out_ptr.dtype.element_ty
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    mmask = rm < M
    rstd = tl.zeros([BLOCK_M], dtype=tl.float32)
    if NORM:  # LlamaRMSNorm: the row's sum of squares from its producer's per-tile partials
        slots = tl.arange(0, SS_SLOTS)
        ss = tl.sum(tl.load(ss_in + slots[:, None] * BLOCK_M + rm[None, :], cache_modifier=".cg"), axis=0)
        rstd = tl.rsqrt(ss / K + eps)
    tiles = tl.cdiv(N, BLOCK_N)
    k_len = K // SPLIT
    NW = N * 2 if EPI == 2 else N
    for u in range(pid, tiles * SPLIT, nprog):
        tile, ks = u % tiles, u // tiles
        rn = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = rn < N
        omask = mmask[:, None] & nmask[None, :]
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if WAIT:
            _wait_count(wait_ptr + ks, wait_at, err_ptr, POLL)
        k_lo = ks * k_len
        if PRE:
            k_lo += tl.where(u == pid, BLOCK_K, 0)  # the first unit's first block came before the barrier
        for k0 in range(k_lo, (ks + 1) * k_len, BLOCK_K):
            kk = k0 + rk
            if TAPS > 0:
                xb, kc = _tap_rows(x_ptr, k0, M, TAPS, A0, A1, A2)
                xt = _x_block(xb, lnw_ptr, rstd, rm, kk - kc, mmask, TAPS, NORM, dt)
            else:
                xt = _x_block(x_ptr, lnw_ptr, rstd, rm, kk, mmask, K, NORM, dt)
            wt = tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
            acc += _dot(xt, tl.trans(wt), F32)
            if EPI == 2:
                wu = tl.load(w_ptr + (N + rn)[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
                acc_up += _dot(xt, tl.trans(wu), F32)
        if PRE:
            if u == pid:
                xt = _x_block(x_ptr, lnw_ptr, rstd, rm, ks * k_len + rk, mmask, K, NORM, dt)
                acc += _dot(xt, tl.trans(wpre), F32)
                if EPI == 2:
                    acc_up += _dot(xt, tl.trans(wpre_up), F32)
        if SPLIT == 1:
            y = _epilogue(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI)
            if SS_OUT:  # this tile's partial sum of squares of the stored (bf16) rows, for the next norm
                _ss_partial(y, omask, ss_out, tile, rm, BLOCK_M)
            _count_tile(flow_ptr, tile * BLOCK_N, DONE, DONE_COLS, NH, NKV, D)
            if AM > 0:
                _argmax_tile(y, omask, rn, tile, tiles, rm, mmask, am_v, am_i, am_n, ids_ptr, BLOCK_M, AM)
        else:
            part = rm[:, None] * NW + rn[None, :]
            tl.store(ws_ptr + ks * BLOCK_M * NW + part, acc, mask=omask)
            if EPI == 2:
                tl.store(ws_ptr + ks * BLOCK_M * NW + part + N, acc_up, mask=omask)
            tl.debug_barrier()
            arrived = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
            if arrived == SPLIT - 1:  # the tile's last split: reduce in split order, then the epilogue
                acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                for s in tl.static_range(SPLIT):
                    acc += tl.load(ws_ptr + s * BLOCK_M * NW + part, mask=omask, other=0.0, cache_modifier=".cg")
                    if EPI == 2:
                        acc_up += tl.load(ws_ptr + s * BLOCK_M * NW + part + N, mask=omask, other=0.0,
                                          cache_modifier=".cg")
                tl.store(cnt_ptr + tile, 0)
                y = _epilogue(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI)
                if SS_OUT:
                    _ss_partial(y, omask, ss_out, tile, rm, BLOCK_M)
                _count_tile(flow_ptr, tile * BLOCK_N, DONE, DONE_COLS, NH, NKV, D)
                if AM > 0:
                    _argmax_tile(y, omask, rn, tile, tiles, rm, mmask, am_v, am_i, am_n, ids_ptr, BLOCK_M, AM)
