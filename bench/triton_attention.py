"""The attention phases of bench/triton_persistent.py's one-kernel verify forward (Llama layout, bf16).

_attention: units = query heads (its own phase, then a grid barrier before the o-proj). _attn_o:
attention and the o-proj as one phase, units = (o column tile, kv group): the group's REP query heads
attend at once, then the unit's K slice of the o-proj is a split-K partial over the groups, reduced by
the tile's last group; with the first unit's Wo block loaded before the barrier (_attn_o_weights), its
weight stream overlaps the barrier and the attention. Both rope k, write k and v at `positions` and
read q, k, v and the cache with `.cg` (L2: other SMs wrote them). Rounding is triton_verify's op for
op. Bench-only: not the library's path.
"""

from __future__ import annotations

import triton
import triton.language as tl
from triton_grid import _wait_count
from triton_ops import (
    _attend,
    _attend_from,
    _attend_state,
    _cache_block,
    _dot,
    _softmax_init,
    _softmax_step,
    _ss_partial,
)
from triton_splitk import _epilogue
from triton_verify import _rope


@triton.jit
def _rotary(pos_ptr, cos_ptr, sin_ptr, T, BLOCK_T: tl.constexpr, D: tl.constexpr):
    """The window's positions [BLOCK_T] and their cos, sin [BLOCK_T, D] (rows past T: 0)."""
    t = tl.arange(0, BLOCK_T)
    d = tl.arange(0, D)
    pos = tl.load(pos_ptr + t, mask=t < T, other=0)
    cos = tl.load(cos_ptr + pos[:, None] * D + d[None, :], mask=(t < T)[:, None], other=0.0)
    sin = tl.load(sin_ptr + pos[:, None] * D + d[None, :], mask=(t < T)[:, None], other=0.0)
    return pos, cos, sin


