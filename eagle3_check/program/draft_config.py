"""The draft head's configuration, read exactly from each published EAGLE-3 config layout.

Two layouts (the checkpoint reader, program/checkpoint.py, picks one from the config):

- **speculators** (vLLM's checkpoint library; `speculators_model_type: "eagle3"`): the decoder
  layer is `transformer_layer_config` (a Llama or Qwen3 config; no `model_type` means Qwen3, as
  speculators' config validator reads it), the EAGLE-3 fields beside it. `norm_before_residual`
  absent is read as True, as vLLM's `update_eagle3` does (speculators always writes it).
  `eagle_aux_hidden_state_layer_ids` absent means vLLM's default (2, L // 2, L - 3) over the
  target's L layers, resolved when the target is known.
- **eagle** (original EAGLE-3 / SpecForge; `architectures: ["LlamaForCausalLMEagle3"]`): one flat
  Llama config with `draft_vocab_size` (and `target_hidden_size`) beside it; SpecForge adds
  `eagle_config.eagle_aux_hidden_state_layer_ids`, numbered as layer *outputs* (SpecForge and
  SGLang read tap id + 1), so they are stored here + 1 (HF `hidden_states` numbering).
  `norm_before_residual` absent is False (the original EAGLE-3 and SpecForge layer).

Every key is either understood (changes the math and is implemented), known to be inert
(metadata, training-only), or refused with an error that names it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from eagle3_check.errors import InputError
from eagle3_check.program.rope import RopeSpec, parse_rope

# Transformers' class defaults for the layer types a draft may use (what the writer meant by an
# absent key). head_dim None = hidden_size // num_attention_heads.
LAYER_DEFAULTS = {
    "llama": {"head_dim": None, "num_key_value_heads": None, "rms_norm_eps": 1e-6},
    "qwen3": {"head_dim": 128, "num_key_value_heads": 32, "rms_norm_eps": 1e-6},
}
# Layer-config keys that do not change the draft's forward (ids, dtype, init, cache flags).
INERT_LAYER_KEYS = {
    "architectures", "transformers_version", "initializer_range", "use_cache", "pad_token_id",
    "bos_token_id", "eos_token_id", "torch_dtype", "dtype", "max_position_embeddings",
    "attention_dropout", "tie_word_embeddings", "_name_or_path", "output_hidden_states",
    "output_attentions", "return_dict", "chunk_size_feed_forward", "is_encoder_decoder",
    "id2label", "label2id", "problem_type", "max_window_layers", "model_type",
    "_attn_implementation", "_attn_implementation_autoset",
}
MATH_LAYER_KEYS = {
    "hidden_size", "num_attention_heads", "num_key_value_heads", "head_dim", "intermediate_size",
    "vocab_size", "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters",
    "num_hidden_layers", "hidden_act", "attention_bias", "mlp_bias", "pretraining_tp",
    "use_sliding_window", "sliding_window", "layer_types", "partial_rotary_factor",
}
# speculators top-level keys besides the math ones: metadata or training-only.
INERT_SPECULATORS_KEYS = {
    "architectures", "speculators_model_type", "speculators_config", "speculators_version",
    "transformers_version", "torch_dtype", "dtype", "embed_requires_grad", "training",
    "has_no_defaults_at_init", "auto_map",
}
MATH_SPECULATORS_KEYS = {
    "transformer_layer_config", "draft_vocab_size", "norm_before_residual", "target_hidden_size",
    "eagle_aux_hidden_state_layer_ids", "norm_before_fc", "fc_norm", "norm_output",
    "tie_word_embeddings",
}
EAGLE_ARCHITECTURES = {"LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM"}
INERT_EAGLE_KEYS = INERT_LAYER_KEYS | {"use_aux_hidden_state", "target_model_type"}


@dataclass
class DraftConfig:
    hidden_size: int
    num_attention_heads: int
    num_key_value_heads: int
    intermediate_size: int
    vocab_size: int  # target vocab (embedding rows)
    draft_vocab_size: int
    aux_layer_ids: list[int] | None  # HF hidden_states numbering; None = vLLM default, unresolved
    target_hidden_size: int
    rms_norm_eps: float = 1e-6
    rope: RopeSpec = field(default_factory=RopeSpec)
    norm_before_residual: bool = False
    head_dim: int | None = None
    num_layers: int = 1
    layer_type: str = "llama"  # "qwen3": RMSNorm on q and k per head before rope
    attention_bias: bool = False
    mlp_bias: bool = False
    norm_before_fc: bool = False  # one RMSNorm over the concatenated taps (speculators input_norm)
    fc_norm: bool = False  # one RMSNorm per tap before the concatenation
    norm_output: bool = False  # g fed back is the post-norm hidden (Eagle 3.1)
    extra: dict = field(default_factory=dict)  # verifier info etc., saved back unchanged

    @property
    def dim_per_head(self) -> int:
        return self.head_dim or self.hidden_size // self.num_attention_heads

    @property
    def n_taps(self) -> int:
        return len(self.aux_layer_ids) if self.aux_layer_ids else 3

    def resolve_aux_layers(self, n_target_layers: int) -> None:
        """vLLM's default taps when the config names none: (2, L // 2, L - 3)."""
        if self.aux_layer_ids is None:
            self.aux_layer_ids = [2, n_target_layers // 2, n_target_layers - 3]

    def to_json(self) -> dict:
        """The speculators 0.9 layout (what `Eagle3DraftModel.from_pretrained` reads)."""
        layer = {
            "architectures": ["LlamaForCausalLM"] if self.layer_type == "llama" else ["Qwen3ForCausalLM"],
            "model_type": self.layer_type,
            "hidden_size": self.hidden_size,
            "num_attention_heads": self.num_attention_heads,
            "num_key_value_heads": self.num_key_value_heads,
            "intermediate_size": self.intermediate_size,
            "vocab_size": self.vocab_size,
            "rms_norm_eps": self.rms_norm_eps,
            "rope_parameters": self.rope.to_parameters(),
            "head_dim": self.dim_per_head,
            "num_hidden_layers": self.num_layers,
            "hidden_act": "silu",
            "attention_bias": self.attention_bias,
        }
        if self.layer_type == "llama":
            layer["mlp_bias"] = self.mlp_bias
        out = {
            "architectures": ["Eagle3DraftModel"],
            "speculators_model_type": "eagle3",
            "transformer_layer_config": layer,
            "draft_vocab_size": self.draft_vocab_size,
            "norm_before_residual": self.norm_before_residual,
            "norm_before_fc": self.norm_before_fc,
            "fc_norm": self.fc_norm,
            "norm_output": self.norm_output,
            "target_hidden_size": self.target_hidden_size,
            "speculators_version": "0.9.0",
            "speculators_config": speculators_block(None, []),
            **self.extra,
        }
        if self.aux_layer_ids is not None:
            out["eagle_aux_hidden_state_layer_ids"] = list(self.aux_layer_ids)
        return out

    @classmethod
    def from_json(cls, cfg: dict, where: str) -> DraftConfig:
        """Either layout, picked from the config (see the module doc)."""
        if not isinstance(cfg, dict):
            raise InputError(f"draft config {where} is {type(cfg).__name__}", "a JSON object",
                             "point --draft at an EAGLE-3 draft directory")
        if "speculators_model_type" in cfg:
            return _from_speculators(cfg, where)
        if set(cfg.get("architectures") or []) & EAGLE_ARCHITECTURES:
            return _from_eagle(cfg, where)
        if "transformer_layer_config" in cfg:
            raise _err(where, "has transformer_layer_config but no speculators_model_type",
                       "speculators_model_type 'eagle3'", "add \"speculators_model_type\": \"eagle3\"")
        raise _err(where, f"has architectures {cfg.get('architectures')!r} and no speculators_model_type",
                   f"a speculators eagle3 config or architectures in {sorted(EAGLE_ARCHITECTURES)}",
                   "pass an EAGLE-3 draft (speculators, original EAGLE-3 or SpecForge layout)")


def speculators_block(verifier: str | None, architectures: list[str], steps: int = 5) -> dict:
    """speculators 0.9's `speculators_config`. It loads a draft only with `verifier.name_or_path`
    naming the target (a hub id, or a path relative to where it runs): it reads its config."""
    return {
        "algorithm": "eagle3",
        "default_proposal_method": "greedy",
        "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": steps,
                              "accept_tolerance": 0.0, "verifier_accept_k": 1}],
        "verifier": {"name_or_path": verifier, "architectures": list(architectures)},
    }


