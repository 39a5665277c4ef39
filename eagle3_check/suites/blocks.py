"""Suites on the shape of a block: forced acceptance, one-token requests, stop tokens, budget.

All run on the program's default spec with K = the program's default (forcing makes every
acceptance count reachable whatever the draft's quality). Indices are in emitted tokens
(bonus = 0); round r slot j < a_r is accepted proposal j, slot a_r the corrected token.
"""

from __future__ import annotations

from eagle3_check.suites.case import Case, Expect, StopAt
from eagle3_check.suites.forcing import FULL, Forcing

ALL_K = Forcing((FULL,), then=FULL)
NONE = Forcing((0,), then=0)
TWO = Forcing((2,), then=2)
K4 = 4  # cases whose slots name "the last proposal" / "the corrected token" for K = 4

ACCEPTANCE = [
    Case("acceptance/full", "every proposal accepted each round (a = K)", forcing=ALL_K,
         expect=Expect(reason="max_new")),
    Case("acceptance/partial", "0 < a < K every round (a = 2)", forcing=TWO, expect=Expect(reason="max_new")),
    Case("acceptance/zero", "no proposal accepted (a = 0): one token per round", forcing=NONE,
         expect=Expect(reason="max_new")),
    Case("acceptance/pattern", "a chosen pattern round by round: a = K, 0, 2, 1, K-1, then 1",
         k=K4, forcing=Forcing((FULL, 0, 2, 1, 3), then=1), options=(("max_new_tokens", 24),),
         expect=Expect(reason="max_new")),
    Case("acceptance/unforced", "the real draft, whatever it accepts", expect=Expect(reason="max_new")),
]

ONE_TOKEN = [
    Case("one-token/max-new-1", "max new tokens = 1: the bonus alone, draft_decode never runs",
         options=(("max_new_tokens", 1),), expect=Expect(reason="max_new", draft_calls=0, rounds=0)),
    Case("one-token/max-new-1-full", "max new tokens = 1 with full forcing: still the bonus alone",
         options=(("max_new_tokens", 1),), forcing=ALL_K,
         expect=Expect(reason="max_new", draft_calls=0, rounds=0)),
    Case("one-token/max-new-2-zero", "max new tokens = 2, a = 0: one round, bonus + corrected",
         options=(("max_new_tokens", 2),), forcing=NONE, expect=Expect(reason="max_new", rounds=1)),
    Case("one-token/max-new-2-full", "max new tokens = 2, a = K: one round cut after proposal 0",
         options=(("max_new_tokens", 2),), forcing=ALL_K, expect=Expect(reason="max_new", rounds=1)),
    Case("one-token/max-new-0", "max new tokens = 0 is a clear error",
         options=(("max_new_tokens", 0),), expect=Expect(error="OptionError", mentions=("max new tokens = 0",))),
]

EOS_BONUS = [
    Case("eos-bonus/bonus-is-stop", "the prefill bonus is a stop token: nothing more, the draft never seeded",
         forcing=ALL_K, stop_at=(StopAt(0, 0),), expect=Expect(reason="stop", draft_calls=0, rounds=0)),
    Case("eos-bonus/bonus-is-stop-max-new-1", "bonus is a stop token and max new tokens = 1: stop wins",
         stop_at=(StopAt(0, 0),), options=(("max_new_tokens", 1),),
         expect=Expect(reason="stop", draft_calls=0, rounds=0)),
    Case("eos-bonus/first-after-bonus", "the token after the bonus (proposal 0, accepted) is the stop",
         forcing=ALL_K, stop_at=(StopAt(1, 0),), expect=Expect(reason="stop", rounds=1)),
    Case("eos-bonus/first-after-bonus-zero", "the token after the bonus (corrected, a = 0) is the stop",
         forcing=NONE, stop_at=(StopAt(1, 0),), expect=Expect(reason="stop", rounds=1)),
]

EOS_IN_BLOCK = [
    Case(k=K4, name="eos-in-block/proposal-0", what="stop token as accepted proposal 0 (a = K): nothing after it",
         forcing=ALL_K, stop_at=(StopAt(2, 0),), expect=Expect(reason="stop", rounds=2)),
    Case(k=K4, name="eos-in-block/middle", what="stop token as a middle accepted proposal", forcing=ALL_K,
         stop_at=(StopAt(2, 2),), expect=Expect(reason="stop", rounds=2)),
    Case(k=K4, name="eos-in-block/last-proposal", what="stop token as the last proposal (j = K-1)", forcing=ALL_K,
         stop_at=(StopAt(2, 3),), expect=Expect(reason="stop", rounds=2)),
    Case(k=K4, name="eos-in-block/corrected-full", what="stop token as the corrected token after a = K", forcing=ALL_K,
         stop_at=(StopAt(2, 4),), expect=Expect(reason="stop", rounds=2)),
    Case(k=K4, name="eos-in-block/corrected-partial", what="stop token as the corrected token after a = 2", forcing=TWO,
         stop_at=(StopAt(2, 2),), expect=Expect(reason="stop", rounds=2)),
    Case(k=K4, name="eos-in-block/corrected-zero", what="stop token as the corrected token after a = 0", forcing=NONE,
         stop_at=(StopAt(3, 0),), expect=Expect(reason="stop", rounds=3)),
    Case(k=K4, name="eos-in-block/before-corrected", what="stop token as the last accepted proposal before the corrected",
         forcing=TWO, stop_at=(StopAt(2, 1),), expect=Expect(reason="stop", rounds=2)),
    Case(k=K4, name="eos-in-block/rejected-stop", what="a rejected proposal that is a stop token (EOS 1) stops nothing",
         forcing=Forcing((0, 2, 1), then=2, wrong=1), expect=Expect(reason="max_new")),
    Case(k=K4, name="eos-in-block/two-stops", what="two stop tokens in one block: nothing after the first",
         forcing=ALL_K, stop_at=(StopAt(2, 1), StopAt(2, 3)), expect=Expect(reason="stop", rounds=2)),
    Case(k=K4, name="eos-in-block/two-stops-corrected", what="stop as proposal 0 and as the corrected token of one block",
         forcing=TWO, stop_at=(StopAt(1, 0), StopAt(1, 2)), expect=Expect(reason="stop", rounds=1)),
]

