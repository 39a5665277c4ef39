"""tests/shared_lowering.py: a program lowered one method at a time, its methods composed, serializes
to the joint lowering's bytes (a two-method program sharing a mutable cache, as prefill and
target_verify share the KV caches); a method lowered before is taken from the memo, another method
or other weights are not; the merged stats have the joint lowering's shape."""

from __future__ import annotations

import pytest
import torch
from torch import nn

pytest.importorskip("executorch.exir", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.program.export import Phases  # noqa: E402
from eagle3_check.program.lowering import lower_to_pte  # noqa: E402
from tests.shared_lowering import merge_stats, shared_lowering  # noqa: E402


class _Cached(nn.Module):
    """Two methods on one zero-initialised cache: `write` puts rows in it, `read` reads it back."""

    def __init__(self, seed: int = 0):
        super().__init__()
        torch.manual_seed(seed)
        self.inp, self.out = nn.Linear(8, 8), nn.Linear(8, 8)
        self.register_buffer("k_cache", torch.zeros(4, 8))

    def write(self, x, pos):  # x [2, 8], pos [2] -> [2, 8]
        h = torch.nn.functional.silu(self.inp(x))
        self.k_cache.index_copy_(0, pos, h)
        return h

    def read(self, x):  # x [1, 8] -> [1, 8]
        return self.out(self.k_cache.sum(0, keepdim=True) + x)


class _Method(nn.Module):
    def __init__(self, module: _Cached, name: str):
        super().__init__()
        self.module, self.name = module, name

    def forward(self, *args):
        return getattr(self.module, self.name)(*args)


def _traced(seed: int = 0) -> dict:
    module = _Cached(seed)
    args = {"write": (torch.randn(2, 8), torch.tensor([0, 1])), "read": (torch.randn(1, 8),)}
    with torch.no_grad():
        return {name: torch.export.export(_Method(module, name), a, strict=False) for name, a in args.items()}


def _pte(programs: dict, path) -> bytes:
    lower_to_pte(programs, {"get_answer": 42}, "xnnpack", path, Phases())
    return path.read_bytes()


def test_methods_lowered_one_at_a_time_are_the_joint_lowerings_bytes(tmp_path):
    joint = _pte(_traced(), tmp_path / "joint.pte")
    memo: dict = {}
    with shared_lowering(memo):
        assert _pte(_traced(), tmp_path / "per-method.pte") == joint
        assert len(memo) == 2
        # the same methods again: both from the memo, the same bytes
        assert _pte(_traced(), tmp_path / "again.pte") == joint and len(memo) == 2
        # other weights are another method: lowered, and other bytes
        assert _pte(_traced(seed=1), tmp_path / "other.pte") != joint and len(memo) == 4


def test_a_shared_method_keeps_its_own_name():
    traced = _traced()
    memo: dict = {}
    with shared_lowering(memo):
        from eagle3_check.program import lowering

        edge, _ = lowering.lower_edge({"read": traced["read"]}, {}, "xnnpack")
        edge2, _ = lowering.lower_edge({"write": traced["write"], "read": traced["read"]}, {}, "xnnpack")
    assert edge.methods == {"read"} and edge2.methods == {"write", "read"}
    assert len(memo) == 2  # read once, write once


def test_merge_stats_is_the_joint_shape():
    # three methods' stats: counts summed, workers the largest, per-process partitions added per process
    parts = [{"mode": "fast", "fast": 3, "moved": 1, "fast_s": 0.25, "preprocess": {"workers": 2, "partitions": [20, 27]}},
             {"mode": "fast", "fast": 2, "moved": 0, "fast_s": 0.5, "preprocess": {"workers": 2, "partitions": [6, 5]}},
             {"mode": "fast", "fast": 1, "moved": 2, "fast_s": 0.125, "preprocess": {"workers": 1, "partitions": [1]}}]
    assert merge_stats(parts) == {"mode": "fast", "fast": 6, "moved": 3, "fast_s": 0.875,
                                  "preprocess": {"workers": 2, "partitions": [27, 32]}}
    assert merge_stats([{"reason": ""}, {"reason": "one worker"}]) == {"reason": "one worker"}
    assert merge_stats([{"passes": None}, {"passes": None}]) == {"passes": None}
