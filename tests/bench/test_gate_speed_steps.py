"""bench/gate_speed.py times the gate by wrapping named functions (its STEPS): each must still exist where
it names it, or the bench stops before the gate runs (a module moved under it: `recover_ids` did)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _steps():
    sys.path.insert(0, str(BENCH))
    try:
        import gate_speed
    finally:
        sys.path.remove(str(BENCH))
    return gate_speed.STEPS


@pytest.mark.parametrize("step, module, attr", _steps())
def test_every_timed_step_names_a_function_that_exists(step, module, attr):
    obj = importlib.import_module(module)
    for part in attr.split("."):
        assert hasattr(obj, part), f"{step}: {module}.{attr} is gone (bench/gate_speed.py STEPS)"
        obj = getattr(obj, part)
    assert callable(obj)
