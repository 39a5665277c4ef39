"""How a runner profile (runners/profiles.py) changes an edge case's expectation: the error cases a
profile runs instead of refusing (`profile_turns`), the requests it must refuse (`profile_refuses`:
runner-pr and a K other than get_chain_len), the errors that are the runtime's rather than the
runner's (`runtime_refusal`), and the cases it cannot take (`profile_skip`).
One rule for every runner, in process (a declared or given profile) or a binary (detected or given).

Example (get_chain_len 4, K range [1, 7]): under k-runtime and chunked-prefill, `chain/lo-1`
(--chain=0) runs K = 4 and `chain/hi+1` (--chain=8) runs K = 7, each with the clamped K checked;
under chunked-prefill `prefill-range/max+1` is a chunked run. Under `design` (our reference
runner, DESIGN §2 as written) and runner-pr they stay errors.
"""

from __future__ import annotations

from eagle3_check.runners.profiles import RunnerProfile
from eagle3_check.suites.case import Case, Expect
from eagle3_check.suites.request import CaseSkip


def profile_turns(case: Case, md, k_asked: int | None, prof: RunnerProfile) -> str | None:
    """Why the runner's profile runs an error case instead of refusing it (None: the case stays):
    K at runtime maps any --chain to a K in [1, 7] (<= 0: get_chain_len), so a K outside the
    program's range is a run of the clamped K when the program takes that one; chunked prefill
    chunks a prompt past max prefill."""
    if not case.expect.error:
        return None
    lo, hi = md.k_range
    if "chain length K =" in case.expect.mentions and prof.chain_flag and prof.clamps and k_asked is not None:
        k = prof.chain_k(k_asked, md.chain_len)
        if lo <= k <= hi:
            return (f"profile {prof.name} ({prof.pr}) runs --chain={k_asked} as K = {k} (<= 0: get_chain_len, then "
                    "clamped to [1, 7]) instead of refusing it; the K run is checked")
    if "prefill range" in case.expect.mentions and prof.chunks and case.prompt.anchor == "max_prefill" \
            and case.prompt.offset > 0:
        return (f"profile {prof.name} ({prof.pr}) chunks a prompt past max prefill {md.max_prefill} instead of "
                "refusing it")
    return None


def profile_skip(options, md, prof: RunnerProfile, who: str) -> None:
    """CaseSkip where the profile cannot take the case's options (`who`: "the binary's" / "the
    runner's"): chunked prefill on a profile that does not chunk (the design profile chunks when
    asked), a K other than get_chain_len on a profile without --chain."""
    if options.chunked_prefill and not prof.chunks and prof.clamps:
        raise CaseSkip(f"chunked prefill: {who} profile {prof.name} ({prof.pr}) does not chunk")
    if options.chain_len not in (None, md.chain_len) and not prof.chain_flag:  # in process: profile_refuses
        raise CaseSkip(f"needs K = {options.chain_len} (not the program's default {md.chain_len}) and {who} profile "
                       f"{prof.name} has no --chain")


# the runner-PR runner has no --chain: the one it runs (`RunnerProfile.request`) refuses any other K
REFUSED_K = Expect(error="OptionError", mentions=("chain length K =", "runner-pr"))


def profile_refuses(options, md, prof: RunnerProfile) -> str | None:
    """Why the profile must refuse this request whatever the case expects (None: it need not): a K
    other than get_chain_len under a profile without --chain (runner-pr). Example (get_chain_len 4):
    runner-pr and K 3 -> refused (a runner that runs K 4 instead fails); K 4 or none -> None."""
    if not prof.chain_flag and options.chain_len not in (None, md.chain_len):
        return (f"profile {prof.name} ({prof.pr}) has no --chain: K = {options.chain_len} (not get_chain_len "
                f"{md.chain_len}) must be refused, never run as K = {md.chain_len}")
    return None


def runtime_refusal(case: Case, md, k_asked: int | None, prof: RunnerProfile) -> str | None:
    """Where the refusal of a K error case may be the runtime's instead of the runner's (None: the
    runner's alone): a clamping profile whose clamped K is outside the program's range (DESIGN §2:
    "a clamped K the program's target_verify cannot take is the runtime's error"). Then the program's
    own refusal of the window at target_verify passes as well as the runner's up-front error.
    Example (verify range [2, 5], K in [1, 4]): k-runtime and --chain 7 -> K 7, C = 8: the runtime's."""
    if not case.expect.error or "chain length K =" not in case.expect.mentions or k_asked is None:
        return None
    if not (prof.chain_flag and prof.clamps):
        return None
    k = prof.chain_k(k_asked, md.chain_len)
    lo, hi = md.k_range
    if lo <= k <= hi:
        return None
    return (f"profile {prof.name} ({prof.pr}) clamps --chain={k_asked} to K = {k}, which the program's "
            f"target_verify cannot take (K in [{lo}, {hi}]): the runtime's error")
