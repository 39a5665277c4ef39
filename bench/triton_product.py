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
def _prefetch(w_ptr, N, K, pid, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, EPI: tl.constexpr, COLS: tl.constexpr,
              LINES: tl.constexpr):
    """L2 prefetch of the first COLS K columns of this program's first unit's weight rows (a hint): one
    bulk prefetch a row, or with LINES one `prefetch.global.L2` a 128-byte line (COLS a power of two >= 64)."""
    if COLS > 0:
        tiles = tl.cdiv(N, BLOCK_N)
        if pid < tiles * SPLIT:
            tile, ks = pid % tiles, pid // tiles
            rn = tl.minimum(tile * BLOCK_N + tl.arange(0, BLOCK_N), N - 1).to(tl.int64)
            cols = tl.minimum(K // SPLIT, COLS)
            for half in tl.static_range(1 + (EPI == 2)):  # SwiGLU's gate rows, then its up rows N + n
                rows = w_ptr + (half * N + rn) * K + ks * (K // SPLIT)  # [BLOCK_N]
                if LINES:
                    # [COLS / 64]: 64 bf16 a line, none past the unit's K slice (nor before the row, where it is short)
                    lines = tl.maximum(tl.minimum(tl.arange(0, COLS // 64) * 64, cols - 64), 0)
                    _prefetch_lines(rows[:, None] + lines[None, :])
                else:
                    _prefetch_rows(rows, cols * 2, BLOCK_N)


@triton.jit
def _prefetch_lines(ptrs):
    """`prefetch.global.L2` of the 128-byte line at each of ptrs (any shape; a hint, no data)."""
    tl.inline_asm_elementwise("prefetch.global.L2 [$1]; // dummy $0", "=r,l", [ptrs], dtype=tl.int32,
                              is_pure=False, pack=1)


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
def _w_step(w_ptr, xt, rn, kk, nmask, acc, acc_up, N, K: tl.constexpr, EPI: tl.constexpr, F32: tl.constexpr):
    """One K block: acc [BLOCK_M, BLOCK_N] += xt [BLOCK_M, BLOCK_K] @ w[rn, kk]^T (EPI 2: acc_up with
    SwiGLU's up rows N + rn too); returns both."""
    wt = tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
    acc += _dot(xt, tl.trans(wt), F32)
    if EPI == 2:
        wu = tl.load(w_ptr + (N + rn)[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
        acc_up += _dot(xt, tl.trans(wu), F32)
    return acc, acc_up


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
             AM: tl.constexpr, STREAM: tl.constexpr):
    """out[M, N] = epi(prologue(x) @ w^T) over this program's units (triton_splitk's math). PRE: the
    first unit's first K block is wpre (wpre_up) [BLOCK_N, BLOCK_K], loaded before the barrier
    (_first_block); its product is added after the loop (the loop streams the rest at once).
    `flow` (counts in place of grid barriers): DONE 1 counts each stored qkv tile for its kv group
    (_flow_done), DONE 2 for its slice of DONE_COLS columns (a consumer's K slice); WAIT: unit (tile,
    ks) first waits for wait_ptr[ks] >= wait_at (its K slice's producers, triton_grid._wait_count).
    `verify` (bench/triton_outputs.py): TAPS = H: x is the taps hs[A0 | A1 | A2] of hs [L + 1, M, H]
    (the draft's fc); AM > 0: the argmax of each row into ids_ptr (AM: a power of 2 >= the tiles).
    STREAM > 0: stream-K units in place of (tile, split) ones, at most STREAM contributors a tile
    (_stream; SPLIT, PRE and TAPS unused)."""
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
    if STREAM:
        _stream(x_ptr, w_ptr, out_ptr, res_ptr, lnw_ptr, ws_ptr, cnt_ptr, ss_out, M, N, K, pid, nprog, rstd, SS_OUT,
                NORM, EPI, BLOCK_M, BLOCK_N, BLOCK_K, SPLIT, F32, flow_ptr, DONE, DONE_COLS, wait_ptr, wait_at, WAIT,
                err_ptr, POLL, NH, NKV, D, am_v, am_i, am_n, ids_ptr, AM, STREAM)
    else:
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
                acc, acc_up = _w_step(w_ptr, xt, rn, kk, nmask, acc, acc_up, N, K, EPI, F32)
            if PRE:
                if u == pid:
                    xt = _x_block(x_ptr, lnw_ptr, rstd, rm, ks * k_len + rk, mmask, K, NORM, dt)
                    acc += _dot(xt, tl.trans(wpre), F32)
                    if EPI == 2:
                        acc_up += _dot(xt, tl.trans(wpre_up), F32)
            if SPLIT == 1:
                _finish(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI, SS_OUT, ss_out, tile, tiles, mmask, flow_ptr,
                        DONE, DONE_COLS, NH, NKV, D, am_v, am_i, am_n, ids_ptr, BLOCK_M, BLOCK_N, AM)
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
                    _finish(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI, SS_OUT, ss_out, tile, tiles, mmask,
                            flow_ptr, DONE, DONE_COLS, NH, NKV, D, am_v, am_i, am_n, ids_ptr, BLOCK_M, BLOCK_N, AM)


@triton.jit
def _finish(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI: tl.constexpr, SS_OUT: tl.constexpr, ss_out, tile,
            tiles, mmask, flow_ptr, DONE: tl.constexpr, DONE_COLS: tl.constexpr, NH: tl.constexpr, NKV: tl.constexpr,
            D: tl.constexpr, am_v, am_i, am_n, ids_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            AM: tl.constexpr):
    """A tile's summed acc (acc_up) [BLOCK_M, BLOCK_N] fp32: the epilogue and store, then SS_OUT's partial
    sum of squares of the stored (bf16) rows for the next norm, the flow count and AM's argmax partial."""
    y = _epilogue(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI)
    if SS_OUT:
        _ss_partial(y, omask, ss_out, tile, rm, BLOCK_M)
    _count_tile(flow_ptr, tile * BLOCK_N, DONE, DONE_COLS, NH, NKV, D)
    if AM > 0:
        _argmax_tile(y, omask, rn, tile, tiles, rm, mmask, am_v, am_i, am_n, ids_ptr, BLOCK_M, AM)


@triton.jit
def _stream(x_ptr, w_ptr, out_ptr, res_ptr, lnw_ptr, ws_ptr, cnt_ptr, ss_out, M, N, K: tl.constexpr, pid, nprog, rstd,
            SS_OUT: tl.constexpr, NORM: tl.constexpr, EPI: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            BLOCK_K: tl.constexpr, SLICES: tl.constexpr, F32: tl.constexpr, flow_ptr, DONE: tl.constexpr,
            DONE_COLS: tl.constexpr, wait_ptr, wait_at, WAIT: tl.constexpr, err_ptr, POLL: tl.constexpr,
            NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, am_v, am_i, am_n, ids_ptr, AM: tl.constexpr,
            MAXC: tl.constexpr):
    """Stream-K: the product's nb = tiles * KB blocks (KB = K / BLOCK_K a tile, tile-major) cut into
    nprog contiguous ranges, program p taking blocks [p nb // nprog, (p + 1) nb // nprog), so every
    program streams the same bytes within one block (the (tile, split) units leave programs idle
    where they do not divide the grid). A tile's contributors are owner(tile KB) .. owner(tile KB +
    KB - 1), owner(b) = ((b + 1) nprog - 1) // nb; one alone finishes the tile, else each writes its
    partial to workspace slot (its first block - tile KB) and counts in on cnt[tile] (acq_rel); the
    last sums the slots in contributor order (_stream_tile) and finishes it. Worked example, the
    bench target's qkv (48 tiles x 8 blocks = 384 on 132 programs): program 0 takes blocks [0, 2),
    1 [2, 5), 2 [5, 8), 3 [8, 11): tile 0's contributors are owner(0) = 0 .. owner(7) = 1055 // 384
    = 2, slots 0, 2, 5; tile 1's owner(8) = 1187 // 384 = 3 .. owner(15) = 2111 // 384 = 5. WAIT
    (`flow` "down"): each tile's blocks first wait for the K slices they read, wait_ptr[slice]. With
    more programs than blocks, nprog counts as nb (one block each, the rest idle), so no range is
    empty: an empty one between a tile's contributors would never count in. MAXC: a bound on a
    tile's contributors (persistent_config.stream_contributors)."""
    dt = out_ptr.dtype.element_ty
    KB: tl.constexpr = K // BLOCK_K
    SL: tl.constexpr = K // SLICES  # columns a K slice
    NW = N * 2 if EPI == 2 else N
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    mmask = rm < M
    tiles = tl.cdiv(N, BLOCK_N)
    nb = tiles * KB
    nprog = tl.minimum(nprog, nb)  # every range non-empty (programs past nb take none)
    b0 = tl.minimum(pid, nprog) * nb // nprog
    b1 = tl.minimum(pid + 1, nprog) * nb // nprog
    for tile in range(b0 // KB, tl.where(b1 > b0, tl.cdiv(b1, KB), b0 // KB)):  # the tiles [b0, b1) touches
        lo, hi = tl.maximum(b0, tile * KB), tl.minimum(b1, tile * KB + KB)
        rn = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = rn < N
        omask = mmask[:, None] & nmask[None, :]
        if WAIT:
            for sl in range((lo - tile * KB) * BLOCK_K // SL, ((hi - tile * KB) * BLOCK_K - 1) // SL + 1):
                _wait_count(wait_ptr + sl, wait_at, err_ptr, POLL)
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for b in range(lo, hi):  # a K loop a tile: one loop across the boundary spilled (docs/cuda.md)
            kk = (b - tile * KB) * BLOCK_K + rk
            xt = _x_block(x_ptr, lnw_ptr, rstd, rm, kk, mmask, K, NORM, dt)
            acc, acc_up = _w_step(w_ptr, xt, rn, kk, nmask, acc, acc_up, N, K, EPI, F32)
        first = ((tile * KB + 1) * nprog - 1) // nb
        last = ((tile * KB + KB) * nprog - 1) // nb
        if first == last:  # the tile's only contributor
            _finish(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI, SS_OUT, ss_out, tile, tiles, mmask,
                    flow_ptr, DONE, DONE_COLS, NH, NKV, D, am_v, am_i, am_n, ids_ptr, BLOCK_M, BLOCK_N, AM)
        else:
            at = ws_ptr + (lo - tile * KB) * BLOCK_M * NW + rm[:, None] * NW + rn[None, :]
            tl.store(at, acc, mask=omask)
            if EPI == 2:
                tl.store(at + N, acc_up, mask=omask)
            tl.debug_barrier()
            arrived = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
            if arrived == last - first:
                _stream_tile(tile, out_ptr, res_ptr, ws_ptr, cnt_ptr, ss_out, M, N, nb, nprog, rm, mmask, tiles, KB,
                             NW, EPI, SS_OUT, flow_ptr, DONE, DONE_COLS, NH, NKV, D, am_v, am_i, am_n, ids_ptr,
                             BLOCK_M, BLOCK_N, AM, MAXC)


@triton.jit
def _stream_tile(tile, out_ptr, res_ptr, ws_ptr, cnt_ptr, ss_out, M, N, nb, nprog, rm, mmask, tiles,
                 KB: tl.constexpr, NW, EPI: tl.constexpr, SS_OUT: tl.constexpr, flow_ptr, DONE: tl.constexpr,
                 DONE_COLS: tl.constexpr, NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, am_v, am_i, am_n,
                 ids_ptr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, AM: tl.constexpr, MAXC: tl.constexpr):
    """_stream's tile `tile`, by its last contributor: sum the contributors' workspace slots (each one's
    first block in the tile) in contributor order, reset the tile's count, finish the tile."""
    rn = tile * BLOCK_N + tl.arange(0, BLOCK_N)
    omask = mmask[:, None] & (rn < N)[None, :]
    first = ((tile * KB + 1) * nprog - 1) // nb
    last = ((tile * KB + KB) * nprog - 1) // nb
    part = rm[:, None] * NW + rn[None, :]
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for i in tl.static_range(MAXC):  # unrolled: the slots' loads in flight at once, not one by one
        p = first + i
        used = omask & (rm < tl.where(p <= last, M, 0))[:, None]  # past the last contributor: none
        at = ws_ptr + (tl.maximum(p * nb // nprog, tile * KB) - tile * KB) * BLOCK_M * NW + part
        acc += tl.load(at, mask=used, other=0.0, cache_modifier=".cg")
        if EPI == 2:
            acc_up += tl.load(at + N, mask=used, other=0.0, cache_modifier=".cg")
    tl.store(cnt_ptr + tile, 0)
    _finish(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI, SS_OUT, ss_out, tile, tiles, mmask,
            flow_ptr, DONE, DONE_COLS, NH, NKV, D, am_v, am_i, am_n, ids_ptr, BLOCK_M, BLOCK_N, AM)
