"""`check --list`: the suites and their cases, from the case registry alone (no torch: a listing
costs what `--help` costs, issue 32)."""

from __future__ import annotations

from eagle3_check.suites import SUITES
from eagle3_check.table import format_rows


def list_suites() -> dict:
    """{suite: [{name, what, setup}]} for `check --list`."""
    return {suite: [{"name": c.name, "what": c.what, "setup": c.describe()} for c in cases]
            for suite, cases in SUITES.items()}


def format_list() -> str:
    lines = []
    for suite, cases in list_suites().items():
        lines.append(f"{suite} ({len(cases)} cases)")
        rows = [row for c in cases for row in ((c["name"], c["what"]), ("", f"  [{c['setup']}]"))]
        lines += ["  " + line for line in format_rows(rows)]
    total = sum(len(c) for c in SUITES.values())
    lines.append(f"\nedge = all {len(SUITES)} suites ({total} cases). Run: eagle3-check check --suite NAME")
    return "\n".join(lines)
