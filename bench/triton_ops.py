"""Small Triton helpers the bench's verify kernels share (triton_verify, triton_splitk,
triton_persistent, triton_attention): the fp32-accumulating dot and the online softmax over a kv
head's cache, and a stored tile's sum-of-squares partial (the next RMSNorm's input). Bench-only: not the library's path.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _dot(a, b, F32: tl.constexpr):
    """tl.dot(a, b) with fp32 accumulation; F32 (the CPU interpreter, whose bf16 dot is wrong in
    Triton 3.6) upcasts the bf16 operands first: the same products, exactly representable."""
    if F32:
        return tl.dot(a.to(tl.float32), b.to(tl.float32))
    return tl.dot(a, b)


@triton.jit
def _softmax_step(q, kt, vt, valid, m_i, l_i, acc, scale, F32: tl.constexpr):
    """One online-softmax step over a block of keys: q [R, D], kt and vt [B, D], valid [R, B]; the
    running max m_i [R], sum l_i [R] and acc [R, D] (fp32) -> their updates."""
    sc = _dot(q, tl.trans(kt), F32) * scale  # [R, B] fp32
    sc = tl.where(valid, sc, float("-inf"))
    m_new = tl.maximum(m_i, tl.max(sc, axis=1))
    alpha = tl.exp(m_i - m_new)
    p = tl.exp(sc - m_new[:, None])
    l_i = l_i * alpha + tl.sum(p, axis=1)
    acc = acc * alpha[:, None] + _dot(p.to(q.dtype), vt, F32)
    return m_new, l_i, acc


@triton.jit
def _attend_state(q, kc_ptr, vc_ptr, g, S, rpos, hi, scale, R: tl.constexpr, D: tl.constexpr,
                  BLOCK_S: tl.constexpr, F32: tl.constexpr, CG: tl.constexpr):
    """Online softmax of q [R, D] over kv head g's cache slots s < hi with s <= rpos (each row's
    position), in blocks of BLOCK_S; returns (max [R], sum [R], acc [R, D]), fp32. CG: read the
    cache through L2 only (.cg: other SMs wrote it, as in triton_persistent)."""
    m_i, l_i, acc = _softmax_init(R, D)
    return _attend_from(q, kc_ptr, vc_ptr, g, S, rpos, 0, hi, scale, m_i, l_i, acc, D, BLOCK_S, F32, CG)


@triton.jit
def _softmax_init(R: tl.constexpr, D: tl.constexpr):
    """An online softmax before any key: max [R] (-1e30, not -inf: exp(m - m_new) stays finite), sum [R], acc [R, D]."""
    return tl.full([R], -1.0e30, tl.float32), tl.zeros([R], dtype=tl.float32), tl.zeros([R, D], dtype=tl.float32)


@triton.jit
def _attend_from(q, kc_ptr, vc_ptr, g, S, rpos, lo, hi, scale, m_i, l_i, acc, D: tl.constexpr,
                 BLOCK_S: tl.constexpr, F32: tl.constexpr, CG: tl.constexpr):
    """_attend_state's loop from slot lo on, continuing the state (m_i [R], l_i [R], acc [R, D])."""
    for s0 in range(lo, hi, BLOCK_S):
        s = s0 + tl.arange(0, BLOCK_S)
        kt, vt = _cache_block(kc_ptr, vc_ptr, g, S, s, D, CG)
        valid = (s[None, :] <= rpos[:, None]) & (s[None, :] < hi)
        m_i, l_i, acc = _softmax_step(q, kt, vt, valid, m_i, l_i, acc, scale, F32)
    return m_i, l_i, acc


@triton.jit
def _cache_block(kc_ptr, vc_ptr, g, S, s, D: tl.constexpr, CG: tl.constexpr):
    """kv head g's cached k and v at slots s [BLOCK_S] -> [BLOCK_S, D] each (0 past S)."""
    d = tl.arange(0, D)
    kv_at = g * S * D + s[:, None] * D + d[None, :]
    smask = (s < S)[:, None]
    if CG:
        kt = tl.load(kc_ptr + kv_at, mask=smask, other=0.0, cache_modifier=".cg")
        vt = tl.load(vc_ptr + kv_at, mask=smask, other=0.0, cache_modifier=".cg")
    else:
        kt = tl.load(kc_ptr + kv_at, mask=smask, other=0.0)
        vt = tl.load(vc_ptr + kv_at, mask=smask, other=0.0)
    return kt, vt


@triton.jit
def _attend(q, kc_ptr, vc_ptr, g, S, rpos, hi, scale, R: tl.constexpr, D: tl.constexpr, BLOCK_S: tl.constexpr,
            F32: tl.constexpr, CG: tl.constexpr):
    """softmax(q k^T * scale) v over kv head g's cache slots s <= rpos, s < hi: q [R, D] -> [R, D] fp32."""
    m_i, l_i, acc = _attend_state(q, kc_ptr, vc_ptr, g, S, rpos, hi, scale, R, D, BLOCK_S, F32, CG)
    return acc / l_i[:, None]


@triton.jit
def _ss_partial(y, omask, ss_out, tile, rm, BLOCK_M: tl.constexpr):
    """Store the stored tile y's [BLOCK_M, BLOCK_N] row sums of squares (fp32 of its rounded values,
    0 outside omask) at ss_out[tile]: a norm downstream sums the tiles' partials."""
    yf = tl.where(omask, y.to(tl.float32), 0.0)
    tl.store(ss_out + tile * BLOCK_M + rm, tl.sum(yf * yf, axis=1))
