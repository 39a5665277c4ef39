"""`check` over a prompt set on a `CheckContext`: in this process, or spread over worker processes, or
through a runner that runs its own program file (a binary: `exec_check`).

Both judge every request as `jobs.check.prompt_set.run_check` does and add draft health
(`jobs.check.draft_health.assess`: greedy equality cannot see a wrong draft); the front end
prints or writes the (report, health) it gets. `make_bar(total=, desc=, unit=, ...)` is the
front end's progress bar (tqdm's signature); the default shows none.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

from eagle3_check.jobs.common.context import CheckContext


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
    report: object  # jobs.check.prompt_set.CheckReport
    health: object  # jobs.check.draft_health.DraftHealth
    fixture: str | None  # the fixture the provenance names
    program: object = None  # the program (its spec goes into the JSON report); None over workers
    shrunk_lines: list = dataclasses.field(default_factory=list)  # --shrink: what to print after the table


def check_prompts(ctx: CheckContext, make_bar=NoBar, runner=None, on_report=None) -> Checked:
    """The prompt set (or its --shard) through the runner (`ctx.runner`, or an IsolatedRunner) in this
    process, judged, with draft health; `on_report(report)` adds to the report before health."""
    from eagle3_check.jobs.check.draft_health import assess
    from eagle3_check.jobs.check.prompt_set import run_check

    cfg = ctx.cfg
    setup = ctx.setup  # a .pte sets the dtype to its own: tolerance and budget follow it
    resolved = ctx.resolved  # after the program: its load errors come first
    budget = ctx.tie_budget
    from eagle3_check.jobs import shrink_route

    prompts = shrink_route.given_prompts(cfg, setup.tokenizer) or ctx.prompts()  # --prompt-ids, --prompt, --repro
    runner = ctx.runner if runner is None else runner
    if getattr(runner, "isolated", False):
        runner.ready()  # a plug-in the child cannot load: the one-line error, before any work
        if not getattr(runner, "remote", False):
            runner.set_twin(setup.program)  # a request on another program (a shrinker's) goes over the pipe
        from eagle3_check.jobs.check.prompt_set import requested_options
        from eagle3_check.program.contract import read_metadata

        sent = requested_options(resolved.options, read_metadata(setup.program.metadata()), runner)
        runner.expect([(f"'{p.id}'", p.text) for p in prompts], sent)  # run_check's order and options: sent ahead
    reference = ctx.reference
    from eagle3_check.jobs.common.exact import numerics, scope

    bar = make_bar(total=len(prompts), desc="check", unit="req", leave=False, delay=0.5)  # early errors: no bar
    try:
        with scope(cfg, reference):  # --exact: the runner and the reference on the shape-invariant kernels
            report = run_check(setup.program, setup.tokenizer, reference, prompts, resolved.options, ctx.tolerance,
                               runner=runner, on_request=lambda _: bar.update(1), tie_budget=budget,
                               parallel=True)  # two requests at once where runner and program allow (twin_runs.py)
    finally:
        bar.close()
    md = ctx.metadata()
    from eagle3_check.runners.profiles import profile_info

    report.info.update(setup.info, runner=ctx.runner_name, reference=cfg.reference, dtype=ctx.cfg.dtype,
                       profile=profile_info(runner), numerics=numerics(cfg),
                       tie_tolerance=ctx.tolerance.describe(), tie_source=ctx.tie_rule.source, k_range=list(md.k_range),
                       k_source=md.k_source, run_options=resolved.to_json())
    from eagle3_check.program.metadata_check import program_gelu_warning

    gelu = program_gelu_warning(setup.program, ctx.target_dir) if cfg.pte else None
    if gelu:  # a .pte that may run another activation than its target: said where the verdict is read
        report.info["program_warnings"] = [gelu]
    if on_report:
        on_report(report)
    expect, source = ctx.expected_tau(report.k, setup.info.get("fixture"))
    health = assess(setup.program, report, expect, source)
    lines = shrink_route.shrink_and_write(cfg, report, setup, prompts, reference, resolved.options, ctx.tolerance,
                                          runner, ctx.runner_name) if cfg.shrink and not report.interrupted else []
    return Checked(report, health, setup.info.get("fixture") or ctx.cfg.fixture, setup.program, lines)


def isolated(cfg, spec: str) -> bool:
    """Does this `check` run its runner in a child process (runners/isolate/policy.wants_isolation)? The
    prompt set only: the suites, `--quantize` and `--workers` run plug-ins in process."""
    from eagle3_check.runners.isolate.policy import wants_isolation

    return not (cfg.quantize or cfg.suite or cfg.workers > 1) and wants_isolation(spec, cfg.isolate, cfg.in_process)


def child_program(cfg):
    """(program, tokenizer) in the isolated runner's process (module-level: the child gets it pickled);
    on `cuda:i` (a --workers child) that GPU is the process's own."""
    import os

    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # as the front end's process runs
    if cfg.exact:  # --exact: the runner's process computes on the same kernels as the harness's judge
        from eagle3_check.exact.mode import install_for_process

        install_for_process()
    if cfg.device.startswith("cuda:"):
        import torch

        torch.cuda.set_device(cfg.device)  # CUDA graphs and streams on this worker's GPU
    setup = CheckContext(cfg).setup
    return setup.program, setup.tokenizer


