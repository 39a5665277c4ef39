"""One target over several devices (`--devices cuda:0,cuda:1`): Accelerate's device_map, whole layers.

A target too large for one GPU is split by decoder layer with an existing engine, Accelerate's
`dispatch_model` (the mechanism behind Transformers' `device_map`): each decoder layer lives whole on
one device, with its static KV cache beside it; the embeddings, the rotary table, the final norm,
`lm_head` and the draft live on the first device (the main device: inputs, logits and the hidden-state
taps are there). Accelerate's hooks move a layer's inputs to its device and the outputs back.

Why layers and not tensor parallelism: a layer placed whole runs the same kernels on the same shapes as
on one device, so a split target computes bit for bit what the unsplit one computes on the same kind of
GPU; the verdict's tokens do not move, in float32, in bfloat16 and in exact mode alike. Tensor
parallelism splits each matmul's reduction over ranks and adds the partial sums: another reduction
order, bf16 logits moved by the shape noise the calibration measures. The price is that one device
computes at a time (one request in flight): a judge needs the memory, not the throughput; `--workers`
spreads requests over GPUs (docs/scale.md "Past one GPU").

Everything non-layer sits on the first device so that tied embeddings (`lm_head.weight` is
`embed_tokens.weight` in SmolLM2 and Gemma) stay one tensor; `split_layers` balances the layers
around that extra load.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from eagle3_check.errors import InputError, OptionError

DEVICE_RE = re.compile(r"cuda:(\d+)")


def parse_devices(text: str, allow_cpu: bool = False) -> tuple[str, ...]:
    """`--devices cuda:0,cuda:1` -> ("cuda:0", "cuda:1"): two or more distinct CUDA devices, refused
    before torch loads. `allow_cpu` admits "cpu" entries (the library's tests place over CPU groups)."""
    flag = f"--devices {text}"
    expected = "two or more distinct CUDA devices separated by commas, e.g. cuda:0,cuda:1"
    items = [s.strip() for s in text.split(",")]
    for item in items:
        if not (DEVICE_RE.fullmatch(item) or (allow_cpu and item == "cpu")):
            raise OptionError(f"{flag}: {item!r}", expected, "name each GPU as cuda:N (nvidia-smi lists them)")
    if len(items) < 2:
        raise OptionError(flag, expected, f"for one GPU pass --device {items[0]} instead")
    cuda = [i for i in items if i != "cpu"]
    if len(set(cuda)) != len(cuda):
        raise OptionError(flag, expected, "name each GPU once")
    return tuple(items)


def split_layers(layer_bytes: list[int], first_extra: int, n_devices: int) -> list[int]:
    """The device index of each layer: contiguous runs, in order, the largest device load as small as
    it can be, where the first device also holds `first_extra` bytes (embeddings, lm_head, draft).

    Worked example: 4 layers of 10 bytes, first_extra 10, 2 devices: loads are 10 + 10 + 10 = 30 and
    10 + 10 = 20 with [0, 0, 1, 1], or 10 + 10 = 20 and 30 with [0, 1, 1, 1]; both have a largest load
    of 30, and the split that fills earlier devices first is kept: [0, 0, 1, 1]. With first_extra 25:
    [0, 1, 1, 1] (loads 35 and 30) beats [0, 0, 1, 1] (45 and 20).
    """
    if n_devices < 1 or len(layer_bytes) < n_devices:
        raise InputError(f"a target of {len(layer_bytes)} decoder layers over {n_devices} devices",
                         "at least one layer per device", "pass fewer --devices")

    def fits(cap: int) -> list[int] | None:  # greedy: fill each device up to cap, in order
        out, dev, load, n = [], 0, first_extra, len(layer_bytes)
        for j, b in enumerate(layer_bytes):
            started = load > (first_extra if dev == 0 else 0)  # the device holds a layer already
            # move on when full, or when the layers left are just enough for one each on the devices left
            if started and (load + b > cap or n - j <= n_devices - 1 - dev):
                dev, load = dev + 1, 0
            if dev >= n_devices or load + b > cap:
                return None
            out.append(dev)
            load += b
        return out if dev == n_devices - 1 else None

    lo, hi = max([first_extra + layer_bytes[0], *layer_bytes]), first_extra + sum(layer_bytes)
    while lo < hi:  # the smallest cap a greedy fill meets
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) is not None else (mid + 1, hi)
    return fits(lo)


@dataclass(frozen=True)
class Placement:
    """Where the target's parts sit: `layers[i]` is decoder layer i's device."""

    devices: tuple[str, ...]
    layers: tuple[int, ...]  # layer i -> its index in devices

    def describe(self) -> str:
        """'cuda:0 (layers 0-15, embeddings, lm_head, draft), cuda:1 (layers 16-31)'."""
        parts = []
        for k, dev in enumerate(self.devices):
            idx = [i for i, d in enumerate(self.layers) if d == k]
            extra = ", embeddings, lm_head, draft" if k == 0 else ""
            parts.append(f"{dev} (layers {idx[0]}-{idx[-1]}{extra})")
        return ", ".join(parts)


def decoder_layers(model):
    """(dotted name, ModuleList) of the target's decoder layers: the ModuleList of num_hidden_layers."""
    from torch import nn

    n = model.config.get_text_config(decoder=True).num_hidden_layers
    found = [(name, m) for name, m in model.named_modules() if isinstance(m, nn.ModuleList) and len(m) == n
             and name.endswith("layers")]
    if len(found) != 1:
        raise InputError(f"the target's decoder layers ({len(found)} ModuleLists of {n} modules named *layers)",
                         "one list of decoder layers, as HF causal LMs have",
                         "place this target on one device (--device) instead of --devices")
    return found[0]


def param_bytes(module) -> int:
    return sum(p.numel() * p.element_size() for p in module.parameters())


def place_target(adapter, devices: tuple[str, ...], first_extra: int = 0) -> Placement:
    """Dispatches `adapter.model` (a TargetAdapter's HF model, on the host) over `devices` by layer
    (module doc) and moves each layer's KV cache to its device. `first_extra`: bytes the first device
    holds besides the target (the draft). Accelerate's hooks go in even where two entries name the same
    device (`cpu,cpu` in the CPU tests), so the tests run the path a multi-GPU host runs."""
    import torch
    from accelerate import dispatch_model

    model = adapter.model
    prefix, layers = decoder_layers(model)
    sizes = [param_bytes(layer) for layer in layers]
    rest = param_bytes(model) - sum(sizes)  # embeddings, norm, lm_head (tied counted once)
    assign = split_layers(sizes, rest + first_extra, len(devices))
    # torch.device values: Accelerate reads the string "cpu" as "offload to the host", not as a device
    devs = [torch.device(d) for d in devices]
    device_map = {"": devs[0]}
    device_map.update({f"{prefix}.{i}": devs[d] for i, d in enumerate(assign)})
    dispatch_model(model, device_map=device_map, main_device=devs[0],
                   skip_keys=getattr(model, "_skip_keys_device_placement", None), force_hooks=True)
    for i, d in enumerate(assign):  # each layer's static cache beside the layer
        for kind in ("k", "v"):
            name = f"{kind}_cache_{i}"
            adapter._buffers[name] = getattr(adapter, name).to(devs[d])
    adapter._bind_cache()
    return Placement(devices, tuple(assign))