def _err(where: str, what: str, expected: str, fix: str) -> InputError:
    return InputError(f"draft config {where} {what}", expected, fix)


def _check_keys(d: dict, math: set, inert: set, where: str, ctx: str) -> None:
    for key in d:
        if key not in math and key not in inert:
            raise _err(where, f"has '{key}'{ctx}, which eagle3_check does not interpret",
                       f"only {sorted(math)} change the draft's math",
                       f"remove '{key}' if it does not change the draft, else the draft is unsupported")


def _flag(d: dict, key: str, where: str, default: bool = False) -> bool:
    v = d.get(key, default)
    if not isinstance(v, bool):
        raise _err(where, f"{key} = {v!r}", "true or false", f"write {key} as a JSON boolean")
    return v


def _layer(layer: dict, model_type: str, where: str, ctx: str) -> dict:
    """The decoder-layer fields common to both layouts (checked for what is not implemented)."""
    if model_type not in LAYER_DEFAULTS:
        raise _err(where, f"model_type {model_type!r}{ctx}", f"one of {sorted(LAYER_DEFAULTS)}",
                   "only Llama and Qwen3 draft layers are implemented")

    def need(key: str):
        if key not in layer:
            raise _err(where, f"has no '{key}'{ctx}", "an EAGLE-3 draft config",
                       f"add '{key}' (the draft's {key}) to the config")
        return layer[key]

    act = layer.get("hidden_act", "silu")
    if act != "silu":
        raise _err(where, f"hidden_act {act!r}{ctx}", "silu", "only SiLU-gated MLPs are implemented")
    if layer.get("pretraining_tp", 1) != 1:
        raise _err(where, f"pretraining_tp {layer['pretraining_tp']}{ctx}", "1",
                   "re-save the draft with pretraining_tp 1 (sliced matmuls are not implemented)")
    if layer.get("partial_rotary_factor", 1.0) != 1.0:
        raise _err(where, f"partial_rotary_factor {layer['partial_rotary_factor']}{ctx}", "1.0",
                   "partial rotary drafts are not implemented")
    n_layers = int(layer.get("num_hidden_layers", 1))
    kinds = (layer.get("layer_types") or [])[:n_layers]
    if any(k != "full_attention" for k in kinds) or (layer.get("use_sliding_window") and not kinds):
        raise _err(where, f"layer_types {kinds!r} / use_sliding_window {layer.get('use_sliding_window')}{ctx}",
                   "full attention in every draft layer", "sliding-window draft layers are not implemented")
    defaults = LAYER_DEFAULTS[model_type]
    heads = int(need("num_attention_heads"))
    kv = layer.get("num_key_value_heads", defaults["num_key_value_heads"])
    return {
        "hidden_size": int(need("hidden_size")),
        "num_attention_heads": heads,
        "num_key_value_heads": int(kv if kv is not None else heads),
        "intermediate_size": int(need("intermediate_size")),
        "vocab_size": int(need("vocab_size")),
        "rms_norm_eps": float(layer.get("rms_norm_eps", defaults["rms_norm_eps"])),
        "rope": parse_rope(layer, where),
        "head_dim": layer.get("head_dim", defaults["head_dim"]),
        "num_layers": n_layers,
        "layer_type": model_type,
        "attention_bias": _flag(layer, "attention_bias", where),
        "mlp_bias": _flag(layer, "mlp_bias", where) if model_type == "llama" else False,
    }


