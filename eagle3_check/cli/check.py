"""`eagle3-check check`: the main job. Prompt set -> runner -> HF reference -> verdicts.

Parse, build the config, call the library (eagle3_check/jobs: the prompt set in process or
over workers, the suites, `--quantize`, a runner binary), print the table, JSON, JUnit or HTML.
"""

from __future__ import annotations

import argparse
import json

from eagle3_check.cli.common import (
    add_compile_args,
    add_drift_args,
    add_html_arg,
    add_program_args,
    add_runner_args,
    add_timeout_arg,
    bars,
)
from eagle3_check.cli.shrink_flags import add_replay_args, add_shrink_args
from eagle3_check.jobs.common.provenance import report_provenance

HELP = """Run a prompt set through the reference runner and judge every emitted token of every
request against the target in Transformers (the HF reference) run over the prompt + the runner's
own tokens: identical (the reference's argmax), tie (a near-tie of the reference within the
dtype's tolerance, see eagle3_check/judge/tolerance.py) or fail; then the length and stop rules.
Exit code 0 only if no request fails and the ties are within the tie budget.

examples:
  eagle3-check check                         # the real SmolLM2-135M fixture (smollm2-135m), its 16 prompts
  eagle3-check check --fixture tiny-llama    # the embedded tiny model (seconds)
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
    p.add_argument("--isolate", action="store_true", help="run the reference/device runner in its own process too "
                   "(a plug-in runner always runs in its own process: docs/isolation.md)")
    p.add_argument("--in-process", action="store_true", help="run a plug-in runner in the harness's process "
                   "(faster to start; what it patches or prints can reach the harness)")
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
                   "float32 0, bfloat16 see eagle3_check/judge/tolerance.py TIE_BUDGET, FIXTURE_BUDGET); more "
                   "fails the report")
    p.add_argument("--exact", action="store_true",
                   help="exact mode: the runner and the HF reference on shape-invariant kernels (docs/exact.md), "
                   "so a correct runner's logits equal the reference's bit for bit; the verdict is identity "
                   "(tie tolerance 0, tie budget 0). The prompt set, in process, on an eager program")
    add_program_args(p, aoti=True, default="the real fixture smollm2-135m", why=" for the prompt set (the `real` extra); --suite, "
                     "--quantize and --repro keep the tiny fixtures (cost: docs/real-models.md)")
    add_runner_args(p, max_new_default=64)
    add_compile_args(p)
    add_drift_args(p, quantize=True)
    add_replay_args(p, prompt_text=True)
    add_shrink_args(p)
    p.set_defaults(func=main)


def main(cfg) -> int:
    from eagle3_check.jobs import shrink_route as sr
    from eagle3_check.jobs.common.context import CheckContext

    if cfg.suites.list:
        return list_main(cfg)
    cfg, repro = sr.apply_repro(cfg)  # --repro FILE: its prompt ids, K, max new tokens, spec
    from eagle3_check.jobs.common.watch import FileWatch, read_files

    watch = FileWatch(read_files(cfg))  # what the check reads, before the runner starts (jobs/common/watch.py)
    ctx = CheckContext(cfg)
    ctx.watch = watch
    from eagle3_check.jobs.check.job import check_isolated, isolated

    if isolated(cfg, ctx.runner_name):  # the runner in its own process (eagle3_check/runners/isolate): never imported here
        if repro is not None:
            sr.check_replay(cfg, repro, ctx.setup)  # a repro names its program's files: the same ones
        return print_report(ctx, check_isolated(ctx, bars(cfg)))
    if cfg.check.quantize:  # the gate's quantized checks in process
        if repro is not None:
            sr.check_replay(cfg, repro, ctx.setup)
        return quant_main(ctx)
    if ctx.capabilities.program_file:  # a runner of its own program file, judged by what it prints (one line
        # here when it does not start, before any program)
        return exec_main(ctx)
    if cfg.suites.suite:
        return suite_main(ctx)
    if repro is not None:  # (refused with --workers: jobs/common/validate.py)
        sr.check_replay(cfg, repro, ctx.setup)  # a repro names its program's files: the same ones
    from eagle3_check.jobs.check.job import check_prompts, check_workers

    checked = (check_workers if cfg.check.workers > 1 else check_prompts)(ctx, bars(cfg))
    return print_report(ctx, checked)


def print_report(ctx, checked) -> int:
    """The check's outputs: --html page, --junit XML, JSON (with provenance and, when known, the program
    spec) or table."""
    from eagle3_check.jobs.check.prompt_set import format_table

    cfg, report, health = ctx.cfg, checked.report, checked.health
    changed = files_changed(ctx, report.info)
    if cfg.junit:
        from eagle3_check.report.check_junit import check_suite, write_check_junit

        write_check_junit(cfg.junit, [check_suite(report), *changed_suite(changed)])
    if cfg.html:
        from eagle3_check.report.html_page import write_html
        from eagle3_check.report.html_report import check_html

        write_html(cfg.html, check_html(report.to_json(), health.to_json()))
    if cfg.json:
        from eagle3_check.program.contract import read_metadata
        from eagle3_check.report.provenance import jsonable

        if checked.program is not None:
            report.info["program"] = jsonable(read_metadata(checked.program.metadata()))  # the program spec
        prov = report_provenance(cfg, checked.fixture, ctx.options, records=ctx.hashed())  # the target hashed once
        doc = {**report.to_json(), "draft_health": health.to_json(), "provenance": prov}
        print(json.dumps({**doc, "passed": doc["passed"] and not changed}, indent=2))
    else:
        print(format_table(report))
        print("\n".join(health.lines()))
        if cfg.html:
            print(f"html: {cfg.html}")
        if checked.shrunk_lines:
            print("\n".join(checked.shrunk_lines))
    return stopped(report) or (0 if report.passed and not health.flags and not changed else 1)


def files_changed(ctx, info: dict) -> list[str]:
    """The files the check reads that changed since it started (jobs/common/watch.py), named in `info`
    and on stderr; [] when none did (or nothing was watched)."""
    import sys

    watch = getattr(ctx, "watch", None)
    changed = watch.changed() if watch is not None else []
    if changed:
        from eagle3_check.jobs.common.watch import fail_line

        info["files_changed"] = changed
        print(fail_line(changed), file=sys.stderr)
    return changed


def changed_suite(changed: list[str]) -> list:
    """A JUnit testsuite with the failing case `files-unchanged` when files changed, else none."""
    if not changed:
        return []
    from eagle3_check.report.junit import JUnitCase, JUnitSuite

    return [JUnitSuite("files read by the check", [JUnitCase("files-unchanged", "fail", "changed: " + "; ".join(
        changed[:5]), details="\n".join(changed))])]


def stopped(*reports) -> int:
    """130 when Ctrl-C stopped a report (written with what was judged, runners/interrupt.py), else 0."""
    import sys

    lines = [r.interrupted for r in reports if getattr(r, "interrupted", None)]
    if lines:
        print(f"interrupted: {lines[0]}", file=sys.stderr)
    return 130 if lines else 0


def list_main(cfg) -> int:
    from eagle3_check.suites.listing import format_list, list_suites

    print(json.dumps(list_suites(), indent=2) if cfg.json else format_list())
    return 0


def suite_main(ctx) -> int:
    """`check --suite NAME`: one report per fixture (or the given program), printed."""
    from eagle3_check.jobs.suites.job import run_suites
    from eagle3_check.jobs.suites.report import format_suite_table

    cfg = ctx.cfg
    shrunk: list[str] = []
    reports = run_suites(ctx, bars(cfg), shrunk_lines=shrunk)
    extra: dict = {}
    changed = files_changed(ctx, extra)
    passed = all(r.passed for r in reports) and not changed
    write_suites_junit(cfg, reports, changed_suite(changed))
    if cfg.json:
        print(json.dumps({"passed": passed, "reports": [r.to_json() for r in reports], **extra,
                          "provenance": report_provenance(ctx.cfg, cfg.fixture)}, indent=2))
    else:
        print("\n\n".join(f"== {r.info.get('fixture') or r.info.get('pte') or r.info.get('target')}\n"
                           + format_suite_table(r) for r in reports))
        if shrunk:
            print("\n".join(shrunk))
    return stopped(*reports) or (0 if passed else 1)


def write_suites_junit(cfg, reports: list, extra: list = ()) -> None:
    """`check --suite ... --junit FILE`: one testsuite per suite report (and `extra`'s)."""
    if cfg.junit:
        from eagle3_check.report.check_junit import suite_suite, write_check_junit

        write_check_junit(cfg.junit, [*(suite_suite(r) for r in reports), *extra])


def exec_main(ctx) -> int:
    """`check --runner exec:...` (prompt set) and `check --suite NAME --runner exec:...`."""

    cfg = ctx.cfg
    if cfg.suites.suite:
        from eagle3_check.jobs.suites.job import run_exec_suite
        from eagle3_check.jobs.suites.report import format_suite_table

        report, info = run_exec_suite(ctx, bars(cfg))
        extra: dict = {}
        changed = files_changed(ctx, extra)  # a binary can write what the check reads (jobs/common/watch.py)
        write_suites_junit(cfg, [report], changed_suite(changed))
        if cfg.json:
            print(json.dumps({"passed": report.passed and not changed, "reports": [report.to_json()], **extra,
                              "provenance": report_provenance(ctx.cfg, info.get("fixture"))}, indent=2))
        else:
            print(f"== {info.get('pte') or info.get('fixture')} through {cfg.runner}\n" + format_suite_table(report))
            if report.shrunk_lines:
                print("\n".join(report.shrunk_lines))
        return 0 if report.passed and not changed else 1
    from eagle3_check.jobs.check.binary import format_exec_table
    from eagle3_check.jobs.check.job import exec_check

    report, lines, shrunk = exec_check(ctx, bars(cfg))
    changed = files_changed(ctx, report.info)
    if cfg.junit:
        from eagle3_check.report.check_junit import exec_check_suite, write_check_junit

        write_check_junit(cfg.junit, [exec_check_suite(report), *changed_suite(changed)])
    if cfg.json:
        prov = report_provenance(ctx.cfg, ctx.setup.info.get("fixture"), ctx.options)
        data = report.to_json()
        for r in data.get("requests", []):  # the shrunk case beside its original (--shrink)
            if r.get("prompt_id") in shrunk:
                r["shrunk"] = shrunk[r["prompt_id"]]
        print(json.dumps({**data, "passed": data["passed"] and not changed, "provenance": prov}, indent=2))
    else:
        print(format_exec_table(report))
        if lines:
            print("\n".join(lines))
    return 0 if report.passed and not changed else 1


def quant_main(ctx) -> int:
    """`check --quantize`: build, quantize, judge (jobs/gate/quantized.py), print; exit 0 only if nothing failed."""
    from eagle3_check.jobs.gate.gate import DRIFT, format_table
    from eagle3_check.jobs.gate.quantized import quantized_check

    cfg = ctx.cfg
    report, spec, options = quantized_check(ctx)
    info = ctx.setup.info
    if cfg.junit:
        from eagle3_check.report.junit import write_junit

        write_junit(cfg.junit, report.junit_suites())
    if cfg.json:
        out = {**report.to_json(), "provenance": report_provenance(cfg, info.get("fixture"), options)}
        print(json.dumps(out, indent=2))
    else:
        print(format_table(report, verdict=f"CHECK --quantize {spec.short()}",
                           about=info.get("fixture") or info.get("target")))
        if report.shrunk_lines:
            print("\n".join(report.shrunk_lines))
    return 0 if report.passed and report.check(DRIFT) is not None else 1
