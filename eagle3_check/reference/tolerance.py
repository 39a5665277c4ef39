"""The tie tolerance (DESIGN §3): a multiple of the dtype's precision at the logit's magnitude.

ulp(dtype, x) is the spacing of the dtype's numbers at |x|: 2^(floor(log2 |x|) - mantissa bits)
(fp32: 23 bits, bf16: 7). Worked example: bf16 at |x| = 1.4 -> 2^(0 - 7) = 0.0078125; fp32 at
|x| = 12.0 -> 2^(3 - 23) ~= 9.5e-7.

A runner's token that is not the reference's argmax is a tie only where the reference's
top-1/top-2 margin and the top logit minus the runner token's logit are both <= MULTIPLE[dtype]
x ulp(dtype, |top-1 logit|), and the runner's token ranks within TOP_N.

MULTIPLE comes from bench/measure_tolerance.py (outputs: bench/results/tolerance-<device>-<dtype>.json).
On each embedded fixture, 14 prompts x 32 greedy tokens, it compares the runner's batched
K+1-row verify logits, one-row decode logits and the HF teacher-forced forward, and reports how
far the top-1/top-2 margin moves between them ("shift", in ulps at the row's top logit). A
difference in argmax between two of them needs a margin below that shift. CPU, torch 2.13:
  float32:  verify-HF shift max 96 ulps (tiny-gemma4), 40 (tiny-llama-random), 10 (tiny-llama);
            verify-decode 57 / 31 / 10; no argmax differs anywhere (0 of 1344 rows).
  bfloat16: verify-HF shift max 22 ulps (tiny-gemma4), 11 (tiny-llama-random), 3 (tiny-llama);
            verify-decode 0 (bit-identical on CPU); argmax differs between verify and HF on
            20 / 26 / 7 of 448 rows (4.5 %, 5.8 %, 1.6 %).
H200 (CUDA, torch 2.11): float32 verify-HF 58 / 45 / 12 ulps, verify-decode 63 / 24 / 6, no
argmax differs; bfloat16 verify-HF 20 / 11 / 3, verify-decode 5 / 3 / 2 (not bit-identical on
CUDA: 3 / 13 / 4 rows flip), verify-HF flips 21 / 31 / 8 of 448 (bench/results/tolerance-cuda-*).
MULTIPLE is the smallest power of two >= 1.25 x the largest shift: float32 128, bfloat16 32.
TOP_N is the largest rank, under the HF row, of a token the runner's verify picked where the
two argmaxes differ ("rank max" in the same output): CPU bfloat16 3 (tiny-gemma4), 4
(tiny-llama-random), 2 (tiny-llama), with that token at most 15 ulps below the top ("gap max");
the same on the H200 (3 / 4 / 2, gap <= 16 ulps); float32 has no such row. A kernel difference
that moves every logit by up to ~28 ulps ("vocab max") can reorder the leading four when all
four lie within the tolerance, so TOP_N = 4: a fifth-ranked token, or any token further than
the tolerance below the top, fails (seen once: H200 bf16 on the chaotic tiny-llama-random,
a rank-5 EOS 10 ulps below the top at token 29 of "sky": that fixture stays a known bf16 FAIL).

TIE_BUDGET: the share of judged positions a report may hold as ties before it fails. float32: 0
(the measurement shows no argmax difference at all, and `check` on every fixture gives 0 ties).
bfloat16: 0.09, the largest measured share of rows whose argmax differs between verify and HF
(6.9 %, tiny-llama-random on the H200; 5.8 % on CPU) x 1.25, rounded up to a whole percent. `check --tie-budget` overrides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from eagle3_check.errors import OptionError

MANTISSA_BITS = {"float32": 23, "bfloat16": 7, "float16": 10}
MULTIPLE = {"float32": 128, "bfloat16": 32}
TIE_BUDGET = {"float32": 0.0, "bfloat16": 0.09}
TOP_N = 4


def ulp(dtype: str, magnitude: float) -> float:
    """The spacing of `dtype` numbers at |magnitude| (the smallest normal's below it)."""
    if dtype not in MANTISSA_BITS:
        raise OptionError(f"dtype {dtype}", f"one of {sorted(MANTISSA_BITS)}", "pass --dtype float32 or bfloat16")
    x = abs(magnitude)
    exp = math.floor(math.log2(x)) if x > 0 and math.isfinite(x) else -126
    return 2.0 ** (max(exp, -126) - MANTISSA_BITS[dtype])


@dataclass(frozen=True)
class Tolerance:
    dtype: str
    multiple: float  # in ulps of the dtype at the row's top logit
    top_n: int = TOP_N

    def at(self, top_logit: float) -> float:
        """The absolute tolerance for a row whose top-1 logit is `top_logit`."""
        return self.multiple * ulp(self.dtype, top_logit) if math.isfinite(top_logit) else 0.0

    def describe(self) -> str:
        return f"{self.multiple:g} ulp({self.dtype}), top-{self.top_n}"


def tolerance_for(dtype: str) -> Tolerance:
    if dtype not in MULTIPLE:
        raise OptionError(f"dtype {dtype}", f"one of {sorted(MULTIPLE)}", "pass --dtype float32 or bfloat16")
    return Tolerance(dtype, MULTIPLE[dtype])


def default_budget(dtype: str) -> float:
    """The documented default tie budget for `dtype` (a share of judged positions)."""
    return TIE_BUDGET.get(dtype, 0.0)
