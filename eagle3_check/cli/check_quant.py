"""`eagle3-check check --quantize SCHEME`: the gate's quantized checks in process, no `.pte`.

The fixture's (or --target/--draft's) program is built twice on the eager backend: one copy
quantized (`program/quantize.py`, as `export --quantize` would), the other its full-precision
twin. The quantized copy then goes through the gate's request checks (`gating/gate.py`
`request_checks`): runner vs self reference (lossless), and the quantization drift of its greedy
tokens from the full-precision HF target (agreement, ranks at the divergences, tau against the
twin), judged by the same thresholds and printed with the same lines as `gate --pte`'s drift
check. A user measures drift in minutes instead of after a long export.
"""

from __future__ import annotations

import argparse
import json

from eagle3_check.cli.common import build_program, options_from_args, report_provenance


def add_drift_args(p: argparse.ArgumentParser, quantize: bool = False) -> None:
    """The drift thresholds (gate, check --quantize); with `quantize`, the in-process quantization too."""
    from eagle3_check.gating.drift import (
        DEFAULT_FAR_RANK,
        DEFAULT_MAX_FAR_SHARE,
        DEFAULT_MAX_MEAN_GAP,
        DEFAULT_MAX_TAU_DROP,
        DEFAULT_MIN_AGREEMENT,
    )

    g = p.add_argument_group("quantization drift (quantized programs; defaults measured: docs/quantization.md)")
    if quantize:
        g.add_argument("--quantize", default=None, choices=["int8-weight", "int4-weight"],
                       help="quantize the program in process (int8-weight or int4-weight) and run the gate's "
                       "quantized checks on it: lossless vs its own greedy decoding, drift from full precision")
        g.add_argument("--group-size", type=int, default=None, metavar="N",
                       help="--quantize: input columns per scale (int4-weight default 32; int8-weight: per channel)")
        g.add_argument("--quantize-draft", action="store_true", help="--quantize the draft's linear layers too")
    g.add_argument("--min-agreement", type=float, default=None, metavar="SHARE",
                   help="least share of the program's greedy tokens that must be the full-precision HF argmax, "
                   f"teacher-forced (default {DEFAULT_MIN_AGREEMENT:g})")
    g.add_argument("--max-tau-drop", type=float, default=None, metavar="TAU",
                   help=f"largest tau drop below the full-precision program's (default {DEFAULT_MAX_TAU_DROP:g})")
    g.add_argument("--far-rank", type=int, default=None, metavar="R",
                   help="a divergence is far when the program's token ranks past R (rank > R) under the full-precision "
                   f"target (default {DEFAULT_FAR_RANK})")
    g.add_argument("--max-far-share", type=float, default=None, metavar="SHARE",
                   help=f"largest share of positions that diverge far (default {DEFAULT_MAX_FAR_SHARE:g})")
    g.add_argument("--max-mean-gap", type=float, default=None, metavar="LOGITS",
                   help="largest mean, over positions, of HF's top-1 logit minus the program's token's "
                   f"(default {DEFAULT_MAX_MEAN_GAP:g})")


def drift_thresholds(args: argparse.Namespace):
    """`DriftThresholds` from the flags, each checked: a one-line error names a value out of range."""
    from eagle3_check.errors import OptionError
    from eagle3_check.gating.drift import DriftThresholds

    t = DriftThresholds()
    for flag, attr, lo, hi, what in (("--min-agreement", "min_agreement", 0.0, 1.0, "a share in [0, 1]"),
                                     ("--max-tau-drop", "max_tau_drop", 0.0, 8.0, "a tau in [0, 8]"),
                                     ("--far-rank", "far_rank", 1, 10**9, "a rank >= 1"),
                                     ("--max-far-share", "max_far_share", 0.0, 1.0, "a share in [0, 1]"),
                                     ("--max-mean-gap", "max_mean_gap", 0.0, 1e6, "logits >= 0")):
        value = getattr(args, attr, None)
        if value is None:
            continue
        if not lo <= value <= hi:
            raise OptionError(f"{flag} {value:g}", what, f"pass e.g. {flag} {getattr(t, attr):g}")
        setattr(t, attr, value)
    return t


