"""Keep `gelu(approximate="tanh")` a tanh GELU through ExecuTorch 1.5.1's XNNPACK lowering.

ExecuTorch 1.5.1's XNNPACK backend serializes every `aten.gelu` as XNNPACK's exact (erf) GELU and
ignores `approximate` (`backends/xnnpack/operators/op_gelu.py`; fixed upstream by "XNNPACK: Route
tanh GELU to approxgelu", pytorch/executorch#22851, after 1.5.1). A target whose MLP uses the tanh
form (Gemma: `gelu_pytorch_tanh`) then runs another activation in its `.pte`: up to 4.7e-4 per
activation, measured as a 0.033-logit shift of Gemma 3 270M's top-1/top-2 margins against the HF
reference (docs/calibration.md, "Kernels"), which flipped a correct token.

`TanhGeluAsOps` rewrites each tanh GELU of the edge program, before partitioning, into the
operations PyTorch's own CPU kernel evaluates (aten/src/ATen/native/cpu/Activation.cpp:
`inner = kBeta * (x + kKappa * x^3)`, `0.5 * x * (1 + tanh(inner))`, kBeta = sqrt(2) * 2/sqrt(pi)
* 0.5), each of which XNNPACK delegates exactly: mul, add, tanh. An exact GELU is left alone.
"""

from __future__ import annotations

import math

import torch

K_BETA = math.sqrt(2.0) * (2.0 / math.sqrt(math.pi)) * 0.5  # sqrt(2 / pi), as PyTorch spells it
K_KAPPA = 0.044715


def tanh_gelu_pass():
    """The ExportPass (executorch imported here: only an export needs it)."""
    from executorch.exir.dialects._ops import ops as exir_ops
    from executorch.exir.pass_base import ExportPass

    edge = exir_ops.edge.aten

    class TanhGeluAsOps(ExportPass):
        rewritten = 0  # tanh GELUs rewritten, over every method the pass ran on

        def call_operator(self, op, args, kwargs, meta):
            if op != edge.gelu.default or kwargs.get("approximate", "none") != "tanh":
                return super().call_operator(op, args, kwargs, meta)
            self.rewritten += 1
            x = args[0]
            dtype = x.to_tensor().dtype

            def call(o, *a):
                return super(TanhGeluAsOps, self).call_operator(o, a, {}, meta)

            def const(v: float):  # a 0-dim constant of x's dtype (lifted after the pass)
                return torch.tensor(v, dtype=dtype)

            cube = call(edge.mul.Tensor, call(edge.mul.Tensor, x, x), x)  # x^3
            inner = call(edge.mul.Tensor, call(edge.add.Tensor, x, call(edge.mul.Tensor, cube, const(K_KAPPA))),
                         const(K_BETA))
            one_plus = call(edge.add.Tensor, call(edge.tanh.default, inner), const(1.0))
            return call(edge.mul.Tensor, call(edge.mul.Tensor, x, const(0.5)), one_plus)

    return TanhGeluAsOps()
