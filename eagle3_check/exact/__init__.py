"""Exact mode (`--exact`): kernels whose result for one row does not depend on how many rows are
computed with it, nor on a static cache's unused slots, so a verify window, a one-row decode and the
HF reference's full forward give bit-identical logits (docs/exact.md).

`mode` installs them over aten's operators for a block (`exact_numerics`); `cpu` holds the CPU matrix
products and row reductions, `attention` the fixed-block attention, `triton_kernels` the CUDA ones
(Triton, imported on first use), `ksplit` the CUDA product's tiling and split of K (from K and N only).

May import: nothing else (a leaf layer: the runner, the references and the session use it).

Every subpackage may also import the leaves: the top-level modules (errors, tokenizer,
table, status) and fixtures.registry.
"""

from eagle3_check.exact.mode import EXACT_NUMERICS, NORMAL_NUMERICS, exact_active, exact_numerics

__all__ = ["EXACT_NUMERICS", "NORMAL_NUMERICS", "exact_active", "exact_numerics"]
