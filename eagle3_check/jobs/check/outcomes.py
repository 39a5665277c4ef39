"""`check`'s outcomes over a prompt set (jobs.common.outcomes.Outcome): judged in process (or isolated, or
over workers) with draft health, or through a runner of its own program file (a binary) by what it
printed. The two keep their own report (`CheckReport`, `ExecReport`: a binary has no RunResult, no call
log and no draft health to show), and so their own JSON keys, table and JUnit suite.
"""

from __future__ import annotations

from eagle3_check.jobs.common.outcomes import changed_suite, files_changed, stopped
from eagle3_check.jobs.common.provenance import report_provenance

JUNIT = ("eagle3-check check", "check")  # report/check_junit.py's <testsuites> name and prefix


class PromptSetOutcome:
    """A `jobs.check.job.Checked`: the report, draft health, the program (its spec in the JSON)."""

    json_indent = 2
    junit_name, junit_prefix = JUNIT

    def __init__(self, ctx, checked):
        self.ctx, self.cfg, self.checked = ctx, ctx.cfg, checked
        self.report, self.health = checked.report, checked.health
        self.changed = files_changed(ctx, self.report.info)

    def junit_suites(self) -> list:
        from eagle3_check.report.check_junit import check_suite

        return [check_suite(self.report), *changed_suite(self.changed)]

    def html_page(self) -> str:
        from eagle3_check.report.html_report import check_html

        return check_html(self.report.to_json(), self.health.to_json())

    def to_json(self) -> dict:
        from eagle3_check.program.contract import read_metadata
        from eagle3_check.report.provenance import jsonable

        checked, report = self.checked, self.report
        if checked.program is not None:
            report.info["program"] = jsonable(read_metadata(checked.program.metadata()))  # the program spec
        prov = report_provenance(self.cfg, checked.fixture, self.ctx.options, records=self.ctx.hashed())  # hashed once
        doc = {**report.to_json(), "draft_health": self.health.to_json(), "provenance": prov}
        return {**doc, "passed": doc["passed"] and not self.changed}

    def lines(self) -> list[str]:
        from eagle3_check.jobs.check.prompt_set import format_table

        out = [format_table(self.report), "\n".join(self.health.lines())]
        out += [f"html: {self.cfg.html}"] if self.cfg.html else []
        return out + (["\n".join(self.checked.shrunk_lines)] if self.checked.shrunk_lines else [])

    def exit_code(self) -> int:
        report = self.report
        return stopped(report) or (0 if report.passed and not self.health.flags and not self.changed else 1)


class ExecCheckOutcome:
    """`jobs.check.job.exec_check`'s (ExecReport, the --shrink lines, prompt id -> its shrunk JSON)."""

    json_indent = 2
    junit_name, junit_prefix = JUNIT

    def __init__(self, ctx, report, shrunk_lines: list[str], shrunk: dict):
        self.ctx, self.cfg, self.report = ctx, ctx.cfg, report
        self.shrunk_lines, self.shrunk = shrunk_lines, shrunk
        self.changed = files_changed(ctx, report.info)

    def junit_suites(self) -> list:
        from eagle3_check.report.check_junit import exec_check_suite

        return [exec_check_suite(self.report), *changed_suite(self.changed)]

    def html_page(self) -> None:
        return None  # refused where the Config is built (jobs/common/validate.py)

    def to_json(self) -> dict:
        prov = report_provenance(self.cfg, self.ctx.setup.info.get("fixture"), self.ctx.options)
        data = self.report.to_json()
        for r in data.get("requests", []):  # the shrunk case beside its original (--shrink)
            if r.get("prompt_id") in self.shrunk:
                r["shrunk"] = self.shrunk[r["prompt_id"]]
        return {**data, "passed": data["passed"] and not self.changed, "provenance": prov}

    def lines(self) -> list[str]:
        from eagle3_check.jobs.check.binary import format_exec_table

        return [format_exec_table(self.report)] + (["\n".join(self.shrunk_lines)] if self.shrunk_lines else [])

    def exit_code(self) -> int:
        return 0 if self.report.passed and not self.changed else 1
