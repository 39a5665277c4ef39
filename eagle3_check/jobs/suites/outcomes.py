"""`check --suite NAME`'s outcome (jobs.common.outcomes.Outcome): its reports, one per fixture or one for
the given program, through any runner.

A runner of its own program file (a binary) is named with that file in the table's header and its
provenance names the file's fixture (a binary's runs know no other); an in-process runner's header
names the fixture, the .pte or the target, and its provenance the --fixture given.
"""

from __future__ import annotations

from eagle3_check.jobs.common.outcomes import changed_suite, files_changed, stopped
from eagle3_check.jobs.common.provenance import report_provenance
from eagle3_check.jobs.suites.report import format_suite_table


class SuitesOutcome:
    json_indent = 2
    junit_name, junit_prefix = "eagle3-check check", "check"  # report/check_junit.py's

    def __init__(self, ctx, reports: list):
        self.ctx, self.cfg, self.reports = ctx, ctx.cfg, reports
        self.own_file = ctx.capabilities.program_file  # a binary: its file named, and its fixture
        self.extra: dict = {}
        self.changed = files_changed(ctx, self.extra)  # a binary can write what the check reads (jobs/common/watch.py)
        self.passed = all(r.passed for r in reports) and not self.changed

    def junit_suites(self) -> list:
        from eagle3_check.report.check_junit import suite_suite

        return [*(suite_suite(r) for r in self.reports), *changed_suite(self.changed)]

    def html_page(self) -> None:
        return None  # refused where the Config is built (jobs/common/validate.py)

    def to_json(self) -> dict:
        fixture = self.reports[0].info.get("fixture") if self.own_file else self.cfg.fixture
        return {"passed": self.passed, "reports": [r.to_json() for r in self.reports], **self.extra,
                "provenance": report_provenance(self.cfg, fixture)}

    def lines(self) -> list[str]:
        out = ["\n\n".join(f"== {self._where(r.info)}\n" + format_suite_table(r) for r in self.reports)]
        shrunk = [line for r in self.reports for line in r.shrunk_lines]
        return out + (["\n".join(shrunk)] if shrunk else [])

    def _where(self, info: dict) -> str:
        if self.own_file:
            return f"{info.get('pte') or info.get('fixture')} through {self.cfg.runner}"
        return str(info.get("fixture") or info.get("pte") or info.get("target"))

    def exit_code(self) -> int:
        return stopped(*self.reports) or (0 if self.passed else 1)
