"""`--threads N`: CPU torch threads of check / run (default 1: docs/real-models.md, Threads)."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.cli import main


@pytest.fixture
def restore_threads(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    yield
    torch.set_num_threads(before)


@pytest.mark.parametrize("threads,want", [(None, 1), ("2", 2)], ids=["default-one", "two"])
def test_run_sets_the_torch_threads(capsys, restore_threads, threads, want):
    torch.set_num_threads(3)
    argv = ["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "2"] + (["--threads", threads] if threads else [])
    assert main(argv) == 0
    assert torch.get_num_threads() == want


@pytest.mark.parametrize("cmd", ["run", "check"])
def test_zero_threads_is_a_one_line_error(capsys, cmd):
    argv = [cmd, "--fixture", "tiny-llama", "--threads", "0"]
    assert main([*argv, "--prompt", "Hi"] if cmd == "run" else argv) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: --threads 0") and "\n" not in err
