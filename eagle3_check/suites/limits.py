"""Suites on the program's limits: context end, prefill range, chain length K, and state that
must not survive from one program spec to the next (`STATE`, whose order is its point).

Context and prefill cases wish for a small program (max_seq_len 48, prefill range [4, 47]) so
the context end is reached in a few rounds; lengths are relative to the program's metadata,
so a fixed program (a `.pte`) runs them where its prefill range can hold the prompt.
"""

from __future__ import annotations

from eagle3_check.suites.blocks import ALL_K, NONE
from eagle3_check.suites.case import Case, Expect, PromptSpec
from eagle3_check.suites.forcing import FULL, Forcing

SMALL = (("max_seq_len", 48), ("min_prefill", 4), ("max_prefill", 47))


def _room(offset: int) -> PromptSpec:
    return PromptSpec(anchor="room", offset=offset)


CONTEXT = [
    Case("context/room-2-zero", "L + K = max_seq_len - 2, a = 0: two rounds, then the context rule",
         prompt=_room(2), spec=SMALL, forcing=NONE, expect=Expect(reason="context", rounds=2)),
    Case("context/room-2-full", "L + K = max_seq_len - 2, a = K: one round fills max_seq_len - L",
         prompt=_room(2), spec=SMALL, forcing=ALL_K, expect=Expect(reason="context", rounds=1)),
    Case("context/room-1-zero", "L + K = max_seq_len - 1: exactly one round", prompt=_room(1), spec=SMALL,
         forcing=NONE, expect=Expect(reason="context", rounds=1)),
    Case("context/room-1-full", "L + K = max_seq_len - 1, a = K: the round is cut at max_seq_len - L",
         prompt=_room(1), spec=SMALL, forcing=ALL_K, expect=Expect(reason="context", rounds=1)),
    Case("context/room-0", "L + K = max_seq_len: no speculation, the bonus alone, draft untouched",
         prompt=_room(0), spec=SMALL, forcing=ALL_K, expect=Expect(reason="context", rounds=0, draft_calls=0)),
    Case("context/room-past", "L + K = max_seq_len + 1: the bonus alone", prompt=_room(-1), spec=SMALL,
         expect=Expect(reason="context", rounds=0, draft_calls=0)),
    # a = K, K = 4: anchors at L, L + 5, L + 10; with L = max_seq_len - K - (11 + d) the third
    # anchor has anchor_pos + K = max_seq_len - 1 - d: d = 0 is exactly the limit (round 3 runs).
    *(Case(f"context/anchor-limit{d:+d}" if d else "context/anchor-limit",
           f"a = K: the third anchor_pos + K = {where} (round 3 {'runs' if d >= 0 else 'does not run'})",
           prompt=_room(11 + d), spec=SMALL, forcing=ALL_K, k=4,
           options=(("max_new_tokens", 32),), expect=Expect(reason="context", rounds=2 if d < 0 else 3))
      for d, where in ((-1, "max_seq_len"), (0, "max_seq_len - 1"), (1, "max_seq_len - 2"))),
    Case("context/anchor-limit-pattern", "a = K, 1, 0, 2, ...: the context rule mid-generation",
         prompt=_room(12), spec=SMALL, forcing=Forcing((FULL, 1, 0), then=2), k=4,
         options=(("max_new_tokens", 32),), expect=Expect(reason="context")),
    Case("context/cap-at-end", "max new tokens = max_seq_len - L (a = K, one round): stops on max_new",
         prompt=_room(2), spec=SMALL, forcing=ALL_K, max_new_at=(1, 0), expect=Expect(reason="max_new")),
    Case("context/cap-1-before", "max new tokens = max_seq_len - L - 1", prompt=_room(2), spec=SMALL,
         forcing=ALL_K, max_new_at=(1, -1), expect=Expect(reason="max_new")),
    Case("context/cap-1-past", "max new tokens = max_seq_len - L + 1: capped to max_seq_len - L",
         prompt=_room(2), spec=SMALL, forcing=ALL_K, max_new_at=(1, 1), expect=Expect(reason="context")),
    Case("context/last-slot", "L = max_seq_len - 1: max new capped to 1, the bonus alone",
         prompt=PromptSpec(anchor="max_seq_len", offset=-1), spec=SMALL,
         expect=Expect(reason="context", rounds=0, draft_calls=0)),
    Case("context/last-slot-max-new-1", "L = max_seq_len - 1 and max new tokens = 1: stops on max_new",
         prompt=PromptSpec(anchor="max_seq_len", offset=-1), spec=SMALL, options=(("max_new_tokens", 1),),
         expect=Expect(reason="max_new", rounds=0, draft_calls=0)),
]

_L_ERROR = Expect(error="OptionError", mentions=("prompt length L =", "prefill range"))

