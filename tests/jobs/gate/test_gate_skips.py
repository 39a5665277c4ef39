"""The gate counts skipped edge cases, with their reasons, in its summary, JSON and JUnit, and
every case carries its own measured time (issue 11 part 4)."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET

import pytest

from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.gate.gate import GateInputs, run_gate
from eagle3_check.report.junit import to_xml
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import FAIL, SKIP

# on the default program (max_seq_len 256, max prefill 128) context/room-0 needs L = 256 - K = 252:
# it cannot fit and skips; chain/lo runs.
SKIPS, RUNS = "context/room-0", "chain/lo"


@pytest.fixture(scope="module")
def gate_report(program, tokenizer, fixture, hf_reference):
    def run(suite: str):
        inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir,
                            prompts=[Prompt("hi", "Hi")], options=RunOptions(max_new_tokens=6), suite=suite,
                            hf_reference=hf_reference, fixture=fixture.name)
        return run_gate(inputs, program=program)

    return run


def test_a_skipped_case_is_in_the_summary_json_and_junit_with_its_reason(gate_report):
    report = gate_report(SKIPS)
    chk = report.check("edge suites")  # its only case skipped: nothing ran, so the check fails (status.passes)
    assert chk.status == FAIL and chk.message.startswith(f"no cases ran, 1 skipped (first: {SKIPS}: no prompt of")
    assert not report.passed
    js = chk.to_json()
    assert js["counts"] == {"pass": 0, "tie": 0, "fail": 0, "skip": 1}
    assert js["cases"][0]["status"] == SKIP and "prefill range" in js["cases"][0]["message"]
    root = ET.fromstring(to_xml(report.junit_suites()).split("\n", 1)[1])
    suite = next(s for s in root.iter("testsuite") if s.get("name") == "edge suites")
    # the skipped case, and the check's own failure, so JUnit's failure count agrees with the verdict
    assert suite.get("tests") == "2" and suite.get("skipped") == "1" and suite.get("failures") == "1"
    skipped = suite.find("testcase/skipped")
    assert skipped is not None and "prefill range" in skipped.get("message")
    assert int(root.get("skipped")) >= 1


def test_run_and_skipped_cases_are_both_counted_and_timed(gate_report):
    report = gate_report(SKIPS)  # the request checks ran too: their cases carry real times
    for name in ("runner vs self reference", "runner vs HF reference", "self reference vs HF reference"):
        cases = report.check(name).cases
        assert cases and all(c.seconds > 0 for c in cases), (name, [c.seconds for c in cases])
    report = gate_report(RUNS)
    chk = report.check("edge suites")
    assert chk.status == "pass" and chk.message == "1/1 cases passed", chk.message
    assert chk.cases[0].seconds > 0.001  # a real case builds a reference and runs rounds
    root = ET.fromstring(to_xml(report.junit_suites()).split("\n", 1)[1])
    ran = [s for s in root.iter("testsuite") if s.get("name") in ("edge suites", "runner vs HF reference")]
    times = [float(tc.get("time")) for s in ran for tc in s.iter("testcase")]
    assert len(times) == 2 and all(t > 0 for t in times), times


def test_request_check_times_are_their_own_cases_and_add_up(gate_report):
    """Each second counted once: a check's time is the sum of its cases' (no equal shares), and the
    three request checks together take no longer than the gate spent on them."""
    t0 = time.perf_counter()
    report = gate_report(None)
    wall = time.perf_counter() - t0
    names = ("runner vs self reference", "runner vs HF reference", "self reference vs HF reference")
    checks = [report.check(n) for n in names]
    for chk in checks:
        assert chk.seconds == pytest.approx(sum(c.seconds for c in chk.cases))
        assert all(c.seconds > 0 for c in chk.cases), chk.name
    assert len({round(c.seconds, 6) for c in checks}) == 3, [c.seconds for c in checks]  # no equal shares
    assert sum(c.seconds for c in report.checks) <= wall  # nothing counted twice
