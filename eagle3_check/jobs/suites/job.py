"""`check --suite NAME` on a `CheckContext`: the edge cases on every tiny embedded fixture (or
--fixture NAME; eager programs built per case spec), or on one given program (--target/--draft,
--pte), where cases that cannot fit skip; through any runner, adapted by its capabilities (a runner of
its own program file, a binary, takes each case on that file: `jobs.suites.binary`). The front end
prints the reports (`jobs.suites.outcomes`).
"""

from __future__ import annotations

from eagle3_check.errors import InputError
from eagle3_check.jobs.check.job import NoBar
from eagle3_check.jobs.common.context import CheckContext, no_prompts
from eagle3_check.jobs.common.world import OVERRIDES, set_threads


def ordered_cases(ctx: CheckContext, cases: list) -> list:
    """The cases in the order `--shuffle SEED` asks (logged), else as registered."""
    if ctx.cfg.check.shuffle is None:
        return cases
    from eagle3_check.suites import shuffled_cases

    cases = shuffled_cases(cases, ctx.cfg.check.shuffle)
    ctx.log(f"order: --shuffle {ctx.cfg.check.shuffle}: {', '.join(c.name for c in cases)}")
    return cases


def fixed_env(ctx: CheckContext):
    """(SuiteEnv, info) of the one given program (--target/--draft, --pte or --aoti) the cases run on, with
    its prompts (--prompts, else its fixture's)."""
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture, load_prompts
    from eagle3_check.jobs.suites.execute import SELF, SuiteEnv

    cfg = ctx.cfg
    if cfg.target and not cfg.prompts:
        raise no_prompts()
    setup = ctx.setup
    reference = SELF if cfg.reference == "self" else ctx.hf_reference()
    fixture = ctx.fixture or DEFAULT_FIXTURE  # a .pte names its own
    prompts = load_prompts(cfg.prompts) if cfg.prompts else load_fixture(fixture).prompts()
    env = SuiteEnv.fixed(setup.program, setup.tokenizer, reference, [p.text for p in prompts], ctx.tolerance,
                         fixture=setup.info.get("fixture"))
    return env, {**setup.info}


def run_suites(ctx: CheckContext, make_bar=NoBar) -> list:
    """The suite's reports: one per fixture, or one for the given program (--shrink's lines in each
    report's `shrunk_lines`)."""
    from eagle3_check.fixtures.registry import list_fixtures, load_fixture
    from eagle3_check.jobs.suites.execute import SuiteEnv
    from eagle3_check.suites import suite_cases

    cfg = ctx.cfg
    cases = ordered_cases(ctx, suite_cases(cfg.suites.suite))  # unknown name -> error with "did you mean"
    if cfg.target or cfg.draft or cfg.pte or cfg.aoti:  # one given program
        envs = [lambda: fixed_env(ctx)]
    else:
        given = [f for f in OVERRIDES if getattr(cfg, f) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise InputError(f"{flag} with --suite", "no program overrides (each case sets its own spec)",
                             f"drop {flag}")
        names = [load_fixture(cfg.fixture).name] if cfg.fixture else list_fixtures(real=False)
        set_threads(cfg.device, cfg.threads)
        envs = [lambda n=n: (SuiteEnv.eager(n, cfg.device, cfg.dtype, cfg.reference),
                             {"fixture": n, "backend": "eager"}) for n in names]
    try:
        return _suites(ctx, cases, envs, make_bar)
    finally:
        ctx.close()  # an isolated plug-in's process


def _suites(ctx: CheckContext, cases: list, envs: list, make_bar) -> list:
    """Every program's cases through the runner, whatever its kind: a runner that runs its own program
    file (a binary) takes each case on the program's file (`jobs.suites.binary.run_exec_suite`), and its
    report names no harness device, dtype or numerics (the file's are its own)."""
    from eagle3_check.jobs.check.job import need_pte
    from eagle3_check.jobs.common.exact import exact_tolerance, numerics, scope
    from eagle3_check.jobs.shrink_route import shrink_suite_and_write
    from eagle3_check.jobs.suites.binary import run_exec_suite
    from eagle3_check.jobs.suites.report import run_suite
    from eagle3_check.jobs.suites.shrink import shrink_exec_case
    from eagle3_check.runners.isolate.policy import isolation_info
    from eagle3_check.runners.profiles import profile_info

    cfg = ctx.cfg
    own_file = ctx.capabilities.program_file
    if own_file:
        need_pte(ctx, "check")  # a runner of its own program file needs --pte (checked where the Config is built too)
    runner = ctx.runner  # its --request-timeout set before the cases run
    run = run_exec_suite if own_file else run_suite
    reports, bar = [], None
    for make_env in envs:
        env, info = make_env()
        if bar is None:  # after the first program loads: an error loading it is the only line on stderr
            bar = make_bar(total=len(cases) * len(envs), desc=f"suite {cfg.suites.suite}", unit="case")
        env.tolerance = exact_tolerance(cfg, env.tolerance)  # --exact: identity, tolerance 0
        with scope(cfg, env.reference):  # --exact: the cases' programs and the reference on the exact kernels
            report = run(cfg.suites.suite, cases, env, runner, on_case=lambda _, b=bar: b.update(1))
        report.info.update(info, runner=ctx.runner_name, reference=cfg.reference, profile=profile_info(runner))
        if not own_file:
            report.info.update(device=cfg.device, dtype=ctx.cfg.dtype, numerics=numerics(cfg))
        if cfg.shrink.enabled:  # the failing plain cases, shrunk through the same runner: the lines to print after its table
            report.shrunk_lines = shrink_suite_and_write(cfg, report, cases, env, info, runner,
                                                         shrink_exec_case if own_file else None)
        isolation = isolation_info(runner)  # an isolated plug-in's processes, or what held a binary's in
        if isolation:
            report.info["isolation"] = isolation
        reports.append(report)
        if report.interrupted:  # Ctrl-C: the other programs are not run
            break
    if bar is not None:
        bar.close()
    return reports
