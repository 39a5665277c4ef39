"""The `.pte` backend: an ExecuTorch speculator program loaded through `executorch.runtime`.

Metadata comes from the program's constant methods (`get_*`); the three compute methods
are loaded once, up front. That order matters: with `share_mutable_buffers=True`,
loading a compute method after another one has executed re-initialises the shared
caches (the prefill's KV cache would be lost), see PTE_NOTES.md.

ExecuTorch enforces the upper bound of a dynamic length but not the lower one, so the
exported ranges (prefill chunk, verify window, draft length) are checked here, before a
call, with an error that names the range.
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path
from typing import Any

import torch

from eagle3_check.errors import ContractViolation, InputError, OptionError, first_line
from eagle3_check.program.contract import SpeculatorProgram
from eagle3_check.program.export import BACKEND_KEY, METHODS, PTE_EXTRA_FIX, read_sidecar
from eagle3_check.quiet import third_party_quiet

LIST_KEYS = ("get_eos_ids",)


def _runtime():
    try:
        with third_party_quiet():  # executorch's ExperimentalWarning at import
            from executorch.runtime import Runtime
    except ImportError as e:
        raise InputError(f"executorch is not importable ({e})", "the executorch package to load .pte files",
                         PTE_EXTRA_FIX) from None
    return Runtime.get()


def load_program(path: str | Path):
    """Loads a `.pte` with clear errors for a missing, empty, truncated or foreign file."""
    from eagle3_check.inputs import regular_file

    p = regular_file(path, "--pte", "pass the path of an exported .pte")  # a FIFO or a device is named as such
    size = p.stat().st_size
    if size == 0:
        raise InputError(f"--pte {p} is empty (0 bytes)", "an ExecuTorch .pte file", "re-export the program")
    rt = _runtime()
    with open(p, "rb") as f:
        head = f.read(8)
    expected = "a complete ExecuTorch .pte file (flatbuffer identifier ETnn at byte 4)"
    fix = "re-export it with `eagle3-check export`; check the copy was not cut short"
    if not re.fullmatch(rb"ET[0-9]{2}", head[4:8]):
        # Checked here: executorch 1.5.1 aborts the process when it logs a non-UTF-8 identifier.
        raise InputError(f"--pte {p} ({size} bytes) is not an ExecuTorch program (identifier {head[4:8]!r})",
                         expected, fix)
    log = io.StringIO()  # the runtime logs why through sys.stderr: keep it for the message
    try:
        with contextlib.redirect_stderr(log):
            return rt.load_program(p)
    except Exception as e:  # the runtime raises RuntimeError with an error code
        why = re.sub(r"\[[^\]]*\]\s*", "", log.getvalue()).strip().replace("\n", " ") or first_line(e)
        raise InputError(f"--pte {p} ({size} bytes) cannot be loaded, truncated or corrupt: {why[:160]}",
                         expected, fix) from None


def _plain(key: str, value: list) -> Any:
    """Constant methods return a list of outputs: [64] -> 64, [1, 50, 106] stays a list."""
    if key in LIST_KEYS or len(value) != 1:
        return list(value)
    return value[0]


class PteBackend(SpeculatorProgram):
    """A `.pte` speculator program on CPU (XNNPACK and portable kernels)."""

    def __init__(self, path: str | Path):
        self.path = Path(path)
        self._program = load_program(self.path)
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
        # Load every compute method before any runs (see the module docstring). The runtime's
        # log lines (CPU probing for XNNPACK) go to a buffer, not the user's terminal.
        with contextlib.redirect_stderr(io.StringIO()):
            self._methods = {m: self._program.load_method(m) for m in METHODS}
        self.backend = self._metadata.get(BACKEND_KEY, "unknown")
        self.sidecar = self._read_sidecar()
        self._ranges = self._exported_ranges()

    def _read_sidecar(self) -> dict:
        return read_sidecar(self.path) or {}  # a sidecar of another file is an error (export.read_sidecar)

    def _exported_ranges(self) -> dict[str, tuple[int, int]]:
        """Length ranges per method from the metadata (the runtime only knows the maxima)."""
        md = self._metadata

        def get(key: str, default: int) -> int:
            v = md.get(key, default)
            return v if isinstance(v, int) else default

        max_p = get("get_max_prefill_chunk", 1 << 30)
        k = get("get_chain_len", 0)
        return {
            "prefill": (get("get_min_prefill_chunk", 1), max_p),
            "target_verify": (get("get_min_verify_len", k + 1 if k else 1), get("get_max_verify_len", k + 1 if k else 1 << 30)),
            "draft_decode": (1, max_p),
        }

    @property
    def info(self) -> dict:
        return {"backend": "pte", "pte": str(self.path), "kernels": self.backend}

    def method_maxima(self) -> dict[str, int]:
        """The largest length each compute method was compiled for (last dim of input 0)."""
        return {m: int(self._program.metadata(m).input_tensor_meta(0).sizes()[-1]) for m in METHODS}

    def metadata(self) -> dict[str, Any]:
        return dict(self._metadata)

    def _call(self, method: str, args: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        n = args[0].shape[-1]
        lo, hi = self._ranges[method]
        if not lo <= n <= hi:
            raise OptionError(
                f"{method} called with length {n}", f"a length in the exported range [{lo}, {hi}]",
                "re-export the program with a wider range, or pick K / the prompt inside it",
            )
        log = io.StringIO()
        try:
            with contextlib.redirect_stderr(log):
                out = self._methods[method].execute([a.contiguous().clone() for a in args])
        except RuntimeError as e:
            why = " ".join(log.getvalue().split())[-160:] or str(e)[:100]
            raise ContractViolation(f"{method} failed in the ExecuTorch runtime ({why})",
                                    "a successful execute", f"check the inputs of {method} and the export") from None
        if len(out) != 2:
            raise ContractViolation(f"contract violated: {method} returned {len(out)} outputs",
                                    "two outputs (ids, feature)", f"re-export the program's {method}")
        return out[0], out[1]

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        return self._call("prefill", [tokens.long(), positions.long()])

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, H]
        return self._call("target_verify", [tokens.long(), positions.long()])

    def draft_decode(self, tokens, feature, positions):  # [1, T], [1, T, H], [T] -> [1, T], [1, T, H]
        return self._call("draft_decode", [tokens.long(), feature, positions.long()])
