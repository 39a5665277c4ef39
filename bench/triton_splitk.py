"""Split-K skinny products for the fused Triton verify forward (bench/triton_verify.py), T <= 16 rows.

Why: at M = T rows a product is a weight stream, and triton_verify.skinny_linear runs one program
per BLOCK_N output columns over all of K: 96-128 programs for the 2048-wide products, fewer than
the H200's 132 SMs, each streaming its 64-128 KB serially (the o-proj streamed at 1.3 TB/s, q/k/v
at 1.1, against a 4.24 TB/s copy). Here the grid is (column tiles, SPLIT): each program streams
K / SPLIT of its tile's weight rows into an fp32 partial, writes it to a workspace, and counts in
on its tile's counter (an acq_rel atomic); the program that arrives last sums the SPLIT partials in
split order (0, 1, ..., deterministic) and runs the epilogue (residual add or SwiGLU, rounded as
HF eager, as in skinny_linear), then resets the counter to 0 for the next launch (a CUDA graph
replays with the counters it left). The norm prologue (NORM) is triton_verify's: fp32 statistics
over the whole row first, then weight * (x * rstd).to(bf16), so every split rounds x the same.

Config: (BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT), K a multiple of BLOCK_K * SPLIT.
CPU: TRITON_INTERPRET=1 runs programs one after another, so the last arriver is the last program
(tests/triton_verify_checks.py). Bench-only: not the library's compiled path.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton_ops import _dot
from triton_verify import BLOCK_M, INTERPRET, NONE, SWIGLU

# (BLOCK_N, BLOCK_K, num_warps, num_stages, SPLIT): the tuning space (bench/verify_fused.py --splitk)
SPLITK_CONFIGS = [(16, 256, 4, 4, 2), (16, 256, 4, 4, 4), (16, 512, 4, 3, 2), (16, 512, 4, 4, 4),
                  (32, 256, 4, 4, 2), (32, 256, 4, 3, 4), (32, 512, 4, 3, 2), (64, 256, 4, 3, 2),
                  (64, 256, 4, 3, 1), (16, 128, 4, 4, 8), (32, 128, 4, 4, 8), (64, 128, 4, 4, 4)]

# what `tune` picked on the H200 at T = 5 (--no-tune uses these)
TUNED_H200 = {"qkv": (64, 256, 4, 3, 2), "o": (64, 128, 4, 4, 4), "gate_up": (64, 256, 4, 3, 1),
              "down": (64, 128, 4, 4, 4), "lm_head": (64, 256, 4, 3, 1)}


def fits(config: tuple, k: int) -> bool:
    """Whether a split-K config tiles K exactly (the K loop has no mask)."""
    return k % (config[1] * config[4]) == 0


@triton.jit
def _epilogue(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI: tl.constexpr):
    """Round the fp32 sums to the output dtype as HF eager: residual add or SwiGLU, store; returns y."""
    dt = out_ptr.dtype.element_ty
    y = acc.to(dt)
    if EPI == 1:  # x + linear(...): both bf16, the sum rounded once
        # .cg: in triton_persistent another SM wrote the residual, and this SM's L1 may hold an older one
        r = tl.load(res_ptr + rm[:, None] * N + rn[None, :], mask=omask, other=0.0, cache_modifier=".cg")
        y = (y.to(tl.float32) + r.to(tl.float32)).to(dt)
    if EPI == 2:  # F.silu(gate) * up, each op rounded to bf16
        g = y.to(tl.float32)
        s = (g / (1.0 + tl.exp(-g))).to(dt)
        y = (s.to(tl.float32) * acc_up.to(dt).to(tl.float32)).to(dt)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], y, mask=omask)
    return y


@triton.jit
def _splitk_linear(x_ptr, w_ptr, out_ptr, res_ptr, lnw_ptr, ws_ptr, cnt_ptr, M, N, K, up_offset, eps,
                   NORM: tl.constexpr, EPI: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, F32: tl.constexpr):
    """out[M, N] = epi(prologue(x)[M, K] @ w[N, K]^T), program (n tile, k split); see module doc."""
    dt = out_ptr.dtype.element_ty
    pid_n, pid_k = tl.program_id(0), tl.program_id(1)
    rm = tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    mmask, nmask = rm < M, rn < N
    omask = mmask[:, None] & nmask[None, :]
    if NORM:  # LlamaRMSNorm: fp32 statistics over the whole row, first
        ss = tl.zeros([BLOCK_M], dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            xt = tl.load(x_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=mmask[:, None], other=0.0)
            xt = xt.to(tl.float32)
            ss += tl.sum(xt * xt, axis=1)
        rstd = tl.rsqrt(ss / K + eps)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    k_len = K // SPLIT
    for k0 in range(pid_k * k_len, (pid_k + 1) * k_len, BLOCK_K):
        kk = k0 + rk
        xt = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=mmask[:, None], other=0.0)
        if NORM:  # weight * (x * rstd).to(bf16), rounded as HF
            xn = (xt.to(tl.float32) * rstd[:, None]).to(dt)
            lw = tl.load(lnw_ptr + kk)
            xt = (lw.to(tl.float32)[None, :] * xn.to(tl.float32)).to(dt)
        wt = tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
        acc += _dot(xt, tl.trans(wt), F32)
        if EPI == 2:
            wu = tl.load(w_ptr + (up_offset + rn)[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
            acc_up += _dot(xt, tl.trans(wu), F32)
    if SPLIT == 1:
        _epilogue(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI)
    else:
        # workspace [SPLIT, BLOCK_M, NW] fp32, NW = N (2 N for SwiGLU: gate sums, then up sums)
        NW = N * 2 if EPI == 2 else N
        part = rm[:, None] * NW + rn[None, :]
        tl.store(ws_ptr + pid_k * BLOCK_M * NW + part, acc, mask=omask)
        if EPI == 2:
            tl.store(ws_ptr + pid_k * BLOCK_M * NW + part + N, acc_up, mask=omask)
        tl.debug_barrier()  # every thread's partial written before the count is released
        arrived = tl.atomic_add(cnt_ptr + pid_n, 1, sem="acq_rel")
        if arrived == SPLIT - 1:  # the last of the tile's SPLIT programs: reduce in split order
            acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
            for s in tl.static_range(SPLIT):
                acc += tl.load(ws_ptr + s * BLOCK_M * NW + part, mask=omask, other=0.0, cache_modifier=".cg")
                if EPI == 2:
                    acc_up += tl.load(ws_ptr + s * BLOCK_M * NW + part + N, mask=omask, other=0.0,
                                      cache_modifier=".cg")
            tl.store(cnt_ptr + pid_n, 0)  # the next launch (or graph replay) counts from 0
            _epilogue(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI)


_SCRATCH: dict[torch.device, tuple[torch.Tensor, torch.Tensor]] = {}


def scratch(device: torch.device, ws_floats: int, tiles: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(workspace [>= ws_floats] fp32, counters [>= tiles] int32 zeros) shared by every launch on
    `device` (launches on one stream run one after another). Grown outside a CUDA graph capture:
    the bench's warm-up call makes every size before the capture."""
    ws, cnt = _SCRATCH.get(device, (None, None))
    if ws is None or ws.numel() < ws_floats or cnt.numel() < tiles:
        if torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
            raise RuntimeError(f"splitk scratch grown during a CUDA graph capture ({ws_floats} floats, {tiles} "
                               "tiles): run the forward once before capturing")
        n_ws = max(ws_floats, ws.numel() if ws is not None else 0)
        n_cnt = max(tiles, cnt.numel() if cnt is not None else 0)
        ws = torch.empty(n_ws, device=device, dtype=torch.float32)
        cnt = torch.zeros(n_cnt, device=device, dtype=torch.int32)
        _SCRATCH[device] = ws, cnt
    return ws, cnt


