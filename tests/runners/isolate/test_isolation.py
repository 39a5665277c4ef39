"""The runner under test is isolated from the verdict (issue 17 part 2).

It runs on its own copy of the options (changing them changes nothing the verdict reads); a
`sys.exit()` inside it, output on stdout, tokens that are not Python ints, and a run that does
not call the program (or calls it out of DESIGN §2's protocol) are each a FAIL verdict with the
reason, never a crash, an early exit or a pass; `check --json` stays valid JSON."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from eagle3_check.cli import main
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.judge.verdict import FAIL, PASS
from eagle3_check.runners.crash import RunCrash, guarded_run, type_problem
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions

PROMPTS = [Prompt("hi", "Hi"), Prompt("hi-again", "Hi")]  # one length of printed text: "debug: running Hi\\n"
OPTS = RunOptions(max_new_tokens=8)


class ShrinksTheRequest(ReferenceRunner):
    """Sets options.max_new_tokens = 1 and answers that shorter request."""

    def run(self, program, tokenizer, prompt, options):
        options.max_new_tokens = 1
        return super().run(program, tokenizer, prompt, options)


class Exits(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        raise SystemExit(0)


class Prints(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        print("debug: running", prompt)
        return super().run(program, tokenizer, prompt, options)


class Retyped(ReferenceRunner):
    """The reference runner's right tokens, each converted by `convert` (float, numpy, tensor)."""

    def __init__(self, convert):
        super().__init__()
        self.convert = convert

    def run(self, program, tokenizer, prompt, options):
        run = super().run(program, tokenizer, prompt, options)
        return dataclasses.replace(run, tokens=[self.convert(t) for t in run.tokens])


class Replays(ReferenceRunner):
    """Never calls the program it is given: replays runs recorded earlier on another handle of it."""

    def __init__(self, program):
        super().__init__()
        self.other = program  # the unwrapped program, not the one the harness hands in
        self.ran = 0

    def run(self, program, tokenizer, prompt, options):
        self.ran += 1
        return super().run(self.other, tokenizer, prompt, options)


class StrayPrefill(ReferenceRunner):
    """Right tokens, then one more prefill of the prompt after the last round (out of protocol)."""

    def run(self, program, tokenizer, prompt, options):
        run = super().run(program, tokenizer, prompt, options)
        ids = run.prompt_ids
        program.prefill(torch.tensor([ids]), torch.arange(len(ids)))  # [1, L], [L]
        return run


def _check(program, tokenizer, hf_reference, runner, opts=OPTS):
    return run_check(program, tokenizer, hf_reference, PROMPTS, opts, tolerance_for("float32"), runner=runner)


def test_the_reference_runner_still_passes_every_audit(program, tokenizer, hf_reference):
    report = _check(program, tokenizer, hf_reference, ReferenceRunner())
    assert [o.verdict.status for o in report.outcomes] == [PASS, PASS], [o.verdict.message for o in report.outcomes]


def test_a_runner_that_changes_the_options_is_judged_on_the_request(program, tokenizer, hf_reference):
    opts = RunOptions(max_new_tokens=8)
    report = _check(program, tokenizer, hf_reference, ShrinksTheRequest(), opts)
    assert opts.max_new_tokens == 8  # the caller's options are untouched
    for o in report.outcomes:
        assert o.verdict.status == FAIL and len(o.run.tokens) == 1, o.verdict.message
    assert not report.passed


def test_guarded_run_hands_the_runner_copies(program, tokenizer):
    seen = {}

    class Keeps(ReferenceRunner):
        def run(self, program, tokenizer, prompt, options):
            seen["options"], seen["prompt"] = options, prompt
            prompt.append(99)
            return super().run(program, tokenizer, prompt[:-1], options)

    opts, ids = RunOptions(max_new_tokens=3), [2, 10, 11]
    guarded_run(Keeps(), program, tokenizer, ids, opts)
    assert seen["options"] == opts and seen["options"] is not opts
    assert ids == [2, 10, 11] and seen["prompt"] is not ids


@pytest.mark.parametrize("runner, reason", [
    pytest.param(Exits(), "crashed: the runner called sys.exit(0) (SystemExit)", id="sys-exit"),
    pytest.param(Prints(), "contract violated: the runner wrote 18 characters to stdout", id="prints-to-stdout"),
    pytest.param(Retyped(float), "contract violated: RunResult.tokens[0] is float", id="float-tokens"),
    pytest.param(Retyped(np.int64), "contract violated: RunResult.tokens[0] is int64", id="numpy-tokens"),
    pytest.param(Retyped(torch.tensor), "contract violated: RunResult.tokens[0] is Tensor", id="tensor-tokens"),
    pytest.param(Retyped(bool), "contract violated: RunResult.tokens[0] is bool", id="bool-tokens"),
])
def test_a_hostile_runner_is_a_fail_with_the_reason(runner, reason, program, tokenizer, hf_reference, capsys):
    report = _check(program, tokenizer, hf_reference, runner)
    assert capsys.readouterr().out == ""  # nothing reached stdout
    for o in report.outcomes:
        assert o.verdict.status == FAIL and o.verdict.message.startswith(reason), o.verdict.message
        assert "\n" not in o.verdict.message
    json.dumps(report.to_json())  # serialisable: no numpy or tensor reached the report


def test_the_printed_text_is_in_the_reason(program, tokenizer, hf_reference):
    report = _check(program, tokenizer, hf_reference, Prints())
    assert "'debug: running Hi\\n'" in report.outcomes[0].verdict.message


