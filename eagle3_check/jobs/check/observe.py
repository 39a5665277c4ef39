"""check's one request loop, whatever the runner: each prompt, in prompt order, observed through the
runner seam (`runners.seam.Runner.observe`) and handed to the judge of what that runner shows.

Two judges take the observations: `jobs.check.prompt_set` (ids, a RunResult and a call log: audited,
scored on a lane, judged per position by `judge.verdict`) and `jobs.check.binary` (a binary's bytes or
printed ids: `judge.binary.judge_observation`, ids recovered from the bytes where none are printed). The
judging stays apart because what each kind shows differs; the loop, the order and the timing are this one.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from eagle3_check.runners.in_process import as_runner
from eagle3_check.runners.seam import Observation


def observe_each(runner, program, tokenizer, prompts: list, options,
                 take: Callable[[int, object, Observation, float], None]) -> None:
    """Each prompt observed through `runner` (any kind: `as_runner`) and passed to `take(index, prompt,
    observation, seconds)`, seconds being the observation's wall time. A runner that returns token ids
    gets the prompt's ids where it has them (`Prompt.request`), one that takes text (a binary) its text."""
    seam = as_runner(runner)
    ids = seam.capabilities.token_ids
    for i, p in enumerate(prompts):
        t0 = time.perf_counter()
        obs = seam.observe(program, tokenizer, p.request() if ids else p.text, options, what=f"'{p.id}'")
        take(i, p, obs, time.perf_counter() - t0)