def splitk_linear(
    x: torch.Tensor,  # [M, K] bf16, M <= 16, contiguous
    w: torch.Tensor,  # [N, K] (SWIGLU: [2 N, K], gate rows then up rows)
    epi: int = NONE,
    res: torch.Tensor | None = None,  # [M, N] RESIDUAL's x
    norm: torch.Tensor | None = None,  # [K] RMSNorm weight: the prologue
    eps: float = 1e-5,
    config: tuple[int, int, int, int, int] = SPLITK_CONFIGS[0],
) -> torch.Tensor:  # [M, N]
    m, k = x.shape
    n = w.shape[0] // 2 if epi == SWIGLU else w.shape[0]
    bn, bk, warps, stages, split = config
    if m > BLOCK_M or not fits(config, k) or not x.is_contiguous() or not w.is_contiguous():
        raise ValueError(f"splitk_linear: x {tuple(x.shape)} w {tuple(w.shape)} config {config}: needs M <= "
                         f"{BLOCK_M}, K a multiple of BLOCK_K * SPLIT, contiguous operands")
    out = torch.empty(m, n, device=x.device, dtype=x.dtype)
    tiles = triton.cdiv(n, bn)
    ws, cnt = scratch(x.device, split * BLOCK_M * n * (2 if epi == SWIGLU else 1), tiles)
    _splitk_linear[(tiles, split)](
        x, w, out, res if res is not None else out, norm if norm is not None else x, ws, cnt, m, n, k, n, eps,
        NORM=norm is not None, EPI=epi, BLOCK_M=BLOCK_M, BLOCK_N=bn, BLOCK_K=bk, SPLIT=split, F32=INTERPRET,
        num_warps=warps, num_stages=stages)
    return out
