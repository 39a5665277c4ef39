"""The tie tolerance, tie rank and tie budget (DESIGN §3), in logits measured on real and tiny models.

A runner's token that is not the reference's argmax is a tie only where the reference's
top-1/top-2 margin and the top logit minus the runner token's logit are both <= the tolerance
at that row, `ABSOLUTE[dtype] + ULPS[dtype] x ulp(dtype, |top-1 logit|)`, and the token ranks
within TOP_N. The absolute part covers how far a correct runner's logits move against the
reference's (kernels, batch shape); the ulp part the rounding of the logits themselves (a bf16
logit near 40 is a multiple of 0.25). Worked example, bf16 at a top logit of 24 (ulp 0.125):
0.5 + 2 x 0.125 = 0.75 logits; at 1.5 (ulp 2^-7): 0.516.

Why not a multiple of the ulp alone: on a real model (SmolLM2, top logits 7 to 45) 32 ulps are
1 to 8 logits, and a program with other weights passed as ties; what a correct runner moves is
a fraction of a logit whatever the top logit is. The constants, the budget and their
derivation: docs/calibration.md (bench/measure_tolerance.py, bench/perturbed_check.py). The
fp32 part covers the eager kernels (CPU, CUDA) and ExecuTorch's XNNPACK kernels, measured on a
program's calibration twin (program/calibration_export.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from eagle3_check.errors import OptionError

MANTISSA_BITS = {"float32": 23, "bfloat16": 7, "float16": 10}
ABSOLUTE = {"float32": 2e-4, "bfloat16": 0.5}  # logits (docs/calibration.md, "The tie tolerance"; fp32: "Kernels")
ULPS = {"float32": 2.0, "bfloat16": 2.0}  # ulps of the dtype at the row's top logit (same table)
SAFETY = 2.0  # the stated margin: the tolerance is at least SAFETY x every margin shift measured
TIE_BUDGET = {"float32": 0.0, "bfloat16": 0.07}  # share of judged positions (docs/calibration.md, "The tie budget")
FIXTURE_BUDGET = {"smollm2": {"bfloat16": 0.04}, "gemma3": {"bfloat16": 0.03}}  # real models, by name prefix (same)
TOP_N = 4  # docs/calibration.md, "The tie rank"


def ulp(dtype: str, magnitude: float) -> float:
    """The spacing of `dtype` numbers at |magnitude| (the smallest normal's below it):
    2^(floor(log2 |x|) - mantissa bits). bf16 at 1.4 -> 2^-7; fp32 at 12.0 -> 2^-20."""
    if dtype not in MANTISSA_BITS:
        raise OptionError(f"dtype {dtype}", f"one of {sorted(MANTISSA_BITS)}", "pass --dtype float32 or bfloat16")
    x = abs(magnitude)
    exp = math.floor(math.log2(x)) if x > 0 and math.isfinite(x) else -126
    return 2.0 ** (max(exp, -126) - MANTISSA_BITS[dtype])


@dataclass(frozen=True)
class Tolerance:
    dtype: str
    multiple: float  # ulps of the dtype at the row's top logit
    top_n: int = TOP_N
    absolute: float = 0.0  # logits, added to the ulp part
    noted_above: float = 1.0  # ties at a margin above this share of the tolerance are named (1 / SAFETY:
    #                           above every margin shift measured between correct sources)

    def at(self, top_logit: float) -> float:
        """The absolute tolerance for a row whose top-1 logit is `top_logit` (0 without logits)."""
        if not math.isfinite(top_logit):
            return 0.0
        return self.absolute + self.multiple * ulp(self.dtype, top_logit)

    def describe(self) -> str:
        if not self.absolute:
            return f"{self.multiple:g} ulp({self.dtype}), top-{self.top_n}"
        ulps = f" + {self.multiple:g} ulp" if self.multiple else ""
        return f"{self.absolute:g} logits{ulps} ({self.dtype}), top-{self.top_n}"


def tolerance_for(dtype: str) -> Tolerance:
    if dtype not in ABSOLUTE:
        raise OptionError(f"dtype {dtype}", f"one of {sorted(ABSOLUTE)}", "pass --dtype float32 or bfloat16")
    return Tolerance(dtype, ULPS[dtype], TOP_N, ABSOLUTE[dtype], 1 / SAFETY)


def default_budget(dtype: str, fixture: str | None = None) -> float:
    """The documented default tie budget for `dtype` (a share of judged positions); a real-model
    fixture's own (FIXTURE_BUDGET, matched by name prefix) where it has one: a trained model has
    few near-ties, so its correct runner disagrees far less often than on a flat tiny fixture."""
    own = next((b for k, b in FIXTURE_BUDGET.items() if fixture and fixture.startswith(k)), {})
    return own.get(dtype, TIE_BUDGET.get(dtype, 0.0))
