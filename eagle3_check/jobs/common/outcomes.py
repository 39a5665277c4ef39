"""What a finished job hands its front end: one `Outcome`, whatever the route (the prompt set in process,
isolated or over workers, through a runner binary, the edge suites, `--quantize`, `--list`, golden verify).

The front end prints every one of them the same way (`cli.common.emit`): the JUnit suites to --junit,
the HTML page to --html, then the JSON document (provenance included) or the table lines on stdout,
and exits with `exit_code()`. Each report kind keeps its own JSON keys and table; what the printer
asks is only this protocol. The three helpers below are the ends every route shares: the files the
job read that changed while it ran, the JUnit case that says so, and a Ctrl-C's exit status.
"""

from __future__ import annotations

import sys
from typing import Protocol


class Outcome(Protocol):
    """A finished job, ready to print. The printer calls, in this order: `junit_suites` (with --junit),
    `html_page` (with --html), `to_json` (with --json) or `lines`, and last `exit_code` (which may
    write one line on stderr: a Ctrl-C's)."""

    json_indent: int  # the JSON document's indent (check 2, golden verify 1)
    junit_name: str  # the <testsuites> name and each suite's prefix (report/junit.py)
    junit_prefix: str

    def junit_suites(self) -> list:
        """The JUnit suites (report.junit.JUnitSuite) --junit writes."""
        ...

    def html_page(self) -> str | None:
        """The --html page, None where the route has none (refused where the Config is built)."""
        ...

    def to_json(self) -> dict:
        """The --json document, its provenance included."""
        ...

    def lines(self) -> list[str]:
        """The table and what follows it, each item one print (joined with newlines)."""
        ...

    def exit_code(self) -> int:
        """0 passed, 1 failed, 130 stopped by Ctrl-C (said on stderr)."""
        ...


def files_changed(ctx, info: dict) -> list[str]:
    """The files the job reads that changed since it started (jobs/common/watch.py), named in `info`
    and on stderr; [] when none did (or nothing was watched)."""
    watch = getattr(ctx, "watch", None)
    changed = watch.changed() if watch is not None else []
    if changed:
        from eagle3_check.jobs.common.watch import fail_line

        info["files_changed"] = changed
        print(fail_line(changed), file=sys.stderr)
    return changed


def changed_suite(changed: list[str]) -> list:
    """A JUnit testsuite with the failing case `files-unchanged` when files changed, else none."""
    if not changed:
        return []
    from eagle3_check.report.junit import JUnitCase, JUnitSuite

    return [JUnitSuite("files read by the check", [JUnitCase("files-unchanged", "fail", "changed: " + "; ".join(
        changed[:5]), details="\n".join(changed))])]


def stopped(*reports) -> int:
    """130 when Ctrl-C stopped a report (written with what was judged, runners/interrupt.py), else 0."""
    lines = [r.interrupted for r in reports if getattr(r, "interrupted", None)]
    if lines:
        print(f"interrupted: {lines[0]}", file=sys.stderr)
    return 130 if lines else 0
