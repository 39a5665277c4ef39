"""`fixtures build NAME` from a `Config`: the recipe checked (name, device, threads, overrides),
then the fixture trained and written (fixtures/build.py), with the command that rebuilds it."""

from __future__ import annotations


def build(cfg):
    """The fixture directory `fixtures build NAME` wrote (its recipe, --steps/--batch-size/--seed on top)."""
    import shlex
    from dataclasses import replace

    from eagle3_check.errors import OptionError
    from eagle3_check.fixtures.build import RECIPES, build_fixture
    from eagle3_check.program.eager import resolve_device

    if cfg.fixtures.name not in RECIPES:
        raise OptionError(f"fixture recipe '{cfg.fixtures.name}'", f"one of {sorted(RECIPES)}",
                          "pick a recipe from eagle3_check/fixtures/build.py RECIPES")
    resolve_device(cfg.device)
    if cfg.threads < 1:
        raise OptionError(f"--threads {cfg.threads}", "1 or more", "pass --threads 1")
    import torch

    torch.set_num_threads(cfg.threads)
    overrides = {k: v for k, v in (("steps", cfg.fixtures.steps), ("batch_size", cfg.fixtures.batch_size),
                                   ("seed", cfg.fixtures.seed)) if v is not None}
    for k, v in overrides.items():
        if v < (0 if k == "seed" else 1):
            raise OptionError(f"--{k.replace('_', '-')} {v}", "a positive integer", f"pass --{k.replace('_', '-')} 1 or more")
    train = replace(RECIPES[cfg.fixtures.name]["train"], **overrides)
    command = " ".join(["eagle3-check fixtures build", shlex.quote(cfg.fixtures.name)]
                       + ([f"--device {cfg.device}"] if cfg.device != "cpu" else [])
                       + [f"--{k.replace('_', '-')} {v}" for k, v in overrides.items()])
    return build_fixture(cfg.fixtures.name, cfg.fixtures.root, cfg.device, train, card=not cfg.fixtures.no_card,
                        command=command, progress=not cfg.no_progress)
