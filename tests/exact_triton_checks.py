"""The Triton kernels of eagle3_check/exact/triton_kernels.py on CPU tensors under Triton's interpreter:
run by tests/exact/test_exact_triton.py as `TRITON_INTERPRET=1 python tests/exact_triton_checks.py` (the
variable must precede triton's first import, hence a fresh interpreter). Each check: one row alone
equals the row among M, bit for bit, and the value is the product / softmax / mean / attention torch
computes (within the dtype's rounding). Prints one line per dtype; exits non-zero on a failed check."""

from __future__ import annotations

import torch

from eagle3_check.exact import triton_kernels as tk

TOL = {torch.float32: 1e-4, torch.bfloat16: 2e-2}  # relative: fp32 sums in another order; bf16 output rounding


def close(got: torch.Tensor, want: torch.Tensor, dtype) -> bool:
    return bool((got.float() - want).abs().max() <= TOL[dtype] * max(1.0, float(want.abs().max())))


def check(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    a, w, bias = torch.randn(70, 40, dtype=dtype), torch.randn(50, 40, dtype=dtype), torch.randn(50, dtype=dtype)
    want = a.float() @ w.float().t()  # [70, 50]
    c, c1 = tk.mm(a, w.t()), tk.mm(a[33:34], w.t())
    assert torch.equal(c[33:34], c1) and close(c, want, dtype), "mm"
    c, c1 = tk.addmm(bias, a, w.t()), tk.addmm(bias, a[65:66], w.t())
    assert torch.equal(c[65:66], c1) and close(c, want + bias.float(), dtype), "addmm"
    c, c1 = tk.bmm(a[None].expand(2, 70, 40), w.t()[None].expand(2, 40, 50)), tk.bmm(a[None, 5:6], w.t()[None])
    assert torch.equal(c[1:, 5:6], c1) and close(c[0], want, dtype), "bmm"
    x = torch.randn(3, 7, 1500, dtype=dtype)  # rows longer than one chunk
    s, s1 = tk.softmax(x, -1, False), tk.softmax(x[1:2, 3:4], -1, False)
    assert torch.equal(s[1:2, 3:4], s1) and close(s, torch.softmax(x.float(), -1), dtype), "softmax"
    ls = tk.log_softmax(x, -1, True)
    assert ls.dtype == torch.float32 and close(ls, torch.log_softmax(x.float(), -1), dtype), "log_softmax"
    mn, mn1 = tk.mean_dim(x, [-1], True), tk.mean_dim(x[2:3, 5:6], [-1], True)
    assert torch.equal(mn[2:3, 5:6], mn1) and close(mn, x.float().mean(-1, keepdim=True), dtype), "mean"
    q = torch.randn(1, 4, 6, 16, dtype=dtype)  # a 6-row verify at positions 100..105 over 200 slots
    k, v = torch.randn(1, 2, 200, 16, dtype=dtype), torch.randn(1, 2, 200, 16, dtype=dtype)
    mask = (torch.arange(200)[None, :] <= (100 + torch.arange(6))[:, None])[None, None]  # [1, 1, 6, 200]
    o = tk.sdpa(q, k, v, mask, False, None)
    o1 = tk.sdpa(q[:, :, 2:3], k[:, :, :103], v[:, :, :103], mask[:, :, 2:3, :103], False, None)
    qc = torch.randn(1, 4, 103, 16, dtype=dtype)
    qc[:, :, 100:] = q[:, :, :3]
    oc = tk.sdpa(qc, k[:, :, :103], v[:, :, :103], None, True, None)  # the full causal forward
    want = torch.nn.functional.scaled_dot_product_attention(
        q.float(), k.float().repeat_interleave(2, 1), v.float().repeat_interleave(2, 1), attn_mask=mask)
    assert torch.equal(o[:, :, 2:3], o1) and torch.equal(o[:, :, :3], oc[:, :, 100:]) and close(o, want, dtype), "sdpa"
    print(f"{dtype}: mm addmm bmm softmax log_softmax mean sdpa row-invariant, values as torch's")


if __name__ == "__main__":
    for dt in (torch.float32, torch.bfloat16):
        check(dt)
