"""The AOTI backend: a speculator program compiled with AOTInductor (`aoti_export.compile_aoti`), loaded
from its `.pt2` package with `torch._inductor.package.load_package`, one model a method.

What a `.pte` answers through its constant methods and method meta comes from the package's sidecar
(`<name>.export.json`, digest-checked by `sidecar.read_sidecar`: a sidecar of another file is an
error, and a package without one is refused, since nothing else says its metadata): the metadata
values, the target_verify form (with a kv_window, V = anchor_pos + C is built on every call by
`contract.kv_window_for`, as for a `.pte`), the verify window bounds, the dtype, the device it was
compiled for, and the caches' names, shapes and dtypes.

The caches are this backend's: allocated once, zeroed, on the package's device, and passed to every
call (prefill and target_verify the target's, draft_decode the draft's), which writes them in place
(aoti_export's module docstring). The exported length ranges are checked before a call, as for a
`.pte` (`pte_backend.check_length`). Outputs are the compiled model's own fresh tensors.

A package compiled with external weights (program/aoti_weights.py) is given the eager program
built from its target and draft (`weights_source`): after its fingerprint is checked, each model's
constants are bound to that program's tensors, and `weights_source` stays readable so that the HF
reference shares them too (judge/shared.py). Without it such a package is refused.

Before any model loads here, one is loaded in a child process (program/aoti_probe.py): a package
whose native code crashes as it loads is a one-line error, not a dead harness.
"""

from __future__ import annotations

import contextlib
import io
from pathlib import Path
from typing import Any

import torch

from eagle3_check.errors import ContractViolation, InputError, first_line
from eagle3_check.program.aoti_export import AOTI_BACKEND, CACHE_GROUPS, KERNELS_FIX
from eagle3_check.program.aoti_probe import check_kernels, probe_package
from eagle3_check.program.aoti_weights import (
    EXTERNAL,
    bind,
    check_fingerprint,
    module_tensors,
    weights_mode,
)
from eagle3_check.program.contract import (
    VERIFY_BOUNDS_FROM_KEY,
    VERIFY_BOUNDS_KEY,
    VERIFY_FORM_KEY,
    VERIFY_KV_WINDOW,
    VERIFY_PLAIN,
)
from eagle3_check.program.export import BACKEND_KEY, METHODS
from eagle3_check.program.pte_backend import (
    CalledProgram,
    check_length,
    exported_ranges,
    ids_and_feature,
)
from eagle3_check.program.sidecar import read_sidecar, sidecar_path

EXPORT_FIX = "compile it with `eagle3-check export --aoti -o FILE.pt2` (on the GPU machine)"


def read_aoti_sidecar(path: Path) -> dict:
    """The package's sidecar, checked to describe this very file and an AOTI export; one line otherwise."""
    from eagle3_check.inputs import regular_file

    regular_file(path, "--aoti", "pass the path of a .pt2 package written by `eagle3-check export --aoti`")
    record = read_sidecar(path)
    if record is None:
        raise InputError(f"--aoti {path} has no sidecar {sidecar_path(path).name}",
                         "the package and the sidecar its export wrote beside it (metadata, caches)", EXPORT_FIX)
    if record.get("backend") != AOTI_BACKEND or not isinstance(record.get("caches"), dict):
        raise InputError(f"--aoti {path}: its sidecar describes a {record.get('backend')!r} export",
                         "the sidecar of an AOTI package (backend 'aoti', its caches)", EXPORT_FIX)
    return record


def package_device(record: dict, device_index: int | None = None) -> torch.device:
    """The device the package was compiled for (cuda:N with `device_index`); one line where this
    machine has none."""
    kind = record.get("device")
    if kind == "cuda":
        if not torch.cuda.is_available():
            raise InputError(f"an AOTI package compiled for CUDA ({record.get('path')}) on a machine without CUDA",
                             "a CUDA GPU (the package's kernels are CUDA kernels)", "judge it on the GPU machine")
        return torch.device("cuda", device_index or 0)
    if kind == "cpu":
        return torch.device("cpu")
    raise InputError(f"AOTI sidecar device {kind!r}", "cpu or cuda", EXPORT_FIX)


def _load(load_package, path: Path, model: str, index: int):
    """One model of the package on cuda:`index` (-1: CPU, or the current device); a torch whose
    load_package takes no device_index loads on the current device (only index -1 or 0 then)."""
    try:
        return load_package(str(path), model, device_index=index)
    except TypeError:
        if index not in (-1, 0):
            raise
        return load_package(str(path), model)


