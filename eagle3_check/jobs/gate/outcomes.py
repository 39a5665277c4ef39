"""`gate`'s outcome (jobs.common.outcomes.Outcome): its report with its failing request and suite cases
shrunk (--shrink, on by default), the --report file written (always, before anything is printed), then
printed by the front end's one printer (`cli.common.emit`): JUnit, HTML, the JSON or the table."""

from __future__ import annotations

import json
import sys

from eagle3_check.atomic import write_text_atomic
from eagle3_check.jobs.common.provenance import report_provenance


class GateOutcome:
    json_indent = 2
    junit_name, junit_prefix = "eagle3-check gate", "gate"  # report/junit.py's defaults

    def __init__(self, cfg, report, inputs, fixture: str | None):
        from eagle3_check.jobs.gate.shrink_route import shrink_gate_and_write

        self.cfg, self.report = cfg, report
        self.stopped = report.info.get("interrupted")  # Ctrl-C: what was judged is written, exit 130
        self.shrunk = [] if self.stopped else shrink_gate_and_write(cfg, report, inputs)  # the failing cases, shrunk
        self.doc = {**report.to_json(), "provenance": report_provenance(cfg, fixture, inputs.options)}
        write_text_atomic(cfg.gate.report, json.dumps(self.doc, indent=2) + "\n", "report")

    def junit_suites(self) -> list:
        return self.report.junit_suites()

    def html_page(self) -> str:
        from eagle3_check.report.html_report import gate_html

        return gate_html(self.report.to_json())

    def to_json(self) -> dict:
        return self.doc

    def lines(self) -> list[str]:
        from eagle3_check.jobs.gate.gate import format_table

        cfg = self.cfg
        files = (f"report: {cfg.gate.report}" + (f"   junit: {cfg.junit}" if cfg.junit else "")
                 + (f"   html: {cfg.html}" if cfg.html else ""))
        return [format_table(self.report), files] + (["\n".join(self.shrunk)] if self.shrunk else [])

    def exit_code(self) -> int:
        if self.stopped:
            print(f"interrupted: {self.stopped}", file=sys.stderr)
            return 130
        return 0 if self.report.passed else 1
