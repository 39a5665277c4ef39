"""`eagle3-check golden record | verify | baseline`: golden outputs and the metrics baseline."""

from __future__ import annotations

import argparse
import json
import sys

from eagle3_check.cli.common import (
    add_exact_arg,
    add_html_arg,
    add_program_args,
    add_runner_args,
    add_timeout_arg,
    bars,
    emit,
)
from eagle3_check.cli.parser import Given

HELP = """Golden outputs: record the exact tokens and stats of a configuration once, then verify
every later run against them, token for token. The deterministic metrics (forwards per
token, tau, n-alpha) are gated exactly against bench/baselines/metrics.json.

examples:
  eagle3-check golden verify                              # all of golden/, plus the metrics baseline
  eagle3-check golden verify --runner my_pkg.runners:make_runner   # gate your own runner
  eagle3-check golden record --fixture tiny-llama -k 4 --max-new-tokens 48 --only hi,count,capital,soup
  eagle3-check golden record ... --force                  # re-record (review the diff before committing)
  eagle3-check golden record --pte tiny.pte -k 4 --max-new-tokens 48 --only hi,count   # a .pte golden
  eagle3-check golden baseline                            # refresh the metrics baseline from golden/
"""

DEFAULT_MAX_NEW = 48


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("golden", help="record / verify golden outputs and the metrics baseline",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    gsub = p.add_subparsers(dest="golden_command", metavar="ACTION", required=True)

    r = gsub.add_parser("record", help="run the runner and the HF reference; write a golden file",
                        description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    r.add_argument("--prompts", default=None, help="prompt set JSON (default: the fixture's)")
    r.add_argument("--only", default=None, help="comma-separated prompt ids to keep, in this order")
    r.add_argument("--dir", default=None, help="golden directory (default: the repository's golden/)")
    r.add_argument("--force", action="store_true", help="overwrite an existing golden")
    r.add_argument("--json", action="store_true", help="print the recorded golden as JSON")
    r.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_program_args(r, why=" (goldens of a real model: --fixture smollm2-135m)")
    add_runner_args(r, max_new_default=DEFAULT_MAX_NEW)
    add_exact_arg(r, "the runner and the HF reference (a bf16 golden of identical runs; its file name ends "
                  "__exact and it verifies only with --exact)")
    r.set_defaults(func=record_main)

    for name, helptext in (("verify", "re-run goldens; exact token compare and the metrics gate"),
                           ("baseline", "write the metrics baseline entries of goldens (refresh)")):
        v = gsub.add_parser(name, help=helptext, description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
        v.add_argument("goldens", nargs="*", help="golden files or directories (default: golden/)")
        v.add_argument("--baseline", default=None, help="metrics baseline JSON (default: bench/baselines/metrics.json)")
        v.add_argument("--pte", default=None, metavar="FILE",
                       help="the .pte export to run backend-pte goldens on (skipped without it)")
        v.add_argument("--data-path", default=None, metavar="FILE.ptd", help="the .pte's external data file")
        v.add_argument("--threads", type=int, default=None, metavar="N",
                       help="CPU torch threads (default 1, or OMP_NUM_THREADS when set), as `check`")
        if name == "verify":
            v.add_argument("--aoti", default=None, metavar="FILE.pt2",
                           help="an AOTInductor package (`export --aoti`) to run its fixture's goldens on")
            v.add_argument("--device", default="cpu", action=Given,
                           help="with --aoti: the package's own device (cuda:N picks the GPU; cpu for a CPU package)")
            v.add_argument("--no-baseline", action="store_true", help="compare tokens only")
            v.add_argument("--runner", default="reference", metavar="MODULE:FACTORY",
                           help="the runner to verify (a plug-in factory, see `check --runner`, or exec:PATH, "
                           "a runner binary, with --pte); default reference")
            add_timeout_arg(v)
            add_exact_arg(v, "every golden's program and the runner (goldens recorded with --exact only)")
            v.add_argument("--json", action="store_true", help="print the outcome as JSON")
            add_html_arg(v)
            from eagle3_check.cli.shrink_flags import add_shrink_args

            add_shrink_args(v)
        v.add_argument("--no-progress", action="store_true", help="no progress bar")
        v.set_defaults(func=verify_main if name == "verify" else baseline_main)


def draft_tie_lines(golden) -> list[str]:
    """What a recorded golden's acceptance hangs on: its prompts with draft near-ties (acceptance may
    differ on another program of the same spec, tokens never), or that draft margins were not measured."""
    from eagle3_check.jobs.golden.draft_margins import describe

    if any(p.draft_near_ties is None for p in golden.prompts):
        return [f"note: {describe(None)}: acceptance is exact on this program alone"]
    return [f"note: '{p.prompt_id}': acceptance hangs on a draft near-tie ({describe(p.draft_near_ties)}): "
            "on another program of this spec it is a note, tokens exact" for p in golden.prompts if p.draft_near_ties]


def record_main(cfg) -> int:
    from eagle3_check.jobs.common.context import CheckContext
    from eagle3_check.jobs.golden.job import record
    from eagle3_check.table import format_rows

    ctx = CheckContext(cfg)
    golden, written = record(ctx, bars(cfg))
    if cfg.json:
        print(json.dumps(golden.to_json(), indent=1))
        return 0
    print(f"wrote {written}")
    print(f"tie rule: {ctx.tie_rule.source}")  # as check's report: the constants, a calibration or exact mode
    rows = [("prompt", "L", "tokens", "rounds", "tau", "stop", "min margin")]
    rows += [(p.prompt_id, str(len(p.prompt_ids)), str(len(p.tokens)), str(p.rounds), f"{p.tau:.2f}",
              p.stop_reason, f"{p.min_margin:.3g}") for p in golden.prompts]
    for line in format_rows(rows, align=("left", "right", "right", "right", "right", "left", "left")):
        print("  " + line)
    for line in draft_tie_lines(golden):
        print(line)
    print(f"next: `eagle3-check golden baseline {written}` to refresh its metrics baseline entry")
    return 0


def verify_main(cfg) -> int:
    """Parse's Config -> golden verify through its runner (jobs/golden/outcomes.py) -> the one printer."""
    from eagle3_check.jobs.common.context import CheckContext
    from eagle3_check.jobs.common.watch import FileWatch, read_files
    from eagle3_check.jobs.golden.outcomes import verify_job

    watch = FileWatch(read_files(cfg))  # the goldens and what they name, before the runner starts
    ctx = CheckContext(cfg)
    ctx.watch = watch
    return emit(cfg, verify_job(ctx, bars(cfg)))


def baseline_main(cfg) -> int:
    from eagle3_check.jobs.golden.job import refresh_baseline

    outcome, entries, path = refresh_baseline(cfg, bars(cfg, disable=cfg.no_progress))
    if path is None:
        print(outcome.format())
        print("error: the goldens do not verify; a baseline is only written for verified goldens", file=sys.stderr)
        return 1
    for stem, why in outcome.skipped.items():
        print(f"skipped {stem}: {why}")
    print(f"wrote {len(entries)} entr{'y' if len(entries) == 1 else 'ies'} to {path}")
    for stem, m in entries.items():
        alpha = " ".join(f"{a:.2f}" for a in m.n_alpha)
        print(f"  {stem}: tau {m.tau:.3f}  target/token {m.target_per_token:.3f}  "
              f"draft/token {m.draft_per_token:.3f}  n-alpha [{alpha}]")
    return 0
