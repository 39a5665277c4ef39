"""RecordingProgram over graph-owned outputs: an input that is a view of an earlier output buffer
is recorded as it was fed, before the call overwrites that buffer (the CUDA-graph discipline,
emulated on CPU by `GraphedProgram(..., "emulate")`). Recorded after the call, the chain steps'
features read the NEW g and `check`'s call-protocol audit failed every request on the H200."""

from __future__ import annotations

import pytest

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.program.cuda_graph import GraphedProgram
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.device_loop import DeviceRunner
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import PASS
from eagle3_check.tokenizer import Tokenizer


@pytest.mark.parametrize("runner", [ReferenceRunner(), DeviceRunner()], ids=["reference-runner", "device-runner"])
def test_check_over_emulated_graph_outputs_passes_the_call_audit(hf_reference, runner):
    fixture = load_fixture()
    program = GraphedProgram(EagerBackend.from_fixture(fixture), "emulate")
    report = run_check(program, Tokenizer.load(fixture.tokenizer_path), hf_reference, fixture.prompts()[:2],
                       RunOptions(max_new_tokens=16), tolerance_for("float32"), runner=runner)
    assert [o.verdict.status for o in report.outcomes] == [PASS, PASS], [o.verdict.message for o in report.outcomes]
