"""The HF reference over the weights the program already holds: one copy of the target (issue 44).

`check` used to load the target twice: the program's eager target (program/target.py) and the
HF reference's own `from_pretrained` (judge/hf.py). Both load the same files in the same dtype,
so their weight tensors are equal; holding them once halves the peak for a large target (8B bf16
on an H200: 29.3 GiB -> 16.65 GiB, docs/scale.md). `shared_reference(model, device)` gives an
`HFReference` whose model is a copy of the program's HF module *except its parameters*
(`copy.deepcopy` with the parameters in the memo: buffers such as RoPE's inv_freq and the config
are its own): HF's own full forward over the same tensors, with the program's attention
implementation (SDPA) unless told otherwise. A loaded `HFReference` (a `.pte`, a quantized
program, gate, suites, cards) keeps eager attention.

What keeps it a reference: it is built only for the harness's own unquantized eager program in
the dtype and on the device judged (`shareable`), and `SharedWeights.check()` runs before every
score: a fingerprint of every shared tensor (one norm each, taken when the reference was built,
before any request) must still hold, so a program that writes into its own weights is an error,
never judged against itself.
"""

from __future__ import annotations

import copy

import torch

from eagle3_check.errors import InputError


def eager_program(program):
    """The EagerBackend under any wrappers (CUDA graphs, recorders), or the one whose tensors an AOTI
    package without weights is bound to (program/aoti_weights.py), else None."""
    from eagle3_check.program.eager import EagerBackend

    while not isinstance(program, EagerBackend) and hasattr(program, "inner"):
        program = program.inner
    if isinstance(program, EagerBackend):
        return program
    return getattr(program, "weights_source", None)  # an AOTI package bound to an eager program's tensors


def shareable(program, device: str, dtype: torch.dtype):
    """The program's HF target module when the reference may use its weights (module doc), else None."""
    inner = eager_program(program)
    if inner is None or getattr(inner, "quantized_layers", None):
        return None
    model = inner.module.target.model
    p = next(model.parameters())
    want = torch.device(device)
    same_device = p.device.type == want.type and (want.index is None or p.device.index == want.index)
    return model if p.dtype == dtype and same_device else None


class SharedWeights:
    """The fingerprint of a module's parameters: one float64 norm per tensor, taken at construction."""

    def __init__(self, model: torch.nn.Module):
        self.params = list(model.parameters())
        self.taken = self._norms()

    def _norms(self) -> torch.Tensor:  # [n_params] float64
        with torch.no_grad():
            return torch.stack([torch.linalg.vector_norm(p, dtype=torch.float64) for p in self.params])

    def check(self) -> None:
        now = self._norms()
        if not torch.equal(now, self.taken):
            i = int((now != self.taken).nonzero()[0, 0])
            raise InputError(f"the program changed its own target weights (tensor {i} of {len(self.params)}) "
                             "while the HF reference shares them", "weights left as loaded",
                             "do not write into the target's parameters, or judge with --reference self")


def shared_reference(model: torch.nn.Module, device: str, attention: str | None = None):
    """An HFReference over a copy of `model` that shares its parameters (module doc), computing with
    `attention`, by default the program's own (SDPA, as program/target.load_hf_target loads it): the
    two then differ by HF's own shape noise only, not by HF's SDPA-against-eager spread as well
    (docs/scale.md: 8B bf16 on the H200, 11 failed positions -> 2; SmolLM2 bf16 on CPU, 6 ties -> 2).
    "eager" scores bit for bit as a loaded HFReference does."""
    from eagle3_check.judge.hf import HFReference

    ref_model = copy.deepcopy(model, memo={id(p): p for p in model.parameters()})
    ref_model.config._attn_implementation = attention or model.config._attn_implementation  # read at every forward
    ref = HFReference.from_model(ref_model, device)
    ref.shared = SharedWeights(ref_model)
    return ref
