"""`check` over a prompt set on a `CheckContext`: in this process, or spread over worker processes.

Both judge every request as `gating.check.run_check` does and add draft health
(`gating.draft_health.assess`: greedy equality cannot see a wrong draft); the front end
prints or writes the (report, health) it gets. `make_bar(total=, desc=, unit=, ...)` is the
front end's progress bar (tqdm's signature); the default shows none.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

from eagle3_check.session.context import CheckContext


class NoBar:
    """A progress bar that shows nothing (the library's default)."""

    def __init__(self, *a, **kw):
        self.n = 0

    def update(self, n: int = 1) -> None:
        self.n += n

    def close(self) -> None:
        pass


@dataclass
class Checked:
    report: object  # gating.check.CheckReport
    health: object  # gating.draft_health.DraftHealth
    fixture: str | None  # the fixture the provenance names
    program: object = None  # the program (its spec goes into the JSON report); None over workers


def check_prompts(ctx: CheckContext, make_bar=NoBar) -> Checked:
    """The prompt set (or its --shard) through the runner in this process, judged, with draft health."""
    from eagle3_check.gating.check import run_check
    from eagle3_check.gating.draft_health import assess

    cfg = ctx.cfg
    setup = ctx.setup  # a .pte sets the dtype to its own: tolerance and budget follow it
    resolved = ctx.resolved  # after the program: its load errors come first
    budget = ctx.tie_budget
    prompts = ctx.prompts()
    reference = ctx.reference
    bar = make_bar(total=len(prompts), desc="check", unit="req", leave=False, delay=0.5)  # early errors: no bar
    try:
        report = run_check(setup.program, setup.tokenizer, reference, prompts, resolved.options, ctx.tolerance,
                           runner=ctx.runner, on_request=lambda _: bar.update(1), tie_budget=budget)
    finally:
        bar.close()
    md = ctx.metadata()
    report.info.update(setup.info, runner=ctx.runner_name, reference=cfg.reference, dtype=ctx.cfg.dtype,
                       tie_tolerance=ctx.tolerance.describe(), k_range=list(md.k_range),
                       k_source=md.k_source, run_options=resolved.to_json())
    expect, source = ctx.expected_tau(report.k, setup.info.get("fixture"))
    health = assess(setup.program, report, expect, source)
    return Checked(report, health, setup.info.get("fixture") or ctx.cfg.fixture, setup.program)


def worker_program(cfg, device: str):
    """(program, tokenizer, reference, info) in one `check --workers` process, on `device`
    (module-level: the workers receive it by name)."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # as the front end's process runs
    if device.startswith("cuda:"):
        import torch

        torch.cuda.set_device(device)  # CUDA graphs and streams on this worker's GPU
    ctx = CheckContext(cfg.replace(device=device))
    return ctx.program, ctx.tokenizer, ctx.reference, {**ctx.setup.info, "device": device}


def check_workers(ctx: CheckContext, make_bar=NoBar) -> Checked:
    """`check --workers N`: the prompt set (or its --shard) over N processes (gating/workers.py),
    each with its own program; the report is the serial run's, in prompt order."""
    from eagle3_check.gating.draft_health import assess
    from eagle3_check.gating.workers import run_check_workers, worker_devices

    cfg = ctx.cfg
    resolved, budget = ctx.resolved, ctx.tie_budget
    count = 0
    if cfg.device.startswith("cuda"):
        import torch

        count = torch.cuda.device_count()
    devices = worker_devices(cfg.device, cfg.workers, count)
    fixture = None
    if cfg.pte:
        from eagle3_check.program.sidecar import reference_for_pte

        fx = reference_for_pte(cfg.pte, cfg.fixture, cfg.target, cfg.tokenizer)[0]
        fixture = fx.name if fx else None
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE

    prompts = ctx.prompts(fixture or cfg.fixture or DEFAULT_FIXTURE)  # builds no program here
    bar = make_bar(total=len(prompts), desc=f"check x{len(devices)}", unit="req", leave=False, delay=0.5)
    try:
        report, step0 = run_check_workers(functools.partial(worker_program, cfg), devices, prompts,
                                          resolved.options, ctx.tolerance, ctx.runner_name, budget,
                                          on_share=lambda s: bar.update(len(s.indices)))
    finally:
        bar.close()
    report.info.update(device=cfg.device, runner=ctx.runner_name, reference=cfg.reference,
                       tie_tolerance=ctx.tolerance.describe(), run_options=resolved.to_json())
    expect, source = ctx.expected_tau(report.k, report.info.get("fixture"))
    health = assess(None, report, expect, source, step0=step0)
    return Checked(report, health, report.info.get("fixture") or fixture or cfg.fixture)
