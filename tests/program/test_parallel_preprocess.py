"""XNNPACK's preprocess spread over forked workers (program/parallel_preprocess.py): the shares, the
results put back in their places, a failed worker's share done here, the stock loop restored, and
the bytes of a small multi-partition program equal to the stock loop's. The tiny-llama export
against `--stock-lowering`, byte for byte: tests/pte/test_fast_lowering_pte.py."""

from __future__ import annotations

import os

import pytest

from eagle3_check.program import parallel_preprocess as pp


def test_deal_gives_each_partition_to_the_least_loaded_share_longest_first():
    # costs [5, 1, 4, 2]: 5 -> share 0, 4 -> share 1, 2 -> share 1 (4 < 5), 1 -> share 0 (5 < 6)
    assert pp.deal([5, 1, 4, 2], 2) == [[0, 1], [2, 3]]
    assert pp.deal([3, 3, 3], 3) == [[0], [1], [2]]
    shares = pp.deal(list(range(17)), 3)
    assert sorted(i for s in shares for i in s) == list(range(17))


class _Graph:
    def __init__(self, n):
        self.nodes = [type("N", (), {"op": "call_function"})() for _ in range(n)]


class _Program:
    def __init__(self, value):
        self.value, self.graph = value, _Graph(value % 5)


def _square(program, spec):
    return (program.value ** 2, spec, os.getpid())


@pytest.mark.parametrize("workers", [2, 3])
def test_every_result_comes_back_to_its_place(workers):
    items = [(_Program(v), f"spec{v}") for v in range(11)]
    stats = pp.PreprocessStats()
    results = pp._preprocess_all(_square, items, workers, stats)
    assert [(r[0], r[1]) for r in results] == [(v * v, f"spec{v}") for v in range(11)]
    assert sum(stats.partitions) == 11 and len(stats.partitions) == workers and not stats.reason
    assert len({r[2] for r in results}) == workers  # each share ran in its own process


def test_a_failed_worker_share_is_preprocessed_here():
    parent = os.getpid()

    def only_here(program, spec):
        if os.getpid() != parent:
            raise RuntimeError("a worker that dies")
        return program.value

    items = [(_Program(v), None) for v in range(6)]
    stats = pp.PreprocessStats()
    assert pp._preprocess_all(only_here, items, 2, stats) == list(range(6))
    assert "a worker failed" in stats.reason


NO_EXECUTORCH = "executorch not installed: pip install -e .[pte]"


def _small_program_bytes(workers: int, enabled: bool) -> tuple[bytes, pp.PreprocessStats]:
    """Four Linear+ReLU partitions (cumsum, not delegated, between them), lowered to XNNPACK."""
    import torch
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend
    from executorch.exir import EdgeCompileConfig, to_edge_transform_and_lower

    class Layers(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))

        def forward(self, x):  # [2, 8] -> [2, 8]
            for layer in self.layers:
                x = layer(x).relu().cumsum(-1)
            return x

    torch.manual_seed(0)
    program = torch.export.export(Layers(), (torch.randn(2, 8),), strict=False)
    with pp.parallel_preprocess(XnnpackBackend, workers=workers, enabled=enabled) as stats:
        edge = to_edge_transform_and_lower({"forward": program}, partitioner=[XnnpackPartitioner()],
                                           compile_config=EdgeCompileConfig(_check_ir_validity=False))
    assert "preprocess_multimethod" not in vars(XnnpackBackend)  # the inherited stock loop again
    return edge.to_executorch().buffer, stats


@pytest.mark.pte
def test_the_spread_preprocess_writes_the_stock_bytes():
    pytest.importorskip("executorch.exir", reason=NO_EXECUTORCH)
    spread, stats = _small_program_bytes(2, True)
    assert stats.workers == 2 and stats.partitions == [3, 1] and not stats.reason, stats
    stock, stats = _small_program_bytes(2, False)
    assert stats.reason == "--stock-lowering"
    assert spread == stock


@pytest.mark.pte
def test_the_guard_and_one_cpu_run_the_stock_loop():
    pytest.importorskip("executorch.exir", reason=NO_EXECUTORCH)
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    assert pp.guard(XnnpackBackend) == ""
    with pp.parallel_preprocess(XnnpackBackend, workers=1) as stats:
        assert "preprocess_multimethod" not in vars(XnnpackBackend)
    assert stats.reason == "one worker"


@pytest.mark.pte
def test_more_torch_threads_run_the_stock_loop():
    pytest.importorskip("executorch.exir", reason=NO_EXECUTORCH)
    import torch
    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend

    torch.set_num_threads(2)
    try:
        with pp.parallel_preprocess(XnnpackBackend, workers=2) as stats:
            assert "preprocess_multimethod" not in vars(XnnpackBackend)
    finally:
        torch.set_num_threads(1)  # as tests/conftest.py sets it
    assert stats.reason.startswith("torch runs 2 threads"), stats
