"""The dtype a checkpoint stores its weights in, and the conversion to the dtype the program runs in, stated.

A target or draft saved in float16 (or bfloat16) is loaded and run in `--dtype` (float32 by default):
Transformers and `load_state_dict` convert in silence, so the report would claim a float32 program
that is a float16 model upcast. `stored_dtypes` reads what each weight file holds (a safetensors
header: no tensor is read; a `.bin` mapped with `weights_only`), and `weight_info` states every
conversion for the report and its JSON (`info["weight_conversion"]`, printed as one line):

    weights: target stored float16 (27 tensors), run in float32: exact (float32 holds every float16)

Integer tensors (the draft's d2t / t2d maps) are not weights of a dtype and are left out.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

from eagle3_check.errors import InputError

SAFETENSORS_DTYPES = {"F16": "float16", "BF16": "bfloat16", "F32": "float32", "F64": "float64"}
HEADER_LIMIT = 100 << 20  # bytes of a safetensors header (its JSON index of tensors) read at most
WIDENS = {("float16", "float32"), ("bfloat16", "float32"), ("float16", "float64"), ("bfloat16", "float64"),
          ("float32", "float64")}  # (stored, run): every stored value is a value of the run dtype


def _safetensors_dtypes(path: Path) -> list[str]:
    with open(path, "rb") as f:
        head = f.read(8)
        n = struct.unpack("<Q", head)[0] if len(head) == 8 else -1
        if not 0 < n <= HEADER_LIMIT:
            raise InputError(f"weight file {path} has a safetensors header of {n} bytes",
                             f"a header of 1 to {HEADER_LIMIT} bytes", "re-save the weights with save_pretrained")
        header = json.loads(f.read(n))
    return [SAFETENSORS_DTYPES.get(t.get("dtype"), "") for k, t in header.items()
            if k != "__metadata__" and isinstance(t, dict)]


def _bin_dtypes(path: Path) -> list[str]:
    import torch

    state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)  # no pickled code runs
    return [str(t.dtype).removeprefix("torch.") for t in state.values() if isinstance(t, torch.Tensor)]


def stored_dtypes(directory: str | Path) -> dict[str, int]:
    """Floating dtype -> number of tensors, over every weight file in `directory` (shards included);
    {} where there are none or a file cannot be read (its loader names it)."""
    counts: dict[str, int] = {}
    for p in sorted(Path(directory).glob("*.safetensors")) + sorted(Path(directory).glob("*.bin")):
        try:
            dtypes = _safetensors_dtypes(p) if p.suffix == ".safetensors" else _bin_dtypes(p)
        except Exception:  # noqa: BLE001 - a damaged file: the loader's own one-line error follows
            continue
        for d in dtypes:
            if d.startswith(("float", "bfloat")):
                counts[d] = counts.get(d, 0) + 1
    return counts


def conversion(part: str, stored: dict[str, int], run: str) -> str | None:
    """'target stored float16 (27 tensors), run in float32: exact (...)', or None when nothing converts."""
    others = sorted(d for d in stored if d != run)
    if not others:
        return None
    held = ", ".join(f"{d} ({stored[d]} tensors)" for d in sorted(stored))
    how = "; ".join(f"{d} -> {run} exact ({run} holds every {d})" if (d, run) in WIDENS
                    else f"{d} -> {run} rounded (to {run}'s precision and range)" for d in others)
    return f"{part} stored {held}, run in {run}: {how}"


def weight_info(target_dir: str | Path, draft_dir: str | Path, run_dtype: str) -> dict | None:
    """The report's `weight_conversion` block ({"summary", "target", "draft"}), or None when both are
    stored in the dtype they run in."""
    parts = {"target": stored_dtypes(target_dir), "draft": stored_dtypes(draft_dir)}
    said = {part: conversion(part, stored, run_dtype) for part, stored in parts.items()}
    if not any(said.values()):
        return None
    line = "; ".join(s for s in said.values() if s)
    return {"summary": f"weights: {line}",
            **{part: {"stored": parts[part], "run": run_dtype, "conversion": said[part]} for part in parts}}
