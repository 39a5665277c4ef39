"""Shrinking and replaying on a Config (`check`, `run`, `gate`): the request a repro file names, the
prompt `--prompt-ids` / `--prompt` give, and every failing request shrunk to its smallest
reproduction (jobs/check/shrink.py, jobs/suites/shrink.py, each with its binary's probe; the gate's: jobs/gate/shrink_route.py)
within `--shrink-budget S`, a repro file written for each beside the report (`--shrink-dir`, default:
the --junit / --html / --report file's directory, else the current one). docs/shrinking.md.
"""

from __future__ import annotations

import sys
from pathlib import Path

from eagle3_check.errors import OptionError


def parse_ids(text: str) -> tuple[int, ...]:
    try:
        ids = tuple(int(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise OptionError(f"--prompt-ids {text[:60]!r}", "comma-separated token ids", "e.g. --prompt-ids 2,108,9") from None
    if not ids or min(ids) < 0:
        raise OptionError(f"--prompt-ids {text[:60]!r}", "at least one id, each >= 0", "e.g. --prompt-ids 2,108,9")
    return ids


def option_values(cfg) -> dict:
    """The command's options by name (what `vars(args)` was to the flag-based helpers)."""
    return {name: cfg.value(name) for name in cfg.present}


def apply_repro(cfg):
    """--repro FILE: (the config with the repro's request on it, the loaded repro), or (cfg, None)
    without --repro. A flag given on the command line wins; the runner is the repro's unless --runner."""
    if not cfg.shrink.repro:
        return cfg, None
    import types

    from eagle3_check.shrink.repro import load_repro, replay_args

    repro = load_repro(cfg.shrink.repro)
    ns = types.SimpleNamespace(**option_values(cfg))
    replay_args(ns, repro)
    changes = {k: v for k, v in vars(ns).items() if k in cfg.present and cfg.value(k) != v}
    cfg = cfg.replace(**changes, repro_prompt_id=f"repro:{repro.prompt_id}")
    from eagle3_check.shrink.repro import replay_runner

    runner, note = replay_runner(repro.runner, cfg.runner if "runner" in cfg.given else None)
    if runner:
        cfg = cfg.replace(runner=runner)
    if note:
        import sys

        print(note, file=sys.stderr)  # the repro's runner, when this run does not use it
    return cfg, repro


def given_prompt_ids(cfg, tokenizer) -> tuple[int, ...] | None:
    """--prompt-ids (or a repro's), checked against the tokenizer; refused beside another prompt flag."""
    if not cfg.shrink.prompt_ids:
        return None
    other = next((f for f in ("prompt", "prompt_file", "prompts", "suite") if cfg.value(f) is not None), None)
    if other:
        raise OptionError(f"--prompt-ids with --{other.replace('_', '-')}", "one prompt source",
                          f"drop --{other.replace('_', '-')} or --prompt-ids")
    ids = parse_ids(cfg.shrink.prompt_ids)
    bad = next((t for t in ids if t >= tokenizer.vocab_size), None)
    if bad is not None:
        raise OptionError(f"--prompt-ids id {bad}", f"ids below the tokenizer's {tokenizer.vocab_size}",
                          "pass ids of this program's tokenizer")
    return ids


def given_prompts(cfg, tokenizer) -> list:
    """The one prompt --prompt-ids (its text the ids' decode, for the report) or --prompt gives, else []."""
    from eagle3_check.fixtures.registry import Prompt

    name = cfg.shrink.repro_prompt_id
    ids = given_prompt_ids(cfg, tokenizer)
    if ids is not None:
        return [Prompt(name or "prompt-ids", tokenizer.decode(list(ids)), ids)]
    if getattr(cfg, "prompt", None) is not None:
        if cfg.prompts:
            raise OptionError("--prompt with --prompts", "one prompt source", "drop --prompts or --prompt")
        return [Prompt(name or "prompt", cfg.prompt)]
    return []


def refuse_shrink(cfg, route: str, allowed: tuple[str, ...] = ()) -> None:
    """--shrink, --prompt-ids, --repro and --prompt work on the prompt-set check (`allowed`: those that
    work on `route` too); elsewhere a one-line error."""
    flag = next((f for f in ("shrink", "prompt_ids", "repro", "prompt") if f not in allowed and cfg.value(f)),
                None)
    if flag:
        name = "--" + flag.replace("_", "-")
        raise OptionError(f"{name} with {route}", f"{name} on an in-process prompt-set check",
                          f"drop {name}, or run check without {route}")


def program_files(cfg, setup) -> dict:
    """The files that make the program: the .pte (and .ptd), or the fixture's / --target's directories."""
    return program_files_of({"pte": getattr(cfg, "pte", None), "data_path": getattr(cfg, "data_path", None),
                             "fixture": None if cfg.target else setup.info.get("fixture"), "target": cfg.target,
                             "draft": cfg.draft, "tokenizer": cfg.tokenizer})


def program_files_of(values: dict) -> dict:
    """`program_files` from option values by name (pte, data_path, fixture, target, draft, tokenizer)."""
    if values.get("pte"):
        return {"pte": values["pte"], "data": values.get("data_path")}
    if values.get("fixture") and not values.get("target"):
        from eagle3_check.fixtures.registry import load_fixture

        fx = load_fixture(values["fixture"])
        return {"target": fx.target_dir, "draft": fx.draft_dir, "tokenizer": fx.tokenizer_path}
    return {name: values.get(name) for name in ("target", "draft", "tokenizer")}


def check_replay(cfg, repro, setup) -> None:
    if repro is not None:
        from eagle3_check.shrink.repro import check_digest

        check_digest(repro, program_files(cfg, setup), f"--repro {cfg.shrink.repro}")


def shrink_dir(cfg) -> Path:
    if cfg.shrink.dir:
        return Path(cfg.shrink.dir)
    out = getattr(cfg, "junit", None) or getattr(cfg, "html", None) or cfg.gate.report
    return Path(out).parent if out else Path(".")


def shrink_and_write(cfg, report, setup, prompts, reference, options, tolerance, runner,
                     runner_name: str) -> list[str]:
    """Shrinks the failing requests of `report` (a progress bar on stderr), writes a repro file
    for each and adds its command and file to `outcome.shrunk`; returns the lines to print."""
    from tqdm import tqdm

    from eagle3_check.jobs.check.shrink import shrink_report
    from eagle3_check.shrink.repro import program_flags, program_record

    if not any(o.verdict.status == "fail" for o in report.outcomes):
        return []
    bar = tqdm(desc="shrink", unit="probe", file=sys.stderr, leave=False, delay=0.5,
               disable=getattr(cfg, "no_progress", False) or getattr(cfg, "json", False))
    try:
        results = shrink_report(report, prompts, setup.program, setup.tokenizer, reference, options, tolerance,
                                runner, cfg.shrink.budget,
                                on_probe=lambda n, req, same: bar.set_postfix_str(req.describe()) or bar.update(1))
    finally:
        bar.close()
    flags = program_flags(option_values(cfg))
    program = {"flags": flags, **program_record(program_files(cfg, setup))}
    lines: list[str] = []
    for outcome, result in results:
        lines += write_one(cfg, outcome.prompt_id, outcome.shrunk, result, flags, program, runner_name, options)
    return lines


def write_one(cfg, name: str, shrunk: dict, result, flags: list[str], program: dict,
              runner_name: str, options) -> list[str]:
    """Writes the repro file of one shrunk request, adds its command and file to `shrunk`; the lines to print."""
    from eagle3_check.shrink.repro import repro_command, repro_data, repro_path, write_repro

    out_dir = shrink_dir(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    command = repro_command(flags, runner_name, result)
    path = write_repro(repro_path(out_dir, name), repro_data(result, name, program, runner_name, options, command))
    shrunk.update(command=command, file=str(path))
    done = "" if result.complete else " (budget spent: smaller may exist)"
    kept = [f"  kept: {'; '.join(result.kept)}"] if result.kept else []
    return [f"shrunk '{name}': {result.original.describe()} -> {result.shrunk.describe()} "
            f"({result.probes} probes, {result.seconds:.1f} s){done}: {result.failure.kind}",
            *kept, f"  repro: {command}", f"  file: {path}"]


def shrink_exec_and_write(cfg, report, setup, prompts, reference, options, tolerance,
                          runner) -> tuple[list[str], dict]:
    """`check --runner exec:... --shrink`: the binary's failing requests shrunk (jobs/check/shrink.py), a
    repro file each; (the lines to print, prompt id -> its shrunk JSON for the report)."""
    if not cfg.shrink.enabled or not any(o.verdict.status == "fail" for o in report.outcomes):
        return [], {}
    from tqdm import tqdm

    from eagle3_check.jobs.check.shrink import shrink_exec_report
    from eagle3_check.shrink.repro import program_flags, program_record

    bar = tqdm(desc="shrink (exec)", unit="probe", file=sys.stderr, leave=False, delay=0.5,
               disable=cfg.no_progress or cfg.json)
    try:
        results = shrink_exec_report(report, prompts, runner, setup.program, setup.tokenizer, reference, options,
                                     tolerance, cfg.shrink.budget, on_probe=lambda *a: bar.update(1))
    finally:
        bar.close()
    flags = program_flags(option_values(cfg))
    program = {"flags": flags, **program_record(program_files(cfg, setup))}
    lines, shrunk = [], {}
    for outcome, result in results:
        shrunk[outcome.prompt_id] = {**result.to_json(), "prompt_text": result.prompt_text}
        lines += write_one(cfg, outcome.prompt_id, shrunk[outcome.prompt_id], result, flags, program, cfg.runner,
                           options)
    return lines, shrunk


def shrink_suite_and_write(cfg, report, cases, env, info: dict, runner, shrink_case=None) -> list[str]:
    """`check --suite NAME --shrink`: each failing plain case shrunk (jobs/suites/shrink.py; a binary's:
    `shrink_case=jobs.suites.shrink.shrink_exec_case`), a repro file each, the result in the case's details;
    the lines to print. A case that is not shrunk gets its own one-line reproduction (`case_command`)."""
    if not cfg.shrink.enabled or not report.failed:
        return []
    from eagle3_check.shrink.repro import program_flags, program_record
    from eagle3_check.shrink.search import budget_shares

    if shrink_case is None:
        from eagle3_check.jobs.suites.shrink import shrink_case

    by_name = {c.name: c for c in cases}
    failing = [r for r in report.failed if r.name in by_name]
    lines: list[str] = []
    for r, share in zip(failing, budget_shares(len(failing), cfg.shrink.budget)):
        case = by_name[r.name]
        result, shrunk, note = shrink_case(case, env, runner, share)
        if result is None:
            lines += [f"{r.name}: {note}", f"  kept: the whole case ({note.removeprefix('not shrunk: ')})",
                      f"  repro: {case_command(cfg, r.name, info)}"]
            continue
        r.details["shrunk"] = shrunk
        options = {**option_values(cfg), "fixture": info.get("fixture") or cfg.fixture, **case_flags(case)}
        flags = program_flags(options, spec=dict(case.spec))
        files = {"pte": cfg.pte} if getattr(cfg, "pte", None) else {}
        lines += write_one(cfg, r.name, shrunk, result, flags, {"flags": flags, **program_record(files)},
                           cfg.runner, case_setup_options(case, env))
    return lines


def case_command(cfg, name: str, info: dict) -> str:
    """The one line that runs suite case `name` again, as this command ran it."""
    from eagle3_check.shrink.repro import one_line, program_flags

    values = {**option_values(cfg), "fixture": info.get("fixture") or cfg.fixture}
    runner = ["--runner", cfg.runner] if cfg.runner and cfg.runner not in ("reference", "device") else []
    return one_line(["eagle3-check", "check", *program_flags(values), *runner, "--suite", name])


def case_flags(case) -> dict:
    """A case's run options as the values of their flags (stop ids '1,50', no stop token '')."""
    return run_option_flags(case.option_dict())


def run_option_flags(options: dict) -> dict:
    """Run options (RunOptions fields by name) as the values of their flags (stop ids '1,50', no stop token '')."""
    out = {}
    for name, value in options.items():
        if name == "stop_ids":
            value = ",".join(map(str, value))
        elif name == "stop_token" and value is None:
            value = ""
        out[name] = value
    return out


def case_setup_options(case, env):
    from eagle3_check.jobs.suites.execute import case_setup

    return case_setup(case, env).options
