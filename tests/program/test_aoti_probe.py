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


def _package(path, cubins: list[str], wrapper: str) -> None:
    """A .pt2-shaped archive: one model's folder with its wrapper source and the given kernel files."""
    import zipfile

    folder = "p/data/aotinductor/prefill"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(f"{folder}/prefill.wrapper.cpp", wrapper)
        z.writestr(f"{folder}/prefill.wrapper.so", b"\x7fELF")
        for c in cubins:
            z.writestr(f"{folder}/{c}", b"cubin")
        z.writestr("p/data/aotinductor/draft_decode/cother.cubin", b"another model's kernel")


# as the CUDA codegen writes it (torch/_inductor/codegen/cpp_wrapper_gpu.py: the cache path, then cubin_dir_)
WRAPPER = ('kernels_.triton_poi_0 = loadKernel("/tmp/torchinductor_root/ab/cxyz.cubin", "triton_poi_0", 0, '
           'cubin_dir_, &kernels_.loaded_modules_);\n'
           'kernels_.triton_red_1 = loadKernel("/tmp/torchinductor_root/cd/cother.cubin", "triton_red_1", 32, cubin_dir_);\n')


def test_a_kernel_file_the_wrapper_loads_and_the_package_lacks_is_named(tmp_path):
    from eagle3_check.program.aoti_probe import check_kernels, missing_kernels

    whole, short = tmp_path / "whole.pt2", tmp_path / "short.pt2"
    _package(whole, ["cxyz.cubin", "cother.cubin"], WRAPPER)
    _package(short, ["cxyz.cubin"], WRAPPER)  # cother.cubin only in another model's folder: not this one's
    assert missing_kernels(whole) == {}
    assert missing_kernels(short) == {"prefill": ["cother.cubin"]}
    check_kernels(whole, "FIX")
    with pytest.raises(InputError) as e:
        check_kernels(short, "re-export it")
    assert str(e.value) == (f"AOTI package {short}: model prefill loads 1 kernel file(s) the package lacks "
                            "(cother.cubin); expected every kernel binary its library loads packed beside it. "
                            "Fix: re-export it")


def test_a_cpu_package_has_no_kernel_files_to_miss_and_a_non_archive_is_one_line(tmp_path):
    from eagle3_check.program.aoti_probe import check_kernels, missing_kernels

    cpu = tmp_path / "cpu.pt2"
    _package(cpu, [], "// the C++ kernels are in the library\n")
    assert missing_kernels(cpu) == {}
    bad = tmp_path / "bad.pt2"
    bad.write_bytes(b"not a zip")
    with pytest.raises(InputError, match=r"cannot be read as an archive") as e:
        check_kernels(bad, "re-export it")
    assert "\n" not in str(e.value)

