"""`golden record | verify | baseline` from a `Config`: record a configuration's exact tokens and
stats on a `CheckContext`, re-run the goldens (jobs/golden/verify.py) and gate their
deterministic metrics against the baseline, or refresh the baseline from verified goldens.
"""

from __future__ import annotations

from eagle3_check.errors import InputError
from eagle3_check.jobs.check.job import NoBar
from eagle3_check.jobs.common.context import CheckContext
from eagle3_check.jobs.common.world import OVERRIDES


def select(prompts: list, only: str | None) -> list:
    """`--only a,b`: those prompts of the set, in this order."""
    if not only:
        return prompts
    by_id = {p.id: p for p in prompts}
    wanted = [s.strip() for s in only.split(",") if s.strip()]
    missing = [w for w in wanted if w not in by_id]
    if missing:
        raise InputError(f"--only {', '.join(missing)}", f"prompt ids of the set ({', '.join(by_id)})",
                         "fix --only, or pass --prompts FILE with those prompts")
    return [by_id[w] for w in wanted]


def quantized_reference(setup, backend: str):
    """A quantized program's golden is judged against, and takes its margins from, the program's
    own quantized target (DESIGN §3: HF full precision is drift, not the reference); None for
    full-precision programs."""
    from eagle3_check.judge.hf import HFReference
    from eagle3_check.program.quantize import program_quantization

    if program_quantization(setup.program.metadata()) is None:
        return None
    module = getattr(setup.program, "module", None)
    if backend == "pte" or module is None:
        raise InputError("golden record on a quantized .pte", "its eager twin (margins need the quantized "
                         "target's logits)", "record on the eager variant (e.g. --fixture tiny-llama-int4), "
                         "then gate the .pte with --golden")
    return HFReference.from_model(module.target.model)


def record(ctx: CheckContext, make_bar=NoBar):
    """(Golden, the path written) of the fixture (or .pte) configuration the config names."""
    from pathlib import Path

    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture, load_prompts
    from eagle3_check.jobs.golden.file import GoldenKey, golden_root, record_golden, save_golden

    cfg = ctx.cfg
    if cfg.target or cfg.draft:
        raise InputError("--target/--draft for a golden", "an embedded fixture (goldens are named by it)",
                         "pass --fixture NAME (see fixtures/)")
    over = [f for f in OVERRIDES if getattr(cfg, f) is not None]
    if over:
        raise InputError(f"--{over[0].replace('_', '-')} for a golden", "the fixture's own program shape",
                         "drop the override (a golden's name does not record it)")
    setup = ctx.setup  # --pte: the .pte, its fixture from --fixture or the export sidecar
    cfg = ctx.cfg  # a .pte's dtype is its own
    fixture = ctx.fixture or DEFAULT_FIXTURE
    backend = "pte" if cfg.pte else "eager"
    md = ctx.metadata()
    k = cfg.chain_len if cfg.chain_len is not None else md.chain_len
    key = GoldenKey(fixture, backend, cfg.device, cfg.dtype, k, cfg.max_new_tokens, "exact" if cfg.exact else "normal")
    directory = Path(cfg.golden.dir) if cfg.golden.dir else golden_root()
    path = directory / key.filename
    if not cfg.golden.force and path.exists():
        raise InputError(f"golden {path} already exists", "a configuration without a golden",
                         "pass --force to re-record it (review the diff before committing)")
    prompts = load_prompts(cfg.prompts) if cfg.prompts else load_fixture(fixture).prompts()
    prompts = select(prompts, cfg.golden.only)
    reference = quantized_reference(setup, backend) or ctx.hf_reference()
    bar = make_bar(total=len(prompts), desc="record", unit="prompt", delay=0.5)  # delay: an early error is one line
    sha = None
    if backend == "pte":  # a pte golden names its program: acceptance is exact on it alone (jobs.golden.diff.stats_exact)
        from eagle3_check.program.sidecar import pte_digest

        sha = pte_digest(cfg.pte)
    from eagle3_check.jobs.common.exact import scope

    with scope(cfg, reference):  # --exact: the runner and the reference on the shape-invariant kernels
        golden = record_golden(setup.program, setup.tokenizer, reference, prompts, key, ctx.tolerance,
                               ctx.options, on_prompt=lambda _: bar.update(1), program_sha256=sha)
    bar.close()
    return golden, save_golden(golden, directory, force=cfg.golden.force)


def baseline_path(cfg):
    from eagle3_check.jobs.golden.metrics import default_baseline_path

    return cfg.golden.baseline or default_baseline_path()


