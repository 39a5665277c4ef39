"""Resource bounds before allocation: a program's memory, estimated from its configs, is checked
against the memory available (or a stated budget) before any weight or cache is allocated.

The estimate counts what the eager program allocates (DESIGN §1: one target KV cache shared by
prefill and target_verify, a separate draft KV cache):

    target weights  = V·H·(1 if tied else 2) + L·(H·nh·hd + 2·H·nkv·hd + nh·hd·H + 3·H·I·experts + 2·H)
    target KV cache = 2 · L · nkv · hd · max_seq_len                      (elements of --dtype)
    draft weights   = V·h + taps·Ht·h + n·(2h·nh·d + 2·2h·nkv·d + nh·d·h + 3·h·I) + h·Vd   (float32 at build)
    draft KV cache  = 2 · n · nkv · d · max_seq_len                        (float32 at build)
    per-layer overhead = 64 KiB of Python module objects per target layer

Worked example (tiny-llama: V = 512, H = 64, L = 4, nh = 4, nkv = 2, hd = 16, I = 192, untied,
max_seq_len 256, float32): target weights = 512·64·2 + 4·(4096 + 4096 + 4096 + 36864 + 128) + 64
= 65536 + 197120 + 64 = 262720 elements = 1050880 bytes (+ 4 · 64 KiB overhead); target KV =
2·4·2·16·256 = 65536 elements = 262144 bytes (tests/program/test_hostile_models.py pins both, and the weight
count against the loaded model's own). A config whose estimate exceeds the memory is refused here, with the
estimate and the available memory, instead of growing to the memory cap; and before that, before
torch is imported, every dimension is checked against a sane maximum (`DIMENSION_MAX`: hidden_size
1000000 is refused in milliseconds, though its estimate fits a large host).

The budget is the memory available now (Linux MemAvailable, bounded by the cgroup limit; on CUDA
the device's free memory, and the host must still hold the target weights while they load), or
`set_budget(GiB)` (the CLI's --max-memory) to state it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from eagle3_check.errors import InputError

GiB = 1 << 30
LAYER_OVERHEAD = 64 << 10  # bytes of module objects per decoder layer, weights apart (measured: 23.6 KB a layer, tiny-llama at 2000 layers)
_BUDGET: list[int | None] = [None]  # bytes; None = the memory available now


def set_budget(gib: float | None) -> None:
    """States the memory budget in GiB (None: the memory available at each check)."""
    _BUDGET[0] = None if gib is None else int(gib * GiB)


@dataclass
class Estimate:
    """Bytes by part (on the program's device) and the bytes the host holds while loading."""

    parts: dict[str, int] = field(default_factory=dict)
    host_peak: int = 0  # bytes on the host during the load (the target is loaded there first)

    @property
    def total(self) -> int:
        return sum(self.parts.values())

    def describe(self) -> str:
        return ", ".join(f"{k} {gib(v)}" for k, v in self.parts.items())


def gib(n: int | float) -> str:
    """Bytes as GiB: two decimals, or three significant digits below 0.01 GiB (a tiny --max-memory
    must not read "needs 0.00 GiB but 0.00 GiB is the budget"): 0.5 GiB -> '0.50', 1 KiB -> '9.54e-07'."""
    v = n / GiB
    return f"{v:.2f}" if v == 0 or v >= 0.01 else f"{v:.3g}"


def _get(cfg, key: str):
    """cfg.key; for a per-layer attribute (Gemma 4: it varies by layer, the global read raises) the
    largest value over the layers, so the estimate is never below the real size."""
    try:
        return getattr(cfg, key, None)
    except Exception:  # noqa: BLE001 - transformers' AmbiguousGlobalPerLayerAttributeError
        layers = getattr(cfg, "per_layer_config", None) or []
        values = [v for v in (getattr(c, key, None) for c in layers) if type(v) is int]
        return max(values) if values else None


def _positive(cfg, key: str, where: str, default=None) -> int:
    value = _get(cfg, key)
    if value is None and default is not None:
        return default
    if type(value) is not int or value < 1:
        raise InputError(f"{where}: {key} = {value!r}", "a positive integer", f"fix {key} in {where}")
    check_dimension(key, value, where)
    return value


# The sane maximum of each config dimension, far above every released model (the largest in brackets),
# so that a typo (hidden_size 1000000) is refused at once instead of allocating or computing for minutes.
DIMENSION_MAX = {
    **dict.fromkeys(("hidden_size", "n_embd", "d_model", "target_hidden_size"), 1 << 16),  # [25600]
    **dict.fromkeys(("intermediate_size", "n_inner", "ffn_dim", "moe_intermediate_size"), 1 << 18),  # [73728]
    **dict.fromkeys(("num_hidden_layers", "n_layer", "num_layers"), 1 << 10),  # [192]
    **dict.fromkeys(("num_attention_heads", "n_head", "num_key_value_heads"), 1 << 10),  # [128]
    **dict.fromkeys(("head_dim", "global_head_dim"), 1 << 12),  # [512]
    **dict.fromkeys(("vocab_size", "draft_vocab_size"), 1 << 22),  # [262144]
    **dict.fromkeys(("num_local_experts", "num_experts"), 1 << 12),  # [384]
}


def check_dimension(key: str, value, where: str) -> None:
    """A config dimension above its sane maximum (DIMENSION_MAX) is a one-line error naming it."""
    limit = DIMENSION_MAX.get(key)
    if limit is not None and type(value) is int and value > limit:
        raise InputError(f"{where}: {key} = {value}", f"at most {limit} (a sane maximum: every released model's "
                         f"{key} is far below it)", f"correct {key} in {where} (a typo?)")


def check_config_dimensions(path: str | Path, what: str) -> None:
    """Every dimension of a config.json (nested configs included: text_config, transformer_layer_config)
    against its sane maximum, read as plain JSON: before torch is imported, so an absurd config costs
    what `--help` costs. A file that cannot be read is left to its loader's own error."""
    from eagle3_check.inputs import read_json

    p = Path(path)
    if not p.is_file():
        return
    try:
        data = read_json(p, what, "a JSON object", "fix the file")
    except InputError:
        return  # the loader names it in its own words

    def walk(node) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                check_dimension(key, value, f"{what} {p}")
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(data)


def target_estimate(cfg, max_seq_len: int, elem: int, where: str) -> dict[str, int]:
    """Target weight and KV-cache bytes of a Transformers text config (see the module doc)."""
    V, H = _positive(cfg, "vocab_size", where), _positive(cfg, "hidden_size", where)
    L, nh = _positive(cfg, "num_hidden_layers", where), _positive(cfg, "num_attention_heads", where)
    nkv = _positive(cfg, "num_key_value_heads", where, nh)
    hd = max(_positive(cfg, "head_dim", where, max(H // nh, 1)), _get(cfg, "global_head_dim") or 0)
    inter = _positive(cfg, "intermediate_size", where, 4 * H)
    experts = _get(cfg, "num_local_experts") or _get(cfg, "num_experts") or 1
    experts = experts if type(experts) is int and experts > 0 else 1
    tied = _get(cfg, "tie_word_embeddings") is True
    per_layer = H * nh * hd + 2 * H * nkv * hd + nh * hd * H + 3 * H * inter * experts + 2 * H
    weights = V * H * (1 if tied else 2) + L * per_layer + H
    return {"target weights": weights * elem + L * LAYER_OVERHEAD, "target KV cache": 2 * L * nkv * hd * max_seq_len * elem}


def draft_estimate(cfg, max_seq_len: int) -> dict[str, int]:
    """Draft weight and KV-cache bytes of a DraftConfig (built in float32, see the module doc)."""
    for key in ("hidden_size", "target_hidden_size", "intermediate_size", "num_attention_heads",
                "num_key_value_heads", "vocab_size", "draft_vocab_size"):
        check_dimension(key, getattr(cfg, key, None), "the draft config")
    check_dimension("num_layers", cfg.num_layers, "the draft config")
    h, ht, n = cfg.hidden_size, cfg.target_hidden_size, cfg.num_layers
    nh, nkv, d, inter = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.dim_per_head, cfg.intermediate_size
    layer = 2 * h * nh * d + 2 * 2 * h * nkv * d + nh * d * h + 3 * h * inter
    weights = cfg.vocab_size * h + cfg.n_taps * ht * h + n * layer + h * cfg.draft_vocab_size
    return {"draft weights": weights * 4, "draft KV cache": 2 * n * nkv * d * max_seq_len * 4}


def available(device: str) -> tuple[int, str]:
    """(bytes available now, where) on `device`: cpu = MemAvailable within the cgroup limit."""
    if "," in device:  # --devices: the target's layers spread over them (program/placement.py balances
        # the layers by bytes, so the sum is the budget; one device's share is within a layer of an even split)
        parts = [available(d)[0] for d in device.split(",")]
        return sum(parts), f"free on {device} together"
    if device.startswith("cuda"):
        import torch

        free, _ = torch.cuda.mem_get_info(torch.device(device))
        return int(free), f"free on {device}"
    return host_available(), "available on this host"


def host_available() -> int:
    avail = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                avail = int(line.split()[1]) * 1024
    except OSError:
        pass
    try:  # cgroup v2: the container's own limit
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        used = int(Path("/sys/fs/cgroup/memory.current").read_text())
        if limit != "max":
            room = int(limit) - used
            avail = room if avail is None else min(avail, room)
    except (OSError, ValueError):
        pass
    return avail if avail is not None else 1 << 62  # unknown platform: no bound from here


def prefill_estimate(cfg, rows: int, slots: int, elem: int, where: str) -> int:
    """Bytes one prefill of `rows` tokens at `slots` KV slots holds beyond weights and caches:
    attention scores nh·rows·slots (one layer at a time), logits rows·V, hidden states
    (L+1)·rows·H (the taps keep every layer's), the MLP's 3·rows·I; elements of the dtype."""
    V, H = _positive(cfg, "vocab_size", where), _positive(cfg, "hidden_size", where)
    L, nh = _positive(cfg, "num_hidden_layers", where), _positive(cfg, "num_attention_heads", where)
    inter = _positive(cfg, "intermediate_size", where, 4 * H)
    return (nh * rows * slots + rows * V + (L + 1) * rows * H + 3 * rows * inter) * elem


def budget(device: str) -> tuple[int, str]:
    """(bytes, what they are): the --max-memory budget when stated, else what is available now."""
    stated = _BUDGET[0]
    return (stated, "the --max-memory budget") if stated is not None else available(device)


def check_fits(est: Estimate, device: str, what: str, fix: str) -> None:
    """Refuses `est` when it exceeds the budget (stated, else available) on its device or the host."""
    budget_ = _BUDGET[0]
    have, where = budget(device)
    if est.total > have:
        raise InputError(f"{what} needs about {gib(est.total)} GiB ({est.describe()} GiB) but "
                         f"{gib(have)} GiB is {where}", "an estimate within the memory available",
                         fix + ", or pass --max-memory GIB to state a larger budget")
    if device.startswith("cuda") and budget_ is None and est.host_peak > host_available():
        raise InputError(f"{what} loads {gib(est.host_peak)} GiB of target weights on the host first but "
                         f"{gib(host_available())} GiB is available on this host", "room to load the weights",
                         fix + ", or pass --max-memory GIB to state a larger budget")
