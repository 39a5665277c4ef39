"""Before a package's models load in the harness's process: its kernel binaries all packed
(`missing_kernels`), and a first load in a child process (`probe`): AOTInductor's generated code runs
native code as a model loads, and a crash there must not take the harness's process with it.

Measured on the GPU machine (torch 2.11.0+cu130, g++ 13.3, 2026-12-05): every AOTI package, CPU or
CUDA, a 16x16 linear layer included, crashed the loading process with a segmentation fault inside
the generated library's `parse_device_str` (its `std::regex`, compiled against the compiler's
libstdc++ headers, running on another libstdc++ that the process had loaded first); with
`LD_PRELOAD` naming the system's libstdc++ the same packages loaded and ran. So `AotiBackend` loads
one model (the smallest, `draft_decode`) in a child first (`probe`) and a crash there is one line
naming the signal, this process's libstdc++, the compiler's, and the fix; a child that merely fails
(a Python error) says nothing here: the load in this process then raises its own error.

A CUDA model's library loads each Triton kernel from a `.cubin` file packed beside it (its wrapper's
`loadKernel("PATH.cubin", ..., cubin_dir_)`: the file's name, in the model's folder). Measured on the
GPU machine (four test processes compiling the same graphs at once): packages whose first prefill
failed with `CUDA driver error: file not found`, one such line per request. `missing_kernels` reads the
package's wrapper sources and names any kernel file they load that the package lacks: `compile_aoti`
refuses to write such a package and `AotiBackend` to load one, each in one line.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

from eagle3_check.errors import InputError

PROBE_MODEL = "draft_decode"  # every model's container is built the same way; this one holds the fewest weights
PROBE_TIMEOUT_S = 600  # a CUDA package's first load includes its kernels' module loads; the 8B's took seconds

_LOAD = """
import sys
from torch._inductor.package import load_package
path, model, index = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    load_package(path, model, device_index=index)
except TypeError:  # a torch whose load_package takes no device_index
    load_package(path, model)
"""


KERNEL_FILE = re.compile(r'loadKernel\(\s*"([^"]+\.(?:cubin|hsaco|spv))"')  # the codegen's first argument


def missing_kernels(package: Path) -> dict[str, list[str]]:
    """{model: [kernel file names]} that a model's wrapper source loads and its folder in the package
    lacks; {} for a complete package (and a CPU one: its kernels are in the library).
    E.g. prefill.wrapper.cpp holding `loadKernel("/tmp/torchinductor_root/ab/cxyz.cubin", "k", 0, cubin_dir_)`
    needs `.../data/aotinductor/prefill/cxyz.cubin` in the archive."""
    out: dict[str, list[str]] = {}
    with zipfile.ZipFile(package) as z:
        names = z.namelist()
        for name in names:
            if not name.endswith(".wrapper.cpp"):
                continue
            folder = name.rsplit("/", 1)[0]
            present = {n.rsplit("/", 1)[1] for n in names if n.rsplit("/", 1)[0] == folder}
            wanted = {Path(p).name for p in KERNEL_FILE.findall(z.read(name).decode("utf-8", "replace"))}
            if wanted - present:
                out[folder.rsplit("/", 1)[-1]] = sorted(wanted - present)
    return out


def check_kernels(package: Path, fix: str) -> None:
    """One line naming the first model whose kernel files are not all packed (`missing_kernels`)."""
    try:
        missing = missing_kernels(package)
    except (OSError, zipfile.BadZipFile) as e:
        raise InputError(f"AOTI package {package} cannot be read as an archive ({e})", "a .pt2 package",
                         fix) from None
    if missing:
        model, files = next(iter(missing.items()))
        raise InputError(f"AOTI package {package}: model {model} loads {len(files)} kernel file(s) the package "
                         f"lacks ({', '.join(files[:3])})", "every kernel binary its library loads packed beside it",
                         fix)


def loaded_libstdcxx(maps: str | None = None) -> str | None:
    """The libstdc++ file this process has mapped (from /proc/self/maps, or `maps`' text), else None."""
    if maps is None:
        try:
            maps = Path("/proc/self/maps").read_text()
        except OSError:
            return None
    for line in maps.splitlines():
        path = line.split()[-1] if line.split() else ""
        if "/libstdc++.so" in path:
            return os.path.realpath(path)
    return None


def compiler_libstdcxx() -> str | None:
    """The libstdc++ the C++ compiler links (`c++ -print-file-name=libstdc++.so.6`), resolved; None
    without a compiler or where it names no file."""
    cxx = os.environ.get("CXX") or shutil.which("c++") or shutil.which("g++")
    if not cxx:
        return None
    try:
        out = subprocess.run([cxx, "-print-file-name=libstdc++.so.6"], capture_output=True, text=True,
                             timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return os.path.realpath(out) if out and os.path.isabs(out) and os.path.exists(out) else None


def crash_message(path: Path, rc: int, loaded: str | None, compiler: str | None) -> InputError:
    """The one-line refusal for a child that died of signal `-rc` loading `path`."""
    try:
        name = signal.Signals(-rc).name
    except ValueError:
        name = f"signal {-rc}"
    libs = ""
    if loaded and compiler and loaded != compiler:
        libs = f"; this process loaded {loaded}, the C++ compiler builds against {compiler}"
        fix = f"run with LD_PRELOAD={compiler} (docs/cuda.md, AOTI programs), or use a torch and compiler that agree"
    else:
        fix = ("run with LD_PRELOAD naming the libstdc++ of the compiler that built the package (docs/cuda.md, "
               "AOTI programs), or re-export with this machine's torch")
    return InputError(f"loading model {PROBE_MODEL} of {path} killed a child process ({name}){libs}",
                      "a package this machine's torch can load", fix)


@functools.cache
def probe(path: str, size: int, mtime_ns: int, index: int) -> None:
    """Loads PROBE_MODEL of the package at `path` on device `index` (-1: CPU) in a child; raises the
    one-line InputError where the child is killed by a signal. Memoized per file state and device."""
    try:  # the child inherits the environment: an LD_PRELOAD given as the fix applies to both
        r = subprocess.run([sys.executable, "-c", _LOAD, path, PROBE_MODEL, str(index)], capture_output=True,
                           timeout=PROBE_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        raise InputError(f"loading model {PROBE_MODEL} of {path} in a child process (over {PROBE_TIMEOUT_S} s)",
                         "a package that loads", "check the package and the machine's GPU") from None
    if r.returncode < 0:
        raise crash_message(Path(path), r.returncode, loaded_libstdcxx(), compiler_libstdcxx())


def probe_package(path: Path, index: int) -> None:
    """`probe` keyed on the file's size and modification time (a package rewritten in place is probed again)."""
    st = path.stat()
    probe(str(path), st.st_size, st.st_mtime_ns, index)