def golden_bar(cfg, make_bar=NoBar):
    from eagle3_check.jobs.golden.verify import total_prompts

    return make_bar(total=total_prompts(list(cfg.golden.goldens)), desc="golden", unit="prompt", delay=0.5)


def verify(ctx: CheckContext, make_bar=NoBar):
    """(GoldenOutcome, the baseline file used or None): every golden re-run through the runner
    and compared exactly, and the metrics gate unless --no-baseline (tokens only without a
    committed baseline)."""
    from pathlib import Path

    from eagle3_check.jobs.common.world import set_threads
    from eagle3_check.jobs.golden.verify import gate_goldens

    cfg = ctx.cfg
    set_threads("cpu", cfg.threads)  # one thread, as check (two: bench/golden_speed.py, docs/goldens.md)
    runner = ctx.runner  # --request-timeout: a hang fails its prompt
    baseline = None
    if not cfg.golden.no_baseline:
        baseline = baseline_path(cfg)
        if not cfg.golden.baseline and not Path(baseline).is_file():
            baseline = None  # no committed baseline yet: tokens only
    bar = golden_bar(cfg, make_bar)
    from eagle3_check.jobs.common.exact import scope

    try:
        with scope(cfg):  # --exact: every golden's program and the runner on the shape-invariant kernels
            outcome = gate_goldens(list(cfg.golden.goldens), baseline, runner=runner, on_prompt=lambda _: bar.update(1),
                                   pte=cfg.pte, data_path=cfg.data_path, numerics="exact" if cfg.exact else "normal",
                                   **program_file_goldens(ctx))
        bar.close()
        if cfg.shrink.enabled and not outcome.interrupted:  # each golden prompt that differs, shrunk through the same runner
            from eagle3_check.jobs.golden.shrink_route import shrink_goldens_and_write

            outcome.shrunk_lines = shrink_goldens_and_write(cfg, outcome, runner, ctx.runner_name)
    finally:
        bar.close()
        ctx.close()  # an isolated plug-in's process
    return outcome, baseline


def program_file_goldens(ctx) -> dict:
    """`golden verify --aoti F.pt2`: every golden of the package's fixture and dtype on that one program
    (as `--pte` runs them on its `.pte`), its acceptance a note where `stats_exact` says so; {} otherwise."""
    if not ctx.cfg.aoti:
        return {}
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.jobs.common.world import load_tokenizer
    from eagle3_check.program.contract import program_dtype

    program = ctx.program  # the context's load: the package on its device (jobs/common/aoti.py)
    return {"build": lambda key: (program, load_tokenizer(load_fixture(key.fixture).tokenizer_path)),
            "fixture": ctx.fixture, "dtype": program_dtype(program), "run_backend": program.info["backend"]}


def refresh_baseline(cfg, make_bar=NoBar):
    """(GoldenOutcome, {stem: Metrics}, the path written or None when the goldens do not verify)."""
    from eagle3_check.jobs.common.world import set_threads
    from eagle3_check.jobs.golden.metrics import compute_metrics, write_baseline
    from eagle3_check.jobs.golden.verify import gate_goldens

    set_threads("cpu", cfg.threads)
    bar = golden_bar(cfg, make_bar)
    outcome = gate_goldens(list(cfg.golden.goldens), None, on_prompt=lambda _: bar.update(1), pte=cfg.pte,
                           data_path=cfg.data_path)
    bar.close()
    if outcome.golden_diffs:
        return outcome, {}, None
    entries = {stem: compute_metrics(outcome.runs[stem].values(), key.k) for stem, key in outcome.keys.items()}
    return outcome, entries, write_baseline(baseline_path(cfg), entries)


def exec_golden_verify(ctx: CheckContext):
    """`golden verify --runner exec:... --pte FILE`: the goldens' prompts through a runner that runs its
    own program file (a binary), by `jobs.golden.binary`."""
    from pathlib import Path

    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
    from eagle3_check.jobs.check.job import need_pte
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
    paths = golden_files(list(cfg.golden.goldens))
    outcome = verify_exec_goldens(paths, runner, pte, program, tokenizer)
    if not outcome.verified:
        outcome.none_applies = none_applies(outcome, pte, program, paths[0] if paths else None, False)
    if not cfg.golden.no_baseline:
        outcome.notes.append(METRICS_NOT_GATED)
    from eagle3_check.runners.isolate.policy import isolation_info

    outcome.isolation = isolation_info(runner)
    return outcome
