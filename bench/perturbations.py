"""The perturbed programs of bench/perturbed_check.py: a target's eager speculator with one change to its
target (the kinds listed there: scale, oproj, head, rope, kv-fp16, int4-zero, int8), cast to the run dtype
as a correct program is loaded, and an untrained draft of the right shape where no fixture's is given."""

from __future__ import annotations

from pathlib import Path

import torch


def random_draft(target_dir: Path, out: Path, max_seq_len: int) -> Path:
    """An untrained draft of the target's shape (full draft vocab: no maps), seeded."""
    from eagle3_check.program.draft import Eagle3DraftHead
    from eagle3_check.program.draft_config import DraftConfig
    from eagle3_check.program.target import target_text_config

    t = target_text_config(target_dir)
    n = t.num_hidden_layers
    cfg = DraftConfig(hidden_size=t.hidden_size, num_attention_heads=t.num_attention_heads,
                      num_key_value_heads=t.num_key_value_heads, intermediate_size=t.intermediate_size,
                      vocab_size=t.vocab_size, draft_vocab_size=t.vocab_size, aux_layer_ids=[1, n // 2, n - 3],
                      target_hidden_size=t.hidden_size, head_dim=getattr(t, "head_dim", None))
    torch.manual_seed(0)
    Eagle3DraftHead(cfg, max_seq_len).save(out)
    return out


def perturb(backend, kind: str) -> str:
    """Applies `kind`'s weight change (module doc) to the eager program's target in place (before the cast
    to the run dtype); returns what it did. `kv-fp16` is applied after the cast (`store_kv_fp16`)."""
    from eagle3_check.program.quantize import make_spec, quantize_speculator, zero_scales

    name, _, arg = kind.partition(":")
    model = backend.module.target.model
    layers = model.get_decoder().layers
    if name in ("none", "kv-fp16"):
        return "the target as it is" if name == "none" else "KV cache stored in float16"
    with torch.no_grad():
        if name == "scale":
            for m in layers[int(arg)].modules():
                if isinstance(m, torch.nn.Linear):
                    m.weight.mul_(1.01)
            return f"decoder layer {arg}'s linear weights x 1.01"
        if name == "oproj":
            layers[int(arg)].self_attn.o_proj.weight.mul_(1.01)
            return f"layer {arg}'s o_proj x 1.01"
        if name == "head":
            layer, head = (int(x) for x in arg.split("."))
            attn = layers[layer].self_attn
            d = attn.head_dim
            attn.o_proj.weight[:, head * d:(head + 1) * d].mul_(0.9)  # [H, heads * d]: the head's input columns
            return f"layer {layer} head {head}'s output x 0.9"
        if name == "rope":
            return rope_theta_up(model, 1.01)
    if name == "int4-zero":
        quantize_speculator(backend.module, make_spec("int4-weight", 32))
        zero_scales(backend.module, f"target.model.model.{arg}")
        return f"int4-weight g32, {arg} scales zeroed"
    if name == "int8":
        quantize_speculator(backend.module, make_spec("int8-weight"))
        return "int8-weight per channel"
    raise SystemExit(f"perturbation {kind!r}: expected none, scale:L, oproj:L, head:L.H, rope, kv-fp16, "
                     "int4-zero:NAME or int8")


def rope_theta_up(model, factor: float) -> str:
    """RoPE theta x `factor` on every rotary table: inv_freq_i = theta^(-2i/d), so with theta' = f theta,
    inv_freq' = inv_freq^(1 + ln f / ln theta) (worked example: theta 10000, d 4: inv_freq [1, 0.01] ->
    [1, 0.01^(1 + ln 1.01 / ln 10000)] = [1, 0.00990])."""
    theta = rope_theta(model.config)
    k = 1 + torch.log(torch.tensor(factor, dtype=torch.float64)) / torch.log(torch.tensor(theta, dtype=torch.float64))
    n = 0
    for m in model.modules():
        for buf in ("inv_freq", "original_inv_freq"):
            t = getattr(m, buf, None)
            if isinstance(t, torch.Tensor):
                setattr(m, buf, torch.exp(torch.log(t.double()) * k).to(t.dtype))
                n += buf == "inv_freq"
    if not n:
        raise SystemExit("rope: no rotary table (inv_freq) in the target")
    return f"RoPE theta {theta:g} x {factor} ({n} rotary table{'s' if n > 1 else ''})"


def rope_theta(cfg) -> float:
    params = getattr(cfg, "rope_parameters", None) or {}
    theta = params.get("rope_theta") if isinstance(params, dict) else None
    return float(theta or getattr(cfg, "rope_theta", 10000.0))


def store_kv_fp16(target) -> None:
    """The target adapter's KV cache buffers in float16: each update writes the keys and values rounded
    to float16 and returns them in the run dtype (what a program storing its cache in fp16 computes)."""
    run = target.k_cache_0.dtype
    for i, layer in enumerate(target.cache.layers):
        for kind in ("k", "v"):
            setattr(target, f"{kind}_cache_{i}", getattr(target, f"{kind}_cache_{i}").to(torch.float16))

        def update(key_states, value_states, *a, layer=layer, **kw):  # [1, kvH, T, D] each
            layer.keys.index_copy_(2, layer.positions, key_states.to(torch.float16))
            layer.values.index_copy_(2, layer.positions, value_states.to(torch.float16))
            return layer.keys.to(run), layer.values.to(run)

        layer.update = update
    target._bind_cache()


def program(target_dir: Path, draft_dir: Path, spec, dtype: str, kind: str, device: str = "cpu"):
    """The eager program of `target_dir`, perturbed by `kind`, computing in `dtype` on `device`."""
    from eagle3_check.program.eager import DTYPES, EagerBackend

    backend = EagerBackend.from_dirs(target_dir, draft_dir, spec, device, "float32")
    what = perturb(backend, kind)
    cast_as_loaded(backend.module, DTYPES[dtype])
    if kind == "kv-fp16":
        store_kv_fp16(backend.module.target)
    backend._metadata.pop("get_quantization", None)  # presented as the target itself
    return backend, what


def cast_as_loaded(module, dtype) -> None:
    """`module` cast to `dtype` as EagerBackend.from_dirs loads it in that dtype: every parameter and
    buffer but HF's RoPE tables (`inv_freq`, `original_inv_freq`), which stay float32. A module-wide
    `.to(dtype)` would round them too (0.3162 -> 0.3164 in bf16), a phase error growing with the
    position that no correct program has (program/eager.py): the "correct" program of the table would
    not be the target, and a calibration measured on it would be too wide."""
    rope = {name: buf for name, buf in module.named_buffers() if name.rsplit(".", 1)[-1] in ROPE_TABLES}
    module.to(dtype)
    for name, buf in rope.items():
        owner, _, attr = name.rpartition(".")
        setattr(module.get_submodule(owner) if owner else module, attr, buf)


ROPE_TABLES = ("inv_freq", "original_inv_freq")
