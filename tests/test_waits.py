"""A wait tells the user what it waits for (eagle3_check/waits.py, issue 52): a lock another
process holds names the lock, its holder's pid and its age, again and again while it waits; a
long job's steps are numbered from the first, and a long step repeats its line."""

from __future__ import annotations

import os
import re
import threading
import time

from eagle3_check import gguf_fixture, waits
from eagle3_check.atomic import lock_path


def test_a_held_lock_says_whose_it_is_and_its_age_until_it_is_free(tmp_path):
    target = tmp_path / "fx.convert"
    taken, release = threading.Event(), threading.Event()

    def hold() -> None:  # flock locks of two open() calls conflict, in one process too
        with waits.held(target, "the other holder", say=lambda _: None):
            taken.set()
            release.wait(5)

    t = threading.Thread(target=hold)
    t.start()
    assert taken.wait(5)
    lines: list[str] = []
    threading.Timer(0.45, release.set).start()
    with waits.held(target, "fixture fx's conversion", every_s=0.1, say=lines.append):
        assert lock_path(target).read_text().split()[0] == str(os.getpid())  # the new holder wrote itself
    t.join()
    assert len(lines) >= 3, lines  # periodically, not once
    assert all(line.startswith(f"waiting for fixture fx's conversion: {lock_path(target)} held by pid "
                               f"{os.getpid()} for ") for line in lines), lines
    assert re.search(r"for \d+ s \(waited \d+ s\)$", lines[-1]), lines[-1]


def test_a_free_lock_says_nothing(tmp_path):
    lines: list[str] = []
    with waits.held(tmp_path / "x", "x", every_s=0.01, say=lines.append):
        pass
    assert lines == []


def test_holder_reads_pid_and_age_from_the_lock_file(tmp_path):
    lock = tmp_path / ".x.lock"
    lock.write_text("4242 2026-01-01T00:00:00\n")
    old = time.time() - 185
    os.utime(lock, (old, old))
    assert waits.holder(lock) == "pid 4242 for 3 min 05 s"
    lock.write_text("")
    assert waits.holder(lock).startswith("pid unknown for ")
    assert waits.holder(tmp_path / "missing") == "pid unknown"


def test_steps_are_numbered_from_the_first_and_a_long_step_repeats_its_line():
    lines: list[str] = []
    steps = waits.Steps("converting fx", 2, every_s=0.05, say=lines.append)
    with steps.step("hashing"):
        pass
    with steps.step("dequantizing"):
        time.sleep(0.2)
    assert lines[0].startswith("converting fx: [1/2] hashing (0 s so far)")
    assert lines[1].startswith("converting fx: [2/2] dequantizing (")
    assert any(line.startswith("converting fx: [2/2] dequantizing: still running") for line in lines[2:]), lines
    n = len(lines)
    time.sleep(0.15)
    assert len(lines) == n  # the heartbeat stops with its step


def test_a_conversion_tells_its_first_step_before_the_converter_runs(tmp_path, monkeypatch, capsys):
    import hashlib

    pkg = tmp_path / "site" / "fake_gguf_pkg2"
    pkg.mkdir(parents=True)
    (pkg / "m.gguf").write_bytes(b"gguf")
    monkeypatch.syspath_prepend(str(tmp_path / "site"))
    monkeypatch.setenv("EAGLE3_CHECK_CACHE", str(tmp_path / "cache"))
    seen = []

    def convert(name, gguf_file, out, steps):
        seen.append(capsys.readouterr().err)
        (out / "target").mkdir()
        return {}

    monkeypatch.setattr(gguf_fixture, "_convert", convert)
    source = {"packages": ["p"], "files": [["fake_gguf_pkg2", "m.gguf"]], "sha256": hashlib.sha256(b"gguf").hexdigest()}
    gguf_fixture.converted_dir("fx", source)
    assert f"converting fx: [1/{len(gguf_fixture.CONVERT_STEPS)}] hashing the GGUF" in seen[0]
