"""Each rule of DESIGN §2, pinned by a named test.

Most tests use `ToyProgram` (target: next_token(t); draft wrong exactly at chosen
positions) wrapped in `RecordingProgram`, so the index arithmetic is exact and visible.
"""

import itertools

import pytest

from eagle3_check.errors import OptionError
from eagle3_check.runners.instrument import RecordingProgram
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.runners.rules import allowed_lengths, expected_length, prefill_chunk
from eagle3_check.suites import toy

PROMPT = list(range(300, 310))  # L = 10 raw ids: anchor_pos of round 1 is 10


def opts(**kw):
    """Raw-id requests with no stop ids; the tokenizer's own EOS (1) never occurs in the toy."""
    base = dict(stop_ids=(), stop_token=None, eos_id=None, max_new_tokens=32, chain_len=4)
    return RunOptions(**{**base, **kw})


def run_toy(tokenizer, prompt=PROMPT, program_kw=None, **kw):
    prog = RecordingProgram(toy.ToyProgram(**(program_kw or {})))
    result = ReferenceRunner().run(prog, tokenizer, list(prompt), opts(**kw))
    return prog, result


# --- rule 6: the bonus ---------------------------------------------------------------


@pytest.mark.parametrize("max_new", [1, 2, 9])
def test_bonus_is_always_emitted_first(tokenizer, max_new):
    prog, result = run_toy(tokenizer, max_new_tokens=max_new)
    bonus = prog.of("prefill")[0].out_ids[0]
    assert result.tokens[0] == bonus == toy.next_token(PROMPT[-1])


def test_bonus_is_emitted_on_the_real_fixture(program, tokenizer):
    rec = RecordingProgram(program)
    result = ReferenceRunner().run(rec, tokenizer, "Hi", RunOptions(max_new_tokens=3))
    assert result.tokens[0] == rec.of("prefill")[0].out_ids[0]


# --- rule 7: when the draft never runs -----------------------------------------------


def test_draft_never_runs_when_max_new_is_1(tokenizer):
    prog, result = run_toy(tokenizer, max_new_tokens=1)
    assert result.tokens == [toy.next_token(PROMPT[-1])]
    assert prog.of("draft_decode") == [] and prog.of("target_verify") == []
    assert (result.rounds, result.stop_reason) == (0, "max_new")


def test_draft_never_runs_when_bonus_is_a_stop_token(tokenizer):
    bonus = toy.next_token(PROMPT[-1])
    prog, result = run_toy(tokenizer, stop_ids=(bonus,))
    assert result.tokens == [bonus]
    assert prog.of("draft_decode") == [] and prog.of("target_verify") == []
    assert result.stop_reason == "stop"


@pytest.mark.parametrize(
    "max_seq_len, drafts",
    [
        pytest.param(14, False, id="L+K=max_seq_len-0"),
        pytest.param(15, True, id="L+K=max_seq_len-1"),
        pytest.param(16, True, id="L+K=max_seq_len-2"),
    ],
)
def test_context_rule_decides_whether_the_draft_runs(tokenizer, max_seq_len, drafts):
    # L = 10, K = 4: speculate only if L + K <= max_seq_len - 1.
    prog, result = run_toy(tokenizer, program_kw=dict(max_seq_len=max_seq_len, max_prefill=12))
    assert bool(prog.of("draft_decode")) is drafts
    assert prog.max_position() < max_seq_len
    if not drafts:
        assert (result.tokens, result.stop_reason) == ([toy.next_token(PROMPT[-1])], "context")


def test_draft_never_runs_on_the_real_fixture_with_max_new_1(program, tokenizer):
    result = ReferenceRunner().run(program, tokenizer, "Hi", RunOptions(max_new_tokens=1))
    assert result.method_calls["draft_decode"] == 0 and result.method_calls["target_verify"] == 0
    assert len(result.tokens) == 1


# --- rule 8/9: seeding, acceptance, reseeding (the worked example in runners/loop.py) --------


def test_seed_pairs_prompt_features_with_the_next_token(tokenizer):
    prog, _ = run_toy(tokenizer, max_new_tokens=2)
    bonus = toy.next_token(PROMPT[-1])
    seed = prog.of("draft_decode")[0]
    assert seed.tokens == PROMPT[1:] + [bonus]  # prompt[1:] + [bonus]
    assert seed.positions == list(range(10))  # positions 0..L-1
    assert seed.feature[0, :, 0].tolist() == list(range(10))  # prefill feature rows 0..L-1
    # K - 1 single chain steps at positions L .. L + K - 2, each fed the previous proposal
    steps = prog.of("draft_decode")[1:4]
    assert [s.positions for s in steps] == [[10], [11], [12]]
    assert steps[0].tokens == [seed.out_ids[-1]]


