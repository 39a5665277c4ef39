"""Argument checks that need no model: run before any subcommand imports torch or loads anything.

`preflight(args)` looks at whichever of the shared flags the subcommand has (attributes absent
from the namespace are skipped), so one pass serves every subcommand. What needs the program
(its K range, its vocab size) is checked again once it is loaded (run/options.check_options).

`Parser` is the CLI's ArgumentParser: no abbreviated flags, and an unknown flag gets a
"did you mean --X?" from the parser's own option strings.
"""

from __future__ import annotations

import argparse
import difflib
import re
from pathlib import Path

from eagle3_check.errors import InputError, OptionError
from eagle3_check.preflight import check_device, check_program_pair

DEVICE_RE = re.compile(r"cpu|cuda(:\d+)?")

# flag dest -> what the path must be. Directories to read, files to read.
DIRS = {"target": "--target", "draft": "--draft"}
FILES = {"prompts": "--prompts", "pte": "--pte", "tokenizer": "--tokenizer", "baseline": "--baseline",
         "from_pte": "--from-pte", "data_path": "--data-path"}
# flag dest -> smallest allowed value (integers given by the user; None = not given)
AT_LEAST = {"max_new_tokens": 1, "max_seq_len": 1, "min_prefill": 1, "max_prefill": 1,
            "min_verify_len": 2, "max_verify_len": 2, "threads": 1, "steps": 1, "batch_size": 1, "seed": 0,
            "group_size": 1}


class Parser(argparse.ArgumentParser):
    """No abbreviations (`--max-new-token` is an error, not `--max-new-tokens`); unknown flags
    get a suggestion; every parse error is one line. Subparsers inherit the class (argparse's parser_class default)."""

    def __init__(self, *a, **kw):
        kw.setdefault("allow_abbrev", False)
        super().__init__(*a, **kw)

    def parse_known_args(self, args=None, namespace=None):
        ns, extras = super().parse_known_args(args, namespace)
        for arg in extras:
            if arg.startswith("-") and not _is_number(arg):
                raise unknown_flag_error(arg, self.prog, self._option_string_actions)
        return ns, extras

    def error(self, message: str):
        """argparse's own errors (a bad choice, a missing value, not an int) as the one-line
        Eagle3CheckError every other user error is, instead of usage + exit."""
        raise OptionError(f"{self.prog}: {message}", f"the arguments `{self.prog} --help` lists",
                          f"see `{self.prog} --help`")


