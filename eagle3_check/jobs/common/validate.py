"""The checks on a `Config` that need no model: run where it is built, before torch is imported.

`validated(cfg)` looks at whichever options the command has, so one pass serves every
command; it returns the config with `--target`/`--draft` hub ids resolved to their local
directories. A section's checks of its own values live next to it (`CheckOptions.check_values`,
`GateOptions.check_values`, `DriftOptions.thresholds`) and are called here; what combines options
of several places (a flag with --suite, --html where nothing writes it) stays here, and the tables
of flags read their values by flat name (`Config.value`). What needs the program (its K range, its vocab size) is checked again once it
has loaded (runners/options.check_options). Every error is one line (errors.py).
"""

from __future__ import annotations

import re
from pathlib import Path

from eagle3_check.errors import InputError, OptionError

DEVICE_RE = re.compile(r"cpu|cuda(:\d+)?")

# option -> what the path must be. Directories to read, files to read.
DIRS = {"target": "--target", "draft": "--draft"}
FILES = {"prompts": "--prompts", "pte": "--pte", "tokenizer": "--tokenizer", "baseline": "--baseline",
         "from_pte": "--from-pte", "data_path": "--data-path", "aoti": "--aoti"}
# option -> smallest allowed value (integers given by the user; None = not given)
AT_LEAST = {"max_new_tokens": 1, "max_seq_len": 1, "min_prefill": 1, "max_prefill": 1,
            "min_verify_len": 2, "max_verify_len": 2, "threads": 1, "steps": 1, "batch_size": 1, "seed": 0,
            "group_size": 1}
DRIFT_FLAGS = ("group_size", "quantize_draft", "min_agreement", "max_tau_drop", "far_rank", "max_far_share",
               "max_mean_gap")


def validated(cfg):
    """Every check on `cfg` that needs neither torch nor a model; the config with its model
    directories resolved. Raises Eagle3CheckError."""
    from eagle3_check.jobs.common.devices import checked_devices

    cfg = checked_devices(cfg)  # --devices: before --device, whose value it sets
    _device(cfg)
    from eagle3_check.jobs.common.aoti import check_aoti_flags

    check_aoti_flags(cfg)  # --aoti without CUDA: one line before anything else
    if cfg.has("target") and cfg.has("draft") and not (cfg.pte or cfg.aoti):
        from eagle3_check.preflight import check_program_pair

        check_program_pair(cfg.target, cfg.draft, cfg.fixture)  # before the paths
    if cfg.fixture:
        from eagle3_check.fixtures.registry import load_fixture

        load_fixture(cfg.fixture)  # an unknown name: "did you mean"
    from eagle3_check.jobs.common.default_program import with_default_program

    cfg = with_default_program(cfg)  # check's prompt set and run: the real fixture (its package checked)
    cfg = _paths(cfg)
    _ranges(cfg)
    _suite_name(cfg)
    _suite_overrides(cfg)
    check_compile(cfg)
    _export_backend(cfg)
    if cfg.command == "check":
        from eagle3_check.jobs.check.workers import check_flags

        check_flags(cfg.check.workers, cfg.check.shard, cfg.suites.suite or cfg.suites.list, cfg.runner)
    if cfg.prompts:
        check_prompt_set(cfg.prompts, raw=cfg.raw)
    _outputs(cfg)
    _runner_template(cfg)
    _program_files(cfg)
    from eagle3_check.jobs.common.exact import check_exact_flags

    check_exact_flags(cfg)
    if cfg.command == "check" and cfg.runner is None:  # the device-resident runner on CUDA, else the reference
        from eagle3_check.jobs.common.world import default_runner

        cfg = cfg.replace(runner=default_runner(cfg.device))
    return cfg


def _outputs(cfg) -> None:
    """--html / --junit where nothing writes them: a one-line error, never a silently missing
    file; the report paths writable before the run (a missing directory must not lose them)."""
    from eagle3_check.atomic import check_writable
    from eagle3_check.runners.seam import kind_of

    binary = kind_of(cfg.runner).program_file  # runs its own program file: what it prints is all there is
    if cfg.command == "check":
        if cfg.suites.list:
            refuse_html(cfg, "--list")
            refuse_junit(cfg, "--list")
            return
        if cfg.junit:
            check_writable(cfg.junit, "--junit")
        _shrink_routes(cfg, binary)
        if cfg.check.quantize:
            return  # jobs/gate/quantized.py refuses what --quantize cannot honour
        flag = next((f for f in DRIFT_FLAGS if cfg.value(f) not in (None, False)), None)
        if flag:  # the drift options judge only --quantize's program
            raise OptionError(f"--{flag.replace('_', '-')} without --quantize", "--quantize int8-weight|int4-weight",
                              "add --quantize SCHEME, or drop the flag")
        if binary:
            refuse_html(cfg, "a runner binary (--runner exec:...)")
        elif cfg.suites.suite:
            refuse_html(cfg, "--suite")
    elif cfg.command == "gate":
        check_writable(cfg.gate.report, "--report")
        if cfg.junit:
            check_writable(cfg.junit, "--junit")
    elif cfg.golden.action == "verify" and binary:
        refuse_html(cfg, "a runner binary (--runner exec:...)")
        if cfg.shrink.enabled:  # jobs/golden/binary.py does not shrink: a one-line error, never a silently dropped flag
            raise OptionError("--shrink with golden verify --runner exec:...", "golden verify --shrink with an "
                              "in-process runner", "drop --shrink, or shrink the prompt with check --runner exec:... "
                              "--prompt TEXT --shrink")


