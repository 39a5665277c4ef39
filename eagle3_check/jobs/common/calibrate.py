"""`eagle3-check calibrate`, and the same step inside a check of a `--target` model in a reduced
precision: the calibration of the program's target (judge/calibration.py) read from the cache,
or measured on the check's own prompt set and stored there first.

The key is the target directory's digest (its config and weight files, as the provenance hashes
them), the dtype, the device kind and the kernel set (eager, or compiled with --compile).
"""

from __future__ import annotations

import sys

MAX_PROMPTS = 16  # prompts a calibration measures (the first of the set)
MAX_NEW = 64  # greedy tokens per prompt
# the fixtures the built-in constants were measured on (docs/calibration.md); their quantized variants by base
MEASURED = ("tiny-llama", "tiny-gemma4", "tiny-llama-random", "smollm2-135m", "gemma3-270m")


def measured_fixture(fixture: str | None) -> bool:
    """Were the built-in constants measured on this fixture? One of MEASURED (or a variant of one) from
    the repository's own fixtures/: the same name under another $EAGLE3_CHECK_FIXTURES is a user's
    model, calibrated like a --target."""
    if not fixture:
        return False
    from pathlib import Path

    from eagle3_check.fixtures import registry
    from eagle3_check.fixtures.registry import load_fixture

    fx = load_fixture(fixture)
    own = Path(registry.__file__).resolve().parents[2] / "fixtures"
    return (fx.base or fx.name) in MEASURED and fx.root.resolve().parent == own.resolve()


def wants_calibration(ctx) -> bool:
    """Does this job's program get a calibration (every job asks here, through CheckContext.calibration)?
    A reduced precision, normal mode, an eager program (a .pte's kernels are ExecuTorch's: it keeps the
    constants), and a target the constants were not measured on (--target, or a user's fixture)."""
    cfg = ctx.cfg
    if cfg.dtype == "float32" or cfg.pte or cfg.exact:
        return False
    return bool(cfg.target) or not measured_fixture(ctx.fixture)


def calibration_key(ctx):
    from eagle3_check.judge.calibration import CalibrationKey

    digest = ctx.target_record["sha256"]  # hashed once: the report's provenance reuses it (ctx.hashed)
    kernels = "compiled" if getattr(ctx.cfg, "compile", "off") not in (None, "off") else "eager"
    return CalibrationKey(digest, ctx.cfg.dtype, ctx.cfg.device.split(":")[0], kernels)


def measure(ctx, log=None, key=None):
    """A fresh calibration on the check's program and prompts, stored (atomically) in the cache;
    `key` when the caller has it (computing it hashes the target's files)."""
    from eagle3_check.judge.calibration import save
    from eagle3_check.judge.calibration_measure import calibrate
    from eagle3_check.runners.options import prompt_ids, stop_set

    log = log or (lambda line: print(line, file=sys.stderr))
    key = key or calibration_key(ctx)
    md = ctx.metadata()
    opts = ctx.options
    prompts = [prompt_ids(ctx.tokenizer, p.text, opts) for p in ctx.prompts()[:MAX_PROMPTS]]
    k = opts.chain_len or md.chain_len
    log(f"calibrating the tie tolerance on this target ({key.stem}): {len(prompts)} prompts x up to "
        f"{min(MAX_NEW, opts.max_new_tokens)} tokens, once; stored for later checks")
    cal = calibrate(ctx.program, ctx.hf_reference(), prompts, k, set(stop_set(ctx.tokenizer, md, opts).ids),
                    min(MAX_NEW, opts.max_new_tokens), ctx.cfg.device, key)
    save(cal)
    return cal


def calibration_for(ctx):
    """The stored calibration of this target, dtype, device and kernels, else a fresh one."""
    from eagle3_check.judge.calibration import load

    key = calibration_key(ctx)  # the target's files hashed once, for the lookup and a fresh record
    return load(key) or measure(ctx, ctx.log, key)