def _aux_ids(v, where: str, key: str, shift: int) -> list[int] | None:
    if v is None:
        return None
    if not isinstance(v, list) or not v or not all(isinstance(i, int) and i + shift >= 0 for i in v):
        raise _err(where, f"{key} = {v!r}", "a non-empty list of layer ids >= 0",
                   f"write {key} as the target layers the draft was trained on")
    return [i + shift for i in v]


def _from_speculators(cfg: dict, where: str) -> DraftConfig:
    if cfg["speculators_model_type"] != "eagle3":
        raise _err(where, f"speculators_model_type {cfg['speculators_model_type']!r}", "'eagle3'",
                   "only EAGLE-3 speculators are supported")
    _check_keys(cfg, MATH_SPECULATORS_KEYS, INERT_SPECULATORS_KEYS, where, "")
    layer = cfg.get("transformer_layer_config")
    if not isinstance(layer, dict):
        raise _err(where, "has no transformer_layer_config", "a speculators EAGLE-3 config.json",
                   "add transformer_layer_config or re-save the draft with speculators")
    ctx = " in transformer_layer_config"
    _check_keys(layer, MATH_LAYER_KEYS, INERT_LAYER_KEYS, where, ctx)
    fields = _layer(layer, layer.get("model_type", "qwen3"), where, ctx)
    if "draft_vocab_size" not in cfg:
        raise _err(where, "has no 'draft_vocab_size'", "a speculators EAGLE-3 config.json",
                   "add draft_vocab_size (rows of lm_head)")
    if _flag(cfg, "norm_before_fc", where) and _flag(cfg, "fc_norm", where):
        raise _err(where, "sets both norm_before_fc and fc_norm", "at most one",
                   "speculators refuses this too; keep the one the draft was trained with")
    if _flag(cfg, "tie_word_embeddings", where):
        raise _err(where, "sets tie_word_embeddings", "false (the draft lm_head is its own tensor)",
                   "save lm_head.weight and set tie_word_embeddings false")
    known = MATH_SPECULATORS_KEYS | (INERT_SPECULATORS_KEYS - {"training", "speculators_config"})
    return DraftConfig(
        **fields,
        draft_vocab_size=int(cfg["draft_vocab_size"]),
        aux_layer_ids=_aux_ids(cfg.get("eagle_aux_hidden_state_layer_ids"), where,
                               "eagle_aux_hidden_state_layer_ids", 0),
        target_hidden_size=int(cfg.get("target_hidden_size") or fields["hidden_size"]),
        norm_before_residual=_flag(cfg, "norm_before_residual", where, default=True),
        norm_before_fc=_flag(cfg, "norm_before_fc", where),
        fc_norm=_flag(cfg, "fc_norm", where),
        norm_output=_flag(cfg, "norm_output", where),
        extra={k: v for k, v in cfg.items() if k not in known},
    )


def _from_eagle(cfg: dict, where: str) -> DraftConfig:
    math = MATH_LAYER_KEYS | {"draft_vocab_size", "target_hidden_size", "eagle_config",
                              "norm_before_residual"}
    _check_keys(cfg, math, INERT_EAGLE_KEYS, where, "")
    fields = _layer(cfg, cfg.get("model_type", "llama"), where, "")
    eagle = cfg.get("eagle_config") or {}
    _check_keys(eagle, {"eagle_aux_hidden_state_layer_ids"}, {"use_aux_hidden_state"}, where,
                " in eagle_config")
    return DraftConfig(
        **fields,
        draft_vocab_size=int(cfg.get("draft_vocab_size", fields["vocab_size"])),
        aux_layer_ids=_aux_ids(eagle.get("eagle_aux_hidden_state_layer_ids"), where,
                               "eagle_config.eagle_aux_hidden_state_layer_ids", 1),
        target_hidden_size=int(cfg.get("target_hidden_size") or fields["hidden_size"]),
        norm_before_residual=_flag(cfg, "norm_before_residual", where),
    )
