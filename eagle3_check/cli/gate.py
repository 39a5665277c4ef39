"""`eagle3-check gate --pte FILE`: every check a new export must pass, one verdict, CI reports."""

from __future__ import annotations

import argparse
import sys

from eagle3_check.cli.common import (
    add_drift_args,
    add_html_arg,
    add_runner_args,
    add_timeout_arg,
    emit,
)
from eagle3_check.cli.parser import Given

HELP = """Gate a new .pte before it ships: load, metadata (keys, ranges, vocab sizes vs tokenizer
and target), edge suites, runner vs self reference and vs HF reference (bit-identical,
with forensics), goldens and a tau baseline when given. Prints a verdict table, writes a
JSON report (--report) and JUnit XML (--junit); exit code 0 only if nothing failed.

The HF reference target, tokenizer and prompt set come from --target/--tokenizer/--prompts,
or from a fixture (--fixture; default: the one recorded at export, else tiny-llama).

examples:
  eagle3-check gate --pte tiny.pte --junit gate.xml
  eagle3-check gate --pte model.pte --target T --tokenizer T/tokenizer.json --prompts p.json
  eagle3-check gate --pte tiny.pte --baseline old-report.json --tau-tolerance 0.05
  eagle3-check gate --pte tiny.pte --golden golden/ --baseline bench/baselines/metrics.json
  eagle3-check gate --aoti tiny.pt2                 # an AOTInductor package (`export --aoti`), on its GPU
  eagle3-check gate --pte q4.pte --max-mean-gap 0.5 --max-far-share 0.01   # a quantized export: tighter drift bounds
                                                  # (docs/quantization.md; check --quantize measures without an export)
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gate", help="gate an exported .pte: metadata, suites, references, CI reports",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--pte", metavar="FILE", help="the exported program")
    which.add_argument("--aoti", metavar="FILE.pt2", help="an AOTInductor package (`export --aoti`) instead")
    p.add_argument("--device", default="cpu", action=Given,
                   help="with --aoti: the package's own device (cuda:N picks the GPU; cpu for a CPU package)")
    p.add_argument("--data-path", default=None, metavar="FILE.ptd",
                   help="the program's external data file (weights exported outside the .pte)")
    p.add_argument("--fixture", default=None, help="reference fixture (target, tokenizer, prompts)")
    p.add_argument("--target", default=None, help="HF reference target directory")
    p.add_argument("--tokenizer", default=None, help="tokenizer.json (default: the fixture's or the target's)")
    p.add_argument("--prompts", default=None, help="prompt set JSON (default: the fixture's)")
    p.add_argument("--all-k", action="store_true", help="run every K in the exported verify range")
    p.add_argument("--suite", default="edge", help="edge suite (or case) to run; 'none' to skip (default edge)")
    p.add_argument("--golden", default=None, metavar="FILE", help="golden file to verify")
    p.add_argument("--baseline", default=None, metavar="FILE",
                   help="bench/baselines/metrics.json (exact metrics gate over the --golden runs), or any JSON "
                   "with a baseline 'tau' (e.g. a report; --tau-tolerance)")
    p.add_argument("--tau-tolerance", type=float, default=None, help="allowed tau drop below the baseline (0.05)")
    p.add_argument("--tie-budget", type=float, default=None, metavar="SHARE",
                   help="ties allowed per check, a share of judged positions (default: the program's dtype's, "
                   "read from the .pte: float32 0, bfloat16 see judge/tolerance.py TIE_BUDGET)")
    p.add_argument("--report", default="gate-report.json", metavar="FILE", help="JSON report path")
    p.add_argument("--junit", default=None, metavar="FILE", help="also write JUnit XML here")
    add_html_arg(p)
    p.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    p.add_argument("--no-progress", action="store_true", help="no progress bars or check lines on stderr")
    p.add_argument("--runner", default=None, metavar="exec:PATH|MODULE:FACTORY",
                   help="gate a runner binary (the seed runner's flags and output), or a plug-in runner, instead "
                   "of the reference runner")
    add_timeout_arg(p)
    p.add_argument("--exact", action="store_true", help="refused: exact mode replaces aten's kernels and a .pte "
                   "runs ExecuTorch's; judge the eager program with `check --exact` (docs/exact.md)")
    add_drift_args(p)
    add_runner_args(p, max_new_default=64)
    from eagle3_check.cli.shrink_flags import add_shrink_args

    add_shrink_args(p, default_on=True)
    p.set_defaults(func=main)


def main(cfg) -> int:
    """Parse's Config -> the gate (jobs/gate/job.py) -> its outcome (jobs/gate/outcomes.py: the --report file
    written) -> the one printer (`cli.common.emit`)."""
    from eagle3_check.jobs.common.context import CheckContext
    from eagle3_check.jobs.gate.job import run_gate
    from eagle3_check.jobs.gate.outcomes import GateOutcome

    quiet = cfg.json or cfg.no_progress
    bars = StepBars(disable=quiet)

    def progress(chk):
        bars.close()
        if not quiet:
            print(f"  {chk.name}: {chk.status} ({chk.seconds:.1f} s)", file=sys.stderr)

    try:
        report, inputs, fixture = run_gate(CheckContext(cfg), on_check=progress, on_step=bars)
    finally:
        bars.close()
    return emit(cfg, GateOutcome(cfg, report, inputs, fixture))


class StepBars:
    """The gate's progress on stderr: one tqdm bar per long check (edge suites, requests, golden),
    fed `(check, done, total)` as its cases finish; a new check closes the previous bar."""

    def __init__(self, disable: bool):
        self.disable, self.name, self.bar = disable, None, None

    def __call__(self, name: str, done: int, total: int) -> None:
        from tqdm import tqdm

        if name != self.name:
            self.close()
            self.name = name
            self.bar = tqdm(total=total, desc=f"gate: {name}", unit="case", file=sys.stderr, leave=False,
                            disable=self.disable)
        self.bar.update(done - self.bar.n)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
        self.name, self.bar = None, None
