"""`check --suite NAME` on a `CheckContext`: the edge cases on every tiny embedded fixture (or
--fixture NAME; eager programs built per case spec), or on one given program (--target/--draft,
--pte), where cases that cannot fit skip; through an in-process runner or a runner binary
(`jobs.suites.binary`). The front end prints the reports and writes their JUnit.
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


def run_suites(ctx: CheckContext, make_bar=NoBar, shrunk_lines: list | None = None) -> list:
    """The suite's reports: one per fixture, or one for the given program."""
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
        return _suites(ctx, cases, envs, make_bar, shrunk_lines)
    finally:
        ctx.close()  # an isolated plug-in's process


def _suites(ctx: CheckContext, cases: list, envs: list, make_bar, shrunk_lines: list | None) -> list:
    from eagle3_check.jobs.common.exact import exact_tolerance, numerics, scope
    from eagle3_check.jobs.suites.report import run_suite
    from eagle3_check.runners.profiles import profile_info

    cfg = ctx.cfg
    runner = ctx.runner
    reports, bar = [], None
    for make_env in envs:
        env, info = make_env()
        if bar is None:  # after the first program loads: an error loading it is the only line on stderr
            bar = make_bar(total=len(cases) * len(envs), desc=f"suite {cfg.suites.suite}", unit="case")
        env.tolerance = exact_tolerance(cfg, env.tolerance)  # --exact: identity, tolerance 0
        with scope(cfg, env.reference):  # --exact: the cases' programs and the reference on the exact kernels
            report = run_suite(cfg.suites.suite, cases, env, runner, on_case=lambda _, b=bar: b.update(1))
        report.info.update(info, device=cfg.device, dtype=ctx.cfg.dtype, runner=ctx.runner_name,
                           reference=cfg.reference, profile=profile_info(runner), numerics=numerics(cfg))
        if cfg.shrink.enabled:  # the failing plain cases, shrunk: their lines into `shrunk_lines`
            from eagle3_check.jobs.shrink_route import shrink_suite_and_write

            lines = shrink_suite_and_write(cfg, report, cases, env, info, runner)
            if shrunk_lines is not None:
                shrunk_lines += lines
        if ctx.isolated:
            from eagle3_check.runners.isolate.policy import isolation_info

            report.info["isolation"] = isolation_info(runner)
        reports.append(report)
        if report.interrupted:  # Ctrl-C: the other programs are not run
            break
    if bar is not None:
        bar.close()
    return reports


def run_exec_suite(ctx: CheckContext, make_bar=NoBar):
    """(report, info): the suite's cases on the one given .pte through the runner binary."""
    from eagle3_check.jobs.check.job import need_pte
    from eagle3_check.jobs.suites.binary import run_exec_suite as run
    from eagle3_check.suites import suite_cases

    cfg = ctx.cfg
    need_pte(ctx, "check")
    ctx.runner  # noqa: B018  its --request-timeout set before the cases run
    cases = ordered_cases(ctx, suite_cases(cfg.suites.suite))
    env, info = fixed_env(ctx)
    bar = make_bar(total=len(cases), desc=f"suite {cfg.suites.suite} (exec)", unit="case")
    report = run(cfg.suites.suite, cases, env, ctx.runner, on_case=lambda _: bar.update(1))
    bar.close()
    report.info.update(info, runner=ctx.runner_name, reference=cfg.reference, profile=ctx.runner.profile_info())
    from eagle3_check.runners.isolate.policy import isolation_info

    isolation = isolation_info(ctx.runner)  # what held the binary's processes in (binary_sandbox.py)
    if isolation:
        report.info["isolation"] = isolation
    if cfg.shrink.enabled:  # the failing plain cases, shrunk through the binary (jobs/suites/shrink.py)
        from eagle3_check.jobs.shrink_route import shrink_suite_and_write
        from eagle3_check.jobs.suites.shrink import shrink_exec_case

        report.shrunk_lines = shrink_suite_and_write(ctx.cfg, report, cases, env, info, ctx.runner,  # the .pte's dtype
                                                     shrink_exec_case)
    return report, info
