"""The export cache of tests/pte/conftest.py (tests/export_cache.py) under pytest-xdist: two workers that need the
same export at once export it once (the second waits on the cache entry's lock, then copies),
and a cache entry is only ever whole (written beside, then renamed). Threads stand in for the
workers: each opens the lock file itself, and flock serialises separate opens within one process too."""

from __future__ import annotations

import importlib.util
import json
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent


def _conftest(tmp_path, monkeypatch):
    """tests/export_cache.py (what tests/pte/conftest.py and tests/aoti/conftest.py cache with), its
    cache under tmp_path/.cache/pte."""
    spec = importlib.util.spec_from_file_location("export_cache_under_test", ROOT / "export_cache.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # imports no executorch: the cache logic alone
    monkeypatch.setattr(mod, "ROOT", tmp_path)
    return mod


class _Temps:
    """tmp_path_factory's mktemp, one fresh directory per call."""

    def __init__(self, root: Path):
        self.root, self.n, self.lock = root, 0, threading.Lock()

    def mktemp(self, name: str) -> Path:
        with self.lock:
            self.n += 1
            d = self.root / f"{name}{self.n}"
        d.mkdir()
        return d


def test_two_workers_export_once_and_both_get_the_program(tmp_path, monkeypatch):
    mod = _conftest(tmp_path, monkeypatch)
    calls = []

    def export(out: Path):  # a slow export: the other worker arrives while it runs
        calls.append(out)
        time.sleep(0.5)
        out.write_bytes(b"PTE" * 1000)
        mod.sidecar_path(out).write_text(json.dumps({"source": {"fixture": "tiny-llama"}}))

    temps, outs = _Temps(tmp_path / "workers"), []
    (tmp_path / "workers").mkdir()
    threads = [threading.Thread(target=lambda: outs.append(mod.cached_export("tiny", "k1", export, temps)))
               for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1  # one export; the second worker copied the cached one
    assert len(outs) == 2 and all(o.read_bytes() == b"PTE" * 1000 for o in outs)
    assert all(json.loads(mod.sidecar_path(o).read_text())["source"]["fixture"] == "tiny-llama" for o in outs)
    cache = tmp_path / ".cache" / "pte"
    assert sorted(p.name for p in cache.iterdir() if not p.name.startswith(".")) == ["tiny-k1.export.json", "tiny-k1.pte"]


def test_a_failed_export_leaves_no_cache_entry_and_the_next_worker_exports(tmp_path, monkeypatch):
    mod = _conftest(tmp_path, monkeypatch)
    temps = _Temps(tmp_path / "w")
    (tmp_path / "w").mkdir()

    def broken(out: Path):
        out.write_bytes(b"half")
        raise RuntimeError("export died")

    try:
        mod.cached_export("tiny", "k2", broken, temps)
    except RuntimeError:
        pass
    cache = tmp_path / ".cache" / "pte"
    assert not (cache / "tiny-k2.pte").exists()  # no half entry for the next worker to copy

    def good(out: Path):
        out.write_bytes(b"whole")
        mod.sidecar_path(out).write_text("{}")

    assert mod.cached_export("tiny", "k2", good, temps).read_bytes() == b"whole"