@triton.jit
def _load_rope(ptr, mask, cos, sin, D: tl.constexpr):
    """rope (HF's three bf16 ops) of the D values at each row's ptr [R, 1]; .cg: another SM wrote them."""
    d = tl.arange(0, D)
    partner = (d + D // 2) % D
    sign = tl.where(d < D // 2, -1.0, 1.0)[None, :]
    x = tl.load(ptr + d[None, :], mask=mask, other=0.0, cache_modifier=".cg")
    xp = tl.load(ptr + partner[None, :], mask=mask, other=0.0, cache_modifier=".cg")
    return _rope(x, xp, sign, cos, sin, x.dtype)


@triton.jit
def _write_kv(row, g, pos, cos, sin, kc_ptr, vc_ptr, S, tmask, NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr):
    """Rope k of kv head g from the qkv rows `row` [BLOCK_T] and write k and v at `positions` (each
    of g's programs writes the same values), visible to this program's reads after it."""
    d = tl.arange(0, D)
    k = _load_rope(row + (NH + g) * D, tmask, cos, sin, D)
    v = tl.load(row + (NH + NKV + g) * D + d[None, :], mask=tmask, other=0.0, cache_modifier=".cg")
    _store_kv(kc_ptr, vc_ptr, g, S, pos, k, v, tmask, D)
    tl.debug_barrier()


@triton.jit
def _store_kv(kc_ptr, vc_ptr, g, S, pos, k, v, tmask, D: tl.constexpr):
    """k, v [BLOCK_T, D] into kv head g's cache slots `positions`."""
    d = tl.arange(0, D)
    cache = g * S * D + pos[:, None] * D + d[None, :]
    tl.store(kc_ptr + cache, k, mask=tmask)
    tl.store(vc_ptr + cache, v, mask=tmask)


@triton.jit
def _attention(qkv_ptr, pos, cos, sin, pos_ptr, kc_ptr, vc_ptr, o_ptr, T, S, scale, pid, nprog, flow_ptr, flow_at,
               err_ptr, NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, BLOCK_T: tl.constexpr,
               BLOCK_S: tl.constexpr, F32: tl.constexpr, WINDOW: tl.constexpr, FLOW: tl.constexpr,
               ATT0: tl.constexpr, POLL: tl.constexpr, O_HEADS: tl.constexpr, KV_EARLY: tl.constexpr):
    """Units = query heads j, from program ATT0 on: rope k of kv head g = j // (NH / NKV), write k, v
    at `positions` (each of g's programs writes the same values), then attend head j's T rows over
    slots <= pos; pos [BLOCK_T], cos and sin [BLOCK_T, D]: _rotary's. WINDOW: the window's own keys
    come from registers, not read back from the cache: the cache is read only below positions[0]
    (those loads wait on nothing this layer wrote), then one softmax step over the T window keys
    with pos[t'] <= pos[t]. The same keys as the cache read when the positions are consecutive
    (target_verify's window: anchor_pos + arange(C)). FLOW: no grid barrier before this phase; each
    unit first waits for its group's qkv tiles, flow_ptr[g] >= flow_at (triton_grid._wait_count).
    KV_EARLY (with WINDOW): the cache's first BLOCK_S slots are loaded before the wait (they wait on
    nothing this layer writes), so their bytes arrive while the qkv tiles are still being stored.
    O_HEADS > 0: each stored head is counted for the o-proj's K slice of O_HEADS heads, flow_ptr[NKV + j // O_HEADS]."""
    dt = o_ptr.dtype.element_ty
    REP: tl.constexpr = NH // NKV
    W: tl.constexpr = (NH + 2 * NKV) * D
    d = tl.arange(0, D)
    t = tl.arange(0, BLOCK_T)
    tmask = (t < T)[:, None]
    row = qkv_ptr + t[:, None] * W
    hi = tl.max(pos, axis=0) + 1
    for j in range((pid + nprog - ATT0) % nprog, NH, nprog):
        g = j // REP
        if KV_EARLY:
            s = tl.arange(0, BLOCK_S)
            kt0, vt0 = _cache_block(kc_ptr, vc_ptr, g, S, s, D, True)
        if FLOW:
            _wait_count(flow_ptr + g, flow_at, err_ptr, POLL)
        if WINDOW:
            q = _load_rope(row + j * D, tmask, cos, sin, D)
            k = _load_rope(row + (NH + g) * D, tmask, cos, sin, D)
            v = tl.load(row + (NH + NKV + g) * D + d[None, :], mask=tmask, other=0.0, cache_modifier=".cg")
            lo = tl.load(pos_ptr)  # the window's first position: the cache is read below it
            if KV_EARLY:
                m_i, l_i, acc = _softmax_init(BLOCK_T, D)
                valid = (s[None, :] <= pos[:, None]) & (s[None, :] < lo)
                m_i, l_i, acc = _softmax_step(q, kt0, vt0, valid, m_i, l_i, acc, scale, F32)
                m_i, l_i, acc = _attend_from(q, kc_ptr, vc_ptr, g, S, pos, BLOCK_S, lo, scale, m_i, l_i, acc, D,
                                             BLOCK_S, F32, True)
            else:
                m_i, l_i, acc = _attend_state(q, kc_ptr, vc_ptr, g, S, pos, lo, scale, BLOCK_T, D, BLOCK_S, F32,
                                              True)
            window = (t[None, :] < T) & (pos[None, :] <= pos[:, None])  # [BLOCK_T, BLOCK_T]
            m_i, l_i, acc = _softmax_step(q, k, v, window, m_i, l_i, acc, scale, F32)
            out = acc / l_i[:, None]
            _store_kv(kc_ptr, vc_ptr, g, S, pos, k, v, tmask, D)  # read by the next call, not this one
        else:
            _write_kv(row, g, pos, cos, sin, kc_ptr, vc_ptr, S, tmask, NH, NKV, D)
            q = _load_rope(row + j * D, tmask, cos, sin, D)
            out = _attend(q, kc_ptr, vc_ptr, g, S, pos, hi, scale, BLOCK_T, D, BLOCK_S, F32, True)
        tl.store(o_ptr + t[:, None] * (NH * D) + j * D + d[None, :], out.to(dt), mask=tmask)
        if O_HEADS > 0:
            tl.debug_barrier()
            tl.atomic_add(flow_ptr + NKV + j // O_HEADS, 1, sem="release")


@triton.jit
def _flow_done(flow_ptr, c, NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr):
    """The qkv column tile from column c is stored: count it for its kv group g (q columns of heads
    g * REP.., then k and v of head g; a tile lies in one group: BLOCK_N divides D), released after
    every thread's stores. A group is complete at (REP + 2) * D / BLOCK_N tiles a layer."""
    REP: tl.constexpr = NH // NKV
    g = tl.where(c < NH * D, c // (REP * D), tl.where(c < (NH + NKV) * D, (c - NH * D) // D, (c - (NH + NKV) * D) // D))
    tl.debug_barrier()
    tl.atomic_add(flow_ptr + g, 1, sem="release")


@triton.jit
def _attn_o_weights(wo_ptr, u, N, HK: tl.constexpr, BLOCK_N: tl.constexpr, KG: tl.constexpr, NKV: tl.constexpr):
    """Attention + o-proj unit u's Wo block [BLOCK_N, KG] (rows: its column tile; columns: its kv
    group's KG = REP * D inputs). The forward loads a program's first unit (u = pid) before the
    barrier: it depends on nothing."""
    tiles = tl.cdiv(N, BLOCK_N)
    rn = (u % tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = (u // tiles) * KG + tl.arange(0, KG)
    wmask = (rn < tl.where(u < tiles * NKV, N, 0))[:, None]  # no such unit (a program without one): nothing
    return tl.load(wo_ptr + rn[:, None].to(tl.int64) * HK + rk[None, :], mask=wmask, other=0.0)


@triton.jit
def _attn_o(qkv_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr, wo_ptr, wpre, out_ptr, res_ptr, ws_ptr, cnt_ptr,
            ss_out, T, S, scale, pid, nprog, N, NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr,
            BLOCK_T: tl.constexpr, BLOCK_S: tl.constexpr, BLOCK_N: tl.constexpr, F32: tl.constexpr,
            PRE: tl.constexpr):
    """Attention and the o-proj as one phase (no barrier between them). Units (o column tile, kv
    group g): rope k of kv head g, write k and v at `positions` (each of g's units writes the same
    values), attend g's REP query heads at once (rows r = head h * BLOCK_T + t, online softmax in
    fp32, the output rounded to bf16 as HF), then this unit's K slice of the o-proj:
    part[T, BLOCK_N] = o[:, g-th KG columns] @ Wo[tile, g-th KG columns]^T, a split-K partial over the
    NKV groups; the tile's last group (acq_rel counter) sums them in group order, adds the residual
    and stores xm and its sum-of-squares partial (triton_splitk's scheme). PRE: the first unit's Wo
    block is `wpre` [BLOCK_N, KG], loaded by the caller before the barrier."""
    dt = out_ptr.dtype.element_ty
    REP: tl.constexpr = NH // NKV
    W: tl.constexpr = (NH + 2 * NKV) * D
    KG: tl.constexpr = REP * D
    R: tl.constexpr = REP * BLOCK_T
    d = tl.arange(0, D)
    t = tl.arange(0, BLOCK_T)
    tmask = (t < T)[:, None]
    pos, cos, sin = _rotary(pos_ptr, cos_ptr, sin_ptr, T, BLOCK_T, D)
    row = qkv_ptr + t[:, None] * W
    r = tl.arange(0, R)
    rt, rh = r % BLOCK_T, r // BLOCK_T
    rmask = (rt < T)[:, None]
    rpos = tl.load(pos_ptr + rt, mask=rt < T, other=0)
    rcos = tl.load(cos_ptr + rpos[:, None] * D + d[None, :])
    rsin = tl.load(sin_ptr + rpos[:, None] * D + d[None, :])
    hi = tl.max(pos, axis=0) + 1
    tiles = tl.cdiv(N, BLOCK_N)
    for u in range(pid, tiles * NKV, nprog):
        tile, g = u % tiles, u // tiles
        rn = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = rn < N
        omask = tmask & nmask[None, :]
        if PRE:
            if u == pid:
                wt = wpre
            else:
                wt = _attn_o_weights(wo_ptr, u, N, NH * D, BLOCK_N, KG, NKV)
        else:
            wt = _attn_o_weights(wo_ptr, u, N, NH * D, BLOCK_N, KG, NKV)
        _write_kv(row, g, pos, cos, sin, kc_ptr, vc_ptr, S, tmask, NH, NKV, D)
        q = _load_rope(qkv_ptr + rt[:, None] * W + ((g * REP + rh) * D)[:, None], rmask, rcos, rsin, D)
        o = _attend(q, kc_ptr, vc_ptr, g, S, rpos, hi, scale, R, D, BLOCK_S, F32, True).to(dt)  # [R, D]: (h, t)
        o = tl.reshape(tl.permute(tl.reshape(o, (REP, BLOCK_T, D)), (1, 0, 2)), (BLOCK_T, KG))  # [T, KG]
        part = _dot(o, tl.trans(wt), F32)  # [BLOCK_T, BLOCK_N] fp32
        at = t[:, None] * N + rn[None, :]
        tl.store(ws_ptr + g * BLOCK_T * N + at, part, mask=omask)
        tl.debug_barrier()
        arrived = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
        if arrived == NKV - 1:  # the tile's last group: reduce in group order, then the residual epilogue
            acc_o = tl.zeros([BLOCK_T, BLOCK_N], dtype=tl.float32)
            for s in tl.static_range(NKV):
                acc_o += tl.load(ws_ptr + s * BLOCK_T * N + at, mask=omask, other=0.0, cache_modifier=".cg")
            tl.store(cnt_ptr + tile, 0)
            y = _epilogue(acc_o, acc_o, out_ptr, res_ptr, t, rn, N, omask, 1)
            _ss_partial(y, omask, ss_out, tile, t, BLOCK_T)
