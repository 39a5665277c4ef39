"""An oracle that is not the code under test (issue 11 part 5): hard-coded expected values.

`options.stop_set`, `options.prompt_ids` and `rules.expected_length` are both the runner's
helpers and the harness's oracle, so a bug in them agrees with itself. The tables below were
written by hand from DESIGN §2 (rules 2-5, 7-9) and the committed tokenizer of the default
fixture (fixtures/tiny-llama/tokenizer.json, a byte-level BPE whose vocab spells a space 'Ġ'
and a newline 'Ċ'), never by running the functions under test. Ids used, from that file:

    <eos> 1 (also tokenizer_config's eos_token)   <bos> 2     <eot> 50
    <|channel> 100   <channel|> 101   <|turn> 105   <turn|> 106
    'H' 146  'i' 179  'us' 433  'er' 368  'Ċ' 305  'Ġ' 327  'ĠĠ' 437  'Ġthe' 366  're' 374
    'm' 183  'od' 446  'e' 175  'l' 182  't' 190  'h' 178  'ou' 386  'gh' 468
    '¡' 201 (its string is one character, but byte-level encoding spells it with two ids)
"""

from __future__ import annotations

import pytest

from eagle3_check.program.contract import read_metadata
from eagle3_check.runners.options import RunOptions, prompt_ids, stop_set
from eagle3_check.runners.rules import CONTEXT, EARLY, MAX_NEW, STOP, expected_length

EOS, BOS, EOT, TURN_OPEN, TURN_CLOSE = 1, 2, 50, 105, 106
NL, H, LOWER_I = 305, 146, 179
PREFIX_IDS = [TURN_OPEN, 433, 368, NL]  # '<|turn>' 'us' 'er' 'Ċ'
SUFFIX_IDS = [TURN_CLOSE, NL, TURN_OPEN, 183, 446, 175, 182, NL, 100, 190, 178, 386, 468, 190, NL, 101]
# '<turn|>' 'Ċ' '<|turn>' 'm' 'od' 'e' 'l' 'Ċ' '<|channel>' 't' 'h' 'ou' 'gh' 't' 'Ċ' '<channel|>'


def _md(program_metadata: dict, eos: list[int] | None):
    raw = {k: v for k, v in program_metadata.items() if k != "get_eos_ids"}
    if eos is not None:
        raw["get_eos_ids"] = eos
    return read_metadata(raw)


NONE = dict(stop_ids=(), eos_id=None, stop_token=None)

# (id, program get_eos_ids (None: the program has no such method), options, expected stop set)
STOP_TABLE = [
    ("defaults-no-program-eos", None, {}, {EOS, EOT, TURN_CLOSE}),  # tokenizer 1, eos 1, 1,50,106, <turn|>
    ("tokenizer-eos-alone", None, NONE, {EOS}),
    ("program-eos-replaces-tokenizer-eos", [7], NONE, {7}),
    ("program-eos-list", [7, 9], NONE, {7, 9}),
    ("program-eos-plus-eos-id", [7], {**NONE, "eos_id": 9}, {7, 9}),
    ("eos-id-minus-1-not-added", [7], {**NONE, "eos_id": -1}, {7}),
    ("eos-id-is-tokenizer-eos", [7], {**NONE, "eos_id": EOS}, {7, EOS}),
    ("stop-ids-added", [7], {**NONE, "stop_ids": (11, 12)}, {7, 11, 12}),
    ("defaults-with-program-eos", [7], {}, {7, EOS, EOT, TURN_CLOSE}),
    ("stop-token-special", None, {**NONE, "stop_token": "<turn|>"}, {EOS, TURN_CLOSE}),
    ("stop-token-not-a-vocab-key-one-token", [7], {**NONE, "stop_token": " the"}, {7, 366}),  # ' the' -> 'Ġthe'
    ("stop-token-vocab-key-several-tokens", [7], {**NONE, "stop_token": "Ġthe"}, {7}),  # key of 366; 4 ids
    ("stop-token-one-char-two-ids", [7], {**NONE, "stop_token": "¡"}, {7}),  # key of 201; bytes C2 A1
    ("stop-token-two-tokens", [7], {**NONE, "stop_token": "Hi"}, {7}),  # 'H' 'i'
]


@pytest.mark.parametrize("program_eos, opts, want", [pytest.param(*row[1:], id=row[0]) for row in STOP_TABLE])
def test_stop_set_table(program_eos, opts, want, tokenizer, program):
    got = stop_set(tokenizer, _md(program.metadata(), program_eos), RunOptions(**opts))
    assert set(got.ids) == want


@pytest.mark.parametrize("stop_token, n_ids", [("Ġthe", 4), ("¡", 2), ("Hi", 2)])
def test_a_stop_token_of_several_ids_is_said_in_the_notes(stop_token, n_ids, tokenizer, program):
    got = stop_set(tokenizer, _md(program.metadata(), None), RunOptions(**{**NONE, "stop_token": stop_token}))
    assert len(got.notes) == 1 and f"encodes to {n_ids} tokens" in got.notes[0] and repr(stop_token) in got.notes[0]


CHAT = dict(chat_prefix="<|turn>user\n", chat_suffix="<turn|>\n<|turn>model\n<|channel>thought\n<channel|>")

