"""The program a `Config` names, its tokenizer and its run options: built, not parsed.

The program is an embedded fixture (default), `--target/--draft` on the eager backend
(optionally compiled, optionally replayed as CUDA graphs), a `.pte` on the ExecuTorch
backend or an AOTI package (`--aoti`) on the AOTI backend, each with the reference its sidecar
names (`program.sidecar.reference_for_pte`). The run
options resolve from the tokenizer's and the target's own files with the given options on
top (runners/defaults.py); that needs no program, so a role error is one line before a model loads.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from eagle3_check.errors import InputError

OVERRIDES = ("max_seq_len", "min_prefill", "max_prefill")  # the ProgramSpec fields a flag may set
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")  # program/compiled.MODES (no torch here)
COMPILE_ATTENTIONS = ("grouped", "sdpa")  # program/compiled.ATTENTIONS; grouped is the bench's default


@dataclass
class ProgramSetup:
    program: object  # a SpeculatorProgram
    tokenizer: object  # eagle3_check.tokenizer.Tokenizer
    target_dir: Path
    info: dict


def build_program(cfg) -> ProgramSetup:
    """The program the config describes: a fixture (default) or --target/--draft, eager backend;
    or `--pte FILE`, the ExecuTorch backend."""
    if cfg.pte:
        return build_pte_program(cfg)
    if cfg.aoti:
        return build_aoti_program(cfg)
    from eagle3_check.program.cuda_graph import GraphedProgram, with_cuda_graphs

    program, target_dir, tok_path, info = eager_program(cfg, overrides_of(cfg))
    compiled = compile_program(program, cfg)  # None when --compile is off
    program = with_cuda_graphs(program, cfg.cuda_graph, compile_draft_steps=compiled is not None)
    graphs = isinstance(program, GraphedProgram) and program.verify_graphs.mode == "cuda"
    info.update(backend="eager", device=cfg.device, dtype=cfg.dtype, cuda_graph=graphs,
                compile=compiled or {"granularity": "off"})
    return ProgramSetup(program, load_tokenizer(tok_path), target_dir, info)


def overrides_of(cfg, fields: tuple = OVERRIDES) -> dict:
    """The ProgramSpec fields the config sets (flat option names: export's verify range is its section's)."""
    return {k: cfg.value(k) for k in fields if cfg.value(k) is not None}


def compile_program(program, cfg) -> dict | None:
    """None with --compile off; else compiles `program`'s target (program/compiled.py) and returns
    the settings for the report; the caller wraps the program with compile_draft_steps."""
    if cfg.compile in (None, "off"):
        return None
    from eagle3_check.program.compiled import compile_program as compile_target

    return compile_target(program, cfg.compile, cfg.compile_mode or COMPILE_MODES[0],
                          cfg.compile_attention or COMPILE_ATTENTIONS[0])


def eager_program(cfg, overrides: dict):
    """(EagerBackend, target_dir, tokenizer path, info) from --fixture (default) or --target/--draft;
    `overrides` are ProgramSpec fields. Also used by `export`. Its outputs are graph-owned
    (`reuse_outputs`: valid until the method's next call), as a .pte's are."""
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
    from eagle3_check.program.eager import EagerBackend

    dtype = cfg.dtype
    set_threads(cfg.device, cfg.threads)
    device = getattr(cfg, "devices", None) or cfg.device  # --devices: the list (program/placement.py)
    if cfg.target or cfg.draft:
        from eagle3_check.preflight import check_program_pair

        check_program_pair(cfg.target, cfg.draft, cfg.fixture)  # also in validate, before torch
        target_dir, draft_dir = Path(cfg.target), Path(cfg.draft)
        tok_path = Path(cfg.tokenizer) if cfg.tokenizer else target_dir / "tokenizer.json"
        from eagle3_check.program.target_spec import target_spec

        spec, shape = target_spec(target_dir, draft_dir, overrides, device, dtype)  # the config's, memory-bound
        program = EagerBackend.from_dirs(target_dir, draft_dir, spec, device, dtype, reuse_outputs=True)
        info = {"target": str(target_dir), "draft": str(draft_dir), "program_shape": shape}
    else:
        fx = load_fixture(cfg.fixture or DEFAULT_FIXTURE)
        target_dir = fx.target_dir
        tok_path = Path(cfg.tokenizer) if cfg.tokenizer else fx.tokenizer_path
        program = EagerBackend.from_fixture(fx, device, dtype, reuse_outputs=True, **overrides)
        info = {"fixture": fx.name}
    if getattr(program, "placement", None) is not None:
        info["placement"] = program.placement.describe()
    if getattr(program, "weight_conversion", None):  # weights stored in another dtype than they run in
        info["weight_conversion"] = program.weight_conversion
    return program, target_dir, tok_path, info


def build_pte_program(cfg) -> ProgramSetup:
    """The .pte's program, loaded in a probe first; its info carries its own dtype (`program_dtype`)."""
    from eagle3_check.program.pte_probe import load_probed
    from eagle3_check.program.sidecar import reference_for_pte

    refuse_shape_flags(cfg, "--pte", "the .pte", "re-export with `eagle3-check export`")
    if cfg.device != "cpu":
        raise InputError(f"--device {cfg.device} with --pte", "cpu (a .pte runs on CPU here)", "drop --device")
    fx, target_dir, tok_path = reference_for_pte(cfg.pte, cfg.fixture, cfg.target, cfg.tokenizer)
    program = load_probed(cfg.pte, cfg.data_path)  # a load that aborts the runtime: one line
    if cfg.dtype not in ("float32", program.dtype):  # float32 is the flag's default: the program's dtype wins
        raise InputError(f"--dtype {cfg.dtype} with --pte {cfg.pte}", f"the program's own dtype, {program.dtype}",
                         "drop --dtype (it is read from the .pte)")
    info = {**({"fixture": fx.name} if fx else {"target": str(target_dir)}), **program.info, "device": "cpu"}
    return ProgramSetup(program, load_tokenizer(tok_path), target_dir, info)


def refuse_shape_flags(cfg, flag: str, what: str, fix: str) -> None:
    """--draft and the ProgramSpec overrides with a compiled program (`flag`: --pte, --aoti): its own."""
    if cfg.draft:
        raise InputError(f"--draft with {flag}", f"the draft inside {what}", "drop --draft")
    for field in OVERRIDES:
        if getattr(cfg, field) is not None:
            name = "--" + field.replace("_", "-")
            raise InputError(f"{name} with {flag}", f"the shapes {what} was compiled with", f"drop {name}, or {fix}")


def build_aoti_program(cfg) -> ProgramSetup:
    """`--aoti F.pt2`: the package on its device (program/aoti_backend.py; `--device cuda:N` picks the GPU),
    with the reference its sidecar names (`sidecar.reference_for_pte`: --target, --fixture, its fixture)."""
    from eagle3_check.program.aoti_backend import AotiBackend
    from eagle3_check.program.sidecar import reference_for_pte

    refuse_shape_flags(cfg, "--aoti", "the package", "re-compile with `eagle3-check export --aoti`")
    fx, target_dir, tok_path = reference_for_pte(cfg.aoti, cfg.fixture, cfg.target, cfg.tokenizer)
    index = cuda_index(cfg.device)
    program = AotiBackend(cfg.aoti, index, weights_source=aoti_weights_source(cfg, fx, target_dir, index))
    if "device" in cfg.given and program.device.type != cfg.device.split(":")[0]:
        raise InputError(f"--device {cfg.device} with --aoti {cfg.aoti}", f"the package's own device, "
                         f"{program.device.type}", "drop --device")
    if cfg.dtype not in ("float32", program.dtype):  # float32 is the flag's default: the program's dtype wins
        raise InputError(f"--dtype {cfg.dtype} with --aoti {cfg.aoti}", f"the program's own dtype, {program.dtype}",
                         "drop --dtype (it is read from the package's sidecar)")
    info = {**({"fixture": fx.name} if fx else {"target": str(target_dir)}), **program.info}
    return ProgramSetup(program, load_tokenizer(tok_path), target_dir, info)


def cuda_index(device: str) -> int | None:
    """N of `--device cuda:N`, else None (the package's own device, cuda:0 for a CUDA one)."""
    return int(device.split(":")[1]) if device.startswith("cuda:") else None


def aoti_weights_source(cfg, fx, target_dir, index):
    """For a package compiled without its weights (program/aoti_weights.py): the eager program they are
    taken from (`aoti_eager`); None for a package that embeds them."""
    from eagle3_check.program.aoti_backend import read_aoti_sidecar
    from eagle3_check.program.aoti_weights import EXTERNAL, weights_mode

    record = read_aoti_sidecar(Path(cfg.aoti))
    if weights_mode(record) != EXTERNAL:
        return None
    return aoti_eager(cfg, fx, target_dir, index, record)


def aoti_eager(cfg, fx=None, target_dir=None, index=None, record=None):
    """The eager program of an AOTI package (`--aoti`): built from the judged target and the draft (the
    fixture's, --draft, else the one the sidecar names) with the package's spec, dtype and device. An
    external package's weights are this program's tensors; an embedded package's calibration measures
    this program's target (jobs/common/calibrate.py: AOTI is judged under the tolerance of eager kernels).
    Without `target_dir` the reference's world is resolved here; `record`: the sidecar, when read already."""
    from eagle3_check.fixtures.registry import ProgramSpec
    from eagle3_check.program.aoti_backend import package_device, read_aoti_sidecar
    from eagle3_check.program.eager import EagerBackend
    from eagle3_check.program.sidecar import reference_for_pte

    if target_dir is None:
        fx, target_dir, _ = reference_for_pte(cfg.aoti, cfg.fixture, cfg.target, cfg.tokenizer)
        index = cuda_index(cfg.device)
    record = record or read_aoti_sidecar(Path(cfg.aoti))
    draft = fx.draft_dir if fx else (cfg.draft or record.get("source", {}).get("draft"))
    if not draft:
        raise InputError(f"--aoti {cfg.aoti}: judged with --target and no --draft (its weights, or the "
                         "calibration of its target, need the eager program)", "the draft it was compiled from",
                         "pass --draft DIR")
    if not Path(draft).is_dir():
        raise InputError(f"draft directory {draft} (for the eager program of {cfg.aoti}) does not exist",
                         "the draft directory the package was compiled from", "pass --draft DIR")
    device = package_device(record, index)
    return EagerBackend.from_dirs(target_dir, draft, ProgramSpec(**record["spec"]), str(device), record["dtype"])


def given_options(cfg) -> dict:
    """The RunOptions fields the config gives: the template/stop/BOS/EOS options only when given
    (their defaults come from the tokenizer: runners/defaults.py), max new tokens, K, chunked prefill."""
    from eagle3_check.runners.options import parse_stop_ids

    given = {f: getattr(cfg, f) for f in ("chat_prefix", "chat_suffix", "bos_id", "eos_id")
             if getattr(cfg, f) is not None}
    if cfg.stop_ids is not None:
        given["stop_ids"] = parse_stop_ids(cfg.stop_ids)
    if cfg.stop_token is not None:
        given["stop_token"] = cfg.stop_token or None  # '' = no stop token
    if cfg.raw:
        given["raw"] = True
    for f in ("max_new_tokens", "chain_len", "chunked_prefill"):  # what this command has
        if cfg.has(f):
            given[f] = getattr(cfg, f)
    profile = getattr(cfg, "runner_profile", None)
    from eagle3_check.runners.seam import kind_of

    if profile and not kind_of(cfg.runner).program_file:  # an in-process runner given a profile that chunks
        from eagle3_check.runners.profiles import profile_named

        if profile_named(profile).chunks and profile_named(profile).clamps:
            given["chunked_prefill"] = True  # every request is chunked as that runner chunks it (runners/profiles.py)
    return given


def resolved_options(cfg):
    """The run options of the config's tokenizer and target (`request_world`) with the given
    options on top, and where each came from (a runners.defaults.ResolvedOptions)."""
    from eagle3_check.runners.defaults import resolve_options

    tok_path, target_dir = request_world(cfg)
    tokenizer = load_tokenizer(tok_path)
    check_tokenizer_vocab(tokenizer, target_dir)  # a wrong tokenizer is named as that, before its roles
    return resolve_options(tokenizer, target_dir, given_options(cfg), cfg.allow_text_stops)


def check_tokenizer_vocab(tokenizer, target_dir: Path) -> None:
    """runners.options.check_tokenizer against the target config's vocab_size, before any program
    loads (the program's own vocab size is checked again once it has)."""
    import json
    import types

    from eagle3_check.runners.options import check_tokenizer

    try:
        cfg = json.loads((Path(target_dir) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return  # the program's load names what is wrong with the config
    cfg = cfg.get("text_config", cfg) if isinstance(cfg, dict) else {}
    vocab = cfg.get("vocab_size") if isinstance(cfg, dict) else None
    if type(vocab) is int and vocab > 0:
        check_tokenizer(tokenizer, types.SimpleNamespace(vocab_size=vocab))


def request_world(cfg) -> tuple[Path, Path]:
    """(tokenizer path, target dir) the config names: --pte's reference (program.sidecar), else
    --target (its tokenizer.json unless --tokenizer), else the fixture's; builds nothing."""
    if cfg.pte or cfg.aoti:
        from eagle3_check.program.sidecar import reference_for_pte

        _, target_dir, tok_path = reference_for_pte(cfg.pte or cfg.aoti, cfg.fixture, cfg.target, cfg.tokenizer)
        return Path(tok_path), Path(target_dir)
    if cfg.target:
        return (Path(cfg.tokenizer) if cfg.tokenizer else Path(cfg.target) / "tokenizer.json"), Path(cfg.target)
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture

    fx = load_fixture(cfg.fixture or DEFAULT_FIXTURE)
    return (Path(cfg.tokenizer) if cfg.tokenizer else fx.tokenizer_path), fx.target_dir


_TOKENIZERS: dict = {}


def load_tokenizer(path: str | Path):
    """Tokenizer.load, once per path in this process (the options and the program share it)."""
    from eagle3_check.tokenizer import Tokenizer

    st = Path(path).stat() if Path(path).is_file() else None
    key = (str(path), st and st.st_mtime_ns, st and st.st_size)  # a file rewritten in place is read again
    if key not in _TOKENIZERS:
        _TOKENIZERS[key] = Tokenizer.load(path)
    return _TOKENIZERS[key]


def prompt_text(cfg) -> str:
    """`run`'s one prompt: --prompt-file's text, else --prompt (empty only with --raw)."""
    from eagle3_check.runners.options import read_prompt_file

    if cfg.prompt_file:
        return read_prompt_file(cfg.prompt_file)
    if cfg.prompt is None:
        raise InputError("no prompt given", "--prompt TEXT or --prompt-file PATH", 'pass --prompt "..."')
    if not cfg.prompt.strip() and not cfg.raw:
        raise InputError("prompt is empty", "a non-empty prompt", 'pass --prompt "..." with some text')
    return cfg.prompt


def default_runner(device: str) -> str:
    """The runner a command uses unless told: the device-resident one on CUDA, else the reference."""
    return "device" if str(device).startswith("cuda") else "reference"


def set_threads(device: str, threads: int | None = None) -> None:
    """CPU torch threads: `--threads N`, else 1, for every model size: the embedded fixtures are tiny
    (one is ~3x faster than two on a 2-core machine, measured on `check --suite edge`), and on the
    shared 2-core machine two threads of SmolLM2's `check` cost 8 to 9 times one, alternated in one
    run (docs/real-models.md "Threads"). Without --threads, left alone when OMP_NUM_THREADS is set;
    always left alone on CUDA."""
    if device != "cpu" or (threads is None and "OMP_NUM_THREADS" in os.environ):
        return
    import torch

    torch.set_num_threads(threads or 1)
