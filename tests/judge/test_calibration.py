"""The calibration (judge/calibration.py, calibration_measure.py): measured on a tiny fixture's
own target, stored atomically keyed by weights, dtype, device and kernels, read back, and turned
into a tolerance and a binomial budget."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch

from eagle3_check.errors import InputError
from eagle3_check.judge.calibration import Calibration, CalibrationKey, load, record_path, save
from eagle3_check.judge.calibration_measure import calibrate, compare, verify_rows

KEY = CalibrationKey("ab" * 32, "bfloat16", "cpu", "eager")


def record(**changes) -> Calibration:
    c = Calibration(KEY, 4, 16, 820, 0.21, 0.125, 20, 3, 0.25, created="2026-12-04T20:00:00Z")
    return dataclasses.replace(c, **changes)


def test_tolerance_and_budget_from_a_record():
    tol = record().tolerance()
    # 2 x 0.21 = 0.42, rounded up to 1/64: 0.421875; the ulp part and top-4 as the constants
    assert (tol.absolute, tol.multiple, tol.top_n) == (0.421875, 2.0, 4)
    assert record(max_flip_rank=6).tolerance().top_n == 7
    b = record().budget()
    assert b.allowed(320) == 23 and "20 flips of 820 rows" in b.source


def test_records_round_trip_atomically(tmp_path):
    path = save(record(), tmp_path)
    assert path == record_path(KEY, tmp_path) and path.name == f"{'ab' * 8}-bfloat16-cpu-eager.json"
    assert load(KEY, tmp_path) == record()
    assert load(dataclasses.replace(KEY, dtype="float32"), tmp_path) is None
    assert not list(tmp_path.glob("*.tmp*"))


@pytest.mark.parametrize("text, what", [
    ("{", "cannot be read"),
    ('{"schema": 9}', "schema 9"),
    ('{"schema": 1, "key": {"weights_sha256": "x"}}', "cannot be read"),
])
def test_a_bad_record_is_one_line(tmp_path, text, what):
    path = record_path(KEY, tmp_path)
    path.write_text(text)
    with pytest.raises(InputError) as e:
        load(KEY, tmp_path)
    assert what in str(e.value) and "delete it" in str(e.value) and "\n" not in str(e.value)


def test_a_record_under_another_name_is_refused(tmp_path):
    other = dataclasses.replace(KEY, kernels="exact")
    record_path(KEY, tmp_path).write_text(json.dumps(record(key=other).to_json()))
    with pytest.raises(InputError, match="holds key"):
        load(KEY, tmp_path)


def test_compare_measures_shift_and_flips():
    ref = torch.tensor([[3.0, 1.0, 0.0], [0.0, 2.0, 1.9]])  # [2, 3]
    got = torch.tensor([[3.0, 1.5, 0.0], [0.0, 1.8, 1.95]])
    shift, flips = compare(got, ref)
    assert shift.tolist() == pytest.approx([0.5, 0.25]) and flips == [(2, pytest.approx(0.1))]


class Recorder(torch.nn.Module):
    """A target that records its calls' positions and returns one-hot logits of position + 1."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.zeros(1))
        self.calls = []

    def forward(self, tokens, positions):  # [1, T], [T] -> [1, T, V], None
        self.calls.append(positions.tolist())
        return torch.nn.functional.one_hot(positions + 1, 64).float()[None], None


def test_verify_rows_worked_example():
    # L = 5, K = 2, 7 tokens: windows at 5, 6, 7 and 8, 9, 10 (module docstring)
    t = Recorder()
    rows = verify_rows(t, [1] * 5, list(range(7)), 2, torch.zeros(64))
    assert t.calls == [[5, 6, 7], [8, 9, 10]] and len(rows) == 7
    assert [int(r.argmax()) for r in rows[1:]] == [6, 7, 8, 9, 10, 11]


def test_calibrate_on_the_tiny_fixture(program, tokenizer, hf_reference):
    from eagle3_check.runners.options import RunOptions, prompt_ids

    prompts = [prompt_ids(tokenizer, text, RunOptions()) for text in ("Hello there", "Count to ten")]
    cal = calibrate(program, hf_reference, prompts, 4, set(), 12, "cpu")
    assert (cal.key.dtype, cal.key.device, cal.key.kernels, cal.rows) == ("float32", "cpu", "eager", 24)
    assert cal.flips == 0 and cal.max_shift < 1e-3  # fp32, the same HF model: no flip
    again = calibrate(program, hf_reference, prompts, 4, set(), 12, "cpu")
    assert again.key == cal.key and again.max_shift == cal.max_shift  # keyed by the weights, repeatable


def test_calibrate_through_wrappers_measures_the_eager_target(program, tokenizer, hf_reference):
    """`check --device cuda` wraps the eager program in a CUDA-graph program (a ProgramWrapper): the
    calibration measures the eager target under it (on the H200 the bf16 check of a --target was
    refused with 'expected an eager program' before this), and a program with no eager target is
    refused in one line."""
    from eagle3_check.errors import InputError
    from eagle3_check.program.contract import ProgramWrapper
    from eagle3_check.runners.options import RunOptions, prompt_ids

    prompts = [prompt_ids(tokenizer, "Hello there", RunOptions())]
    wrapped = calibrate(ProgramWrapper(ProgramWrapper(program)), hf_reference, prompts, 4, set(), 8, "cpu")
    plain = calibrate(program, hf_reference, prompts, 4, set(), 8, "cpu")
    assert (wrapped.key, wrapped.rows, wrapped.max_shift) == (plain.key, plain.rows, plain.max_shift)
    with pytest.raises(InputError, match="expected an eager program"):
        calibrate(ProgramWrapper(object()), hf_reference, prompts, 4, set(), 8, "cpu")
