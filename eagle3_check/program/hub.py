"""`--target` / `--draft` as a Hugging Face hub id, resolved from the local cache only.

The tool never downloads (no network is assumed, and nothing remote is ever run): a hub id
`org/name[@revision]` is looked up in the cache that `huggingface-cli download` fills, in
the cache's own layout:

    $HF_HUB_CACHE (else $HF_HOME/hub, else $XDG_CACHE_HOME/huggingface/hub, else ~/.cache/huggingface/hub)
      models--org--name/
        refs/main                 <- the commit hash a revision name points at
        snapshots/<commit hash>/  <- config.json, *.safetensors, tokenizer.json, ...

A local directory always wins over a hub id of the same spelling. Anything else is a
one-line error saying where it looked and how to fill the cache.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from eagle3_check.errors import InputError

HUB_ID_RE = re.compile(r"(?P<repo>[A-Za-z0-9][\w.-]*/[\w.-]+)(@(?P<rev>[\w./-]+))?")
COMMIT_RE = re.compile(r"[0-9a-f]{40}")


def hub_cache_dir() -> Path:
    """Where Hugging Face keeps downloaded repositories (read at call time, so env changes count)."""
    if os.environ.get("HF_HUB_CACHE"):
        return Path(os.environ["HF_HUB_CACHE"])
    if os.environ.get("HF_HOME"):
        return Path(os.environ["HF_HOME"]) / "hub"
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "huggingface" / "hub"


def is_hub_id(value: str) -> bool:
    """`org/name` or `org/name@rev`: one slash, no leading ./ or /, not an existing path."""
    return bool(HUB_ID_RE.fullmatch(value)) and not value.startswith((".", "/")) and not Path(value).exists()


def resolve_model_dir(value: str, flag: str) -> Path:
    """A local directory as given, or the cached snapshot of hub id `value`; else InputError.

    Examples:
      "fixtures/tiny-llama/target"  -> that directory
      "acme/tiny-llama"             -> <cache>/models--acme--tiny-llama/snapshots/<refs/main>
      "acme/tiny-llama@v1"          -> the snapshot refs/v1 names
      "acme/tiny-llama@<40 hex>"    -> snapshots/<40 hex>
    """
    p = Path(value)
    if p.is_dir():
        return p
    if p.exists():
        raise InputError(f"{flag} {value} is a file", "a model directory (config.json + weights) or a hub id",
                         f"point {flag} at the directory that holds config.json")
    m = HUB_ID_RE.fullmatch(value)
    if not m or value.startswith((".", "/")):
        raise InputError(f"{flag} {value}: directory does not exist",
                         "an existing model directory, or a hub id org/name[@revision] in the local HF cache",
                         f"fix the {flag} path")
    repo, rev = m.group("repo"), m.group("rev") or "main"
    cache = hub_cache_dir()
    root = cache / ("models--" + repo.replace("/", "--"))
    fill = f"on a machine with network: `huggingface-cli download {repo}` (then copy {root}), or pass a directory"
    if not root.is_dir():
        raise InputError(f"{flag} {value}: hub id not in the local Hugging Face cache {cache}",
                         f"a cached snapshot under {root} (this tool never downloads)", fill)
    if COMMIT_RE.fullmatch(rev):
        commit = rev
    else:
        ref = root / "refs" / rev
        if not ref.is_file():
            known = sorted(r.name for r in (root / "refs").glob("*")) if (root / "refs").is_dir() else []
            raise InputError(f"{flag} {value}: revision {rev!r} is not cached (refs: {known or 'none'})",
                             f"a file {ref} naming a snapshot", fill)
        commit = ref.read_text().strip()
    snap = root / "snapshots" / commit
    if not (snap / "config.json").is_file():
        raise InputError(f"{flag} {value}: cached snapshot {snap} has no config.json",
                         "a complete snapshot (config.json + weights)", fill)
    return snap