def _runner_template(cfg) -> None:
    """A runner binary's template that cannot pass the given --data-path: refused here, not after the
    program and the reference have loaded (runners/binary/protocol.py checks it again on every request)."""
    from eagle3_check.runners.seam import kind_of

    if kind_of(cfg.runner).program_file and cfg.data_path:
        from eagle3_check.runners.binary.protocol import ExecCommand

        ExecCommand.parse(cfg.runner).check_data(cfg.data_path)


def _program_files(cfg) -> None:
    """What the program flags name, read from the file system (eagle3_check/preflight.py), after the
    flag checks: a --runner that exists (a module found by its spec, a binary that is executable),
    a binary given its --pte, a --pte and --data-path by their identifiers, the model directories'
    config.json. Each used to wait for torch and the model (issue 52)."""
    from eagle3_check import preflight

    if cfg.has("runner") and cfg.runner:
        from eagle3_check.runners.seam import kind_of

        if kind_of(cfg.runner).program_file:
            from eagle3_check.runners.binary.protocol import ExecCommand

            preflight.check_executable(ExecCommand.parse(cfg.runner).argv[0], cfg.runner)
            if cfg.command == "check" and not (cfg.suites.list or cfg.shrink.repro) or cfg.golden.action == "verify":  # a repro names its .pte
                preflight.check_exec_needs_pte("golden verify" if cfg.golden.action else "check", cfg.runner, cfg.pte)
        else:
            from eagle3_check.runners.plugin import check_spec

            spec = check_spec(cfg.runner)
            preflight.check_runner_module(cfg.runner, spec.partition(":")[0])
        from eagle3_check.runners.isolate.policy import wants_isolation

        if kind_of(cfg.runner).program_file or wants_isolation(cfg.runner, getattr(cfg, "isolate", False),
                                                               getattr(cfg, "in_process", False)):
            from eagle3_check.runners.isolate.sandbox import account

            account()  # an unknown or root EAGLE3_CHECK_RUNNER_USER: its one line now, not after the model loaded
    if cfg.command != "gate":  # the gate's load check reports a .pte that is not one (its report, JUnit: exit 1)
        if cfg.pte:
            preflight.check_pte_file(cfg.pte)
        if cfg.data_path:
            preflight.check_ptd_file(cfg.data_path)
    for dest, flag in DIRS.items():
        if getattr(cfg, dest):
            preflight.check_model_dir(getattr(cfg, dest), flag)


def _shrink_routes(cfg, binary: bool) -> None:
    """--shrink, --prompt-ids, --repro and --prompt where `check` cannot honour them: before anything loads."""
    from eagle3_check.jobs.shrink_route import refuse_shrink

    if cfg.check.quantize:
        refuse_shrink(cfg, "--quantize", allowed=("shrink", "prompt_ids", "prompt", "repro"))
    elif binary and cfg.suites.suite:
        refuse_shrink(cfg, "a runner binary's suites (--runner exec:... --suite)", allowed=("shrink",))
    elif binary:
        refuse_shrink(cfg, "a runner binary (--runner exec:...)", allowed=("shrink", "prompt", "repro"))
    elif cfg.suites.suite:
        refuse_shrink(cfg, "--suite", allowed=("shrink",))
    elif cfg.check.workers > 1:
        refuse_shrink(cfg, "--workers", allowed=("shrink",))


def refuse_html(cfg, where: str) -> None:
    """--html on a path that has no HTML report."""
    if cfg.html:
        raise OptionError(f"--html with {where}", "the prompt-set check, gate or golden verify with an "
                          "in-process runner", "drop --html (or save --json and keep that)")


def refuse_junit(cfg, where: str) -> None:
    """--junit where no check runs."""
    if cfg.junit:
        raise OptionError(f"--junit with {where}", "a check that judges prompts or cases", "drop --junit")


