"""`gate --pte FILE` from a `Config`: the gate's inputs (jobs/gate/model.GateInputs) and its run.

The reference target, tokenizer and prompts come from --target/--tokenizer/--prompts or from
the fixture (--fixture, else the one the export sidecar names); a quantized `.pte` gets the
drift thresholds and a builder of its full-precision twin; `--runner` gates a plug-in or a
runner binary instead of the reference runner; `--all-k` every K of the program's range.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_check.jobs.common.context import CheckContext, no_prompts
from eagle3_check.jobs.common.world import load_tokenizer
from eagle3_check.program.sidecar import reference_for_pte, sidecar_source


def run_gate(ctx: CheckContext, on_check=None, on_step=None):
    """(GateReport, GateInputs, fixture name or None) of the .pte the context's config names."""
    from eagle3_check.jobs.gate.gate import run_gate as run

    try:
        inputs, fixture, target_dir, resolved = gate_inputs(ctx)
        inputs.on_step = on_step
        program = None  # a .pte: the gate loads it (its load is a check)
        if ctx.cfg.aoti:  # an AOTI package, as the context loads it (jobs/common/aoti.py), HF on its device
            program, inputs.hf_reference = ctx.program, ctx.hf_reference()
        report = run(inputs, program=program, on_check=on_check)
    finally:
        ctx.close()  # an isolated plug-in's process
    from eagle3_check.runners.isolate.policy import isolation_info

    if ctx.cfg.runner and (ctx.isolated or ctx.capabilities.program_file):  # a plug-in's child, or a binary
        info = isolation_info(ctx.runner)
        if info:
            report.info["isolation"] = info
    report.info.update({"fixture": fixture} if fixture else {"target": str(target_dir)},
                       run_options=resolved.to_json())
    return report, inputs, fixture


def gate_inputs(ctx: CheckContext):
    """(GateInputs, fixture name or None, target dir, ResolvedOptions). The gate loads the .pte
    itself (its load is a check): the context gives the run options and the runner."""
    from eagle3_check.fixtures.registry import load_prompts
    from eagle3_check.jobs.gate.gate import TAU_TOLERANCE, GateInputs

    cfg = ctx.cfg
    file = cfg.pte or cfg.aoti  # the program's file: its sidecar names the reference
    fx, target_dir, tok_path = reference_for_pte(file, cfg.fixture, cfg.target, cfg.tokenizer)
    if cfg.prompts:
        prompts = load_prompts(cfg.prompts)
    elif fx is None:
        raise no_prompts()
    else:
        prompts = fx.prompts()
    resolved = ctx.resolved
    inputs = GateInputs(
        pte=Path(cfg.pte) if cfg.pte else None, tokenizer=load_tokenizer(tok_path), target_dir=target_dir, prompts=prompts,
        options=resolved.options, golden=Path(cfg.gate.golden) if cfg.gate.golden else None,
        baseline=Path(cfg.gate.baseline) if cfg.gate.baseline else None, fixture=fx.name if fx else None,
        tau_tolerance=TAU_TOLERANCE if cfg.gate.tau_tolerance is None else cfg.gate.tau_tolerance,
        data_path=Path(cfg.data_path) if cfg.data_path else None,
    )
    if cfg.tie_budget is not None:  # checked in [0, 1] when the config was built
        inputs.tie_budget = cfg.tie_budget
    inputs.suite = None if cfg.suites.suite == "none" else cfg.suites.suite
    quantized = sidecar_source(file).get("quantization")
    if fx is not None and quantized and fx.quantization is None:  # no variant has it: the fixture's fp goldens do not apply
        inputs.fixture = f"{fx.name} quantized ({quantized})"
    drift_options(cfg, inputs, fx)
    runs_file = ctx.capabilities.program_file  # a runner of its own .pte (a binary): the gate asks it its checks
    if cfg.runner and not runs_file:  # in its own process (runners/isolate/), else as loaded (runners/plugin.py)
        inputs.plugin = ctx.runner if ctx.isolated else ctx.loaded_runner
    elif cfg.runner:
        from eagle3_check.jobs.gate.binary import BinaryGate

        inputs.runner = BinaryGate(ctx.runner)  # with --request-timeout as its timeout
    if cfg.runner_profile and not runs_file and inputs.plugin is None:
        inputs.plugin = ctx.runner  # ours, running by the given profile (runners/profiles.py)
    if cfg.gate.all_k and cfg.aoti:
        from eagle3_check.program.contract import read_metadata

        lo, hi = read_metadata(ctx.program.metadata()).k_range
        inputs.ks = list(range(lo, hi + 1))
    elif cfg.gate.all_k:
        inputs.ks = all_k(cfg.pte, cfg.data_path)
    inputs.calibrate = calibrator(inputs, ctx.log)
    return inputs, (fx.name if fx else None), target_dir, resolved


def calibrator(inputs, log):
    """program -> the calibration of a `.pte`'s target where `check --pte` would calibrate it (the same
    function, cache and `tie rule` source: jobs/common/calibrate.py), else None; None without a target."""
    if inputs.target_dir is None:
        return None

    def calibrate(program):
        from eagle3_check.jobs.common.calibrate import pte_calibration, pte_wants_calibration

        if not pte_wants_calibration(program, inputs.fixture):
            return None
        return pte_calibration(program, inputs.target_dir, inputs.tokenizer, [p.text for p in inputs.prompts],
                               inputs.options, log)

    return calibrate


def drift_options(cfg, inputs, fx) -> None:
    """The drift thresholds, and how to build the full-precision twin of a quantized .pte: the
    fixture's (a variant's base) or the sidecar's --target/--draft, in the .pte's own shape."""
    inputs.drift = cfg.drift.thresholds()
    source = sidecar_source(cfg.pte or cfg.aoti)
    if fx is not None and not cfg.target:
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


def all_k(pte: str, data_path: str | None) -> list[int] | None:
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
