"""Target adapter: any HF `AutoModelForCausalLM` with a static KV cache and hidden-state taps.

The cache holds one fixed slot per absolute position (every layer, sliding-window
layers included: a ring buffer would break rollback by overwrite). Writing a slot
again overwrites it, so rejected proposals need no explicit rollback: the next
verify writes over them, and the causal mask hides slots past the query position.

Taps follow the HF/vLLM convention: tap 0 = embedding output, tap k = output of
decoder layer k-1, i.e. `hidden_states[k]` of an HF forward.
"""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import torch
from torch import nn

from eagle3_check.errors import InputError, first_line
from eagle3_check.hf_config import TRUST_REMOTE_CODE, check_loaded_tensors, read_target_config
from eagle3_check.inputs import regular_file
from eagle3_check.program.kv_window import window_slots
from eagle3_check.quiet import third_party_quiet

with third_party_quiet():  # transformers' model code imports torchao: its load-time logging, scoped
    import transformers.modeling_utils  # noqa: F401
    from transformers import CONFIG_MAPPING, AutoModelForCausalLM
    from transformers.cache_utils import Cache, StaticLayer


class PositionalStaticLayer(StaticLayer):
    """A static cache layer that writes at the absolute slots the adapter sets (`positions`),
    whatever the Transformers version does with cache_position / cumulative_length."""

    positions: torch.Tensor  # [T], set by TargetAdapter.forward before each call
    slots: int | None = None  # the key slots attention reads (program/kv_window.py), None: all of them

    def update(self, key_states, value_states, *args, **kwargs):  # [1, kvH, T, D] each -> [1, kvH, S', D] each
        self.keys.index_copy_(2, self.positions, key_states.to(self.keys.dtype))
        self.values.index_copy_(2, self.positions, value_states.to(self.values.dtype))
        if self.slots is None:
            return self.keys, self.values
        return self.keys[:, :, : self.slots], self.values[:, :, : self.slots]


def cache_kwarg(model: nn.Module) -> str:
    """The forward() keyword for the KV cache: `cache` from Transformers 5.2x, else `past_key_values`."""
    return "cache" if "cache" in inspect.signature(model.forward).parameters else "past_key_values"


def target_config(target_dir: str | Path):
    """The target's config (Transformers' own class), built from config.json as read and checked once
    by hf_config.read_target_config (bounded, strict JSON, no remote code); nothing allocated."""
    d = Path(target_dir)
    data = read_target_config(d)
    try:
        cfg = CONFIG_MAPPING[data["model_type"]].from_dict(data)  # what AutoConfig.from_pretrained builds
        cfg.get_text_config(decoder=True)
    except Exception as e:
        raise InputError(
            f"target config {d / 'config.json'} cannot be read ({first_line(e)[:80]})",
            "a valid HF model config",
            "re-save the target with save_pretrained",
        ) from None
    cfg.name_or_path = str(d)  # as AutoConfig.from_pretrained sets it
    return cfg


def target_text_config(target_dir: str | Path):
    """The target's decoder config (attribute names normalised by Transformers; see `target_config`)."""
    return target_config(target_dir).get_text_config(decoder=True)


def load_hf_target(target_dir: str | Path, dtype: torch.dtype = torch.float32) -> nn.Module:
    """Loads an HF causal LM from a local save_pretrained directory, with clear errors."""
    d = Path(target_dir)
    config = target_config(d)  # config.json read and checked once: no auto_map, a built-in model_type
    weights = list(d.glob("*.safetensors")) + list(d.glob("*.bin"))
    if not weights:
        raise InputError(
            f"target directory {d} has no weight file",
            "model.safetensors beside config.json",
            "save the target with save_pretrained(safe_serialization=True)",
        )
    for w in weights:
        regular_file(w, "target weight file", "re-save the target with save_pretrained")
        if w.stat().st_size == 0:
            raise InputError(f"target weight file {w} is empty", "a complete safetensors file", "re-save the target")
    check_shards(d)
    try:
        with third_party_quiet():  # the "Loading weights" bar
            model, info = AutoModelForCausalLM.from_pretrained(d, config=config, dtype=dtype,
                                                               attn_implementation="sdpa", output_loading_info=True,
                                                               trust_remote_code=TRUST_REMOTE_CODE)
    except Exception as e:
        raise InputError(
            f"target weights in {d} cannot be loaded ({first_line(e)[:80]})",
            "a complete safetensors file matching config.json",
            "re-save the target; the file is truncated, corrupt or for another config",
        ) from None
    check_loaded_tensors(info, d)  # an extra tensor, or one missing: refused, never dropped or random
    return model.eval()


def check_shards(d: Path) -> None:
    """A sharded checkpoint (`model.safetensors.index.json`): every shard its weight_map names
    exists and is non-empty, so a partial download is one clear error, not a half-random model."""
    index = d / "model.safetensors.index.json"
    if not index.is_file():
        return
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
        shards = sorted(set(weight_map.values()))
    except (ValueError, KeyError, TypeError, AttributeError):
        raise InputError(f"shard index {index} cannot be read", 'JSON with a "weight_map" of tensor -> shard file',
                         "re-save the target with save_pretrained") from None
    for shard in shards:
        f = d / shard
        if not f.is_file() or f.stat().st_size == 0:
            state = "is empty" if f.is_file() else "is missing"
            raise InputError(f"target shard {f} {state} ({len(shards)} shards listed in {index.name})",
                             "every shard the index names, complete",
                             "finish the download (huggingface-cli download resumes) or re-save the target")


