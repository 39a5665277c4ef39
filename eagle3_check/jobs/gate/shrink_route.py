"""`gate`'s failing cases shrunk on a Config (shrinking on unless --no-shrink; `check --quantize --shrink`
too): the edge-suite cases (jobs/gate/shrink_suites.py) and the request cases (jobs/gate/shrink.py,
a binary's: `shrink_exec_gate`, `jobs.suites.shrink.shrink_exec_case`) within one --shrink-budget, in the gate's order. Each shrunk case gets a
repro file and a one-line command beside the gate report and its JUnit case is given the repro; a
suite case that is not shrunk (forced along its own trajectory, ...) prints `kept: the whole case
(...)` and the `check --suite CASE` line that runs it again on the same program, reference and runner.
"""

from __future__ import annotations

import dataclasses
import sys

from eagle3_check.jobs.shrink_route import case_flags, option_values, write_one


def shrink_gate_and_write(cfg, report, inputs, program=None, files: dict | None = None,
                          drop: tuple[str, ...] = ()) -> list[str]:
    """`gate` (shrinking on unless --no-shrink), `check --quantize --shrink`: the failing edge-suite cases
    (jobs/gate/shrink_suites.py) and request cases (jobs/gate/shrink.py) shrunk on `program` (default:
    the gate's .pte) within one --shrink-budget, a repro file each beside the report, the JUnit case
    given the repro; the lines to print. `files`: the program's files (default the .pte's); `drop`:
    option names the repro command leaves out (what its route refuses)."""
    if not cfg.shrink.enabled:
        return []
    from eagle3_check.jobs.gate.shrink import failing_cases, gate_ks, shrink_gate
    from eagle3_check.jobs.gate.shrink_suites import failing_suite_cases, shrink_gate_suites

    n = len(failing_cases(report, inputs.prompts, gate_ks(report))) + len(failing_suite_cases(report, inputs.suite))
    if not n:
        return []
    from tqdm import tqdm

    from eagle3_check.program.pte_backend import PteBackend
    from eagle3_check.program.quantize import program_quantization
    from eagle3_check.shrink.repro import program_record
    from eagle3_check.shrink.search import budget_shares

    program = program or PteBackend(inputs.pte, inputs.data_path)
    hf = inputs.hf_reference
    if hf is None and inputs.target_dir is not None:
        import torch

        from eagle3_check.judge.hf import HFReference

        hf = HFReference(inputs.target_dir, dtype=getattr(torch, inputs.tolerance.dtype))
    bar = tqdm(desc="shrink", unit="probe", file=sys.stderr, leave=False, delay=0.5,
               disable=cfg.no_progress or cfg.json)
    shares = budget_shares(n, cfg.shrink.budget)  # one budget over the suite cases, then the request cases

    def probe(*_) -> None:
        bar.update(1)

    try:
        if inputs.runner is not None:  # a runner binary's gate: each probe starts the binary (jobs/gate/shrink.py)
            from eagle3_check.jobs.gate.shrink import shrink_exec_gate
            from eagle3_check.jobs.suites.shrink import shrink_exec_case

            suites = shrink_gate_suites(report, inputs, program, hf, shares, inputs.runner.runner, shrink_exec_case,
                                        on_probe=probe)
            done = shrink_exec_gate(report, inputs, inputs.runner.runner, program, hf, 0, probe, shares=shares)
        else:  # the runner the gate holds (a plug-in, its child-process proxy, or None: the reference runner)
            suites = shrink_gate_suites(report, inputs, program, hf, shares, inputs.plugin, on_probe=probe)
            done = shrink_gate(report, inputs, program, hf, 0, probe, shares=shares)
    finally:
        bar.close()
    record = program_record(files if files is not None else {"pte": cfg.pte, "data": cfg.data_path})
    quantized = program_quantization(program.metadata()) is not None
    return (write_gate_suite_shrinks(cfg, report, suites, record, quantized)
            + write_gate_shrinks(cfg, report, inputs, done, record, drop))


def write_gate_shrinks(cfg, report, inputs, done, record: dict, drop: tuple[str, ...]) -> list[str]:
    """A repro file for each shrunk gate case (`done`: GateShrink), its JUnit case given the repro."""
    from eagle3_check.report.check_junit import shrunk_details, shrunk_properties
    from eagle3_check.shrink.repro import program_flags

    runner_name = cfg.runner or "reference"
    lines: list[str] = []
    for g in done:
        if g.result is None:
            lines.append(f"not shrunk '{g.case}' ({g.check}): {g.note}")
            continue
        values = {k: v for k, v in {**option_values(cfg), "reference": g.reference}.items() if k not in drop}
        flags = program_flags(values)
        chk = next(c for c in report.checks if c.name == g.check)
        shrunk = chk.details["shrunk"][g.case]
        lines += write_one(cfg, g.case, shrunk, g.result, flags, {"flags": flags, **record}, runner_name,
                           dataclasses.replace(inputs.options, chain_len=g.k))
        case = next(c for c in chk.cases if c.name == g.case)
        case.details = shrunk_details(shrunk, case.message)
        case.properties = {**case.properties, **shrunk_properties(shrunk)}
    return lines


def gate_program_values(cfg, quantized: bool) -> dict:
    """The gate's options that rebuild its program and reference for `check`: the .pte (and .ptd),
    the reference target and tokenizer, `--reference self` for a quantized program (the gate judges
    its suites against the program's own decoding). The gate's run options are left out: a suite
    case runs with its own (`case_flags`)."""
    from eagle3_check.shrink.repro import PROGRAM_FLAGS

    values = {k: v for k, v in option_values(cfg).items() if k in PROGRAM_FLAGS}
    return {**values, "reference": "self" if quantized else "hf"}


def gate_case_command(cfg, name: str, values: dict) -> str:
    """The one line that runs the gate's suite case `name` again as the gate ran it (`check --suite`
    on the one given program: the gate's env)."""
    from eagle3_check.shrink.repro import one_line, program_flags

    runner = ["--runner", cfg.runner] if cfg.runner else []
    prompts = ["--prompts", cfg.prompts] if cfg.prompts else []
    return one_line(["eagle3-check", "check", *program_flags(values), *prompts, *runner, "--suite", name])


def write_gate_suite_shrinks(cfg, report, done, record: dict, quantized: bool) -> list[str]:
    """A repro file for each shrunk suite case of `done` (SuiteShrink), its JUnit case (in the
    edge-suites check) given the repro; the lines to print."""
    from eagle3_check.jobs.gate.shrink_suites import EDGE_SUITES
    from eagle3_check.report.check_junit import shrunk_details, shrunk_properties
    from eagle3_check.shrink.repro import program_flags

    chk = report.check(EDGE_SUITES)
    values = gate_program_values(cfg, quantized)
    lines: list[str] = []
    for s in done:
        case = next(c for c in chk.cases if c.name == s.name)
        if s.result is None:
            command = gate_case_command(cfg, s.name, values)
            lines += [f"{s.name}: {s.note}", f"  kept: the whole case ({s.note.removeprefix('not shrunk: ')})",
                      f"  repro: {command}"]
            case.details = f"{case.message}\n{s.note}\nrepro: {command}"
            case.properties = {**case.properties, "repro_command": command}
            continue
        flags = program_flags({**values, **case_flags(s.case)})
        shrunk = chk.details["shrunk"][s.name]
        lines += write_one(cfg, s.name, shrunk, s.result, flags, {"flags": flags, **record}, cfg.runner or "reference",
                           s.options)
        case.details = shrunk_details(shrunk, case.message)
        case.properties = {**case.properties, **shrunk_properties(shrunk)}
    return lines
