"""Weight-only quantization of a speculator's linear layers: INT8 or INT4 weights, fp32 compute.

torchao computes the quantization (`quantize_` with `IntxWeightOnlyConfig`: symmetric, per
output channel for INT8, per group of `group_size` input columns for INT4); each `nn.Linear`
is then replaced by a `WeightOnlyLinear` that stores torchao's integer weights, scales and
zero points as buffers and dequantizes them in plain aten ops before an fp32 `F.linear`.
The eager backend and the `.pte` run that same module, so CPU eager and `.pte` emit the same
tokens (the .pte's matmul may round differently, as for any fp32 export).

Why not torchao's tensor subclass end to end: ExecuTorch 1.5.1's XNNPACK delegate lowers
`torchao.dequantize_affine` + linear from `IntxWeightOnlyConfig` but computes garbage
(max |out - eager| 1.9e3 for INT8 per-channel, 1.1e2 for INT4 group 32, on a 64 -> 192
linear whose outputs are below 2), and the portable backend has no out variant for
`torchao::dequantize_affine` ("Missing out variants"). The dequantize-then-linear form here
lowers on XNNPACK and matches eager to 4e-7. INT4 values are stored one per int8 byte
(unpacked, as torchao's `IntxUnpackedToInt8Tensor` holds them).

The quantization a program carries is one string metadata key, `get_quantization`:
`"int4-weight;group_size=32;scope=target"` (scope `target` or `target+draft`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from eagle3_check.errors import InputError, OptionError

SCHEMES = ("int8-weight", "int4-weight")
DEFAULT_GROUP_SIZE = {"int8-weight": None, "int4-weight": 32}  # None: one scale per output channel
QUANT_KEY = "get_quantization"  # constant method: QuantSpec.tag()
SCOPES = ("target", "target+draft")


@dataclass(frozen=True)
class QuantSpec:
    scheme: str  # int8-weight | int4-weight
    group_size: int | None  # input columns per scale; None = per output channel
    scope: str = "target"  # which linears: target, or target+draft

    def tag(self) -> str:
        """The metadata string. Example: QuantSpec("int4-weight", 32) -> "int4-weight;group_size=32;scope=target"."""
        return f"{self.scheme};group_size={self.group_size or 'channel'};scope={self.scope}"

    def short(self) -> str:
        """For tables: "int4-weight g32", "int8-weight per-channel", "+draft" when the draft is too."""
        g = f"g{self.group_size}" if self.group_size else "per-channel"
        return f"{self.scheme} {g}" + (" +draft" if self.scope == "target+draft" else "")


def make_spec(scheme: str, group_size: int | None = None, draft: bool = False) -> QuantSpec:
    """Checks the user's choice; the scheme's default group size when none is given."""
    if scheme not in SCHEMES:
        raise OptionError(f"--quantize {scheme}", f"one of {', '.join(SCHEMES)}", "pass --quantize int4-weight")
    g = DEFAULT_GROUP_SIZE[scheme] if group_size is None else group_size
    if g is not None and g < 1:
        raise OptionError(f"--group-size {g}", "a positive number of input columns per scale",
                          "pass e.g. --group-size 32")
    return QuantSpec(scheme, g, "target+draft" if draft else "target")


def parse_tag(tag: str) -> QuantSpec:
    """Inverse of `QuantSpec.tag`; anything else is an error (never guessed)."""
    parts = str(tag).split(";")
    fields = dict(p.split("=", 1) for p in parts[1:] if "=" in p)
    if len(parts) != 3 or parts[0] not in SCHEMES or set(fields) != {"group_size", "scope"} \
            or fields["scope"] not in SCOPES or not (fields["group_size"] == "channel" or fields["group_size"].isdigit()):
        raise OptionError(f"{QUANT_KEY} = {tag!r}", "'SCHEME;group_size=N|channel;scope=target|target+draft'",
                          "re-export the program with eagle3-check export --quantize")
    g = None if fields["group_size"] == "channel" else int(fields["group_size"])
    return QuantSpec(parts[0], g, fields["scope"])


def program_quantization(metadata: dict) -> QuantSpec | None:
    """The program's quantization from its metadata; None for a full-precision program."""
    tag = metadata.get(QUANT_KEY)
    return None if tag is None else parse_tag(tag)


