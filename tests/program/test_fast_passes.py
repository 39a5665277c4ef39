"""XNNPACK's idle per-partition passes skipped (program/fast_passes.py): programs whose partitions hold
the ops the skippable passes act on (so they run, and change the partition) and programs whose
partitions do not (so they are skipped) lower to the stock lowering's bytes; which passes ran is what
`can_act` says; stock runs (with the reason) when ExecuTorch's source is not the relied-on one. The
tiny-llama export against `--stock-lowering`: tests/pte/test_fast_lowering_pte.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

pytest.importorskip("executorch.exir", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.program import fast_passes as fp  # noqa: E402
from eagle3_check.program.lowering import lower_edge  # noqa: E402


class _Decoderish(nn.Module):
    """What a decoder's partitions hold: linears, SiLU, a cat, no batch norm, convolution or ReLU."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):  # [1, T, 8] -> [1, T, 16]
        h = self.down(torch.nn.functional.silu(self.up(x)))
        return torch.cat([h, x], dim=-1)


class _Convish(nn.Module):
    """Ops the skippable passes act on: a 1-d convolution with batch norm (Conv1dUnsqueezePass,
    FuseBatchNormPass), ReLU after a linear (FuseActivationPass). (PReLU on this rank is refused by
    XNNPACK's stock channels-last pass, so it is not here.)"""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv, self.bn, self.lin = nn.Conv1d(4, 4, 3, padding=1), nn.BatchNorm1d(4), nn.Linear(8, 8)

    def forward(self, x):  # [1, 4, 8] -> [1, 4, 8]
        return torch.relu(self.lin(self.bn(self.conv(x))))


def _programs(module: nn.Module, example: torch.Tensor, dynamic: bool) -> dict:
    shapes = ({1: torch.export.Dim("T", min=1, max=12)},) if dynamic else None
    return {"forward": torch.export.export(module.eval(), (example,), dynamic_shapes=shapes)}


def _lowered(programs_of, stock: bool) -> tuple[bytes, dict]:
    edge, lowering = lower_edge(programs_of(), {}, "xnnpack", stock_lowering=stock)
    return edge.to_executorch().buffer, lowering


@pytest.mark.parametrize("name,programs_of,skipped,acting", [
    ("decoder-like", lambda: _programs(_Decoderish(), torch.randn(1, 4, 8), dynamic=True),
     {"FuseBatchNormPass", "Conv1dUnsqueezePass", "PReLUReshapePass", "FuseActivationPass"}, {"DecomposeConcatenate"}),
    ("conv-bn-relu", lambda: _programs(_Convish(), torch.randn(1, 4, 8), dynamic=False),
     {"DecomposeConcatenate"}, {"Conv1dUnsqueezePass", "FuseActivationPass"}),
])
def test_skipping_idle_passes_writes_the_stock_bytes(name, programs_of, skipped, acting, monkeypatch):
    seen: list[set[str]] = []
    stock_can_act = fp.can_act
    monkeypatch.setattr(fp, "can_act", lambda p, names: (seen.append(set(names)) or True) and stock_can_act(p, names))
    fast, lowering = _lowered(programs_of, stock=False)
    monkeypatch.undo()  # the checks below ask can_act themselves
    assert lowering["passes"]["mode"] == "fast" and lowering["passes"]["reason"] == ""
    assert fast == _lowered(programs_of, stock=True)[0], name
    # which passes could act is what the partitions held (one pass-by-pass check per partition)
    assert seen, "no XNNPACK partition was preprocessed in this process"
    for pass_name in skipped:
        assert not any(fp.can_act(pass_name, names) for names in seen), pass_name
    for pass_name in acting:
        assert any(fp.can_act(pass_name, names) for names in seen), pass_name


def test_can_act_reads_each_pass_s_ops():
    # A call target names a pass's op: the pass may act; none does: it cannot. Unknown passes always run.
    assert fp.can_act("DecomposeConcatenate", {"aten.cat.default", "aten.mm.default"})
    assert not fp.can_act("DecomposeConcatenate", {"aten.mm.default", "aten.add.Tensor"})
    assert fp.can_act("FuseBatchNormPass", {"aten._native_batch_norm_legit_no_training.default"})
    assert fp.can_act("PropagateCustomMetaPass", {"quantized_decomposed.dequantize_per_tensor.default"})
    assert fp.can_act("DimOrderOpsRevertPass", {"dim_order_ops._to_dim_order_copy.default"})
    assert fp.can_act("ConvertToLinearPass", set()) and fp.can_act("SomeNewPass", set())
    # a pattern pass: only when one pattern's every call target is there
    assert not fp.can_act("ConvertToSDPAPass", {"aten.mm.default"})
    assert not fp.can_act("ConvertToUpsampleBilinear2d", {"aten.mm.default"})


def test_another_executorch_source_runs_stock_and_says_why(monkeypatch):
    from executorch.backends.xnnpack._passes import XNNPACKPassManager

    monkeypatch.setitem(fp._STOCK_SOURCES, "XNNPACKPassManager.transform", "0" * 16)
    stock = XNNPACKPassManager.transform
    with fp.fast_passes() as stats:
        assert XNNPACKPassManager.transform is stock
    assert stats.mode == "stock" and "XNNPACKPassManager.transform source" in stats.reason
    assert "is not the relied-on version 0000000000000000" in stats.reason


def test_the_stock_transform_is_back_after_the_lowering():
    from executorch.backends.xnnpack._passes import XNNPACKPassManager

    stock = XNNPACKPassManager.transform
    with fp.fast_passes() as stats:
        assert stats.mode == "fast" and XNNPACKPassManager.transform is not stock
    assert XNNPACKPassManager.transform is stock
