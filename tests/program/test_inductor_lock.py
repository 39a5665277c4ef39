"""program/inductor_lock.py: one AOTI compile at a time per inductor cache (two at once packed a library
without its kernels on the H100), none across caches; the lock dies with its holder."""

from __future__ import annotations

import contextlib
import subprocess
import sys
import threading
import time

import pytest

from eagle3_check.program.inductor_lock import LOCK_NAME, compile_lock, inductor_cache_dir

HOLD = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(float(sys.argv[2]))
"""


def holder(path, seconds: float) -> subprocess.Popen:
    """A process holding the lock file `path` for `seconds` (it has printed "held" when this returns)."""
    p = subprocess.Popen([sys.executable, "-c", HOLD, str(path), str(seconds)], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_second_compile_sharing_a_cache_waits_and_says_so_once(tmp_path):
    p = holder(tmp_path / LOCK_NAME, 60)
    notes, entered = [], threading.Event()

    def second():
        with compile_lock(tmp_path, notes.append):
            entered.set()

    t = threading.Thread(target=second)
    t.start()
    try:
        assert not entered.wait(1.0)  # the holder still holds it
        assert len(notes) == 1 and str(tmp_path) in notes[0] and "TORCHINDUCTOR_CACHE_DIR" in notes[0]
    finally:
        p.kill()  # killed, not released: the kernel drops a dead holder's lock
        p.wait()
    assert entered.wait(10)
    t.join()
    assert len(notes) == 1


def test_compiles_with_caches_of_their_own_do_not_wait(tmp_path):
    (tmp_path / "a").mkdir()
    p = holder(tmp_path / "a" / LOCK_NAME, 60)
    try:
        notes = []
        t0 = time.monotonic()
        with compile_lock(tmp_path / "b", notes.append) as lock:
            assert lock == tmp_path / "b" / LOCK_NAME
        assert notes == [] and time.monotonic() - t0 < 1
    finally:
        p.kill()
        p.wait()


def test_the_lock_is_released_on_leaving_so_the_next_compile_does_not_wait(tmp_path):
    notes = []
    for _ in range(2):
        with compile_lock(tmp_path, notes.append):
            pass
    assert notes == []


def test_the_default_cache_is_inductors_own(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "ind"))
    assert inductor_cache_dir() == tmp_path / "ind"
    with compile_lock() as lock:
        assert lock == tmp_path / "ind" / LOCK_NAME


def test_export_aoti_compiles_under_the_lock(tmp_path, monkeypatch):
    """compile_aoti's compiles run inside compile_lock (stopped at the first compile: no AOTInductor here)."""
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.program import aoti_export
    from eagle3_check.program.eager import EagerBackend

    held = []

    @contextlib.contextmanager
    def recording_lock():
        held.append(True)
        try:
            yield tmp_path / LOCK_NAME
        finally:
            held.append(False)

    class Stop(Exception):
        pass

    def compile_seen(ep, name, options=None):
        raise Stop(name, list(held))

    monkeypatch.setattr(aoti_export, "compile_lock", recording_lock)
    monkeypatch.setattr(aoti_export, "_aot_compile", compile_seen)
    program = EagerBackend.from_fixture(load_fixture("tiny-llama"), "cpu", "float32")
    with pytest.raises(Stop) as e:
        aoti_export.compile_aoti(program, tmp_path / "t.pt2")
    assert e.value.args == ("prefill", [True])  # the first compile ran inside the lock
    assert held == [True, False] and not (tmp_path / "t.pt2").exists()
