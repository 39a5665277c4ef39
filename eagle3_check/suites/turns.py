"""How a runner profile (runners/profiles.py) changes an edge case's expectation: the error cases a
profile runs instead of refusing (`profile_turns`), and the cases it cannot take (`profile_skip`).
One rule for every runner, in process (a declared or given profile) or a binary (detected or given).

Example (get_chain_len 4, K range [1, 7]): under k-runtime and chunked-prefill, `chain/lo-1`
(--chain=0) runs K = 4 and `chain/hi+1` (--chain=8) runs K = 7, each with the clamped K checked;
under chunked-prefill `prefill-range/max+1` is a chunked run. Under `design` (our reference
runner, DESIGN §2 as written) and runner-pr they stay errors.
"""

from __future__ import annotations

from eagle3_check.runners.profiles import RunnerProfile
from eagle3_check.suites.case import Case
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
    if options.chain_len not in (None, md.chain_len) and not prof.chain_flag:
        raise CaseSkip(f"needs K = {options.chain_len} (not the program's default {md.chain_len}) and {who} profile "
                       f"{prof.name} has no --chain")