def aligned(t: torch.Tensor) -> torch.Tensor:
    """`t`, or a contiguous copy where its data does not start on 16 bytes: AOTInductor compiles for
    16-byte aligned inputs and otherwise copies inside the model with a warning on stderr (measured on
    the GPU: draft_decode's tokens and features, target_verify's positions, views into the runner's
    tensors). E.g. a float32 view starting at element 1 sits 4 bytes in: copied; at element 4: as is."""
    return t if t.data_ptr() % 16 == 0 else t.clone(memory_format=torch.contiguous_format)


class AotiBackend(CalledProgram):
    """An AOTI `.pt2` speculator program on its device (CPU or CUDA)."""

    def __init__(self, path: str | Path, device_index: int | None = None, weights_source=None):
        from torch._inductor.package import load_package

        self.path = Path(path)
        self.sidecar = read_aoti_sidecar(self.path)
        self.device = package_device(self.sidecar, device_index)
        self.dtype = str(self.sidecar.get("dtype", "float32"))
        self.verify_form = self.sidecar.get("target_verify", VERIFY_PLAIN)
        if self.verify_form not in (VERIFY_PLAIN, VERIFY_KV_WINDOW):
            raise InputError(f"AOTI sidecar target_verify {self.verify_form!r}", f"{VERIFY_PLAIN} or {VERIFY_KV_WINDOW}",
                             EXPORT_FIX)
        index = self.device.index if self.device.type == "cuda" else -1
        check_kernels(self.path, KERNELS_FIX)  # a kernel file missing: one line, not a failure per call
        probe_package(self.path, index)  # a crash loading native code happens in a child, not here
        self._models = {}
        for m in METHODS:
            log = io.StringIO()
            try:
                with contextlib.redirect_stderr(log):
                    self._models[m] = _load(load_package, self.path, m, index)
            except Exception as e:  # the loader raises RuntimeError naming the model or the archive
                raise InputError(f"method {m} of {self.path} cannot be loaded ({first_line(e)[:120]})",
                                 "a .pt2 package with the models prefill, target_verify and draft_decode",
                                 EXPORT_FIX) from None
        self.weights_source = None
        if weights_mode(self.sidecar) == EXTERNAL:
            self._bind(weights_source)
        self._caches = {g: [torch.zeros(shape, dtype=getattr(torch, dt), device=self.device) for _, shape, dt in entries]
                        for g, entries in self.sidecar["caches"].items()}
        self._metadata: dict[str, Any] = dict(self.sidecar.get("metadata", {}))
        self.backend = self._metadata.get(BACKEND_KEY, AOTI_BACKEND)
        if "get_min_verify_len" not in self._metadata and "get_max_verify_len" not in self._metadata:
            self._metadata[VERIFY_BOUNDS_KEY] = list(self.sidecar.get("verify_bounds", []))
            self._metadata[VERIFY_FORM_KEY] = self.verify_form
            self._metadata[VERIFY_BOUNDS_FROM_KEY] = "the AOTI package's sidecar"
        self._ranges = exported_ranges(self._metadata)

    def _bind(self, source) -> None:
        """External weights: every model's constants bound to `source`'s tensors (module doc)."""
        if source is None:
            raise InputError(f"{self.path}: a package compiled without its weights, given no eager program to "
                             "take them from", "the target and draft it was compiled from",
                             "judge it with `--aoti FILE` (the command builds them), or re-export with embedded weights")
        module = source.module
        caches = {n for entries in self.sidecar["caches"].values() for n, _, _ in entries}
        check_fingerprint(module, caches, self.sidecar["weights"].get("fingerprint", []), self.path)
        tensors = module_tensors(module)
        for m, model in self._models.items():
            bind(model, tensors, m, self.path)
        self.weights_source = source

    @property
    def info(self) -> dict:
        return {"backend": AOTI_BACKEND, "aoti": str(self.path), "kernels": f"aoti-{self.device.type}",
                "dtype": self.dtype, "device": str(self.device), "target_verify": self.verify_form,
                "weights": weights_mode(self.sidecar)}

    def caches(self, group: str) -> list[torch.Tensor]:  # each [1, kv, S, D]
        """The cache tensors every call of `group`'s methods writes ("target" or "draft")."""
        return self._caches[group]

    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    def _call(self, method: str, args: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        check_length(method, args[0].shape[-1], self._ranges)
        inputs = tuple(aligned(a.to(self.device)) for a in args)
        try:
            out = self._models[method](inputs, tuple(self._caches[CACHE_GROUPS[method]]))
        except RuntimeError as e:
            raise ContractViolation(f"{method} failed in the AOTI model ({first_line(e)[:160]})",
                                    "a successful call", f"check the inputs of {method} and the package") from None
        return ids_and_feature(method, out, "re-compile the package's")

