"""Exact mode's CUDA kernels (Triton) on CPU, under Triton's interpreter: tests/exact_triton_checks.py
in a fresh interpreter with TRITON_INTERPRET=1. Triton is not installed by `make install` or CI (a
CUDA torch brings it), so this skips where it is absent; the product's split of K runs here forced to 2
and 3 slices on small shapes; on the H200 the same kernels run compiled in
`pytest -m gpu` (tests/exact/test_exact_kernels.py and tests/exact/test_exact_fixture.py, their cuda cases)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(importlib.util.find_spec("triton") is None, reason="needs triton (pip install triton)")
def test_triton_kernels_are_row_invariant_in_the_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path])}
    done = subprocess.run([sys.executable, str(ROOT / "tests" / "exact_triton_checks.py")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    assert done.stdout.count("row-invariant") == 4, done.stdout  # fp32 and bf16: the kernels, the split of K
