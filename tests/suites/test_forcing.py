"""Pins the forcing arithmetic and the call-log invariants on the ToyProgram (pure arithmetic)."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.runners.instrument import RecordingProgram, call_problems
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.suites.forcing import (
    FULL,
    ForcedDraft,
    Forcing,
    block_end,
    emitted_index,
    stop_ids_at,
)
from eagle3_check.suites.toy import ToyProgram, greedy

PROMPT = [7, 11, 13, 17, 19, 23, 29, 31, 37, 41]  # L = 10
NO_STOPS = dict(stop_ids=(), stop_token=None, eos_id=None)  # the fixture tokenizer's EOS (1) never occurs in the toy


def forced_run(tokenizer, pattern, k=4, max_new=16, then=None, wrong_at=None, stop_ids=(), wrong=None):
    toy = ToyProgram(chain_len=k, wrong_at=wrong_at)
    seq = PROMPT + greedy(PROMPT, 64)
    rec = RecordingProgram(ForcedDraft(toy, seq, Forcing(tuple(pattern), then, wrong), k, 512))
    opts = RunOptions(**{**NO_STOPS, "stop_ids": tuple(stop_ids)}, max_new_tokens=max_new, chain_len=k, bos_id=-1)
    return ReferenceRunner().run(rec, tokenizer, list(PROMPT), opts), rec, seq


def test_emitted_index_and_block_end_worked_example():
    # accepts [2, 0]: bonus 0; round 1 = slots 0..2 -> 1..3; round 2 slot 0 -> 4
    assert [emitted_index([2, 0], 1, j) for j in range(3)] == [1, 2, 3]
    assert emitted_index([2, 0], 2, 0) == 4
    assert emitted_index([2, 0], 0, 0) == 0
    assert [block_end([2, 0], r) for r in range(3)] == [1, 4, 5]
    assert stop_ids_at([5, 6, 5, 8], [0, 2, 3]) == (5, 8)


def test_forcing_resolve_uses_then_and_full():
    assert Forcing((FULL, 0), then=2).resolve(4, 4) == [4, 0, 2, 2]
    assert Forcing((1,)).resolve(3, 2) == [1, None]


@pytest.mark.parametrize("pattern", [(4, 4, 4), (0, 0, 0), (2, 1, 3), (0, 4, 1)], ids=str)
def test_forced_pattern_is_what_the_runner_accepts(pattern, tokenizer):
    run, rec, seq = forced_run(tokenizer, pattern, max_new=1 + sum(a + 1 for a in pattern))
    assert run.accepted == list(pattern)
    assert run.tokens == seq[len(PROMPT):][: len(run.tokens)]
    assert call_problems(rec, run, 64) == []


def test_forcing_overrides_a_draft_that_is_right_and_one_that_is_wrong(tokenizer):
    # the toy draft is wrong at positions 12..20, yet forcing a = K makes every round accept all
    run, _, _ = forced_run(tokenizer, (FULL,), then=FULL, wrong_at=set(range(12, 21)))
    assert run.accepted == [4, 4, 4]
    run, _, _ = forced_run(tokenizer, (0,), then=0)  # a draft that is always right, forced to a = 0
    assert set(run.accepted) == {0}


def test_call_log_worked_example_of_call_problems(tokenizer):
    # docstring of call_problems: L = 10, K = 2, accepted = [1, 0]
    run, rec, _ = forced_run(tokenizer, (1, 0), k=2, max_new=4)
    assert run.accepted == [1, 0]
    got = [(c.method, c.positions[0], c.positions[-1]) for c in rec.calls]
    assert got == [
        ("prefill", 0, 9), ("draft_decode", 0, 9), ("draft_decode", 10, 10),
        ("target_verify", 10, 12), ("draft_decode", 10, 11), ("draft_decode", 12, 12),
        ("target_verify", 12, 14),
    ]
    assert rec.of("draft_decode")[2].tokens == run.tokens[1:3]  # reseed = the round's 2 emitted tokens
    assert call_problems(rec, run, 64) == []


def test_call_problems_flags_a_position_past_max_seq_len(tokenizer):
    run, rec, _ = forced_run(tokenizer, (0,), then=0, max_new=3)
    rec.target_verify(torch.tensor([[1, 2]]), torch.tensor([63, 64]))
    problems = call_problems(rec, run, 64)
    assert any("position 64 >= max_seq_len 64" in p for p in problems)
    assert any("target_verify calls" in p for p in problems)


def test_call_problems_flags_a_wrong_reseed(tokenizer):
    run, rec, _ = forced_run(tokenizer, (2, 0), max_new=5)
    reseed = rec.of("draft_decode")[4]  # after round 1: seed + 3 chain steps, then the reseed
    reseed.positions = [p + 1 for p in reseed.positions]
    assert any("round 2: reseed" in p for p in call_problems(rec, run, 64))


def test_forced_stop_ends_the_block(tokenizer):
    run, _, seq = forced_run(tokenizer, (FULL,), then=FULL)
    stop_at = emitted_index([4, 4], 2, 1)  # round 2, accepted proposal 1
    stop = seq[len(PROMPT) + stop_at]
    run2, _, _ = forced_run(tokenizer, (FULL,), then=FULL, stop_ids=(stop,))
    first = run.tokens.index(stop)
    assert run2.tokens == run.tokens[: first + 1] and run2.stop_reason == "stop"


def test_call_problems_flags_a_chain_step_fed_the_wrong_g_row(tokenizer):
    run, rec, _ = forced_run(tokenizer, (2, 0), max_new=5)
    step = rec.of("draft_decode")[5]  # round 2, chain step 1 (after the 3-row reseed)
    step.feature = rec.of("draft_decode")[4].out_feature[:, :1]  # the reseed's first g row, not its last
    assert any("round 2: chain step 1" in p for p in call_problems(rec, run, 64))


def test_a_rejected_proposal_can_carry_a_chosen_token(tokenizer):
    # round 1 rejects proposal 1 as the stop id 300: it is in the verify window, never emitted
    run, rec, _ = forced_run(tokenizer, (1,), then=1, max_new=5, wrong=300, stop_ids=(300,))
    assert rec.of("target_verify")[0].tokens[2] == 300
    assert run.accepted == [1, 1] and 300 not in run.tokens and run.stop_reason == "max_new"
