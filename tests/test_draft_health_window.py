"""Draft health's teacher forcing walks the sequence with the largest verify window the program takes
(`draft_health.teacher_window`): on tiny-llama (verify range [2, 8]) 40 emitted tokens take
ceil(40 / 8) = 5 target_verify calls, not the 20 of the smallest window, with the same counts."""

from __future__ import annotations

import dataclasses

import pytest

from eagle3_check.gating import draft_health
from eagle3_check.gating.draft_health import step0_agreement, teacher_window
from eagle3_check.program.contract import read_metadata
from eagle3_check.run.options import RunOptions, prompt_ids


class Counting:
    """The program, counting its target_verify calls."""

    def __init__(self, program):
        self.inner, self.verify_calls = program, 0

    def target_verify(self, *args):
        self.verify_calls += 1
        return self.inner.target_verify(*args)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def seq(program, tokenizer, fixture):
    from eagle3_check.reference.self_ref import self_greedy

    ids = prompt_ids(tokenizer, fixture.prompts()[0].text, RunOptions())
    return ids, ids + self_greedy(program, ids, 40).tokens


@pytest.mark.parametrize("md, w", [
    pytest.param({"max_verify_len": 8, "min_verify_len": 2}, 8, id="verify-range-max"),
    pytest.param({"max_verify_len": None, "min_verify_len": None, "verify_bounds": (2, 6)}, 6, id="method-bound"),
    pytest.param({"max_verify_len": None, "min_verify_len": None, "verify_bounds": None}, 5, id="k-plus-one"),
])
def test_the_teacher_window_is_the_largest_the_program_takes(metadata_obj, md, w):
    assert teacher_window(dataclasses.replace(metadata_obj, **md)) == w


@pytest.fixture(scope="module")
def metadata_obj(program):
    return read_metadata(program.metadata())


def test_one_target_verify_per_window_and_the_same_counts_as_the_smallest_window(program, seq, monkeypatch):
    ids, s = seq
    counted = Counting(program)
    wide = step0_agreement(counted, s, len(ids))
    assert counted.verify_calls == -(-(len(s) - len(ids)) // 8) == 5
    monkeypatch.setattr(draft_health, "teacher_window", lambda md: 2)  # the self reference's window
    narrow = Counting(program)
    assert step0_agreement(narrow, s, len(ids)) == wide and narrow.verify_calls == 20
