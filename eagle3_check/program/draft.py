"""EAGLE-3 draft head in the vLLM "speculators" checkpoint layout, with its own KV cache.

Layout (`config.json`): `transformer_layer_config` (a Llama layer config: hidden_size,
heads, kv heads, intermediate_size, rms_norm_eps, rope_theta, vocab_size),
`draft_vocab_size`, `eagle_aux_hidden_state_layer_ids`, `norm_before_residual`,
`target_hidden_size`. Weights (`model.safetensors`): `embed_tokens.weight`,
`fc.weight`, `layers.0.*`, `norm.weight`, `lm_head.weight`, `d2t`, `t2d`.

One decoder layer whose attention reads `[input_layernorm(embed) ; hidden_norm(h)]`
(width 2H). `h` is the fused target feature at confirmed positions and the draft's
own pre-norm output `g` at later chain steps. The KV cache is a fixed buffer indexed
by absolute position: writing a slot again overwrites it (rollback by overwrite).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from torch import nn

from eagle3_check.atomic import atomic_path, write_text_atomic
from eagle3_check.errors import InputError


@dataclass
class DraftConfig:
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int  # target vocab (embedding rows)
    draft_vocab_size: int
    aux_layer_ids: list[int]
    target_hidden_size: int
    rms_norm_eps: float = 1e-6
    rope_theta: float = 10000.0
    norm_before_residual: bool = False
    head_dim: int | None = None
    extra: dict = field(default_factory=dict)  # verifier info etc., saved back unchanged

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    def to_json(self) -> dict:
        layer = {
            "architectures": ["LlamaForCausalLM"],
            "model_type": "llama",
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "intermediate_size": self.intermediate_size,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_theta": self.rope_theta,
            "head_dim": self.dim_per_head,
            "num_hidden_layers": 1,
            "hidden_act": "silu",
        }
        return {
            "architectures": ["Eagle3Speculator"],
            "speculators_model_type": "eagle3",
            "transformer_layer_config": layer,
            "draft_vocab_size": self.draft_vocab_size,
            "eagle_aux_hidden_state_layer_ids": list(self.aux_layer_ids),
            "norm_before_residual": self.norm_before_residual,
            "target_hidden_size": self.target_hidden_size,
            **self.extra,
        }

    @classmethod
    def from_json(cls, cfg: dict, where: str) -> DraftConfig:
        def need(d: dict, key: str, ctx: str):
            if key not in d:
                raise InputError(
                    f"draft config {where} has no '{key}'{ctx}",
                    "a vLLM speculators EAGLE-3 config.json",
                    f"add '{key}' to {where} or re-save the draft with eagle3_check",
                )
            return d[key]

        layer = need(cfg, "transformer_layer_config", "")
        ctx = " in transformer_layer_config"
        hidden = need(layer, "hidden_size", ctx)
        known = {
            "architectures", "speculators_model_type", "transformer_layer_config",
            "draft_vocab_size", "eagle_aux_hidden_state_layer_ids",
            "norm_before_residual", "target_hidden_size",
        }
        return cls(
            hidden_size=hidden,
            num_attention_heads=need(layer, "num_attention_heads", ctx),
            num_key_value_heads=layer.get("num_key_value_heads", layer["num_attention_heads"]),
            intermediate_size=need(layer, "intermediate_size", ctx),
            vocab_size=need(layer, "vocab_size", ctx),
            draft_vocab_size=need(cfg, "draft_vocab_size", ""),
            aux_layer_ids=list(need(cfg, "eagle_aux_hidden_state_layer_ids", "")),
            target_hidden_size=cfg.get("target_hidden_size") or hidden,
            rms_norm_eps=layer.get("rms_norm_eps", 1e-6),
            rope_theta=layer.get("rope_theta", 10000.0),
            norm_before_residual=bool(cfg.get("norm_before_residual", False)),
            head_dim=layer.get("head_dim"),
            extra={k: v for k, v in cfg.items() if k not in known},
        )


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., D] -> [..., D]
        xf = x.float()
        xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * xf.to(x.dtype)


def rope_tables(
    positions: torch.Tensor,  # [T]
    d: int,
    theta: float,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:  # cos, sin [T, D]
    """Computed once per call and shared by q and k (fewer small kernels on CUDA)."""
    inv = 1.0 / (theta ** (torch.arange(0, d, 2, device=positions.device, dtype=torch.float32) / d))
    ang = positions.float()[:, None] * inv[None, :]  # [T, D/2]
    c, s = ang.cos(), ang.sin()
    return torch.cat([c, c], -1).to(dtype), torch.cat([s, s], -1).to(dtype)


def apply_rope(
    x: torch.Tensor,  # [1, heads, T, D]
    cos: torch.Tensor,  # [T, D]
    sin: torch.Tensor,  # [T, D]
) -> torch.Tensor:  # [1, heads, T, D]
    d = x.shape[-1]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def rope(
    x: torch.Tensor,  # [1, heads, T, D]
    positions: torch.Tensor,  # [T]
    theta: float,
) -> torch.Tensor:  # [1, heads, T, D]
    cos, sin = rope_tables(positions, x.shape[-1], theta, x.dtype)
    return apply_rope(x, cos, sin)


class DraftAttention(nn.Module):
    def __init__(self, cfg: DraftConfig, max_seq_len: int):
        super().__init__()
        h, d = cfg.hidden_size, cfg.dim_per_head
        self.n_heads, self.n_kv, self.d, self.theta = (
            cfg.num_attention_heads, cfg.num_key_value_heads, d, cfg.rope_theta,
        )
        self.q_proj = nn.Linear(2 * h, self.n_heads * d, bias=False)
        self.k_proj = nn.Linear(2 * h, self.n_kv * d, bias=False)
        self.v_proj = nn.Linear(2 * h, self.n_kv * d, bias=False)
        self.o_proj = nn.Linear(self.n_heads * d, h, bias=False)
        self.register_buffer("k_cache", torch.zeros(1, self.n_kv, max_seq_len, d), persistent=False)
        self.register_buffer("v_cache", torch.zeros(1, self.n_kv, max_seq_len, d), persistent=False)

    def forward(
        self,
        x: torch.Tensor,  # [1, T, 2H]
        positions: torch.Tensor,  # [T]
    ) -> torch.Tensor:  # [1, T, H]
        t = x.shape[1]
        q = self.q_proj(x).view(1, t, self.n_heads, self.d).transpose(1, 2)
        k = self.k_proj(x).view(1, t, self.n_kv, self.d).transpose(1, 2)
        v = self.v_proj(x).view(1, t, self.n_kv, self.d).transpose(1, 2)
        cos, sin = rope_tables(positions, self.d, self.theta, q.dtype)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        self.k_cache.index_copy_(2, positions, k.to(self.k_cache.dtype))
        self.v_cache.index_copy_(2, positions, v.to(self.v_cache.dtype))
        slots = torch.arange(self.k_cache.shape[2], device=x.device)
        mask = slots[None, :] <= positions[:, None]  # [T, S]: causal over absolute slots
        rep = self.n_heads // self.n_kv
        kc = self.k_cache.repeat_interleave(rep, dim=1)
        vc = self.v_cache.repeat_interleave(rep, dim=1)
        out = F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask[None, None])
        return self.o_proj(out.transpose(1, 2).reshape(1, t, self.n_heads * self.d))


class DraftLayer(nn.Module):
    def __init__(self, cfg: DraftConfig, max_seq_len: int):
        super().__init__()
        h = cfg.hidden_size
        self.norm_before_residual = cfg.norm_before_residual
        self.input_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        self.hidden_norm = RMSNorm(h, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(h, cfg.rms_norm_eps)
        self.self_attn = DraftAttention(cfg, max_seq_len)
        self.mlp = nn.ModuleDict(
            {
                "gate_proj": nn.Linear(h, cfg.intermediate_size, bias=False),
                "up_proj": nn.Linear(h, cfg.intermediate_size, bias=False),
                "down_proj": nn.Linear(cfg.intermediate_size, h, bias=False),
            }
        )

    def forward(
        self,
        embeds: torch.Tensor,  # [1, T, H]
        hidden: torch.Tensor,  # [1, T, H]
        positions: torch.Tensor,  # [T]
    ) -> torch.Tensor:  # [1, T, H]  pre-norm output g
        normed_hidden = self.hidden_norm(hidden)
        residual = normed_hidden if self.norm_before_residual else hidden
        x = torch.cat([self.input_layernorm(embeds), normed_hidden], dim=-1)
        h = self.self_attn(x, positions) + residual
        m = self.post_attention_layernorm(h)
        m = self.mlp["down_proj"](F.silu(self.mlp["gate_proj"](m)) * self.mlp["up_proj"](m))
        return m + h


class Eagle3DraftHead(nn.Module):
    """The draft head: `fc` fuses target taps; one layer; draft-vocab `lm_head` mapped by d2t."""

    def __init__(self, cfg: DraftConfig, max_seq_len: int):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        n_taps = len(cfg.aux_layer_ids)
        self.fc = nn.Linear(n_taps * cfg.target_hidden_size, cfg.hidden_size, bias=False)
        self.layers = nn.ModuleList([DraftLayer(cfg, max_seq_len)])
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.draft_vocab_size, bias=False)
        self.register_buffer("d2t", torch.zeros(cfg.draft_vocab_size, dtype=torch.long))
        self.register_buffer("t2d", torch.ones(cfg.vocab_size, dtype=torch.bool))

    def fuse(self, taps: torch.Tensor) -> torch.Tensor:  # [1, T, n_taps*Ht] -> [1, T, H]
        return self.fc(taps)

    def forward(
        self,
        tokens: torch.Tensor,  # [1, T] target-vocab ids
        hidden: torch.Tensor,  # [1, T, H] fused feature or g
        positions: torch.Tensor,  # [T]
    ) -> tuple[torch.Tensor, torch.Tensor]:  # logits [1, T, Vd], g [1, T, H]
        g = self.layers[0](self.embed_tokens(tokens), hidden.to(self.fc.weight.dtype), positions)
        return self.lm_head(self.norm(g)), g

    def to_target_ids(self, draft_ids: torch.Tensor) -> torch.Tensor:  # [1, T] -> [1, T]
        return draft_ids + self.d2t[draft_ids]

    # ---- speculators layout I/O -------------------------------------------------------
    def save(self, out_dir: str | Path) -> None:
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        write_text_atomic(out / "config.json", json.dumps(self.cfg.to_json(), indent=2) + "\n", "draft config")
        tensors = {
            k: v.detach().contiguous().cpu()
            for k, v in self.state_dict().items()
            if "k_cache" not in k and "v_cache" not in k
        }
        with atomic_path(out / "model.safetensors", "draft weights") as tmp:
            save_file(tensors, str(tmp))

    @classmethod
    def load(cls, draft_dir: str | Path, max_seq_len: int) -> Eagle3DraftHead:
        d = Path(draft_dir)
        cfg_path, w_path = d / "config.json", d / "model.safetensors"
        for p in (cfg_path, w_path):
            if not p.is_file():
                raise InputError(
                    f"draft file {p} does not exist",
                    "a speculators draft directory with config.json and model.safetensors",
                    "pass --draft DIR pointing at a saved EAGLE-3 draft head",
                )
        try:
            cfg_json = json.loads(cfg_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise InputError(
                f"draft config {cfg_path} is not valid JSON ({e.__class__.__name__})",
                "a JSON object",
                "re-save the draft head or fix the file",
            ) from None
        cfg = DraftConfig.from_json(cfg_json, str(cfg_path))
        try:
            weights = load_file(str(w_path))
        except Exception as e:  # safetensors raises its own error types for corrupt files
            raise InputError(
                f"draft weights {w_path} cannot be read ({str(e).splitlines()[0][:80]})",
                "a complete safetensors file",
                "re-save the draft head; the file is truncated or not safetensors",
            ) from None
        head = cls(cfg, max_seq_len)
        expected = {k for k in head.state_dict() if "k_cache" not in k and "v_cache" not in k}
        missing = sorted(expected - weights.keys())
        if missing:
            hint = (
                "this draft shares the target's embedding; save one with its own embed_tokens"
                if "embed_tokens.weight" in missing
                else "re-save the draft head with all tensors"
            )
            raise InputError(
                f"draft weights {w_path} lack {missing[0]}" + (f" (+{len(missing) - 1} more)" if len(missing) > 1 else ""),
                "every tensor of the speculators layout",
                hint,
            )
        for name, tensor in head.state_dict().items():
            if name in weights and weights[name].shape != tensor.shape:
                raise InputError(
                    f"draft tensor {name} has shape {list(weights[name].shape)}",
                    f"shape {list(tensor.shape)} from {cfg_path}",
                    "make config.json match the saved weights",
                )
        head.load_state_dict({k: weights[k] for k in expected}, strict=False)
        bad = head.d2t + torch.arange(cfg.draft_vocab_size)
        if bad.min() < 0 or bad.max() >= cfg.vocab_size:
            raise InputError(
                f"draft d2t maps to target id {int(bad.max() if bad.max() >= cfg.vocab_size else bad.min())}",
                f"target ids in [0, {cfg.vocab_size})",
                "rebuild d2t from the target vocabulary",
            )
        return head.eval()
