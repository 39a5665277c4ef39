"""Checks that run before torch is imported: is there a CUDA driver, are the program flags a pair,
does a `--runner` name something that exists, is a `--pte` an ExecuTorch program, has a model
directory its config.json.

A usage error must cost what `--help` costs (issues 32, 52), so nothing here imports torch or loads
a model (a runner module is looked up by its spec, never imported): `--device cuda` is refused by looking for the NVIDIA driver (its /proc entry, or the
libcuda a CUDA torch loads), not by asking torch. torch still decides once it is imported
(program/eager.py `resolve_device`): a driver without a usable GPU is refused there.
"""

from __future__ import annotations

import ctypes.util
import importlib.machinery
import importlib.util
import os
import re
import shutil
import sys
from pathlib import Path

from eagle3_check.errors import InputError, OptionError

NVIDIA_PROC = "/proc/driver/nvidia"  # present where the NVIDIA kernel driver is loaded


def cuda_driver_present() -> bool:
    """The NVIDIA driver is loaded (its /proc entry) or its user-space library is installed (libcuda)."""
    return os.path.isdir(NVIDIA_PROC) or ctypes.util.find_library("cuda") is not None


def check_device(device: str | None) -> None:
    """`--device cuda[:N]` on a machine without the NVIDIA driver: the same error torch's check gives."""
    if device is not None and device.startswith("cuda") and not cuda_driver_present():
        raise OptionError(f"--device {device}", "a CUDA device", "run on a machine with a GPU, or use --device cpu")


def check_program_pair(target: str | None, draft: str | None, fixture: str | None) -> None:
    """--target and --draft come together, and never with --fixture."""
    if target or draft:
        if not (target and draft):
            missing = "--draft" if target else "--target"
            raise InputError(f"{missing} not given", "both --target DIR and --draft DIR", f"add {missing} DIR")
        if fixture:
            raise InputError("--fixture with --target/--draft", "one or the other", "drop --fixture")


PTE_EXPECTED = "a complete ExecuTorch .pte file (flatbuffer identifier ETnn at byte 4)"
PTE_FIX = "re-export it with `eagle3-check export`; check the copy was not cut short"
PTD_FIX = "pass the .ptd written beside the .pte by its export (--data-path FILE.ptd)"


def identifier(path: Path) -> bytes:
    """Bytes 4..8 of a file: a flatbuffer's file identifier (`ET12` for a .pte, `FT01` for a .ptd)."""
    with open(path, "rb") as f:
        return f.read(8)[4:8]


def check_pte_file(path: str | Path, flag: str = "--pte") -> None:
    """A .pte by its first 8 bytes: not empty, `ETnn` at byte 4 (executorch 1.5.1 aborts the process
    when it logs a non-UTF-8 identifier, so this is checked before the runtime sees the file)."""
    p = Path(path)
    size = p.stat().st_size
    if size == 0:
        raise InputError(f"{flag} {p} is empty (0 bytes)", "an ExecuTorch .pte file", "re-export the program")
    head = identifier(p)
    if not re.fullmatch(rb"ET[0-9]{2}", head):
        raise InputError(f"{flag} {p} ({size} bytes) is not an ExecuTorch program (identifier {head!r})",
                         PTE_EXPECTED, PTE_FIX)


def check_ptd_file(path: str | Path) -> None:
    """A .ptd data file: it exists, `FTnn` at byte 4."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"--data-path {p} does not exist", "an ExecuTorch .ptd data file", PTD_FIX)
    head = identifier(p)
    if not re.fullmatch(rb"FT[0-9]{2}", head):
        raise InputError(f"--data-path {p} is not an ExecuTorch data file (identifier {head!r})",
                         "a .ptd file (flat tensor identifier FTnn at byte 4)", PTD_FIX)


def check_model_dir(path: str | Path, flag: str) -> None:
    """A --target / --draft directory has its config.json (what the loaders read first)."""
    if not (Path(path) / "config.json").exists():  # one that is no regular file: its reader names it
        what = "an HF save_pretrained directory (config.json + model.safetensors)" if flag == "--target" else \
            "a draft directory with config.json and its weights"
        model = "a saved HF model" if flag == "--target" else "a saved EAGLE-3 draft head"
        raise InputError(f"{flag.lstrip('-')} directory {path} has no config.json", what, f"pass {flag} DIR pointing at {model}")


def check_executable(exe: str, spec: str, flag: str = "--runner") -> None:
    """The program of a runner binary's command line: a path (holds a `/`) names an executable file,
    a bare name is found on $PATH (as the process start looks it up)."""
    fix = f"build the runner, or give its path ({flag} exec:/path/to/runner)"
    if os.sep not in exe:
        if shutil.which(exe) is None:
            raise InputError(f"{flag} {spec!r}: {exe} is not on PATH", "a runner binary", fix)
        return
    if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
        raise InputError(f"{flag} {spec!r}: {exe} is not an executable file", "a runner binary", fix)


def module_found(name: str) -> bool:
    """Whether `import name` can find the module, decided without running any module's code: the
    top-level name through the import system's finders, each dotted part in its parent package's
    directories (a parent's __init__ is not run). Example: `my_pkg.runners` is found when
    `my_pkg` is found as a package and one of its directories holds `runners.py` or `runners/`."""
    parts = name.split(".")
    locations = None
    for i in range(len(parts)):
        here = ".".join(parts[: i + 1])
        module = sys.modules.get(here)
        if module is not None:  # imported already (`os.path` too, which `os` sets itself)
            locations = getattr(module, "__path__", None)
        elif i > 0 and locations is None:
            return False  # a plain module has no submodules
        else:
            try:
                found = (importlib.util.find_spec(here) if i == 0
                         else importlib.machinery.PathFinder.find_spec(here, list(locations or [])))
            except (ImportError, ValueError):  # an empty part ('a..b'): import_module refuses it too
                return False
            if found is None:
                return False
            locations = found.submodule_search_locations
    return True


def check_runner_module(spec: str, module_name: str, flag: str = "--runner") -> None:
    """A plug-in runner's module (`module:factory`) exists on sys.path, which the runner's own process
    inherits (runners/isolate/runner.py passes it as PYTHONPATH)."""
    if not module_found(module_name):
        raise InputError(f"{flag} {spec!r}: module '{module_name}' cannot be imported (no such module on the "
                         "Python path)", "an importable Python module",
                         "install the module or put its directory on PYTHONPATH")


def check_exec_needs_pte(command: str, runner: str | None, pte: str | None) -> None:
    """A runner binary (`runner`) runs a .pte: `check` and `golden verify` with `--runner exec:...` need --pte."""
    if not pte:
        raise InputError(f"{command} --runner {runner} without --pte", "the .pte file the binary runs",
                         "pass --pte FILE (export one with `eagle3-check export -o FILE.pte`)")
