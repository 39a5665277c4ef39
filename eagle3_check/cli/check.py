"""`eagle3-check check`: the main job. Prompt set -> reference runner -> HF reference -> verdicts."""

from __future__ import annotations

import argparse
import json
import sys

from eagle3_check.cli.check_quant import add_drift_args, quant_main
from eagle3_check.cli.check_suite import list_main, refuse_junit, suite_main
from eagle3_check.cli.common import (
    add_program_args,
    add_runner_args,
    build_program,
    default_runner,
    report_provenance,
    resolved_from_args,
)
from eagle3_check.cli.compile_flags import add_compile_args
from eagle3_check.cli.exec_cmd import add_timeout_arg, is_exec, time_limited
from eagle3_check.cli.exec_cmd import check_main as exec_check_main
from eagle3_check.cli.report import add_html_arg, refuse_html, write_html
from eagle3_check.cli.shrink_flags import add_replay_args, add_shrink_args

HELP = """Run a prompt set through the reference runner and judge every emitted token of every
request against the target in Transformers (the HF reference) run over the prompt + the runner's
own tokens: identical (the reference's argmax), tie (a near-tie of the reference within the
dtype's tolerance, see eagle3_check/reference/tolerance.py) or fail; then the length and stop rules.
Exit code 0 only if no request fails and the ties are within the tie budget.

examples:
  eagle3-check check                         # the embedded tiny-llama fixture
  eagle3-check check -k 7 --json             # machine-readable report
  eagle3-check check --target T --draft D --tokenizer T/tokenizer.json --prompts my.json
  eagle3-check check --runner my_pkg.runners:make_runner   # judge your own runner
  eagle3-check check --pte tiny.pte --runner exec:./eagle3_speculator_runner   # judge a runner binary
  eagle3-check check --list                  # the edge-case suites and their cases
  eagle3-check check --suite edge            # every edge case (stop, budget, context, ...)
  eagle3-check check --suite context --json  # one suite (or one case: --suite context/room-0)
  eagle3-check check --device cuda --compile layer   # judge bench/gpu_bench.py's compiled fast path
  eagle3-check check --quantize int4-weight  # quantize in process: lossless + drift, as gate judges a .pte
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("check", help="runner vs HF reference on a prompt set (the main job)",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--prompts", default=None, help='prompt set JSON {"prompts": [{"id", "text"}]} '
                   "(default: the fixture's)")
    p.add_argument("--json", action="store_true", help="print the report as JSON instead of a table")
    add_html_arg(p)
    p.add_argument("--junit", default=None, metavar="FILE",
                   help="also write JUnit XML here: one testsuite per K (or per suite report), one testcase per "
                   "prompt (or case) with the verdict's message and time")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--runner", default=None, metavar="MODULE:FACTORY",
                   help="the runner to judge: a no-argument factory returning an object with "
                   "run(program, tokenizer, prompt, options) -> RunResult, or 'reference' / 'device' "
                   "(default: device with --device cuda, reference elsewhere), or exec:PATH: a runner "
                   "binary speaking the seed runner's flags and output (needs --pte)")
    add_timeout_arg(p)
    p.add_argument("--suite", default=None, metavar="NAME",
                   help="run an edge-case suite instead of the prompt set ('edge' = all; see --list). "
                   "Cases set their own options and program spec")
    p.add_argument("--list", action="store_true", help="list the suites and their cases, then exit")
    p.add_argument("--shuffle", type=int, default=None, metavar="SEED",
                   help="run the prompt set (or the suites and their cases) in an order shuffled by SEED, "
                   "printed on stderr; the same SEED gives the same order (state leaks between requests)")
    p.add_argument("--workers", type=int, default=1, metavar="N",
                   help="spread the prompt set over N processes, each with its own program (with --device cuda "
                   "worker i runs on cuda:i); the report is the serial run's, in prompt order")
    p.add_argument("--shard", default=None, metavar="I/N",
                   help="check shard I of N of the prompt set only (round robin: prompts I, I+N, ...; 1-based)")
    p.add_argument("--expect-tau", type=float, default=None, metavar="X",
                   help="flag the draft (exit 1) when tau is far below X (draft health)")
    p.add_argument("--reference", choices=["hf", "self"], default="hf",
                   help="greedy reference: hf (Transformers, the default) or self (the program's own "
                   "prefill/target_verify: the fair one for a quantized .pte; no ties)")
    p.add_argument("--tie-budget", type=float, default=None, metavar="SHARE",
                   help="ties allowed, as a share of all judged positions (default per dtype: "
                   "float32 0, bfloat16 see eagle3_check/reference/tolerance.py TIE_BUDGET, FIXTURE_BUDGET); more "
                   "fails the report")
    add_replay_args(p, prompt_text=True)
    add_shrink_args(p)
    add_program_args(p)
    add_runner_args(p, max_new_default=64)
    add_compile_args(p)
    add_drift_args(p, quantize=True)
    p.set_defaults(func=main)


def refuse_drift_flags(args: argparse.Namespace) -> None:
    """The drift flags judge only `--quantize`'s program: given without it, a one-line error."""
    from eagle3_check.errors import OptionError

    flag = next((f for f in ("group_size", "quantize_draft", "min_agreement", "max_tau_drop", "far_rank",
                             "max_far_share", "max_mean_gap") if getattr(args, f) not in (None, False)), None)
    if flag:
        raise OptionError(f"--{flag.replace('_', '-')} without --quantize", "--quantize int8-weight|int4-weight",
                          "add --quantize SCHEME, or drop the flag")


