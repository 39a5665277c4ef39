"""`golden verify --runner exec:PATH` on a `CheckContext`: the goldens' prompts through a runner
binary, by `jobs.golden.binary` (the prompt set through one: `jobs.check.exec_route`).
"""

from __future__ import annotations

from eagle3_check.jobs.check.exec_route import need_pte
from eagle3_check.jobs.common.context import CheckContext


def exec_golden_verify(ctx: CheckContext):
    """`golden verify --runner exec:... --pte FILE`: the goldens' prompts through the binary."""
    from pathlib import Path

    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
    from eagle3_check.jobs.golden.binary import (
        METRICS_NOT_GATED,
        golden_files,
        none_applies,
        verify_exec_goldens,
    )
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
