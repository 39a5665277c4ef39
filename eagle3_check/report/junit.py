"""JUnit XML for CI systems: one <testsuite> per gate check, one <testcase> per case.

The layout most CI readers (Jenkins, GitLab, GitHub test reporters) accept:

    <testsuites name="eagle3-check gate" tests=".." failures=".." skipped=".." time="..">
      <testsuite name="metadata" tests="1" failures="0" skipped="0" time="0.01">
        <testcase classname="gate.metadata" name="metadata" time="0.01"/>
      </testsuite>
      <testsuite name="runner vs HF reference" ...>
        <testcase classname="gate.runner_vs_hf_reference" name="hi" time="0.8">
          <failure message="diverged at token 3: ...">...</failure>
        </testcase>
      </testsuite>
    </testsuites>
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from eagle3_check.atomic import write_text_atomic
from eagle3_check.status import FAIL, SKIP, TIE
from eagle3_check.untrusted import xml_safe


@dataclass
class JUnitCase:
    name: str
    status: str  # pass | fail | skip | tie (a tie passes)
    message: str = ""
    seconds: float = 0.0
    details: str = ""  # body text of <failure> / <system-out>
    properties: dict[str, str] = field(default_factory=dict)  # e.g. identical / ties / fails positions


@dataclass
class JUnitSuite:
    name: str
    cases: list[JUnitCase] = field(default_factory=list)


def _class_name(suite: str, prefix: str = "gate") -> str:
    return prefix + "." + re.sub(r"[^0-9A-Za-z]+", "_", suite).strip("_").lower()


def to_xml(suites: list[JUnitSuite], name: str = "eagle3-check gate", prefix: str = "gate") -> str:
    """`prefix`: the first part of each case's classname (gate, check)."""
    root = ET.Element("testsuites", name=name)
    totals = {"tests": 0, "failures": 0, "skipped": 0, "time": 0.0}
    for s in suites:
        fails = sum(c.status == FAIL for c in s.cases)
        skips = sum(c.status == SKIP for c in s.cases)
        secs = sum(c.seconds for c in s.cases)
        el = ET.SubElement(root, "testsuite", name=s.name, tests=str(len(s.cases)), failures=str(fails),
                           errors="0", skipped=str(skips), time=f"{secs:.3f}")
        ties = sum(c.status == TIE for c in s.cases)
        if ties:  # ties pass, but are never counted as identical: a property of the suite
            ET.SubElement(ET.SubElement(el, "properties"), "property", name="ties", value=str(ties))
        for c in s.cases:
            tc = ET.SubElement(el, "testcase", classname=_class_name(s.name, prefix), name=c.name, time=f"{c.seconds:.3f}")
            props = {"status": c.status, **c.properties} if c.status == TIE or c.properties else {}
            if props:
                pe = ET.SubElement(tc, "properties")
                for k, v in props.items():
                    ET.SubElement(pe, "property", name=k, value=str(v))
            if c.status == FAIL:
                ET.SubElement(tc, "failure", message=c.message, type="failure").text = c.details or c.message
            elif c.status == SKIP:
                ET.SubElement(tc, "skipped", message=c.message)
            elif c.message or c.details:
                ET.SubElement(tc, "system-out").text = "\n".join(x for x in (c.message, c.details) if x)
        totals["tests"] += len(s.cases)
        totals["failures"] += fails
        totals["skipped"] += skips
        totals["time"] += secs
    root.set("tests", str(totals["tests"]))
    root.set("failures", str(totals["failures"]))
    root.set("errors", "0")
    root.set("skipped", str(totals["skipped"]))
    root.set("time", f"{totals['time']:.3f}")
    ET.indent(root)
    # the runner's strings (a stop reason, a crash's output) may hold what XML 1.0 forbids: escaped
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + xml_safe(ET.tostring(root, encoding="unicode")) + "\n"


def write_junit(path: str | Path, suites: list[JUnitSuite], name: str = "eagle3-check gate",
                prefix: str = "gate") -> None:
    write_text_atomic(path, to_xml(suites, name, prefix), "JUnit report")
