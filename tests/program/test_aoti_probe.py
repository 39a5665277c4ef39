"""program/aoti_probe.py: a package's first load in a child process. A child killed by a signal (the GPU
machine's torch 2.11 segfaulted loading every AOTI package) is one line naming the signal, both
libstdc++ files where they differ and the LD_PRELOAD fix; a child that merely fails says nothing (the
load in this process raises its own error). The child here is replaced by one that kills itself: no
compile, no package."""

from __future__ import annotations

import pytest

from eagle3_check.errors import InputError
from eagle3_check.program import aoti_probe
from eagle3_check.program.aoti_probe import crash_message, loaded_libstdcxx, probe_package

MAPS = """\
7f00-7f01 r--p 00000000 08:01 123 /usr/lib/x86_64-linux-gnu/libc.so.6
7f02-7f03 r-xp 00000000 08:01 456 /opt/vendor/lib/libstdc++.so.6.0.28
7f04-7f05 rw-p 00000000 00:00 0
"""


def test_the_mapped_libstdcxx_is_read_from_the_maps_text():
    assert loaded_libstdcxx(MAPS) == "/opt/vendor/lib/libstdc++.so.6.0.28"
    assert loaded_libstdcxx("7f00-7f01 r--p 00000000 08:01 123 /usr/lib/libc.so.6\n") is None


def test_a_crash_names_the_signal_both_libraries_and_the_preload_fix(tmp_path):
    e = crash_message(tmp_path / "m.pt2", -11, "/opt/vendor/lib/libstdc++.so.6.0.28", "/usr/lib/libstdc++.so.6.0.33")
    text = str(e)
    assert text.startswith(f"loading model draft_decode of {tmp_path / 'm.pt2'} killed a child process (SIGSEGV); "
                           "this process loaded /opt/vendor/lib/libstdc++.so.6.0.28, the C++ compiler builds against "
                           "/usr/lib/libstdc++.so.6.0.33"), text
    assert "Fix: run with LD_PRELOAD=/usr/lib/libstdc++.so.6.0.33" in text and "\n" not in text
    same = str(crash_message(tmp_path / "m.pt2", -6, "/usr/lib/libstdc++.so.6", "/usr/lib/libstdc++.so.6"))
    assert "(SIGABRT)" in same and "this process loaded" not in same and "LD_PRELOAD" in same


@pytest.mark.parametrize("code, refused", [
    ("import os, signal; os.kill(os.getpid(), signal.SIGSEGV)", True),  # the native crash, as measured
    ("raise SystemExit(1)", False),  # a Python failure: the in-process load reports it
    ("pass", False),
])
def test_only_a_child_killed_by_a_signal_is_refused(code, refused, tmp_path, monkeypatch):
    package = tmp_path / f"p{abs(hash(code))}.pt2"
    package.write_bytes(b"not read by the replaced child")
    monkeypatch.setattr(aoti_probe, "_LOAD", code)
    if refused:
        with pytest.raises(InputError, match=r"killed a child process \(SIGSEGV\)") as e:
            probe_package(package, -1)
        assert "\n" not in str(e.value)
    else:
        probe_package(package, -1)


def test_a_probe_is_made_once_per_file_state(tmp_path, monkeypatch):
    calls = []
    package = tmp_path / "once.pt2"
    package.write_bytes(b"x")
    monkeypatch.setattr(aoti_probe.subprocess, "run", lambda *a, **k: calls.append(a) or type("R", (), {"returncode": 0})())
    probe_package(package, -1)
    probe_package(package, -1)
    assert len(calls) == 1
    package.write_bytes(b"xy")  # rewritten: another size, probed again
    probe_package(package, -1)
    assert len(calls) == 2
