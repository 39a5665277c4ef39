"""The files an export writes beside its `.pte`: the sidecar `<name>.export.json` (what was exported,
how, from what; linked to the very .pte by its size and sha256) and the `.ptd` external data path;
and what a `.pte` is judged with, read from them (`reference_for_pte`: its fixture, for the HF
reference, the tokenizer and the prompt set, or a given target), as `check --pte`, `gate --pte`
and the pytest plugin's `--eagle3-pte` judge it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from eagle3_check.atomic import write_text_atomic
from eagle3_check.errors import InputError


def sidecar_path(pte_path: str | Path) -> Path:
    """`model.pte` -> `model.export.json`."""
    p = Path(pte_path)
    return p.with_name(p.stem + ".export.json")


_DIGESTS: dict[tuple, str] = {}


def pte_digest(pte_path: str | Path) -> str:
    """sha256 of the file (kept per path, size and mtime: a multi-GB .pte is hashed once a process)."""
    p = Path(pte_path)
    st = p.stat()
    key = (str(p.resolve()), st.st_size, st.st_mtime_ns)
    if key not in _DIGESTS:
        h = hashlib.sha256()
        with open(p, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _DIGESTS[key] = h.hexdigest()
    return _DIGESTS[key]


def write_sidecar(pte_path: str | Path, record: dict) -> Path:
    """The sidecar of a .pte just written, naming it by size and sha256 (the pair's link).

    The pair is two files, so two renames: the .pte first, then its sidecar. A crash between
    them leaves the new .pte beside the old sidecar, whose digest no longer matches: `read_sidecar`
    refuses it instead of trusting it (a stale sidecar could name another fixture's reference)."""
    p = Path(pte_path)
    data = {**record, "pte_bytes": p.stat().st_size, "pte_sha256": pte_digest(p)}
    return write_text_atomic(sidecar_path(p), json.dumps(data, indent=2) + "\n", "export sidecar")


def read_sidecar(pte_path: str | Path) -> dict | None:
    """The sidecar of `pte_path` (None without one), checked to describe this very file: a sidecar
    whose size or sha256 differs is an error (one written by another export, or a crash between
    the pair's two renames), and so is one without the digest (`pte_bytes` and `pte_sha256`: every
    export writes them), since nothing then ties it to this file."""
    from eagle3_check.inputs import read_json

    pte, side = Path(pte_path), sidecar_path(pte_path)
    if not side.exists():
        return None
    fix = f"re-export {pte.name} with `eagle3-check export` (or delete {side.name})"
    data = read_json(side, "export sidecar", "a JSON object written by `eagle3-check export`", fix)
    if not isinstance(data, dict):
        raise InputError(f"export sidecar {side} holds a JSON {type(data).__name__}", "a JSON object", fix)
    size, digest = data.get("pte_bytes"), data.get("pte_sha256")
    if type(size) is not int or not isinstance(digest, str):
        field_ = "pte_sha256" if not isinstance(digest, str) else "pte_bytes"
        raise InputError(f"export sidecar {side} has no {field_} (found {data.get(field_)!r:.40})",
                         "the size and sha256 of the .pte it describes (pte_bytes, pte_sha256), as every export "
                         "writes them", fix)
    if size != pte.stat().st_size or digest != pte_digest(pte):
        raise InputError(f"export sidecar {side} describes another file ({size} bytes, sha256 {str(digest)[:12]}...) "
                         f"than {pte} ({pte.stat().st_size} bytes, sha256 {pte_digest(pte)[:12]}...)",
                         "the sidecar written with this .pte", fix)
    return data
@dataclass
class ExportRecord:
    """What an export produced; written as the sidecar JSON."""

    path: str
    backend: str  # xnnpack | portable
    spec: dict
    metadata: dict[str, Any]  # the constant methods written (after omissions)
    omitted: list[str]
    delegated: dict[str, int] = field(default_factory=dict)  # method -> XNNPACK delegate calls
    portable_ops: dict[str, list[str]] = field(default_factory=dict)  # method -> ops left portable
    seconds: float = 0.0
    source: dict = field(default_factory=dict)  # fixture name or target/draft dirs
    versions: dict = field(default_factory=dict)
    phases: dict[str, float] = field(default_factory=dict)  # PHASES in order -> seconds
    quantization: dict | None = None  # {"tag": get_quantization, "layers": [...]} (program/quantize.py)
    dtype: str = "float32"  # weights and features
    target_verify: str = "tokens+positions"  # or kv_window (contract.VERIFY_* forms)
    data_path: str | None = None  # the .ptd beside the .pte (--external-data), else None
    lowering: dict = field(default_factory=dict)  # fast_lowering.LoweringStats: fast or stock legalize, and why

    def to_json(self) -> dict:
        return asdict(self)


def data_path_for(pte_path: str | Path) -> Path:
    """`model.pte` -> `model.ptd`, the external data file `export --external-data` writes."""
    p = Path(pte_path)
    return p.with_suffix(".ptd")


def sidecar_source(pte_path: str | Path) -> dict:
    """What the export of `pte_path` was made from (`{"fixture": ...}` or the target/draft dirs), from its
    sidecar; {} without one. A stale sidecar is an error (`read_sidecar`), never trusted."""
    source = (read_sidecar(pte_path) or {}).get("source")
    return dict(source) if isinstance(source, dict) else {}


def sidecar_fixture(pte_path: str | Path) -> str | None:
    """The fixture a .pte was exported from, from its sidecar (None when unknown)."""
    fixture = sidecar_source(pte_path).get("fixture")
    return fixture if isinstance(fixture, str) else None


def reference_for_pte(pte: str | Path, fixture: str | None, target: str | Path | None,
                      tokenizer: str | Path | None) -> tuple:
    """(fixture or None, target_dir, tokenizer path) a .pte is judged with: `target`/`tokenizer`,
    else `fixture`, else the fixture recorded in the export sidecar, else the default fixture."""
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture

    if target:
        if fixture:
            raise InputError("--fixture with --target", "one or the other", "drop --fixture")
        t = Path(target)
        return None, t, Path(tokenizer) if tokenizer else t / "tokenizer.json"
    if not fixture:
        fixture = sidecar_fixture(pte)
        fixture = DEFAULT_FIXTURE if fixture is None else fixture
    fx = load_fixture(fixture)
    return fx, fx.target_dir, Path(tokenizer) if tokenizer else fx.tokenizer_path
