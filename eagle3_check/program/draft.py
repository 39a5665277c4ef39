"""EAGLE-3 draft head: the module math, with its own KV cache.

What a config can ask for (program/draft_config.py reads it, program/checkpoint.py loads the tensors): N decoder
layers (layer 0 attends over `[input_layernorm(embed) ; hidden_norm(h)]`, width 2H; layers
1..N-1 are plain decoder layers over the running hidden), Llama or Qwen3 layers (Qwen3: RMSNorm
of q and k per head before rope), q/k/v/o and MLP biases, rope variants (program/rope.py), an RMSNorm
over the concatenated taps before `fc` (`norm_before_fc`, speculators' `input_norm`) or one per
tap (`fc_norm`), `norm_output` (the g fed back is the post-norm hidden), a draft vocab mapped by
`d2t` or the full target vocab (d2t all zero), and an embedding shared with the target.

`h` is the fused target feature at confirmed positions and the draft's own output `g` at later
chain steps. Each layer's KV cache is a fixed buffer indexed by absolute position: writing a slot
again overwrites it (rollback by overwrite).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import save_file
from torch import nn

from eagle3_check.atomic import atomic_path, write_text_atomic
from eagle3_check.errors import InputError
from eagle3_check.program.draft_config import DraftConfig
from eagle3_check.program.kv_window import window_slots
from eagle3_check.program.rope import apply_rope, rope, rope_tables

__all__ = ["DraftConfig", "Eagle3DraftHead", "rope"]


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., D] -> [..., D]
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


class DraftAttention(nn.Module):
    def __init__(self, cfg: DraftConfig, max_seq_len: int, in_width: int):
        super().__init__()
        d, bias = cfg.dim_per_head, cfg.attention_bias
        self.n_heads, self.n_kv, self.d, self.rope = (
            cfg.num_attention_heads, cfg.num_key_value_heads, d, cfg.rope,
        )
        self.q_proj = nn.Linear(in_width, self.n_heads * d, bias=bias)
        self.k_proj = nn.Linear(in_width, self.n_kv * d, bias=bias)
        self.v_proj = nn.Linear(in_width, self.n_kv * d, bias=bias)
        self.o_proj = nn.Linear(self.n_heads * d, cfg.hidden_size, bias=bias)
        if cfg.layer_type == "qwen3":
            self.q_norm = RMSNorm(d, cfg.rms_norm_eps)
            self.k_norm = RMSNorm(d, cfg.rms_norm_eps)
        else:
            self.q_norm = self.k_norm = None
        self.register_buffer("k_cache", torch.zeros(1, self.n_kv, max_seq_len, d), persistent=False)
        self.register_buffer("v_cache", torch.zeros(1, self.n_kv, max_seq_len, d), persistent=False)
        self.kv_windowed = False  # set for one eager CPU call by program/kv_window.py: attend over the used slots

    def qkv(
        self,
        x: torch.Tensor,  # [B, T, W]
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # q [B, h, T, D], k, v [B, kv, T, D] (no rope)
        b, t = x.shape[:2]
        q = self.q_proj(x).view(b, t, self.n_heads, self.d)
        k = self.k_proj(x).view(b, t, self.n_kv, self.d)
        if self.q_norm is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        v = self.v_proj(x).view(b, t, self.n_kv, self.d)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def forward(
        self,
        x: torch.Tensor,  # [1, T, W]
        positions: torch.Tensor,  # [T]
    ) -> torch.Tensor:  # [1, T, H]
        t = x.shape[1]
        q, k, v = self.qkv(x)
        cos, sin = rope_tables(positions, self.d, self.rope, q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        self.k_cache.index_copy_(2, positions, k.to(self.k_cache.dtype))
        self.v_cache.index_copy_(2, positions, v.to(self.v_cache.dtype))
        n = (window_slots(positions, self.k_cache.shape[2]) if self.kv_windowed else None) or self.k_cache.shape[2]
        slots = torch.arange(n, device=x.device)
        mask = slots[None, :] <= positions[:, None]  # [T, S']: causal over absolute slots (S' = S, or a window)
        rep = self.n_heads // self.n_kv
        kc = self.k_cache[:, :, :n].repeat_interleave(rep, dim=1)  # [1, h, S', D]
        vc = self.v_cache[:, :, :n].repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask[None, None])
        return self.o_proj(out.transpose(1, 2).reshape(1, t, self.n_heads * self.d))


class DraftLayer(nn.Module):
    """Layer 0 (`first`) reads the token embedding and h; later layers only the running hidden."""

    def __init__(self, cfg: DraftConfig, max_seq_len: int, first: bool = True):
        super().__init__()
        h, bias = cfg.hidden_size, cfg.mlp_bias
        self.first = first
        self.norm_before_residual = cfg.norm_before_residual
        self.input_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        if first:
            self.hidden_norm = RMSNorm(h, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        self.self_attn = DraftAttention(cfg, max_seq_len, 2 * h if first else h)
        self.mlp = nn.ModuleDict(
            {
                "gate_proj": nn.Linear(h, cfg.intermediate_size, bias=bias),
                "up_proj": nn.Linear(h, cfg.intermediate_size, bias=bias),
                "down_proj": nn.Linear(cfg.intermediate_size, h, bias=bias),
            }
        )

    def attn_input(
        self,
        embeds: torch.Tensor | None,  # [B, T, H] (layer 0) or None
        hidden: torch.Tensor,  # [B, T, H]
    ) -> tuple[torch.Tensor, torch.Tensor]:  # attention input [B, T, 2H or H], residual [B, T, H]
        if not self.first:
            return self.input_layernorm(hidden), hidden
        normed_hidden = self.hidden_norm(hidden)
        residual = normed_hidden if self.norm_before_residual else hidden
        return torch.cat([self.input_layernorm(embeds), normed_hidden], dim=-1), residual

    def mlp_out(self, h: torch.Tensor) -> torch.Tensor:  # [B, T, H] -> [B, T, H]  (+ residual)
        m = self.post_attention_layernorm(h)
        return self.mlp["down_proj"](F.silu(self.mlp["gate_proj"](m)) * self.mlp["up_proj"](m)) + h

    def forward(
        self,
        embeds: torch.Tensor | None,  # [1, T, H] (layer 0) or None
        hidden: torch.Tensor,  # [1, T, H]
        positions: torch.Tensor,  # [T]
    ) -> torch.Tensor:  # [1, T, H]  the layer's output
        x, residual = self.attn_input(embeds, hidden)
        return self.mlp_out(self.self_attn(x, positions) + residual)


class Eagle3DraftHead(nn.Module):
    """The draft head: `fc` fuses target taps; N layers; draft-vocab `lm_head` mapped by d2t."""

    def __init__(self, cfg: DraftConfig, max_seq_len: int):
        super().__init__()
        self.cfg = cfg
        h, ht, n_taps, eps = cfg.hidden_size, cfg.target_hidden_size, cfg.n_taps, cfg.rms_norm_eps
        self.embed_tokens = nn.Embedding(cfg.vocab_size, h)
        self.needs_target_embedding = False  # set by the loader for a checkpoint without one
        self.input_norm = RMSNorm(n_taps * ht, eps) if cfg.norm_before_fc else None
        self.fc_norm = nn.ModuleList([RMSNorm(ht, eps) for _ in range(n_taps)]) if cfg.fc_norm else None
        self.fc = nn.Linear(n_taps * ht, h, bias=False)
        self.layers = nn.ModuleList([DraftLayer(cfg, max_seq_len, i == 0) for i in range(cfg.num_layers)])
        self.norm = RMSNorm(h, eps)
        self.lm_head = nn.Linear(h, cfg.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
        # identity map until a vocabulary is set: draft id i is target id i (t2d: d2t's targets)
        self.register_buffer("t2d", torch.arange(cfg.vocab_size) < cfg.draft_vocab_size)

    def fuse(self, taps: torch.Tensor) -> torch.Tensor:  # [B, T, n_taps*Ht] -> [B, T, H]
        taps = taps.to(self.fc.weight.dtype)
        if self.input_norm is not None:
            taps = self.input_norm(taps)
        if self.fc_norm is not None:
            chunks = taps.chunk(len(self.fc_norm), dim=-1)
            taps = torch.cat([norm(c) for norm, c in zip(self.fc_norm, chunks)], dim=-1)
        return self.fc(taps)

    def head(self, out: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Last layer output [B, T, H] -> logits [B, T, Vd], g [B, T, H] (the hidden fed back)."""
        normed = self.norm(out)
        return self.lm_head(normed), normed if self.cfg.norm_output else out

    def forward(
        self,
        tokens: torch.Tensor,  # [1, T] target-vocab ids
        hidden: torch.Tensor,  # [1, T, H] fused feature or g
        positions: torch.Tensor,  # [T]
    ) -> tuple[torch.Tensor, torch.Tensor]:  # logits [1, T, Vd], g [1, T, H]
        if self.needs_target_embedding:
            raise InputError("draft head without embed_tokens", "the target's embedding shared in",
                             "call share_embedding(target embedding weight) before running it")
        embeds = self.embed_tokens(tokens)
        h = hidden.to(self.fc.weight.dtype)
        for i, layer in enumerate(self.layers):
            h = layer(embeds if i == 0 else None, h, positions)
        return self.head(h)

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:  # [1, T] -> [1, T]
        return draft_ids + self.d2t[draft_ids]

    def share_embedding(self, weight: torch.Tensor) -> None:  # [V, H] the target's embedding rows
        """Uses the target's embedding (a checkpoint without embed_tokens; vLLM shares it)."""
        if tuple(weight.shape) != tuple(self.embed_tokens.weight.shape):
            raise InputError(
                f"target embedding of shape {list(weight.shape)}",
                f"the draft's embedding shape {list(self.embed_tokens.weight.shape)}",
                "this draft has no embed_tokens and cannot share this target's; use its own target",
            )
        self.embed_tokens.weight = nn.Parameter(weight.detach(), requires_grad=False)
        self.needs_target_embedding = False

    # ---- speculators layout I/O -------------------------------------------------------
    def weights(self) -> dict[str, torch.Tensor]:
        """The state dict without the KV caches: what a checkpoint holds (d2t / t2d included)."""
        return {k: v for k, v in self.state_dict().items() if "k_cache" not in k and "v_cache" not in k}

    def save(self, out_dir: str | Path) -> None:
        """Writes the speculators 0.9 layout (config.json + model.safetensors), each atomically."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        tensors = {k: v.detach().contiguous().cpu() for k, v in self.weights().items()}
        if self.cfg.draft_vocab_size == self.cfg.vocab_size:  # full vocab: speculators has no maps
            tensors.pop("d2t")
            tensors.pop("t2d")
        with atomic_path(out / "model.safetensors", "draft weights") as tmp:
            save_file(tensors, str(tmp), metadata={"format": "pt"})
        write_text_atomic(out / "config.json", json.dumps(self.cfg.to_json(), indent=2) + "\n", "draft config")

