"""The `check` command: its Config -> the job it names -> one Outcome (jobs.common.outcomes), which the front
end prints (`cli.common.emit`). The job is chosen by what was asked (--list, --suite, --quantize, the prompt set) and by what
the runner can show (`runners.seam.Capabilities`), never by the `--runner` value's form:

| asked | runner | job | outcome |
|---|---|---|---|
| --list | - | the suites and their cases | `ListOutcome` |
| the prompt set | in its own process (runners/isolate/policy.py) | `jobs.check.job.check_isolated` | `PromptSetOutcome` |
| --quantize | in process | `jobs.gate.quantized.quantized_check` | `QuantOutcome` |
| --suite NAME | any (a binary takes each case on its file) | `jobs.suites.job.run_suites` | `SuitesOutcome` |
| the prompt set | runs its own program file (a binary) | `jobs.check.job.exec_check` | `ExecCheckOutcome` |
| the prompt set | in process, or --workers N | `check_prompts` / `check_workers` | `PromptSetOutcome` |

It lives above the job packages (`jobs.check`, `jobs.suites`, `jobs.gate`): `check` is the command that
reaches all three.
"""

from __future__ import annotations


class ListOutcome:
    """`check --list`: the suites and their cases (JSON with --json); --junit and --html are refused."""

    json_indent = 2
    junit_name, junit_prefix = "eagle3-check check", "check"

    def junit_suites(self) -> list:
        return []

    def html_page(self) -> None:
        return None

    def to_json(self) -> dict:
        from eagle3_check.suites.listing import list_suites

        return list_suites()

    def lines(self) -> list[str]:
        from eagle3_check.suites.listing import format_list

        return [format_list()]

    def exit_code(self) -> int:
        return 0


def run_check_command(cfg, make_bar=None):
    """`eagle3-check check` from its Config: the job it names (table above), run, as an Outcome.
    `make_bar`: the front end's progress bar (tqdm's signature); None shows none."""
    from eagle3_check.jobs import shrink_route as sr
    from eagle3_check.jobs.check.job import NoBar

    make_bar = make_bar or NoBar
    if cfg.suites.list:
        return ListOutcome()
    cfg, repro = sr.apply_repro(cfg)  # --repro FILE: its prompt ids, K, max new tokens, spec
    from eagle3_check.jobs.common.context import CheckContext
    from eagle3_check.jobs.common.watch import FileWatch, read_files

    watch = FileWatch(read_files(cfg))  # what the check reads, before the runner starts (jobs/common/watch.py)
    ctx = CheckContext(cfg)
    ctx.watch = watch
    from eagle3_check.jobs.check import job
    from eagle3_check.jobs.check.outcomes import ExecCheckOutcome, PromptSetOutcome

    if job.isolated(cfg, ctx.runner_name):  # the runner in its own process (eagle3_check/runners/isolate): never imported here
        sr.check_replay(cfg, repro, ctx.setup)  # a repro names its program's files: the same ones
        return PromptSetOutcome(ctx, job.check_isolated(ctx, make_bar))
    if cfg.check.quantize:  # the gate's quantized checks in process
        from eagle3_check.jobs.gate.quantized import QuantOutcome

        sr.check_replay(cfg, repro, ctx.setup)
        return QuantOutcome(ctx)
    if cfg.suites.suite:  # any runner: a case it cannot take skips, by its capabilities
        from eagle3_check.jobs.suites.job import run_suites
        from eagle3_check.jobs.suites.outcomes import SuitesOutcome

        return SuitesOutcome(ctx, run_suites(ctx, make_bar))
    if ctx.capabilities.program_file:  # a runner of its own program file, judged by what it prints (one line
        # here when it does not start, before any program)
        return ExecCheckOutcome(ctx, *job.exec_check(ctx, make_bar))
    sr.check_replay(cfg, repro, ctx.setup)  # (--repro is refused with --workers: jobs/common/validate.py)
    return PromptSetOutcome(ctx, (job.check_workers if cfg.check.workers > 1 else job.check_prompts)(ctx, make_bar))

