"""Rotary position embedding of the draft: the variants a published draft config can name.

A config names its rope in one of two spellings, both read here:

- Transformers >= 5 (speculators >= 0.9): `rope_parameters = {"rope_type": ..., "rope_theta": ...,
  <scaling keys>}`.
- Transformers 4 (earlier speculators, original EAGLE-3): a flat `rope_theta` beside an optional
  `rope_scaling = {"rope_type" | "type": ..., <scaling keys>}`.

Supported `rope_type`s, with Transformers' inverse frequencies (attention scaling 1.0 for all):
`default`, `linear` (inv_freq / factor) and `llama3` (the Llama 3.1 band-wise smoothing).
Anything else (yarn, dynamic, longrope, partial rotary) is refused with the key that named it:
a draft whose positions are encoded differently would load and silently propose worse tokens.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from eagle3_check.errors import InputError

ROPE_KEYS = {
    "default": set(),
    "linear": {"factor"},
    "llama3": {"factor", "low_freq_factor", "high_freq_factor", "original_max_position_embeddings"},
}


@dataclass(frozen=True)
class RopeSpec:
    rope_theta: float = 10000.0
    rope_type: str = "default"
    factor: float | None = None
    low_freq_factor: float | None = None
    high_freq_factor: float | None = None
    original_max_position_embeddings: int | None = None

    def to_parameters(self) -> dict:
        """The Transformers 5 `rope_parameters` dict (what speculators 0.9 writes)."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def _bad(where: str, what: str, expected: str, fix: str) -> InputError:
    return InputError(f"draft config {where}: {what}", expected, fix)


def parse_rope(layer: dict, where: str) -> RopeSpec:
    """The rope of a layer config dict (either spelling; both present must agree)."""
    params = layer.get("rope_parameters")
    scaling = layer.get("rope_scaling")
    flat_theta = layer.get("rope_theta")
    if params is not None:
        if not isinstance(params, dict) or "sliding_attention" in params or "full_attention" in params:
            raise _bad(where, f"rope_parameters {params!r}", "one flat rope_parameters dict",
                       "per-layer-type rope is not supported for drafts; use one rope for every layer")
        spec = _from_dict(params, params.get("rope_theta", flat_theta), "rope_parameters", where)
        if scaling is not None and _from_dict(scaling, spec.rope_theta, "rope_scaling", where) != spec:
            raise _bad(where, f"rope_scaling {scaling!r} disagrees with rope_parameters {params!r}",
                       "one rope", "drop the stale rope_scaling")
        if flat_theta is not None and float(flat_theta) != spec.rope_theta:
            raise _bad(where, f"rope_theta {flat_theta} disagrees with rope_parameters.rope_theta "
                       f"{spec.rope_theta}", "one rope_theta", "drop the stale rope_theta")
        return spec
    if scaling is not None:
        return _from_dict(scaling, flat_theta, "rope_scaling", where)
    return RopeSpec(rope_theta=float(flat_theta if flat_theta is not None else 10000.0))


def _from_dict(d: dict, theta, name: str, where: str) -> RopeSpec:
    if not isinstance(d, dict):
        raise _bad(where, f"{name} {d!r}", "a dict", f"write {name} as a JSON object")
    kind = d.get("rope_type", d.get("type", "default"))
    if kind not in ROPE_KEYS:
        raise _bad(where, f"{name}.rope_type {kind!r}", f"one of {sorted(ROPE_KEYS)}",
                   "this rope variant is not implemented for drafts; convert the draft or extend program/rope.py")
    allowed = ROPE_KEYS[kind] | {"rope_type", "type", "rope_theta"}
    for key, value in d.items():
        if key == "partial_rotary_factor" and float(value) == 1.0:
            continue
        if key not in allowed:
            raise _bad(where, f"{name}.{key} = {value!r} (rope_type {kind})",
                       f"only {sorted(allowed)}", "this rope field changes the math and is not implemented")
    missing = sorted(ROPE_KEYS[kind] - d.keys())
    if missing:
        raise _bad(where, f"{name} has no {missing[0]} (rope_type {kind})",
                   f"all of {sorted(ROPE_KEYS[kind])}", f"add {missing[0]} to {name}")
    vals = {k: float(d[k]) for k in ROPE_KEYS[kind] if k != "original_max_position_embeddings"}
    if "original_max_position_embeddings" in d:
        vals["original_max_position_embeddings"] = int(d["original_max_position_embeddings"])
    return RopeSpec(rope_theta=float(theta if theta is not None else 10000.0), rope_type=kind, **vals)


def inv_freq(spec: RopeSpec, d: int, device=None) -> torch.Tensor:  # [d/2] float32
    """Transformers' inverse frequencies for `spec` over head dim `d`."""
    base = 1.0 / (spec.rope_theta ** (torch.arange(0, d, 2, dtype=torch.int64, device=device).float() / d))
    if spec.rope_type == "linear":
        return base / spec.factor
    if spec.rope_type == "llama3":
        factor, low, high = spec.factor, spec.low_freq_factor, spec.high_freq_factor
        old = spec.original_max_position_embeddings
        low_wavelen, high_wavelen = old / low, old / high
        wavelen = 2 * math.pi / base
        scaled = torch.where(wavelen > low_wavelen, base / factor, base)
        smooth = (old / wavelen - low) / (high - low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        return torch.where(medium, smoothed, scaled)
    return base


def rope_tables(
    positions: torch.Tensor,  # [T]
    d: int,
    spec: RopeSpec,
    dtype: torch.dtype,
) -> tuple[torch.Tensor, torch.Tensor]:  # cos, sin [T, D]
    """Computed once per call and shared by q and k (fewer small kernels on CUDA)."""
    ang = positions.float()[:, None] * inv_freq(spec, d, positions.device)[None, :]  # [T, D/2]
    c, s = ang.cos(), ang.sin()
    return torch.cat([c, c], -1).to(dtype), torch.cat([s, s], -1).to(dtype)


def apply_rope(
    x: torch.Tensor,  # [B, heads, T, D]
    cos: torch.Tensor,  # [T, D]
    sin: torch.Tensor,  # [T, D]
) -> torch.Tensor:  # [B, heads, T, D]
    d = x.shape[-1]
    x1, x2 = x[..., : d // 2], x[..., d // 2 :]
    return x * cos + torch.cat([-x2, x1], -1) * sin


def rope(
    x: torch.Tensor,  # [B, heads, T, D]
    positions: torch.Tensor,  # [T]
    spec: RopeSpec,
) -> torch.Tensor:  # [B, heads, T, D]
    cos, sin = rope_tables(positions, x.shape[-1], spec, x.dtype)
    return apply_rope(x, cos, sin)
