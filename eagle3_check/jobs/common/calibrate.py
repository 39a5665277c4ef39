"""`eagle3-check calibrate`, and the same step inside a check of a `--target` model in a reduced
precision: the calibration of the program's target (judge/calibration.py) read from the cache,
or measured on the check's own prompt set and stored there first.

The key is the target directory's digest (its config and weight files, as the provenance hashes
them), the dtype, the device kind and the kernel set (eager, or compiled with --compile; a `.pte`'s:
xnnpack, measured on its calibration twin, program/calibration_export.py: the target lowered as the
program was, logits out, exported once into the cache; `check --pte` and `gate` ask here).
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
    """Does this job's program get a calibration (every job asks here, through CheckContext.calibration;
    gate through `pte_wants_calibration`)? A reduced precision, normal mode, the HF reference (the self
    reference has no tolerance to calibrate; at 8B a calibration loads HF and measures for ~40 s), and a
    target the constants were not measured on (--target, a user's fixture, a .pte of either, unquantized)."""
    cfg = ctx.cfg
    if cfg.dtype == "float32" or cfg.exact:
        return False
    if getattr(cfg, "reference", "hf") == "self":  # the program's own greedy: no margins, never a tie (judge/self_ref.py)
        return False
    if cfg.pte:  # its kernels are ExecuTorch's: measured on its twin (calibrate_pte)
        return pte_wants_calibration(ctx.program, ctx.fixture)
    return bool(cfg.target) or not measured_fixture(ctx.fixture)


def calibration_key(ctx):
    from eagle3_check.judge.calibration import CalibrationKey

    if ctx.cfg.pte:
        ctx.setup  # noqa: B018  a .pte's dtype is its own: the config follows it once it has loaded
    digest = ctx.target_record["sha256"]  # hashed once: the report's provenance reuses it (ctx.hashed)
    kernels = "compiled" if getattr(ctx.cfg, "compile", "off") not in (None, "off") else "eager"
    if ctx.cfg.pte:
        kernels = pte_kernels(ctx.program)  # the .pte's kernels, measured through its calibration twin (`calibrate_pte`)
    return CalibrationKey(digest, ctx.cfg.dtype, ctx.cfg.device.split(":")[0], kernels)


def measure(ctx, log=None, key=None):
    """A fresh calibration on the check's program and prompts, stored (atomically) in the cache;
    `key` when the caller has it (computing it hashes the target's files)."""
    from eagle3_check.judge.calibration import save
    from eagle3_check.judge.calibration_measure import calibrate
    from eagle3_check.runners.options import prompt_ids, stop_set

    log = log or (lambda line: print(line, file=sys.stderr))
    key = key or calibration_key(ctx)
    if ctx.cfg.pte:
        return calibrate_pte(ctx.program, ctx.target_dir, key, ctx.tokenizer, [p.text for p in ctx.prompts()],
                             ctx.options, log)
    md = ctx.metadata()
    opts = ctx.options
    prompts = [prompt_ids(ctx.tokenizer, p.text, opts) for p in ctx.prompts()[:MAX_PROMPTS]]
    k = opts.chain_len or md.chain_len
    log(f"calibrating the tie tolerance on this target ({key.stem}): {len(prompts)} prompts x up to "
        f"{min(MAX_NEW, opts.max_new_tokens)} tokens, once; stored for later checks")
    cal = calibrate(eager_of(ctx), ctx.hf_reference(), prompts, k, set(stop_set(ctx.tokenizer, md, opts).ids),
                    min(MAX_NEW, opts.max_new_tokens), ctx.cfg.device, key)
    save(cal)
    return cal


def eager_of(ctx):
    """The program whose target a calibration measures: the check's own (an AOTI package bound to an eager
    program included: `eager_target` follows it), or for an AOTI package that embeds its weights (its
    kernels are judged under the tolerance of eager kernels: docs/cuda.md) one built from its target and
    draft for the calibration only."""
    from eagle3_check.judge.calibration_measure import eager_target

    if ctx.cfg.aoti and eager_target(ctx.program) is None:
        from eagle3_check.jobs.common.world import aoti_eager

        return aoti_eager(ctx.cfg)
    return ctx.program


def calibration_for(ctx):
    """The stored calibration of this target, dtype, device and kernels, else a fresh one."""
    from eagle3_check.judge.calibration import load

    key = calibration_key(ctx)  # the target's files hashed once, for the lookup and a fresh record
    return load(key) or measure(ctx, ctx.log, key)


def pte_wants_calibration(program, fixture: str | None) -> bool:
    """A `.pte` in a reduced precision whose target the constants were not measured on, unquantized (a
    quantized program is judged against its own target: DESIGN §3)."""
    from eagle3_check.program.contract import program_dtype

    md = program.metadata()
    return program_dtype(program) != "float32" and not md.get("get_quantization") and not measured_fixture(fixture)


def pte_calibration(program, target_dir, tokenizer, texts: list[str], options, log=None):
    """The stored calibration of a `.pte`'s target on its kernels (xnnpack), else a fresh one: `gate`'s
    (it loads the program itself); `check --pte` comes through `calibration_for`."""
    from eagle3_check.judge.calibration import CalibrationKey, load
    from eagle3_check.program.contract import program_dtype
    from eagle3_check.report.provenance import file_record

    key = CalibrationKey(file_record(target_dir)["sha256"], program_dtype(program), "cpu", pte_kernels(program))
    return load(key) or calibrate_pte(program, target_dir, key, tokenizer, texts, options, log)


def pte_kernels(program) -> str:
    """The kernel set of a `.pte`: the backend it was lowered with (its constant `get_export_backend`:
    xnnpack, xnnpack-bf16 or portable; a program that does not say is taken as XNNPACK's, the default)."""
    from eagle3_check.program.metadata_check import BACKEND_KEY

    return str(program.metadata().get(BACKEND_KEY) or "xnnpack")


def calibrate_pte(program, target_dir, key, tokenizer, texts: list[str], options, log=None):
    """A fresh calibration of a `.pte`'s target: its calibration twin (the target of `target_dir` in the
    program's dtype, lowered with the program's backend (`key.kernels`) as the program was, at the program's max_seq_len; exported once
    into `<cache>/calibration/twins/`) against the HF reference, stored (atomically) in the cache."""
    import torch

    from eagle3_check.judge.calibration import save, store_dir
    from eagle3_check.judge.calibration_measure import calibrate_target
    from eagle3_check.judge.hf import HFReference
    from eagle3_check.program.calibration_export import cached_twin
    from eagle3_check.program.contract import read_metadata
    from eagle3_check.program.target import TargetAdapter, load_hf_target
    from eagle3_check.runners.options import prompt_ids, stop_set

    log = log or (lambda line: print(line, file=sys.stderr))
    md = read_metadata(program.metadata())
    ids = [prompt_ids(tokenizer, t, options) for t in texts[:MAX_PROMPTS]]
    k, n = options.chain_len or md.chain_len, min(MAX_NEW, options.max_new_tokens)
    log(f"calibrating the tie tolerance on this target ({key.stem}): {len(ids)} prompts x up to {n} tokens on "
        f"its .pte twin (the target lowered with {key.kernels}, exported once), once; stored for later checks")
    dtype = getattr(torch, key.dtype)
    target = TargetAdapter(load_hf_target(target_dir, dtype), [0], md.max_seq_len).eval()
    twin = cached_twin(target, store_dir() / "twins" / f"{key.stem}.pte", key.kernels)
    del target
    cal = calibrate_target(twin, HFReference(target_dir, "cpu", dtype), ids, k,
                           set(stop_set(tokenizer, md, options).ids), n, md.max_seq_len, key)
    save(cal)
    return cal