def _uniform(cfg, key: str):
    """cfg.key, or None where it is absent or differs by layer (per-layer configs raise)."""
    try:
        return getattr(cfg, key, None)
    except Exception:  # transformers' AmbiguousGlobalPerLayerAttributeError
        return None


def kv_shapes(model: nn.Module, cfg) -> list[tuple[int, int]]:
    """(kv heads, head dim) of each layer's cache. Read from the attention modules, since
    layers may differ: Gemma 4 global layers have their own head dim and kv heads."""
    n_kv = _uniform(cfg, "num_key_value_heads") or cfg.num_attention_heads
    head_dim = _uniform(cfg, "head_dim") or cfg.hidden_size // cfg.num_attention_heads
    shapes = [(n_kv, head_dim)] * cfg.num_hidden_layers
    for mod in model.modules():
        i, k, d = getattr(mod, "layer_idx", None), getattr(mod, "k_proj", None), getattr(mod, "head_dim", None)
        if isinstance(i, int) and 0 <= i < len(shapes) and isinstance(k, nn.Linear) and isinstance(d, int):
            shapes[i] = (k.out_features // d, d)
    return shapes


class TargetAdapter(nn.Module):
    """Wraps an HF causal LM: static KV cache as module buffers, logits plus taps."""

    def __init__(self, model: nn.Module, aux_layer_ids: list[int], max_seq_len: int):
        super().__init__()
        cfg = model.config.get_text_config(decoder=True)
        n_layers = cfg.num_hidden_layers
        for k in aux_layer_ids:
            if not 0 <= k < n_layers:
                raise InputError(
                    f"draft aux layer id {k}",
                    f"ids in [0, {n_layers - 1}] for a target with {n_layers} layers",
                    "use a draft trained for this target (eagle_aux_hidden_state_layer_ids)",
                )
        self.model = model
        self.aux_layer_ids = list(aux_layer_ids)
        self.max_seq_len = max_seq_len
        self.n_layers = n_layers
        self.vocab_size = cfg.vocab_size
        self.hidden_size = cfg.hidden_size
        self.sliding_window = getattr(cfg, "sliding_window", None)
        dtype = next(model.parameters()).dtype
        self.cache = Cache(layers=[PositionalStaticLayer(max_cache_len=max_seq_len) for _ in range(n_layers)])
        for i, (layer, (n_kv, head_dim)) in enumerate(zip(self.cache.layers, kv_shapes(model, cfg))):
            shape = (1, n_kv, max_seq_len, head_dim)
            self.register_buffer(f"k_cache_{i}", torch.zeros(shape, dtype=dtype), persistent=False)
            self.register_buffer(f"v_cache_{i}", torch.zeros(shape, dtype=dtype), persistent=False)
            layer.max_batch_size, layer.num_heads, layer.head_dim = 1, n_kv, head_dim
            layer.dtype, layer.device = dtype, torch.device("cpu")
            layer.is_initialized = True
        self._bind_cache()
        self._cache_kw = cache_kwarg(model)
        types = getattr(cfg, "layer_types", None) or []
        self._mask_types = sorted(set(types)) if "sliding_attention" in types else []
        self.fast_forward = None  # set by program.compiled.compile_target: the same math, compilable
        self.kv_windowed = False  # set for one eager CPU call by program/kv_window.py: attend over the used slots

    def _bind_cache(self) -> None:
        """Points the HF cache layers at this module's buffers (after .to(), which replaces them)."""
        for i, layer in enumerate(self.cache.layers):
            layer.keys = getattr(self, f"k_cache_{i}")
            layer.values = getattr(self, f"v_cache_{i}")
            layer.dtype, layer.device = layer.keys.dtype, layer.keys.device

    def _apply(self, fn, *args, **kwargs):
        out = super()._apply(fn, *args, **kwargs)
        self._bind_cache()
        return out

    def forward(
        self,
        tokens: torch.Tensor,  # [1, T] int64
        positions: torch.Tensor,  # [T] int64
    ) -> tuple[torch.Tensor, torch.Tensor]:  # logits [1, T, V], taps [1, T, n_taps*Ht]
        if self.fast_forward is not None:
            return self.fast_forward(tokens, positions)
        slots = window_slots(positions, self.max_seq_len) if self.kv_windowed else None
        for layer in self.cache.layers:  # a layer's cache may sit on another device (program/placement.py)
            layer.positions = positions.to(layer.keys.device)  # no copy when it is the same device
            layer.slots = slots
        out = self.model(
            input_ids=tokens,
            position_ids=positions[None],
            attention_mask=self.attention_mask(positions, slots),
            use_cache=True,
            output_hidden_states=True,
            **{self._cache_kw: self.cache},
        )
        taps = torch.cat([out.hidden_states[k].to(out.logits.device) for k in self.aux_layer_ids], dim=-1)
        return out.logits, taps

    def attention_mask(self, positions: torch.Tensor, slots: int | None = None):  # [T] -> bool [1, 1, T, S]
        """Causal over absolute slots: query at position p sees slots <= p (and > p - window on
        sliding layers). Slots past p may hold stale rejected proposals; the mask hides them.
        Over the first `slots` slots (a window, program/kv_window.py), else all S (a dict by layer type
        where the model has sliding layers)."""
        slots = torch.arange(slots or self.max_seq_len, device=positions.device)
        causal = (slots[None, :] <= positions[:, None])[None, None]
        if not self._mask_types:
            return causal
        window = (slots[None, :] > positions[:, None] - self.sliding_window)[None, None]
        masks = {"full_attention": causal, "sliding_attention": causal & window}
        return {t: masks.get(t, causal) for t in self._mask_types}
