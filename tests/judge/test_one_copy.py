"""Issue 44 on CPU: the program's target keeps HF's float32 RoPE table in bf16 (the 8B shape's 3.5-logit
shift), and `check`'s HF reference shares the program's weights (one copy) while computing exactly
what a reference loaded on its own computes, and refuses to judge a program that wrote into them."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.errors import InputError
from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.shared import eager_program, shareable, shared_reference
from eagle3_check.program.eager import EagerBackend

TOKENS = [5, 9, 33, 7, 101, 3, 64, 12]


def program(dtype: str) -> EagerBackend:
    return EagerBackend.from_fixture(load_fixture("tiny-llama"), dtype=dtype)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_program_target_buffers_are_the_references(dtype):
    """Every buffer of the program's HF module (RoPE's inv_freq included) equals, dtype and value, a plain
    from_pretrained's: before the fix a bf16 program cast inv_freq to bf16 (0.3162 -> 0.3164)."""
    from transformers import AutoModelForCausalLM

    fx = load_fixture("tiny-llama")
    mine = dict(program(dtype).module.target.model.named_buffers())
    hf = dict(AutoModelForCausalLM.from_pretrained(fx.target_dir, dtype=getattr(torch, dtype)).named_buffers())
    assert mine.keys() == hf.keys() and mine
    for k in hf:
        assert mine[k].dtype == hf[k].dtype and torch.equal(mine[k], hf[k]), k
    assert mine["model.rotary_emb.inv_freq"].dtype == torch.float32


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_shared_reference_scores_as_a_loaded_one_on_the_same_tensors(dtype):
    from transformers import AutoModelForCausalLM

    prog = program(dtype)
    model = shareable(prog, "cpu", getattr(torch, dtype))
    assert model is prog.module.target.model
    ref = shared_reference(model, "cpu", "eager")
    assert all(a is b for a, b in zip(ref.model.parameters(), model.parameters()))  # one copy
    assert ref.model.config._attn_implementation == "eager" and model.config._attn_implementation == "sdpa"
    loaded = HFReference(load_fixture("tiny-llama").target_dir, "cpu", getattr(torch, dtype))
    prompt = [2, 105, 433, 368]
    assert ref.score(prompt, TOKENS) == loaded.score(prompt, TOKENS)  # every row, bit for bit
    own = shared_reference(model, "cpu")  # the default: the program's own attention, HF's full forward
    assert own.model.config._attn_implementation == "sdpa" and ref.model.config._attn_implementation == "eager"
    sdpa = AutoModelForCausalLM.from_pretrained(load_fixture("tiny-llama").target_dir, dtype=getattr(torch, dtype),
                                                attn_implementation="sdpa")
    assert own.score(prompt, TOKENS) == HFReference.from_model(sdpa).score(prompt, TOKENS)


def test_a_program_that_writes_its_weights_is_refused():
    prog = program("float32")
    ref = shared_reference(shareable(prog, "cpu", torch.float32), "cpu")
    ref.score([2, 105], TOKENS[:3])
    with torch.no_grad():
        prog.module.target.model.model.layers[1].self_attn.o_proj.weight.mul_(1.01)
    with pytest.raises(InputError, match="changed its own target weights"):
        ref.score([2, 105], TOKENS[:3])


def test_not_shared_across_dtype_device_or_a_quantized_program():
    prog = program("float32")
    assert shareable(prog, "cpu", torch.bfloat16) is None
    assert shareable(prog, "cuda", torch.float32) is None
    assert shareable(object(), "cpu", torch.float32) is None
    quant = EagerBackend.from_fixture(load_fixture("tiny-llama-int8"))
    assert shareable(quant, "cpu", torch.float32) is None


def test_check_context_shares_once_the_program_is_built():
    from eagle3_check.cli import config_of
    from eagle3_check.jobs.common.context import CheckContext
    from eagle3_check.program.cuda_graph import GraphedProgram

    cfg, _ = config_of(["check", "--fixture", "tiny-llama"])
    ctx = CheckContext(cfg)
    assert ctx.hf_reference().shared is None  # no program yet: the reference loads its own
    ctx.setup  # noqa: B018  the program, built
    ref = ctx.hf_reference()
    assert ref.shared is not None
    assert eager_program(GraphedProgram(ctx.program, mode="off")) is ctx.program  # found under a wrapper