def test_acceptance_alignment_worked_example(tokenizer):
    """anchor A at 10, K = 4, the draft is wrong about the token at position 13:
    proposals [x, y, z', w'] -> verify_ids [x, y, z, ...] -> a = 2, corrected = z."""
    prog, result = run_toy(tokenizer, program_kw=dict(wrong_at={13}), max_new_tokens=4)
    A = toy.next_token(PROMPT[-1])
    x, y, z = toy.greedy([A], 3)
    verify = prog.of("target_verify")[0]
    assert verify.positions == [10, 11, 12, 13, 14]
    assert verify.tokens[:3] == [A, x, y] and verify.tokens[3] != z
    assert verify.out_ids[:3] == [x, y, z]
    assert result.accepted[0] == 2
    assert result.tokens == [A, x, y, z]  # bonus, then p0, p1, corrected


def test_reseed_tokens_features_and_positions(tokenizer):
    prog, result = run_toy(tokenizer, program_kw=dict(wrong_at={13}), max_new_tokens=12)
    A = toy.next_token(PROMPT[-1])
    x, y, z = toy.greedy([A], 3)
    # calls: seed, 3 chain steps, then after verify #1 the reseed
    reseed = prog.of("draft_decode")[4]
    assert reseed.tokens == [x, y, z]  # p0..p(a-1), corrected
    assert reseed.positions == [10, 11, 12]  # anchor_pos .. anchor_pos + a
    assert reseed.feature[0].tolist() == [[10.0, A], [11.0, x], [12.0, y]]  # verify rows 0..a
    # next round: anchor = z at 13, chain steps at 13, 14, 15
    assert [c.positions for c in prog.of("draft_decode")[5:8]] == [[13], [14], [15]]
    assert prog.of("target_verify")[1].positions == [13, 14, 15, 16, 17]
    assert prog.of("target_verify")[1].tokens[0] == z


@pytest.mark.parametrize(
    "wrong_at, a",
    [
        pytest.param(set(), 4, id="full-acceptance"),
        pytest.param({11}, 0, id="zero-acceptance"),
        pytest.param({14}, 3, id="last-proposal-wrong"),
    ],
)
def test_accepted_count_and_corrected_token(tokenizer, wrong_at, a):
    prog, result = run_toy(tokenizer, program_kw=dict(wrong_at=wrong_at), max_new_tokens=12)
    assert result.accepted[0] == a
    expected = toy.greedy(PROMPT, 1 + a + 1)  # bonus, a accepted, corrected
    assert result.tokens[: a + 2] == expected
    reseed = prog.of("draft_decode")[4]
    assert reseed.positions == list(range(10, 10 + a + 1))


# --- emission: stop tokens and max_new -------------------------------------------------


@pytest.mark.parametrize("j", [0, 1, 3], ids=["stop-at-p0", "stop-at-p1", "stop-at-p3"])
def test_stop_token_in_accepted_proposals_truncates_the_round(tokenizer, j):
    greedy = toy.greedy(PROMPT, 10)  # bonus + 4 accepted + corrected ...
    stop = greedy[1 + j]  # proposal j of round 1 (all accepted)
    prog, result = run_toy(tokenizer, stop_ids=(stop,))
    assert result.tokens == greedy[: 2 + j]
    assert result.stop_reason == "stop"
    assert len(prog.of("target_verify")) == 1


@pytest.mark.parametrize("max_new", [3, 5, 6, 7], ids=lambda n: f"max_new={n}")
def test_max_new_cuts_a_round(tokenizer, max_new):
    # full acceptance, K = 4: round 1 emits 5 tokens (positions 1..5 of the output)
    prog, result = run_toy(tokenizer, max_new_tokens=max_new)
    assert result.tokens == toy.greedy(PROMPT, max_new)
    assert result.stop_reason == "max_new"
    assert result.rounds == (1 if max_new <= 6 else 2)


def test_tau_excludes_the_bonus(tokenizer):
    _, result = run_toy(tokenizer, max_new_tokens=11)  # bonus + 2 full rounds of 5
    assert (len(result.tokens), result.rounds) == (11, 2)
    assert result.tau == 5.0  # (11 - 1) / 2, not 11 / 2


def test_context_limit_stops_generation_mid_request(tokenizer):
    prog, result = run_toy(tokenizer, program_kw=dict(max_seq_len=24, max_prefill=12, wrong_at={13}))
    exp = expected_length(toy.greedy(PROMPT, 64), frozenset(), 32, 10, 4, 24, result.accepted)
    assert (len(result.tokens), result.stop_reason) == (exp.length, "context")
    assert result.tokens == toy.greedy(PROMPT, exp.length)
    assert prog.max_position() < 24


