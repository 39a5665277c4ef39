"""The suites' section of the Config: which edge suite runs (`check --suite NAME`, `gate --suite
NAME`, `none` turning the gate's off) and `check --list`."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.jobs.common.section import Section


@dataclass(frozen=True)
class SuitesOptions(Section):
    COMMANDS = ("check", "gate")
    suite: str | None = None  # a suite, a suite.case, `all` (gate: `none`)
    list: bool = False  # check --list: the suites and their cases, nothing runs
