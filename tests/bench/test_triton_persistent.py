"""bench/triton_splitk.py and bench/triton_persistent.py (the split-K products and the persistent
verify kernel the H200 bench measures) on CPU: tests/triton_persistent_checks.py run by pytest in a
fresh interpreter with TRITON_INTERPRET=1 (test_triton_verify.run_checks). Both are slow (the kernel
checks took 63 s on the loaded 2-core machine: the interpreter and its imports), so make check skips them. Skipped, with the reason, where triton is not installed."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_triton_verify import run_checks  # noqa: E402

pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="triton not installed: the persistent verify kernels need it (pip install -e \".[bench]\")")


@pytest.mark.slow
def test_splitk_kernel_and_refusals_in_the_interpreter():
    run_checks("not slow", "triton_persistent_checks.py")


@pytest.mark.slow
def test_persistent_forward_matches_fused_in_the_interpreter():
    run_checks("slow", "triton_persistent_checks.py")
