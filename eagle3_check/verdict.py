"""Verdicts (DESIGN §3): identical prefix of the expected length, or a first divergence.

A divergence is a numerical tie (not a failure) only when the reference's top-1/top-2
logit margin at that index is below the tie tolerance of the dtype:
- float32: 1e-4. Batched verify (K+1 rows) and one-row decode reduce in different orders;
  on our fixtures fp32 logits differ by ~1e-6, so a margin under 1e-4 is a genuine tie.
- bfloat16: 0.125. bf16 keeps 8 mantissa bits; logits of magnitude ~8-16 round in steps
  of 0.03-0.06, and a few accumulated roundings reach ~0.1.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

from eagle3_check.hf_reference import ReferenceResult
from eagle3_check.rules import EARLY, expected_length
from eagle3_check.runner import RunResult

TIE_TOLERANCE = {"float32": 1e-4, "bfloat16": 0.125}

PASS, TIE, FAIL = "pass", "tie", "fail"


@dataclass
class Verdict:
    status: str  # pass | tie | fail
    message: str
    index: int | None = None  # first divergence
    got: int | None = None
    want: int | None = None
    margin: float | None = None  # reference top-1/top-2 margin at `index`
    expected_len: int | None = None
    expected_reason: str | None = None

    def to_json(self) -> dict:
        return asdict(self)


def compare(
    run: RunResult,
    ref: ReferenceResult,
    stop_ids: frozenset[int],
    max_new_tokens: int,
    max_seq_len: int,
    tolerance: float,
) -> Verdict:
    for i, (got, want) in enumerate(zip(run.tokens, ref.tokens)):
        if got != want:
            margin = ref.margins[i]
            tie = margin < tolerance
            return Verdict(
                TIE if tie else FAIL,
                f"{'tie' if tie else 'diverged'} at token {i}: runner {got}, reference {want} "
                f"(reference margin {margin:.3g}{' < ' if tie else ' >= '}tolerance {tolerance:g})",
                index=i, got=got, want=want, margin=margin,
            )
    exp = expected_length(
        ref.tokens, stop_ids, max_new_tokens, len(run.prompt_ids), run.k, max_seq_len, run.accepted
    )
    if exp.reason == EARLY or len(run.tokens) != exp.length:
        n = len(run.tokens)
        want = ref.tokens[n] if n < len(ref.tokens) else None
        return Verdict(
            FAIL,
            f"length: runner emitted {n} tokens, rules fix {exp.length} ({exp.reason})",
            index=min(n, exp.length), got=run.tokens[exp.length] if n > exp.length else None,
            want=want if n < exp.length else None,
            margin=ref.margins[n] if n < len(ref.margins) else None,
            expected_len=exp.length, expected_reason=exp.reason,
        )
    return Verdict(PASS, f"identical ({exp.length} tokens, {exp.reason})",
                   expected_len=exp.length, expected_reason=exp.reason)
