"""Shared CLI pieces: program/backend arguments, runner options, the offline environment."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from eagle3_check.cli.compile_flags import compile_from_args
from eagle3_check.cli.validate import Given
from eagle3_check.errors import InputError
from eagle3_check.preflight import check_program_pair
from eagle3_check.program.target_spec import DEFAULT as DEFAULT_TARGET_SPEC
from eagle3_check.run.options import parse_stop_ids, read_prompt_file

# The program spec of --target/--draft (eager backend) when the target config names no context; its
# K and verify range bound -k before loading. Its shape otherwise: program/target_spec.py.
TARGET_SPEC = DEFAULT_TARGET_SPEC


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
    g = p.add_argument_group("runner options (default: the tokenizer's and the model's own files, or the "
                             "Gemma 4 IT defaults for a Gemma 4 tokenizer; docs/run-options.md)")
    g.add_argument("--chat-prefix", default=None, help="text before the prompt (default: the chat template's)")
    g.add_argument("--chat-suffix", default=None, help="text after the prompt (default: the chat template's)")
    g.add_argument("--raw", action="store_true", help="no chat prefix/suffix")
    g.add_argument("--stop-ids", default=None, help="comma-separated stop token ids (default: the model's EOS "
                   "ids after the first)")
    g.add_argument("--stop-token", default=None, help="stop token string, added only if one token (default: "
                   "the chat template's end-of-turn token); '' for none")
    g.add_argument("--bos-id", type=int, default=None, help="BOS id to prepend; -1 to skip (default: none under "
                   "a chat template, else the tokenizer's own)")
    g.add_argument("--eos-id", type=int, default=None, help="EOS id added to the stop set; -1 for none (default: "
                   "generation_config.json's eos_token_id)")
    g.add_argument("--allow-text-stops", action="store_true",
                   help="let --stop-ids / --eos-id name ordinary text tokens (refused by default: docs/run-options.md)")
    g.add_argument("--max-new-tokens", type=int, default=max_new_default, action=Given)
    g.add_argument("-k", "--chain-len", type=int, default=None, action=Given,
                   help="chain length K (default: the program's)")
    g.add_argument("--chunked-prefill", action="store_true",
                   help="prefill a prompt in chunks (DESIGN §2 rule 4): L may exceed the program's max prefill")


def given_options(args: argparse.Namespace) -> dict:
    """The RunOptions fields the flags give: the template/stop/BOS/EOS flags only when given
    (their defaults come from the tokenizer: run/defaults.py), max new tokens, K, chunked prefill."""
    given = {f: getattr(args, f) for f in ("chat_prefix", "chat_suffix", "bos_id", "eos_id")
             if getattr(args, f, None) is not None}
    if getattr(args, "stop_ids", None) is not None:
        given["stop_ids"] = parse_stop_ids(args.stop_ids)
    if getattr(args, "stop_token", None) is not None:
        given["stop_token"] = args.stop_token or None  # '' = no stop token
    if getattr(args, "raw", False):
        given["raw"] = True
    for f in ("max_new_tokens", "chain_len", "chunked_prefill"):  # what this command's parser has
        if hasattr(args, f):
            given[f] = getattr(args, f)
    return given


def resolved_from_args(args: argparse.Namespace):
    """The run options of the flags' tokenizer and target (`request_world`) with the flags on top,
    and where each came from (a run.defaults.ResolvedOptions). Needs no program: a role error is
    one line before any model loads."""
    from eagle3_check.run.defaults import resolve_options

    tok_path, target_dir = request_world(args)
    tokenizer = load_tokenizer(tok_path)
    check_tokenizer_vocab(tokenizer, target_dir)  # a wrong tokenizer is named as that, before its roles
    return resolve_options(tokenizer, target_dir, given_options(args), getattr(args, "allow_text_stops", False))


def check_tokenizer_vocab(tokenizer, target_dir: Path) -> None:
    """run.options.check_tokenizer against the target config's vocab_size, before any program
    loads (the program's own vocab size is checked again once it has)."""
    import json
    import types

    from eagle3_check.run.options import check_tokenizer

    try:
        cfg = json.loads((Path(target_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the program's load names what is wrong with the config
    cfg = cfg.get("text_config", cfg) if isinstance(cfg, dict) else {}
    vocab = cfg.get("vocab_size") if isinstance(cfg, dict) else None
    if type(vocab) is int and vocab > 0:
        check_tokenizer(tokenizer, types.SimpleNamespace(vocab_size=vocab))


def options_from_args(args: argparse.Namespace):
    """The RunOptions of `resolved_from_args` (for a command that reports no sources)."""
    return resolved_from_args(args).options


def request_world(args: argparse.Namespace) -> tuple[Path, Path]:
    """(tokenizer path, target dir) the flags name: --pte's reference (program.sidecar), else
    --target (its tokenizer.json unless --tokenizer), else the fixture's; builds nothing."""
    tokenizer = getattr(args, "tokenizer", None)
    if getattr(args, "pte", None):
        _, target_dir, tok_path = reference_for_pte(args.pte, args.fixture, args.target, tokenizer)
        return Path(tok_path), Path(target_dir)
    if getattr(args, "target", None):
        return (Path(tokenizer) if tokenizer else Path(args.target) / "tokenizer.json"), Path(args.target)
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture

    fx = load_fixture(getattr(args, "fixture", None) or DEFAULT_FIXTURE)
    return (Path(tokenizer) if tokenizer else fx.tokenizer_path), fx.target_dir


_TOKENIZERS: dict = {}


def load_tokenizer(path: str | Path):
    """Tokenizer.load, once per path in this process (the options and the program share it)."""
    from eagle3_check.tokenizer import Tokenizer

    st = Path(path).stat() if Path(path).is_file() else None
    key = (str(path), st and st.st_mtime_ns, st and st.st_size)  # a file rewritten in place is read again
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = Tokenizer.load(path)
    return _TOKENIZERS[key]


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
    return ProgramSetup(program, load_tokenizer(tok_path), target_dir, info)


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
        check_program_pair(args.target, args.draft, args.fixture)  # also in preflight, before torch
        target_dir, draft_dir = Path(args.target), Path(args.draft)
        tok_path = Path(tokenizer) if tokenizer else target_dir / "tokenizer.json"
        from eagle3_check.program.target_spec import target_spec

        spec, shape = target_spec(target_dir, draft_dir, overrides, device, dtype)  # the config's, memory-bound
        program = EagerBackend.from_dirs(target_dir, draft_dir, spec, device, dtype, reuse_outputs=True)
        info = {"target": str(target_dir), "draft": str(draft_dir), "program_shape": shape}
    else:
        fx = load_fixture(args.fixture or DEFAULT_FIXTURE)
        target_dir = fx.target_dir
        tok_path = Path(tokenizer) if tokenizer else fx.tokenizer_path
        program = EagerBackend.from_fixture(fx, device, dtype, reuse_outputs=True, **overrides)
        info = {"fixture": fx.name}
    return program, target_dir, tok_path, info


def reference_for_pte(pte: str, fixture: str | None, target: str | None, tokenizer: str | None):
    """(fixture or None, target_dir, tokenizer path) for a .pte (`program.sidecar.reference_for_pte`)."""
    from eagle3_check.program.sidecar import reference_for_pte as for_pte

    return for_pte(pte, fixture, target, tokenizer)


def build_pte_program(args: argparse.Namespace) -> ProgramSetup:
    from eagle3_check.program.pte_probe import load_probed

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
    return ProgramSetup(program, load_tokenizer(tok_path), target_dir, info)


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
    """The `provenance` block of a `--json` report (report/provenance.py): the parsed options, the
    runner's RunOptions, package versions and the sha256 of every input file the flags name, plus
    the fixture's target, draft, tokenizer, card and prompt set when one is used."""
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.report.provenance import provenance

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