BUDGET = [
    *(Case(f"budget/full-end{off:+d}" if off else "budget/full-end",
           f"a = K: max new tokens {where} the end of round 2", forcing=ALL_K, max_new_at=(2, off),
           expect=Expect(reason="max_new", rounds=2 if off <= 0 else 3))
      for off, where in ((-2, "mid-block, 2 before"), (-1, "1 before"), (0, "exactly at"),
                         (1, "1 past"), (2, "2 past"))),
    *(Case(f"budget/partial-end{off:+d}" if off else "budget/partial-end",
           f"a = 2: max new tokens {where} the end of round 2", forcing=TWO, max_new_at=(2, off),
           expect=Expect(reason="max_new", rounds=2 if off <= 0 else 3))
      for off, where in ((-1, "1 before"), (0, "exactly at"), (1, "1 past"))),
    *(Case(f"budget/zero-end{off:+d}" if off else "budget/zero-end",
           f"a = 0: max new tokens {where} the end of round 3", forcing=NONE, max_new_at=(3, off),
           expect=Expect(reason="max_new", rounds=3 + off))
      for off, where in ((-1, "1 before"), (0, "exactly at"), (1, "1 past"))),
    Case("budget/stop-at-limit", "the corrected token is a stop token and the last allowed one: stop wins",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 4),), max_new_at=(2, 0), expect=Expect(reason="stop", rounds=2)),
    Case("budget/stop-at-limit-mid", "an accepted proposal is a stop token and the last allowed one",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 1),), max_new_at=(2, -3), expect=Expect(reason="stop", rounds=2)),
    Case("budget/stop-one-past-limit", "the stop token would come one past max new tokens: never emitted",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 4),), max_new_at=(2, -1),
         expect=Expect(reason="max_new", rounds=2)),
]

_ONLY = (("stop_ids", ()), ("stop_token", None), ("eos_id", None))  # no other stop source
STOP_SET = [
    Case("stop-set/stop-ids", "a token of the output given in stop ids ends the run there",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 2),), options=_ONLY, expect=Expect(reason="stop", rounds=2)),
    Case("stop-set/eos-id", "a token of the output given as eos id ends the run there",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 2, via="eos_id"),), options=_ONLY,
         expect=Expect(reason="stop", rounds=2)),
    Case("stop-set/program-eos", "a token of the output in the program's get_eos_ids ends the run there",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 2, via="program_eos"),), options=_ONLY,
         expect=Expect(reason="stop", rounds=2)),
    Case("stop-set/stop-token", "a stop token string that encodes to one token of the output ends the run",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 2, via="stop_token"),), options=_ONLY,
         expect=Expect(reason="stop", rounds=2)),
    Case("stop-set/stop-string-multi", "a stop string of two output tokens is not a stop (said in the notes)",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 2, via="stop_string_multi"),), options=_ONLY,
         expect=Expect(reason="max_new", note="not added to the stop set")),
    # each source alone on a program / tokenizer variant whose EOS ids differ (issue 20)
    Case("stop-set/program-eos-only", "the program's get_eos_ids = [this token] alone, the tokenizer's EOS "
         "another id: the program's list stops", forcing=ALL_K, k=K4,
         stop_at=(StopAt(2, 2, via="program_eos_only"),), options=_ONLY, expect=Expect(reason="stop", rounds=2)),
    Case("stop-set/tokenizer-eos", "no get_eos_ids on the program: the tokenizer's EOS (this token) stops",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 2, via="tokenizer_eos"),), options=_ONLY,
         expect=Expect(reason="stop", rounds=2)),
    Case("stop-set/tokenizer-eos-empty-list", "an empty get_eos_ids falls back to the tokenizer's EOS (this token)",
         forcing=ALL_K, k=K4, stop_at=(StopAt(2, 2, via="tokenizer_eos_empty_list"),), options=_ONLY,
         expect=Expect(reason="stop", rounds=2)),
    Case("stop-set/tokenizer-eos-shadowed", "the tokenizer's EOS is this token but the program's get_eos_ids "
         "lists another: the program's list replaces it, no stop", forcing=ALL_K, k=K4,
         stop_at=(StopAt(2, 2, via="tokenizer_eos_shadowed"),), options=_ONLY, expect=Expect(reason="max_new")),
    Case("stop-set/stop-token-not-key", "a stop string that encodes to this one token but is not a vocabulary "
         "key (' the', key 'Ġthe'): a stop (rule 2 encodes)", forcing=ALL_K, k=K4,
         stop_at=(StopAt(2, 2, via="stop_token_not_key"),), options=_ONLY, expect=Expect(reason="stop", rounds=2)),
    Case("stop-set/vocab-key-multi", "the token's vocabulary key as stop string ('Ġthe') encodes to several "
         "tokens: not a stop (rule 2 encodes, it does not look up)", forcing=ALL_K, k=K4,
         stop_at=(StopAt(2, 2, via="vocab_key_multi"),), options=_ONLY,
         expect=Expect(reason="max_new", note="not added to the stop set")),
]
