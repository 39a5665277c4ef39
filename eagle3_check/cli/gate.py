"""`eagle3-check gate --pte FILE`: every check a new export must pass, one verdict, CI reports."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from eagle3_check.atomic import check_writable, write_text_atomic
from eagle3_check.cli.check_quant import add_drift_args, drift_thresholds
from eagle3_check.cli.common import (
    add_runner_args,
    load_tokenizer,
    reference_for_pte,
    resolved_from_args,
)
from eagle3_check.cli.exec_cmd import add_timeout_arg
from eagle3_check.cli.report import add_html_arg, write_html
from eagle3_check.program.sidecar import sidecar_source

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
  eagle3-check gate --pte q4.pte --max-mean-gap 0.5 --max-far-share 0.01   # a quantized export: tighter drift bounds
                                                  # (docs/quantization.md; check --quantize measures without an export)
"""


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("gate", help="gate an exported .pte: metadata, suites, references, CI reports",
                       description=HELP, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--pte", required=True, metavar="FILE", help="the exported program")
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
                   "read from the .pte: float32 0, bfloat16 see reference/tolerance.py TIE_BUDGET)")
    p.add_argument("--report", default="gate-report.json", metavar="FILE", help="JSON report path")
    p.add_argument("--junit", default=None, metavar="FILE", help="also write JUnit XML here")
    add_html_arg(p)
    p.add_argument("--json", action="store_true", help="print the JSON report instead of the table")
    p.add_argument("--no-progress", action="store_true", help="no progress bars or check lines on stderr")
    p.add_argument("--runner", default=None, metavar="exec:PATH|MODULE:FACTORY",
                   help="gate a runner binary (the seed runner's flags and output), or a plug-in runner, instead "
                   "of the reference runner")
    add_timeout_arg(p)
    add_drift_args(p)
    add_runner_args(p, max_new_default=64)
    from eagle3_check.cli.shrink_flags import add_shrink_args

    add_shrink_args(p, default_on=True)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from eagle3_check.errors import OptionError
    from eagle3_check.fixtures.registry import load_prompts
    from eagle3_check.gating.gate import TAU_TOLERANCE, GateInputs, format_table, run_gate
    from eagle3_check.report.junit import write_junit

    check_writable(args.report, "--report")  # before the run: a missing directory must not lose it
    if args.junit:
        check_writable(args.junit, "--junit")
    fx, target_dir, tok_path = reference_for_pte(args.pte, args.fixture, args.target, args.tokenizer)
    if args.prompts:
        prompts = load_prompts(args.prompts)
    elif fx is None:
        from eagle3_check.cli.check import raise_no_prompts

        raise_no_prompts()
    else:
        prompts = fx.prompts()
    resolved = resolved_from_args(args)
    inputs = GateInputs(
        pte=Path(args.pte), tokenizer=load_tokenizer(tok_path), target_dir=target_dir, prompts=prompts,
        options=resolved.options, golden=Path(args.golden) if args.golden else None,
        baseline=Path(args.baseline) if args.baseline else None, fixture=fx.name if fx else None,
        tau_tolerance=TAU_TOLERANCE if args.tau_tolerance is None else args.tau_tolerance,
        data_path=Path(args.data_path) if args.data_path else None,
    )
    if args.tie_budget is not None:
        if not 0.0 <= args.tie_budget <= 1.0:
            raise OptionError(f"--tie-budget {args.tie_budget:g}", "a share of judged positions in [0, 1]",
                              "pass e.g. --tie-budget 0")
        inputs.tie_budget = args.tie_budget
    inputs.suite = None if args.suite == "none" else args.suite
    quantized = sidecar_source(args.pte).get("quantization")
    if fx is not None and quantized and fx.quantization is None:  # no variant has it: the fixture's fp goldens do not apply
        inputs.fixture = f"{fx.name} quantized ({quantized})"
    _drift_options(args, inputs, fx)
    if args.runner and not args.runner.startswith("exec:"):
        from eagle3_check.run.plugin import load_runner

        inputs.plugin = load_runner(args.runner)
    elif args.runner:
        from eagle3_check.binary.gate import BinaryGate

        inputs.runner = BinaryGate(_exec_runner(args))
    if args.all_k:
        inputs.ks = _all_k(args.pte, args.data_path)

    quiet = args.json or args.no_progress
    bars = StepBars(disable=quiet)
    inputs.on_step = bars

    def progress(chk):
        bars.close()
        if not quiet:
            print(f"  {chk.name}: {chk.status} ({chk.seconds:.1f} s)", file=sys.stderr)

    try:
        report = run_gate(inputs, on_check=progress)
    finally:
        bars.close()
    from eagle3_check.cli.shrink_flags import shrink_gate_and_write

    shrunk = shrink_gate_and_write(args, report, inputs)  # the failing request cases, shrunk (--no-shrink: off)
    report.info.update({"fixture": fx.name} if fx else {"target": str(target_dir)}, run_options=resolved.to_json())
    from eagle3_check.cli.common import report_provenance

    out = {**report.to_json(), "provenance": report_provenance(args, fx.name if fx else None, inputs.options)}
    write_text_atomic(args.report, json.dumps(out, indent=2) + "\n", "report")
    if args.junit:
        write_junit(args.junit, report.junit_suites())
    if args.html:
        from eagle3_check.report.html_report import gate_html

        write_html(args.html, gate_html(report.to_json()))
    if args.json:
        print(json.dumps(out, indent=2))
    else:
        print(format_table(report))
        if shrunk:
            print("\n".join(shrunk))
        print(f"report: {args.report}" + (f"   junit: {args.junit}" if args.junit else "")
              + (f"   html: {args.html}" if args.html else ""))
    return 0 if report.passed else 1


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


