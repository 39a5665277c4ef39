"""Issue 47, item 3: the runner's strings are made safe for the report they land in (untrusted.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from eagle3_check.report.junit import JUnitCase, JUnitSuite, to_xml
from eagle3_check.runners.result import RunResult
from eagle3_check.table import format_rows
from eagle3_check.untrusted import LIMITS, bounded, line_safe, xml_safe


def _run(**kw) -> RunResult:
    base = dict(prompt_ids=[1], tokens=[2], text="a", rounds=0, accepted=[], tau=0.0, stop_reason="stop", k=4,
                max_new=8)
    return RunResult(**{**base, **kw})


def test_the_junit_of_a_stop_reason_with_escape_and_nul_is_well_formed():
    msg = "stop reason: runner says 'stop\x1b[31m\x00\ufffe', the rules fix 'stop'"
    xml = to_xml([JUnitSuite("check", [JUnitCase("hi", "fail", msg, details=msg)])])
    case = ET.fromstring(xml.split("\n", 1)[1]).find("testsuite/testcase/failure")
    assert case.get("message") == "stop reason: runner says 'stop\\x1b[31m\\x00\\ufffe', the rules fix 'stop'"
    assert xml_safe("tab\tnew\nline\r") == "tab\tnew\nline\r"  # what XML 1.0 allows stays


def test_a_table_cell_carries_no_ansi_and_stays_one_line():
    lines = format_rows([("prompt", "stop"), ("hi", "stop\x1b[2J\x1b]0;title\x07\nFAKE ROW\r")])
    assert lines == ["prompt  stop", "hi      stop\\nFAKE ROW\\r"]
    assert line_safe("a\x9bb\x7f") == "a\\x9bb\\x7f"


def test_notes_stop_reason_and_text_are_bounded_once_and_for_all():
    run = _run(stop_reason="s" * 1000, notes=["n" * 10_000] * 5000, text="t" * (LIMITS["text"] + 5))
    b = bounded(run)
    assert len(b.notes) == LIMITS["notes"] and b.notes[-1] == f"[cut: {5000 - LIMITS['notes'] + 1:,} more notes]"
    assert all(len(n) <= LIMITS["note"] for n in b.notes) and len(b.text) <= LIMITS["text"]
    assert b.stop_reason == "s" * 152 + "... [cut: 848 more characters]"  # 200 - 48 kept, 1000 - 152 cut
    assert b.text.endswith(f"[cut: {5 + 48:,} more characters]")
    assert bounded(b) is b  # bounded twice (the wire, then guarded_run): the same
    ok = _run(notes=["fine"])
    assert bounded(ok) is ok