def refuse_with_quantize(args: argparse.Namespace) -> None:
    """The check flags `--quantize` cannot honour: a one-line error each, never a dropped flag."""
    from eagle3_check.errors import OptionError

    given = [("--runner " + str(args.runner), str(args.runner).startswith("exec:"),
              "drop --runner (a runner binary needs a .pte: export --quantize, then gate it)"),
             ("--pte", bool(getattr(args, "pte", None)), "quantize its source with export --quantize, then gate it"),
             ("--suite", bool(args.suite), "run check --suite edge --fixture tiny-llama-int4 --reference self"),
             ("--workers", args.workers > 1, "drop --workers"),
             ("--reference self", args.reference == "self", "drop --reference (drift needs the HF reference)"),
             ("--dtype bfloat16", args.dtype != "float32", "drop --dtype (weight-only quantization computes in fp32)"),
             ("--device " + str(args.device), args.device != "cpu", "pass --device cpu"),
             ("--compile", getattr(args, "compile", None) not in (None, "off"), "drop --compile"),
             ("--expect-tau", args.expect_tau is not None, "drop --expect-tau (drift compares tau with full precision)"),
             ("--html", bool(getattr(args, "html", None)), "drop --html (save --json, or --junit)")]
    for flag, on, fix in given:
        if on:
            raise OptionError(f"{flag} with --quantize {args.quantize}", "a fixture or --target/--draft, eager, "
                              "float32 CPU, the HF reference", fix)


def quant_main(args: argparse.Namespace, runner, runner_name: str) -> int:
    """`check --quantize`: build, quantize, judge (gating/gate.py), print; exit 0 only if nothing failed."""
    from eagle3_check.cli.check import prompts_for, shard_of
    from eagle3_check.cli.exec_cmd import time_limited
    from eagle3_check.errors import OptionError
    from eagle3_check.gating.gate import DRIFT, GateInputs, format_table, request_checks
    from eagle3_check.gating.gate_model import GateReport
    from eagle3_check.program.quantize import make_spec
    from eagle3_check.reference.hf import HFReference
    from eagle3_check.reference.tolerance import default_budget, tolerance_for

    refuse_with_quantize(args)
    runner = time_limited(args, runner)  # --request-timeout: a hang fails its request
    spec = make_spec(args.quantize, args.group_size, args.quantize_draft)  # unknown scheme, bad group: one line
    thresholds = drift_thresholds(args)
    full = build_program(args)
    if getattr(full.program, "quantized_layers", None):
        raise OptionError(f"--quantize with --fixture {args.fixture}", "a full-precision fixture (this variant is "
                          "quantized already)", "drop --quantize (check --reference self), or pass its base fixture")
    quant = build_program(args)
    quant.program.quantize(spec)  # a group size that divides no layer: a one-line error naming the layer
    prompts = shard_of(args, prompts_for(args, full))
    inputs = GateInputs(pte=None, tokenizer=full.tokenizer, target_dir=full.target_dir, prompts=prompts,
                        options=options_from_args(args), tolerance=tolerance_for("float32"),
                        tie_budget=default_budget("float32"), suite=None, drift=thresholds,
                        hf_reference=HFReference(full.target_dir), fixture=full.info.get("fixture"),
                        plugin=None if runner_name == "reference" else runner,
                        full_precision=lambda md: full.program)
    report = GateReport(info={**full.info, "quantization": spec.short(), "runner": runner_name})
    report.checks, report.tau = request_checks(quant.program, inputs, inputs.hf_reference)
    label = f"CHECK --quantize {spec.short()}"
    if args.junit:
        from eagle3_check.report.junit import write_junit

        write_junit(args.junit, report.junit_suites())
    if args.json:
        out = {**report.to_json(), "provenance": report_provenance(args, full.info.get("fixture"), inputs.options)}
        print(json.dumps(out, indent=2))
    else:
        print(format_table(report, verdict=label, about=full.info.get("fixture") or full.info.get("target")))
    drift = report.check(DRIFT)
    return 0 if report.passed and drift is not None else 1

