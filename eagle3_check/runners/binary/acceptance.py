"""A runner binary's acceptance held to our runner's on the same program and options, exactly.

On one program our reference runner is deterministic and makes the calls the seed's runner makes
(the profile's rules, runners/profiles.py), so a binary's rounds R and tau = (N - 1) / R are ours,
not only within ceil((N - 1) / (K + 1)) <= R <= N - 1 (`judge.binary.header_problems`): a binary that
reports one round more, and recomputes tau to match, fails here.

A text-only binary prints no acceptance per round (only R and tau): where it differs, the message
gives ours per round, and names the first round that differs only where the binary's per-round
counts are known (`binary_accepted`); where the draft's margin at that round is at hand
(`draft_margins`, the draft's top-1 over its runner-up per round) and under `NEAR_TIE`, it says a
draft near-tie explains it.

Worked example: ours accepted [4, 2, 0], N = 1 + 5 + 3 + 1 = 10, R = 3, tau 3.000; a binary that
reports R = 4, tau 2.250 fails: "acceptance: the binary reports 4 rounds (tau 2.250), our runner on
the same program and options 3 (tau 3.000; accepted per round [4, 2, 0]) ...".
"""

from __future__ import annotations

NEAR_TIE = 0.5  # logits: a draft margin under this is a near-tie a numerics change can flip (bf16's tie tolerance)


def acceptance_problem(rounds: int, tau: float, tokens: int, ours_accepted: list[int], ours_tokens: int,
                       binary_accepted: list[int] | None = None, draft_margins: list[float] | None = None) -> str | None:
    """None when the binary's R and tau are ours (tau to the printed 3 decimals), else one line."""
    ours_rounds = len(ours_accepted)
    ours_tau = (ours_tokens - 1) / ours_rounds if ours_rounds else 0.0
    if tokens != ours_tokens:  # another length: the verdict judges it, rounds cannot be compared
        return None
    if rounds == ours_rounds and abs(tau - ours_tau) <= 5e-4 + 1e-9 and \
            (binary_accepted is None or binary_accepted == ours_accepted):
        return None
    msg = (f"acceptance: the binary reports {rounds} rounds (tau {tau:.3f}), our runner on the same program and "
           f"options {ours_rounds} (tau {ours_tau:.3f}; accepted per round {ours_accepted})")
    if binary_accepted is None:
        return msg + "; the binary prints no acceptance per round, so the first round that differs is not named"
    r = next(i for i in range(max(len(binary_accepted), ours_rounds) + 1)
             if i >= len(binary_accepted) or i >= ours_rounds or binary_accepted[i] != ours_accepted[i])
    got = binary_accepted[r] if r < len(binary_accepted) else None
    want = ours_accepted[r] if r < ours_rounds else None
    msg += f"; first differs at round {r + 1}: the binary accepted {got}, ours {want}"
    if draft_margins is not None and r < len(draft_margins) and draft_margins[r] < NEAR_TIE:
        msg += f" (a draft near-tie explains it: the draft's margin there is {draft_margins[r]:.3g} < {NEAR_TIE})"
    return msg


def our_run(program, tokenizer, text: str, options, profile: str):
    """Our reference runner's run of the request the binary got, under the binary's profile."""
    from eagle3_check.runners.loop import ReferenceRunner
    from eagle3_check.runners.profiles import declare

    runner = ReferenceRunner()
    declare(runner, profile)
    return runner.run(program, tokenizer, text, options)


def held_to_ours(verdict, out, ref_tokens: list[int], program, tokenizer, text: str, options, profile: str) -> None:
    """Fails `verdict` (an ExecVerdict that passed) when the binary's R or tau differ from our runner's
    on the same program and options (`options` as the binary got them). Compared only where our
    tokens are the binary's (the verdict passed on the reference's greedy tokens, and ours are those
    too): a tie taken the other way legitimately changes the acceptance. Our runner refusing the
    request compares nothing (the verdict and the header checks judge the binary); any other error of
    our runner is raised (a harness bug, never the binary's verdict)."""
    from eagle3_check.errors import Eagle3CheckError
    from eagle3_check.status import FAIL, PASS

    if out is None or verdict.status != PASS:
        return
    try:
        ours = our_run(program, tokenizer, text, options, profile)
    except Eagle3CheckError:  # our runner refuses what the binary ran: nothing to hold it to
        return
    if len(ours.tokens) != out.tokens or list(ours.tokens) != list(ref_tokens[: len(ours.tokens)]):
        return
    problem = acceptance_problem(out.rounds, out.tau, out.tokens, list(ours.accepted), len(ours.tokens))
    if problem:
        verdict.status, verdict.message, verdict.fails = FAIL, problem, max(verdict.fails, 1)