def _is_number(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def unknown_flag_error(arg: str, prog: str, options) -> OptionError:
    """'unknown flag --max-new-token; expected a flag of `eagle3-check run`. Fix: did you mean
    --max-new-tokens?' (difflib over the parser's option strings; `--flag=value` is matched on
    its flag part)."""
    flag = arg.split("=", 1)[0]
    close = difflib.get_close_matches(flag, [o for o in options if o.startswith("--")], n=1, cutoff=0.6)
    hint = f"did you mean {close[0]}?" if close else f"see `{prog} --help` for its flags"
    return OptionError(f"unknown flag {arg}", f"a flag of `{prog}`", hint)


def preflight(args: argparse.Namespace) -> None:
    """Every check on `args` that needs neither torch nor a model; raises Eagle3CheckError."""
    _device(args)
    if getattr(args, "fixture", None):
        from eagle3_check.fixtures.registry import load_fixture

        load_fixture(args.fixture)  # an unknown name: "did you mean"
    if "target" in vars(args) and "draft" in vars(args) and not getattr(args, "pte", None):
        check_program_pair(args.target, args.draft, getattr(args, "fixture", None))  # before the paths
    _paths(args)
    _ranges(args)
    _suite_name(args)
    _suite_overrides(args)
    from eagle3_check.cli.compile_flags import check_compile_flags

    check_compile_flags(args)  # --compile with --pte, --compile-mode without --compile, ...
    if getattr(args, "command", None) == "check":
        from eagle3_check.gating.workers import check_flags

        check_flags(args.workers, args.shard, args.suite or args.list, args.runner)
    if getattr(args, "prompts", None):
        check_prompt_set(args.prompts, raw=getattr(args, "raw", False))


def _device(args: argparse.Namespace) -> None:
    device = getattr(args, "device", None)
    if device is not None and not DEVICE_RE.fullmatch(device):
        raise OptionError(f"--device {device}", "cpu, cuda or cuda:N", "pass --device cpu or --device cuda")
    check_device(device)  # the NVIDIA driver, looked for without torch (eagle3_check/preflight.py)
    if getattr(args, "cuda_graph", None) and device == "cpu":
        raise OptionError("--cuda-graph with --device cpu", "a CUDA device (graphs replay on a GPU)",
                          "drop --cuda-graph, or pass --device cuda")


def _paths(args: argparse.Namespace) -> None:
    """Input paths: directories are directories, files are regular files (a FIFO, a device or a
    directory is named as what it is: inputs.regular_file); the -o path is writable (atomic.check_writable)."""
    from eagle3_check.atomic import check_writable
    from eagle3_check.inputs import kind_of, regular_file

    for dest, flag in DIRS.items():
        value = getattr(args, dest, None)
        if value:  # a directory, or a hub id from the local HF cache (never downloaded)
            from eagle3_check.program.hub import resolve_model_dir

            if Path(value).exists() and not Path(value).is_dir():
                raise InputError(f"{flag} {value}: is {kind_of(Path(value).stat().st_mode)}", "an existing directory",
                                 f"fix the {flag} path")
            setattr(args, dest, str(resolve_model_dir(value, flag)))
    for dest, flag in FILES.items():
        value = getattr(args, dest, None)
        if dest == "baseline" and getattr(args, "golden_command", None) == "baseline":
            continue  # `golden baseline --baseline FILE` writes it
        if value:
            regular_file(value, flag, f"fix the {flag} path")
    if getattr(args, "data_path", None) and not getattr(args, "pte", None):
        raise InputError(f"--data-path {args.data_path} without --pte", "--data-path with the .pte it belongs to",
                         "add --pte FILE.pte, or drop --data-path")
    golden = getattr(args, "golden", None)  # gate --golden: a golden file or a directory of them
    for value in [*(getattr(args, "goldens", None) or []), *([golden] if golden else [])]:
        if not Path(value).exists():
            raise InputError(f"golden {value} does not exist", "a golden file or directory", "fix the path")
        if not Path(value).is_dir():
            regular_file(value, "golden", "pass a golden file or a directory of them")
    root = getattr(args, "root", None)  # `fixtures build --root DIR`: created when missing, never a file
    if root and Path(root).exists() and not Path(root).is_dir():
        raise InputError(f"--root {root} exists and is not a directory", "a directory (created when missing)",
                         "pass a directory path")
    if getattr(args, "html", None):  # before the run: a missing directory must not lose the report
        check_writable(args.html, "--html")
    if getattr(args, "junit", None):  # the XML is written after the run: its directory is checked now
        check_writable(args.junit, "--junit")
    out = getattr(args, "output", None)
    if out:
        check_writable(out, "-o")


def _ranges(args: argparse.Namespace) -> None:
    for dest, low in AT_LEAST.items():
        v = getattr(args, dest, None)
        if v is not None and v < low:
            what = f"max new tokens = {v}" if dest == "max_new_tokens" else f"--{dest.replace('_', '-')} {v}"
            raise OptionError(what, f"an integer >= {low}", f"pass --{dest.replace('_', '-')} {low} or more")
    for dest in ("bos_id", "eos_id"):
        v = getattr(args, dest, None)
        if v is not None and v < -1:
            flag = "--" + dest.replace("_", "-")
            raise OptionError(f"{dest.replace('_', ' ')} {v}", "-1 (none) or a token id >= 0", f"fix {flag}")
    if getattr(args, "stop_ids", None) is not None:
        from eagle3_check.run.options import parse_stop_ids

        for sid in parse_stop_ids(args.stop_ids):
            if sid < 0:
                raise OptionError(f"stop id {sid}", "token ids >= 0", "fix --stop-ids")
    _chain_len(args)
    for dest, flag in (("tie_budget", "--tie-budget"),):
        v = getattr(args, dest, None)
        if v is not None and not 0.0 <= v <= 1.0:
            raise OptionError(f"{flag} {v:g}", "a share of judged positions in [0, 1]", f"pass e.g. {flag} 0")
    from eagle3_check.binary.runner import request_timeout

    request_timeout(getattr(args, "runner_timeout", None))  # one rule with the pytest plugin's
    threads = getattr(args, "threads", None)
    if threads is not None and threads < 1 and getattr(args, "command", None) != "fixtures":
        raise OptionError(f"--threads {threads}", "1 or more CPU threads", "pass --threads 1")
    mem = getattr(args, "max_memory", None)
    if mem is not None and not mem > 0:
        raise OptionError(f"--max-memory {mem:g}", "a budget in GiB > 0", "pass e.g. --max-memory 16")
    expect = getattr(args, "expect_tau", None)
    if expect is not None and not 0 < expect < float("inf"):
        raise OptionError(f"--expect-tau {expect:g}", "a tau > 0 (the draft's tau on a good run, e.g. the card's)",
                          "pass e.g. --expect-tau 2.0")
    tau = getattr(args, "tau_tolerance", None)
    if tau is not None and not tau >= 0:
        raise OptionError(f"--tau-tolerance {tau:g}", "a tau drop >= 0", "pass e.g. --tau-tolerance 0.05")


def _chain_len(args: argparse.Namespace) -> None:
    """K >= 1 always; the upper bound is known before loading only for an eager program
    (its verify window range comes from the fixture or from the --target spec); a .pte's own
    range is checked when it loads."""
    k = getattr(args, "chain_len", None)
    if k is None:
        return
    if getattr(args, "pte", None) or getattr(args, "command", None) == "export":
        lo, hi = 1, None
    else:
        lo, hi = static_k_range(args)
    if k < lo or (hi is not None and k > hi):
        expected = f"K in [{lo}, {hi}] (the program's verify window range minus one)" if hi else "K >= 1"
        raise OptionError(f"chain length K = {k}", expected,
                          f"pass -k between {lo} and {hi}" if hi else "pass -k 1 or more")


def static_k_range(args: argparse.Namespace) -> tuple[int, int]:
    """The K range of the eager program the flags describe, without building it."""
    from eagle3_check.cli.common import TARGET_SPEC
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture

    spec = TARGET_SPEC if getattr(args, "target", None) else load_fixture(args.fixture or DEFAULT_FIXTURE).spec
    return max(1, spec.min_verify_len - 1), spec.max_verify_len - 1


def _suite_name(args: argparse.Namespace) -> None:
    """`check --suite NAME` / `gate --suite NAME`: an unknown suite or case name is refused here,
    with a "did you mean", not after the program and the reference have loaded (`gate --suite none`
    turns the suites off)."""
    name = getattr(args, "suite", None)
    if getattr(args, "command", None) in ("check", "gate") and name and name != "none":
        from eagle3_check.suites import suite_cases

        suite_cases(name)


def _suite_overrides(args: argparse.Namespace) -> None:
    """`check --suite`: every case sets its own runner options, so a given one would be ignored."""
    if getattr(args, "command", None) != "check" or not getattr(args, "suite", None):
        return
    for dest in ("max_new_tokens", "chain_len"):
        if dest in getattr(args, "given", ()):
            flag = "--max-new-tokens" if dest == "max_new_tokens" else "-k/--chain-len"
            raise OptionError(f"{flag} with --suite", "no runner options (each case sets its own)", f"drop {flag}")


class Given(argparse.Action):
    """Stores the value and records that the user gave the flag (`args.given`), so a default
    can be told from an explicit value equal to it."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, self.dest, values)
        namespace.given = {*getattr(namespace, "given", ()), self.dest}


def check_prompt_set(path: str, raw: bool) -> None:
    """Loads the prompt set (missing, malformed, duplicate ids: errors) and applies the empty-text
    rule that `run --prompt` applies: empty or whitespace-only text is refused unless --raw."""
    from eagle3_check.fixtures.registry import load_prompts

    for p in load_prompts(path):
        if not raw and not p.text.strip():
            raise InputError(f"prompt '{p.id}' in {path} is empty", "a non-empty prompt text",
                             "write some text for it, or drop it")
