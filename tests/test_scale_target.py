"""The scale target builder (fixtures/scale_target.py) at the TINY shape on CPU: the shape it
writes, its init statistics, the logit spread, the seed's determinism, and that the pair loads
as a program the harness runs (the 8B shape is the same code at LLAMA_8B, built on the GPU)."""

from __future__ import annotations

import json
import math

import pytest
import torch

from eagle3_check.fixtures import scale_target as st
from eagle3_check.fixtures.registry import fixtures_root


@pytest.fixture(scope="module")
def pair(tmp_path_factory):
    out = tmp_path_factory.mktemp("scale")
    info = st.build_scale_pair(out, fixtures_root() / "tiny-llama", seed=3, shape=st.TINY, dtype=torch.float32,
                               max_seq_len=128)
    return out, info


def test_llama_8b_shape_is_llama_3_1_8b_with_smollm2_vocab():
    cfg = st.scale_config(st.LLAMA_8B)
    n = sum(v.numel() for v in _shapes(cfg))
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads, cfg.num_key_value_heads,
            cfg.intermediate_size, cfg.vocab_size, cfg.head_dim) == (4096, 32, 32, 8, 14336, 49152, 128)
    assert not cfg.tie_word_embeddings
    assert 7.3e9 < n < 7.6e9  # 7.4B: Llama-3.1-8B's 8.0B less (128256 - 49152) * 4096 * 2 embedding rows


def _shapes(cfg):
    """Parameter tensors of the config's model, on the meta device (nothing allocated)."""
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        return list(AutoModelForCausalLM.from_config(cfg).parameters())


def test_config_and_tokenizer_files_written(pair):
    out, info = pair
    cfg = json.loads((out / "target" / "config.json").read_text())
    for k in ("hidden_size", "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "intermediate_size",
              "vocab_size"):
        assert cfg[k] == st.TINY[k], k
    assert cfg["rope_parameters"]["rope_theta"] == st.TINY["rope_theta"]
    assert (out / "target" / "tokenizer.json").is_file()
    assert info["params"] == sum(v.numel() for v in _shapes(st.scale_config(st.TINY)))


def test_init_statistics_and_logit_spread(pair):
    from eagle3_check.program.target import load_hf_target

    out, info = pair
    model = load_hf_target(out / "target")
    n = st.TINY["num_hidden_layers"]
    for name, p in model.named_parameters():
        if p.dim() == 1:
            assert torch.all(p == 1), name
        elif name.endswith(("o_proj.weight", "down_proj.weight")):
            # a few thousand samples: the std within 10 % of GPT-2's residual scaling
            assert abs(float(p.detach().std()) / (st.INIT_STD / math.sqrt(2 * n)) - 1) < 0.1, name
        elif name != "lm_head.weight":
            assert abs(float(p.detach().std()) / st.INIT_STD - 1) < 0.1, name
    # the logit spread on other random tokens than the rescale's: std 3 within 15 % (64 x 512 logits)
    ids = torch.randint(0, st.TINY["vocab_size"], (1, 64), generator=torch.Generator().manual_seed(99))
    with torch.no_grad():
        logits = model(input_ids=ids).logits
    assert abs(float(logits.std()) / st.LOGIT_STD - 1) < 0.15
    assert info["logit_scale"] > 0


def test_same_seed_same_weights_other_seed_not(pair, tmp_path):
    from safetensors.torch import load_file

    out, _ = pair
    st.build_scale_pair(tmp_path / "a", fixtures_root() / "tiny-llama", seed=3, shape=st.TINY, dtype=torch.float32,
                        max_seq_len=128)
    st.build_scale_pair(tmp_path / "b", fixtures_root() / "tiny-llama", seed=4, shape=st.TINY, dtype=torch.float32,
                        max_seq_len=128)
    ref, same, other = (load_file(d / "target" / "model.safetensors") for d in (out, tmp_path / "a", tmp_path / "b"))
    assert all(torch.equal(ref[k], same[k]) for k in ref)
    assert not torch.equal(ref["model.layers.0.self_attn.q_proj.weight"], other["model.layers.0.self_attn.q_proj.weight"])


def test_pair_runs_as_a_program(pair):
    from eagle3_check.fixtures.registry import ProgramSpec
    from eagle3_check.program.eager import EagerBackend

    out, _ = pair
    spec = ProgramSpec(max_seq_len=128, min_prefill=1, max_prefill=64, chain_len=4, min_verify_len=2,
                       max_verify_len=8)
    program = EagerBackend.from_dirs(out / "target", out / "draft", spec)
    ids, feature = program.prefill(torch.tensor([[5, 6, 7]]), torch.arange(3))  # [1, 1], [1, 3, H]
    assert ids.shape == (1, 1) and feature.shape == (1, 3, st.TINY["hidden_size"])
    assert program.module.draft.cfg.aux_layer_ids == [2, 2, 1]  # draft_recipe's taps for 4 layers
