"""A runner that crashes or a program that breaks the contract fails its request (issue 11 part 7).

Each is a FAIL verdict with the reason in the report (table, JSON, JUnit), exit 1, and the
other requests are still judged; option errors found before any work stay exit 2."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from eagle3_check.cli import main
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.prompt_set import format_table, run_check
from eagle3_check.jobs.gate.gate import GateInputs, run_gate
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.judge.verdict import FAIL, PASS
from eagle3_check.program.contract import ProgramWrapper
from eagle3_check.report.junit import to_xml
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.suites import suite_cases

PROMPTS = [Prompt("hi", "Hi"), Prompt("count", "Count from one to ten."), Prompt("capital", "What is the capital?")]
OPTS = RunOptions(max_new_tokens=6)


class BadVerify(ProgramWrapper):
    """target_verify drops its last row ([1, C-1] ids): a contract violation, on the first request only."""

    def __init__(self, inner):
        super().__init__(inner)
        self.prefills = 0

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        self.prefills += 1
        return self.inner.prefill(tokens, positions)

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C - 1] (broken), [1, C, H]
        ids, feature = self.inner.target_verify(tokens, positions)
        return (ids[:, :-1], feature) if self.prefills == 1 else (ids, feature)


class CrashOnCount(ReferenceRunner):
    """Raises ZeroDivisionError on the 'count' prompt only."""

    def run(self, program, tokenizer, prompt, options):
        if prompt == "Count from one to ten.":
            return 1 // 0
        return super().run(program, tokenizer, prompt, options)


class NoneOnHi(ReferenceRunner):
    """Returns None (not a RunResult) on the 'hi' prompt only."""

    def run(self, program, tokenizer, prompt, options):
        return None if prompt == "Hi" else super().run(program, tokenizer, prompt, options)


class BreaksTheProgram(ReferenceRunner):
    """The reference runner on a program whose target_verify breaks the contract on the first request
    (it wraps the program it is given: the harness audits the calls on that one)."""

    requests = 0

    def run(self, program, tokenizer, prompt, options):
        self.requests += 1
        return super().run(BadVerify(program) if self.requests == 1 else program, tokenizer, prompt, options)


@pytest.mark.parametrize("runner, bad, reason", [
    pytest.param(CrashOnCount(), "count", "crashed: ZeroDivisionError: integer division or modulo by zero",
                 id="runner-raises-ZeroDivisionError"),
    pytest.param(NoneOnHi(), "hi", "contract violated: the runner's run() returned NoneType", id="runner-returns-None"),
    pytest.param(BreaksTheProgram(), "hi", "ContractViolation: contract violated: target_verify returned ids [1, ",
                 id="program-target_verify-wrong-shape"),
])
def test_a_crash_fails_its_request_and_the_others_are_still_judged(runner, bad, reason, program, tokenizer,
                                                                    hf_reference):
    report = run_check(program, tokenizer, hf_reference, PROMPTS, OPTS, tolerance_for("float32"), runner=runner)
    status = {o.prompt_id: o.verdict.status for o in report.outcomes}
    assert status == {p.id: FAIL if p.id == bad else PASS for p in PROMPTS}
    failed = next(o for o in report.outcomes if o.prompt_id == bad)
    assert failed.verdict.message.startswith(reason), failed.verdict.message
    assert "\n" not in failed.verdict.message
    assert not report.passed
    table = format_table(report)
    assert reason in table and "crashed" in table.split(reason)[0]  # the stop column says crashed
    assert json.loads(json.dumps(report.to_json()))["requests"][[p.id for p in PROMPTS].index(bad)][
        "verdict"]["message"] == failed.verdict.message
    assert report.tau > 0  # the crashed run's empty placeholder does not drag tau below zero


def _plugin(tmp_path, monkeypatch, body: str) -> str:
    (tmp_path / "crashy.py").write_text(body)
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": p.id, "text": p.text} for p in PROMPTS]}))
    return str(prompts)


ZERO = ("from eagle3_check.runners.loop import ReferenceRunner\n"
        "class Crashy(ReferenceRunner):\n"
        "    def run(self, program, tokenizer, prompt, options):\n"
        "        if prompt.startswith('Count'):\n"
        "            return 1 / 0\n"
        "        return super().run(program, tokenizer, prompt, options)\n"
        "class Nothing:\n"
        "    def run(self, *a):\n"
        "        return None\n"
        "class Dict:\n"
        "    def run(self, *a):\n"
        "        return {'tokens': [1, 2, 3]}\n")


@pytest.mark.parametrize("factory, fails, reason, table", [
    ("crashy:Crashy", 1, "crashed: ZeroDivisionError: division by zero", True),
    ("crashy:Nothing", 3, "contract violated: the runner's run() returned NoneType", False),
    ("crashy:Dict", 3, "contract violated: the runner's run() returned dict", False),
])
def test_cli_check_with_a_crashing_plug_in_exits_1_with_the_reason(factory, fails, reason, table, capsys, monkeypatch,
                                                                  tmp_path):
    """The JSON names each reason; the table (one more run of ~6 s: once) prints the verdict's message as
    the JSON holds it, whatever the reason."""
    prompts = _plugin(tmp_path, monkeypatch, ZERO)
    rc = main(["check", "--fixture", "tiny-llama", "--runner", factory, "--prompts", prompts, "--max-new-tokens", "6", "--json"])
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert rc == 1 and "Traceback" not in out.err
    verdicts = [r["verdict"] for r in report["requests"]]
    assert len(verdicts) == 3 and sum(v["status"] == FAIL for v in verdicts) == fails
    assert any(v["message"].startswith(reason) for v in verdicts)
    if table:
        rc = main(["check", "--fixture", "tiny-llama", "--runner", factory, "--prompts", prompts, "--max-new-tokens", "6",
                   "--no-progress"])
        assert rc == 1 and reason in capsys.readouterr().out  # the table names it too


def test_an_option_error_before_any_work_is_still_exit_2(capsys, monkeypatch, tmp_path):
    prompts = _plugin(tmp_path, monkeypatch, ZERO)
    rc = main(["check", "--fixture", "tiny-llama", "--runner", "crashy:Crashy", "--prompts", prompts, "--max-new-tokens", "0"])
    assert rc == 2 and "max new tokens = 0" in capsys.readouterr().err


def test_suite_case_with_a_crashing_or_none_runner_fails_with_the_reason(suite_env_default):
    case = suite_cases("budget")[0]
    got = run_case_with(case, suite_env_default, CrashOnCountAlways())
    assert got.status == FAIL and got.message.startswith("crashed: ZeroDivisionError"), got.message
    got = run_case_with(case, suite_env_default, NoneAlways())
    assert got.status == FAIL and "returned NoneType" in got.message, got.message


class CrashOnCountAlways(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        return 1 // 0


class NoneAlways(ReferenceRunner):
    def run(self, program, tokenizer, prompt, options):
        return None


def run_case_with(case, env, runner):
    from eagle3_check.jobs.suites.execute import run_case

    return run_case(case, env, runner)


@pytest.fixture(scope="module")
def suite_env_default(fixture, program, tokenizer, hf_reference):
    from eagle3_check.jobs.suites.execute import SuiteEnv

    return SuiteEnv(lambda spec: program, tokenizer, hf_reference, [p.text for p in fixture.prompts()], tolerance_for("float32"),
                    fixture=fixture.name)


def test_gate_with_a_contract_breaking_program_fails_with_the_reason_in_junit(program, tokenizer, fixture,
                                                                           hf_reference):
    inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir, prompts=PROMPTS,
                        options=OPTS, suite=None, hf_reference=hf_reference)
    report = run_gate(inputs, program=BadVerify(program))
    assert not report.passed
    chk = report.check("runner vs HF reference")
    assert chk.status == FAIL and "contract violated: target_verify returned ids" in chk.message
    root = ET.fromstring(to_xml(report.junit_suites()).split("\n", 1)[1])
    fails = [f.get("message") for f in root.iter("failure")]
    assert any("contract violated: target_verify" in m for m in fails)


class CrashingVerify(ProgramWrapper):
    """A program whose target_verify raises a plain RuntimeError (e.g. a kernel failure)."""

    def target_verify(self, tokens, positions):  # [1, C], [C] -> raises
        raise RuntimeError("CUDA error: an illegal memory access was encountered")


def test_gate_with_a_program_that_raises_fails_instead_of_a_traceback(program, tokenizer, fixture, hf_reference):
    inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir, prompts=PROMPTS[:2],
                        options=OPTS, suite=None, hf_reference=hf_reference)
    report = run_gate(inputs, program=CrashingVerify(program))
    chk = report.check("runner vs HF reference")
    assert not report.passed and chk.status == FAIL
    assert "crashed: RuntimeError: CUDA error: an illegal memory access" in chk.message


def test_golden_verify_with_a_crashing_runner_reports_a_crashed_diff(program, tokenizer):
    from eagle3_check.jobs.golden.file import golden_root, load_golden
    from eagle3_check.jobs.golden.verify import gate_goldens

    class CrashOnSecond(ReferenceRunner):  # goldens re-run their recorded prompt ids: crash by call order
        calls = 0

        def run(self, program, tokenizer, prompt, options):
            self.calls += 1
            return 1 // 0 if self.calls == 2 else super().run(program, tokenizer, prompt, options)

    path = golden_root() / "tiny-llama__eager__cpu__float32__k4__n48.json"
    out = gate_goldens([path], runner=CrashOnSecond(), build=lambda key: (program, tokenizer))
    second = load_golden(path).prompts[1].prompt_id
    crashed = [d for d in out.golden_diffs if d.field == "crashed"]
    assert not out.passed and len(crashed) == 1 and crashed[0].prompt_id == second
    assert "crashed: ZeroDivisionError" in crashed[0].message
    assert [d for d in out.golden_diffs if d.field != "crashed"] == []  # the other prompts still verify
