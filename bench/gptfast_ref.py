"""gpt-fast's own Llama forward on the bench target's weights: the peer figure of the verify bench.

gpt-fast's model.py is read from its public repository (github.com/pytorch-labs/gpt-fast,
model.py) into an ignored directory for the run and passed by path; it is never committed.
`load_gptfast(path)` imports it; `from_hf(module, model, max_seq)` builds its `Transformer` with
the HF Llama's config and weights: wqkv = [q; k; v] with q and k rows permuted from HF's
half-split rotary layout to gpt-fast's interleaved pairs (its scripts/convert_hf_checkpoint.py
permute), w1/w3/w2 = gate/up/down, caches set up for `max_seq` slots. The same model, so a
window's greedy ids equal the HF forward's (the bench checks them). gpt-fast compiles this forward
with `torch.compile(mode="reduce-overhead", fullgraph=True)`; the bench compiles it in the default
mode and captures the CUDA graph itself, exactly as it does the other variants.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import torch


def load_gptfast(path: str | Path):
    """gpt-fast's model.py, imported from `path` (one-line error when it is not there)."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"gpt-fast model.py not found at {p}: read it from github.com/pytorch-labs/gpt-fast "
                         "into an ignored directory and pass --gpt-fast PATH")
    spec = importlib.util.spec_from_file_location("gptfast_model", p)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _interleave(w: torch.Tensor, n_heads: int, head_dim: int) -> torch.Tensor:  # [n*D, H] -> [n*D, H]
    """HF rotary pairs (i, i + D/2) -> gpt-fast pairs (2i, 2i + 1), per head (convert_hf_checkpoint.permute
    inverted: HF's checkpoint converter un-permutes Meta's layout, gpt-fast re-permutes it)."""
    h = w.shape[1]
    return w.view(n_heads, 2, head_dim // 2, h).transpose(1, 2).reshape(n_heads * head_dim, h)


@torch.no_grad()
def from_hf(mod, model, max_seq: int):
    """gpt-fast's Transformer with `model`'s (an HF LlamaForCausalLM) config and weights, caches for max_seq."""
    cfg = model.config
    n_heads, n_kv = cfg.num_attention_heads, cfg.num_key_value_heads
    d = cfg.hidden_size // n_heads
    theta = (getattr(cfg, "rope_parameters", None) or {}).get("rope_theta", getattr(cfg, "rope_theta", 10000.0))
    args = mod.ModelArgs(block_size=max_seq, vocab_size=cfg.vocab_size, n_layer=cfg.num_hidden_layers,
                         n_head=n_heads, dim=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
                         n_local_heads=n_kv, rope_base=theta, norm_eps=cfg.rms_norm_eps)
    w = model.lm_head.weight
    with torch.device("meta"):
        gf = mod.Transformer(args)
    gf = gf.to_empty(device=w.device).to(w.dtype)
    gf.tok_embeddings.weight.copy_(model.model.embed_tokens.weight)
    gf.norm.weight.copy_(model.model.norm.weight)
    gf.output.weight.copy_(w)
    for ours, hf in zip(gf.layers, model.model.layers):
        a, m = hf.self_attn, hf.mlp
        ours.attention.wqkv.weight.copy_(torch.cat([_interleave(a.q_proj.weight, n_heads, d),
                                                    _interleave(a.k_proj.weight, n_kv, d), a.v_proj.weight]))
        ours.attention.wo.weight.copy_(a.o_proj.weight)
        ours.feed_forward.w1.weight.copy_(m.gate_proj.weight)
        ours.feed_forward.w3.weight.copy_(m.up_proj.weight)
        ours.feed_forward.w2.weight.copy_(m.down_proj.weight)
        ours.attention_norm.weight.copy_(hf.input_layernorm.weight)
        ours.ffn_norm.weight.copy_(hf.post_attention_layernorm.weight)
    with torch.device(w.device):
        gf.setup_caches(1, max_seq)
    return gf.eval()
