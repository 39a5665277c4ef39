"""`eagle3-check check --suite NAME` and `check --list`: the edge-case suites (eagle3_check/suites)
on every embedded fixture or on one given program, their table, JSON and JUnit XML."""

from __future__ import annotations

import argparse
import json
import sys

from eagle3_check.cli.common import build_program, report_provenance, set_threads


def list_main(args: argparse.Namespace) -> int:
    from eagle3_check.suites.report import format_list, list_suites

    print(json.dumps(list_suites(), indent=2) if args.json else format_list())
    return 0


def suite_main(args: argparse.Namespace, runner) -> int:
    """`check --suite NAME`: the cases of the suite on every tiny embedded fixture (or --fixture NAME;
    eager programs built per case spec) or on one given program (--target/--draft, --pte):
    there cases that cannot fit skip."""
    from tqdm import tqdm

    from eagle3_check.errors import InputError
    from eagle3_check.fixtures.registry import list_fixtures, load_fixture
    from eagle3_check.suites import suite_cases
    from eagle3_check.suites.execute import SuiteEnv
    from eagle3_check.suites.report import format_suite_table, run_suite

    cases = suite_cases(args.suite)  # unknown name -> error with "did you mean"
    cases = ordered_cases(args, cases)
    if args.target or args.draft or getattr(args, "pte", None):  # one given program
        envs = [lambda: fixed_env(args)]
    else:
        given = [f for f in ("max_seq_len", "min_prefill", "max_prefill") if getattr(args, f) is not None]
        if given:
            flag = "--" + given[0].replace("_", "-")
            raise InputError(f"{flag} with --suite", "no program overrides (each case sets its own spec)",
                             f"drop {flag}")
        names = [load_fixture(args.fixture).name] if args.fixture else list_fixtures(real=False)
        set_threads(args.device, getattr(args, "threads", None))
        envs = [lambda n=n: (SuiteEnv.eager(n, args.device, args.dtype, args.reference),
                             {"fixture": n, "backend": "eager"}) for n in names]
    from eagle3_check.cli.shrink_flags import shrink_suite_and_write

    reports, bar, shrunk = [], None, []
    for make_env in envs:
        env, info = make_env()
        if bar is None:  # after the first program loads: an error loading it is the only line on stderr
            bar = tqdm(total=len(cases) * len(envs), desc=f"suite {args.suite}", unit="case", file=sys.stderr,
                       disable=args.no_progress or args.json)
        report = run_suite(args.suite, cases, env, runner, on_case=lambda _, b=bar: b.update(1))
        report.info.update(info, device=args.device, dtype=args.dtype, runner=args.runner, reference=args.reference)
        shrunk += shrink_suite_and_write(args, report, cases, env, info, runner)  # --shrink: the failing plain cases
        reports.append(report)
    if bar is not None:
        bar.close()
    passed = all(r.passed for r in reports)
    write_suites_junit(args, reports)
    if args.json:
        print(json.dumps({"passed": passed, "reports": [r.to_json() for r in reports],
                          "provenance": report_provenance(args, args.fixture)}, indent=2))
    else:
        print("\n\n".join(f"== {r.info.get('fixture') or r.info.get('pte') or r.info.get('target')}\n"
                           + format_suite_table(r) for r in reports))
        if shrunk:
            print("\n".join(shrunk))
    return 0 if passed else 1


def refuse_junit(args: argparse.Namespace, where: str) -> None:
    """--junit where no check runs: a one-line error, never a silently missing file."""
    if getattr(args, "junit", None):
        from eagle3_check.errors import OptionError

        raise OptionError(f"--junit with {where}", "a check that judges prompts or cases", "drop --junit")


def write_suites_junit(args: argparse.Namespace, reports: list) -> None:
    """`check --suite ... --junit FILE`: one testsuite per suite report."""
    if args.junit:
        from eagle3_check.report.check_junit import suite_suite, write_check_junit

        write_check_junit(args.junit, [suite_suite(r) for r in reports])


def ordered_cases(args: argparse.Namespace, cases: list) -> list:
    """The cases in the order `--shuffle SEED` asks (printed on stderr), else as registered."""
    if getattr(args, "shuffle", None) is None:
        return cases
    from eagle3_check.suites import shuffled_cases

    cases = shuffled_cases(cases, args.shuffle)
    print(f"order: --shuffle {args.shuffle}: {', '.join(c.name for c in cases)}", file=sys.stderr)
    return cases


def fixed_env(args: argparse.Namespace):
    """(SuiteEnv, info) of the one given program (--target/--draft or --pte) the cases run on, with
    its prompts (--prompts, else its fixture's); shared by `check --suite ... --runner exec:...`."""
    import torch

    from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, load_fixture, load_prompts
    from eagle3_check.reference.hf import HFReference
    from eagle3_check.reference.tolerance import tolerance_for
    from eagle3_check.suites.execute import SELF, SuiteEnv

    if args.target and not args.prompts:
        from eagle3_check.cli.check import raise_no_prompts

        raise_no_prompts()
    setup = build_program(args)
    reference = SELF if args.reference == "self" else \
        HFReference(setup.target_dir, args.device, getattr(torch, args.dtype))
    fixture = setup.info.get("fixture") or args.fixture or DEFAULT_FIXTURE  # a .pte names its own
    prompts = load_prompts(args.prompts) if args.prompts else load_fixture(fixture).prompts()
    prompts = [p.text for p in prompts]
    env = SuiteEnv.fixed(setup.program, setup.tokenizer, reference, prompts, tolerance_for(args.dtype),
                         fixture=setup.info.get("fixture"))
    return env, {**setup.info}
