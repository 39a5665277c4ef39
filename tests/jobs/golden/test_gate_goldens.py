"""gate_goldens: one pass over golden files feeds both the token compare and the metrics gate."""

from __future__ import annotations

import dataclasses

from test_golden import PROMPTS, TOL, ToyReference

from eagle3_check.jobs.golden.file import GoldenKey, record_golden, save_golden
from eagle3_check.jobs.golden.metrics import compute_metrics, write_baseline
from eagle3_check.jobs.golden.verify import gate_goldens, unavailable
from eagle3_check.suites.toy import ToyProgram

KEY = GoldenKey("toy", "eager", "cpu", "float32", 3, 16)


def setup(tmp_path, tokenizer, key=KEY):
    toy = ToyProgram(max_seq_len=128, max_prefill=64, wrong_at={29, 33})
    golden = record_golden(toy, tokenizer, ToyReference(), PROMPTS[:2], key, TOL)
    path = save_golden(golden, tmp_path / "golden")
    return toy, path


def test_one_pass_verifies_tokens_and_metrics(tmp_path, tokenizer):
    toy, path = setup(tmp_path, tokenizer)
    first = gate_goldens([path], build=lambda key: (toy, tokenizer))
    assert first.passed and first.baseline is None and list(first.runs[KEY.stem]) == ["hi", "count"]
    baseline = write_baseline(tmp_path / "metrics.json", {KEY.stem: compute_metrics(first.runs[KEY.stem].values(), 3)})
    again = gate_goldens([tmp_path / "golden"], baseline, build=lambda key: (toy, tokenizer))
    assert again.passed, again.format()
    assert "verdict: PASS" in again.format() and "metrics: identical to the baseline" in again.format()


def test_a_changed_program_fails_both_comparisons(tmp_path, tokenizer):
    toy, path = setup(tmp_path, tokenizer)
    runs = gate_goldens([path], build=lambda key: (toy, tokenizer)).runs[KEY.stem]
    baseline = write_baseline(tmp_path / "metrics.json", {KEY.stem: compute_metrics(runs.values(), 3)})
    worse = ToyProgram(max_seq_len=128, max_prefill=64, wrong_at={29, 30, 33, 36})  # a worse draft, same target
    out = gate_goldens([path], baseline, build=lambda key: (worse, tokenizer))
    assert not out.passed and out.golden_diffs and out.metric_diffs
    assert {d.metric for d in out.metric_diffs} >= {"tau", "rounds"}
    assert all(d.field in ("rounds", "accepted") for d in out.golden_diffs)  # lossless: same tokens


def test_goldens_this_machine_cannot_run_are_skipped_with_the_reason(tmp_path, tokenizer):
    pte_key = dataclasses.replace(KEY, backend="pte")
    _, path = setup(tmp_path, tokenizer, pte_key)
    assert "pass --pte FILE" in unavailable(pte_key)
    out = gate_goldens([path])
    assert out.skipped == {pte_key.stem: unavailable(pte_key)}
    assert not out.passed  # nothing ran: an all-skipped gate proves nothing
    assert f"skipped {pte_key.stem}: a .pte golden: pass --pte FILE" in out.format()


def test_goldens_of_another_fixture_are_skipped_with_the_reason(tmp_path, tokenizer):
    """`gate --pte X --golden golden/`: a program of one fixture must not be judged by another
    fixture's goldens (they would all 'diverge')."""
    toy, path = setup(tmp_path, tokenizer)
    other = gate_goldens([path], build=lambda key: (toy, tokenizer), fixture="tiny-gemma4")
    assert other.runs == {} and not other.passed
    assert other.skipped[KEY.stem] == "a golden of fixture toy; this program is tiny-gemma4"
    same = gate_goldens([path], build=lambda key: (toy, tokenizer), fixture="toy")
    assert same.passed and KEY.stem in same.runs
