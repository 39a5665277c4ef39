"""The shrink section of the Config: shrinking a failing request and replaying one
(jobs/shrink_route.py and each job's shrink route; shrink/ itself knows no job)."""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.jobs.common.section import Section


@dataclass(frozen=True)
class ShrinkOptions(Section):
    COMMANDS = ("run", "check", "gate", "golden")
    RENAMED = {"shrink": "enabled", "shrink_budget": "budget", "shrink_dir": "dir"}
    HARNESS = ("repro_prompt_id",)
    enabled: bool = False  # --shrink (gate: on unless --no-shrink)
    budget: float | None = None  # --shrink-budget SECONDS
    dir: str | None = None  # --shrink-dir DIR: where the repro files go
    prompt_ids: str | None = None  # the prompt as comma-separated ids
    repro: str | None = None  # a repro file to replay
    repro_prompt_id: str | None = None  # set by --repro: the replayed request's name
