"""`check --quantize SCHEME` on a `CheckContext`: the gate's quantized checks in process, no `.pte`.

The fixture's (or --target/--draft's) program is built twice on the eager backend: one copy
quantized (`program/quantize.py`, as `export --quantize` would), the other its full-precision
twin. The quantized copy then goes through the gate's request checks (`jobs/gate/gate.py`
`request_checks`): runner vs self reference (lossless), and the quantization drift of its greedy
tokens from the full-precision HF target (agreement, ranks at the divergences, tau against the
twin), judged by the same thresholds and printed with the same lines as `gate --pte`'s drift
check. A user measures drift in minutes instead of after a long export.
"""

from __future__ import annotations

from eagle3_check.errors import OptionError
from eagle3_check.jobs.common.context import CheckContext
from eagle3_check.jobs.common.world import build_program


def refuse_with_quantize(cfg) -> None:
    """The check options `--quantize` cannot honour: a one-line error each, never a dropped option."""
    from eagle3_check.runners.seam import kind_of

    given = [("--runner " + str(cfg.runner), kind_of(cfg.runner).program_file,
              "drop --runner (a runner binary needs a .pte: export --quantize, then gate it)"),
             ("--pte", bool(cfg.pte), "quantize its source with export --quantize, then gate it"),
             ("--suite", bool(cfg.suites.suite), "run check --suite edge --fixture tiny-llama-int4 --reference self"),
             ("--workers", cfg.check.workers > 1, "drop --workers"),
             ("--reference self", cfg.reference == "self", "drop --reference (drift needs the HF reference)"),
             ("--dtype bfloat16", cfg.dtype != "float32", "drop --dtype (weight-only quantization computes in fp32)"),
             ("--device " + str(cfg.device), cfg.device != "cpu", "pass --device cpu"),
             ("--compile", cfg.compile not in (None, "off"), "drop --compile"),
             ("--expect-tau", cfg.check.expect_tau is not None, "drop --expect-tau (drift compares tau with full precision)"),
             ("--html", bool(cfg.html), "drop --html (save --json, or --junit)")]
    for flag, on, fix in given:
        if on:
            raise OptionError(f"{flag} with --quantize {cfg.check.quantize}", "a fixture or --target/--draft, eager, "
                              "float32 CPU, the HF reference", fix)


def quantized_check(ctx: CheckContext):
    """(GateReport, its fixture or target, the run options): build, quantize, judge (jobs/gate/gate.py)."""
    from eagle3_check.jobs.gate.gate import GateInputs, request_checks
    from eagle3_check.jobs.gate.model import GateReport
    from eagle3_check.judge.hf import HFReference
    from eagle3_check.program.quantize import make_spec

    cfg = ctx.cfg
    refuse_with_quantize(cfg)
    runner = ctx.runner  # --request-timeout: a hang fails its request
    spec = make_spec(cfg.check.quantize, cfg.check.group_size, cfg.check.quantize_draft)  # unknown scheme, bad group: one line
    thresholds = cfg.drift.thresholds()
    full = ctx.setup
    if getattr(full.program, "quantized_layers", None):
        raise OptionError(f"--quantize with --fixture {cfg.fixture}", "a full-precision fixture (this variant is "
                          "quantized already)", "drop --quantize (check --reference self), or pass its base fixture")
    quant = build_program(cfg)
    quant.program.quantize(spec)  # a group size that divides no layer: a one-line error naming the layer
    from eagle3_check.jobs.shrink_route import given_prompts

    prompts = given_prompts(cfg, full.tokenizer) or ctx.prompts()  # --prompt-ids, --prompt, --repro
    inputs = GateInputs(pte=None, tokenizer=full.tokenizer, target_dir=full.target_dir, prompts=prompts,
                        options=ctx.options, tolerance=ctx.tolerance,  # float32: refused otherwise, above
                        tie_budget=ctx.tie_budget, suite=None, drift=thresholds,
                        hf_reference=HFReference(full.target_dir), fixture=full.info.get("fixture"),
                        plugin=None if ctx.runner_name == "reference" else runner,
                        full_precision=lambda md: full.program)
    report = GateReport(info={**full.info, "quantization": spec.short(), "runner": ctx.runner_name})
    try:
        report.checks, report.tau = request_checks(quant.program, inputs, inputs.hf_reference)
        if cfg.shrink.enabled:  # the lossless check's failing requests, shrunk on the quantized program (against its self reference)
            from eagle3_check.jobs.gate.shrink_route import shrink_gate_and_write
            from eagle3_check.jobs.shrink_route import program_files

            report.shrunk_lines = shrink_gate_and_write(cfg, report, inputs, quant.program, program_files(cfg, full),
                                                        drop=("reference",))  # --quantize judges against self itself
    finally:
        ctx.close()  # an isolated plug-in's process
    return report, spec, inputs.options


class QuantOutcome:
    """`check --quantize`'s outcome (jobs.common.outcomes.Outcome): the gate's report of its quantized checks,
    its JUnit as the gate's, no HTML page; exit 0 only if nothing failed and the drift check ran."""

    json_indent = 2
    junit_name, junit_prefix = "eagle3-check gate", "gate"  # report/junit.py's defaults: the gate's

    def __init__(self, ctx: CheckContext):
        self.ctx, self.cfg = ctx, ctx.cfg
        self.report, self.spec, self.options = quantized_check(ctx)

    def junit_suites(self) -> list:
        return self.report.junit_suites()

    def html_page(self) -> None:
        return None

    def to_json(self) -> dict:
        from eagle3_check.jobs.common.provenance import report_provenance

        fixture = self.ctx.setup.info.get("fixture")
        return {**self.report.to_json(), "provenance": report_provenance(self.cfg, fixture, self.options)}

    def lines(self) -> list[str]:
        from eagle3_check.jobs.gate.gate import format_table

        info = self.ctx.setup.info
        out = [format_table(self.report, verdict=f"CHECK --quantize {self.spec.short()}",
                            about=info.get("fixture") or info.get("target"))]
        return out + (["\n".join(self.report.shrunk_lines)] if self.report.shrunk_lines else [])

    def exit_code(self) -> int:
        from eagle3_check.jobs.gate.gate import DRIFT

        return 0 if self.report.passed and self.report.check(DRIFT) is not None else 1