def _device(cfg) -> None:
    if cfg.has("device") and not DEVICE_RE.fullmatch(cfg.device):
        raise OptionError(f"--device {cfg.device}", "cpu, cuda or cuda:N", "pass --device cpu or --device cuda")
    if cfg.has("device"):
        from eagle3_check.preflight import check_device

        check_device(cfg.device)  # the NVIDIA driver, looked for without torch (eagle3_check/preflight.py)
    if cfg.cuda_graph and cfg.device == "cpu":
        raise OptionError("--cuda-graph with --device cpu", "a CUDA device (graphs replay on a GPU)",
                          "drop --cuda-graph, or pass --device cuda")


def _paths(cfg):
    """Input paths: directories are directories, files are regular files (a FIFO, a device or a
    directory is named as what it is: inputs.regular_file); the -o path is writable (atomic.check_writable)."""
    from eagle3_check.atomic import check_dir_creatable, check_writable
    from eagle3_check.inputs import kind_of, regular_file

    resolved = {}
    for dest, flag in DIRS.items():
        value = getattr(cfg, dest)
        if value:  # a directory, or a hub id from the local HF cache (never downloaded)
            from eagle3_check.program.hub import resolve_model_dir

            if Path(value).exists() and not Path(value).is_dir():
                raise InputError(f"{flag} {value}: is {kind_of(Path(value).stat().st_mode)}", "an existing directory",
                                 f"fix the {flag} path")
            resolved[dest] = str(resolve_model_dir(value, flag))
            from eagle3_check.resources import check_config_dimensions

            check_config_dimensions(Path(resolved[dest]) / "config.json", f"{dest} config")  # before torch
    for dest, flag in FILES.items():
        value = cfg.value(dest)
        if dest == "baseline" and cfg.golden.action == "baseline":
            continue  # `golden baseline --baseline FILE` writes it
        if value:
            regular_file(value, flag, f"fix the {flag} path")
    if cfg.data_path and not cfg.pte:
        raise InputError(f"--data-path {cfg.data_path} without --pte", "--data-path with the .pte it belongs to",
                         "add --pte FILE.pte, or drop --data-path")
    for value in [*cfg.golden.goldens, *([cfg.value("golden")] if cfg.value("golden") else [])]:  # a golden file or a directory of them
        if not Path(value).exists():
            raise InputError(f"golden {value} does not exist", "a golden file or directory", "fix the path")
        if not Path(value).is_dir():
            regular_file(value, "golden", "pass a golden file or a directory of them")
    if cfg.fixtures.root:  # created when missing: a file in the way or an unwritable parent is refused now
        check_dir_creatable(cfg.fixtures.root, "--root")
    if cfg.shrink.dir and cfg.has("shrink_dir"):
        check_dir_creatable(cfg.shrink.dir, "--shrink-dir")
    if cfg.golden.dir and cfg.golden.action == "record":
        check_dir_creatable(cfg.golden.dir, "--dir")
    if cfg.golden.baseline and cfg.golden.action == "baseline":  # `golden baseline --baseline FILE` writes it
        check_writable(cfg.golden.baseline, "--baseline")
    if cfg.html:  # before the run: a missing directory must not lose the report
        check_writable(cfg.html, "--html")
    if cfg.output:
        check_writable(cfg.output, "-o")
    return cfg.replace(**resolved) if resolved else cfg


def _ranges(cfg) -> None:
    for dest, low in AT_LEAST.items():
        v = cfg.value(dest)
        if v is not None and v < low:
            what = f"max new tokens = {v}" if dest == "max_new_tokens" else f"--{dest.replace('_', '-')} {v}"
            raise OptionError(what, f"an integer >= {low}", f"pass --{dest.replace('_', '-')} {low} or more")
    for dest in ("bos_id", "eos_id"):
        v = getattr(cfg, dest)
        if v is not None and v < -1:
            flag = "--" + dest.replace("_", "-")
            raise OptionError(f"{dest.replace('_', ' ')} {v}", "-1 (none) or a token id >= 0", f"fix {flag}")
    if cfg.stop_ids is not None:
        from eagle3_check.runners.options import parse_stop_ids

        for sid in parse_stop_ids(cfg.stop_ids):
            if sid < 0:
                raise OptionError(f"stop id {sid}", "token ids >= 0", "fix --stop-ids")
    _chain_len(cfg)
    check_share("--tie-budget", cfg.tie_budget)
    from eagle3_check.runners.binary.runner import request_timeout

    request_timeout(cfg.runner_timeout)  # one rule with the pytest plugin's
    if cfg.max_memory is not None and not cfg.max_memory > 0:
        raise OptionError(f"--max-memory {cfg.max_memory:g}", "a budget in GiB > 0", "pass e.g. --max-memory 16")
    cfg.check.check_values()  # each section's own values, next to it
    cfg.gate.check_values()
    cfg.drift.thresholds()


