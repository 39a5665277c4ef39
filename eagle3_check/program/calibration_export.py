"""A calibration program: the target alone, lowered as a speculator export is, returning its logits.

A speculator program's `target_verify` returns greedy ids (DESIGN §1), so the logits its kernels
compute are never seen: how far ExecuTorch's kernels (XNNPACK's fp32 GEMMs, the portable ops) move
a target's logits from the HF reference's cannot be read off the program a user ships. The fp32
tie tolerance (judge/tolerance.py) covers those kernels, measured on this twin: one method,
`target_logits`, the speculator's own `TargetAdapter` (the same static KV cache, the same
attention mask, the same graph up to the argmax) traced with a dynamic length and lowered through
the same `lower_to_pte` (XNNPACK where it lowers, shared cache buffers, the tanh GELU kept), so
its logits come from the kernels the speculator's `prefill` and `target_verify` run (the same
delegate calls: 333 for SmolLM2, 255 for Gemma 3, as in their speculator exports).
`bench/measure_tolerance.py --kernels xnnpack` exports it once per target and dtype and runs the
measurement on it; `tests/pte/test_calibration_twin.py` checks the twin's logits and argmax
against the eager target on tiny-gemma4, and its cache record.

Not a contract program: it has no draft and no metadata besides `get_calibration_of` (the target
directory's name) and `get_export_backend`; nothing but the measurement loads it.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from torch import nn

from eagle3_check.errors import OptionError
from eagle3_check.program.metadata_check import BACKEND_KEY, XNNPACK_BACKENDS
from eagle3_check.program.target import TargetAdapter

METHOD = "target_logits"


class _TargetLogits(nn.Module):
    def __init__(self, target: TargetAdapter):
        super().__init__()
        self.target = target

    def forward(self, tokens, positions):  # [1, C] int64, [C] int64 -> logits [1, C, V]
        self.target._bind_cache()  # non-strict export swaps the buffers: point the cache layers at them
        logits, _ = self.target(tokens, positions)
        return logits


def export_target_logits(target: TargetAdapter, out_path: str | Path, max_len: int,
                         backend: str = "xnnpack") -> dict:
    """Exports `target` as one method `target_logits` (C dynamic in [1, max_len]) to `out_path`
    (atomically). Returns the lowering summary: delegate calls, portable ops, seconds per phase,
    tanh GELUs rewritten (program/gelu_tanh.py)."""
    from torch.export import Dim, export

    from eagle3_check.program.export import Phases, buffers_restored, require_executorch
    from eagle3_check.program.lowering import lower_to_pte
    from eagle3_check.program.metadata_check import require_backend

    require_executorch()
    require_backend(backend)
    if not 2 <= max_len <= target.max_seq_len:
        raise OptionError(f"max_len {max_len}", f"in [2, {target.max_seq_len}] (the target's cache)",
                          "pass a length the static cache holds")
    phases = Phases()
    c = Dim("C", min=1, max=max_len)
    with buffers_restored(target), torch.no_grad():
        phases.start("trace target_logits")
        program = export(_TargetLogits(target), (torch.zeros(1, 2, dtype=torch.long), torch.arange(2)),
                         dynamic_shapes=({1: c}, {0: c}), strict=False)
    name = Path(getattr(target.model.config, "name_or_path", "") or "target").name
    constants = {"get_calibration_of": name, BACKEND_KEY: backend}
    delegated, portable, lowering = lower_to_pte({METHOD: program}, constants, backend, Path(out_path), phases)
    return {"delegated": delegated, "portable_ops": portable, "phases": phases.seconds,
            "tanh_gelu_as_ops": lowering["tanh_gelu_as_ops"]}


class TargetLogitsPte:
    """The exported twin, called as a `TargetAdapter` is: `(tokens, positions) -> (logits, None)`."""

    def __init__(self, path: str | Path):
        from eagle3_check.program.et_runtime import load_program

        self.path = Path(path)
        self._method = load_program(self.path).load_method(METHOD)

    def __call__(self, tokens: torch.Tensor, positions: torch.Tensor):  # [1, C], [C] -> [1, C, V], None
        out = self._method.execute([tokens.cpu().to(torch.long), positions.cpu().to(torch.long)])
        return out[0].clone(), None


def weights_digest(model: nn.Module) -> str:
    """sha256 over a model's parameters and buffers (names, dtypes, shapes, bytes): what the twin (and a
    calibration, judge/calibration_measure.py) computes with."""
    h = hashlib.sha256()
    for name, p in sorted(model.state_dict().items()):
        t = p.detach().cpu().contiguous()
        h.update(f"{name}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def cached_twin(target: TargetAdapter, path: Path, backend: str, max_len: int | None = None) -> TargetLogitsPte:
    """The twin at `path` when its record (`<path>.json`) names these weights, cache and backend;
    else exported there first (minutes on a real model: the lowering), the record written after it."""
    from eagle3_check.atomic import write_text_atomic

    max_len = max_len or target.max_seq_len
    want = {"weights": weights_digest(target.model), "max_seq_len": target.max_seq_len, "max_len": max_len,
            "backend": backend, "passes": ["tanh_gelu_as_ops"] if backend in XNNPACK_BACKENDS else []}
    record = path.with_suffix(".json")
    try:
        have = json.loads(record.read_text())
    except (OSError, ValueError):
        have = None
    if not (path.is_file() and isinstance(have, dict) and all(have.get(k) == v for k, v in want.items())):
        path.parent.mkdir(parents=True, exist_ok=True)
        summary = export_target_logits(target, path, max_len, backend)
        write_text_atomic(record, json.dumps({**want, **summary}, indent=1) + "\n", "calibration twin record")
    return TargetLogitsPte(path)
