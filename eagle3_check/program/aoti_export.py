"""An eager speculator compiled with AOTInductor: the three methods of DESIGN §1 as one `.pt2` package.

AOTInductor compiles a `torch.export` program ahead of time into a shared library of its own
kernels (C++ on CPU, Triton and cuBLAS/ATen fallbacks on CUDA): the compiler ExecuTorch's CUDA
backend runs for each method of a CUDA `.pte` (docs/pte.md), without the ExecuTorch container. Each
method is traced as `export.py` traces it for a `.pte` (`export.method_plans`: the same wrappers,
dynamic lengths and target_verify form), compiled with `torch._inductor.aot_compile` and packed as
one named model of the package (`package_aoti`); `aoti_backend.AotiBackend` loads each by name.

The shared KV caches. A `.pte`'s methods share their mutable buffers inside one program
(`share_mutable_buffers`). Three AOTI models share nothing: a buffer a graph mutates is compiled as a
constant of that model, updated in place inside it, so prefill's target cache would not be
target_verify's. So the caches are not buffers of the compiled graphs: each method takes the caches
it writes as inputs (`CachesAsInputs`: `torch.func.functional_call` swaps them in for the module's
buffers while it is traced), torch.export records a user-input mutation, and the compiled code
writes into the input's own storage (AOTInductor's handling of a mutated input: no copy out, the
caller's tensor changes). The backend allocates one set of caches and passes the same tensors to
every call: prefill and target_verify get the target's caches, draft_decode the draft's; sharing is
the backend's, visible, and tested (a prefill's cache is what target_verify reads).

The metadata methods' values, the caches' names, shapes and dtypes, the device and dtype and what
the package was made from are its sidecar (`<name>.export.json`, `sidecar.write_sidecar`: linked
to the very `.pt2` by size and sha256, as a `.pte`'s). Each model embeds the weights its method
reads: prefill and target_verify each hold the target's; or none (`weights=EXTERNAL`,
program/aoti_weights.py: bound at load to one eager program's tensors, for targets whose package would
not fit twice on the disk or the GPU).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path

import torch
from torch import nn

from eagle3_check.atomic import atomic_path, check_writable
from eagle3_check.errors import OptionError
from eagle3_check.program.aoti_probe import check_kernels
from eagle3_check.program.aoti_weights import (
    EMBEDDED,
    EXTERNAL,
    check_bindable,
    compile_options,
    fingerprint,
    module_tensors,
)
from eagle3_check.program.contract import VERIFY_KV_WINDOW, VERIFY_PLAIN
from eagle3_check.program.export import (
    METHODS,
    Phases,
    buffers_restored,
    constant_methods,
    feature_width,
    method_plans,
)
from eagle3_check.program.inductor_lock import compile_lock
from eagle3_check.program.sidecar import write_sidecar
from eagle3_check.quiet import third_party_quiet

KERNELS_FIX = ("re-run the export with an inductor cache of its own: TORCHINDUCTOR_CACHE_DIR=$(mktemp -d) "
               "(docs/cuda.md, AOTI programs)")
AOTI_BACKEND = "aoti"  # the sidecar's `backend` and the constant get_export_backend of an AOTI package
CACHE_GROUPS = {"prefill": "target", "target_verify": "target", "draft_decode": "draft"}
# AOTI phases, in order: trace and compile each method, then the package written
AOTI_PHASES = tuple(f"{step} {m}" for m in METHODS for step in ("trace", "compile")) + ("package",)


def cache_names(module: nn.Module) -> dict[str, list[str]]:
    """The module's KV-cache buffers by group: {"target": ["target.k_cache_0", "target.v_cache_0", ...],
    "draft": ["draft.layers.0.attn.k_cache", ...]}, in `named_buffers` order (the inputs' order)."""
    names = [n for n, _ in module.named_buffers() if n.rsplit(".", 1)[-1].startswith(("k_cache", "v_cache"))]
    return {group: [n for n in names if n.startswith(group + ".")] for group in ("target", "draft")}


class CachesAsInputs(nn.Module):
    """A method wrapper (`export._Prefill`, ...) whose caches are inputs: forward(inputs, caches) runs
    the method with `caches` in place of the buffers `names` (relative to `method`), so writing the
    cache writes the caller's tensors."""

    def __init__(self, method: nn.Module, names: list[str]):
        super().__init__()
        self.method = method
        self.names = list(names)

    def forward(self, inputs: tuple, caches: tuple):  # (method inputs), (caches [1, kv, S, D]) -> ([1, T], [1, T, H])
        from torch.func import functional_call

        return functional_call(self.method, dict(zip(self.names, caches)), tuple(inputs), strict=False)


def _aot_compile(ep, name: str, options: dict | None = None) -> list:
    """AOTInductor's files of one exported method (its shared library, kernels and weights); `options`:
    more inductor config (e.g. {"aot_inductor.force_mmap_weights": True} for weights past 2 GB)."""
    try:
        gm = ep.module(check_guards=False)  # torch 2.13: no guard function in the compiled graph
    except TypeError:  # torch 2.11's ExportedProgram.module() takes no check_guards
        gm = ep.module()
    args, kwargs = ep.example_inputs
    options = {**(options or {}), "aot_inductor.package": True,
               "aot_inductor.model_name_for_generated_files": generated_name(name, options or {})}
    return torch._inductor.aot_compile(gm, args, kwargs, options=options)


def generated_name(method: str, options: dict) -> str:
    """The name of a method's generated files: `method`, or `method_external` for a weightless compile.
    Measured (torch 2.13, CPU): inductor's code cache does not key on `package_constants_in_so`, so a
    weightless compile of a graph followed by an embedded one of the same graph, with the same file
    names, reuses the weightless library and the embedded package crashes at its first call
    (segmentation fault; tests/aoti/test_aoti_weights_cpu.py). Other names, other cache entries.
    The package's model is still named `method` (package_aoti's key)."""
    return f"{method}_external" if options.get("aot_inductor.package_constants_in_so") is False else method


def compile_aoti(program, out_path: str | Path, source: dict | None = None,
                 on_phase: Callable[[str], None] | None = None, options: dict | None = None,
                 weights: str = EMBEDDED) -> dict:
    """Compiles an `EagerBackend` (on its device, in its dtype and target_verify form) with
    AOTInductor into the package `out_path` (`.pt2`) and writes its sidecar; returns the sidecar's
    record. `on_phase(name)` is called as each of AOTI_PHASES starts; `options`: inductor config
    added to every method's compile (recorded in the sidecar); `weights`: embedded in each model, or
    external (program/aoti_weights.py: the kernels only, bound to an eager program's tensors at load)."""
    out = Path(out_path)
    if out.suffix != ".pt2":
        raise OptionError(f"output path {out}", "a file name ending in .pt2", "pass -o NAME.pt2")
    check_writable(out, ".pt2")
    mode_options = compile_options(weights)
    if weights == EXTERNAL and getattr(program, "quantized_layers", None):
        raise OptionError("--aoti-weights external with a quantized program", "float weights the eager program "
                          "rebuilds from the target and draft as they are", "drop --aoti-weights (embed them)")
    module, spec = program.module, program.spec
    device = next(module.parameters()).device
    kv_window = getattr(program, "verify_form", VERIFY_PLAIN) == VERIFY_KV_WINDOW
    plans = method_plans(module, spec, feature_width(module), kv_window, device)
    groups = cache_names(module)
    tensors = module_tensors(module)  # what a weightless package's constants must be (check_bindable)
    buffers = dict(module.named_buffers())
    phases = Phases(on_phase)
    t0 = time.perf_counter()
    files = {}
    from torch.export import export

    # one compile at a time per inductor cache: two at once packed a library without its kernels (inductor_lock)
    with tempfile.TemporaryDirectory(prefix="aoti-") as tmp, compile_lock():
        with buffers_restored(module), torch.no_grad(), third_party_quiet():
            for name, (cls, args, shapes) in plans.items():
                names = groups[CACHE_GROUPS[name]]
                caches = tuple(torch.zeros_like(buffers[n]) for n in names)  # examples: not the module's own
                phases.start(f"trace {name}")
                ep = export(CachesAsInputs(cls(module, name), ["spec." + n for n in names]), (args, caches),
                            dynamic_shapes=(shapes, (None,) * len(caches)), strict=False)
                if weights == EXTERNAL:
                    check_bindable(ep, tensors, name)
                phases.start(f"compile {name}")
                files[name] = _aot_compile(ep, name, {**(options or {}), **mode_options})
        phases.start("package")
        from torch._inductor.package import package_aoti

        built = Path(tmp) / out.name
        package_aoti(str(built), files)
        check_kernels(built, KERNELS_FIX)  # a model missing a kernel file fails at its first call: refuse it here
        with atomic_path(out) as dest:
            shutil.copy(built, dest)
    phases.stop()
    metadata = constant_methods(program.metadata(), AOTI_BACKEND, [])
    if kv_window:  # as a .pte of that form: no verify range metadata, the window bounds are the method's
        for key in ("get_min_verify_len", "get_max_verify_len"):
            metadata.pop(key, None)
    record = {
        "path": str(out), "backend": AOTI_BACKEND, "device": device.type, "dtype": program.dtype,
        "spec": asdict(spec), "metadata": metadata,
        "target_verify": VERIFY_KV_WINDOW if kv_window else VERIFY_PLAIN,
        "verify_bounds": [spec.min_verify_len, spec.max_verify_len],
        "caches": {g: [[n, list(buffers[n].shape), str(buffers[n].dtype).removeprefix("torch.")] for n in names]
                   for g, names in groups.items()},
        "inductor_options": {**(options or {}), **mode_options}, "source": source or {},
        "weights": {"mode": weights}, "seconds": round(time.perf_counter() - t0, 2), "phases": phases.seconds,
        "versions": {"torch": torch.__version__, "cuda": torch.version.cuda if device.type == "cuda" else None},
    }
    if weights == EXTERNAL:  # what binds at load must be these tensors (program/aoti_weights.py)
        record["weights"]["fingerprint"] = fingerprint(module, {n for names in groups.values() for n in names})
    write_sidecar(out, record)  # after the package: it records the package's digest
    return record
