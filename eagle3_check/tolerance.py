"""The tie tolerance (DESIGN §3): a multiple of the dtype's precision at the logit's magnitude.

ulp(dtype, x) is the spacing of the dtype's numbers at |x|: 2^(floor(log2 |x|) - mantissa bits)
(fp32: 23 bits, bf16: 7). Worked example: bf16 at |x| = 1.4 -> 2^(0 - 7) = 0.0078125; fp32 at
|x| = 12.0 -> 2^(3 - 23) ~= 4.8e-7.

A runner's token that is not the reference's argmax is a tie only where the reference's
top-1/top-2 margin and the top logit minus the runner token's logit are both <= MULTIPLE[dtype]
x ulp(dtype, |top-1 logit|), and the runner's token ranks within TOP_N. MULTIPLE comes from
bench/measure_tolerance.py (outputs under bench/results/tolerance-*.json): the largest distance
between the runner's batched K+1-row verify logits and the reference's (one-row decode, and the
HF teacher-forced forward), in ulps at the row's top logit, over 14 prompts x 32 tokens on both
embedded fixtures:
  float32, CPU (bench/results/tolerance-cpu-float32.json, first run: max |diff| over the
  whole vocab): 128.5 ulps (tiny-gemma4), 66.25 (tiny-llama-random), 9.0 (tiny-llama).
  bfloat16, CPU: being measured; until then bf16 uses the same multiple (interim).
MULTIPLE is that maximum with 2x headroom, rounded to a power of two. TOP_N = 2: two logits
within the tolerance of each other are the only disagreement batching explains; a third-ranked
token needs two near-ties at once, which the measurement never shows.

TIE_BUDGET: the share of judged positions a report may hold as ties before it fails. fp32: 0
(the fixtures give no ties at all); bf16: 0 until measured (interim).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from eagle3_check.errors import OptionError

MANTISSA_BITS = {"float32": 23, "bfloat16": 7, "float16": 10}
MULTIPLE = {"float32": 256, "bfloat16": 32}
TIE_BUDGET = {"float32": 0.0, "bfloat16": 0.0}
TOP_N = 2


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
