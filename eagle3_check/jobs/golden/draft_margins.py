"""The draft's near-ties a golden's acceptance hangs on.

Tokens are the target's and hold on every program of a fixture; acceptance is the draft's. Where the
draft's top-1/top-2 margin at a proposal is inside the tie tolerance, rounding settles that proposal
differently on another export of the same spec (SmolLM2's bf16 `code-explain-recursion`: round 4's
proposal 0 is 4476 against 1909 at a draft margin of 0.0625 to 0.125, 9 rounds on one export and 10
on the next, the text identical). `golden record` measures every proposal's draft margin on an eager
program and stores the near-ties in the golden; `golden verify` names them where acceptance differs.

A proposal's round and index come from the order of `draft_decode` calls: each round consumes K
proposals, the reseed (or, in round 0, the seed) giving proposal 0 and K - 1 single steps the rest.
Worked example, K = 4: calls 0-3 are round 0's proposals 0-3, call 5 is round 1's proposal 1; a call
past rounds x K (a reseed after the last verify) proposes for no verified round and is left out.
Proposal j of round r is looked at only when j <= accepted[r] (the first rejected one, or the bonus
position when all K were accepted, is the last compared), so only those can move acceptance.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager


@contextmanager
def draft_margin_probe(program) -> Iterator[list[tuple[float, float]] | None]:
    """Collects, while open, (top-1/top-2 margin, top-1 logit) of the draft's logits at every
    `draft_decode` call's proposal (its last row), in call order; yields None where the program has
    no eager draft head to read logits from (a `.pte` or a runner binary returns ids only)."""
    module = getattr(program, "module", None)
    draft = getattr(module, "draft", None)
    register = getattr(draft, "register_forward_hook", None)
    if register is None:
        yield None
        return
    margins: list[tuple[float, float]] = []

    def hook(_module, _inputs, out) -> None:
        logits = out[0]  # [1, T, Vd]: the draft's logits; the proposal is the last row's argmax
        top = logits[0, -1].float().topk(2).values
        margins.append((float(top[0] - top[1]), float(top[0])))

    handle = register(hook)
    try:
        yield margins
    finally:
        handle.remove()


def near_ties(margins: list[tuple[float, float]], k: int, accepted: list[int],
               bound: Callable[[float], float]) -> list[dict]:
    """[{round, proposal, margin}] of the proposals whose draft margin is <= bound(top-1 logit) (the
    tie tolerance at that row) and that a verify looked at (j <= accepted[round]); `margins` as
    `draft_margin_probe` collects them, in `draft_decode` call order (module docstring)."""
    out = []
    for i, (m, top) in enumerate(margins[: k * len(accepted)]):
        r, j = divmod(i, k)
        if j <= accepted[r] and m <= bound(top):
            out.append({"round": r, "proposal": j, "margin": float(f"{m:.6g}")})
    return out


def describe(ties: list[dict] | None, first_round: int | None = None) -> str:
    """The near-ties as a note's clause: those at or before `first_round` (the first round whose
    acceptance differs) when given; says so where the golden measured none or could not."""
    if ties is None:
        return "the golden holds no draft margins (recorded before goldens kept them, or on a program that returns ids only)"
    shown = [t for t in ties if first_round is None or t["round"] <= first_round]
    if not shown:
        return "the golden recorded no draft near-tie" + (f" up to round {first_round}" if first_round is not None else "")
    return "the golden's draft near-ties: " + ", ".join(
        f"round {t['round']} proposal {t['proposal']} (draft margin {t['margin']:g})" for t in shown[:4]) + (
        f" and {len(shown) - 4} more" if len(shown) > 4 else "")
