"""Long commands are never silent (issue 16 part 4): export announces and times its phases, the
gate reports each case of its long checks as it finishes; golden record and check have bars."""

from __future__ import annotations

import re

from eagle3_check.cli.export import phase_printer
from eagle3_check.cli.gate import StepBars
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.gate.gate import GateInputs, run_gate
from eagle3_check.program.export import PHASES, Phases
from eagle3_check.runners.options import RunOptions


def test_phases_announce_each_start_and_time_each_phase_in_order():
    seen = []
    phases = Phases(seen.append)
    for name in PHASES:
        phases.start(name)
    phases.stop()
    assert seen == list(PHASES) and list(phases.seconds) == list(PHASES)
    assert all(s >= 0 for s in phases.seconds.values())
    phases.stop()  # stopping twice changes nothing
    assert list(phases.seconds) == list(PHASES)


def test_the_export_phase_lines_go_to_stderr_with_the_time_so_far(capsys):
    on_phase = phase_printer("export")
    on_phase("trace prefill")
    on_phase("lower")
    out, err = capsys.readouterr()
    assert out == ""
    assert re.fullmatch(r"\[\s*\d+s\] export: trace prefill\n\[\s*\d+s\] export: lower\n", err), err


def test_the_gate_reports_every_case_of_its_long_checks(program, tokenizer, fixture, hf_reference):
    steps = []
    inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir,
                        prompts=[Prompt("hi", "Hi"), Prompt("sky", "Why is the sky blue?")],
                        options=RunOptions(max_new_tokens=4), suite="chain/lo", hf_reference=hf_reference,
                        fixture=fixture.name, on_step=lambda *s: steps.append(s))
    run_gate(inputs, program=program)
    assert steps == [("edge suites", 1, 1), ("requests", 1, 2), ("requests", 2, 2)], steps
    bars = StepBars(disable=True)  # what the CLI feeds them to
    for s in steps:
        bars(*s)
    bars.close()