def _drift_options(args: argparse.Namespace, inputs, fx) -> None:
    """The drift thresholds, and how to build the full-precision twin of a quantized .pte: the
    fixture's (a variant's base) or the sidecar's --target/--draft, in the .pte's own shape."""
    inputs.drift = drift_thresholds(args)
    source = sidecar_source(args.pte)
    if fx is not None and not args.target:
        from eagle3_check.fixtures.registry import load_fixture

        base = load_fixture(fx.base) if fx.base else fx
        target, draft = base.target_dir, base.draft_dir
    elif source.get("target") and source.get("draft"):
        target, draft = Path(source["target"]), Path(source["draft"])
    else:
        inputs.full_precision_note = "the .pte's sidecar names no draft and no --fixture was given"
        return

    def full_precision(metadata: dict):
        from eagle3_check.fixtures.registry import ProgramSpec
        from eagle3_check.program.contract import read_metadata
        from eagle3_check.program.eager import EagerBackend

        md = read_metadata(metadata)
        lo, hi = md.k_range
        spec = ProgramSpec(md.max_seq_len, md.min_prefill, md.max_prefill, md.chain_len, lo + 1, hi + 1)
        return EagerBackend.from_dirs(target, draft, spec)

    inputs.full_precision = full_precision


def _exec_runner(args: argparse.Namespace):
    from eagle3_check.errors import InputError
    from eagle3_check.run.plugin import load_runner

    if not args.runner.startswith("exec:"):
        raise InputError(f"gate --runner {args.runner}", "exec:PATH (a runner binary)",
                         "drop --runner to gate with the reference runner, or pass --runner exec:PATH")
    from eagle3_check.binary.runner import request_timeout

    runner = load_runner(args.runner)
    t = request_timeout(args.runner_timeout)
    if t is not None:
        runner.timeout = t
    return runner


def _all_k(pte: str, data_path: str | None) -> list[int] | None:
    """Every K of the program's verify range; None (default K) when it cannot be read."""
    from eagle3_check.errors import Eagle3CheckError
    from eagle3_check.program.contract import read_metadata
    from eagle3_check.program.pte_backend import PteBackend
    from eagle3_check.program.pte_probe import probe_load

    if probe_load(pte, data_path=data_path):  # a .pte that aborts the runtime: the gate's load check reports it
        return None
    try:
        lo, hi = read_metadata(PteBackend(pte, data_path).metadata()).k_range
    except Eagle3CheckError:
        return None  # the gate itself reports why the program is unusable
    return list(range(lo, hi + 1))
