"""Shared CLI pieces: program/backend arguments, runner options, the offline environment."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from eagle3_check.cli.compile_flags import compile_from_args
from eagle3_check.cli.validate import Given
from eagle3_check.errors import InputError
from eagle3_check.fixtures.registry import ProgramSpec
from eagle3_check.run.options import (
    GEMMA4_CHAT_PREFIX,
    GEMMA4_CHAT_SUFFIX,
    RunOptions,
    parse_stop_ids,
    read_prompt_file,
)

# The program spec of --target/--draft (eager backend); its verify range bounds -k before loading.
TARGET_SPEC = ProgramSpec(max_seq_len=256, min_prefill=1, max_prefill=128, chain_len=4, min_verify_len=2, max_verify_len=8)


def offline_environment() -> None:
    """The CLI never reaches the network (HF_HUB_OFFLINE=1 unless set). Library noise is silenced
    where it arises (eagle3_check/quiet.py, scoped), never here: no process-wide warning filter,
    so a warning from the user's own code (a plug-in runner) shows as Python shows it."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")


def add_program_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("program (default: the embedded tiny-llama fixture, eager backend)")
    g.add_argument("--fixture", default=None, help="embedded fixture name (see fixtures/); default tiny-llama")
    g.add_argument("--target", default=None, help="HF save_pretrained target directory (with --draft)")
    g.add_argument("--draft", default=None, help="speculators-layout EAGLE-3 draft directory (with --target)")
    g.add_argument("--tokenizer", default=None, help="tokenizer.json (default: the fixture's or the target's)")
    g.add_argument("--device", default="cpu", help="cpu or cuda (eager backend)")
    g.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"], help="eager backend dtype")
    g.add_argument("--cuda-graph", action=argparse.BooleanOptionalAction, default=None,
                   help="replay target_verify (and short draft_decode calls) as CUDA graphs "
                   "(default: on with --device cuda; --cuda-graph on CPU is an error)")
    g.add_argument("--max-seq-len", type=int, default=None,
                   help="override the program's max_seq_len (at most the target's max_position_embeddings)")
    g.add_argument("--threads", type=int, default=None, metavar="N",
                   help="CPU torch threads (default 1, or OMP_NUM_THREADS when set: see docs/real-models.md)")
    g.add_argument("--max-memory", type=float, default=None, metavar="GIB",
                   help="memory budget in GiB for the program and the HF reference, checked against an "
                   "estimate before anything is allocated (default: the memory available now)")
    g.add_argument("--min-prefill", type=int, default=None, help="override the min prefill chunk")
    g.add_argument("--max-prefill", type=int, default=None, help="override the max prefill chunk")
    g.add_argument("--pte", default=None, metavar="FILE",
                   help="run an exported .pte instead (pte extra); --fixture or --target gives the HF reference")
    g.add_argument("--data-path", default=None, metavar="FILE.ptd",
                   help="the .pte's external data file (weights exported outside the .pte)")


def add_runner_args(p: argparse.ArgumentParser, max_new_default: int = 128) -> None:
    g = p.add_argument_group("runner options (defaults follow Gemma 4 IT)")
    g.add_argument("--chat-prefix", default=GEMMA4_CHAT_PREFIX)
    g.add_argument("--chat-suffix", default=GEMMA4_CHAT_SUFFIX)
    g.add_argument("--raw", action="store_true", help="no chat prefix/suffix")
    g.add_argument("--stop-ids", default="1,50,106", help="comma-separated stop token ids")
    g.add_argument("--stop-token", default="<turn|>", help="stop token string (added only if one token)")
    g.add_argument("--bos-id", type=int, default=2, help="BOS id to prepend; -1 to skip")
    g.add_argument("--eos-id", type=int, default=1, help="EOS id added to the stop set; -1 for none")
    g.add_argument("--max-new-tokens", type=int, default=max_new_default, action=Given)
    g.add_argument("-k", "--chain-len", type=int, default=None, action=Given,
                   help="chain length K (default: the program's)")
    g.add_argument("--chunked-prefill", action="store_true",
                   help="prefill a prompt in chunks (DESIGN §2 rule 4): L may exceed the program's max prefill")


