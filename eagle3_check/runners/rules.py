"""The stop reasons, the length DESIGN §2 fixes for a request given the greedy reference, and
the prefill chunk plan of chunked prefill (DESIGN §2 rule 4, `prefill_chunks`).

The one definition of each: a run's `stop_reason` (STOP, MAX_NEW, CONTEXT), the length of a run
whose accepted counts are known (`expected_length`) and the lengths allowed when they are not
(`allowed_lengths`, a runner binary's). Every user imports them from here.

The emitted tokens of any correct runner are `reference[:n]`; `expected_length` computes
n. Rules 7 and 9 stop on the context limit through `anchor_pos`, which moves by a + 1 per
round, so the per-round accepted counts the run reports are replayed here (and every
accepted proposal is itself checked against the reference by the verdict).

Worked example: L = 10, K = 4, max_seq_len = 20, accepted = [4, 1]
    bonus at position 10 is emitted (n = 1); 10 + 4 <= 19, so round 1 runs:
    a = 4 -> 5 tokens, n = 6, anchor_pos = 15; 15 + 4 = 19 <= 19, so round 2 runs:
    a = 1 -> 2 tokens, n = 8, anchor_pos = 17; 17 + 4 = 21 > 19 -> stop ("context"), n = 8.
"""

from __future__ import annotations

from dataclasses import dataclass

from eagle3_check.errors import Eagle3CheckError, OptionError

STOP, MAX_NEW, CONTEXT = "stop", "max_new", "context"  # a run's stop_reason
EARLY = "stopped early"  # an Expected reason only: the run ended while the rules say go on


@dataclass(frozen=True)
class Expected:
    length: int
    reason: str  # stop | max_new | context | "stopped early" (the run ended while rules say go on)


def expected_length(
    reference: list[int],
    stop_ids: frozenset[int],
    max_new_tokens: int,
    prompt_len: int,
    k: int,
    max_seq_len: int,
    accepted: list[int],
) -> Expected:
    max_new = min(max_new_tokens, max_seq_len - prompt_len)
    cap = MAX_NEW if max_new == max_new_tokens else CONTEXT
    n = 1
    if reference[0] in stop_ids:
        return Expected(1, STOP)
    if max_new <= 1:
        return Expected(1, cap)
    anchor_pos = prompt_len
    for a in accepted:
        if anchor_pos + k > max_seq_len - 1:
            break
        for _ in range(a + 1):
            n += 1
            if n > len(reference):
                return Expected(n, EARLY)  # reference too short to judge: treat as a failure
            if reference[n - 1] in stop_ids:
                return Expected(n, STOP)
            if n >= max_new:
                return Expected(n, cap)
        anchor_pos += a + 1
    if anchor_pos + k > max_seq_len - 1:
        return Expected(n, CONTEXT)
    return Expected(n, EARLY)


def allowed_lengths(
    reference: list[int],
    stop_ids: frozenset[int],
    max_new_tokens: int,
    prompt_len: int,
    k: int,
    max_seq_len: int,
) -> dict[int, str]:
    """Every length the rules allow given the greedy reference, with its stop reason, when the
    per-round accepted counts are unknown (a runner binary does not print them).

    Without them the context end is a range: after n tokens the anchor sits at L + n - 1, so
    speculation must stop at the first round end with n >= ctx = max_seq_len - K - L + 1, and
    the round that crosses emits at most K + 1 tokens. Every `expected_length` of some accepted
    counts is one of these, and each of these is reached by some counts.
    Worked example: L = 10, K = 4, max_seq_len = 20, no stop, max_new 10 -> ctx = 7: the run
    ends by context at any N in 7..9 (9 = ctx + K stops before the limit), or reaches the
    limit N = 10 (from a round end at 6); so {7, 8, 9: context, 10: max_new}."""
    max_new = min(max_new_tokens, max_seq_len - prompt_len)
    cap = MAX_NEW if max_new == max_new_tokens else CONTEXT
    if reference and reference[0] in stop_ids:
        return {1: STOP}
    if max_new <= 1:
        return {1: cap}
    if prompt_len + k > max_seq_len - 1:
        return {1: CONTEXT}
    stop = next((i + 1 for i, t in enumerate(reference) if t in stop_ids), None)
    limit, why = (stop, STOP) if stop is not None and stop <= max_new else (max_new, cap)
    ctx = max_seq_len - k - prompt_len + 1
    allowed = {n: CONTEXT for n in range(max(ctx, 2), min(limit - 1, ctx + k) + 1)}
    if limit <= ctx + k:
        allowed[limit] = why
    return allowed


