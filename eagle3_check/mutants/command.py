"""`mutants` from a `Config`: the seeded mutants asked for (--only, each name checked) run
against the probes (mutants/kill.py), the kill table returned."""

from __future__ import annotations

from eagle3_check.jobs.check.job import NoBar


def kill_table(cfg, make_bar=NoBar):
    import difflib

    from eagle3_check.errors import InputError
    from eagle3_check.jobs.common.world import set_threads
    from eagle3_check.mutants import BY_NAME, MUTANTS
    from eagle3_check.mutants.kill import kill_run
    from eagle3_check.mutants.probes import FAST_PROBES, PROBES, Context

    if cfg.fixture:
        from eagle3_check.fixtures.registry import load_fixture

        load_fixture(cfg.fixture)  # an unknown name is a one-line error before any work
    mutants = list(MUTANTS)
    if cfg.mutants.only:
        for name in cfg.mutants.only:
            if name not in BY_NAME:
                close = difflib.get_close_matches(name, list(BY_NAME), n=1)
                hint = f"did you mean '{close[0]}'?" if close else "run `eagle3-check mutants` for the list"
                raise InputError(f"unknown mutant '{name}'", f"one of {len(BY_NAME)} seeded mutants", hint)
        mutants = [BY_NAME[n] for n in cfg.mutants.only]
    bar = make_bar(total=len(mutants) + 1, desc="mutants", unit="runner")
    set_threads(cfg.device)  # the toy probes always run on CPU
    probes = FAST_PROBES if cfg.mutants.no_suites else PROBES
    first_kill = True if cfg.mutants.first_kill else False if cfg.mutants.all else "group"
    report = kill_run(mutants, probes, first_kill=first_kill,
                      ctx=Context(dtype=cfg.dtype, device=cfg.device, fixture_name=cfg.fixture),
                      on_step=lambda _: bar.update(1), placements=cfg.mutants.placement)
    bar.close()
    return report
