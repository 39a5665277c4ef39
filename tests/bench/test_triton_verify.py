"""bench/triton_verify.py (the hand-fused Triton verify forward the H200 bench measures) on CPU:
tests/triton_verify_checks.py run by pytest in a fresh interpreter with TRITON_INTERPRET=1, which
must be set before triton is first imported (transformers' model code imports it, so not in this
process). The kernel checks run in make check; the whole-forward checks are slow (4 forwards
through the interpreter). Skipped, with the reason, where triton is not installed."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(importlib.util.find_spec("triton") is None,
                                reason="triton not installed: the fused verify kernels need it (pip install -e \".[bench]\")")


def run_checks(marker: str, checks: str = "triton_verify_checks.py") -> None:
    env = {**os.environ, "TRITON_INTERPRET": "1", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "pytest", str(ROOT / "tests" / checks), "-q",
                           "-p", "no:cacheprovider", "-m", marker], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout and "skipped" not in proc.stdout, proc.stdout[-2000:]


def test_kernels_match_torch_in_the_interpreter():
    run_checks("not slow")


@pytest.mark.slow
def test_fused_forward_matches_eager_in_the_interpreter():
    run_checks("slow")
