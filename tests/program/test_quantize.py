"""Weight-only quantization (issue 15): the quantized modules, the spec tag, the fixture variants
and the drift arithmetic. Eager CPU; the gate on quantized programs: tests/jobs/gate/test_quant_gate.py;
the .pte twin: tests/pte/test_quantized_pte.py."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

pytest.importorskip("torchao.quantization", reason="torchao not installed (it comes with the pte extra): "
                    "pip install -e .[pte]")

from eagle3_check.errors import OptionError  # noqa: E402
from eagle3_check.fixtures.registry import list_fixtures, list_variants, load_fixture  # noqa: E402
from eagle3_check.jobs.check.drift import prompt_drift  # noqa: E402
from eagle3_check.judge.hf import Scores  # noqa: E402
from eagle3_check.program.eager import EagerBackend  # noqa: E402
from eagle3_check.program.quantize import (  # noqa: E402
    QuantSpec,
    WeightOnlyLinear,
    make_spec,
    parse_tag,
    program_quantization,
    quantize_linear,
)


@pytest.mark.parametrize("spec", [make_spec("int8-weight"), make_spec("int4-weight"), make_spec("int4-weight", 16)],
                         ids=["int8-per-channel", "int4-g32", "int4-g16"])
def test_weight_only_linear_is_torchaos_quantization(spec):
    """Our dequantize-then-linear equals torchao's own quantized linear (its tensor subclass),
    and the integers are in the scheme's range."""
    from torchao.quantization import quantize_

    from eagle3_check.program.quantize import _torchao_config

    torch.manual_seed(0)
    lin = nn.Linear(64, 192, bias=True)
    ours = quantize_linear(lin, spec)
    theirs = nn.Sequential(nn.Linear(64, 192, bias=True))
    theirs.load_state_dict({"0.weight": lin.weight.detach(), "0.bias": lin.bias.detach()})
    quantize_(theirs, _torchao_config(spec))
    x = torch.randn(3, 5, 64)  # [B, T, K]
    assert torch.allclose(ours(x), theirs(x), atol=1e-6, rtol=0)
    lo, hi = (-128, 127) if spec.scheme == "int8-weight" else (-8, 7)
    assert ours.qdata.dtype == torch.int8 and lo <= int(ours.qdata.min()) and int(ours.qdata.max()) <= hi
    groups = 1 if spec.group_size is None else 64 // spec.group_size
    assert tuple(ours.scale.shape) == (192, groups)
    err = (ours.weight - lin.weight).abs().max()
    assert 0 < err <= ours.scale.max() / 2 + 1e-7  # round to nearest: at most half a step


def test_spec_tag_round_trips_and_bad_input_is_one_line():
    for spec in (make_spec("int8-weight"), make_spec("int4-weight", 16, draft=True)):
        assert parse_tag(spec.tag()) == spec
    assert make_spec("int4-weight").tag() == "int4-weight;group_size=32;scope=target"
    for bad in ("int3-weight;group_size=32;scope=target", "int4-weight;group_size=x;scope=target", "int4-weight"):
        with pytest.raises(OptionError, match="get_quantization"):
            parse_tag(bad)
    with pytest.raises(OptionError, match="--group-size 0"):
        make_spec("int4-weight", 0)
    with pytest.raises(OptionError, match="--group-size 48 for lin with 64 input columns"):
        quantize_linear(nn.Linear(64, 8), QuantSpec("int4-weight", 48), "lin")


def test_variants_are_listed_apart_and_built_deterministically_from_the_fp32_fixture():
    assert {"tiny-llama-int4", "tiny-llama-int8"} <= set(list_variants())
    assert not set(list_variants()) & set(list_fixtures())
    fx = load_fixture("tiny-llama-int4")
    assert fx.base == "tiny-llama" and fx.target_dir == load_fixture("tiny-llama").target_dir
    a, b = EagerBackend.from_fixture(fx), EagerBackend.from_fixture(fx)
    assert program_quantization(a.metadata()) == QuantSpec("int4-weight", 32, "target")
    qa = {n: t for n, t in a.module.state_dict().items() if n.endswith(("qdata", "scale"))}
    qb = b.module.state_dict()
    assert len(qa) == 2 * 29 and all(torch.equal(t, qb[n]) for n, t in qa.items())  # 4 x 7 linears + lm_head
    assert not any(isinstance(m, WeightOnlyLinear) for m in a.module.draft.modules())  # target only


