"""What reproduces a report: the options it ran with, the package versions, the input files' hashes.

Every `--json` report (`check`, `check --suite`, `gate`, `golden verify`) carries a `provenance`
block:

    {"options": {...},                    # the command's options, as parsed (paths as given)
     "run_options": {...},                # the RunOptions the runner got (chat template, stops, K, ...)
     "versions": {"python": "3.11.7", "eagle3_check": "0.1.0", "torch": "2.13.0+cpu",
                  "transformers": "5.24.0", "tokenizers": "...", "executorch": "1.5.1"},
     "files": {"pte": {"path": "tiny.pte", "sha256": "..."},
               "target": {"path": "fixtures/tiny-llama/target", "sha256": "...", "files": 4}, ...}}

A directory's hash covers every file under it (sorted relative paths and their bytes), so a
fixture's target, draft, tokenizer and card are pinned as well as a `.pte`, a prompt set or a
golden file. Versions are read from the installed distributions without importing them
(executorch is listed only where it is installed).
"""

from __future__ import annotations

import hashlib
import platform
import sys
from dataclasses import asdict, is_dataclass
from importlib import metadata as importlib_metadata
from pathlib import Path
from typing import Any

PACKAGES = ("eagle3_check", "torch", "transformers", "tokenizers", "safetensors", "executorch")


def versions() -> dict[str, str]:
    """Python and every installed package of PACKAGES (an absent one is left out)."""
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib_metadata.version(name)
        except importlib_metadata.PackageNotFoundError:
            if name == "eagle3_check":  # a source checkout on PYTHONPATH, not installed
                out[name] = getattr(sys.modules.get("eagle3_check"), "__version__", "source")
    return out


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def file_record(path: str | Path) -> dict[str, Any]:
    """{"path", "sha256"} of a file; of a directory also "files" (how many it hashed): sha256 over
    each file's relative path and its own sha256, in sorted order. A path that does not exist: "missing"."""
    p = Path(path)
    if p.is_file():
        return {"path": str(path), "sha256": sha256_file(p)}
    if p.is_dir():
        h = hashlib.sha256()
        files = sorted(f for f in p.rglob("*") if f.is_file() and not f.name.startswith("."))
        for f in files:
            h.update(f.relative_to(p).as_posix().encode() + b"\0" + sha256_file(f).encode() + b"\n")
        return {"path": str(path), "sha256": h.hexdigest(), "files": len(files)}
    return {"path": str(path), "sha256": None, "missing": True}


def jsonable(value: Any) -> Any:
    """Options as JSON: dataclasses as dicts, paths as strings, sets/tuples as lists, anything
    else that JSON cannot hold (a function, a runner object) as its repr."""
    if is_dataclass(value) and not isinstance(value, type):
        return jsonable(asdict(value))
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in (sorted(value) if isinstance(value, (set, frozenset)) else value)]
    if isinstance(value, Path):
        return str(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return repr(value)


def provenance(options: dict[str, Any], files: dict[str, str | Path | None], run_options: Any = None,
               records: dict[str, dict] | None = None) -> dict:
    """The `provenance` block of a report; `files` maps a role ("pte", "prompts", "golden", ...) to
    a path (None: not used, left out); `records` {resolved path: file_record} hashed earlier in the run."""
    out = {"options": jsonable(options)}
    if run_options is not None:
        out["run_options"] = jsonable(run_options)
    out["versions"] = versions()
    records = records or {}

    def record(p) -> dict:
        known = records.get(str(Path(p).resolve()))
        return {**known, "path": str(p)} if known else file_record(p)

    out["files"] = {role: record(p) for role, p in files.items() if p is not None}
    return out
