"""`exact_numerics()`: the shape-invariant kernels installed for the duration of a block.

As Thinking Machines' batch_invariant_ops and vLLM's batch-invariant mode do, aten's own operators are
given other kernels through one `torch.library.Library("aten", "IMPL")`, so an HF model (the runner's
target, the HF reference) runs on them unchanged; leaving the block destroys the library, and torch's
kernels are back. Overridden: mm, addmm, bmm (matmul and linear reach them), _softmax, _log_softmax,
mean.dim (RMSNorm's mean), for CPU (exact/cpu.py) and CUDA (exact/triton_kernels.py, Triton imported on
the first call, never on CPU); and scaled_dot_product_attention itself (its composite kernel, every
device: exact/attention.py), which the models given to `exact_numerics` are switched to for the block
(the HF reference loads with eager attention, the runner's target with sdpa: in exact mode both run
the one fixed-block attention).

The mode is entered once: a nested `exact_numerics` only switches its own models' attention. An
isolated runner's child process installs it for its whole life (`install_for_process`).
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Iterator
from contextlib import contextmanager

import torch

from eagle3_check.exact import attention, cpu

EXACT_NUMERICS = "exact (shape-invariant kernels)"  # the mode's name in every report and JSON
NORMAL_NUMERICS = "normal (torch's kernels)"

_LOCK = threading.Lock()
_STATE = {"depth": 0, "lib": None}


def _cuda(name: str):
    """The CUDA kernel `name` of exact/triton_kernels.py, imported (with Triton) on its first call."""
    def kernel(*args, **kwargs):
        from eagle3_check.exact import triton_kernels

        return getattr(triton_kernels, name)(*args, **kwargs)
    kernel.__name__ = f"exact_{name}"
    return kernel


def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, *, scale=None,
         enable_gqa=False):  # [B, Hq, T, D], [B, Hk, S, D] x2 -> [B, Hq, T, D]
    """scaled_dot_product_attention in exact mode (no dropout: inference only)."""
    if dropout_p:
        raise RuntimeError("exact mode computes attention without dropout (dropout_p must be 0)")
    if query.is_cuda:
        return _cuda("sdpa")(query, key, value, attn_mask, is_causal, scale)
    return attention.sdpa_cpu(query, key, value, attn_mask, is_causal, scale)


OPS = (  # (aten op, CPU kernel, CUDA kernel's name in triton_kernels)
    ("mm", cpu.mm, "mm"),
    ("addmm", cpu.addmm, "addmm"),
    ("bmm", cpu.bmm, "bmm"),
    ("_softmax", cpu.softmax, "softmax"),
    ("_log_softmax", cpu.log_softmax, "log_softmax"),
    ("mean.dim", cpu.mean_dim, "mean_dim"),
)


def _install() -> torch.library.Library:
    lib = torch.library.Library("aten", "IMPL")
    with warnings.catch_warnings():  # torch warns once that a registered kernel is overridden: that is the point
        warnings.filterwarnings("ignore", message=r"(?s).*Overriding a previously registered kernel")
        for op, cpu_kernel, cuda_name in OPS:
            lib.impl(op, cpu_kernel, "CPU")
            lib.impl(op, _cuda(cuda_name), "CUDA")
        lib.impl("scaled_dot_product_attention", sdpa, "CompositeImplicitAutograd")
    return lib


def _configs(models) -> list:
    """The HF configs of the given models (and their submodules'), each once."""
    seen: dict[int, object] = {}
    for model in models:
        for module in model.modules():
            cfg = getattr(module, "config", None)
            if cfg is not None and hasattr(cfg, "_attn_implementation"):
                seen.setdefault(id(cfg), cfg)
    return list(seen.values())


@contextmanager
def exact_numerics(*models: torch.nn.Module) -> Iterator[None]:
    """Exact mode for the block: the shape-invariant kernels installed (once, process-wide: worker
    threads run on them too) and each given HF model's attention switched to sdpa; all restored on exit."""
    configs = _configs(models)
    before = [cfg._attn_implementation for cfg in configs]
    with _LOCK:
        if _STATE["depth"] == 0:
            _STATE["lib"] = _install()
        _STATE["depth"] += 1
    try:
        for cfg in configs:
            cfg._attn_implementation = "sdpa"
        yield
    finally:
        for cfg, impl in zip(configs, before):
            cfg._attn_implementation = impl
        with _LOCK:
            _STATE["depth"] -= 1
            if _STATE["depth"] == 0:
                _STATE["lib"]._destroy()
                _STATE["lib"] = None


def install_for_process() -> None:
    """Exact mode for the rest of this process: an isolated runner's child (jobs/check/job.py's
    child_program), whose program runs only the runner under test; never uninstalled."""
    with _LOCK:
        if _STATE["depth"] == 0:
            _STATE["lib"] = _install()
        _STATE["depth"] += 1


def exact_active() -> bool:
    """Whether exact mode is installed now."""
    return _STATE["depth"] > 0
