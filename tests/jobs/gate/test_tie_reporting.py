"""Ties are their own count in the gate's summaries and in JUnit (properties), never 'identical'."""

import xml.etree.ElementTree as ET

import pytest

from eagle3_check.jobs.gate.model import summarize
from eagle3_check.report.junit import JUnitCase, JUnitSuite, to_xml


def case(name, status, ties=0, positions=10):
    props = {"positions": str(positions), "tie_positions": str(ties)}
    return JUnitCase(name, status, f"{status} {name}", properties=props)


@pytest.mark.parametrize("budget, status", [(0.0, "fail"), (0.1, "pass")], ids=["budget-0-fails", "budget-10pc-passes"])
def test_gate_summary_counts_ties_and_applies_the_budget(budget, status):
    chk = summarize("runner vs HF reference", [case("a", "pass"), case("b", "tie", ties=2)], "requests",
                   tie_budget=budget)
    assert chk.status == status and "1 identical, 1 tie, 0 fail of 2 requests" in chk.message
    assert chk.details["tie_positions"] == 2 and chk.details["ties_allowed"] == int(budget * 20)
    assert ("exceed the tie budget" in chk.message) == (status == "fail")


def test_junit_carries_ties_as_properties_and_not_as_failures():
    root = ET.fromstring(to_xml([JUnitSuite("runner vs HF reference", [case("a", "pass"), case("b", "tie", 2)])]))
    suite = root.find("testsuite")
    assert suite.get("failures") == "0"
    assert suite.find("properties/property[@name='ties']").get("value") == "1"
    b = suite.find("testcase[@name='b']")
    props = {p.get("name"): p.get("value") for p in b.findall("properties/property")}
    assert props == {"status": "tie", "positions": "10", "tie_positions": "2"}
