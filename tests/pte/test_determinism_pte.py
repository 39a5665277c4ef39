"""Determinism on the `.pte` backend: the same request gives identical tokens and stats (timings
aside), twice in one process with another request in between, and in a second process running
`eagle3-check run --pte FILE --json`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402
from eagle3_check.runners.loop import ReferenceRunner  # noqa: E402
from eagle3_check.runners.options import RunOptions  # noqa: E402

pytestmark = pytest.mark.pte

ROOT = Path(__file__).resolve().parents[2]


def stats(result: dict) -> dict:
    return {k: v for k, v in result.items() if k != "method_ms"}


def test_same_request_twice_in_one_process(pte_program, tokenizer):
    opts = RunOptions(max_new_tokens=20, chain_len=3)
    runner = ReferenceRunner()
    first = runner.run(pte_program, tokenizer, "Tell me about the sea.", opts).to_json()
    runner.run(pte_program, tokenizer, "Count from one to ten, slowly.", RunOptions(max_new_tokens=30))
    again = runner.run(pte_program, tokenizer, "Tell me about the sea.", opts).to_json()
    assert len(first["tokens"]) == 20 and first["rounds"] > 0
    assert stats(again) == stats(first)


def test_same_request_in_a_second_process(capsys, pte_path):
    request = ["run", "--pte", str(pte_path), "--prompt", "Tell me about the sea.", "--max-new-tokens", "20",
               "-k", "3", "--json"]
    assert main(request) == 0
    here = stats(json.loads(capsys.readouterr().out))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run([sys.executable, "-m", "eagle3_check.cli", *request], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert stats(json.loads(proc.stdout)) == here
    assert len(here["tokens"]) == 20
