"""The compiled target forward (program/compiled.py) on CPU: the Llama math it compiles is
HF's bit for bit in fp32, the refusals are one line, compile is optional and says why not.

The compiled path itself (inductor, under CUDA graphs) is checked in tests/gpu/test_compiled_cuda.py;
a CPU compile of the tiny fixture is `slow` (about a minute per window length on 2 cores).
"""

from __future__ import annotations

import pytest
import torch

from eagle3_check.errors import OptionError
from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.judge.self_ref import self_greedy
from eagle3_check.program.compiled import compile_target, compile_unavailable, llama_layout_problem
from eagle3_check.program.eager import EagerBackend


def backend(name: str = "tiny-llama") -> EagerBackend:
    return EagerBackend.from_fixture(load_fixture(name), "cpu", "float32")


@torch.no_grad()
def test_fast_forward_is_hf_bit_for_bit_in_fp32():
    """Prefill then windows of 5 and 1 at later slots: logits and taps equal HF's exactly, and
    the KV cache written is the same (the next window reads it). One-row windows: recent
    Transformers packs the GQA heads of a single query (`pack_gqa`, another sdpa reduction
    order) where this forward repeats kv heads as HF does for every longer window: equal to
    fp32 rounding there, same argmax."""
    hf_p, fast_p = backend(), backend()
    compile_target(fast_p.module.target, "none")
    prompt = torch.tensor([list(range(3, 40))])  # [1, 37]
    calls = [(prompt, torch.arange(37)), (torch.tensor([[9, 4, 11, 12, 30]]), torch.arange(37, 42)),
             (torch.tensor([[7]]), torch.tensor([42]))]  # the one-row window last: see the docstring
    for tokens, positions in calls:
        want_logits, want_taps = hf_p.module.target(tokens, positions)
        got_logits, got_taps = fast_p.module.target(tokens, positions)
        if tokens.shape[1] == 1:
            torch.testing.assert_close(got_logits, want_logits, rtol=0, atol=1e-5)
            torch.testing.assert_close(got_taps, want_taps, rtol=0, atol=1e-5)
            assert torch.equal(got_logits.argmax(-1), want_logits.argmax(-1))
        else:
            assert torch.equal(got_logits, want_logits) and torch.equal(got_taps, want_taps), tokens.shape


def test_fast_forward_greedy_matches_hf_path():
    ids = list(range(3, 40))
    want = self_greedy(backend(), ids, 24).tokens
    fast = backend()
    compile_target(fast.module.target, "none")
    assert self_greedy(fast, ids, 24).tokens == want


def test_non_llama_target_is_refused_in_one_line():
    target = backend("tiny-gemma4").module.target
    assert "gemma4_text" in llama_layout_problem(target.model)
    with pytest.raises(OptionError, match="model_type 'gemma4_text'.*--compile off") as e:
        compile_target(target, "layer")
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("kw, match", [({"granularity": "layers"}, "granularity 'layers'"),
                                       ({"mode": "reduce-overhead"}, "mode 'reduce-overhead'")],
                         ids=["bad-granularity", "nested-cuda-graphs"])
def test_bad_options_are_refused(kw, match):
    with pytest.raises(OptionError, match=match):
        compile_target(backend().module.target, **kw)


def test_unavailable_compile_says_why(monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    reason = compile_unavailable("cpu")
    assert reason is not None and "no-such-compiler-xyz" in reason
    with pytest.raises(OptionError, match="no C\\+\\+ compiler.*--compile off"):
        compile_target(backend().module.target, "layer")
    compile_target(backend().module.target, "none")  # the uncompiled path needs no compiler


@pytest.mark.slow
def test_compiled_on_cpu_keeps_fp32_tokens():
    if compile_unavailable("cpu"):
        pytest.skip(compile_unavailable("cpu"))
    ids = list(range(3, 40))
    want = self_greedy(backend(), ids, 16).tokens
    fast = backend()
    compile_target(fast.module.target, "layer")
    assert self_greedy(fast, ids, 16).tokens == want


@torch.no_grad()
def test_fused_projections_are_views_and_change_nothing():
    """q/k/v and gate/up become row blocks of one weight each; the HF modules read views of it
    (no second copy) and compute the same logits; fusing twice is a no-op."""
    from eagle3_check.program.compiled import fuse_projections

    p = backend()
    target = p.module.target
    prompt, positions = torch.tensor([list(range(3, 20))]), torch.arange(17)
    before, _ = target(prompt, positions)
    layer = target.model.model.layers[0]
    qkv, gate_up = fuse_projections(layer)
    a = layer.self_attn
    assert a.q_proj.weight.data_ptr() == qkv.data_ptr()
    assert a.k_proj.weight.data_ptr() == qkv[a.q_proj.weight.shape[0]:].data_ptr()
    assert layer.mlp.up_proj.weight.data_ptr() == gate_up[layer.mlp.gate_proj.weight.shape[0]:].data_ptr()
    again = fuse_projections(layer)
    assert again[0].data_ptr() == qkv.data_ptr() and again[1].data_ptr() == gate_up.data_ptr()
    after, _ = target(prompt, positions)
    assert torch.equal(after, before)


@torch.no_grad()
def test_grouped_attention_matches_hf_to_rounding():
    """attention="grouped" (no per-head copy of the cache) pins its index arithmetic: the same
    logits as HF's repeat_kv + sdpa within fp32 rounding, the same greedy tokens."""
    from eagle3_check.program.compiled import grouped_attention, sdpa_attention

    gen = torch.Generator().manual_seed(0)
    q = torch.randn(1, 4, 3, 8, generator=gen)  # h = 4, T = 3
    k, v = torch.randn(1, 2, 6, 8, generator=gen), torch.randn(1, 2, 6, 8, generator=gen)  # kv = 2, S = 6
    mask = (torch.arange(6)[None, :] <= torch.tensor([2, 3, 4])[:, None])[None, None]  # [1, 1, 3, 6]
    torch.testing.assert_close(grouped_attention(q, k, v, mask), sdpa_attention(q, k, v, mask), rtol=0, atol=1e-5)
    hf_p, fast_p = backend(), backend()
    compile_target(fast_p.module.target, "none", attention="grouped")
    prompt, positions = torch.tensor([list(range(3, 40))]), torch.arange(37)
    want, _ = hf_p.module.target(prompt, positions)
    got, _ = fast_p.module.target(prompt, positions)
    torch.testing.assert_close(got, want, rtol=0, atol=1e-4)
    ids = list(range(3, 40))
    assert self_greedy(fast_p, ids, 16).tokens == self_greedy(hf_p, ids, 16).tokens
