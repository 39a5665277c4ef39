"""`--runner exec:...` end to end, with the fake seed runner (fixtures/fake_runners/): a binary
speaking the seed's flags and stdout, driving the session's `.pte` through our ReferenceRunner.
The correct fake is judged identical (by bytes, and by ids when it prints them); each seeded
bug fails with a reason that names it; suites a binary cannot take skip with the reason.

Each fake run is a fresh Python process (imports torch and executorch: seconds), so requests
are few and short.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.fixtures.registry import Prompt  # noqa: E402
from eagle3_check.jobs.check.binary import run_exec_check  # noqa: E402
from eagle3_check.jobs.golden.binary import verify_exec_goldens  # noqa: E402
from eagle3_check.jobs.golden.file import golden_root, load_golden  # noqa: E402
from eagle3_check.jobs.suites.binary import run_exec_suite  # noqa: E402
from eagle3_check.jobs.suites.execute import SuiteEnv  # noqa: E402
from eagle3_check.judge.tolerance import tolerance_for  # noqa: E402
from eagle3_check.runners.binary.runner import ExecRunner  # noqa: E402
from eagle3_check.runners.options import RunOptions  # noqa: E402
from eagle3_check.suites import suite_cases  # noqa: E402

pytestmark = pytest.mark.pte

ROOT = Path(__file__).resolve().parents[2]
FAKE = ROOT / "fixtures" / "fake_runners" / "fake_seed_runner.py"
PROMPT = [Prompt("capital", "The capital of France is")]


def fake(*flags: str, timeout: float = 300) -> ExecRunner:
    return ExecRunner(f"exec:{sys.executable} {FAKE} {' '.join(flags)}", timeout=timeout)


def check(runner, pte_program, tokenizer, hf_reference, **opts):
    return run_exec_check(runner, pte_program, tokenizer, hf_reference, PROMPT,
                          RunOptions(**{"max_new_tokens": 12, **opts}))


@pytest.mark.parametrize("flags,mode", [((), "bytes"), (("--fake_ids=true",), "ids")], ids=["bytes", "ids"])
def test_the_correct_fake_passes(pte_program, tokenizer, hf_reference, flags, mode):
    report = check(fake(*flags), pte_program, tokenizer, hf_reference)
    o = report.outcomes[0]
    assert report.passed, o.verdict.message
    assert o.verdict.mode == mode and report.info["judged_by"] == {mode: 1}
    assert o.output.tokens == 12 and o.process.returncode == 0


# (bug, extra options, a phrase the verdict must carry)
BUGS = [
    ("extra-token", {}, "length: binary emitted 13 tokens, rules fix 12 (max_new)"),
    ("garbage", {}, "bytes differ at offset"),
    ("crash", {}, "crashed: killed by signal 6 (SIGABRT)"),
    ("hang", {}, "hung: no exit within the 3 s timeout"),  # it sleeps before any import: 3 s is ample
    ("error-exit", {}, "exit status 1; stderr: E [fake_seed_runner.py:0] seeded error exit"),
]


@pytest.mark.parametrize("bug,opts,phrase", BUGS, ids=[b[0] for b in BUGS])
def test_each_seeded_bug_fails_with_its_reason(pte_program, tokenizer, hf_reference, bug, opts, phrase):
    report = check(fake(f"--fake_bug={bug}", timeout=3 if bug == "hang" else 300), pte_program, tokenizer,
                   hf_reference, **opts)
    v = report.outcomes[0].verdict
    assert not report.passed and v.status == "fail"
    assert phrase in v.message, v.message


def test_ignored_stops_fail(pte_program, tokenizer, hf_reference, program):
    """The stop id is the reference's 4th token: the right run ends there, the buggy one goes on."""
    from eagle3_check.runners.options import prompt_ids

    opts = RunOptions(max_new_tokens=12)
    ref = hf_reference.greedy(prompt_ids(tokenizer, PROMPT[0].text, opts), 12).tokens
    stop = ref[3]
    first = ref.index(stop) + 1
    good = check(fake(), pte_program, tokenizer, hf_reference, stop_ids=(1, 50, 106, stop))
    assert good.passed and good.outcomes[0].output.tokens == first, good.outcomes[0].verdict.message
    bad = check(fake("--fake_bug=ignore-stops"), pte_program, tokenizer, hf_reference, stop_ids=(1, 50, 106, stop))
    assert f"rules fix {first} (stop)" in bad.outcomes[0].verdict.message


