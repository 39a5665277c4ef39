"""The `.pte` backend: an ExecuTorch speculator program loaded through the ExecuTorch runtime
(`et_runtime`: executorch.runtime's calls, without its import of the exporter).

Metadata comes from the program's constant methods (`get_*`); the three compute methods
are loaded once, up front. That order matters: with `share_mutable_buffers=True`,
loading a compute method after another one has executed re-initialises the shared
caches (the prefill's KV cache would be lost), see docs/pte.md.

ExecuTorch enforces the upper bound of a dynamic length but not the lower one, so the
exported ranges (prefill chunk, verify window, draft length) are checked here, before a
call, with an error that names the range; except a prefill below the declared min, which goes
to the runtime as the seed's runner sends it (the chunk-tail rule of DESIGN §2.4 plans such
chunks; the program decides, `rules.prefill_chunk`).

What the program's own method meta says is read once, at load:
- the target_verify form (DESIGN §1): 2 inputs (tokens, positions), or 3 with an int32
  `kv_window` [V] (V = anchor_pos + C, built by `contract.kv_window_for` on every call);
- without verify range metadata, the verify window bounds from target_verify's inputs: the
  kv_window form has a dynamic C up to the compiled maximum (K in [1, max C - 1]); the 2-input
  form of the runner PR has a static C (K = C - 1 only);
- the program's dtype: the dtype of prefill's feature output (float32 or bfloat16).
A program whose weights live in an external data file (`.ptd`) is loaded with `data_path`.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import torch

from eagle3_check.errors import ContractViolation, InputError, OptionError, first_line
from eagle3_check.preflight import PTE_EXPECTED, PTE_FIX, check_ptd_file, check_pte_file
from eagle3_check.program.contract import (
    VERIFY_BOUNDS_FROM_KEY,
    VERIFY_BOUNDS_KEY,
    VERIFY_FORM_KEY,
    VERIFY_KV_WINDOW,
    VERIFY_PLAIN,
    SpeculatorProgram,
    kv_window_for,
)
from eagle3_check.program.export import BACKEND_KEY, METHODS, PTE_EXTRA_FIX
from eagle3_check.program.sidecar import read_sidecar

LIST_KEYS = ("get_eos_ids",)
# ExecuTorch ScalarType codes (executorch/runtime/core/portable_type/scalar_type.h) of the dtypes
# a program's feature may have; any other dtype is an error naming the code.
SCALAR_TYPES = {6: "float32", 15: "bfloat16", 5: "float16"}
INT32 = 3


def _runtime():
    """The runtime's loader (`et_runtime`: executorch.runtime's calls without its import of the exporter)."""
    from eagle3_check.program import et_runtime

    try:
        et_runtime.extension()
    except ImportError as e:
        raise InputError(f"executorch is not importable ({e})", "the executorch package to load .pte files",
                         PTE_EXTRA_FIX) from None
    return et_runtime


def load_program(path: str | Path, data_path: str | Path | None = None):
    """Loads a `.pte` (and its `.ptd` data file when given) with clear errors for a missing,
    empty, truncated or foreign file."""
    from eagle3_check.inputs import regular_file

    p = regular_file(path, "--pte", "pass the path of an exported .pte")  # a FIFO or a device is named as such
    size = p.stat().st_size
    if data_path is not None:
        check_ptd_file(data_path)
    rt = _runtime()
    check_pte_file(p)  # executorch 1.5.1 aborts the process when it logs a non-UTF-8 identifier
    expected, fix = PTE_EXPECTED, PTE_FIX
    log = io.StringIO()  # the runtime logs why through sys.stderr: keep it for the message
    try:
        with contextlib.redirect_stderr(log):
            return rt.load_program(p, data_path=str(data_path) if data_path is not None else None)
    except Exception as e:  # the runtime raises RuntimeError with an error code
        why = _why(log, e)
        if data_path is not None:
            raise InputError(f"--pte {p} with --data-path {data_path} cannot be loaded: {why[:160]}",
                             "a .pte and the .ptd written by the same export",
                             "pass the .ptd exported with this .pte") from None
        raise InputError(f"--pte {p} ({size} bytes) cannot be loaded, truncated or corrupt: {why[:160]}",
                         expected, fix) from None


# the runtime's log line when a method's delegate has no backend in this build (executorch's method.cpp)
_UNREGISTERED = re.compile(r"Backend (\S+?)\.? is not registered")
# what each backend a speculator program may be lowered for needs at run time (docs/pte.md)
BACKEND_RUNTIME = {
    "CudaBackend": "an executorch runtime built with the CUDA backend for this machine's torch and CUDA (the PyPI "
                   "wheel registers XnnpackBackend, QnnBackend and OpenvinoBackend only), on a machine with the GPU "
                   "the program was compiled for, and the program's .ptd (--data-path)",
}


def unregistered_backend(log: str) -> str | None:
    """The delegate id the runtime said it has no backend for, else None."""
    m = _UNREGISTERED.search(log)
    return m[1] if m else None


def registered_backends() -> list[str]:
    """The backends this executorch runtime registers (its C extension's own list)."""
    return sorted(_runtime().extension()._get_registered_backend_names())


def missing_backend_error(method: str, path: Path, backend: str) -> InputError:
    """One line: the method's delegate, what this runtime registers and what would run it."""
    need = BACKEND_RUNTIME.get(backend, f"an executorch runtime built with {backend}")
    return InputError(
        f"method {method} of {path} is lowered for {backend}, which this executorch runtime does not register "
        f"(it registers {', '.join(registered_backends())})",
        f"a program lowered for a registered backend, or {need}",
        "export the program for XNNPACK (`eagle3-check export`), or judge it where such a runtime is installed "
        "(docs/pte.md, \"CUDA-backend programs\")")


def _why(log: io.StringIO, e: Exception) -> str:
    return re.sub(r"\[[^\]]*\]\s*", "", log.getvalue()).strip().replace("\n", " ") or first_line(e)


def _plain(key: str, value: list) -> Any:
    """Constant methods return a list of outputs: [64] -> 64, [1, 50, 106] stays a list."""
    if key in LIST_KEYS or len(value) != 1:
        return list(value)
    return value[0]


def exported_ranges(md: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Length ranges per method from a program's raw metadata (a runtime that knows only the maxima:
    the lower bounds are checked here): prefill [min, max prefill], target_verify the verify range
    (or the method's own bounds, VERIFY_BOUNDS_KEY), draft_decode [1, max prefill]."""

    def get(key: str, default: int) -> int:
        v = md.get(key, default)
        return v if isinstance(v, int) else default

    max_p = get("get_max_prefill_chunk", 1 << 30)
    k = get("get_chain_len", 0)
    verify = (get("get_min_verify_len", k + 1 if k else 1), get("get_max_verify_len", k + 1 if k else 1 << 30))
    if VERIFY_BOUNDS_KEY in md:  # no verify range metadata: the method's own bounds
        verify = tuple(md[VERIFY_BOUNDS_KEY])
    return {"prefill": (get("get_min_prefill_chunk", 1), max_p), "target_verify": verify, "draft_decode": (1, max_p)}


def check_length(method: str, n: int, ranges: dict[str, tuple[int, int]]) -> None:
    """Refuses a call of `method` with length `n` outside its exported range, except a prefill below
    the declared min: a chunk-tail chunk, the program's to take or refuse (DESIGN §2.4)."""
    lo, hi = ranges[method]
    if method == "prefill" and n < lo:
        return
    if not lo <= n <= hi:
        raise OptionError(
            f"{method} called with length {n}", f"a length in the exported range [{lo}, {hi}]",
            "re-export the program with a wider range, or pick K / the prompt inside it",
        )


def ids_and_feature(method: str, out, redo: str) -> tuple[torch.Tensor, torch.Tensor]:  # -> [1, T], [1, T, H]
    """A compiled method's outputs as the contract's pair (ids, feature); any other count is a
    contract violation whose fix is `redo` (re-export the program's method, re-compile the package's)."""
    if len(out) != 2:
        raise ContractViolation(f"contract violated: {method} returned {len(out)} outputs",
                                "two outputs (ids, feature)", f"{redo} {method}")
    return out[0], out[1]


class CalledProgram(SpeculatorProgram):
    """The three contract methods over one `_call(method, inputs)` of a compiled program (a `.pte`'s
    ExecuTorch method, an AOTI model): the inputs as the program takes them, target_verify's kv_window
    ([V] int32, V = anchor_pos + C, `kv_window_for`) added in that form (`verify_form`)."""

    verify_form = VERIFY_PLAIN

    def _call(self, method: str, args: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        raise NotImplementedError

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        return self._call("prefill", [tokens.long(), positions.long()])

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        args = [tokens.long(), positions.long()]
        if self.verify_form == VERIFY_KV_WINDOW:
            args.append(kv_window_for(positions))  # [V] int32, V = anchor_pos + C
        return self._call("target_verify", args)

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        return self._call("draft_decode", [tokens.long(), feature, positions.long()])


class PteBackend(CalledProgram):
    """A `.pte` speculator program on CPU (XNNPACK and portable kernels)."""

    def __init__(self, path: str | Path, data_path: str | Path | None = None):
        self.path = Path(path)
        self.data_path = Path(data_path) if data_path is not None else None
        self._program = load_program(self.path, self.data_path)
        names = self._program.method_names
        missing = [m for m in METHODS if m not in names]
        if missing:
            raise InputError(
                f"--pte {self.path} has no method {', '.join(repr(m) for m in missing)} "
                f"(methods: {', '.join(sorted(names))})",
                f"the three methods {', '.join(METHODS)}", "re-export with `eagle3-check export`",
            )
        self._metadata: dict[str, Any] = {}
        for name in sorted(n for n in names if n.startswith("get_")):
            try:
                self._metadata[name] = _plain(name, self._program.load_method(name).execute([]))
            except Exception as e:
                raise InputError(f"constant method {name} of {self.path} fails ({e})",
                                 "a constant method returning ints", "re-export the program") from None
        self.verify_form = self._verify_form()
        self.dtype = self._feature_dtype()
        self._load_methods()
        self.backend = self._metadata.get(BACKEND_KEY, "unknown")
        self.sidecar = self._read_sidecar()
        if "get_min_verify_len" not in self._metadata and "get_max_verify_len" not in self._metadata:
            self._metadata[VERIFY_BOUNDS_KEY] = list(self._verify_input_bounds())
            self._metadata[VERIFY_FORM_KEY] = self.verify_form
            self._metadata[VERIFY_BOUNDS_FROM_KEY] = "ExecuTorch method meta"
        self._ranges = self._exported_ranges()

    def _load_methods(self) -> None:
        """Every compute method, before any runs (see the module docstring). The runtime's log
        lines (CPU probing for XNNPACK) go to a buffer, not the user's terminal; a method whose
        weights are in a .ptd that was not given (or does not match) fails here."""
        log = io.StringIO()
        self._methods = {}
        for m in METHODS:
            try:
                with contextlib.redirect_stderr(log):
                    self._methods[m] = self._program.load_method(m)
            except Exception as e:  # the runtime raises RuntimeError with an error code
                missing = unregistered_backend(log.getvalue())
                if missing:
                    raise missing_backend_error(m, self.path, missing) from None
                why = _why(log, e)[-160:]
                if self.data_path is None:
                    raise InputError(f"method {m} of {self.path} cannot be loaded ({why})",
                                     "a program whose data is inside the .pte, or its .ptd via --data-path",
                                     "pass --data-path FILE.ptd (the data file written by the same export)") from None
                raise InputError(f"method {m} of {self.path} cannot be loaded with --data-path {self.data_path} ({why})",
                                 "the .ptd written by the same export as the .pte",
                                 "pass the matching .ptd, or re-export both together") from None

    def _verify_form(self) -> str:
        meta = self._program.metadata("target_verify")
        n = meta.num_inputs()
        if n == 2:
            return VERIFY_PLAIN
        if n == 3 and meta.input_tensor_meta(2).dtype() == INT32 and len(meta.input_tensor_meta(2).sizes()) == 1:
            return VERIFY_KV_WINDOW
        raise InputError(f"target_verify of {self.path} takes {n} inputs",
                         "(tokens [1,C], positions [C]) or (tokens, positions, kv_window int32 [V])",
                         "re-export the program with one of the two target_verify forms (DESIGN §1)")

    def _verify_input_bounds(self) -> tuple[int, int]:
        """[min C, max C] from target_verify's own inputs. The kv_window form's C is dynamic: from 2
        up to the compiled maximum (method meta gives the maximum only; K >= 1 gives the 2). The
        2-input form's C is static at the runner PR, C = get_chain_len + 1 (the compiled maximum
        when get_chain_len is absent or does not fit): e.g. maximum 8 -> [2, 8] (K 1..7) with a
        kv_window, [5, 5] (K = 4 only) without one and get_chain_len 4."""
        c_max = int(self._program.metadata("target_verify").input_tensor_meta(0).sizes()[-1])
        if self.verify_form == VERIFY_KV_WINDOW:
            return min(2, c_max), c_max
        k = self._metadata.get("get_chain_len")
        c = k + 1 if isinstance(k, int) and 2 <= k + 1 <= c_max else c_max
        return c, c

    def _feature_dtype(self) -> str:
        code = self._program.metadata("prefill").output_tensor_meta(1).dtype()
        if code not in SCALAR_TYPES:
            raise InputError(f"prefill of {self.path} returns a feature of ExecuTorch scalar type {code}",
                             f"one of {', '.join(SCALAR_TYPES.values())}", "re-export with --dtype float32 or bfloat16")
        return SCALAR_TYPES[code]

    def _read_sidecar(self) -> dict:
        return read_sidecar(self.path) or {}  # a sidecar of another file is an error (sidecar.read_sidecar)

    def _exported_ranges(self) -> dict[str, tuple[int, int]]:
        return exported_ranges(self._metadata)

    @property
    def info(self) -> dict:
        out = {"backend": "pte", "pte": str(self.path), "kernels": self.backend, "dtype": self.dtype,
               "target_verify": self.verify_form}
        if self.data_path is not None:
            out["data_path"] = str(self.data_path)
        return out

    def method_maxima(self) -> dict[str, int]:
        """The largest length each compute method was compiled for (last dim of input 0)."""
        return {m: int(self._program.metadata(m).input_tensor_meta(0).sizes()[-1]) for m in METHODS}

    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    def _call(self, method: str, args: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        check_length(method, args[0].shape[-1], self._ranges)
        return self.execute(method, args)

    def execute(self, method: str, args: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:  # inputs -> [1, T], [1, T, H]
        """One compute method on the runtime's own checks only (no declared-range check: what a
        runner binary sees; the runtime enforces dynamic-dim upper bounds, not lower ones)."""
        log = io.StringIO()
        try:
            with contextlib.redirect_stderr(log):
                out = self._methods[method].execute([a.contiguous().clone() for a in args])
        except RuntimeError as e:
            self.last_log = log.getvalue()  # the runtime's own lines of the failed call, whole
            why = " ".join(log.getvalue().split())[-160:] or str(e)[:100]
            raise ContractViolation(f"{method} failed in the ExecuTorch runtime ({why})",
                                    "a successful execute", f"check the inputs of {method} and the export") from None
        return ids_and_feature(method, out, "re-export the program's")
