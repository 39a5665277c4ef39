"""`golden verify`'s outcome (jobs.common.outcomes.Outcome), whatever the runner: `verify_job` runs the
goldens through it, in process (`job.verify`: the metrics baseline, --html, --shrink) or, for a runner of
its own program file (a binary, by its capabilities), by what it prints (`job.exec_golden_verify`: a
GoldenOutcome or an ExecGoldenOutcome, each with its own JSON keys and table)."""

from __future__ import annotations

import sys

from eagle3_check.jobs.common.outcomes import files_changed
from eagle3_check.jobs.common.provenance import report_provenance


class GoldenVerifyOutcome:
    json_indent = 1
    junit_name, junit_prefix = "eagle3-check golden", "golden"  # no --junit on golden verify

    def __init__(self, ctx, outcome, baseline=None):
        self.ctx, self.cfg, self.outcome, self.baseline = ctx, ctx.cfg, outcome, baseline
        self.own_file = ctx.capabilities.program_file  # a binary: no baseline, no page, no shrinking
        self.extra: dict = {}
        self.changed = files_changed(ctx, self.extra)

    def junit_suites(self) -> list:
        return []

    def html_page(self) -> str | None:
        if self.own_file:
            return None  # refused where the Config is built (jobs/common/validate.py)
        from eagle3_check.report.html_report import golden_html

        return golden_html(self.outcome.to_json())

    def to_json(self) -> dict:
        doc = self.outcome.to_json()
        if self.own_file:
            prov = report_provenance(self.cfg)
        else:  # the baseline and the golden directory hashed beside the options
            from eagle3_check.jobs.golden.file import golden_root

            files = {"baseline": self.baseline, **({} if self.cfg.golden.goldens else {"golden": golden_root()})}
            prov = report_provenance(self.cfg, extra_files=files)
        return {**doc, "passed": doc["passed"] and not self.changed, **self.extra, "provenance": prov}

    def lines(self) -> list[str]:
        out = [self.outcome.format()]
        shrunk = getattr(self.outcome, "shrunk_lines", None)
        out += ["\n".join(shrunk)] if shrunk else []
        return out + ([f"html: {self.cfg.html}"] if self.cfg.html and not self.own_file else [])

    def exit_code(self) -> int:
        stopped = getattr(self.outcome, "interrupted", None)
        if stopped:  # Ctrl-C: what was verified is written, exit 130
            print(f"interrupted: {stopped}", file=sys.stderr)
            return 130
        return 0 if self.outcome.passed and not self.changed else 1


def verify_job(ctx, make_bar=None) -> GoldenVerifyOutcome:
    """`golden verify` on a context: the goldens through its runner, adapted to what the runner can show."""
    from eagle3_check.jobs.golden import job

    if ctx.capabilities.program_file:  # a runner of its own program file (a binary): by what it prints
        return GoldenVerifyOutcome(ctx, job.exec_golden_verify(ctx))
    return GoldenVerifyOutcome(ctx, *job.verify(ctx, *([make_bar] if make_bar else [])))
