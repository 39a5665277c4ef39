"""The flags of shrinking and replaying (`run`, `check`; the gate's shrink flags): parse, one call, print.

`--prompt-ids 2,108,...` gives the prompt as ids (no template applied), `--repro FILE` replays a
repro file (its prompt ids, K, max new tokens and spec), `--shrink` shrinks every failing request
(gating/shrink_check.py) within `--shrink-budget S` and writes a repro file for each beside the
report (`--shrink-dir`, default: the --junit / --html file's directory, else the current one).
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from eagle3_check.errors import OptionError


def add_replay_args(p: argparse.ArgumentParser, prompt_text: bool = False) -> None:
    """`prompt_text`: also --prompt TEXT (one prompt; `run` has its own)."""
    if prompt_text:
        p.add_argument("--prompt", default=None, metavar="TEXT",
                       help="check this one prompt (the chat template applied unless --raw) instead of a prompt set")
    p.add_argument("--prompt-ids", default=None, metavar="IDS",
                   help="the prompt as comma-separated token ids (BOS included; no chat template applied)")
    p.add_argument("--repro", default=None, metavar="FILE",
                   help="replay a repro file written by --shrink: its prompt ids, K, max new tokens and spec")


def add_shrink_args(p: argparse.ArgumentParser, default_on: bool = False) -> None:
    from eagle3_check.gating.shrink import DEFAULT_BUDGET_S

    if default_on:
        p.add_argument("--no-shrink", dest="shrink", action="store_false",
                       help="do not shrink the failing requests (shrinking is on by default here)")
    else:
        p.add_argument("--shrink", action="store_true",
                       help="shrink every failing request to its smallest reproduction: a one-line command and "
                       "a repro JSON file beside the report (docs/shrinking.md)")
    p.add_argument("--shrink-budget", type=_budget, default=DEFAULT_BUDGET_S, metavar="S",
                   help=f"seconds all shrinking together may take (default {DEFAULT_BUDGET_S:g})")
    p.add_argument("--shrink-dir", default=None, metavar="DIR",
                   help="where the repro files go (default: beside --junit / --html, else the current directory)")


def _budget(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value < float("inf"):
        raise OptionError(f"--shrink-budget {text}", "a number of seconds >= 0", "e.g. --shrink-budget 60")
    return value


def parse_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise OptionError(f"--prompt-ids {text[:60]!r}", "comma-separated token ids", "e.g. --prompt-ids 2,108,9") from None
    if not ids or min(ids) < 0:
        raise OptionError(f"--prompt-ids {text[:60]!r}", "at least one id, each >= 0", "e.g. --prompt-ids 2,108,9")
    return ids


def apply_repro(args: argparse.Namespace):
    """--repro FILE: its request onto args (returns the loaded repro, or None without --repro)."""
    if not getattr(args, "repro", None):
        return None
    from eagle3_check.gating.repro import load_repro, replay_args

    repro = load_repro(args.repro)
    replay_args(args, repro)
    args.repro_prompt_id = f"repro:{repro.prompt_id}"
    return repro


def given_prompt_ids(args: argparse.Namespace, tokenizer) -> tuple[int, ...] | None:
    """--prompt-ids (or a repro's), checked against the tokenizer; refused beside another prompt flag."""
    if not getattr(args, "prompt_ids", None):
        return None
    other = next((f for f in ("prompt", "prompt_file", "prompts", "suite") if getattr(args, f, None) is not None), None)
    if other:
        raise OptionError(f"--prompt-ids with --{other.replace('_', '-')}", "one prompt source",
                          f"drop --{other.replace('_', '-')} or --prompt-ids")
    ids = parse_ids(args.prompt_ids)
    bad = next((t for t in ids if t >= tokenizer.vocab_size), None)
    if bad is not None:
        raise OptionError(f"--prompt-ids id {bad}", f"ids below the tokenizer's {tokenizer.vocab_size}",
                          "pass ids of this program's tokenizer")
    return ids


def given_prompts(args: argparse.Namespace, tokenizer) -> list:
    """The one prompt --prompt-ids (its text the ids' decode, for the report) or --prompt gives, else []."""
    from eagle3_check.fixtures.registry import Prompt

    name = getattr(args, "repro_prompt_id", None)
    ids = given_prompt_ids(args, tokenizer)
    if ids is not None:
        return [Prompt(name or "prompt-ids", tokenizer.decode(list(ids)), ids)]
    if getattr(args, "prompt", None) is not None:
        if args.prompts:
            raise OptionError("--prompt with --prompts", "one prompt source", "drop --prompts or --prompt")
        return [Prompt(name or "prompt", args.prompt)]
    return []


def refuse_shrink(args: argparse.Namespace, route: str, allowed: tuple[str, ...] = ()) -> None:
    """--shrink, --prompt-ids, --repro and --prompt work on the prompt-set check (`allowed`: those that
    work on `route` too); elsewhere a one-line error."""
    flag = next((f for f in ("shrink", "prompt_ids", "repro", "prompt") if f not in allowed and getattr(args, f, None)),
                None)
    if flag:
        name = "--" + flag.replace("_", "-")
        raise OptionError(f"{name} with {route}", f"{name} on an in-process prompt-set check",
                          f"drop {name}, or run check without {route}")


def program_files(args: argparse.Namespace, setup) -> dict:
    """The files that make the program: the .pte (and .ptd), or the fixture's / --target's directories."""
    if getattr(args, "pte", None):
        return {"pte": args.pte, "data": getattr(args, "data_path", None)}
    if setup.info.get("fixture") and not args.target:
        from eagle3_check.fixtures.registry import load_fixture

        fx = load_fixture(setup.info["fixture"])
        return {"target": fx.target_dir, "draft": fx.draft_dir, "tokenizer": fx.tokenizer_path}
    return {"target": args.target, "draft": args.draft, "tokenizer": args.tokenizer}


def check_replay(args: argparse.Namespace, repro, setup) -> None:
    if repro is not None:
        from eagle3_check.gating.repro import check_digest

        check_digest(repro, program_files(args, setup), f"--repro {args.repro}")


def shrink_dir(args: argparse.Namespace) -> Path:
    if args.shrink_dir:
        return Path(args.shrink_dir)
    out = getattr(args, "junit", None) or getattr(args, "html", None) or getattr(args, "report", None)
    return Path(out).parent if out else Path(".")


def shrink_and_write(args: argparse.Namespace, report, setup, prompts, reference, options, tolerance, runner,
                     runner_name: str) -> list[str]:
    """Shrinks the failing requests of `report` (a progress bar on stderr), writes a repro file
    for each and adds its command and file to `outcome.shrunk`; returns the lines to print."""
    from tqdm import tqdm

    from eagle3_check.gating.repro import program_flags, program_record
    from eagle3_check.gating.shrink_check import shrink_report

    if not any(o.verdict.status == "fail" for o in report.outcomes):
        return []
    bar = tqdm(desc="shrink", unit="probe", file=sys.stderr, leave=False, delay=0.5,
               disable=getattr(args, "no_progress", False) or getattr(args, "json", False))
    try:
        results = shrink_report(report, prompts, setup.program, setup.tokenizer, reference, options, tolerance,
                                runner, args.shrink_budget,
                                on_probe=lambda n, req, same: bar.set_postfix_str(req.describe()) or bar.update(1))
    finally:
        bar.close()
    flags = program_flags(vars(args))
    program = {"flags": flags, **program_record(program_files(args, setup))}
    lines: list[str] = []
    for outcome, result in results:
        lines += write_one(args, outcome.prompt_id, outcome.shrunk, result, flags, program, runner_name, options)
    return lines


def write_one(args: argparse.Namespace, name: str, shrunk: dict, result, flags: list[str], program: dict,
              runner_name: str, options) -> list[str]:
    """Writes the repro file of one shrunk request, adds its command and file to `shrunk`; the lines to print."""
    from eagle3_check.gating.repro import repro_command, repro_data, repro_path, write_repro

    out_dir = shrink_dir(args)
    out_dir.mkdir(parents=True, exist_ok=True)
    command = repro_command(flags, runner_name, result)
    path = write_repro(repro_path(out_dir, name), repro_data(result, name, program, runner_name, options, command))
    shrunk.update(command=command, file=str(path))
    done = "" if result.complete else " (budget spent: smaller may exist)"
    return [f"shrunk '{name}': {result.original.describe()} -> {result.shrunk.describe()} "
            f"({result.probes} probes, {result.seconds:.1f} s){done}: {result.failure.kind}",
            f"  repro: {command}", f"  file: {path}"]


def shrink_gate_and_write(args: argparse.Namespace, report, inputs) -> list[str]:
    """`gate` (shrinking on unless --no-shrink): its failing request cases shrunk (gating/shrink_gate.py),
    a repro file each beside the report, the JUnit case given the repro; the lines to print."""
    from eagle3_check.gating.shrink_gate import failing_cases, shrink_gate

    ks = report.info.get("k")
    ks = ks if isinstance(ks, list) else [ks] if ks is not None else []
    if not args.shrink or inputs.runner is not None or not failing_cases(report, inputs.prompts, ks):
        return []  # a runner binary's gate is not shrunk in process (docs/shrinking.md)
    from tqdm import tqdm

    from eagle3_check.gating.repro import program_flags, program_record
    from eagle3_check.program.pte_backend import PteBackend
    from eagle3_check.report.check_junit import shrunk_details, shrunk_properties

    program = PteBackend(inputs.pte, inputs.data_path)
    hf = inputs.hf_reference
    if hf is None and inputs.target_dir is not None:
        import torch

        from eagle3_check.reference.hf import HFReference

        hf = HFReference(inputs.target_dir, dtype=getattr(torch, inputs.tolerance.dtype))
    bar = tqdm(desc="shrink", unit="probe", file=sys.stderr, leave=False, delay=0.5,
               disable=args.no_progress or args.json)
    try:
        done = shrink_gate(report, inputs, program, hf, args.shrink_budget, on_probe=lambda *a: bar.update(1))
    finally:
        bar.close()
    record = program_record({"pte": args.pte, "data": args.data_path})
    runner_name = args.runner or "reference"
    lines: list[str] = []
    for g in done:
        if g.result is None:
            lines.append(f"not shrunk '{g.case}' ({g.check}): {g.note}")
            continue
        flags = program_flags({**vars(args), "reference": g.reference})
        chk = next(c for c in report.checks if c.name == g.check)
        shrunk = chk.details["shrunk"][g.case]
        lines += write_one(args, g.case, shrunk, g.result, flags, {"flags": flags, **record}, runner_name,
                           dataclasses.replace(inputs.options, chain_len=g.k))
        case = next(c for c in chk.cases if c.name == g.case)
        case.details = shrunk_details(shrunk, case.message)
        case.properties = {**case.properties, **shrunk_properties(shrunk)}
    return lines


def shrink_exec_and_write(args: argparse.Namespace, report, setup, prompts, reference, options, tolerance,
                          runner) -> tuple[list[str], dict]:
    """`check --runner exec:... --shrink`: the binary's failing requests shrunk (binary/shrink.py), a
    repro file each; (the lines to print, prompt id -> its shrunk JSON for the report)."""
    if not args.shrink or not any(o.verdict.status == "fail" for o in report.outcomes):
        return [], {}
    from tqdm import tqdm

    from eagle3_check.binary.shrink import shrink_exec_report
    from eagle3_check.gating.repro import program_flags, program_record

    bar = tqdm(desc="shrink (exec)", unit="probe", file=sys.stderr, leave=False, delay=0.5,
               disable=args.no_progress or args.json)
    try:
        results = shrink_exec_report(report, prompts, runner, setup.program, setup.tokenizer, reference, options,
                                     tolerance, args.shrink_budget, on_probe=lambda *a: bar.update(1))
    finally:
        bar.close()
    flags = program_flags(vars(args))
    program = {"flags": flags, **program_record(program_files(args, setup))}
    lines, shrunk = [], {}
    for outcome, result in results:
        shrunk[outcome.prompt_id] = {**result.to_json(), "prompt_text": result.prompt_text}
        lines += write_one(args, outcome.prompt_id, shrunk[outcome.prompt_id], result, flags, program, args.runner,
                           options)
    return lines, shrunk


def shrink_suite_and_write(args: argparse.Namespace, report, cases, env, info: dict, runner) -> list[str]:
    """`check --suite NAME --shrink`: each failing plain case shrunk (gating/shrink_suite.py), a repro file
    each, the result in the case's details; the lines to print."""
    if not args.shrink or not report.failed:
        return []
    from eagle3_check.gating.repro import program_flags, program_record
    from eagle3_check.gating.shrink import budget_shares
    from eagle3_check.gating.shrink_suite import shrink_case

    by_name = {c.name: c for c in cases}
    failing = [r for r in report.failed if r.name in by_name]
    lines: list[str] = []
    for r, share in zip(failing, budget_shares(len(failing), args.shrink_budget)):
        case = by_name[r.name]
        result, shrunk, note = shrink_case(case, env, runner, share)
        if result is None:
            lines.append(f"{r.name}: {note}")
            continue
        r.details["shrunk"] = shrunk
        options = {**vars(args), "fixture": info.get("fixture") or args.fixture, **case_flags(case)}
        flags = program_flags(options, spec=dict(case.spec))
        files = {"pte": args.pte} if getattr(args, "pte", None) else {}
        lines += write_one(args, r.name, shrunk, result, flags, {"flags": flags, **program_record(files)},
                           args.runner, case_setup_options(case, env))
    return lines


def case_flags(case) -> dict:
    """A case's run options as the values of their flags (stop ids '1,50', no stop token '')."""
    out = {}
    for name, value in case.option_dict().items():
        if name == "stop_ids":
            value = ",".join(map(str, value))
        elif name == "stop_token" and value is None:
            value = ""
        out[name] = value
    return out


def case_setup_options(case, env):
    from eagle3_check.suites.execute import case_setup

    return case_setup(case, env).options