class WeightOnlyLinear(nn.Module):
    """y = x @ dequant(W).T + b, with W stored as integers: W[n, k] = (q[n, k] - zp[n, k // g]) * scale[n, k // g]."""

    def __init__(self, qdata: torch.Tensor, scale: torch.Tensor, zero_point: torch.Tensor, bias: torch.Tensor | None):
        super().__init__()
        self.register_buffer("qdata", qdata)  # [N, K] int8 (INT4 values in [-8, 7] for int4-weight)
        self.register_buffer("scale", scale)  # [N, K / g] float32
        self.register_buffer("zero_point", zero_point)  # [N, K / g] int8
        self.bias = None if bias is None else nn.Parameter(bias, requires_grad=False)  # [N]
        self.in_features, self.out_features = qdata.shape[1], qdata.shape[0]

        self._dequantized: tuple[tuple, torch.Tensor] | None = None  # eager only: see `weight`
        # symmetric quantization (torchao's default here) has zero points of 0: the traced graph then
        # leaves out `- zp` (3 of the 12 nodes a quantized linear adds; issue 32: a quantized export
        # lowers about twice the nodes of an fp32 one). Re-read whenever the eager path dequantizes.
        self.read_zero_points()

    @property
    def weight(self) -> torch.Tensor:  # -> [N, K] float32
        """Dequantized. Traced (torch.export, torch.compile): computed in the graph on every call, so
        the program holds the integers. Eager: computed once and kept until a buffer changes (in place,
        e.g. `zero_scales`, or replaced, e.g. `.to()`), so an eager run does not dequantize every
        weight on every call (same values: the same ops on the same buffers)."""
        if torch.compiler.is_compiling():
            return self._dequantize()
        key = tuple((b.data_ptr(), b._version, b.device) for b in (self.qdata, self.scale, self.zero_point))
        if self._dequantized is None or self._dequantized[0] != key:
            self.read_zero_points()
            self._dequantized = (key, self._dequantize())
        return self._dequantized[1]

    def read_zero_points(self) -> None:
        """Re-reads whether every zero point is 0 (before a trace: export calls it via `read_all_zero_points`)."""
        self._zero_free = not bool(self.zero_point.any())

    def _dequantize(self) -> torch.Tensor:  # -> [N, K] float32
        n, k = self.qdata.shape
        groups = self.scale.shape[1]
        q = self.qdata.to(torch.float32).view(n, groups, k // groups)  # [N, K / g, g]
        if not self._zero_free:  # q - 0 is q exactly: the same weights either way
            q = q - self.zero_point.to(torch.float32)[..., None]  # zero points [N, K / g, 1]
        return (q * self.scale[..., None]).view(n, k)

    def forward(self, x: torch.Tensor) -> torch.Tensor:  # [..., K] -> [..., N]
        w = self.weight  # [N, K] float32
        return F.linear(x, w if w.dtype == x.dtype else w.to(x.dtype), self.bias)  # no no-op cast node


def read_all_zero_points(module: nn.Module) -> None:
    """Every `WeightOnlyLinear` in `module` re-reads its zero points (a traced graph omits `- zp` when all are 0)."""
    for m in module.modules():
        if isinstance(m, WeightOnlyLinear):
            m.read_zero_points()


def _require_torchao() -> None:
    try:
        import torchao.quantization  # noqa: F401
    except ImportError as e:
        raise InputError(f"torchao is not importable ({e})", "torchao (it comes with the pte extra's executorch)",
                         "pip install -e .[pte]") from None


def _torchao_config(spec: QuantSpec):
    _require_torchao()
    from torchao.quantization import IntxWeightOnlyConfig
    from torchao.quantization.granularity import PerAxis, PerGroup

    dtype = torch.int8 if spec.scheme == "int8-weight" else torch.int4
    gran = PerAxis(0) if spec.group_size is None else PerGroup(spec.group_size)
    return IntxWeightOnlyConfig(weight_dtype=dtype, granularity=gran)


def quantize_linear(linear: nn.Linear, spec: QuantSpec, name: str = "linear") -> WeightOnlyLinear:
    """torchao's quantization of one linear, as a `WeightOnlyLinear`."""
    from torchao.quantization import quantize_

    k = linear.in_features
    if spec.group_size is not None and k % spec.group_size:
        raise OptionError(f"--group-size {spec.group_size} for {name} with {k} input columns",
                          f"a divisor of every quantized layer's input width ({k} here)",
                          "pass a --group-size that divides it (e.g. 32 or 16)")
    holder = nn.Sequential(nn.Linear(k, linear.out_features, bias=False))
    with torch.no_grad():
        holder[0].weight.copy_(linear.weight.detach().float())
    quantize_(holder, _torchao_config(spec))
    w = holder[0].weight  # torchao IntxUnpackedToInt8Tensor
    n = linear.out_features
    bias = None if linear.bias is None else linear.bias.detach().float().clone()
    quantized = WeightOnlyLinear(w.qdata.detach().clone().to(torch.int8), w.scale.detach().float().reshape(n, -1).clone(),
                                 w.zero_point.detach().reshape(n, -1).clone().to(torch.int8), bias)
    return quantized.to(linear.weight.device)  # quantized on CPU (the holder), placed where the linear was


def quantize_linears(root: nn.Module, spec: QuantSpec, prefix: str = "") -> list[str]:
    """Replaces every `nn.Linear` under `root` in place; returns their qualified names."""
    done = []
    for name, mod in list(root.named_modules()):
        for child_name, child in list(mod.named_children()):
            if isinstance(child, nn.Linear):
                full = f"{prefix}{name + '.' if name else ''}{child_name}"
                setattr(mod, child_name, quantize_linear(child, spec, full))
                done.append(full)
    return done


def quantize_speculator(module: nn.Module, spec: QuantSpec) -> list[str]:
    """Quantizes the target's linears (and the draft's with scope target+draft) of an
    `Eagle3Speculator` on CPU in float32; returns the names of the quantized layers."""
    if next(module.parameters()).dtype != torch.float32:
        raise OptionError(f"--quantize {spec.scheme} with dtype {next(module.parameters()).dtype}",
                          "a float32 program (weight-only quantization computes in float32)", "drop --dtype")
    names = quantize_linears(module.target, spec, "target.")
    if spec.scope == "target+draft":
        names += quantize_linears(module.draft, spec, "draft.")
    return names


def zero_scales(module: nn.Module, layer: str) -> None:
    """A broken quantization (negative fixtures): every scale of the quantized layer `layer`
    (a name `quantize_speculator` returned) set to zero, so that layer outputs only its bias."""
    mods = dict(module.named_modules())
    target = mods.get(layer)
    if not isinstance(target, WeightOnlyLinear):
        names = [n for n, m in mods.items() if isinstance(m, WeightOnlyLinear)]
        raise OptionError(f"layer {layer}", f"a quantized layer (e.g. {names[0] if names else 'none: quantize first'})",
                          "pass a name from the export record's quantized layers")
    with torch.no_grad():
        target.scale.zero_()
