"""Determinism: the same request gives identical tokens and stats (timings aside), twice in one
process (with another request in between, so no cache state leaks) and in two processes: this
one and a fresh one running the CLI with --json (same thread count, so the same reductions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from eagle3_check.cli import main
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions

ROOT = Path(__file__).resolve().parents[2]
REQUEST = ["run", "--fixture", "tiny-llama", "--prompt", "Tell me about the sea.", "--max-new-tokens", "24", "-k", "3", "--json"]
TIMINGS = ("method_ms",)


def stats(result: dict) -> dict:
    """Everything a run reports except wall-clock timings."""
    return {k: v for k, v in result.items() if k not in TIMINGS}


def test_same_request_twice_in_one_process(program, tokenizer):
    opts = RunOptions(max_new_tokens=24, chain_len=3)
    runner = ReferenceRunner()
    first = runner.run(program, tokenizer, "Tell me about the sea.", opts).to_json()
    other = runner.run(program, tokenizer, "Count from one to ten, slowly.", RunOptions(max_new_tokens=40))
    again = runner.run(program, tokenizer, "Tell me about the sea.", opts).to_json()
    assert other.tokens != first["tokens"]  # the request in between really differs
    assert len(first["tokens"]) == 24 and first["rounds"] > 0
    assert stats(again) == stats(first)


def cli_json(capsys) -> dict:
    assert main(REQUEST) == 0
    return json.loads(capsys.readouterr().out)


def test_same_request_twice_through_the_cli_and_in_a_second_process(capsys):
    in_process = [stats(cli_json(capsys)) for _ in range(2)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}  # the test session runs torch on one thread too (conftest)
    proc = subprocess.run([sys.executable, "-m", "eagle3_check.cli", *REQUEST], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    fresh = stats(json.loads(proc.stdout))
    assert in_process[0] == in_process[1]
    assert fresh == in_process[0]
    assert len(fresh["tokens"]) == 24 and fresh["method_calls"]["target_verify"] == fresh["rounds"]
