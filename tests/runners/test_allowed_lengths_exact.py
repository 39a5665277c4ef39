"""`rules.allowed_lengths` is exactly the lengths some per-round acceptance reaches (its docstring's
claim, both ways): over a grid of small requests, every acceptance pattern is replayed through
`rules.expected_length` and the lengths it lands on, with their reasons, must equal the dict
`allowed_lengths` returns (a runner binary is judged by it: a length too many lets a wrong binary
pass, one too few fails a right one). Plus hand-written boundary rows (DESIGN §2 rules 5, 7, 9).
"""

from __future__ import annotations

import itertools

import pytest

from eagle3_check.runners.rules import (
    CONTEXT,
    EARLY,
    MAX_NEW,
    STOP,
    allowed_lengths,
    expected_length,
)

REF = list(range(100, 160))


def reached(ref, stops, max_new, L, k, max_seq_len) -> dict[int, str]:
    """n -> reason over every acceptance pattern (a in 0..K per round, enough rounds to end)."""
    rounds = min(max_new, max_seq_len - L) + 1
    out: dict[int, str] = {}
    for pattern in itertools.product(range(k + 1), repeat=min(rounds, 6)):
        accepted = list(pattern) + [k] * max(0, rounds - len(pattern))
        exp = expected_length(ref, stops, max_new, L, k, max_seq_len, accepted)
        assert exp.reason != EARLY, (pattern, exp)
        assert out.get(exp.length, exp.reason) == exp.reason, (exp, out)
        out[exp.length] = exp.reason
    return out


GRID = [(L, k, msl, mn, stop) for L, k, msl, mn, stop in itertools.product(
    (3, 10), (1, 2, 3), (14, 17, 20), (1, 2, 5, 9, 30), (None, 4))]


@pytest.mark.parametrize("L, k, max_seq_len, max_new, stop_at", GRID,
                         ids=[f"L{g[0]}-K{g[1]}-S{g[2]}-N{g[3]}-stop{g[4]}" for g in GRID])
def test_allowed_lengths_are_exactly_the_reachable_ones(L, k, max_seq_len, max_new, stop_at):
    stops = frozenset() if stop_at is None else frozenset({REF[stop_at - 1]})
    if L >= max_seq_len:
        pytest.skip("the prompt does not fit")
    assert allowed_lengths(REF, stops, max_new, L, k, max_seq_len) == reached(REF, stops, max_new, L, k, max_seq_len)


# (what, max_new_tokens, L, K, max_seq_len, expected) written from DESIGN §2, not by running the code
ROWS = [
    ("max new 1: the bonus alone", 1, 10, 4, 40, {1: MAX_NEW}),
    ("max new 2: bonus + one round's first token", 2, 10, 4, 40, {2: MAX_NEW}),
    ("max new 1 where the context also ends: max new is the reason", 1, 10, 4, 14, {1: MAX_NEW}),
    ("L + K = max_seq_len - 1: one round runs", 30, 10, 4, 15, {2: CONTEXT, 3: CONTEXT, 4: CONTEXT, 5: CONTEXT}),
    ("L + K = max_seq_len: the bonus alone", 30, 10, 4, 14, {1: CONTEXT}),
    ("context from n = 2 on", 30, 10, 1, 12, {2: CONTEXT}),
    ("the limit at ctx + K is reached by max new", 6, 10, 2, 16, {5: CONTEXT, 6: MAX_NEW}),
]


@pytest.mark.parametrize("max_new, L, k, max_seq_len, want", [pytest.param(*r[1:], id=r[0]) for r in ROWS])
def test_allowed_lengths_boundary_rows(max_new, L, k, max_seq_len, want):
    assert allowed_lengths(REF, frozenset(), max_new, L, k, max_seq_len) == want


def test_a_stop_bonus_is_one_token():
    assert allowed_lengths(REF, frozenset({REF[0]}), 30, 10, 4, 40) == {1: STOP}
