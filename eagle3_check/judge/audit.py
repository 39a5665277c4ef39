"""Every field a RunResult reports, audited against what DESIGN §2 and the call log fix.

A runner reports more than its tokens: prompt ids, K, rounds, the per-round accepted counts,
tau, the stop reason, max_new, its text, its own per-method call counts and times. The verdict
judges the tokens, `instrument.call_problems` the calls, `jobs.check.prompt_set.audit_run` the prompt ids, K
and tau, the suites and check the stop reason; this module the rest, each field against what
the rules or the recorded calls (`instrument.RecordingProgram`) fix:

- text: the tokenizer's decode of the tokens;
- max_new: min(max_new_tokens, max_seq_len - L) (rule 5);
- accepted: per round, the leading proposals the recorded verify call confirmed (chain
  proposals vs verify_ids), the last round too, even where its emission was cut;
- tokens: the bonus the (last) prefill returned, then per round proposals[:a] + [verify_ids[a]]
  of the recorded calls, cut only inside the last round;
- method_calls: when reported (non-empty), the recorded calls per method; method_ms: when
  reported, finite times >= 0 of the three methods only;
- notes: a list of strings.

Worked example (K = 2): recorded verify window [A, x, y], verify_ids [x, q, r] -> a = 1
(x == x, y != q), the round's tokens [x, q]. A run that reports a = 0 for that round, or
emits [x, r], fails; so does one whose last round is cut after x but reports a = 0.
"""

from __future__ import annotations

import math

from eagle3_check.runners.instrument import RecordingProgram

METHODS = ("prefill", "target_verify", "draft_decode")


def logged_rounds(rec: RecordingProgram) -> tuple[int | None, list[tuple[int, list[int]]]]:
    """(the bonus, [(a, round tokens) per target_verify]) as the recorded calls fix them."""
    pre = rec.of("prefill")
    bonus = pre[-1].out_ids[0] if pre and pre[-1].out_ids else None
    rounds = []
    for v in rec.of("target_verify"):
        proposals, ids = v.tokens[1:], v.out_ids
        a = 0
        while a < len(proposals) and a < len(ids) and proposals[a] == ids[a]:
            a += 1
        rounds.append((a, proposals[:a] + ids[a : a + 1]))
    return bonus, rounds


def result_problems(rec: RecordingProgram, run, tokenizer, max_new_tokens: int, max_seq_len: int) -> list[str]:
    """The RunResult fields that disagree with the rules or the call log (see module doc); [] if none."""
    out: list[str] = []
    tokens, L = list(run.tokens), len(run.prompt_ids)
    want_max_new = min(max_new_tokens, max_seq_len - L)
    if run.max_new != want_max_new:
        out.append(f"stats: max_new = {run.max_new}, rule 5 fixes min({max_new_tokens}, {max_seq_len} - {L}) "
                   f"= {want_max_new}")
    try:
        text = tokenizer.decode(tokens)
    except Exception:  # noqa: BLE001 - ids the tokenizer cannot decode: the verdict names them
        text = None
    if text is not None and run.text != text:
        out.append(f"text: the run reports {run.text[:40]!r}, its tokens decode to {text[:40]!r}")
    if not isinstance(run.notes, list) or not all(isinstance(n, str) for n in run.notes):
        out.append(f"notes: {run.notes!r:.60} is not a list of strings")
    if run.method_calls:
        want = {m: len(rec.of(m)) for m in METHODS}
        if dict(run.method_calls) != want:
            out.append(f"stats: method_calls = {dict(run.method_calls)}, the program recorded {want}")
    bad_ms = {m: t for m, t in dict(run.method_ms or {}).items() if m not in METHODS or isinstance(t, bool)
              or not isinstance(t, (int, float)) or not math.isfinite(t) or t < 0}
    if bad_ms:
        out.append(f"stats: method_ms {bad_ms} (expected finite times >= 0 of {', '.join(METHODS)})")
    bonus, rounds = logged_rounds(rec)
    if bonus is None:
        return out  # no prefill: call_problems says so
    if len(run.accepted) == len(rounds):
        for r, (got, (a, _)) in enumerate(zip(run.accepted, rounds), start=1):
            if got != a:
                out.append(f"stats: round {r} reports a = {got}, its target_verify call accepted {a}")
                break
    logged = [bonus] + [t for _, block in rounds for t in block]
    done = len(logged) - len(rounds[-1][1]) if rounds else 0  # tokens before the last round (the bonus alone: 0)
    if tokens != logged[: len(tokens)] or not done < len(tokens) <= len(logged):
        i = next((i for i, (x, y) in enumerate(zip(tokens, logged)) if x != y), min(len(tokens), len(logged)))
        out.append(f"tokens: {len(tokens)} emitted, the recorded calls give {len(logged)} ending inside the last "
                   f"round after {done}; first difference at index {i}")
    return out