def tie_budget_from_args(args: argparse.Namespace) -> float:
    from eagle3_check.errors import OptionError
    from eagle3_check.reference.tolerance import default_budget

    fixture = getattr(args, "fixture", None)  # a real-model fixture has its own measured budget
    share = default_budget(args.dtype, fixture) if args.tie_budget is None else args.tie_budget
    if not 0.0 <= share <= 1.0:
        raise OptionError(f"--tie-budget {share:g}", "a share of judged positions in [0, 1]",
                          "pass e.g. --tie-budget 0 (no ties) or --tie-budget 0.05")
    return share


def main(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    from eagle3_check.gating.check import run_check
    from eagle3_check.reference.tolerance import tolerance_for
    from eagle3_check.run.plugin import load_runner

    if args.list:
        refuse_html(args, "--list")
        refuse_junit(args, "--list")
        return list_main(args)
    if args.junit:
        from eagle3_check.atomic import check_writable

        check_writable(args.junit, "--junit")  # before the run: a missing directory must not lose it
    from eagle3_check.cli import shrink_flags

    repro = shrink_flags.apply_repro(args)  # --repro FILE: its prompt ids, K, max new tokens, spec
    runner_name = args.runner = args.runner or (repro.runner if repro else default_runner(args.device))
    runner = load_runner(runner_name)
    if args.quantize:  # the gate's quantized checks in process: cli/check_quant.py
        shrink_flags.refuse_shrink(args, "--quantize")
        return quant_main(args, runner, runner_name)
    refuse_drift_flags(args)
    if is_exec(runner):  # a runner binary: cli/exec_cmd.py
        refuse_html(args, "a runner binary (--runner exec:...)")
        if args.suite:
            shrink_flags.refuse_shrink(args, "a runner binary's suites (--runner exec:... --suite)")
        shrink_flags.refuse_shrink(args, "a runner binary (--runner exec:...)", allowed=("shrink", "prompt", "repro"))
        return exec_check_main(args, runner)
    runner = time_limited(args, runner)  # --request-timeout: a hang fails its request
    if args.suite:
        refuse_html(args, "--suite")
        shrink_flags.refuse_shrink(args, "--suite", allowed=("shrink",))
        return suite_main(args, runner)
    if args.workers > 1:
        shrink_flags.refuse_shrink(args, "--workers")
        return workers_main(args, resolved_from_args(args), tie_budget_from_args(args))
    setup = build_program(args)  # a .pte sets args.dtype to its own: tolerance and budget follow it
    shrink_flags.check_replay(args, repro, setup)  # a repro names its program's files: the same ones
    resolved = resolved_from_args(args)  # after the program: its load errors come first, as before
    options = resolved.options
    budget = tie_budget_from_args(args)
    prompts = shrink_flags.given_prompts(args, setup.tokenizer) or shard_of(args, prompts_for(args, setup))
    reference = reference_for(args, setup)
    bar = tqdm(total=len(prompts), desc="check", unit="req", file=sys.stderr, leave=False,
               delay=0.5, disable=args.no_progress or args.json)  # early errors: no bar at all
    try:
        report = run_check(setup.program, setup.tokenizer, reference, prompts, options,
                           tolerance_for(args.dtype), runner=runner, on_request=lambda _: bar.update(1),
                           tie_budget=budget)
    finally:
        bar.close()
    from eagle3_check.program.contract import read_metadata

    md = read_metadata(setup.program.metadata())
    report.info.update(setup.info, runner=runner_name, reference=args.reference, dtype=args.dtype,
                       tie_tolerance=tolerance_for(args.dtype).describe(), k_range=list(md.k_range),
                       k_source=md.k_source, run_options=resolved.to_json())
    from eagle3_check.gating.draft_health import assess

    expect, source = expected_tau(args, setup, report.k, options)
    health = assess(setup.program, report, expect, source)  # greedy equality cannot see a wrong draft
    shrunk = shrink_flags.shrink_and_write(args, report, setup, prompts, reference, options, tolerance_for(args.dtype),
                                           runner, runner_name) if args.shrink else []
    code = print_report(args, report, health, options, setup.info.get("fixture") or args.fixture, setup.program)
    if shrunk and not args.json:
        print("\n".join(shrunk))
    return code


def print_report(args: argparse.Namespace, report, health, options, fixture: str | None, program=None) -> int:
    """The check's outputs: --html page, --junit XML, JSON (with provenance and, when known, the program
    spec) or table."""
    from eagle3_check.gating.check import format_table

    if args.junit:
        from eagle3_check.report.check_junit import check_suite, write_check_junit

        write_check_junit(args.junit, [check_suite(report)])
    if args.html:
        from eagle3_check.report.html_report import check_html

        write_html(args.html, check_html(report.to_json(), health.to_json()))
    if args.json:
        from eagle3_check.program.contract import read_metadata
        from eagle3_check.report.provenance import jsonable

        if program is not None:
            report.info["program"] = jsonable(read_metadata(program.metadata()))  # the program spec
        prov = report_provenance(args, fixture, options)
        print(json.dumps({**report.to_json(), "draft_health": health.to_json(), "provenance": prov}, indent=2))
    else:
        print(format_table(report))
        print("\n".join(health.lines()))
        if args.html:
            print(f"html: {args.html}")
    return 0 if report.passed and not health.flags else 1


def expected_tau(args: argparse.Namespace, setup, k: int, options) -> tuple[float | None, str | None]:
    """--expect-tau X, else the fixture card's tau when this run is the card's own run."""
    if args.expect_tau is not None:
        return args.expect_tau, "--expect-tau"
    if not setup.info.get("fixture") or args.target or any(
            getattr(args, f, None) is not None for f in ("max_seq_len", "min_prefill", "max_prefill")):
        return None, None
    from eagle3_check.fixtures.card import read_card
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.gating.draft_health import card_expectation

    fx = load_fixture(setup.info["fixture"])
    tau, source = card_expectation(read_card(fx), str(fx.card_path), k, options,
                                   own_prompts=not args.prompts and not args.shard)
    return tau, source


def reference_for(args: argparse.Namespace, setup):
    """The check's greedy reference: HF (Transformers) or the program's own target methods."""
    import torch

    if args.reference == "self":
        from eagle3_check.reference.self_ref import SelfReference

        return SelfReference(setup.program)
    from eagle3_check.reference.hf import HFReference

    return HFReference(setup.target_dir, args.device, getattr(torch, args.dtype))


def shard_of(args: argparse.Namespace, prompts: list) -> list:
    """`--shard I/N`: the prompts of that shard (gating/workers.py), else all."""
    if not args.shard:
        return prompts
    from eagle3_check.gating.workers import parse_shard, shard_indices

    return [prompts[i] for i in shard_indices(len(prompts), *parse_shard(args.shard))]


def worker_program(args: argparse.Namespace, device: str):
    """(program, tokenizer, reference, info) in one `check --workers` process, on `device`
    (module-level: the workers receive it by name)."""
    import copy

    from eagle3_check.cli.common import offline_environment

    offline_environment()  # as main() does in the parent
    args = copy.copy(args)
    args.device = device
    if device.startswith("cuda:"):
        import torch

        torch.cuda.set_device(device)  # CUDA graphs and streams on this worker's GPU
    setup = build_program(args)
    return setup.program, setup.tokenizer, reference_for(args, setup), {**setup.info, "device": device}


def workers_main(args: argparse.Namespace, resolved, budget: float) -> int:
    """`check --workers N`: the prompt set (or its --shard) over N processes (gating/workers.py)."""
    import functools
    import types

    from tqdm import tqdm

    from eagle3_check.gating.draft_health import assess
    from eagle3_check.gating.workers import run_check_workers, worker_devices
    from eagle3_check.reference.tolerance import tolerance_for

    options = resolved.options
    count = 0
    if args.device.startswith("cuda"):
        import torch

        count = torch.cuda.device_count()
    devices = worker_devices(args.device, args.workers, count)
    fixture = None
    if args.pte:
        from eagle3_check.program.sidecar import reference_for_pte

        fx = reference_for_pte(args.pte, args.fixture, args.target, args.tokenizer)[0]
        fixture = fx.name if fx else None
    prompts = shard_of(args, prompts_for(args, types.SimpleNamespace(info={"fixture": fixture})))
    bar = tqdm(total=len(prompts), desc=f"check x{len(devices)}", unit="req", file=sys.stderr, leave=False,
               delay=0.5, disable=args.no_progress or args.json)
    try:
        report, step0 = run_check_workers(functools.partial(worker_program, args), devices, prompts, options,
                                          tolerance_for(args.dtype), args.runner, budget,
                                          on_share=lambda s: bar.update(len(s.indices)))
    finally:
        bar.close()
    report.info.update(device=args.device, runner=args.runner, reference=args.reference,
                       tie_tolerance=tolerance_for(args.dtype).describe(), run_options=resolved.to_json())
    expect, source = expected_tau(args, types.SimpleNamespace(info=report.info), report.k, options)
    return print_report(args, report, assess(None, report, expect, source, step0=step0), options,
                        report.info.get("fixture") or fixture or args.fixture)


def prompts_for(args: argparse.Namespace, setup) -> list:
    """The prompt set of a check: --prompts, else the fixture's own (a .pte names its fixture);
    with --target/--draft there is no fixture, so --prompts is required."""
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture, load_prompts

    if args.prompts:
        prompts = load_prompts(args.prompts)
    elif args.target:
        raise_no_prompts()
    else:
        prompts = load_fixture(setup.info.get("fixture") or args.fixture or DEFAULT_FIXTURE).prompts()
    if getattr(args, "shuffle", None) is not None:
        from eagle3_check.gating.check import shuffled_prompts

        prompts = shuffled_prompts(prompts, args.shuffle)
        print(f"order: --shuffle {args.shuffle}: {', '.join(p.id for p in prompts)}", file=sys.stderr)
    return prompts


def raise_no_prompts() -> None:
    from eagle3_check.errors import InputError

    raise InputError("--target/--draft given without --prompts", "a prompt set JSON file",
                     "pass --prompts FILE (see fixtures/prompts.json for the format)")