def check_isolated(ctx: CheckContext, make_bar=NoBar) -> Checked:
    """`check` with the runner in a child process (eagle3_check/runners/isolate): started first, so it builds
    its program while this side builds the reference; the plug-in is never imported here."""
    from eagle3_check.jobs.common.isolation import limit_of, preload
    from eagle3_check.runners.isolate.runner import IsolatedRunner
    from eagle3_check.runners.plugin import check_spec

    name = ctx.runner_name
    check_spec(name)  # its form, before anything loads; the child imports it
    runner = IsolatedRunner(name, functools.partial(child_program, ctx.cfg), limit_of(name, ctx.cfg.runner_timeout),
                            profile=ctx.cfg.runner_profile)
    preload()  # torch and transformers, before the child forks (runners/isolate/fork.py)
    return _through(ctx, runner, make_bar)


def _through(ctx: CheckContext, runner, make_bar, **info) -> Checked:
    """check_prompts through an isolated runner (or pool), started here, closed after (Ctrl-C included)."""
    from eagle3_check.runners.isolate.policy import isolation_info

    runner.start()
    try:
        return check_prompts(ctx, make_bar, runner=runner,
                             on_report=lambda report: report.info.update(isolation=isolation_info(runner), **info))
    finally:
        runner.close()


def check_workers(ctx: CheckContext, make_bar=NoBar) -> Checked:
    """`check --workers N`: the prompt set (or its --shard) over N child processes (jobs/common/isolation.py:
    IsolatedPool), each with its own program and the runner, any runner; this process judges every
    request in prompt order (the report is the serial run's)."""
    from eagle3_check.jobs.check.workers import worker_devices
    from eagle3_check.jobs.common.isolation import IsolatedPool, limit_of, preload
    from eagle3_check.runners.plugin import check_spec

    cfg = ctx.cfg
    count = 0
    if cfg.device.startswith("cuda"):
        import torch

        count = torch.cuda.device_count()
    devices = worker_devices(cfg.device, cfg.workers, count)
    name = ctx.runner_name
    check_spec(name)
    builds = [functools.partial(child_program, cfg.replace(device=d)) for d in devices]
    pool = IsolatedPool(name, builds, limit_of(name, cfg.runner_timeout), profile=cfg.runner_profile)
    preload()
    return _through(ctx, pool, make_bar, workers=len(devices), worker_devices=devices)


def need_pte(ctx: CheckContext, command: str) -> None:
    """A runner of its own program file (a binary) needs --pte: checked where the Config is built too
    (jobs/common/validate.py); here for a context built otherwise."""
    from eagle3_check.preflight import check_exec_needs_pte

    check_exec_needs_pte(command, ctx.cfg.runner, ctx.cfg.pte)


def exec_check(ctx: CheckContext, make_bar=NoBar):
    """`check` through a runner that runs its own program file and prints text (a binary,
    `--runner exec:PATH`; program options, runner options and references as for any runner): the prompt
    set judged per position by jobs.check.binary. (an ExecReport, the --shrink lines to print, prompt
    id -> its shrunk JSON)."""
    from eagle3_check.jobs import shrink_route
    from eagle3_check.jobs.check.binary import run_exec_check

    need_pte(ctx, "check")
    runner = ctx.runner
    setup, resolved = ctx.setup, ctx.resolved
    prompts = shrink_route.given_prompts(ctx.cfg, setup.tokenizer) or ctx.prompts()  # --prompt, --repro
    reference = ctx.reference
    bar = make_bar(total=len(prompts), desc="check (exec)", unit="req", leave=False, delay=0.5)
    try:
        report = run_exec_check(runner, setup.program, setup.tokenizer, reference, prompts, resolved.options,
                                on_request=lambda _: bar.update(1), tolerance=ctx.tolerance,
                                tie_budget=ctx.tie_budget)
    finally:
        bar.close()
    report.info.update(setup.info, reference=ctx.cfg.reference, tie_tolerance=ctx.tolerance.describe(),
                       ties="per position: the printed [ids], or the ids recovered from the bytes (judge/recover.py)",
                       run_options=resolved.to_json())
    lines, shrunk = shrink_route.shrink_exec_and_write(ctx.cfg, report, setup, prompts, reference, resolved.options,
                                                       ctx.tolerance, runner)  # --shrink
    return report, lines, shrunk
