"""The one printer (`cli.common.emit`) of every job's Outcome (jobs/common/outcomes.py), and the `check`
command's routing (jobs/check_command.py) by what was asked and the runner's capabilities."""

from __future__ import annotations

import json
import types
import xml.etree.ElementTree as ET

from eagle3_check.cli.common import emit
from eagle3_check.jobs.check_command import ListOutcome, run_check_command
from eagle3_check.report.junit import JUnitCase, JUnitSuite


class Fake:
    """An Outcome that records the order in which the printer asks it."""

    json_indent = 1
    junit_name, junit_prefix = "eagle3-check check", "check"

    def __init__(self, page: str | None = "<html></html>", code: int = 1):
        self.asked, self.page, self.code = [], page, code

    def junit_suites(self):
        self.asked.append("junit")
        return [JUnitSuite("check K=4", [JUnitCase("hi", "fail", "differs at 3")])]

    def html_page(self):
        self.asked.append("html")
        return self.page

    def to_json(self):
        self.asked.append("json")
        return {"passed": False, "k": 4}

    def lines(self):
        self.asked.append("lines")
        return ["table", "", "verdict: FAIL"]

    def exit_code(self):
        self.asked.append("exit")
        return self.code


def cfg(**kw):
    return types.SimpleNamespace(**{"junit": None, "html": None, "json": False, **kw})


def test_junit_then_html_then_json_then_the_exit_code(tmp_path, capsys):
    out = Fake()
    code = emit(cfg(junit=str(tmp_path / "r.xml"), html=str(tmp_path / "r.html"), json=True), out)
    assert code == 1 and out.asked == ["junit", "html", "json", "exit"]
    assert capsys.readouterr().out == json.dumps({"passed": False, "k": 4}, indent=1) + "\n"  # the outcome's indent
    root = ET.parse(tmp_path / "r.xml").getroot()
    assert root.get("name") == "eagle3-check check" and root.find("testsuite").get("failures") == "1"
    assert (tmp_path / "r.html").read_text() == "<html></html>"


def test_the_table_each_item_one_print_and_no_page_where_the_route_has_none(tmp_path, capsys):
    out = Fake(page=None, code=0)
    assert emit(cfg(html=str(tmp_path / "r.html")), out) == 0
    assert capsys.readouterr().out == "table\n\nverdict: FAIL\n" and out.asked == ["html", "lines", "exit"]
    assert not (tmp_path / "r.html").exists()  # nothing written where the route has no page


def test_list_is_answered_before_anything_loads(capsys):
    """--list: no context, no runner, no program (the Config's other fields are never read)."""
    outcome = run_check_command(types.SimpleNamespace(suites=types.SimpleNamespace(list=True)))
    assert isinstance(outcome, ListOutcome) and outcome.exit_code() == 0
    assert "acceptance/full" in outcome.lines()[0] and "acceptance" in outcome.to_json()
