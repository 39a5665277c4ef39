"""Exact mode on CUDA: Triton kernels with one tiling whatever the row count (imported on first use).

What carried over from the bench's verify kernels (docs/cuda.md, history): one product tiling per
kernel, chosen once, fp32 accumulators over a K loop in one order, no split-K or stream-K whose
reduction order follows the grid (a split count chosen from M, as cuBLAS chooses it, or partials added
atomically in whatever order programs finish); the norm statistic as a row pass; attention over
the cache in fixed blocks with an online softmax in fp32. Here the tiling is fixed so that a row's sums
run in the same order whether it is computed alone (a 1-row decode) or among M rows (a verify window, a
prefill, the reference's full forward): an output tile is BLOCK_M x BLOCK_N whatever M is, and its K
loop always runs in steps of BLOCK_K from the start of its slice (batch_invariant_ops' persistent
matmul fixes its config the same way; here one tile per program).

The split of K (exact/ksplit.py) is not the grid's: its count is a function of K and N only, its
slices start at 0, length, 2 length, ..., and a second kernel adds the fp32 partials in slice order
0, 1, ..., S - 1 before alpha, the bias and the one rounding. So a row's sum is the same sequence of
fp32 additions whatever M or the batch is: each slice in BLOCK_K steps, then the slices in order (with
one slice, the one-pass kernel: no partials). It exists to give a one-row decode of a 4096-wide layer
more than its 64 output tiles of programs (the H200 has 132 SMs).

Products take fp32 through tl.dot with IEEE fp32 inputs when the tensors are fp32 (no TF32), bf16 /
fp16 inputs into an fp32 accumulator otherwise; the result is rounded once to the input dtype.
Attention: one program per (query block, batch x head), KV blocks of ATTN_N slots from slot 0 in
order; a slot that a row's mask hides scores -inf, so for that row a block it cannot see leaves the
running max, sum and accumulator bit for bit as they were (exp(-inf) = 0, rescale exp(0) = 1): a block
computed or skipped, the row's result is the same (exact/attention.py's worked example). A block that
no row of the program sees (a static cache's slots past the window) is skipped.
"""

from __future__ import annotations

import math
import os

import torch
import triton
import triton.language as tl

from eagle3_check.exact.ksplit import BLOCK_K, BLOCK_M, BLOCK_N, k_slices, split_count

ROW_BLOCK = 1024  # a row reduction's chunk
ATTN_M, ATTN_N = 16, 64  # attention: query rows a program, KV slots a block
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"  # the CPU test of these kernels


@triton.jit
def _finish(acc, bias, c, pb, rm, rn, M, N, scb, scm, scn, sbias_m, sbias_n, alpha, beta,
            HAS_BIAS: tl.constexpr):
    """acc [BM, BN] fp32 -> alpha * acc (+ beta * bias), rounded once to c's dtype, stored."""
    acc = acc * alpha
    if HAS_BIAS:
        bv = tl.load(bias + rm[:, None] * sbias_m + rn[None, :] * sbias_n,
                     mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)
        acc += beta * bv.to(tl.float32)
    tl.store(c + pb * scb + rm[:, None] * scm + rn[None, :] * scn, acc.to(c.dtype.element_ty),
             mask=(rm[:, None] < M) & (rn[None, :] < N))


