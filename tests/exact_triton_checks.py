"""The Triton kernels of eagle3_check/exact/triton_kernels.py on CPU tensors under Triton's interpreter:
run by tests/exact/test_exact_triton.py as `TRITON_INTERPRET=1 python tests/exact_triton_checks.py` (the
variable must precede triton's first import, hence a fresh interpreter). Each check: one row alone
equals the row among M, bit for bit, and the value is the product / softmax / mean / attention torch
computes (within the dtype's rounding); with K split into 2 and 3 slices (forced: `splits=`), a row
alone equals it among M and in a batch of B. Prints two lines per dtype; exits non-zero on a failed check."""

from __future__ import annotations

import torch

from eagle3_check.exact import triton_kernels as tk
from eagle3_check.exact.ksplit import k_slices

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


def check_split(dtype: torch.dtype) -> None:
    """K = 200 in 2 slices (128 + 72) and 3 (96 + 96 + 8): rows 33 and 66 of 67 (two M tiles, the last
    partly masked) alone equal the rows among M, for mm, addmm (1-D and 2-D bias, alpha 2, beta 0.5)
    and bmm (B = 3, each batch's row alone, B = 1)."""
    torch.manual_seed(1)
    m, k, n = 67, 200, 70
    a, w = torch.randn(m, k, dtype=dtype), torch.randn(n, k, dtype=dtype)
    bias1, bias2 = torch.randn(n, dtype=dtype), torch.randn(m, n, dtype=dtype)
    batch, wb = torch.randn(3, m, k, dtype=dtype), torch.randn(3, k, n, dtype=dtype)  # [3, M, K], [3, K, N]
    want = a.float() @ w.float().t()  # [M, N]
    one = tk._products(a[None], w.t()[None], splits=1)[0]  # [M, N]: the one-pass kernel
    for splits in (2, 3):
        assert k_slices(k, splits)[0] == splits, splits
        prod = tk._products(a[None], w.t()[None], splits=splits)[0]  # [M, N]
        assert close(prod, want, dtype), f"mm, {splits} slices"
        if dtype == torch.float32:  # the slices' partials are summed otherwise than one pass: the split ran
            assert not torch.equal(prod, one), f"{splits} slices gave the one-pass bits"
        plus1 = tk._products(a[None], w.t()[None], bias1, 2.0, 0.5, splits=splits)[0]  # [M, N]
        plus2 = tk._products(a[None], w.t()[None], bias2, 2.0, 0.5, splits=splits)[0]  # [M, N]
        assert close(plus1, 2 * want + 0.5 * bias1.float(), dtype), f"addmm 1-D bias, {splits} slices"
        assert close(plus2, 2 * want + 0.5 * bias2.float(), dtype), f"addmm 2-D bias, {splits} slices"
        many = tk._products(batch, wb, splits=splits)  # [3, M, N]
        assert close(many, batch.float() @ wb.float(), dtype), f"bmm, {splits} slices"
        for i in (33, 66):
            row = a[i:i + 1][None]  # [1, 1, K]
            assert torch.equal(prod[i:i + 1], tk._products(row, w.t()[None], splits=splits)[0]), f"mm row {i}"
            assert torch.equal(plus1[i:i + 1], tk._products(row, w.t()[None], bias1, 2.0, 0.5, splits=splits)[0]), \
                f"addmm 1-D bias row {i}"
            assert torch.equal(plus2[i:i + 1], tk._products(row, w.t()[None], bias2[i:i + 1], 2.0, 0.5,
                                                            splits=splits)[0]), f"addmm 2-D bias row {i}"
            for j in range(3):
                alone = tk._products(batch[j:j + 1, i:i + 1], wb[j:j + 1], splits=splits)  # [1, 1, N]
                assert torch.equal(many[j:j + 1, i:i + 1], alone), f"bmm batch {j} row {i}"
    x, w = torch.randn(5, 4096, dtype=dtype), torch.randn(256, 4096, dtype=dtype)  # the rule's count: 8 slices
    c = tk.mm(x, w.t())  # [5, 256]
    assert torch.equal(c[4:5], tk.mm(x[4:5], w.t())) and close(c, x.float() @ w.float().t(), dtype), "mm, K 4096"
    print(f"{dtype}: mm addmm bmm split-K in 2, 3 and 8 slices row-invariant, values as torch's")


if __name__ == "__main__":
    for dt in (torch.float32, torch.bfloat16):
        check(dt)
        check_split(dt)
