"""An AOTI package without weights: its models bound to the tensors of an eager program.

An AOTI package embeds each model's weights: `prefill` and `target_verify` both read the whole
target, so an 8B bf16 target makes a 30 GB package (twice its 15 GB), written once in the compile's
temporary directory and once as the package (a 64 GB disk cannot hold it beside the target), and
loaded twice into GPU memory beside the HF reference's own copy. With external weights
(`export --aoti --aoti-weights external`) each model is compiled with AOTInductor's
`aot_inductor.package_constants_in_so` off: the package holds the kernels only, and at load every
model's constants are bound, by reference (`load_constants(..., user_managed=True)`), to the
parameters and buffers of one eager program built from the same target and draft: one copy of the
weights for prefill, target_verify, draft_decode and (judge/shared.py) the HF reference.

A constant's name in a compiled model is its name in the traced method wrapper: "method.spec." and
the eager module's own name (`CachesAsInputs.method` is the `export._Prefill`-style wrapper, whose
`spec` is the eager module), e.g. "method.spec.target.model.model.layers.0.mlp.up_proj.weight" ->
"target.model.model.layers.0.mlp.up_proj.weight".

What keeps it the same program: the sidecar records a fingerprint of the eager module the package
was compiled from (each parameter's and buffer's name, shape, dtype and `checksum` of its bits, the
caches excluded); the program it is bound to at load must match it exactly. The checksum is integer
arithmetic on the tensor's bits, so it is the same on any device and in any reduction order (no
tolerance), and it moves with any one bit of any one weight. Anything else is an error naming the
tensor.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from eagle3_check.errors import InputError

EMBEDDED, EXTERNAL = "embedded", "external"
WEIGHT_MODES = (EMBEDDED, EXTERNAL)
PREFIX = "method.spec."  # a compiled constant's name = PREFIX + the eager module's name (module doc)
CHUNK = 1 << 24  # elements a checksum step converts to int64 at once (128 MiB of temporaries)
MODULUS = (1 << 61) - 1
FIX = "re-export the package from this target and draft (`eagle3-check export --aoti --aoti-weights external`)"


def compile_options(mode: str) -> dict:
    """The inductor config a weight mode adds to every method's compile."""
    if mode not in WEIGHT_MODES:
        raise InputError(f"--aoti-weights {mode}", f"one of {', '.join(WEIGHT_MODES)}", "pass --aoti-weights external")
    return {"aot_inductor.package_constants_in_so": False} if mode == EXTERNAL else {}


def weights_mode(sidecar: dict) -> str:
    """A package's weight mode from its sidecar (embedded for packages written before the field)."""
    mode = (sidecar.get("weights") or {}).get("mode", EMBEDDED)
    if mode not in WEIGHT_MODES:
        raise InputError(f"sidecar weights mode {mode!r}", f"one of {', '.join(WEIGHT_MODES)}", FIX)
    return mode


def module_tensors(module: nn.Module) -> dict[str, torch.Tensor]:
    """Every tensor a compiled model may hold as a constant, by the eager module's names: parameters and
    buffers, caches included (a method may read the other group's cache as a constant)."""
    return {**dict(module.named_parameters(remove_duplicate=False)),
            **dict(module.named_buffers(remove_duplicate=False))}  # tied weights under each of their names


def _own(name: str) -> str | None:
    """The eager module's name of a traced constant (PREFIX + it), else None."""
    return name[len(PREFIX):] if name.startswith(PREFIX) else None


def checksum(t: torch.Tensor) -> int:  # t: any shape, any dtype
    """An exact, order-independent digest of a tensor's bits (any dtype, any device).

    The bits are read as 16-bit words w_i (one-byte dtypes: bytes), each taken unsigned and weighted by
    (i mod 65521) + 1, so a swap of two words moves it too: sum_i w_i * ((i mod 65521) + 1) mod 2^61 - 1.
    Worked example: the float32 1.0 is 0x3F800000, words (little-endian) [0x0000, 0x3F80]:
    0 * 1 + 16256 * 2 = 32512. Each product is below 2^32 and a chunk holds 2^24 of them, so a chunk's
    int64 sum (< 2^56) is exact whatever order the device adds in."""
    flat = t.detach().contiguous().view(-1)
    words = flat.view(torch.int16) if flat.element_size() % 2 == 0 else flat.view(torch.uint8)
    total = 0
    for start in range(0, words.numel(), CHUNK):
        part = words[start:start + CHUNK].to(torch.int64) & 0xFFFF
        weight = torch.arange(start, start + part.numel(), device=part.device, dtype=torch.int64) % 65521 + 1
        total = (total + int((part * weight).sum())) % MODULUS
    return total


def fingerprint(module: nn.Module, caches: set[str]) -> list[list]:
    """[[name, shape, dtype, checksum], ...] of the module's weights (module doc)."""
    return [[name, list(t.shape), str(t.dtype).removeprefix("torch."), checksum(t)]
            for name, t in module_tensors(module).items() if name not in caches]


def check_fingerprint(module: nn.Module, caches: set[str], recorded: list[list], path: Any) -> None:
    """Refuses binding `path`'s models to `module` unless its weights are the ones it was compiled from."""
    now = {row[0]: row for row in fingerprint(module, caches)}
    want = {row[0]: row for row in recorded}
    for name in sorted(set(want) ^ set(now)):
        where = "the package's source" if name in want else "this program"
        raise InputError(f"weight {name} of {path}: only in {where}", "the target and draft the package was "
                         "compiled from", FIX)
    for name, (_, shape, dtype, digest) in want.items():
        _, shape2, dtype2, digest2 = now[name]
        if shape2 != shape or dtype2 != dtype:
            raise InputError(f"weight {name}: {dtype2} {shape2} here", f"{dtype} {shape}, as compiled into {path}", FIX)
        if digest2 != digest:  # exact: integer arithmetic (checksum)
            raise InputError(f"weight {name}: checksum {digest2} here", f"{digest}, the weights {path} was compiled "
                             "from", FIX)


def check_bindable(ep, tensors: dict[str, torch.Tensor], method: str) -> None:
    """Before a weightless compile: every constant of the exported method (`ep.state_dict`, `ep.constants`)
    must be PREFIX + a tensor of the eager program. A lifted tensor (an attribute that is neither
    parameter nor buffer) would be left out of the package and out of `get_constant_fqns`, so nothing
    could bind it and the model would compute with garbage (measured, torch 2.13)."""
    for name in [*ep.state_dict, *ep.constants]:
        if _own(name) not in tensors:
            raise InputError(f"constant {name} of {method}: not a parameter or buffer of the eager program",
                             "weights the package can be bound to at load", "drop --aoti-weights (embed them)")


def bind(model, tensors: dict[str, torch.Tensor], method: str, path: Any) -> int:
    """Binds a loaded model's constants to `tensors` (`module_tensors` of the eager program) by
    reference; returns how many. A constant that is not PREFIX + one of them is an error."""
    names = list(model.get_constant_fqns())
    bound = {}
    for fqn in names:
        own = _own(fqn)
        if own not in tensors:
            raise InputError(f"constant {fqn} of model {method} in {path}", f"a weight of the eager program "
                             f"({PREFIX}NAME)", FIX)
        bound[fqn] = tensors[own].detach()
    model.load_constants(bound, check_full_update=True, user_managed=True)
    return len(bound)
