"""A hanging in-process runner is a FAIL naming the request and the limit; the report is still written
(issue 17 part 2: a per-request timeout, runners/watchdog.py)."""

from __future__ import annotations

import json
import threading
import time

import pytest

from eagle3_check.cli import main
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.judge.verdict import FAIL, PASS
from eagle3_check.program.contract import ProgramWrapper
from eagle3_check.runners.crash import RunCrash, guarded_run
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.runners.watchdog import TimeLimited, busy_reason

PROMPTS = [Prompt("hi", "Hi"), Prompt("count", "Count from one to ten."), Prompt("capital", "What is the capital?")]
OPTS = RunOptions(max_new_tokens=6)
LIMIT = 2.0  # in process: a passing request takes ~0.05 s; 2 s (40 times that) leaves room on a loaded machine
# through the CLI a plug-in runs in a child process of its own, and the limit also bounds that child's
# imports (runners/isolate/runner.py): 5 s leaves a loaded machine room for them
CLI_LIMIT = 5.0


def _wait_gone(name_part: str, seconds: float = 5.0) -> bool:
    """True once no thread whose name contains `name_part` is alive."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not any(name_part in t.name for t in threading.enumerate()):
            return True
        time.sleep(0.02)
    return False


class LoopsOnCount(ReferenceRunner):
    """On 'count': runs, then keeps calling the program forever (prints as it goes)."""

    def run(self, program, tokenizer, prompt, options):
        result = super().run(program, tokenizer, prompt, options)
        while prompt == "Count from one to ten.":
            print("still here")
            super().run(program, tokenizer, prompt, options)
        return result


def test_a_looping_runner_fails_its_request_names_it_and_stops_at_its_next_call(program, tokenizer, hf_reference):
    report = run_check(program, tokenizer, hf_reference, PROMPTS, OPTS, tolerance_for("float32"),
                       runner=TimeLimited(LoopsOnCount(), LIMIT))
    status = {o.prompt_id: o.verdict for o in report.outcomes}
    assert [o.prompt_id for o in report.outcomes] == ["hi", "count", "capital"]
    assert status["hi"].status == PASS and status["capital"].status == PASS, status
    msg = status["count"].message
    assert status["count"].status == FAIL and not report.passed
    assert msg.startswith("timeout: request 'count' timed out after 2 s (--request-timeout 2)"), msg
    assert "Fix:" in msg
    assert _wait_gone("run 'count'"), "the abandoned run never stopped (its program handle was not revoked)"

    class Prints(ReferenceRunner):
        def run(self, program, tokenizer, prompt, options):
            print("hello")
            return super().run(program, tokenizer, prompt, options)

    for _ in range(3):  # a later worker (perhaps with a reused thread ident) is still watched
        with pytest.raises(RunCrash, match="wrote 6 characters to stdout"):
            guarded_run(TimeLimited(Prints(), 30), program, tokenizer, "Hi", OPTS)


class Gate(ProgramWrapper):
    """prefill blocks until `release` is set, on the second request only (a hang in native code)."""

    def __init__(self, inner):
        super().__init__(inner)
        self.release, self.prefills = threading.Event(), 0

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, H]
        self.prefills += 1
        if self.prefills == 2:
            self.release.wait(30)
        return self.inner.prefill(tokens, positions)


def test_a_run_stuck_inside_a_program_call_leaves_the_program_busy_until_it_returns(program, tokenizer,
                                                                                     hf_reference):
    gated = Gate(program)
    report = run_check(gated, tokenizer, hf_reference, PROMPTS, OPTS, tolerance_for("float32"),
                       runner=TimeLimited(ReferenceRunner(), LIMIT))
    v = [o.verdict for o in report.outcomes]
    assert v[0].status == PASS and v[1].status == FAIL and v[2].status == FAIL
    assert "inside prefill" in v[1].message, v[1].message
    assert v[2].message.startswith("not run: the program is busy (request 'count' timed out after 2 s"), v[2].message
    assert "which has not returned" in v[2].message
    assert busy_reason(gated) is not None
    gated.release.set()
    assert _wait_gone("run 'count'")
    assert busy_reason(gated) is None  # the call returned: the program is usable again
    run = guarded_run(TimeLimited(ReferenceRunner(), 30), gated, tokenizer, "Hi", OPTS)
    assert run.tokens


def test_a_fast_run_is_unchanged_by_the_watchdog(program, tokenizer):
    direct = ReferenceRunner().run(program, tokenizer, "Hi", OPTS)
    guarded = guarded_run(TimeLimited(ReferenceRunner(), 30), program, tokenizer, "Hi", OPTS)
    assert guarded.tokens == direct.tokens and guarded.accepted == direct.accepted


def test_guarded_run_timeout_is_a_run_crash_naming_the_request(program, tokenizer):
    class Sleeps(ReferenceRunner):
        def run(self, program, tokenizer, prompt, options):
            time.sleep(1.5)
            return super().run(program, tokenizer, prompt, options)

    with pytest.raises(RunCrash, match=r"request 'x' timed out after 0.2 s"):
        guarded_run(TimeLimited(Sleeps(), 0.2), program, tokenizer, "Hi", OPTS, what="'x'")
    assert _wait_gone("run 'x'")


HANG = ("import threading, time\n"
        "from eagle3_check.runners.loop import ReferenceRunner\n"
        "RELEASE = threading.Event()\n"
        "class Hangs(ReferenceRunner):\n"
        "    def run(self, program, tokenizer, prompt, options):\n"
        "        if prompt == 'Hi':\n"
        "            RELEASE.wait(30)\n"
        "            print('late output of an abandoned run')\n"
        "        return super().run(program, tokenizer, prompt, options)\n")


def test_cli_check_json_names_the_timed_out_request_and_stays_valid(capsys, monkeypatch, tmp_path):
    (tmp_path / "hangplug.py").write_text(HANG)
    monkeypatch.syspath_prepend(str(tmp_path))
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": p.id, "text": p.text} for p in PROMPTS]}))
    rc = main(["check", "--fixture", "tiny-llama", "--runner", "hangplug:Hangs", "--prompts", str(prompts), "--max-new-tokens", "6",
               "--request-timeout", str(CLI_LIMIT), "--json"])
    import hangplug

    hangplug.RELEASE.set()  # the abandoned run wakes up and prints: that must not reach stdout
    assert _wait_gone("run 'hi'")
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert rc == 1 and "Traceback" not in out.err and "late output" not in out.out
    v = {r["prompt_id"]: r["verdict"] for r in report["requests"]}
    assert v["hi"]["status"] == FAIL and "request 'hi' timed out after 5 s" in v["hi"]["message"]
    assert v["count"]["status"] == PASS and v["capital"]["status"] == PASS


@pytest.mark.parametrize("value", ["0", "-3"], ids=["zero", "negative"])
def test_request_timeout_must_be_positive(value, capsys):
    rc = main(["check", "--fixture", "tiny-llama", "--request-timeout", value])
    err = capsys.readouterr().err
    assert rc == 2 and f"--request-timeout {value}" in err and err.count("\n") == 1


def test_a_hanging_suite_case_and_golden_prompt_fail_with_the_timeout(fixture, program, tokenizer, hf_reference):
    from eagle3_check.jobs.golden.file import GoldenKey, record_golden, run_golden
    from eagle3_check.jobs.suites.execute import SuiteEnv, run_case
    from eagle3_check.suites import suite_cases

    release = threading.Event()

    class Waits(ReferenceRunner):
        def run(self, program, tokenizer, prompt, options):
            release.wait(30)
            return super().run(program, tokenizer, prompt, options)

    env = SuiteEnv(lambda spec: program, tokenizer, hf_reference, [p.text for p in fixture.prompts()],
                   tolerance_for("float32"), fixture=fixture.name)
    case = suite_cases("budget")[0]
    got = run_case(case, env, TimeLimited(Waits(), 0.3))
    assert got.status == FAIL and f"request {case.name} timed out after 0.3 s" in got.message, got.message
    key = GoldenKey(fixture.name, "eager", "cpu", "float32", 4, 6)
    golden = record_golden(program, tokenizer, hf_reference, PROMPTS[:1], key, tolerance_for("float32"))
    runs = run_golden(program, tokenizer, golden, runner=TimeLimited(Waits(), 0.3))
    assert runs["hi"].stop_reason == "crashed" and "timed out after 0.3 s" in runs["hi"].notes[0]
    release.set()
    assert _wait_gone("run ")


@pytest.mark.parametrize("spec, given, want", [
    ("reference", None, None), ("device", None, None), ("eagle3_check.runners.loop:ReferenceRunner", None, None),
    ("my.plugin:make", None, 300.0), ("my.plugin:make", 12.0, 12.0), ("reference", 7.0, 7.0),
], ids=["reference", "device", "reference-by-path", "plugin-default", "plugin-given", "reference-given"])
def test_the_cli_limits_plug_ins_by_default_and_our_runners_only_when_asked(spec, given, want):
    from eagle3_check.jobs.common.context import limited
    from eagle3_check.runners.watchdog import with_limit

    runner = ReferenceRunner()
    got = limited(runner, spec, given)
    assert with_limit(got) == (runner, want)