def _export_backend(cfg) -> None:
    """`export --backend xnnpack-bf16` delegates bf16 linears and nothing else: it needs --dtype bfloat16."""
    if cfg.command == "export" and cfg.export.backend == "xnnpack-bf16" and cfg.dtype != "bfloat16":
        raise OptionError(f"--backend xnnpack-bf16 with --dtype {cfg.dtype}", "--dtype bfloat16 (XNNPACK's bf16 "
                          "kernels take bf16 linears only)", "add --dtype bfloat16, or pass --backend xnnpack")


def check_share(flag: str, share: float | None) -> None:
    """A tie budget: a share of judged positions in [0, 1] (None: the dtype's default)."""
    if share is not None and not 0.0 <= share <= 1.0:
        raise OptionError(f"{flag} {share:g}", "a share of judged positions in [0, 1]", f"pass e.g. {flag} 0")


def _chain_len(cfg) -> None:
    """K >= 1 always; the upper bound is known before loading only for an eager program
    (its verify window range comes from the fixture or from the --target spec); a .pte's own
    range is checked when it loads."""
    k = cfg.chain_len
    if k is None:
        return
    if getattr(cfg, "runner_profile", None):  # a profile that clamps K runs any -k (runners/profiles.py)
        from eagle3_check.runners.profiles import profile_named

        if profile_named(cfg.runner_profile).clamps and profile_named(cfg.runner_profile).chain_flag:
            return
    if cfg.pte or cfg.aoti or cfg.command == "export":
        lo, hi = 1, None
    else:
        lo, hi = static_k_range(cfg)
    if k < lo or (hi is not None and k > hi):
        expected = f"K in [{lo}, {hi}] (the program's verify window range minus one)" if hi else "K >= 1"
        raise OptionError(f"chain length K = {k}", expected,
                          f"pass -k between {lo} and {hi}" if hi else "pass -k 1 or more")


def static_k_range(cfg) -> tuple[int, int]:
    """The K range of the eager program the config describes, without building it."""
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
    from eagle3_check.program.target_spec import DEFAULT as TARGET_SPEC

    spec = TARGET_SPEC if cfg.target else load_fixture(cfg.fixture or DEFAULT_FIXTURE).spec
    return max(1, spec.min_verify_len - 1), spec.max_verify_len - 1


def _suite_name(cfg) -> None:
    """`check --suite NAME` / `gate --suite NAME`: an unknown suite or case name is refused here,
    with a "did you mean", not after the program and the reference have loaded (`gate --suite none`
    turns the suites off)."""
    if cfg.command in ("check", "gate") and cfg.suites.suite and cfg.suites.suite != "none":
        from eagle3_check.suites import suite_cases

        suite_cases(cfg.suites.suite)


def _suite_overrides(cfg) -> None:
    """`check --suite`: every case sets its own runner options, so a given one would be ignored."""
    if cfg.command != "check" or not cfg.suites.suite:
        return
    for dest in ("max_new_tokens", "chain_len"):
        if dest in cfg.given:
            flag = "--max-new-tokens" if dest == "max_new_tokens" else "-k/--chain-len"
            raise OptionError(f"{flag} with --suite", "no runner options (each case sets its own)", f"drop {flag}")


def check_compile(cfg) -> None:
    """--compile with --pte, with --list (nothing runs), or on suite cases that build their own
    programs; --compile-mode / --compile-attention without --compile: one-line errors."""
    granularity = cfg.compile
    if granularity is None:  # a command without the flags
        return
    if granularity == "off":
        for dest in ("compile_mode", "compile_attention"):
            if getattr(cfg, dest) is not None:
                flag = "--" + dest.replace("_", "-")
                raise OptionError(f"{flag} without --compile", "--compile layer or --compile model with it",
                                  f"add --compile layer, or drop {flag}")
        return
    if cfg.pte:
        raise OptionError(f"--compile {granularity} with --pte {cfg.pte}",
                          "an eager program (--fixture or --target/--draft); a .pte is compiled when exported",
                          "drop --compile")
    if cfg.suites.list:
        raise OptionError(f"--compile {granularity} with --list", "a check or a run: --list only prints the "
                          "suites and their cases", "drop --compile")
    if cfg.suites.suite and not cfg.target:
        raise OptionError(f"--compile {granularity} with --suite on the embedded fixtures",
                          "a prompt-set check, or a suite on one program (--target/--draft): "
                          "fixture suite cases build their own programs", "drop --compile or --suite")


def check_prompt_set(path: str, raw: bool) -> None:
    """Loads the prompt set (missing, malformed, duplicate ids: errors) and applies the empty-text
    rule that `run --prompt` applies: empty or whitespace-only text is refused unless --raw."""
    from eagle3_check.fixtures.registry import load_prompts

    for p in load_prompts(path):
        if not raw and not p.text.strip():
            raise InputError(f"prompt '{p.id}' in {path} is empty", "a non-empty prompt text",
                             "write some text for it, or drop it")
