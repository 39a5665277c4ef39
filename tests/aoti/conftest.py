"""Shared AOTI fixtures: tiny-llama compiled with AOTInductor for CPU once (C++ kernels: about a
minute a method on two cores), cached on disk under `.cache/pt2/` like the `.pte` exports
(tests/export_cache.py; the key hashes the fixture files, the modules that shape the program and the
torch version). The tests skip, with the reason, where no C++ compiler is on PATH."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from eagle3_check.program.compiled import compile_unavailable
from tests.export_cache import cache_key, cached_export

SHAPING = ["program/aoti_export.py", "program/aoti_weights.py", "jobs/common/aoti.py", "program/export.py", "program/sidecar.py", "program/target.py",
           "program/draft.py", "program/draft_config.py", "program/rope.py", "program/checkpoint.py",
           "program/speculator.py", "program/eager.py"]


def _cli_export(out: Path) -> None:
    """The package as the CLI compiles it: `export --aoti --device cpu` (jobs/common/aoti.export_aoti)."""
    from eagle3_check.cli import main

    assert main(["export", "--aoti", "--device", "cpu", "--fixture", "tiny-llama", "-o", str(out),
                 "--no-progress"]) == 0


@pytest.fixture(scope="session")
def aoti_path(fixture, tmp_path_factory) -> Path:
    """tiny-llama (float32, the 2-input target_verify) as a CPU AOTI package with its sidecar, compiled
    by `eagle3-check export --aoti --device cpu`."""
    reason = compile_unavailable("cpu")
    if reason:
        pytest.skip(reason)
    return cached_export("tiny-llama", cache_key(fixture, f"aoti cpu {torch.__version__}", SHAPING), _cli_export,
                         tmp_path_factory, suffix=".pt2")


@pytest.fixture(scope="session")
def aoti_program(aoti_path):
    from eagle3_check.program.aoti_backend import AotiBackend

    return AotiBackend(aoti_path)


def _cli_export_external(out: Path) -> None:
    """`export --aoti --aoti-weights external --device cpu`: the kernels only (program/aoti_weights.py)."""
    from eagle3_check.cli import main

    assert main(["export", "--aoti", "--aoti-weights", "external", "--device", "cpu", "--fixture", "tiny-llama",
                 "-o", str(out), "--no-progress"]) == 0


@pytest.fixture(scope="session")
def aoti_external_path(fixture, tmp_path_factory) -> Path:
    """tiny-llama as a CPU AOTI package without its weights, with its sidecar (about 35 s of compile)."""
    reason = compile_unavailable("cpu")
    if reason:
        pytest.skip(reason)
    return cached_export("tiny-llama", cache_key(fixture, f"aoti cpu external {torch.__version__}", SHAPING),
                         _cli_export_external, tmp_path_factory, suffix=".pt2")
