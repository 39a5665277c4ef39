"""check's one request loop, whatever the runner: each prompt, in prompt order, observed through the
runner seam (`runners.seam.Runner.observe`) and handed to the judge of what that runner shows.

Two judges take the observations: `jobs.check.prompt_set` (ids, a RunResult and a call log: audited,
scored on a lane, judged per position by `judge.verdict`) and `jobs.check.binary` (a binary's bytes or
printed ids: `judge.binary.judge_observation`, ids recovered from the bytes where none are printed). The
judging stays apart because what each kind shows differs; the loop and the order are this one. Where the
observations come from is `jobs.check.twin_runs`: one request at a time (`Serial`, any runner), or two
ahead where runner and program are ours (`Twins`).
"""

from __future__ import annotations

from collections.abc import Callable

from eagle3_check.runners.seam import Observation


def observe_each(runs, prompts: list, take: Callable[[int, object, Observation, float], None]) -> None:
    """Request i's observation from `runs` (`observe(i) -> (Observation, seconds)`: `twin_runs.Serial` or
    `twin_runs.Twins`) passed to `take(i, prompt, observation, seconds)`, in prompt order."""
    for i, p in enumerate(prompts):
        obs, seconds = runs.observe(i)
        take(i, p, obs, seconds)
