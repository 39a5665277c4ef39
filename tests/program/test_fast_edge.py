"""to_edge's idle third re-trace skipped (program/fast_edge.py): a small program with a dynamic
dimension lowered with every fast path writes the stock lowering's bytes, the skip happened, the
hand-back is one call only, and stock runs (with the reason) when ExecuTorch's source is not the
relied-on one. The tiny-llama export against `--stock-lowering`: tests/pte/test_fast_lowering_pte.py."""

from __future__ import annotations

import pytest
import torch
from torch import nn

pytest.importorskip("executorch.exir", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.program import fast_edge as fe  # noqa: E402
from eagle3_check.program.lowering import lower_edge  # noqa: E402


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.up, self.down = nn.Linear(8, 16), nn.Linear(16, 8)

    def forward(self, x):  # [1, T, 8] -> [1, T, 8]
        return x + self.down(torch.nn.functional.silu(self.up(x))) * x.shape[1]


def _programs() -> dict:
    t = torch.export.Dim("T", min=1, max=12)
    return {"forward": torch.export.export(_Block(), (torch.randn(1, 4, 8),), dynamic_shapes=({1: t},))}


def _lowered(stock: bool) -> tuple[bytes, dict]:
    edge, lowering = lower_edge(_programs(), {}, "xnnpack", stock_lowering=stock)
    return edge.to_executorch().buffer, lowering


def test_the_skip_writes_the_stock_bytes():
    fast, lowering = _lowered(stock=False)
    assert lowering["edge"] == {"mode": "fast", "reason": "", "skipped": 1, "ran": 0}
    stock, stock_lowering = _lowered(stock=True)
    assert stock_lowering["edge"]["reason"] == "--stock-lowering"
    assert fast == stock


def test_the_hand_back_is_one_call():
    class Program:
        def run_decompositions(self, table=None):  # the class's method: a new program
            return "re-traced"

    p = Program()
    fe._hand_back_once(p)
    assert p.run_decompositions({"any": "table"}) is p
    assert p.run_decompositions() == "re-traced"


def test_stock_runs_when_the_source_is_not_the_relied_on_one(monkeypatch):
    from executorch.exir.program import _program

    stock = _program._replace_aten_ops_with_transformed_ops
    monkeypatch.setitem(fe._STOCK_SOURCES, "_gen_edge_manager_for_partitioners", "0" * 16)
    with fe.fast_edge() as stats:
        assert _program._replace_aten_ops_with_transformed_ops is stock
    assert stats.mode == "stock" and "is not the relied-on version 0000000000000000" in stats.reason
