"""Exact mode's CPU kernels (eagle3_check/exact): one row computed alone equals the same row computed
among M rows, bit for bit, for random shapes, in bf16 and fp32 (mm, addmm, bmm, softmax, log_softmax,
mean, attention); attention over a static cache's slots equals attention over the exact slots; the
override is scoped (torch's kernels are back after the block)."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from eagle3_check.exact import exact_active, exact_numerics
from eagle3_check.exact.attention import BLOCK
from eagle3_check.exact.ksplit import k_slices, split_count

DTYPES = [torch.float32, torch.bfloat16]
SEEDS = range(4)
CUDA = torch.cuda.is_available()
# CPU: exact/cpu.py and exact/attention.py; CUDA (`pytest -m gpu`): the Triton kernels of exact/triton_kernels.py
DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not CUDA, reason="needs a CUDA GPU; torch.cuda.is_available() is False")])]


def shapes(seed: int) -> tuple[int, int, int]:
    g = torch.Generator().manual_seed(seed)
    return tuple(int(x) for x in torch.randint(2, 90, (3,), generator=g))  # M, K, N


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("seed", SEEDS)
def test_a_row_alone_equals_the_row_among_m(dtype, seed, device):
    m, k, n = shapes(seed)
    torch.manual_seed(seed)
    x, w, bias = (torch.randn(*s, dtype=dtype).to(device) for s in ((m, k), (n, k), (n,)))
    batch = torch.randn(3, m, k, dtype=dtype).to(device)  # [3, M, K]
    i = m // 2
    with exact_numerics():
        assert torch.equal(F.linear(x, w)[i:i + 1], F.linear(x[i:i + 1], w))  # mm
        assert torch.equal(F.linear(x, w, bias)[i:i + 1], F.linear(x[i:i + 1], w, bias))  # addmm
        assert torch.equal(F.linear(x[None], w)[0, i:i + 1], F.linear(x[None, i:i + 1], w)[0])  # matmul -> mm
        assert torch.equal(torch.bmm(batch, w.t().expand(3, k, n))[:, i:i + 1],
                           torch.bmm(batch[:, i:i + 1], w.t().expand(3, k, n)))
        for fn in (lambda t: torch.softmax(t, -1), lambda t: torch.log_softmax(t, -1),
                   lambda t: torch.softmax(t, -1, dtype=torch.float32),
                   lambda t: t.float().pow(2).mean(-1, keepdim=True), lambda t: t.mean(-1)):
            assert torch.equal(fn(x)[i:i + 1], fn(x[i:i + 1]))
        exact = F.linear(x.float(), w.float())
    assert not exact_active()
    assert (exact - x.float() @ w.float().t()).abs().max() < 1e-3 * k  # the same product, summed otherwise


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_a_row_alone_equals_the_row_among_m_with_k_split(dtype, device):
    """K 4096, N 256: the CUDA product cuts K into 8 slices of 512 (exact/ksplit.py) whatever M is; a
    decode's row (M 1) equals the same row in a verify window (M 5) and a full tile (M 64), and in a
    batch of 2 (bmm). On CPU the same check of exact/cpu.py's product at this K."""
    k, n = 4096, 256
    assert k_slices(k, split_count(k, n)) == (8, 512)  # the split path, not the one-pass kernel
    torch.manual_seed(0)
    x, w, bias = (torch.randn(*s, dtype=dtype).to(device) for s in ((64, k), (n, k), (n,)))  # [64, K], [N, K], [N]
    batch = torch.randn(2, 64, k, dtype=dtype).to(device)  # [2, 64, K]
    with exact_numerics():
        for m in (5, 64):
            for r in (0, m - 1):
                assert torch.equal(F.linear(x[:m], w)[r:r + 1], F.linear(x[r:r + 1], w)), (m, r)  # mm
                assert torch.equal(F.linear(x[:m], w, bias)[r:r + 1], F.linear(x[r:r + 1], w, bias)), (m, r)
                assert torch.equal(torch.bmm(batch[:, :m], w.t().expand(2, k, n))[1, r:r + 1],
                                   torch.bmm(batch[1:, r:r + 1], w.t()[None])[0]), (m, r)  # B 2 against B 1
        exact = F.linear(x.float(), w.float())
    # fp32 over K 4096, values up to 259: against torch measured 2.6e-4 (CPU's mv), 4.3e-5 (8 slices, interpreter)
    assert (exact - x.float() @ w.float().t()).abs().max() < 2e-3


def _static_mask(t_rows: int, first: int, slots: int, device="cpu") -> torch.Tensor:  # -> bool [1, 1, T, S]
    """Causal over absolute slots, as the runner's static cache: row r sits at position first + r."""
    return (torch.arange(slots)[None, :] <= (first + torch.arange(t_rows))[:, None])[None, None].to(device)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("seed", SEEDS)
def test_attention_over_a_static_cache_equals_the_exact_slots(dtype, seed, device):
    """A K+1-row verify at positions p..p+K over a cache of S slots (stale values past p+K), the same
    rows computed one at a time, and the full causal forward over p+K+1 tokens: the same rows, bit for bit."""
    g = torch.Generator().manual_seed(seed)
    p, window = int(torch.randint(1, 3 * BLOCK, (1,), generator=g)), int(torch.randint(1, 9, (1,), generator=g))
    slots, heads, kv_heads, d = 4 * BLOCK, 4, 2, 16
    q = torch.randn(1, heads, window, d, generator=g).to(dtype).to(device)  # [1, H, W, D]
    k, v = (torch.randn(1, kv_heads, slots, d, generator=g).to(dtype).to(device) for _ in range(2))  # stale past p + W
    with exact_numerics():
        verify = F.scaled_dot_product_attention(q, k, v, attn_mask=_static_mask(window, p, slots, device),
                                                enable_gqa=True)
        rows = [F.scaled_dot_product_attention(q[:, :, r:r + 1], k, v, enable_gqa=True,
                                               attn_mask=_static_mask(1, p + r, slots, device)) for r in range(window)]
        n = p + window  # the full forward: queries 0..n-1, its own keys only, causal
        full_q = torch.cat([torch.randn(1, heads, p, d, generator=g).to(dtype).to(device), q], dim=2)  # [1, H, n, D]
        full = F.scaled_dot_product_attention(full_q, k[:, :, :n].repeat_interleave(2, 1),
                                              v[:, :, :n].repeat_interleave(2, 1), is_causal=True)
    assert torch.equal(verify, torch.cat(rows, dim=2))
    assert torch.equal(verify, full[:, :, p:])
    ref = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), enable_gqa=True,
                                         attn_mask=_static_mask(window, p, slots, device))
    assert (verify.float() - ref).abs().max() < (1e-5 if dtype == torch.float32 else 2e-2)  # the same attention


def test_the_override_is_scoped_and_reentrant():
    assert not exact_active()
    with exact_numerics():
        with exact_numerics():
            assert exact_active()
        assert exact_active()
        assert "exact/mode.py" in torch._C._dispatch_dump("aten::mm")
    assert not exact_active()
    assert "exact/mode.py" not in torch._C._dispatch_dump("aten::mm")


def test_attention_is_switched_for_the_block_and_restored(hf_reference):
    model = hf_reference.model
    assert model.config._attn_implementation == "eager"
    with exact_numerics(model):
        assert model.config._attn_implementation == "sdpa"
    assert model.config._attn_implementation == "eager"
