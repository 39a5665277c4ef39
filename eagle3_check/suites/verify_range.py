"""The verify-range suite: K asked of programs whose verify range is narrower than the seed's
clamp [1, 7], inside, at and past each bound, on the toy program (suites/toy.py), whose
`target_verify` takes only the windows C its declared range allows (as an exported method does).

Every CLI program and fixture has verify range [2, 8] (K in [1, 7]): there a runner that clamps K
into the program's range and one that clamps into [1, 7] (main.cpp from #20345) do the same. On
[2, 5] (K in [1, 4], get_chain_len 3) and [3, 3] (K = 2 only, get_chain_len 2) they differ, and
each profile's rule (runners/profiles.py, DESIGN §2) fixes the outcome exactly:

| --chain | [2, 5] design | [2, 5] k-runtime, chunked-prefill | [3, 3] design | [3, 3] k-runtime, chunked-prefill |
|---|---|---|---|---|
| 0 | error | runs K 3 (get_chain_len) | error | runs K 2 (get_chain_len) |
| 1 | runs K 1 | runs K 1 | error | error (the runtime's: C = 2) |
| 2 / 3 | runs | runs | K 2 runs, K 3 error | K 2 runs, K 3 error (C = 4) |
| 4 | runs K 4 | runs K 4 | - | - |
| 5, 7 | error | error (the runtime's: C = K + 1) | - | - |
| 8 | error | error (clamped to 7: C = 8) | error | error (clamped to 7) |

"error" under a clamping profile is the runtime's error: the clamped K is one the program's
target_verify cannot take, so the runner refuses it before any call (ours: `check_options`) or
the program refuses the window at its first target_verify (the seed's binary); a run of any
other K fails (a runner that clamps into the program's range runs K 4 for --chain 7). Under
runner-pr (no --chain) every K other than get_chain_len is refused (`turns.profile_refuses`).
"""

from __future__ import annotations

from eagle3_check.suites.case import Case, Expect, PromptSpec

_WIDE = (("verify_range", (2, 5)), ("chain_len", 3))  # K in [1, 4]
_ONE = (("verify_range", (3, 3)), ("chain_len", 2))  # K = 2 only
_K_ERROR = Expect(error="OptionError", mentions=("chain length K =", "verify window range"))
_RUN = Expect(reason="max_new")


def _case(name: str, what: str, toy, k: int, expect: Expect) -> Case:
    return Case(f"verify-range/{name}", what, prompt=PromptSpec(length=6), k=k, toy=toy,
                options=(("max_new_tokens", 10),), expect=expect)


VERIFY_RANGE = [
    _case("2-5-k0", "verify range [2, 5], --chain 0: get_chain_len under a clamp, else an error", _WIDE, 0, _K_ERROR),
    _case("2-5-k1", "verify range [2, 5], K 1: the low bound runs", _WIDE, 1, _RUN),
    _case("2-5-k2", "verify range [2, 5], K 2: inside runs", _WIDE, 2, _RUN),
    _case("2-5-k4", "verify range [2, 5], K 4: the high bound runs", _WIDE, 4, _RUN),
    _case("2-5-k5", "verify range [2, 5], K 5: one past the high bound is refused (no clamp into the range)",
          _WIDE, 5, _K_ERROR),
    _case("2-5-k7", "verify range [2, 5], K 7: inside [1, 7] but past the program's range: refused, never K 4",
          _WIDE, 7, _K_ERROR),
    _case("2-5-k8", "verify range [2, 5], K 8: clamped to 7 (or refused), never run", _WIDE, 8, _K_ERROR),
    _case("3-3-k0", "verify range [3, 3], --chain 0: get_chain_len 2 under a clamp, else an error", _ONE, 0, _K_ERROR),
    _case("3-3-k1", "verify range [3, 3], K 1: below the program's range, inside [1, 7]: refused, never K 2",
          _ONE, 1, _K_ERROR),
    _case("3-3-k2", "verify range [3, 3], K 2: the one K it takes runs", _ONE, 2, _RUN),
    _case("3-3-k3", "verify range [3, 3], K 3: past the range is refused", _ONE, 3, _K_ERROR),
    _case("3-3-k8", "verify range [3, 3], K 8: clamped to 7 (or refused), never run", _ONE, 8, _K_ERROR),
]
