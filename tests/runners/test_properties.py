"""Property tests (hypothesis) of the runner under forcing, over prompt ids, K, max new tokens,
max_seq_len, stop sets and acceptance patterns:

- the emitted tokens are a prefix of the greedy reference, of exactly the length DESIGN §2
  fixes (`rules.expected_length` under the forced pattern), with the stop reason it fixes;
- every forced round accepted exactly the forced a;
- tau * rounds + 1 = tokens emitted;
- the call log holds the invariants (`instrument.call_problems`), no position >= max_seq_len.

The ToyProgram (known target, pure arithmetic) takes many examples; the real eager fixture
program (with max_seq_len 32, so the context rule is reached) fewer. Default runs are derandomized (same examples every `make check`); the `slow`
variants draw many more random examples.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eagle3_check.program.contract import read_metadata
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.instrument import RecordingProgram, call_problems
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions, stop_set
from eagle3_check.runners.rules import EARLY, expected_length
from eagle3_check.suites.forcing import ForcedDraft, Forcing
from eagle3_check.suites.toy import ToyProgram, greedy

FAST = dict(deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
SLOW = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def toy_requests(draw):
    k = draw(st.integers(1, 7))
    msl = draw(st.integers(2, 64))
    max_prefill = min(32, msl - 1)
    L = draw(st.integers(1, max_prefill))
    prompt = draw(st.lists(st.integers(0, 511), min_size=L, max_size=L))
    max_new = draw(st.integers(1, 48))
    pattern = tuple(draw(st.lists(st.integers(0, k), min_size=1, max_size=10)))
    then = draw(st.integers(0, k))
    ref = greedy(prompt, 64)
    from_ref = draw(st.lists(st.sampled_from(ref), max_size=2))  # reference tokens made stops
    other = draw(st.lists(st.integers(0, 511), max_size=2))
    stop_ids = tuple(from_ref + other)
    # the token rejected proposals carry: default, any id, or a stop id (which must stop nothing)
    wrong = draw(st.one_of(st.none(), st.integers(0, 511), *([st.sampled_from(stop_ids)] if stop_ids else [])))
    return dict(k=k, msl=msl, max_prefill=max_prefill, prompt=prompt, max_new=max_new,
                forcing=Forcing(pattern, then, wrong), stop_ids=stop_ids, ref=ref)


def check_properties(program, tokenizer, prompt, ref, k, max_new, forcing, stop_ids):
    md = read_metadata(program.metadata())
    opts = RunOptions(stop_ids=stop_ids, stop_token=None, eos_id=None, bos_id=-1,
                      max_new_tokens=max_new, chain_len=k)
    rec = RecordingProgram(ForcedDraft(program, list(prompt) + list(ref), forcing, k, md.vocab_size or 512))
    run = ReferenceRunner().run(rec, tokenizer, list(prompt), opts)
    stops = stop_set(tokenizer, md, opts).ids
    forced = forcing.resolve(k, 256)
    exp = expected_length(list(ref), stops, max_new, len(prompt), k, md.max_seq_len, forced)
    assert exp.reason != EARLY, "reference too short for the request (test setup)"
    assert run.tokens == list(ref[: exp.length]), (run.tokens, exp)
    assert run.stop_reason == exp.reason
    assert run.accepted == forced[: run.rounds]
    if run.rounds:
        assert abs(run.tau * run.rounds + 1 - len(run.tokens)) < 1e-9
    else:
        assert run.tau == 0 and len(run.tokens) == 1
    assert call_problems(rec, run, md.max_seq_len) == []


def _toy_case(req, tokenizer):
    """The fixture tokenizer: its EOS (1) never occurs in the toy's output (ids 200..499)."""
    toy = ToyProgram(max_seq_len=req["msl"], max_prefill=req["max_prefill"], chain_len=req["k"])
    check_properties(toy, tokenizer, req["prompt"], req["ref"], req["k"], req["max_new"],
                     req["forcing"], req["stop_ids"])


@settings(max_examples=300, **FAST)
@given(req=toy_requests())
def test_toy_runner_properties(req, tokenizer):
    _toy_case(req, tokenizer)


@pytest.mark.slow
@settings(max_examples=5000, **SLOW)
@given(req=toy_requests())
def test_toy_runner_properties_many(req, tokenizer):
    _toy_case(req, tokenizer)


@st.composite
def eager_requests(draw, vocab=512):
    """On a program with max_seq_len 32: long prompts reach the context rule."""
    k = draw(st.integers(1, 7))
    L = draw(st.integers(1, 28))
    prompt = draw(st.lists(st.integers(3, vocab - 1), min_size=L, max_size=L))
    max_new = draw(st.integers(1, 12))
    pattern = tuple(draw(st.lists(st.integers(0, k), min_size=1, max_size=6)))
    then = draw(st.integers(0, k))
    stop_slots = draw(st.lists(st.integers(0, max_new - 1), max_size=2))  # reference indices made stops
    return dict(k=k, prompt=prompt, max_new=max_new, forcing=Forcing(pattern, then), stop_slots=stop_slots)


def _eager_case(req, program, tokenizer, hf_reference):
    ref = hf_reference.greedy(req["prompt"], req["max_new"] + req["k"] + 1).tokens
    stop_ids = tuple(ref[i] for i in req["stop_slots"])
    check_properties(program, tokenizer, req["prompt"], ref, req["k"], req["max_new"], req["forcing"], stop_ids)


@pytest.fixture(scope="session")
def small_program(fixture):
    """The fixture's eager program with max_seq_len 32 (prefill 1..31)."""
    return EagerBackend.from_fixture(fixture, max_seq_len=32, min_prefill=1, max_prefill=31)


@settings(max_examples=16, **FAST)
@given(req=eager_requests())
def test_eager_runner_properties(req, small_program, tokenizer, hf_reference):
    _eager_case(req, small_program, tokenizer, hf_reference)


@pytest.mark.slow
@settings(max_examples=300, **SLOW)
@given(req=eager_requests())
def test_eager_runner_properties_many(req, small_program, tokenizer, hf_reference):
    _eager_case(req, small_program, tokenizer, hf_reference)
