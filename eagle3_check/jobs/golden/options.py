"""The goldens' section of the Config: `golden record | verify | baseline`'s own flags."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.jobs.common.section import Section


@dataclass(frozen=True)
class GoldenOptions(Section):
    COMMANDS = ("golden",)
    RENAMED = {"golden_command": "action"}
    action: str | None = None  # record, verify or baseline
    goldens: tuple = ()  # verify / baseline: golden files or directories
    only: str | None = None  # record --only "a,b": these prompt ids
    dir: str | None = None  # record --dir DIR
    force: bool = False
    baseline: str | None = None  # --baseline FILE: the metrics baseline (written by `golden baseline`)
    no_baseline: bool = False
