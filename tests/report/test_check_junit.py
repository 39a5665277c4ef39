"""`check --junit FILE`: JUnit XML grouped as the JSON report is (one testsuite per K or suite
report, one testcase per prompt or case), its counts equal to the report's, a failing runner's
failures in it with the verdict's message."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

import pytest

from eagle3_check.cli import main

PROMPTS = [{"id": "hi", "text": "Hi"}, {"id": "sky", "text": "Why is the sky blue?"},
           {"id": "count", "text": "One, two, three,"}]


@pytest.fixture
def prompts(tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"prompts": PROMPTS}))
    return str(p)


def _check(capsys, tmp_path, *argv):
    junit = tmp_path / "check.xml"
    rc = main(["check", "--fixture", "tiny-llama", "--json", "--junit", str(junit), "--no-progress", *argv])
    return rc, json.loads(capsys.readouterr().out), ET.parse(junit).getroot()


@pytest.mark.parametrize("runner,fails", [("reference", False), ("eagle3_check.mutants:emit_past_max_new", True)],
                         ids=["reference", "mutant-emit-past-max-new"])
def test_the_xml_has_one_suite_per_k_and_one_case_per_prompt(capsys, tmp_path, prompts, runner, fails):
    rc, report, root = _check(capsys, tmp_path, "--prompts", prompts, "--max-new-tokens", "6", "--runner", runner)
    assert rc == (1 if fails else 0)
    (suite,) = root.findall("testsuite")
    assert suite.get("name") == f"check K={report['k']}"
    c = report["counts"]
    assert int(root.get("tests")) == int(suite.get("tests")) == c["requests"] == len(PROMPTS)
    assert int(root.get("failures")) == int(suite.get("failures")) == c["fail"]
    assert (c["fail"] > 0) == fails
    cases = suite.findall("testcase")
    for tc, req in zip(cases, report["requests"], strict=True):
        assert tc.get("name") == req["prompt_id"]
        assert float(tc.get("time")) == pytest.approx(req["seconds"], abs=1e-3) and req["seconds"] > 0
        failure = tc.find("failure")
        assert (failure is not None) == (req["verdict"]["status"] == "fail")
        if failure is not None:
            assert failure.get("message") == req["verdict"]["message"]


def test_suite_reports_become_testsuites(capsys, tmp_path):
    rc, report, root = _check(capsys, tmp_path, "--suite", "budget", "--fixture", "tiny-llama",
                              "--runner", "eagle3_check.mutants:emit_past_max_new")
    assert rc == 1
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [f"budget on {r['info']['fixture']}" for r in report["reports"]]
    for s, r in zip(suites, report["reports"], strict=True):
        assert int(s.get("tests")) == len(r["cases"])
        assert int(s.get("failures")) == r["counts"]["fail"] > 0
        assert int(s.get("skipped")) == r["counts"]["skip"]
        got = {tc.get("name"): tc.find("failure").get("message") for tc in s.iter("testcase")
               if tc.find("failure") is not None}
        assert got == {c["name"]: c["message"] for c in r["cases"] if c["status"] == "fail"}


def test_ties_over_the_budget_fail_the_xml_too():
    """A report failed by its ties alone (no request fails) has a failing 'tie budget' case."""
    from eagle3_check.jobs.check.prompt_set import CheckReport, RequestOutcome
    from eagle3_check.judge.verdict import Verdict
    from eagle3_check.report.check_junit import check_suite
    from eagle3_check.report.junit import to_xml
    from eagle3_check.runners.result import RunResult

    run = RunResult([1], [5, 6], "", 1, [1], 1.0, "max_new", 4, 2)
    report = CheckReport(4, [RequestOutcome("p", run, Verdict("tie", "tie at 1", identical=1, ties=1))],
                         tie_budget=0.0)
    assert not report.passed and report.counts()["fail"] == 0
    root = ET.fromstring(to_xml([check_suite(report)]))
    assert root.get("failures") == "1"
    assert [tc.get("name") for tc in root.iter("testcase") if tc.find("failure") is not None] == ["tie budget"]


@pytest.mark.parametrize("argv,phrase", [
    (["check", "--list", "--junit", "x.xml"], "--junit with --list"),
    (["check", "--fixture", "tiny-llama", "--junit", "/no/such/dir/x.xml"], "directory /no/such/dir does not exist"),
], ids=["with-list", "missing-dir"])
def test_junit_where_it_cannot_be_written_is_one_line(capsys, argv, phrase):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert phrase in err and err.count("\n") == 1, err
