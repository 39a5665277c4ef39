"""DeviceRunner == ReferenceRunner, call for call, on CPU; graph-owned outputs (emulated) change nothing.

The device runner keeps data on the program's device and reads back once per round; the
rules are the reference runner's. Recording both through `RecordingProgram` pins that every
method call (tokens, positions) and every result field agree.
"""

from __future__ import annotations

import pytest
import torch

from eagle3_check.judge.self_ref import self_greedy
from eagle3_check.program.cuda_graph import GraphedProgram
from eagle3_check.runners.device_loop import DeviceRunner, PhaseTimer
from eagle3_check.runners.instrument import RecordingProgram
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.suites.oracle import OracleDraftProgram
from eagle3_check.suites.toy import ToyProgram

FIELDS = ("tokens", "accepted", "tau", "stop_reason", "rounds", "k", "max_new", "method_calls")


def record(runner, program, tokenizer, prompt, options):
    rec = RecordingProgram(program)
    result = runner.run(rec, tokenizer, prompt, options)
    calls = [(c.method, c.tokens, c.positions, c.out_ids) for c in rec.calls]
    return result, calls


def assert_same_run(program, tokenizer, prompt, options):
    ref, ref_calls = record(ReferenceRunner(), program, tokenizer, prompt, options)
    dev, dev_calls = record(DeviceRunner(), program, tokenizer, prompt, options)
    for f in FIELDS:
        assert getattr(dev, f) == getattr(ref, f), f
    assert dev_calls == ref_calls
    return ref


@pytest.fixture(scope="module")
def emulated(program):
    """The fixture program with graph-owned outputs (emulated CUDA graphs)."""
    return GraphedProgram(program, mode="emulate")


@pytest.mark.parametrize("k", [2, 5])
@pytest.mark.parametrize("prompt_id", ["hi", "count", "story-long"])
def test_device_runner_matches_reference_on_fixture(program, tokenizer, fixture, prompt_id, k):
    text = next(p.text for p in fixture.prompts() if p.id == prompt_id)
    assert_same_run(program, tokenizer, text, RunOptions(max_new_tokens=24, chain_len=k))


@pytest.mark.parametrize("accept", [1.0, 0.6], ids=["accept-all", "accept-0.6"])
def test_oracle_acceptance_matches_reference_and_self_greedy(program, tokenizer, fixture, accept):
    """With the oracle draft, rounds accept 0..K proposals: the reseed slices are exercised."""
    opts = RunOptions(max_new_tokens=40, chain_len=4, stop_ids=(), stop_token=None, eos_id=None)
    text = next(p.text for p in fixture.prompts() if p.id == "count")
    ids = ReferenceRunner().run(program, tokenizer, text, opts).prompt_ids
    greedy = self_greedy(program, ids, 40).tokens
    oracle = OracleDraftProgram(program, ids + greedy, accept, seed=3)
    ref = assert_same_run(oracle, tokenizer, ids, opts)
    assert ref.tokens == greedy
    if accept == 1.0:
        assert set(ref.accepted[:-1]) == {4}
    else:
        assert len(set(ref.accepted)) > 1


def test_emulated_graphs_change_no_call(program, emulated, tokenizer):
    """Graph-owned outputs (overwritten by the next same-shape call) give the same run."""
    opts = RunOptions(max_new_tokens=30, chain_len=3, stop_ids=(), stop_token=None, eos_id=None)
    ids = ReferenceRunner().run(program, tokenizer, "Count from one to ten.", opts).prompt_ids
    greedy = self_greedy(program, ids, 30).tokens
    plain, plain_calls = record(DeviceRunner(), OracleDraftProgram(program, ids + greedy, 0.7), tokenizer, ids, opts)
    for runner in (ReferenceRunner(), DeviceRunner()):
        oracle = OracleDraftProgram(emulated, ids + greedy, 0.7)
        got, calls = record(runner, oracle, tokenizer, ids, opts)
        assert (got.tokens, got.accepted) == (plain.tokens, plain.accepted)
        assert calls == plain_calls
    assert emulated.verify_graphs.captures[(((1, 4), torch.long), ((4,), torch.long))] > 0


TOY_CASES = {
    "all-right": dict(toy={}, opts=dict(max_new_tokens=20)),
    "wrong-early": dict(toy=dict(wrong_at={6, 9, 10, 15}), opts=dict(max_new_tokens=20)),
    "stop-mid-round": dict(toy=dict(wrong_at={8}), opts=dict(max_new_tokens=30, stop_ids=(1, 50, 106, 400))),
    "context-end": dict(toy=dict(max_seq_len=24, max_prefill=8, wrong_at={7, 12}), opts=dict(max_new_tokens=64)),
    "max-new-1": dict(toy={}, opts=dict(max_new_tokens=1)),
}


@pytest.mark.parametrize("case", list(TOY_CASES), ids=list(TOY_CASES))
def test_device_runner_matches_reference_on_toy(tokenizer, case):
    spec = TOY_CASES[case]
    toy = ToyProgram(**spec["toy"])
    opts = RunOptions(raw=True, bos_id=-1, stop_token=None, chain_len=3, **spec["opts"])
    assert_same_run(toy, tokenizer, [5, 6, 7, 8], opts)


def test_phase_timer_splits_rounds(program, tokenizer):
    timer = PhaseTimer(torch.device("cpu"))
    res = DeviceRunner(timer).run(program, tokenizer, "Hi", RunOptions(max_new_tokens=12, chain_len=2))
    names = [m[0] for m in timer.marks]
    assert names.count("verify") == res.rounds == names.count("host")
    assert names.count("draft") == res.rounds  # seed + one reseed per round but the last
    totals = timer.totals()
    assert all(totals[p] > 0 for p in ("draft", "verify", "host"))