@triton.jit
def _mm_kernel(a, b, bias, c, part, M, N, K, SLICES, SLICE, sab, sam, sak, sbb, sbk, sbn, scb, scm, scn,
               sbias_m, sbias_n, alpha, beta, HAS_BIAS: tl.constexpr, IEEE: tl.constexpr,
               SPLIT: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
    """Program (m tile, n tile, b * SLICES + s) sums K's slice s, [s * SLICE, (s + 1) * SLICE), in steps
    of BK in order. One slice (SPLIT false, SLICE >= K): the result, finished. Else its fp32 partial
    into part [B, SLICES, M, N] for _sum_slices."""
    pm, pn, pz = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    pb, ps = pz // SLICES, pz % SLICES
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    rk = tl.arange(0, BK)
    k_end = tl.minimum(K, (ps + 1) * SLICE)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k0 in range(ps * SLICE, k_end, BK):
        ka = k0 + rk
        x = tl.load(a + pb * sab + rm[:, None] * sam + ka[None, :] * sak,
                    mask=(rm[:, None] < M) & (ka[None, :] < k_end), other=0.0)
        y = tl.load(b + pb * sbb + ka[:, None] * sbk + rn[None, :] * sbn,
                    mask=(ka[:, None] < k_end) & (rn[None, :] < N), other=0.0)
        if IEEE:  # fp32 tensors (no TF32), or Triton's interpreter (numpy has no bf16 product)
            acc += tl.dot(x.to(tl.float32), y.to(tl.float32), input_precision="ieee")
        else:
            acc += tl.dot(x, y)
    if SPLIT:  # part [B, SLICES, M, N] contiguous, pz = b * SLICES + s: B 2, SLICES 3, M 5, N 7, b 1, s 2 ->
        # pz 5, element (m, n) at (5 * 5 + m) * 7 + n = ((1 * 3 + 2) * 5 + m) * 7 + n, part[1, 2, m, n]
        tl.store(part + (pz * M + rm[:, None]) * N + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))
    else:
        _finish(acc, bias, c, pb, rm, rn, M, N, scb, scm, scn, sbias_m, sbias_n, alpha, beta, HAS_BIAS)


@triton.jit
def _sum_slices(part, bias, c, M, N, SLICES, scb, scm, scn, sbias_m, sbias_n, alpha, beta,
                HAS_BIAS: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    """Program (m tile, n tile, b): the partials of part [B, SLICES, M, N] added s = 0, 1, ... in order
    (fp32), then finished as the one-slice kernel finishes."""
    pm, pn, pb = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    rm = pm * BM + tl.arange(0, BM)
    rn = pn * BN + tl.arange(0, BN)
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ps in range(0, SLICES):
        acc += tl.load(part + ((pb * SLICES + ps) * M + rm[:, None]) * N + rn[None, :],
                       mask=(rm[:, None] < M) & (rn[None, :] < N), other=0.0)
    _finish(acc, bias, c, pb, rm, rn, M, N, scb, scm, scn, sbias_m, sbias_n, alpha, beta, HAS_BIAS)


def _products(a: torch.Tensor, b: torch.Tensor, bias: torch.Tensor | None = None, alpha=1.0,
              beta=1.0, splits: int | None = None) -> torch.Tensor:
    """a [B, M, K] @ b [B, K, N] (+ beta * bias, broadcast to [M, N]) -> [B, M, N] in a's dtype.
    K is cut into ksplit.split_count(K, N) slices (`splits` forces another count: the tests' small
    shapes), never a count taken from M or B."""
    n_b, m, k = a.shape
    n = b.shape[2]
    slices, length = k_slices(k, split_count(k, n) if splits is None else splits)
    c = torch.empty(n_b, m, n, dtype=a.dtype, device=a.device)  # [B, M, N]
    bb = bias.expand(m, n) if bias is not None else c[0]  # [M, N] view (strides 0 where broadcast)
    # [B, S, M, N] fp32 partials (S = slices); one slice writes c directly
    part = torch.empty(n_b, slices, m, n, dtype=torch.float32, device=a.device) if slices > 1 else c
    tiles = (triton.cdiv(m, BLOCK_M), triton.cdiv(n, BLOCK_N))
    finish = (c.stride(0), c.stride(1), c.stride(2), bb.stride(0), bb.stride(1), float(alpha), float(beta))
    _mm_kernel[(*tiles, n_b * slices)](
        a, b, bb, c, part, m, n, k, slices, length, a.stride(0), a.stride(1),
        a.stride(2), b.stride(0), b.stride(1), b.stride(2), *finish, HAS_BIAS=bias is not None,
        IEEE=a.dtype == torch.float32 or INTERPRETED, SPLIT=slices > 1, BM=BLOCK_M, BN=BLOCK_N, BK=BLOCK_K)
    if slices > 1:
        _sum_slices[(*tiles, n_b)](part, bb, c, m, n, slices, *finish, HAS_BIAS=bias is not None,
                                   BM=BLOCK_M, BN=BLOCK_N)
    return c


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # [M, K], [K, N] -> [M, N]
    return _products(a[None], b[None])[0]


def addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1) -> torch.Tensor:
    """bias [N] or [M, N], a [M, K], b [K, N] -> [M, N]."""
    return _products(a[None], b[None], bias if beta != 0 else None, alpha, beta)[0]  # [M, N]


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # [B, M, K], [B, K, N] -> [B, M, N]
    return _products(a, b)


