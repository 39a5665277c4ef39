"""`--compile {off,layer,model}`, `--compile-mode`, `--compile-attention` for `run` and `check`:
the compiled, graph-captured fast path of `bench/gpu_bench.py` (program/compiled.py) through the
CLI, so it can be judged like any other program.

`add_compile_args` registers them; `check_compile_flags` (from `validate.preflight`, before torch
is imported) refuses what would be ignored; `compile_from_args` installs the compile on the eager
program `common.build_program` built and returns the settings its report records.
"""

from __future__ import annotations

import argparse

from eagle3_check.errors import OptionError

GRANULARITIES = ("off", "layer", "model")  # program/compiled.py's, plus off
MODES = ("default", "max-autotune-no-cudagraphs")  # compiled.MODES (torch not imported here)
ATTENTIONS = ("grouped", "sdpa")  # compiled.ATTENTIONS; grouped is the bench's default


def add_compile_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("compiled fast path (eager program; bench/gpu_bench.py's)")
    g.add_argument("--compile", default="off", choices=GRANULARITIES,
                   help="torch.compile the target forward (layer: one graph per decoder layer, model: one "
                   "for the whole forward) and the draft's one-token chain steps, then capture them as "
                   "CUDA graphs with --device cuda; on CPU it needs a C++ compiler (default: off)")
    g.add_argument("--compile-mode", default=None, choices=MODES,
                   help="inductor mode (default: default; needs --compile)")
    g.add_argument("--compile-attention", default=None, choices=ATTENTIONS,
                   help="grouped (no per-head copy of the KV cache, the bench's default) or sdpa (HF's "
                   "repeat_kv + sdpa) (default: grouped; needs --compile)")


def check_compile_flags(args: argparse.Namespace) -> None:
    """One-line errors, no torch: --compile with --pte, with --list (nothing runs), or on suite cases
    that build their own programs; --compile-mode / --compile-attention without --compile."""
    granularity = getattr(args, "compile", None)
    if granularity is None:  # a subcommand without the flags
        return
    if granularity == "off":
        for dest in ("compile_mode", "compile_attention"):
            if getattr(args, dest, None) is not None:
                flag = "--" + dest.replace("_", "-")
                raise OptionError(f"{flag} without --compile", "--compile layer or --compile model with it",
                                  f"add --compile layer, or drop {flag}")
        return
    if getattr(args, "pte", None):
        raise OptionError(f"--compile {granularity} with --pte {args.pte}",
                          "an eager program (--fixture or --target/--draft); a .pte is compiled when exported",
                          "drop --compile")
    if getattr(args, "list", False):
        raise OptionError(f"--compile {granularity} with --list", "a check or a run: --list only prints the "
                          "suites and their cases", "drop --compile")
    if getattr(args, "suite", None) and not getattr(args, "target", None):
        raise OptionError(f"--compile {granularity} with --suite on the embedded fixtures",
                          "a prompt-set check, or a suite on one program (--target/--draft): "
                          "fixture suite cases build their own programs", "drop --compile or --suite")


def compile_from_args(program, args: argparse.Namespace) -> dict | None:
    """None with --compile off; else compiles `program`'s target (program/compiled.py) and returns
    the settings for the report; the caller wraps the program with compile_draft_steps."""
    granularity = getattr(args, "compile", "off")
    if granularity == "off":
        return None
    from eagle3_check.program.compiled import compile_program

    return compile_program(program, granularity, args.compile_mode or MODES[0],
                           args.compile_attention or ATTENTIONS[0])
