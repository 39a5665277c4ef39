"""The runner seam (runners/seam.py): every kind of runner answers `capabilities` and `observe`, and
a spec is classified before anything loads it."""

from __future__ import annotations

import pytest

from eagle3_check.runners.binary.runner import ExecRunner, ProcessRun, observed
from eagle3_check.runners.in_process import InProcess, as_runner, capabilities
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.runners.seam import BINARY, IN_PROCESS, ISOLATED, kind_of
from eagle3_check.suites import toy

SEED_OUT = (b"Prompt tokens: 3, chain K=2, max_new=4\nab\n[timing] verify=1ms draft=1ms over 2 rounds "
            b"(0.5 / 0.5 ms per round)\n\n--- EAGLE-3 speculative decode ---\ngenerated 3 tokens in 2 rounds "
            b"(tau=1.000)\n")


@pytest.mark.parametrize("spec, isolated, want", [
    ("exec:./runner --flag", False, BINARY), ("reference", False, IN_PROCESS), (None, False, IN_PROCESS),
    ("my_pkg:make", True, ISOLATED), ("exec:./runner", True, BINARY),  # a binary is a process already
])
def test_a_spec_is_classified_by_its_form_alone(spec, isolated, want):
    got = kind_of(spec, isolated)
    assert got == want
    assert got.in_process == (want is not BINARY) and got.program_file == (want is BINARY)


def test_an_in_process_runner_is_observed_with_its_call_log(tokenizer):
    program = toy.ToyProgram(max_seq_len=64, min_prefill=1, max_prefill=32)
    runner = as_runner(ReferenceRunner())
    assert isinstance(runner, InProcess)
    caps = runner.capabilities
    assert (caps.kind, caps.call_log, caps.forced_acceptance, caps.token_ids, caps.profile) == \
        ("in-process", True, True, True, "design")
    obs = runner.observe(program, tokenizer, [1, 5, 7], RunOptions(max_new_tokens=6, raw=True))
    assert obs.failure is None and obs.tokens == list(obs.run.tokens) and len(obs.tokens) == 6
    assert obs.rounds == obs.run.rounds and obs.tau == obs.run.tau and obs.text is None
    assert [c.method for c in obs.calls.calls][:1] == ["prefill"]  # the call log: the program really ran


def test_a_crash_is_the_observations_failure_never_an_exception(tokenizer):
    class Crashes:
        def run(self, program, tokenizer, prompt, options):
            raise ZeroDivisionError("division by zero")

    program = toy.ToyProgram(max_seq_len=64, min_prefill=1, max_prefill=32)
    obs = as_runner(Crashes()).observe(program, tokenizer, [1, 5, 7], RunOptions(max_new_tokens=4, raw=True))
    assert obs.tokens is None and obs.failure == "crashed: ZeroDivisionError: division by zero"


def test_a_binary_is_the_seam_itself_and_says_what_it_cannot_show(tmp_path):
    exe = tmp_path / "runner"
    exe.write_text("#!/bin/sh\necho hi\n")
    exe.chmod(0o755)
    runner = ExecRunner(f"exec:{exe}", profile="k-runtime")
    assert as_runner(runner) is runner and capabilities(runner) == runner.capabilities
    caps = runner.capabilities
    assert (caps.call_log, caps.forced_acceptance, caps.token_ids, caps.program_file) == (False, False, False, True)
    assert (caps.profile, caps.chunked_prefill) == ("k-runtime", False)


@pytest.mark.parametrize("code, stdout, stderr, failure, ids", [
    (0, SEED_OUT, b"", None, None),
    (0, SEED_OUT, b"[ids] 4,5,6\n", None, [4, 5, 6]),
    (1, b"", b"E [main.cpp:9] no model\n", "exit status 1; stderr: E [main.cpp:9] no model", None),
    (None, b"", b"", "hung: no exit within the 3 s timeout (process group killed)", None),
    (0, b"hello\n", b"", "output: stdout starts with b'hello', not 'Prompt tokens: L, chain K=k, max_new=m'", None),
], ids=["text", "ids", "error-exit", "hang", "off-protocol"])
def test_a_binarys_process_is_observed(code, stdout, stderr, failure, ids):
    obs = observed(ProcessRun(["r"], code, stdout, stderr, 0.1), 3.0)
    assert obs.failure == failure and obs.tokens == ids and obs.calls is None
    if failure is None:
        assert (obs.text, obs.rounds, obs.tau, obs.output.tokens) == (b"ab", 2, 1.0, 3)
    else:
        assert obs.output is None and obs.process.returncode == code
