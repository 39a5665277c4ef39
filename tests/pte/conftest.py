"""Shared `.pte` fixtures: the default fixture exported once per session (and cached on disk).

The export of tiny-llama takes about a minute on two cores, so it is done once and cached
under `.cache/pte/<key>.pte`, the key hashing the fixture files, the modules that shape the
program and the torch / executorch versions (any change re-exports). Negative programs are
derived from it in seconds (`pte_edit`), except the out-of-vocab draft, which needs its own
(portable, once per session) export.
"""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest
import torch

# No executorch import here: without it the test modules skip themselves (importorskip) and
# these fixtures are never used. export.py and pte_backend.py import executorch lazily.
from eagle3_check.export import export_eager, export_speculator, sidecar_path
from eagle3_check.pte_backend import PteBackend

ROOT = Path(__file__).resolve().parents[2]
SHAPING = ["export.py", "target.py", "draft.py", "speculator.py", "eager.py"]


def _cache_key(fixture, backend: str) -> str:
    import executorch

    h = hashlib.sha256(f"{backend} {torch.__version__} {getattr(executorch, '__version__', '')}".encode())
    for p in sorted(fixture.root.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    for name in SHAPING:
        h.update((ROOT / "eagle3_check" / name).read_bytes())
    return h.hexdigest()[:16]


def _cached_export(name: str, key: str, export, tmp_path_factory) -> Path:
    """`export(out)` once per key: copies the cached .pte and sidecar into a session tmp dir."""
    cache = ROOT / ".cache" / "pte"
    cached = cache / f"{name}-{key}.pte"
    out = tmp_path_factory.mktemp(name) / f"{name}.pte"
    if not cached.is_file():
        cache.mkdir(parents=True, exist_ok=True)
        export(out)
        shutil.copy(sidecar_path(out), sidecar_path(cached))
        shutil.copy(out, cached)
    else:
        shutil.copy(cached, out)
        shutil.copy(sidecar_path(cached), sidecar_path(out))
    return out


@pytest.fixture(scope="session")
def pte_path(fixture, program, tmp_path_factory) -> Path:
    """The default fixture as an XNNPACK `.pte` (with its sidecar), exported once."""
    return _cached_export(
        "tiny-llama", _cache_key(fixture, "xnnpack"),
        lambda out: export_eager(program, out, "xnnpack", source={"fixture": fixture.name}), tmp_path_factory,
    )


@pytest.fixture(scope="session")
def pte_program(pte_path) -> PteBackend:
    return PteBackend(pte_path)


class _OutOfVocabDraft(torch.nn.Module):
    """The speculator with draft_decode ids shifted past the target vocab: a broken export."""

    def __init__(self, module, vocab: int):
        super().__init__()
        self.target = module.target
        self.draft = module.draft
        self._inner = [module]  # not a submodule: buffers keep their names
        self.vocab = vocab

    def prefill(self, tokens, positions):
        return self._inner[0].prefill(tokens, positions)

    def target_verify(self, tokens, positions):
        return self._inner[0].target_verify(tokens, positions)

    def draft_decode(self, tokens, feature, positions):
        ids, g = self._inner[0].draft_decode(tokens, feature, positions)
        return ids + self.vocab, g


@pytest.fixture(scope="session")
def oov_pte_path(fixture, program, tmp_path_factory) -> Path:
    """A program whose draft_decode returns ids outside the target vocab (portable, cached)."""
    broken = _OutOfVocabDraft(program.module, program.metadata()["get_vocab_size"])
    return _cached_export(
        "tiny-llama-oov", _cache_key(fixture, "portable-oov"),
        lambda out: export_speculator(broken, program.spec, program.metadata(), out, "portable",
                                      source={"fixture": fixture.name}),
        tmp_path_factory,
    )
