"""`eagle3-check calibrate`: measure the tie tolerance and budget on your own target (docs/calibration.md)."""

from __future__ import annotations

import argparse
import json

from eagle3_check.cli.common import add_program_args, add_runner_args

HELP = """Measure how far a correct runner's target logits (verify windows of K + 1 rows and one-row
decodes, on the program's own kernels) move against the HF reference on your target, dtype and
device, and store the record in the cache (keyed by the target's files, the dtype, the device kind
and the kernels). `check --target DIR --dtype bfloat16` reads it back, and measures it first when
none is stored: the tie tolerance is 2 x the largest shift measured, the tie budget a binomial
bound on the measured flip rate. The embedded and real fixtures keep the constants measured on
them (docs/calibration.md); float32 needs no calibration (no correct runner flipped a token).

examples:
  eagle3-check calibrate --target T --draft D --prompts heldout.json --dtype bfloat16 --device cuda
  eagle3-check calibrate --fixture tiny-llama --dtype bfloat16 --json
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("calibrate", help="measure the tie tolerance and budget on your own target",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_program_args(p)
    add_runner_args(p, max_new_default=64)
    p.add_argument("--prompts", default=None, help='prompt set JSON {"prompts": [{"id", "text"}]} (required with '
                   "--target; the first 16 are measured)")
    p.add_argument("--json", action="store_true", help="print the calibration record as JSON")
    p.set_defaults(func=main)


def main(cfg) -> int:
    from eagle3_check.jobs.common.calibrate import measure
    from eagle3_check.jobs.common.context import CheckContext

    cal = measure(CheckContext(cfg))
    if cfg.json:
        print(json.dumps(cal.to_json(), indent=1))
        return 0
    tol = cal.tolerance()
    print(f"calibration {cal.key.stem}: {cal.rows} positions over {cal.prompts} prompts, K {cal.k}, "
          f"{cal.seconds:.0f} s")
    print(f"margin shift (verify and decode against the HF reference): max {cal.max_shift:.4g}, "
          f"p99 {cal.p99_shift:.4g} logits")
    print(f"flips: {cal.flips} of {cal.rows} rows (largest rank {cal.max_flip_rank}, gap {cal.max_flip_gap:.4g})")
    print(f"tie tolerance: {tol.describe()}")
    budget = cal.budget()
    print(f"tie budget: {budget.describe(1000)}; on 1000 positions")
    return 0
