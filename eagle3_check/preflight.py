"""Checks that run before torch is imported: is there a CUDA driver, are the program flags a pair.

A usage error must cost what `--help` costs (issue 32), so nothing here imports torch or loads a
model: `--device cuda` is refused by looking for the NVIDIA driver (its /proc entry, or the
libcuda a CUDA torch loads), not by asking torch. torch still decides once it is imported
(program/eager.py `resolve_device`): a driver without a usable GPU is refused there.
"""

from __future__ import annotations

import ctypes.util
import os

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
