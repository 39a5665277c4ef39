"""Exact-mode attention: scaled_dot_product_attention reduced over the KV length in fixed blocks.

One query row's output depends only on its query vector, the keys and values its mask allows and the
fixed block size, never on how many rows are computed with it or on how long the cache is. The KV
axis is cut into blocks of `BLOCK` slots starting at slot 0; a block with no allowed slot is skipped;
in an allowed block the disallowed slots' keys and values are zeroed and their scores set to -inf, so
a block's content is the same whether the slots past the sequence are a static cache's unused (or
stale) slots or the padding of a full forward's shorter KV; blocks are combined in slot order by an
online softmax in fp32 (running max, rescaled sum and accumulator). So a 1-row decode, a K+1-row
verify, a prefill chunk and the reference's full forward over the same prefix compute each row the
same way, bit for bit.

Worked example (BLOCK 4, a row at position 5, a static cache of 12 slots): slots 0-3 form block 0,
4-7 block 1 (4, 5 allowed; 6, 7 zeroed, -inf), 8-11 block 2 (none allowed: skipped). A full forward
of 7 tokens has blocks 0-3 and 4-6 padded to 4-7: the same two blocks, the same content.

On CPU (this module): per row and block, two `torch.mv` of fixed shape ([BLOCK, D] and [D, BLOCK]) and
1-D exp / sum / max of BLOCK elements. On CUDA: exact/triton_kernels.py, the same blocks and order.
"""

from __future__ import annotations

import math

import torch

BLOCK = 64  # KV slots a block; fixed, whatever the query count or the cache length


def allowed_slots(attn_mask: torch.Tensor | None, is_causal: bool, b: int, h: int, t: int,
                  n_q: int, n_kv: int) -> tuple[torch.Tensor, torch.Tensor | None]:
    """Row (b, h, t)'s allowed KV slots [S] bool, and its additive bias [S] fp32 (a float mask) or None.
    A causal row t may see slots 0..t (torch's top-left alignment)."""
    allowed = torch.ones(n_kv, dtype=torch.bool)  # [S]
    bias = None
    if attn_mask is not None:
        m = attn_mask.expand(*attn_mask.shape[:-2], n_q, n_kv) if attn_mask.shape[-2] == 1 else attn_mask
        row = m[b % m.shape[0], h % m.shape[1], t] if m.dim() == 4 else m[t]  # [S]
        if row.dtype == torch.bool:
            allowed = row.clone()
        else:
            bias = row.to(torch.float32)
            allowed = bias != float("-inf")
    if is_causal:
        allowed &= torch.arange(n_kv) <= t
    return allowed, bias


def _padded(x: torch.Tensor, n: int) -> torch.Tensor:  # [S, ...] -> [n, ...] (zeros appended)
    return x if x.shape[0] == n else torch.cat([x, x.new_zeros(n - x.shape[0], *x.shape[1:])])


def attend_row(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, allowed: torch.Tensor,
               bias: torch.Tensor | None, scale: float) -> torch.Tensor:
    """One query row q [D] over k, v [S', D] (fp32, S' a multiple of BLOCK, zero-padded) with its allowed
    slots [S'] and bias [S'] (or None) -> [D] fp32. Blocks in slot order; a block with no allowed slot
    is skipped."""
    m = torch.tensor(float("-inf"))
    total = torch.tensor(0.0)
    acc = torch.zeros(v.shape[1], dtype=torch.float32)  # [D]
    seen = allowed.view(-1, BLOCK).any(1).tolist()  # [S' / BLOCK]: which blocks the row sees
    for j in (j for j, any_ in enumerate(seen) if any_):
        ok = allowed[j * BLOCK:(j + 1) * BLOCK]  # [BLOCK]
        kb = torch.where(ok[:, None], k[j * BLOCK:(j + 1) * BLOCK], 0.0)  # [BLOCK, D]: hidden slots zeroed
        vb = torch.where(ok[:, None], v[j * BLOCK:(j + 1) * BLOCK], 0.0)  # [BLOCK, D]
        s = torch.mv(kb, q) * scale  # [BLOCK]
        if bias is not None:
            s = s + bias[j * BLOCK:(j + 1) * BLOCK]
        s = torch.where(ok, s, float("-inf"))
        m_new = torch.maximum(m, s.max())
        p = torch.exp(s - m_new)  # [BLOCK]
        rescale = torch.exp(m - m_new)
        total = total * rescale + p.sum()
        acc = acc * rescale + torch.mv(vb.t().contiguous(), p)  # [D]
        m = m_new
    return acc / total if float(total) > 0 else acc


def sdpa_cpu(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, attn_mask: torch.Tensor | None,
             is_causal: bool, scale: float | None) -> torch.Tensor:
    """query [B, Hq, T, D], key / value [B, Hk, S, D] (Hq a multiple of Hk: grouped heads) -> [B, Hq, T, D]."""
    n_b, n_h, n_q, d = query.shape
    n_kv = key.shape[2]
    padded = -(-n_kv // BLOCK) * BLOCK  # S rounded up to whole blocks
    group = n_h // key.shape[1]
    scale = 1.0 / math.sqrt(d) if scale is None else scale
    q32 = query.to(torch.float32)
    k32, v32 = (_padded(x.to(torch.float32).movedim(2, 0), padded).movedim(0, 2) for x in (key, value))
    per_head = attn_mask is not None and attn_mask.dim() == 4 and attn_mask.shape[1] > 1
    out = torch.empty(n_b, n_h, n_q, value.shape[-1], dtype=torch.float32)  # [B, Hq, T, Dv]
    for b in range(n_b):
        heads = [(k32[b, hk].contiguous(), v32[b, hk].contiguous()) for hk in range(key.shape[1])]  # [S', D] each
        for t in range(n_q):
            mask = None
            for h in range(n_h):
                if mask is None or per_head:
                    allowed, bias = allowed_slots(attn_mask, is_causal, b, h, t, n_q, n_kv)
                    mask = (_padded(allowed, padded), None if bias is None else _padded(bias, padded))
                kh, vh = heads[h // group]
                out[b, h, t] = attend_row(q32[b, h, t].contiguous(), kh, vh, *mask, scale)
    return out.to(query.dtype)