def prefill_chunk_size(max_prefill: int, sliding_window: int | None) -> int:
    """Chunked prefill's chunk: the sliding window if present, else max_prefill // 2, capped at
    max_prefill (window 16, max 32 -> 16; no window, max 32 -> 16; window 64, max 32 -> 32)."""
    chunk = sliding_window if sliding_window else max_prefill // 2
    return max(1, min(chunk, max_prefill))


def prefill_chunks(prompt_len: int, max_prefill: int, min_prefill: int, sliding_window: int | None) -> list[int]:
    """The chunk lengths chunked prefill uses for a prompt of `prompt_len` tokens (DESIGN §2 rule 4).

    chunk = sliding_window if present, else max_prefill // 2, capped at max_prefill; each next
    chunk is min(remaining, chunk), shortened to remaining - min_prefill when it would leave a
    tail shorter than min_prefill (the rule as the stack's runner states it: the shortened chunk
    itself may fall below min_prefill, e.g. remaining 17, chunk 16, min 9 -> 8, then 9).

    Worked example: L = 40, max_prefill = 32, min_prefill = 9, no window -> chunk 16;
        remaining 40: 16 leaves 24 (>= 9)                  -> 16
        remaining 24: 16 would leave 8 < 9, so 24 - 9 = 15  -> 15
        remaining 9:  9 leaves 0                            -> 9
    chunks [16, 15, 9] at positions 0..15, 16..30, 31..39.
    """
    chunk = prefill_chunk_size(max_prefill, sliding_window)
    out: list[int] = []
    remaining = prompt_len
    while remaining > 0:
        step = min(remaining, chunk)
        if 0 < remaining - step < min_prefill:
            step = remaining - min_prefill
        if step < 1:  # chunk < min_prefill with remaining = min_prefill: the rest in one chunk
            step = remaining
        out.append(step)
        remaining -= step
    return out


def short_chunk_refused(prompt_len: int, plan: list[int], short: int, max_prefill: int, min_prefill: int,
                        sliding_window: int | None, why: str) -> OptionError:
    """The one-line failure of a chunked prefill whose program refused a chunk below its declared min
    prefill. The chunk-tail rule shortens a chunk to remaining - min_prefill, which is below
    min_prefill unless chunk >= 2 * min_prefill - 1; the seed's runner sends that chunk as planned
    and the program decides (an ExecuTorch runtime checks only upper bounds and takes it; a program
    that refuses it fails the request here). `why`: the program's own error, shortened.
    Worked example: L = 33, max_prefill 32, min_prefill 9 -> chunk 16; remaining 33: 16 leaves 17
    -> 16; remaining 17: 16 would leave 1 < 9 -> 17 - 9 = 8; then 9: plan [16, 8, 9], the 8 is
    below the min (chunk 16 < 2 * 9 - 1 = 17)."""
    chunk = prefill_chunk_size(max_prefill, sliding_window)
    source = "the sliding window" if sliding_window else "max prefill // 2"
    why = " ".join(why.split())
    return OptionError(  # the program's own error last: a crash line cut at 300 characters loses only it
        f"chunked prefill of L = {prompt_len}, chunks {plan} (chunk {chunk}: {source}): the program refused the "
        f"{short}-token chunk, below its declared min prefill {min_prefill}",
        "a prefill that takes the chunks of the tail rule (DESIGN §2.4)",
        f"export --min-prefill 1, or a chunk >= 2 x min - 1 = {2 * min_prefill - 1} (the program said: {why[:120]})")


REFUSALS = (Eagle3CheckError, RuntimeError, ValueError, IndexError, TypeError)  # a program's "no" (not a timeout)


def prefill_chunk(prefill, tokens, positions, plan: list[int], md):  # [1, T], [T] -> [1, 1], [1, T, H]
    """`prefill(tokens, positions)` for one chunk of `plan` (md: the program's Metadata), as the seed's
    runner sends it: a chunk below the declared min prefill goes to the program like any other, and
    the program decides; its refusal of that chunk is `short_chunk_refused` (one line)."""
    t = int(tokens.shape[-1])
    if t >= md.min_prefill:
        return prefill(tokens, positions)
    try:
        return prefill(tokens, positions)
    except REFUSALS as e:
        raise short_chunk_refused(sum(plan), plan, t, md.max_prefill, md.min_prefill, md.sliding_window,
                                  f"{type(e).__name__}: {e}") from None