@triton.jit
def _row_kernel(x, out, S, sx, so, MODE: tl.constexpr, BLOCK: tl.constexpr):
    """MODE 0: softmax, 1: log_softmax, 2: mean, over one row of S; chunks of BLOCK in order."""
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    if MODE == 2:
        total = tl.zeros((BLOCK,), dtype=tl.float32)
        for s0 in range(0, S, BLOCK):
            total += tl.load(x + row * sx + s0 + cols, mask=s0 + cols < S, other=0.0).to(tl.float32)
        tl.store(out + row, tl.sum(total, axis=0) / S)
    else:
        mx = tl.full((BLOCK,), float("-inf"), dtype=tl.float32)
        for s0 in range(0, S, BLOCK):
            v = tl.load(x + row * sx + s0 + cols, mask=s0 + cols < S, other=float("-inf")).to(tl.float32)
            mx = tl.maximum(mx, v)
        m = tl.max(mx, axis=0)
        total = tl.zeros((BLOCK,), dtype=tl.float32)
        for s0 in range(0, S, BLOCK):
            v = tl.load(x + row * sx + s0 + cols, mask=s0 + cols < S, other=float("-inf")).to(tl.float32)
            total += tl.exp(v - m)
        z = tl.sum(total, axis=0)
        for s0 in range(0, S, BLOCK):
            v = tl.load(x + row * sx + s0 + cols, mask=s0 + cols < S, other=float("-inf")).to(tl.float32)
            r = (v - m) - tl.log(z) if MODE == 1 else tl.exp(v - m) / z
            tl.store(out + row * so + s0 + cols, r.to(out.dtype.element_ty), mask=s0 + cols < S)


def _rows(x: torch.Tensor, dim: int, mode: int, out_dtype: torch.dtype) -> torch.Tensor:  # x's shape, out_dtype
    moved = x.movedim(dim, -1).contiguous()  # [..., S]
    rows = moved.reshape(-1, moved.shape[-1])  # [R, S]
    out = torch.empty(rows.shape, dtype=out_dtype, device=x.device)  # [R, S]
    _row_kernel[(rows.shape[0],)](rows, out, rows.shape[1], rows.stride(0), out.stride(0),
                                  MODE=mode, BLOCK=ROW_BLOCK)
    return out.reshape(moved.shape).movedim(-1, dim)


def softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:  # [..., S, ...] -> same shape
    return _rows(x, dim, 0, torch.float32 if half_to_float else x.dtype)


def log_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:  # [..., S, ...] -> same shape
    return _rows(x, dim, 1, torch.float32 if half_to_float else x.dtype)


def mean_dim(x: torch.Tensor, dim, keepdim: bool = False, *, dtype=None) -> torch.Tensor:  # x [...] -> dims reduced
    dims = sorted(d % x.dim() for d in ([dim] if isinstance(dim, int) else (dim or range(x.dim()))))
    kept = [d for d in range(x.dim()) if d not in dims]
    rows = x.permute(*kept, *dims).contiguous().reshape(-1, math.prod(x.shape[d] for d in dims))  # [R, S]
    out = torch.empty(rows.shape[0], dtype=torch.float32, device=x.device)  # [R]
    _row_kernel[(rows.shape[0],)](rows, out, rows.shape[1], rows.stride(0), 1, MODE=2, BLOCK=ROW_BLOCK)
    shape = [1 if d in dims else x.shape[d] for d in range(x.dim())] if keepdim else [x.shape[d] for d in kept]
    return out.reshape(shape).to(dtype or x.dtype)