@pytest.mark.parametrize("field, value, want", [
    ("rounds", 2.0, "RunResult.rounds is float (2.0)"),
    ("k", np.int64(4), "RunResult.k is int64"),
    ("accepted", [1, np.int32(0)], "RunResult.accepted[1] is int32"),
    ("prompt_ids", torch.tensor([2, 3]), "RunResult.prompt_ids is Tensor; expected a list"),
    ("tokens", (5, 6), "RunResult.tokens is tuple; expected a list"),
], ids=["float-rounds", "numpy-k", "numpy-accepted", "tensor-prompt-ids", "tuple-tokens"])
def test_type_problem_names_the_field(program, tokenizer, field, value, want):
    run = ReferenceRunner().run(program, tokenizer, "Hi", RunOptions(max_new_tokens=3))
    assert type_problem(run) is None
    assert type_problem(dataclasses.replace(run, **{field: value})).startswith(want)


def test_a_runner_that_never_calls_the_program_fails(program, tokenizer, hf_reference):
    runner = Replays(program)
    report = _check(program, tokenizer, hf_reference, runner)
    assert runner.ran == 2
    for o in report.outcomes:  # right tokens, but none of them came from the program it was given
        assert o.verdict.status == FAIL, o.verdict.message
        assert o.verdict.message.startswith("call protocol: 0 target_verify calls for"), o.verdict.message


def test_a_runner_that_calls_the_program_out_of_protocol_fails(program, tokenizer, hf_reference):
    report = _check(program, tokenizer, hf_reference, StrayPrefill())
    for o in report.outcomes:
        assert o.verdict.status == FAIL and o.verdict.message.startswith("call protocol: "), o.verdict.message


def test_guarded_run_fails_the_runners_own_keyboard_interrupt_and_lets_ctrl_c_through(program, tokenizer):
    """A KeyboardInterrupt the runner raises is its request's failure; a SIGINT of the harness (under the
    front end's handler, runners/interrupt.py) stops the run."""
    import os
    import signal

    from eagle3_check.runners.interrupt import harness_sigint

    class Interrupted(ReferenceRunner):
        def run(self, *a):
            raise KeyboardInterrupt

    class CtrlC(ReferenceRunner):
        def run(self, *a):
            os.kill(os.getpid(), signal.SIGINT)  # as a terminal's Ctrl-C reaches the harness
            return super().run(*a)

    with pytest.raises(RunCrash, match="the runner raised KeyboardInterrupt"):
        guarded_run(Interrupted(), program, tokenizer, "Hi", OPTS)
    with harness_sigint(), pytest.raises(KeyboardInterrupt):
        guarded_run(CtrlC(), program, tokenizer, "Hi", OPTS)
    with pytest.raises(RunCrash, match="sys.exit"):
        guarded_run(Exits(), program, tokenizer, "Hi", OPTS)


PLUGIN = ("import sys\n"
          "from eagle3_check.runners.loop import ReferenceRunner\n"
          "class Exits(ReferenceRunner):\n"
          "    def run(self, program, tokenizer, prompt, options):\n"
          "        sys.exit(0)\n"
          "class Prints(ReferenceRunner):\n"
          "    def run(self, program, tokenizer, prompt, options):\n"
          "        print('hello from the runner')\n"
          "        return super().run(program, tokenizer, prompt, options)\n"
          "class Shrinks(ReferenceRunner):\n"
          "    def run(self, program, tokenizer, prompt, options):\n"
          "        options.max_new_tokens = 1\n"
          "        return super().run(program, tokenizer, prompt, options)\n")


@pytest.mark.parametrize("factory, reason", [
    ("hostile:Exits", "crashed: the runner called sys.exit(0)"),
    ("hostile:Prints", "contract violated: the runner wrote"),
    ("hostile:Shrinks", ""),
], ids=["sys-exit", "prints", "shrinks-max-new"])
def test_cli_check_json_stays_valid_and_exits_1(factory, reason, capsys, monkeypatch, tmp_path):
    (tmp_path / "hostile.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": p.id, "text": p.text} for p in PROMPTS]}))
    rc = main(["check", "--fixture", "tiny-llama", "--runner", factory, "--prompts", str(prompts), "--max-new-tokens", "8", "--json",
               "--in-process"])  # the in-process guard (a plug-in's own process: tests/runners/isolate/test_isolation_probes.py)
    out = capsys.readouterr()
    report = json.loads(out.out)  # stdout is the report and nothing else
    assert rc == 1 and not report["passed"] and "Traceback" not in out.err
    assert all(r["verdict"]["status"] == FAIL and r["verdict"]["message"].startswith(reason)
               for r in report["requests"])


def test_sys_exit_in_a_suite_case_and_in_golden_verify_is_a_finding(fixture, program, tokenizer, hf_reference):
    from eagle3_check.jobs.golden.file import GoldenKey, record_golden, run_golden
    from eagle3_check.jobs.suites.execute import SuiteEnv, run_case
    from eagle3_check.suites import suite_cases

    env = SuiteEnv(lambda spec: program, tokenizer, hf_reference, [p.text for p in fixture.prompts()],
                   tolerance_for("float32"), fixture=fixture.name)
    got = run_case(suite_cases("budget")[0], env, Exits())
    assert got.status == FAIL and "sys.exit(0)" in got.message, got.message
    key = GoldenKey(fixture.name, "eager", "cpu", "float32", 4, 6)
    golden = record_golden(program, tokenizer, hf_reference, PROMPTS[:1], key, tolerance_for("float32"))
    runs = run_golden(program, tokenizer, golden, runner=Exits())
    assert runs["hi"].stop_reason == "crashed" and "sys.exit(0)" in runs["hi"].notes[0]