# (id, text, options, expected prompt ids)
PROMPT_TABLE = [
    ("chat-default", "Hi", {}, [BOS, *PREFIX_IDS, H, LOWER_I, *SUFFIX_IDS]),
    ("chat-bos-minus-1", "Hi", {"bos_id": -1}, [*PREFIX_IDS, H, LOWER_I, *SUFFIX_IDS]),
    ("raw", "Hi", {"raw": True}, [BOS, H, LOWER_I]),
    ("raw-bos-minus-1", "Hi", {"raw": True, "bos_id": -1}, [H, LOWER_I]),
    ("raw-other-bos", "Hi", {"raw": True, "bos_id": 0}, [0, H, LOWER_I]),
    ("raw-whitespace-kept", "  Hi  \n", {"raw": True}, [BOS, 327, 327, H, LOWER_I, 437, NL]),  # Ġ Ġ H i ĠĠ Ċ
    ("raw-newlines-kept", "\n\nHi\n\n", {"raw": True}, [BOS, NL, NL, H, LOWER_I, NL, NL]),
    ("chat-newlines-kept", "\nHi there\n", {}, [BOS, *PREFIX_IDS, NL, H, LOWER_I, 366, 374, NL, *SUFFIX_IDS]),
    ("custom-chat", "Hi", {"chat_prefix": "Hi", "chat_suffix": "\n"}, [BOS, H, LOWER_I, H, LOWER_I, NL]),
    ("empty-chat", "Hi", {"chat_prefix": "", "chat_suffix": ""}, [BOS, H, LOWER_I]),
]


@pytest.mark.parametrize("text, opts, want", [pytest.param(*row[1:], id=row[0]) for row in PROMPT_TABLE])
def test_prompt_ids_table(text, opts, want, tokenizer):
    assert RunOptions().chat_prefix == CHAT["chat_prefix"] and RunOptions().chat_suffix == CHAT["chat_suffix"]
    assert prompt_ids(tokenizer, text, RunOptions(**opts)) == want


REF = list(range(10, 40))  # a reference whose token at index i is 10 + i (30 tokens)

# (id, stop ids, max_new_tokens, L, K, max_seq_len, accepted per round, expected (length, reason))
# Worked by hand from DESIGN §2: max_new = min(max_new_tokens, max_seq_len - L) (rule 5); the bonus
# is always emitted; speculate while emitted < max_new, no stop, anchor_pos + K <= max_seq_len - 1
# (rules 7, 9); a round emits a + 1 tokens one by one, ending at max_new or right after a stop.
LENGTH_TABLE = [
    # L 10, K 4, max_seq_len 20: max_new = min(100, 10) = 10 (a context cap). bonus: n 1;
    # r1 10 + 4 <= 19, a 4: n 6, anchor 15; r2 15 + 4 = 19 <= 19, a 1: n 8, anchor 17; 21 > 19: stop.
    ("context-after-two-rounds", set(), 100, 10, 4, 20, [4, 1, 4], (8, CONTEXT)),
    # the same with a = 4 twice: r2 at anchor 15 (15 + 4 = 19 <= 19) would emit 5 tokens (n 11), but
    # max_new = 10 cuts it at n 10: the only place where rule 5's cap binds before the context rule.
    ("context-cap-cuts-the-last-round", set(), 100, 10, 4, 20, [4, 4], (10, CONTEXT)),
    # L 16 + K 4 = 20 > 19: no round at all (rule 7), the bonus alone.
    ("context-no-round", set(), 100, 16, 4, 20, [4], (1, CONTEXT)),
    # L 12, K 3, max_seq_len 20: r1 12 + 3 = 15, a 3: n 5, anchor 16; r2 16 + 3 = 19 <= 19, a 0: n 6,
    # anchor 17; 17 + 3 = 20 > 19: stop. (max_new = 8 is not reached.)
    ("context-boundary-exact", set(), 100, 12, 3, 20, [3, 0, 3], (6, CONTEXT)),
    # L 250, max_seq_len 256: max_new = min(100, 6) = 6, a context cap; r1 a 4: n 2..6, ends at 6.
    ("context-cap-inside-a-round", set(), 100, 250, 4, 256, [4, 4], (6, CONTEXT)),
    ("stop-at-bonus", {10}, 50, 10, 4, 256, [4, 4], (1, STOP)),
    ("max-new-1", set(), 1, 10, 4, 256, [4, 4], (1, MAX_NEW)),
    # bonus 10; r1 a 4: 11..15 (n 6); r2: 16 (n 7), 17 is a stop (n 8): ends right after it.
    ("stop-inside-a-round", {17}, 50, 10, 4, 256, [4, 4], (8, STOP)),
    # r1 a 1: 11 (n 2), corrected 12 (n 3) is a stop.
    ("stop-at-corrected", {12}, 50, 10, 4, 256, [1, 4], (3, STOP)),
    # max_new 4: r1 a 4 emits 11, 12, 13 (n 2..4) and ends inside the round.
    ("max-new-inside-a-round", set(), 4, 10, 4, 256, [4, 4], (4, MAX_NEW)),
    # max_new 6: r1 a 4 ends exactly at the round's end (n 6).
    ("max-new-at-round-end", set(), 6, 10, 4, 256, [4, 4], (6, MAX_NEW)),
    # the stop token is also the max_new-th token: the stop is what the run ends on.
    ("stop-and-max-new-same-token", {12}, 3, 10, 4, 256, [4], (3, STOP)),
    # r1 a 2: n 4, anchor 13; the run reported no more rounds, yet 13 + 4 <= 255: it stopped early.
    ("stopped-early", set(), 50, 10, 4, 256, [2], (4, EARLY)),
]


@pytest.mark.parametrize("stops, max_new_tokens, L, k, max_seq_len, accepted, want",
                         [pytest.param(*row[1:], id=row[0]) for row in LENGTH_TABLE])
def test_expected_length_table(stops, max_new_tokens, L, k, max_seq_len, accepted, want):
    got = expected_length(REF, frozenset(stops), max_new_tokens, L, k, max_seq_len, accepted)
    assert (got.length, got.reason) == want
