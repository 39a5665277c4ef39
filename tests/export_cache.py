"""A compiled program cached on disk across test sessions: `.cache/<kind>/<name>-<key><suffix>`, its
sidecar beside it (and a `.pte`'s `.ptd` when its export wrote one), copied into a session tmp dir.
The key hashes what shapes the program (each conftest says what), so any change compiles again."""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path

from eagle3_check.atomic import atomic_path, locked
from eagle3_check.program.sidecar import data_path_for, sidecar_path

ROOT = Path(__file__).resolve().parents[1]


def cache_key(fixture, label: str, shaping: Iterable[str]) -> str:
    """16 hex digits over `label`, the fixture's files and the modules (under eagle3_check/) that shape the program."""
    h = hashlib.sha256(label.encode())
    for p in sorted(fixture.root.rglob("*")):
        if p.is_file():
            h.update(p.name.encode() + p.read_bytes())
    for name in shaping:
        h.update((ROOT / "eagle3_check" / name).read_bytes())
    return h.hexdigest()[:16]


def cached_export(name: str, key: str, export: Callable[[Path], object], tmp_path_factory,
                  suffix: str = ".pte") -> Path:
    """`export(out)` once per key: copies the cached program, its sidecar and (when the export wrote
    one) its .ptd data file into a session tmp dir."""
    cache = ROOT / ".cache" / suffix.lstrip(".")
    cached = cache / f"{name}-{key}{suffix}"
    out = tmp_path_factory.mktemp(name) / f"{name}{suffix}"
    cache.mkdir(parents=True, exist_ok=True)
    with locked(cached, f"{suffix} cache"):  # two sessions exporting one key: the second waits, then copies
        if not cached.is_file():
            export(out)
            if data_path_for(out).is_file():
                with atomic_path(data_path_for(cached)) as tmp:
                    shutil.copy(data_path_for(out), tmp)
            with atomic_path(sidecar_path(cached)) as tmp:  # sidecar first: a cached program has its sidecar
                shutil.copy(sidecar_path(out), tmp)
            with atomic_path(cached) as tmp:
                shutil.copy(out, tmp)
        else:
            shutil.copy(cached, out)
            shutil.copy(sidecar_path(cached), sidecar_path(out))
            if data_path_for(cached).is_file():
                shutil.copy(data_path_for(cached), data_path_for(out))
    return out