@triton.jit
def _attn_kernel(q, k, v, bias, o, T, S, H, GROUP, scale,
                 sqb, sqh, sqt, skb, skh, sks, svb, svh, svs, smb, smh, smt, sms, sob, soh, sot,
                 D: tl.constexpr, DP: tl.constexpr, HAS_BIAS: tl.constexpr, CAUSAL: tl.constexpr,
                 BM: tl.constexpr, BN: tl.constexpr):
    pm, pbh = tl.program_id(0), tl.program_id(1)
    bi, h = pbh // H, pbh % H
    hk = h // GROUP
    rt = pm * BM + tl.arange(0, BM)
    rd = tl.arange(0, DP)
    qt = tl.load(q + bi * sqb + h * sqh + rt[:, None] * sqt + rd[None, :],
                 mask=(rt[:, None] < T) & (rd[None, :] < D), other=0.0).to(tl.float32)  # [BM, DP]
    m = tl.full((BM,), float("-inf"), dtype=tl.float32)
    total = tl.zeros((BM,), dtype=tl.float32)
    acc = tl.zeros((BM, DP), dtype=tl.float32)
    for s0 in range(0, S, BN):
        rs = s0 + tl.arange(0, BN)
        ok = (rt[:, None] < T) & (rs[None, :] < S)  # [BM, BN]
        bv = tl.zeros((BM, BN), dtype=tl.float32)
        if HAS_BIAS:
            bv = tl.load(bias + bi * smb + h * smh + rt[:, None] * smt + rs[None, :] * sms, mask=ok,
                         other=float("-inf")).to(tl.float32)
            ok = ok & (bv != float("-inf"))
        if CAUSAL:
            ok = ok & (rs[None, :] <= rt[:, None])
        if tl.max(ok.to(tl.int32)) > 0:  # else no row here sees the block: computing it would change nothing
            kt = tl.load(k + bi * skb + hk * skh + rs[:, None] * sks + rd[None, :],
                         mask=(rs[:, None] < S) & (rd[None, :] < D), other=0.0).to(tl.float32)  # [BN, DP]
            s = tl.dot(qt, tl.trans(kt), input_precision="ieee") * scale + bv  # [BM, BN]
            s = tl.where(ok, s, float("-inf"))
            m_new = tl.maximum(m, tl.max(s, axis=1))
            m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)  # a row that has seen nothing yet
            p = tl.exp(s - m_safe[:, None])  # [BM, BN]; 0 where hidden
            rescale = tl.exp(m - m_safe)
            vt = tl.load(v + bi * svb + hk * svh + rs[:, None] * svs + rd[None, :],
                         mask=(rs[:, None] < S) & (rd[None, :] < D), other=0.0).to(tl.float32)  # [BN, DP]
            total = total * rescale + tl.sum(p, axis=1)
            acc = acc * rescale[:, None] + tl.dot(p, vt, input_precision="ieee")
            m = m_new
    out = acc / tl.where(total > 0, total, 1.0)[:, None]
    tl.store(o + bi * sob + h * soh + rt[:, None] * sot + rd[None, :], out.to(o.dtype.element_ty),
             mask=(rt[:, None] < T) & (rd[None, :] < D))


def sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None,
         is_causal: bool, scale: float | None) -> torch.Tensor:
    """query [B, Hq, T, D], key / value [B, Hk, S, D] -> [B, Hq, T, D]; attn_mask bool or additive,
    broadcast to [B, Hq, T, S]."""
    n_b, n_h, n_t, d = query.shape
    n_s = key.shape[2]
    q, k, v = (x if x.stride(-1) == 1 else x.contiguous() for x in (query, key, value))
    o = torch.empty_like(q)  # [B, Hq, T, D]
    if attn_mask is not None:
        bias = attn_mask if attn_mask.dtype != torch.bool else torch.zeros(
            attn_mask.shape, dtype=torch.float32, device=q.device).masked_fill_(~attn_mask, float("-inf"))
        bias = bias.expand(n_b, n_h, n_t, n_s)  # [B, Hq, T, S] (strides 0 where broadcast)
    else:
        bias = o
    grid = (triton.cdiv(n_t, ATTN_M), n_b * n_h)
    _attn_kernel[grid](q, k, v, bias, o, n_t, n_s, n_h, n_h // k.shape[1],
                       1.0 / math.sqrt(d) if scale is None else float(scale),
                       q.stride(0), q.stride(1), q.stride(2), k.stride(0), k.stride(1), k.stride(2),
                       v.stride(0), v.stride(1), v.stride(2),
                       *(bias.stride() if attn_mask is not None else (0, 0, 0, 0)),
                       o.stride(0), o.stride(1), o.stride(2),
                       D=d, DP=max(16, triton.next_power_of_2(d)), HAS_BIAS=attn_mask is not None,
                       CAUSAL=bool(is_causal), BM=ATTN_M, BN=ATTN_N)
    return o