def test_cli_check_with_the_fake_executable(pte_path, tmp_path, capfd, monkeypatch):
    """The done criterion: `check --runner exec:fixtures/fake_runners/fake_seed_runner` passes. The CLI's main
    runs in this process (its fd 1 and 2 captured, the binary's relative path from the repository): one Python
    start and import of torch, transformers and the runtime fewer than `python -m eagle3_check.cli` (~5 s)."""
    from eagle3_check.cli import main

    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": p.id, "text": p.text} for p in PROMPT]}))
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("PYTHON", sys.executable)
    rc = main(["check", "--pte", str(pte_path), "--prompts", str(prompts), "--max-new-tokens", "8", "--runner",
               "exec:fixtures/fake_runners/fake_seed_runner", "--json", "--junit", str(tmp_path / "check.xml")])
    out, err = capfd.readouterr()
    assert rc == 0, out[-2000:] + err[-2000:]
    report = json.loads(out)
    assert report["passed"] and report["info"]["judged_by"] == {"recovered": 1}
    (suite,) = ET.parse(tmp_path / "check.xml").getroot().findall("testsuite")  # check --junit, through a binary
    assert suite.get("name") == f"check K={report['k']}" and suite.get("tests") == "1" and suite.get("failures") == "0"
    assert [tc.get("name") for tc in suite.iter("testcase")] == [p.id for p in PROMPT]


def test_exec_needs_a_pte(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-m", "eagle3_check.cli", "check", "--runner",
                        "exec:fixtures/fake_runners/fake_seed_runner"],
                       cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert p.returncode == 2 and "without --pte" in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_suites_run_what_a_binary_can_take(pte_program, tokenizer, hf_reference, fixture):
    names = ("one-token/max-new-1", "one-token/max-new-2-full", "one-token/max-new-0", "metadata/no-chain-len",
             "stop-set/program-eos")
    cases = [suite_cases(n)[0] for n in names]
    env = SuiteEnv.fixed(pte_program, tokenizer, hf_reference, [p.text for p in fixture.prompts()], tolerance_for("float32"),
                         fixture=fixture.name)
    report = run_exec_suite("mixed", cases, env, fake())
    got = {r.name: (r.status, r.message) for r in report.results}
    assert got["one-token/max-new-1"][0] == "pass", got
    assert "not observed: draft calls" in got["one-token/max-new-1"][1]
    assert got["one-token/max-new-2-full"][0] == "pass" and "run unforced" in got["one-token/max-new-2-full"][1]
    assert got["stop-set/program-eos"][0] == "skip" and "cannot be patched" in got["stop-set/program-eos"][1]
    assert got["one-token/max-new-0"][0] == "pass" and "error exit 1" in got["one-token/max-new-0"][1], got
    assert got["metadata/no-chain-len"][0] == "pass" and "get_chain_len" in got["metadata/no-chain-len"][1], got


def test_golden_verify_through_the_fake(pte_path, pte_program, tokenizer, tmp_path):
    """One prompt of the committed .pte golden, verified exactly through the binary."""
    src = next(p for p in sorted(golden_root().glob("*.json"))
               if load_golden(p).key.backend == "pte" and load_golden(p).key.fixture == "tiny-llama")  # the session export's
    data = json.loads(src.read_text())
    data["prompts"] = data["prompts"][:1]
    one = tmp_path / src.name
    one.write_text(json.dumps(data))
    out = verify_exec_goldens([one], fake(), pte_path, pte_program, tokenizer)
    assert out.passed, out.format()
    assert out.verified == {src.stem: 1} and out.judged_by == {"bytes": 1}


@pytest.mark.parametrize("bug", ["", "extra-token"], ids=["correct", "extra-token"])
def test_gate_with_a_binary(pte_path, pte_program, tokenizer, hf_reference, fixture, bug):
    """The gate's runner checks go through the binary: vs self and vs HF reference pass for the
    correct fake and fail for a seeded bug; the runner-independent check skips with the reason."""
    from eagle3_check.jobs.gate.binary import BinaryGate
    from eagle3_check.jobs.gate.gate import GateInputs, run_gate

    inputs = GateInputs(pte_path, tokenizer, fixture.target_dir, PROMPT, RunOptions(max_new_tokens=8),
                        suite=None, fixture=fixture.name, hf_reference=hf_reference,
                        runner=BinaryGate(fake(*([f"--fake_bug={bug}"] if bug else []))))
    report = run_gate(inputs, program=pte_program)
    status = {c.name: c.status for c in report.checks}
    want = "pass" if not bug else "fail"
    assert status["runner vs self reference"] == want and status["runner vs HF reference"] == want, status
    assert status["self reference vs HF reference"] == "skip" and report.passed == (not bug)
    assert report.info["runner"].startswith("exec:")
