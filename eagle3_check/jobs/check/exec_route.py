"""`--runner exec:PATH` on a `CheckContext`: a runner binary judged over the prompt set (`check`), by
`jobs.check.binary` (against the goldens: `jobs.golden.exec_route`). Everything else about the
command (program options, runner options, references) is the same as for an in-process runner.
"""

from __future__ import annotations

from eagle3_check.jobs.check.job import NoBar
from eagle3_check.jobs.common.context import CheckContext
from eagle3_check.preflight import check_exec_needs_pte


def need_pte(ctx: CheckContext, command: str) -> None:
    """Checked where the Config is built too (jobs/common/validate.py); here for a context built otherwise."""
    check_exec_needs_pte(command, ctx.cfg.runner, ctx.cfg.pte)


def exec_check(ctx: CheckContext, make_bar=NoBar):
    """The prompt set through the binary, judged per position (jobs.check.binary): (an ExecCheckReport,
    the --shrink lines to print, prompt id -> its shrunk JSON)."""
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