def options_from_args(args: argparse.Namespace) -> RunOptions:
    return RunOptions(
        chat_prefix=args.chat_prefix,
        chat_suffix=args.chat_suffix,
        raw=args.raw,
        stop_ids=parse_stop_ids(args.stop_ids),
        stop_token=args.stop_token or None,
        bos_id=args.bos_id,
        eos_id=args.eos_id,
        max_new_tokens=args.max_new_tokens,
        chain_len=args.chain_len,
        chunked_prefill=getattr(args, "chunked_prefill", False),
    )


def prompt_from_args(args: argparse.Namespace) -> str:
    if getattr(args, "prompt_file", None):
        return read_prompt_file(args.prompt_file)
    if args.prompt is None:
        raise InputError("no prompt given", "--prompt TEXT or --prompt-file PATH", 'pass --prompt "..."')
    if not args.prompt.strip() and not args.raw:
        raise InputError("prompt is empty", "a non-empty prompt", 'pass --prompt "..." with some text')
    return args.prompt


@dataclass
class ProgramSetup:
    program: object  # a SpeculatorProgram
    tokenizer: object  # eagle3_check.tokenizer.Tokenizer
    target_dir: Path
    info: dict


def build_program(args: argparse.Namespace) -> ProgramSetup:
    """The program the flags describe: a fixture (default) or --target/--draft, eager backend;
    or `--pte FILE`, the ExecuTorch backend."""
    if getattr(args, "pte", None):
        return build_pte_program(args)
    from eagle3_check.program.cuda_graph import GraphedProgram, with_cuda_graphs
    from eagle3_check.tokenizer import Tokenizer

    overrides = {
        k: v
        for k, v in (("max_seq_len", args.max_seq_len), ("min_prefill", args.min_prefill), ("max_prefill", args.max_prefill))
        if v is not None
    }
    program, target_dir, tok_path, info = eager_program(args, overrides)
    compiled = compile_from_args(program, args)  # --compile: cli/compile_flags.py; None when off
    program = with_cuda_graphs(program, getattr(args, "cuda_graph", None), compile_draft_steps=compiled is not None)
    graphs = isinstance(program, GraphedProgram) and program.verify_graphs.mode == "cuda"
    info.update(backend="eager", device=args.device, dtype=args.dtype, cuda_graph=graphs,
                compile=compiled or {"granularity": "off"})
    return ProgramSetup(program, Tokenizer.load(tok_path), target_dir, info)


def eager_program(args: argparse.Namespace, overrides: dict):
    """(EagerBackend, target_dir, tokenizer path, info) from --fixture (default) or --target/--draft;
    `overrides` are ProgramSpec fields. Also used by `export`. Its outputs are graph-owned
    (`reuse_outputs`: valid until the method's next call), as a .pte's are."""
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
    from eagle3_check.program.eager import EagerBackend

    device, dtype = getattr(args, "device", "cpu"), getattr(args, "dtype", "float32")
    tokenizer = getattr(args, "tokenizer", None)
    set_threads(device, getattr(args, "threads", None))
    if args.target or args.draft:
        if not (args.target and args.draft):
            missing = "--draft" if args.target else "--target"
            raise InputError(f"{missing} not given", "both --target DIR and --draft DIR", f"add {missing} DIR")
        if args.fixture:
            raise InputError("--fixture with --target/--draft", "one or the other", "drop --fixture")
        target_dir, draft_dir = Path(args.target), Path(args.draft)
        tok_path = Path(tokenizer) if tokenizer else target_dir / "tokenizer.json"
        spec = ProgramSpec(**{**TARGET_SPEC.__dict__, **overrides})
        program = EagerBackend.from_dirs(target_dir, draft_dir, spec, device, dtype, reuse_outputs=True)
        info = {"target": str(target_dir), "draft": str(draft_dir)}
    else:
        fx = load_fixture(args.fixture or DEFAULT_FIXTURE)
        target_dir = fx.target_dir
        tok_path = Path(tokenizer) if tokenizer else fx.tokenizer_path
        program = EagerBackend.from_fixture(fx, device, dtype, reuse_outputs=True, **overrides)
        info = {"fixture": fx.name}
    return program, target_dir, tok_path, info


