"""`eagle3-check gate --golden ... --baseline metrics.json`: the golden runs feed the exact metrics gate.

Driven through gate.golden_check / gate.baseline_check with a toy program (no .pte needed): the
gate builds its program from --pte, but the two checks only see a SpeculatorProgram.
"""

from __future__ import annotations

import json

from test_gate_goldens import KEY, setup

from eagle3_check.jobs.gate.gate import GateInputs, baseline_check, golden_check
from eagle3_check.jobs.golden.metrics import compute_metrics, write_baseline
from eagle3_check.jobs.golden.verify import gate_goldens
from eagle3_check.suites.toy import ToyProgram


def inputs_for(tmp_path, tokenizer, golden, baseline):
    return GateInputs(pte=None, tokenizer=tokenizer, target_dir=None, prompts=[], golden=golden, baseline=baseline)


def recorded(tmp_path, tokenizer):
    toy, path = setup(tmp_path, tokenizer)
    runs = gate_goldens([path], build=lambda key: (toy, tokenizer)).runs[KEY.stem]
    baseline = write_baseline(tmp_path / "metrics.json", {KEY.stem: compute_metrics(runs.values(), KEY.k)})
    return toy, path, baseline


def test_gate_passes_golden_and_metrics_baseline(tmp_path, tokenizer):
    toy, path, baseline = recorded(tmp_path, tokenizer)
    inputs, kept = inputs_for(tmp_path, tokenizer, path, baseline), {}
    assert golden_check(toy, inputs, kept).status == "pass"
    chk = baseline_check(inputs, None, [KEY.k], kept["outcome"])
    assert chk.status == "pass" and chk.message == "1/1 metric sets equal to the baseline"


def test_gate_fails_both_with_the_numbers_side_by_side(tmp_path, tokenizer):
    _, path, baseline = recorded(tmp_path, tokenizer)
    worse = ToyProgram(max_seq_len=128, max_prefill=64, wrong_at={29, 30, 33, 36})
    inputs, kept = inputs_for(tmp_path, tokenizer, path, baseline), {}
    golden = golden_check(worse, inputs, kept)
    assert golden.status == "fail" and "rounds" in golden.message
    chk = baseline_check(inputs, None, [KEY.k], kept["outcome"])
    assert chk.status == "fail" and chk.cases[0].status == "fail"
    tau_line = next(line for line in chk.message.splitlines() if line.strip().startswith("tau "))
    assert tau_line.split()[-1] == "regression"


def test_a_metrics_baseline_without_golden_fails_naming_the_fix(tmp_path, tokenizer):
    _, _, baseline = recorded(tmp_path, tokenizer)
    chk = baseline_check(inputs_for(tmp_path, tokenizer, None, baseline), 2.0, [KEY.k], None)
    assert chk.status == "fail" and "Fix: pass --golden golden/" in chk.message


def test_a_tau_report_baseline_keeps_the_tolerance_rule(tmp_path, tokenizer):
    report = tmp_path / "report.json"
    report.write_text(json.dumps({"tau": 2.0}))
    inputs = inputs_for(tmp_path, tokenizer, None, report)
    assert baseline_check(inputs, 1.97, [KEY.k]).status == "pass"
    assert baseline_check(inputs, 1.5, [KEY.k]).status == "fail"
