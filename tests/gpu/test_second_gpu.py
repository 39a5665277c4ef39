"""A program on the second GPU while the first is current: graphs must be captured on the
program's device (an empty graph on the wrong device replays nothing; found on a 2-GPU H200,
where `check --device cuda:1` failed every request). Needs two CUDA devices."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.program.cuda_graph import GraphedProgram
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.device_loop import DeviceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.tokenizer import Tokenizer

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2,
                       reason=f"needs 2 CUDA devices; found {torch.cuda.device_count()}"),
]


def test_graphs_on_cuda1_with_cuda0_current():
    fx = load_fixture("tiny-llama")
    torch.cuda.set_device(0)
    program = GraphedProgram(EagerBackend.from_fixture(fx, "cuda:1", "float32"))
    report = run_check(program, Tokenizer.load(fx.tokenizer_path), HFReference(fx.target_dir, "cuda:1", torch.float32),
                       fx.prompts()[:4], RunOptions(max_new_tokens=32), tolerance_for("float32"), runner=DeviceRunner())
    assert report.passed and report.counts()["identical"] == 4, [o.verdict.message for o in report.outcomes]
    assert program.verify_graphs.entries, "target_verify was never captured"
