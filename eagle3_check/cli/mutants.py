"""`eagle3-check mutants`: seeded mutants of the reference runner through check and the probes."""

from __future__ import annotations

import argparse
import json

from eagle3_check.cli.common import bars

HELP = """Mutation testing of the harness itself: run every seeded mutant of the reference runner
(each loaded as a plug-in runner, like --runner) through `check` on the embedded fixture,
the edge suites (`check --suite`, each up to its first failing case) and the toy kill probes,
and print a kill table. Every mutant runs on both data placements of the one runner loop:
host lists, and device buffers over graph-owned outputs (emulated CUDA graphs on CPU, real
ones with --device cuda). Exit code 0 only if every mutant is killed on every placement and
the reference runner passes every probe; a survivor names the case the suites lack.

examples:
  eagle3-check mutants                  # the kill table, fp32 (`make mutants` runs fp32 and bf16)
  eagle3-check mutants --dtype bfloat16 # the eager program and the HF reference in bf16
  eagle3-check mutants --device cuda --dtype bfloat16   # on a GPU (the toy probes stay on CPU)
  eagle3-check mutants --placement device               # one placement only
  eagle3-check mutants --fixture tiny-gemma4            # check and the suites on another fixture
  eagle3-check mutants --strict-suites  # also fail unless check + the edge suites alone kill all
  eagle3-check mutants --all            # every probe for every mutant (no stop at the first kill: the slowest)
  eagle3-check mutants --first-kill     # stop probing a mutant at its first kill (faster)
  eagle3-check mutants --no-suites      # toy probes and check only (seconds)
  eagle3-check mutants --only bos_twice --json
  eagle3-check check --runner eagle3_check.mutants:bos_twice   # one mutant through check
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("mutants", help="mutation testing: seeded runner bugs must all be caught",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--only", nargs="+", default=None, metavar="NAME", help="run only these mutants")
    p.add_argument("--first-kill", action="store_true", help="stop probing a mutant once it is killed")
    p.add_argument("--all", action="store_true",
                   help="every probe for every mutant (default: per mutant, the first kill among the "
                   "toy probes and the first among check and the edge suites)")
    p.add_argument("--no-suites", action="store_true",
                   help="toy probes and check only, not the edge suites (seconds; what `make check` runs)")
    p.add_argument("--dtype", choices=["float32", "bfloat16"], default="float32",
                   help="dtype of the eager fixture program and the HF reference (check and the suites)")
    p.add_argument("--device", default="cpu",
                   help="device of the eager fixture program and the HF reference, e.g. cuda (default cpu)")
    p.add_argument("--fixture", default=None, metavar="NAME",
                   help="embedded fixture for check and the suites (default: the default fixture; "
                   "`eagle3-check fixtures list`)")
    p.add_argument("--placement", nargs="+", choices=["host", "device"], default=["host", "device"],
                   help="data placements of the runner loop to run each mutant on (default both)")
    p.add_argument("--strict-suites", action="store_true",
                   help="exit 0 only if check and the edge suites alone kill every mutant on every placement "
                   "(the toy probes do not depend on --dtype/--device; what `make mutants` asks)")
    p.add_argument("--json", action="store_true", help="print the kill report as JSON")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.set_defaults(func=main)


def main(cfg) -> int:
    from eagle3_check.mutants.command import kill_table
    from eagle3_check.mutants.kill import format_kill_table

    report = kill_table(cfg, bars(cfg))
    print(json.dumps(report.to_json(), indent=2) if cfg.json else format_kill_table(report))
    if cfg.mutants.strict_suites and report.ok and not report.suites_ok and not cfg.json:
        print("--strict-suites: check and the edge suites alone do not kill every mutant (see above)")
    return 0 if report.ok and (report.suites_ok or not cfg.mutants.strict_suites) else 1
