"""Exact mode on the tiny fixtures in bf16: the eager program's prefill, verify windows and one-row
decodes give logits bit-identical to the HF reference's full forward under `exact_numerics` (in
normal mode they differ: the test can fail)."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.exact import exact_numerics
from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.judge.hf import HFReference
from eagle3_check.program.eager import EagerBackend

PREFILL = 20
WINDOWS = (5, 1, 3, 1, 8, 2)  # K + 1 rows of a verify, a one-row decode, ...: 40 positions in all


CUDA = torch.cuda.is_available()
CASES = [("tiny-llama", "cpu"), ("tiny-gemma4", "cpu"), pytest.param(("tiny-llama", "cuda"), marks=[
    pytest.mark.gpu, pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU; torch.cuda.is_available() is False")])]


@pytest.fixture(scope="module", params=CASES, ids=lambda c: "-".join(c))
def pair(request):
    name, device = request.param
    fx = load_fixture(name)
    program = EagerBackend.from_fixture(fx, device=device, dtype="bfloat16")
    return program.module.target, HFReference(fx.target_dir, device=device, dtype=torch.bfloat16).model


def incremental_and_full(target, model, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The program's logits over ids [1, N] as prefill + windows, and the HF full forward's: [N, V] each."""
    at = {"device": ids.device}
    rows = [target(ids[:, :PREFILL], torch.arange(PREFILL, **at))[0][0]]  # [PREFILL, V]
    pos = PREFILL
    for w in WINDOWS:
        rows.append(target(ids[:, pos:pos + w], torch.arange(pos, pos + w, **at))[0][0])  # [w, V]
        pos += w
    return torch.cat(rows), model(input_ids=ids[:, :pos]).logits[0]


@torch.no_grad()
def test_exact_windows_equal_the_full_forward_bit_for_bit(pair):
    target, model = pair
    ids = torch.randint(3, model.config.get_text_config(decoder=True).vocab_size, (1, PREFILL + sum(WINDOWS)),
                        generator=torch.Generator().manual_seed(1)).to(next(model.parameters()).device)
    with exact_numerics(target, model):
        inc, full = incremental_and_full(target, model, ids)
    assert torch.equal(inc, full), f"{int((inc != full).any(-1).sum())} of {len(full)} rows differ"
    normal_inc, normal_full = incremental_and_full(target, model, ids)
    assert not torch.equal(normal_inc, normal_full)  # what exact mode removes (bf16 rounds by shape)
