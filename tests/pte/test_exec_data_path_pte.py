"""A runner binary on an `export --external-data` program gets its `.ptd` (`--data_path=FILE`, the
seed's flag): the fake seed runner records its argv and loads the program with that file, so a
binary that was not given it cannot run the program at all (it exits 1: "cannot be loaded")."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.fixtures.registry import Prompt  # noqa: E402
from eagle3_check.jobs.check.binary import run_exec_check  # noqa: E402
from eagle3_check.program.export import data_path_for  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend  # noqa: E402
from eagle3_check.runners.binary.runner import ExecRunner  # noqa: E402
from eagle3_check.runners.options import RunOptions  # noqa: E402

pytestmark = pytest.mark.pte

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "fixtures" / "fake_runners" / "fake_seed_runner.py"
PROMPT = [Prompt("capital", "The capital of France is")]


def _argvs(d: Path) -> list[list[str]]:
    return [json.loads(p.read_text()) for p in sorted(d.glob("argv-*.json"))]


def test_the_binary_gets_the_data_file_and_passes(ptd_pte_path, tokenizer, hf_reference, runner_writable,
                                                  monkeypatch):
    from binary_argv import gives

    tmp_path = runner_writable  # the binary writes its argv there (as root it runs as nobody)
    monkeypatch.setenv("FAKE_RUNNER_ARGV", str(tmp_path))
    ptd = data_path_for(ptd_pte_path)
    program = PteBackend(ptd_pte_path, ptd)
    report = run_exec_check(ExecRunner(f"exec:{sys.executable} {FAKE}"), program, tokenizer, hf_reference, PROMPT,
                            RunOptions(max_new_tokens=8))
    assert report.passed, report.outcomes[0].verdict.message
    (argv,) = _argvs(tmp_path)
    assert gives(argv, "--data_path", ptd) and gives(argv, "--model_path", ptd_pte_path), argv


def test_without_the_data_file_the_binary_cannot_load_it(ptd_pte_path, tokenizer, hf_reference, tmp_path):
    """What a binary not given the .ptd does (the debt this closes): an error exit, a failed request."""
    program = PteBackend(ptd_pte_path, data_path_for(ptd_pte_path))
    program.data_path = None  # as if the harness forgot it
    report = run_exec_check(ExecRunner(f"exec:{sys.executable} {FAKE}"), program, tokenizer, hf_reference, PROMPT,
                            RunOptions(max_new_tokens=8))
    v = report.outcomes[0].verdict
    assert not report.passed and "exit status 1" in v.message and "cannot be loaded" in v.message, v.message


def test_cli_refuses_a_template_without_a_place_for_the_data_file(ptd_pte_path, tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_RUNNER_ARGV": str(tmp_path)}
    cmd = [sys.executable, "-m", "eagle3_check.cli", "check", "--pte", str(ptd_pte_path), "--data-path",
           str(data_path_for(ptd_pte_path)), "--max-new-tokens", "4", "--runner",
           f"exec:{sys.executable} {FAKE} --model_path={{model_path}} --tokenizer_path={{tokenizer_path}}"]
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr[-2000:]
    assert p.stderr.count("\n") == 1 and "no {data_path} placeholder" in p.stderr, p.stderr
    assert not _argvs(tmp_path)  # refused before any request


def test_gate_all_k_probes_with_the_data_file(ptd_pte_path):
    """`gate --all-k` probes the load first: without the .ptd the probe failed and every K but the
    default was silently dropped."""
    from eagle3_check.jobs.gate.job import all_k as _all_k
    from eagle3_check.program.contract import read_metadata

    ptd = data_path_for(ptd_pte_path)
    lo, hi = read_metadata(PteBackend(ptd_pte_path, ptd).metadata()).k_range
    assert hi > lo and _all_k(str(ptd_pte_path), str(ptd)) == list(range(lo, hi + 1))