def test_expected_length_worked_example():
    # the example in runners/rules.py: L = 10, K = 4, max_seq_len = 20, accepted = [4, 1] -> 8, context
    ref = list(range(200, 240))
    exp = expected_length(ref, frozenset(), 100, 10, 4, 20, [4, 1])
    assert (exp.length, exp.reason) == (8, "context")


# prefill_chunk: a chunk below the declared min prefill goes to the program, which decides; a refusal
# is one line (worked example in short_chunk_refused: L = 33, max 32, min 9 -> chunk 16 -> [16, 8, 9]).
_FIX = "Fix: export --min-prefill 1, or a chunk >= 2 x min - 1 = 17"


class _Md:  # the Metadata fields prefill_chunk reads
    def __init__(self, min_prefill=9, max_prefill=32, sliding_window=None):
        self.min_prefill, self.max_prefill, self.sliding_window = min_prefill, max_prefill, sliding_window


def _refusing(tokens, positions):
    raise OptionError(f"prefill called with length {tokens.shape[-1]}", "a length in [9, 32]", "re-export")


@pytest.mark.parametrize("t", [8, 9, 16], ids=["below-min", "at-min", "full-chunk"])
def test_prefill_chunk_sends_every_chunk_and_returns_what_the_program_gives(t):
    import torch

    seen = []
    out = prefill_chunk(lambda tok, pos: seen.append(tok.shape[-1]) or ("bonus", "feature"),
                        torch.zeros(1, t), torch.arange(t), [16, 8, 9], _Md())
    assert out == ("bonus", "feature") and seen == [t]


@pytest.mark.parametrize("plan, t, window, head", [
    pytest.param([16, 8, 9], 8, None, "chunked prefill of L = 33, chunks [16, 8, 9] (chunk 16: max prefill // 2): the "
                 "program refused the 8-token chunk, below its declared min prefill 9", id="half-max-prefill"),
    pytest.param([6, 5, 9], 5, 6, "chunked prefill of L = 20, chunks [6, 5, 9] (chunk 6: the sliding window): the "
                 "program refused the 5-token chunk, below its declared min prefill 9", id="sliding-window"),
])
def test_a_refused_short_chunk_names_the_chunk_the_min_the_rule_and_the_fix(plan, t, window, head):
    import torch

    with pytest.raises(OptionError) as e:
        prefill_chunk(_refusing, torch.zeros(1, t), torch.arange(t), plan, _Md(sliding_window=window))
    why = f"OptionError: prefill called with length {t}; expected a length in [9, 32]. Fix: re-export"
    assert str(e.value) == (f"{head}; expected a prefill that takes the chunks of the tail rule (DESIGN §2.4). "
                            f"{_FIX} (the program said: {why})")
    assert len("OptionError: " + str(e.value).split(" (the program said")[0]) <= 300  # whole in a crash line (cut at 300)


def test_a_refusal_of_a_chunk_at_or_above_the_min_is_the_program_s_own_error():
    import torch

    with pytest.raises(OptionError, match="^prefill called with length 9;"):
        prefill_chunk(_refusing, torch.zeros(1, 9), torch.arange(9), [16, 8, 9], _Md())


# --- the lengths allowed when the accepted counts are unknown (a runner binary) ---------


def test_allowed_lengths_worked_example():
    assert allowed_lengths(list(range(100, 130)), frozenset(), max_new_tokens=10, prompt_len=10, k=4,
                           max_seq_len=20) == {7: "context", 8: "context", 9: "context", 10: "max_new"}


@pytest.mark.parametrize("L,k,max_seq_len,max_new,stop_at", [
    (10, 4, 20, 10, None), (10, 4, 48, 30, None), (10, 4, 48, 30, 12), (5, 2, 48, 8, 3), (40, 4, 48, 16, None),
    (10, 3, 48, 6, 0), (10, 4, 48, 1, None), (44, 4, 48, 5, None)],
    ids=lambda v: str(v))
def test_allowed_lengths_hold_every_acceptance_pattern(L, k, max_seq_len, max_new, stop_at):
    """Whatever the per-round accepted counts, expected_length lands inside allowed_lengths (the
    lengths a runner binary, whose counts are unknown, may emit), and every allowed N is reached."""
    ref = list(range(100, 160))
    stops = frozenset() if stop_at is None else frozenset({ref[stop_at]})
    allowed = allowed_lengths(ref, stops, max_new, L, k, max_seq_len)
    reached = {}
    for pattern in itertools.product(range(k + 1), repeat=4):
        exp = expected_length(ref, stops, max_new, L, k, max_seq_len, list(pattern) * 10)
        reached[exp.length] = exp.reason
    assert reached == allowed