def reference_for_pte(pte: str, fixture: str | None, target: str | None, tokenizer: str | None):
    """(fixture or None, target_dir, tokenizer path) for a .pte (`program.pte_source`)."""
    from eagle3_check.program.pte_source import reference_for_pte as for_pte

    return for_pte(pte, fixture, target, tokenizer)


def build_pte_program(args: argparse.Namespace) -> ProgramSetup:
    from eagle3_check.program.pte_probe import load_probed
    from eagle3_check.tokenizer import Tokenizer

    if args.draft:
        raise InputError("--draft with --pte", "the draft inside the .pte", "drop --draft")
    for flag in ("max_seq_len", "min_prefill", "max_prefill"):
        if getattr(args, flag, None) is not None:
            name = "--" + flag.replace("_", "-")
            raise InputError(f"{name} with --pte", "the shapes the .pte was exported with",
                             f"drop {name}, or re-export with `eagle3-check export`")
    if args.device != "cpu":
        raise InputError(f"--device {args.device} with --pte", "cpu (a .pte runs on CPU here)", "drop --device")
    fx, target_dir, tok_path = reference_for_pte(args.pte, args.fixture, args.target, args.tokenizer)
    program = load_probed(args.pte, getattr(args, "data_path", None))  # a load that aborts the runtime: one line
    if args.dtype not in ("float32", program.dtype):  # float32 is the flag's default: the program's dtype wins
        raise InputError(f"--dtype {args.dtype} with --pte {args.pte}", f"the program's own dtype, {program.dtype}",
                         "drop --dtype (it is read from the .pte)")
    args.dtype = program.dtype  # the tolerance, tie budget and HF reference follow the program's dtype
    info = {**({"fixture": fx.name} if fx else {"target": str(target_dir)}), **program.info, "device": "cpu"}
    return ProgramSetup(program, Tokenizer.load(tok_path), target_dir, info)


def default_runner(device: str) -> str:
    """The runner a command uses unless told: the device-resident one on CUDA, else the reference."""
    return "device" if str(device).startswith("cuda") else "reference"


def set_threads(device: str, threads: int | None = None) -> None:
    """CPU torch threads: `--threads N`, else 1. One thread: the embedded fixtures are tiny (one is
    ~3x faster than two on a 2-core machine, measured on `check --suite edge`), and on the shared
    2-core machine two threads of SmolLM2 were 5 to 20 times slower than one (docs/real-models.md;
    one against two on an idle machine is not measured yet). Without --threads, left alone when
    OMP_NUM_THREADS is set; always left alone on CUDA."""
    if device != "cpu" or (threads is None and "OMP_NUM_THREADS" in os.environ):
        return
    import torch

    torch.set_num_threads(threads or 1)


def report_provenance(args: argparse.Namespace, fixture: str | None = None, run_options=None,
                      extra_files: dict | None = None) -> dict:
    """The `provenance` block of a `--json` report (gating/provenance.py): the parsed options, the
    runner's RunOptions, package versions and the sha256 of every input file the flags name, plus
    the fixture's target, draft, tokenizer, card and prompt set when one is used."""
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.gating.provenance import provenance

    options = {k: v for k, v in vars(args).items() if k not in ("func", "given")}
    files: dict = {flag: getattr(args, flag, None) for flag in ("pte", "prompts", "target", "draft", "tokenizer",
                                                               "golden", "baseline")}
    for i, g in enumerate(getattr(args, "goldens", None) or []):
        files[f"golden {i}" if i else "golden"] = g
    if fixture:
        fx = load_fixture(fixture)
        files.update({"fixture target": fx.target_dir, "fixture draft": fx.draft_dir,
                      "fixture tokenizer": fx.tokenizer_path, "fixture card": fx.card_path})
        if not getattr(args, "prompts", None):
            files["prompts"] = fx.prompts_path
    files.update(extra_files or {})
    return provenance(options, files, run_options)