PREFILL_RANGE = [
    Case("prefill-range/min-1", "L = min prefill - 1 is a clear error",
         prompt=PromptSpec(anchor="min_prefill", offset=-1), spec=SMALL, expect=_L_ERROR),
    Case("prefill-range/min", "L = min prefill runs", prompt=PromptSpec(anchor="min_prefill"), spec=SMALL,
         forcing=ALL_K, expect=Expect(reason="max_new")),
    Case("prefill-range/min+1", "L = min prefill + 1 runs", prompt=PromptSpec(anchor="min_prefill", offset=1),
         spec=SMALL, forcing=ALL_K, expect=Expect(reason="max_new")),
    Case("prefill-range/one-token-prompt", "L = 1 (BOS alone): the seed is the bonus alone at position 0",
         prompt=PromptSpec(length=1), forcing=ALL_K),
    Case("prefill-range/max-1", "L = max prefill - 1 runs", prompt=PromptSpec(anchor="max_prefill", offset=-1),
         spec=SMALL, forcing=ALL_K),
    Case("prefill-range/max", "L = max prefill runs", prompt=PromptSpec(anchor="max_prefill"), spec=SMALL,
         forcing=ALL_K),
    Case("prefill-range/max-default-spec", "L = max prefill on the program's own spec: prefill, then rounds",
         prompt=PromptSpec(anchor="max_prefill"), forcing=ALL_K),
    Case("prefill-range/max+1", "L = max prefill + 1 is a clear error",
         prompt=PromptSpec(anchor="max_prefill", offset=1), spec=SMALL, expect=_L_ERROR),
    Case("prefill-range/empty", "an empty prompt (L = 0) is a clear error", prompt=PromptSpec(length=0),
         options=(("bos_id", -1),), spec=SMALL,
         expect=Expect(error="OptionError", mentions=("prompt is empty",))),
]

_K_ERROR = Expect(error="OptionError", mentions=("chain length K =", "verify window range"))

CHAIN = [
    Case("chain/lo-1", "K one below the supported range is a clear error", k=("lo", -1), expect=_K_ERROR),
    Case("chain/lo", "K at the low end of the range", k=("lo", 0), forcing=ALL_K, options=(("max_new_tokens", 12),),
         expect=Expect(reason="max_new")),
    *(Case(f"chain/k{k}", f"K = {k} (inside the fixture's range)", k=k, forcing=Forcing((FULL, 0, 1), then=FULL),
           options=(("max_new_tokens", 12),), expect=Expect(reason="max_new"))
      for k in range(2, 7)),
    Case("chain/hi", "K at the high end of the range", k=("hi", 0), forcing=ALL_K, options=(("max_new_tokens", 12),),
         expect=Expect(reason="max_new")),
    Case("chain/hi+1", "K one above the supported range is a clear error", k=("hi", 1), expect=_K_ERROR),
]

# One runner instance takes these in order (the suites run a runner across cases): the toy program
# (suites/toy.py, max_seq_len 24) with K at its low end first, then a small program, then the
# default program with K at its high end and a long prompt, then the small one and the toy again.
# Anything the runner sized by an earlier request's program (window, positions, metadata) and kept
# is caught, growing and shrinking. The toy cases run on every program, so a run on one given
# program (the gate's .pte, `check --suite edge --pte`) still changes programs; `edge` runs this
# suite first (`suites.all_cases`), so its first request is the smallest program; `--shuffle`
# keeps this suite's order (its cases are a sequence).
TOY_SMALL = (("max_seq_len", 24), ("max_prefill", 12))
STATE = [
    Case("state/toy-small-first", "first: the toy program (max_seq_len 24), K at the low end",
         prompt=PromptSpec(length=6), k=("lo", 0), toy=TOY_SMALL, options=(("max_new_tokens", 8),),
         expect=Expect(reason="max_new")),
    Case("state/small-spec-k-lo", "then a small program (max_seq_len 48) and K at the low end",
         k=("lo", 0), spec=SMALL, forcing=ALL_K, options=(("max_new_tokens", 8),), expect=Expect(reason="max_new")),
    Case("state/default-spec-k-hi", "then the default program, K at the high end, L = max prefill: nothing sized "
         "by the request before survives", prompt=PromptSpec(anchor="max_prefill"), k=("hi", 0), forcing=ALL_K,
         options=(("max_new_tokens", 24),), expect=Expect(reason="max_new")),
    Case("state/small-spec-again", "then the small program again", k=("lo", 0), spec=SMALL, forcing=ALL_K,
         options=(("max_new_tokens", 8),), expect=Expect(reason="max_new")),
    Case("state/toy-small-again", "then the toy program again, K at its high end: nothing sized by the larger "
         "program survives", prompt=PromptSpec(length=6), k=("hi", 0), toy=TOY_SMALL,
         options=(("max_new_tokens", 12),), expect=Expect(reason="max_new")),
]