def test_prompt_drift_worked_example():
    """drift.py's example: tokens [5, 7, 9], HF argmax [5, 8, 9, 4] -> agreement 2/3, first at 1."""
    hf = Scores([5, 8, 9, 4], [3.0, 2.0, 1.0, 1.0], [1.0, 1.5, 0.0, 0.0], [6, 7, 1, 1], [3.0, 1.5, 1.0], [1, 2, 1])
    d = prompt_drift("p", [5, 7, 9], hf)
    assert (d.positions, d.agree, d.first, d.got, d.want, d.rank, d.worst_rank) == (3, 2, 1, 7, 8, 2, 2)
    assert math.isclose(d.agreement, 2 / 3) and math.isclose(d.margin, 0.5)


def test_the_eager_dequantized_weight_follows_its_buffers():
    """An eager WeightOnlyLinear keeps its dequantized weight between calls; zeroing its scales
    in place (zero_scales, after a forward) or replacing a buffer is seen by the next call, and a
    traced forward (torch.export) still dequantizes in the graph, from the integer buffers."""
    from eagle3_check.program.quantize import zero_scales

    torch.manual_seed(0)
    holder = nn.Sequential(quantize_linear(nn.Linear(64, 16), make_spec("int4-weight")))
    x = torch.randn(2, 64)  # [2, 64]
    first = holder(x)  # [2, 16]
    assert torch.equal(holder(x), first) and holder[0].weight is holder[0].weight  # kept, not recomputed
    zero_scales(holder, "0")
    assert torch.equal(holder(x), holder[0].bias.expand(2, 16))  # the zeroed scales, not the kept weight
    holder[0].scale = torch.ones_like(holder[0].scale)  # a replaced buffer
    assert torch.equal(holder[0].weight, holder[0].qdata.float() - holder[0].zero_point.float().repeat_interleave(32, 1))
    ops = {str(n.target) for n in torch.export.export(holder, (x,)).graph.nodes if n.op == "call_function"}
    assert "aten.mul.Tensor" in ops and "aten.sub.Tensor" not in ops  # q * scale traced: symmetric, zp = 0


def test_nonzero_zero_points_are_traced_and_applied():
    """A zero point that is not 0 (set after quantization, no eager call since) is subtracted, in the
    traced graph and in eager: the `- zp` is left out only when every zero point is 0."""
    from eagle3_check.program.quantize import read_all_zero_points

    torch.manual_seed(0)
    holder = nn.Sequential(quantize_linear(nn.Linear(64, 16), make_spec("int4-weight")))
    x = torch.randn(2, 64)  # [2, 64]
    holder[0].zero_point = torch.ones_like(holder[0].zero_point)  # a replaced buffer
    read_all_zero_points(holder)  # what export_methods does before tracing
    traced = torch.export.export(holder, (x,))
    assert "aten.sub.Tensor" in {str(n.target) for n in traced.graph.nodes if n.op == "call_function"}
    want = (holder[0].qdata.float() - 1) * holder[0].scale.repeat_interleave(32, 1)  # [16, 64]
    assert torch.equal(holder[0].weight, want)
    assert torch.equal(traced.module()(x), holder(x))


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device (pytest -m gpu on a GPU machine)")
def test_a_cuda_linear_is_quantized_in_place_on_its_device():
    # torchao quantizes on CPU (the holder); the layer goes back where the linear was: an int8 copy of a
    # target loaded on the GPU runs there (bench/perturbed_check.py's int8 program on the 8B shape failed
    # with "mat2 is on cpu" before)
    torch.manual_seed(0)
    lin = nn.Linear(64, 16).cuda()
    q = quantize_linear(lin, make_spec("int8-weight"))
    assert {b.device.type for b in q.buffers()} == {"cuda"}
    x = torch.randn(2, 64, device="cuda")
    assert torch.allclose(q(x), lin(x), atol=0.05)


def test_a_cpu_linear_stays_on_cpu():
    lin = nn.Linear(64, 16)
    q = quantize_linear(lin, make_spec("int8-weight"))
    assert {b.device.type for b in q.buffers()} == {"cpu"}
