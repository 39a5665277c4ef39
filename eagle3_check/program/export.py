"""Export an `Eagle3Speculator` to an ExecuTorch `.pte` (DESIGN §1 as a program file).

Three methods share the speculator's buffers: `prefill` and `target_verify` write the one
target KV cache, `draft_decode` the draft cache. Each method is exported from its own thin
wrapper that holds the *same* module as `spec`, so buffer names (`spec.target.k_cache_0`,
`spec.draft...k_cache`) are identical across methods and `share_mutable_buffers=True`
makes the runtime keep one allocation per cache for the whole program.

Metadata becomes constant methods; the verify window range is `get_min_verify_len` /
`get_max_verify_len`. `verify_kv_window=True` writes the newer target_verify form of the seed
(#20344 on, DESIGN §1): a third input kv_window int32 [V] with V dynamic in [2, max_seq_len], C
dynamic, and no verify range metadata (the window bounds are the method's own input bounds). The backend (XNNPACK where it lowers, portable kernels elsewhere)
is recorded in the constant method `get_export_backend` and, with what was delegated, in
a sidecar `<name>.export.json` beside the `.pte`.

Export needs the `pte` extra (executorch); importing this module does not.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch
from torch import nn

from eagle3_check.atomic import check_writable
from eagle3_check.errors import InputError, OptionError
from eagle3_check.fixtures.registry import ProgramSpec
from eagle3_check.program.contract import (
    OPTIONAL_KEYS,
    REQUIRED_KEYS,
    VERIFY_KV_WINDOW,
    VERIFY_PLAIN,
)
from eagle3_check.program.lowering import CACHE_BUFFER_PATTERNS, lower_to_pte
from eagle3_check.program.metadata_check import BACKEND_KEY, require_backend
from eagle3_check.program.quantize import QUANT_KEY, read_all_zero_points
from eagle3_check.program.sidecar import (
    ExportRecord,
    data_path_for,
    write_sidecar,
)
from eagle3_check.quiet import third_party_quiet

METHODS = ("prefill", "target_verify", "draft_decode")
PTE_EXTRA_FIX = "install the pte extra: pip install -e .[pte] (executorch 1.5.1 with torch 2.13.0)"


def export_versions() -> dict[str, str | None]:
    """The versions an export sidecar records: torch's and the installed executorch distribution's
    (executorch 1.5.1 has no `__version__`: its package metadata says it; None only when it is absent)."""
    from importlib import metadata

    try:
        executorch = metadata.version("executorch")
    except metadata.PackageNotFoundError:
        executorch = None
    return {"torch": torch.__version__, "executorch": executorch}


def require_executorch() -> None:
    """Raises InputError naming the `pte` extra when executorch cannot be imported."""
    try:
        with third_party_quiet():  # executorch's ExperimentalWarning at import
            import executorch.exir  # noqa: F401
            import executorch.runtime  # noqa: F401
    except ImportError as e:
        raise InputError(f"executorch is not importable ({e})", "the executorch package", PTE_EXTRA_FIX) from None


# An export's phases, in order: torch.export of each method, lowering to the edge dialect (and
# XNNPACK), to_executorch (memory planning, shared buffers), serializing the file.
PHASES = ("trace prefill", "trace target_verify", "trace draft_decode", "lower", "to_executorch", "serialize")


class Phases:
    """Times each phase and announces it as it starts (`on_phase(name)`), so a minutes-long
    export is never silent; `seconds` holds each finished phase's time, in order."""

    def __init__(self, on_phase: Callable[[str], None] | None = None):
        self.on_phase, self.seconds = on_phase, {}
        self._name: str | None = None
        self._t0 = 0.0

    def start(self, name: str) -> None:
        self.stop()
        self._name, self._t0 = name, time.perf_counter()
        if self.on_phase:
            self.on_phase(name)

    def stop(self) -> None:
        if self._name is not None:
            self.seconds[self._name] = round(time.perf_counter() - self._t0, 2)
            self._name = None


class _Method(nn.Module):
    """One exported method of the speculator; every wrapper holds the same module as `spec`."""

    def __init__(self, spec: nn.Module, name: str):
        super().__init__()
        self.spec = spec
        self.method = name

    def _bind(self) -> None:
        # Non-strict export swaps module buffers for fake tensors: point the HF cache
        # layers at the (swapped) buffers, or they get lifted as constants.
        bind = getattr(getattr(self.spec, "target", None), "_bind_cache", None)
        if bind is not None:
            bind()


