"""The XNNPACK partitioner's merge test made fast (program/fast_partition.py): every pair's answer
equal to stock's on a graph where some merges would make a cycle, the same proposed partitions,
stock's method restored, and stock kept (with the reason) when its source is not the reproduced
one. The tiny-llama export against `--stock-lowering`, byte for byte: tests/pte/test_fast_lowering_pte.py."""

from __future__ import annotations

import itertools

import pytest
import torch

pytest.importorskip("executorch.exir", reason="executorch not installed: pip install -e .[pte]")

from torch.fx.passes.operator_support import OperatorSupportBase  # noqa: E402

from eagle3_check.program import fast_partition as fp  # noqa: E402


def _model(x, y):  # x [2, 3], y [2, 3] -> [2, 3]
    a = x + y
    b = torch.relu(a)  # unsupported: merging a with what reads b makes a cycle through b
    c = a * b
    d = torch.sigmoid(c)  # unsupported
    e = c - d
    f = a + e
    g = torch.tanh(y)  # independent of the chain: merges with it
    return f * g


class _NoActivations(OperatorSupportBase):
    def is_node_supported(self, submodules, node) -> bool:
        return node.op == "call_function" and node.target not in (torch.relu, torch.sigmoid)


def _partitioner():
    from executorch.exir.backend.canonical_partitioners.group_partitioner import (
        GroupBasedPartitioner,
    )

    gm = torch.fx.symbolic_trace(_model)
    return GroupBasedPartitioner(gm, _NoActivations(), allows_single_node_partition=True)


def _single_node_partitions(part):
    from torch.fx.passes.infra.partitioner import Partition

    supported = [n for n in part.graph_module.graph.nodes if part._is_node_supported(n)]
    return {i: Partition(id=i, nodes=[n]) for i, n in enumerate(supported)}


def test_every_pair_gets_stock_answer():
    part = _partitioner()
    stock = type(part).__dict__["_can_merge_partitions"]
    by_id = _single_node_partitions(part)
    pairs = list(itertools.permutations(by_id, 2))
    answers = {(p1, p2): stock(part, p1, p2, by_id) for p1, p2 in pairs}
    assert set(answers.values()) == {True, False}  # the graph has both kinds of pair
    stats = fp.PartitionStats()
    assert {(p1, p2): fp.can_merge(part, p1, p2, by_id, stats) for p1, p2 in pairs} == answers
    assert stats.calls == len(pairs)


def _proposed(part) -> list[set[str]]:
    return sorted(({n.name for n in p.nodes} for p in part.propose_partitions()), key=sorted)


def test_the_same_partitions_are_proposed_and_stock_is_restored():
    cls = type(_partitioner())
    stock = cls.__dict__["_can_merge_partitions"]
    want = _proposed(_partitioner())
    assert len(want) > 1  # the unsupported activations split the chain
    with fp.fast_partition() as stats:
        assert cls.__dict__["_can_merge_partitions"] is not stock
        got = _proposed(_partitioner())
    assert cls.__dict__["_can_merge_partitions"] is stock
    assert (stats.mode, stats.reason) == ("fast", "") and stats.calls > 0
    assert got == want


def test_stock_runs_when_the_source_is_not_the_reproduced_one(monkeypatch):
    monkeypatch.setattr(fp, "_EXPECTED", "0" * 16)
    cls = type(_partitioner())
    stock = cls.__dict__["_can_merge_partitions"]
    with fp.fast_partition() as stats:
        assert cls.__dict__["_can_merge_partitions"] is stock
    assert stats.mode == "stock" and "is not the reproduced version 0000000000000000" in stats.reason
    with fp.fast_partition(enabled=False) as stats:
        assert cls.__dict__["_can_merge_partitions"] is stock
    assert stats.reason == "--stock-lowering"
