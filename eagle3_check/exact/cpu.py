"""Exact mode on CPU: matrix products and row reductions in plain PyTorch, in one fixed order per row.

A row's result must not depend on how many rows are computed with it. A BLAS GEMM does not promise
that (its blocking and its kernel, GEMV for one row, GEMM for more, follow M), so each row here is one
call of the same shape: `torch.mv` of the [N, K] weight (fp32) with that row (fp32), then rounded once
to the input's dtype, as a bf16 GEMM with fp32 accumulation rounds. A reduction over a row (softmax's
sum, RMSNorm's mean) is a 1-D reduction of that row alone, the same call whatever the row count.

These functions are registered as the CPU kernels of aten's mm, addmm, bmm, _softmax, _log_softmax
and mean.dim (exact/mode.py). They call only ops that are not overridden (mv, 1-D sum, max, exp, log,
elementwise arithmetic), so a kernel never re-enters itself: a Library override replaces the CPU
kernel of its op, and calling the same op inside would call the override again. The cost is one
Python call per row (docs/exact.md measures it).
"""

from __future__ import annotations

import math

import torch


def _rows_f32(a: torch.Tensor) -> torch.Tensor:  # [M, K] -> [M, K] fp32, contiguous
    return a.to(torch.float32).contiguous()


def mm_f32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a [M, K] @ b [K, N] -> [M, N] fp32: row i is `mv(b^T, a[i])`, one call of one shape per row."""
    bt = b.t().to(torch.float32).contiguous()  # [N, K]; F.linear's b is W^T, so this is W itself
    a32 = _rows_f32(a)  # [M, K]
    out = torch.empty(a.shape[0], b.shape[1], dtype=torch.float32)  # [M, N]
    for i in range(a.shape[0]):
        torch.mv(bt, a32[i], out=out[i])
    return out


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # [M, K], [K, N] -> [M, N]
    return mm_f32(a, b).to(a.dtype)


def addmm(bias: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1) -> torch.Tensor:
    """beta * bias [N] or [M, N] + alpha * a [M, K] @ b [K, N] -> [M, N], summed in fp32, rounded once."""
    prod = mm_f32(a, b)  # [M, N]
    if alpha != 1:
        prod = prod * alpha
    if beta != 0:
        prod = prod + (bias.to(torch.float32) if beta == 1 else bias.to(torch.float32) * beta)
    return prod.to(a.dtype)


def bmm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:  # [B, M, K], [B, K, N] -> [B, M, N]
    return torch.stack([mm_f32(a[i], b[i]) for i in range(a.shape[0])]).to(a.dtype)


def _as_rows(x: torch.Tensor, dim: int) -> tuple[torch.Tensor, list[int]]:
    """x with `dim` moved last, as [R, S] fp32 rows, and the moved shape (to put it back)."""
    moved = x.movedim(dim, -1)
    return moved.to(torch.float32).reshape(-1, moved.shape[-1]).contiguous(), list(moved.shape)


def _row_softmax(x: torch.Tensor, dim: int, log: bool) -> torch.Tensor:
    """softmax or log_softmax over `dim` in fp32, each row by the same 1-D calls; same shape as x."""
    rows, shape = _as_rows(x, dim)  # [R, S]
    out = torch.empty_like(rows)  # [R, S]
    for i in range(rows.shape[0]):
        shifted = rows[i] - rows[i].max()  # [S]
        e = torch.exp(shifted)  # [S]
        out[i] = shifted - torch.log(e.sum()) if log else e / e.sum()
    return out.reshape(shape).movedim(-1, dim)


def softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:  # [..., S, ...] -> same shape
    out = _row_softmax(x, dim, log=False)
    return out if half_to_float or x.dtype == torch.float32 else out.to(x.dtype)


def log_softmax(x: torch.Tensor, dim: int, half_to_float: bool) -> torch.Tensor:  # [..., S, ...] -> same shape
    out = _row_softmax(x, dim, log=True)
    return out if half_to_float or x.dtype == torch.float32 else out.to(x.dtype)


def mean_dim(x: torch.Tensor, dim, keepdim: bool = False, *, dtype=None) -> torch.Tensor:  # x [...] -> dims reduced
    """mean over `dim` (RMSNorm's: the last), each output one 1-D sum of its own elements in fp32."""
    dims = sorted(d % x.dim() for d in ([dim] if isinstance(dim, int) else (dim or range(x.dim()))))
    kept = [d for d in range(x.dim()) if d not in dims]
    moved = x.permute(*kept, *dims)  # reduced dims last
    rows = moved.to(torch.float32).reshape(-1, math.prod(moved.shape[len(kept):])).contiguous()  # [R, S]
    out = torch.empty(rows.shape[0], dtype=torch.float32)  # [R]
    for i in range(rows.shape[0]):
        out[i] = rows[i].sum() / rows.shape[1]
    shape = [1 if d in dims else x.shape[d] for d in range(x.dim())] if keepdim else [x.shape[d] for d in kept]
    return out.reshape(shape).to(dtype or x.dtype)