class _Prefill(_Method):
    def forward(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        self._bind()
        return self.spec.prefill(tokens, positions)


class _Verify(_Method):
    def forward(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        self._bind()
        return self.spec.target_verify(tokens, positions)


class _VerifyKV(_Method):
    def forward(self, tokens, positions, kv_window):  # [1, C], [C], [V] int32 -> [1, C], [1, C, H]
        self._bind()
        return self.spec.target_verify_kv(tokens, positions, kv_window)


class _Draft(_Method):
    def forward(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        self._bind()
        return self.spec.draft_decode(tokens, feature, positions)


def _dim(name: str, lo: int, hi: int):
    """(example size, Dim or None): static when the range is a single value."""
    from torch.export import Dim

    example = min(hi, max(lo, 2))
    if lo == hi or hi < 2:
        return example, None
    return example, Dim(name, min=lo, max=hi)


@contextmanager
def buffers_restored(module: nn.Module):
    """Tracing runs the methods (the caches get written) and binds the HF cache layers to fake
    buffers: afterwards every buffer holds its value from before, and the target's cache layers
    point at the real buffers again, or the eager module is unusable after an export. `module`: a
    speculator (its `target`) or a `TargetAdapter` itself."""
    snapshot = {k: v.detach().clone() for k, v in module.named_buffers()}
    try:
        yield
    finally:
        with torch.no_grad():
            for k, v in module.named_buffers():
                v.copy_(snapshot[k])
        rebind = getattr(module, "_bind_cache", None) or getattr(getattr(module, "target", None), "_bind_cache", None)
        if rebind is not None:
            rebind()


def method_plans(module: nn.Module, spec: ProgramSpec, hidden: int, verify_kv_window: bool = False,
                 device: torch.device | str = "cpu") -> dict:
    """{method: (wrapper class, example inputs on `device`, dynamic shapes)} of the three methods:
    prefill T in [min_prefill, max_prefill], target_verify C in the verify range, draft_decode T in
    [1, max_prefill]; with `verify_kv_window`, target_verify takes kv_window [V] too (V dynamic in
    [2, max_seq_len]). What `export_methods` traces for a `.pte` and `aoti_export` for AOTInductor."""
    from torch.export import Dim

    t, tdim = _dim("T", spec.min_prefill, spec.max_prefill)
    c, cdim = _dim("C", spec.min_verify_len, spec.max_verify_len)
    d, ddim = _dim("TD", 1, spec.max_prefill)
    long = dict(dtype=torch.long, device=device)
    feat_dtype = next(module.parameters()).dtype
    plans = {
        "prefill": (_Prefill, (torch.zeros(1, t, **long), torch.arange(t, device=device)), ({1: tdim}, {0: tdim})),
        "target_verify": (_Verify, (torch.zeros(1, c, **long), torch.arange(c, device=device)), ({1: cdim}, {0: cdim})),
        "draft_decode": (
            _Draft,
            (torch.zeros(1, d, **long), torch.zeros(1, d, hidden, dtype=feat_dtype, device=device),
             torch.arange(d, device=device)),
            ({1: ddim}, {1: ddim}, {0: ddim}),
        ),
    }
    if verify_kv_window:
        # Example V = 2 * C: any V in range traces the same graph (kv_window is not read).
        v = Dim("V", min=2, max=spec.max_seq_len)
        plans["target_verify"] = (_VerifyKV, (torch.zeros(1, c, **long), torch.arange(c, device=device),
                                              torch.zeros(2 * c, dtype=torch.int32, device=device)),
                                  ({1: cdim}, {0: cdim}, {0: v}))
    return plans


def export_methods(module: nn.Module, spec: ProgramSpec, hidden: int, phases: Phases | None = None,
                   verify_kv_window: bool = False, only: tuple[str, ...] | None = None) -> dict:
    """torch.export of the three methods (or of those named in `only`) with dynamic lengths
    (`method_plans`); buffers restored afterwards."""
    phases = phases or Phases()
    from torch.export import export

    read_all_zero_points(module)  # the real buffers, before the trace swaps them for fake ones
    plans = method_plans(module, spec, hidden, verify_kv_window)
    if only is not None and set(only) - set(plans):
        raise ValueError(f"export_methods(only={only!r}): expected method names among {', '.join(plans)}")
    programs = {}
    with buffers_restored(module), torch.no_grad(), third_party_quiet():  # torch.export's own pytree FutureWarning
        for name, (cls, args, shapes) in plans.items():
            if only is not None and name not in only:
                continue
            phases.start(f"trace {name}")
            programs[name] = export(cls(module, name), args, dynamic_shapes=shapes, strict=False)
    return {name: zeroed_caches(ep) for name, ep in programs.items()}


def zeroed_caches(ep):
    """`ep` with its KV caches zero, as the program starts them (CACHE_BUFFER_PATTERNS): the traced
    program's state holds the module's own buffers, so a module that has run requests (a test session's,
    a job's) would otherwise lower what its last request left in them: other bytes for the same program."""
    for state in (ep.state_dict, ep.constants):  # persistent buffers, and the others (the caches are these)
        for name, t in list(state.items()):
            if any(p in name for p in CACHE_BUFFER_PATTERNS) and isinstance(t, torch.Tensor):
                state[name] = torch.zeros_like(t)
    return ep


def check_omit(omit: list[str] | tuple[str, ...]) -> list[str]:
    known = REQUIRED_KEYS + OPTIONAL_KEYS + (BACKEND_KEY, QUANT_KEY)
    for key in omit:
        if key not in known:
            raise OptionError(f"--omit-metadata {key}", f"one of {', '.join(known)}",
                              "pass a metadata key name such as get_chain_len")
    return list(omit)


def constant_methods(metadata: dict[str, Any], backend: str, omit: list[str]) -> dict[str, Any]:
    """Metadata as constant methods: ints and lists of ints; empty lists and None dropped, and so
    is what is not a constant method (a backend's derived keys such as the verify input bounds)."""
    out: dict[str, Any] = {}
    for key, value in {**metadata, BACKEND_KEY: backend}.items():
        if not key.startswith("get_"):
            continue
        if key in omit or value is None or (isinstance(value, (list, tuple)) and not value):
            continue
        out[key] = list(value) if isinstance(value, tuple) else value
    return out


def export_speculator(
    module: nn.Module,
    spec: ProgramSpec,
    metadata: dict[str, Any],
    out_path: str | Path,
    backend: str = "xnnpack",
    omit_metadata: list[str] | tuple[str, ...] = (),
    source: dict | None = None,
    on_phase: Callable[[str], None] | None = None,
    quantized_layers: list[str] | None = None,
    verify_kv_window: bool = False,
    external_data: bool = False,
    stock_lowering: bool = False,
) -> ExportRecord:
    """Exports `module` (prefill / target_verify / draft_decode) to `out_path`; writes the sidecar.

    `metadata` is the program's raw metadata (e.g. `EagerBackend.metadata()`); keys in
    `omit_metadata` are left out, to build negative fixtures. `on_phase(name)` is called as each
    of PHASES starts; the sidecar records each phase's seconds. `verify_kv_window` writes the newer
    target_verify form, without verify range metadata; `external_data` writes the weights to a
    `.ptd` beside the `.pte` (`data_path_for`), loaded with `--data-path`; `stock_lowering` runs
    ExecuTorch's own per-partition legalize instead of the exact fast one (program/fast_lowering.py).
    """
    require_executorch()
    require_backend(backend)
    omit = check_omit(omit_metadata)
    out = Path(out_path)
    if out.suffix != ".pte":
        raise OptionError(f"output path {out}", "a file name ending in .pte", "pass -o NAME.pte")
    check_writable(out, ".pte")  # before the minute of export: a missing directory is an error now
    hidden = feature_width(module)
    t0 = time.perf_counter()
    phases = Phases(on_phase)
    programs = export_methods(module, spec, hidden, phases, verify_kv_window)
    if verify_kv_window:
        omit = [*omit, *(k for k in ("get_min_verify_len", "get_max_verify_len") if k not in omit)]
    constants = constant_methods(metadata, backend, omit)
    delegated, portable, lowering = lower_to_pte(programs, constants, backend, out, phases, external_data,
                                                 stock_lowering)
    record = ExportRecord(
        path=str(out), backend=backend, spec=asdict(spec), metadata=constants, omitted=omit,
        delegated=delegated, portable_ops=portable, seconds=round(time.perf_counter() - t0, 2),
        source=source or {},
        versions=export_versions(),
        phases=phases.seconds,
        quantization={"tag": metadata[QUANT_KEY], "layers": quantized_layers or []} if QUANT_KEY in metadata else None,
        dtype=str(next(module.parameters()).dtype).removeprefix("torch."),
        target_verify=VERIFY_KV_WINDOW if verify_kv_window else VERIFY_PLAIN,
        data_path=str(data_path_for(out)) if external_data else None,
        lowering=lowering,
    )
    write_sidecar(out, record.to_json())  # after the .pte: it records the .pte's digest
    return record


def feature_width(module: nn.Module) -> int:
    """H, the draft hidden size (width of the feature the draft reads)."""
    cfg = getattr(getattr(module, "draft", None), "cfg", None)
    if cfg is None or not hasattr(cfg, "hidden_size"):
        raise InputError(f"module {type(module).__name__} has no draft.cfg.hidden_size",
                         "an Eagle3Speculator", "export an eagle3_check.program.speculator.Eagle3Speculator")
    return int(cfg.hidden_size)


def export_eager(program, out_path: str | Path, backend: str = "xnnpack",
                 omit_metadata=(), source: dict | None = None, external_data: bool = False,
                 on_phase: Callable[[str], None] | None = None, stock_lowering: bool = False) -> ExportRecord:
    """Exports an `EagerBackend` (CPU, as built from a fixture or --target/--draft) in its
    target_verify form (`EagerBackend.use_verify_form`) and dtype."""
    if getattr(program, "device", torch.device("cpu")).type != "cpu":
        raise OptionError(f"device {program.device}", "cpu", "export from a CPU eager program (--device cpu)")
    return export_speculator(program.module, program.spec, program.metadata(), out_path, backend,
                             omit_metadata, source, on_phase, getattr(program, "quantized_layers", None),
                             getattr(program, "verify_form", None) == VERIFY_KV_WINDOW, external_data,
                             stock_lowering)
