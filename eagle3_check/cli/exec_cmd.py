"""`--runner exec:PATH`: the CLI side of judging a runner binary (check, check --suite, golden verify).

The commands route here when `--runner` names a binary; everything else about them
(program flags, runner options, references) is the same as for a Python runner.
"""

from __future__ import annotations

import argparse
import json
import sys

from eagle3_check.errors import InputError


def is_exec(runner) -> bool:
    from eagle3_check.binary.runner import ExecRunner

    return isinstance(runner, ExecRunner)


def add_timeout_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--request-timeout", "--runner-timeout", dest="runner_timeout", type=float, default=None,
                   metavar="S", help="seconds one request may take (default: 300 for a plug-in or a binary, none "
                   "for the reference/device runner); a request over it fails "
                   "with a timeout and the report is still written. An in-process runner is abandoned (its "
                   "thread stops at its next program call); a runner binary's process group is killed")


def time_limited(args: argparse.Namespace, runner):
    """The in-process runner under a per-request limit (`watchdog.TimeLimited`): --request-timeout
    when given; else a plug-in gets the default (300 s) and our own runners (reference, device),
    which may take long on a large model on CPU, run unlimited."""
    from eagle3_check.run.watchdog import time_limited as limited

    return limited(runner, args.runner, getattr(args, "runner_timeout", None))


def _need_pte(args: argparse.Namespace, command: str) -> None:
    if not getattr(args, "pte", None):
        raise InputError(f"{command} --runner {args.runner} without --pte", "the .pte file the binary runs",
                         "pass --pte FILE (export one with `eagle3-check export -o FILE.pte`)")


def _timeout(args: argparse.Namespace, runner) -> None:
    from eagle3_check.binary.runner import request_timeout

    t = request_timeout(getattr(args, "runner_timeout", None))
    if t is not None:
        runner.timeout = t


def check_main(args: argparse.Namespace, runner) -> int:
    """`check --runner exec:...` (prompt set) and `check --suite NAME --runner exec:...`."""
    from eagle3_check.cli.check import prompts_for
    from eagle3_check.cli.check_suite import fixed_env
    from eagle3_check.cli.common import build_program, resolved_from_args

    _need_pte(args, "check")
    _timeout(args, runner)
    if args.suite:
        return _suite_main(args, runner, fixed_env)
    from tqdm import tqdm

    from eagle3_check.binary.check import format_exec_table, run_exec_check
    from eagle3_check.cli.check import tie_budget_from_args
    from eagle3_check.reference.tolerance import tolerance_for

    setup = build_program(args)
    resolved = resolved_from_args(args)
    options = resolved.options
    from eagle3_check.cli import shrink_flags

    prompts = shrink_flags.given_prompts(args, setup.tokenizer) or prompts_for(args, setup)  # --prompt, --repro
    reference = _reference(args, setup)
    bar = tqdm(total=len(prompts), desc="check (exec)", unit="req", file=sys.stderr, leave=False, delay=0.5,
               disable=args.no_progress or args.json)
    try:
        report = run_exec_check(runner, setup.program, setup.tokenizer, reference, prompts, options,
                                on_request=lambda _: bar.update(1), tolerance=tolerance_for(args.dtype),
                                tie_budget=tie_budget_from_args(args))
    finally:
        bar.close()
    report.info.update(setup.info, reference=args.reference, tie_tolerance=tolerance_for(args.dtype).describe(),
                       ties="per position where the binary prints [ids]; bytes are judged exactly",
                       run_options=resolved.to_json())
    lines, shrunk = shrink_flags.shrink_exec_and_write(args, report, setup, prompts, reference, options,
                                                       tolerance_for(args.dtype), runner)  # --shrink
    if args.junit:
        from eagle3_check.report.check_junit import exec_check_suite, write_check_junit

        write_check_junit(args.junit, [exec_check_suite(report)])
    if args.json:
        from eagle3_check.cli.common import report_provenance

        prov = report_provenance(args, setup.info.get("fixture"), options)
        data = report.to_json()
        for r in data.get("requests", []):  # the shrunk case beside its original (--shrink)
            if r.get("prompt_id") in shrunk:
                r["shrunk"] = shrunk[r["prompt_id"]]
        print(json.dumps({**data, "provenance": prov}, indent=2))
    else:
        print(format_exec_table(report))
        if lines:
            print("\n".join(lines))
    return 0 if report.passed else 1


def _reference(args: argparse.Namespace, setup):
    if args.reference == "self":
        from eagle3_check.reference.self_ref import SelfReference

        return SelfReference(setup.program)
    import torch

    from eagle3_check.reference.hf import HFReference

    return HFReference(setup.target_dir, args.device, getattr(torch, args.dtype))


def _suite_main(args: argparse.Namespace, runner, fixed_env) -> int:
    from tqdm import tqdm

    from eagle3_check.binary.suites import run_exec_suite
    from eagle3_check.cli.check_suite import ordered_cases, write_suites_junit
    from eagle3_check.suites import suite_cases
    from eagle3_check.suites.report import format_suite_table

    cases = ordered_cases(args, suite_cases(args.suite))
    env, info = fixed_env(args)
    bar = tqdm(total=len(cases), desc=f"suite {args.suite} (exec)", unit="case", file=sys.stderr,
               disable=args.no_progress or args.json)
    report = run_exec_suite(args.suite, cases, env, runner, on_case=lambda _: bar.update(1))
    bar.close()
    report.info.update(info, runner=args.runner, reference=args.reference)
    write_suites_junit(args, [report])
    if args.json:
        from eagle3_check.cli.common import report_provenance

        print(json.dumps({"passed": report.passed, "reports": [report.to_json()],
                          "provenance": report_provenance(args, info.get("fixture"))}, indent=2))
    else:
        print(f"== {info.get('pte') or info.get('fixture')} through {args.runner}\n" + format_suite_table(report))
    return 0 if report.passed else 1


def golden_verify_main(args: argparse.Namespace, runner) -> int:
    """`golden verify --runner exec:... --pte FILE`."""
    from pathlib import Path

    from eagle3_check.binary.golden import METRICS_NOT_GATED, golden_files, verify_exec_goldens
    from eagle3_check.program.pte_probe import load_probed
    from eagle3_check.tokenizer import Tokenizer

    _need_pte(args, "golden verify")
    _timeout(args, runner)
    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture
    from eagle3_check.program.sidecar import sidecar_fixture

    pte = Path(args.pte)
    program = load_probed(pte, getattr(args, "data_path", None))  # a load that aborts the runtime: one line
    tokenizer = Tokenizer.load(load_fixture(sidecar_fixture(pte) or DEFAULT_FIXTURE).tokenizer_path)
    outcome = verify_exec_goldens(golden_files(args.goldens), runner, pte, program, tokenizer)
    if not args.no_baseline:
        outcome.notes.append(METRICS_NOT_GATED)
    if args.json:
        from eagle3_check.cli.common import report_provenance

        print(json.dumps({**outcome.to_json(), "provenance": report_provenance(args)}, indent=1))
    else:
        print(outcome.format())
    return 0 if outcome.passed else 1
