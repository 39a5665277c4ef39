"""`--runner exec:PATH` on a `CheckContext`: a runner binary judged over the prompt set (`check`)
or against the goldens (`golden verify`), by `binary/`. Everything else about those commands
(program options, runner options, references) is the same as for an in-process runner.
"""

from __future__ import annotations

from eagle3_check.errors import InputError
from eagle3_check.session.check import NoBar
from eagle3_check.session.context import CheckContext


def need_pte(ctx: CheckContext, command: str) -> None:
    if not ctx.cfg.pte:
        raise InputError(f"{command} --runner {ctx.cfg.runner} without --pte", "the .pte file the binary runs",
                         "pass --pte FILE (export one with `eagle3-check export -o FILE.pte`)")


def exec_check(ctx: CheckContext, make_bar=NoBar):
    """The prompt set through the binary, judged per position (binary.check): (an ExecCheckReport,
    the --shrink lines to print, prompt id -> its shrunk JSON)."""
    from eagle3_check.binary.check import run_exec_check
    from eagle3_check.session import shrink_route

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


def exec_golden_verify(ctx: CheckContext):
    """`golden verify --runner exec:... --pte FILE`: the goldens' prompts through the binary."""
    from pathlib import Path

    from eagle3_check.binary.golden import (
        METRICS_NOT_GATED,
        golden_files,
        none_applies,
        verify_exec_goldens,
    )
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
    from eagle3_check.program.pte_probe import load_probed
    from eagle3_check.program.sidecar import sidecar_fixture
    from eagle3_check.tokenizer import Tokenizer

    cfg = ctx.cfg
    need_pte(ctx, "golden verify")
    runner = ctx.runner
    pte = Path(cfg.pte)
    program = load_probed(pte, cfg.data_path)  # a load that aborts the runtime: one line
    tokenizer = Tokenizer.load(load_fixture(sidecar_fixture(pte) or DEFAULT_FIXTURE).tokenizer_path)
    paths = golden_files(list(cfg.goldens))
    outcome = verify_exec_goldens(paths, runner, pte, program, tokenizer)
    if not outcome.verified:
        outcome.none_applies = none_applies(outcome, pte, program, paths[0] if paths else None, False)
    if not cfg.no_baseline:
        outcome.notes.append(METRICS_NOT_GATED)
    return outcome
