"""An exact, faster merge test for ExecuTorch's XNNPACK partitioner (issue 49).

XNNPACK's partitioner proposes its partitions with `GroupBasedPartitioner`
(executorch/exir/backend/canonical_partitioners/group_partitioner.py): every supported node starts
as a partition of its own, and `_merge_partitions` tries every pair (p1, p2) in turn, merging when
`_can_merge_partitions(p1, p2)` says the union makes no cycle. Stock's test collects the union's
external users and, for each, asks `any(n in combined for n in downstreams_of(user))` over the
user's whole transitive downstream set, in Python: ~pairs x users x downstream nodes. On SmolLM2
(30 layers) that was the partition phase's ~50 s (docs/speed.md "Export").

`fast_partition()` replaces the method, for our lowering only, by one that answers the same
question the same way in C: `not downstreams_of(user).isdisjoint(combined)` (the same boolean as
stock's `any`), each external user asked once (a user seen twice gives the same answer twice), and
then stock's own `validate_partition(list(combined))`. Same answers, so the same merges, the same
partitions and the same bytes: `tests/program/test_fast_partition.py` compares every pair's answer
with stock's on a graph where merges fail, `tests/pte/test_fast_lowering_pte.py` the `.pte` bytes.

Guarded: stock's `_can_merge_partitions` must hash to the version this was written from
(executorch 1.5.1); otherwise stock runs and the export's sidecar says why (`partition` in its
`lowering`).
"""

from __future__ import annotations

import contextlib
from dataclasses import asdict, dataclass
from typing import Any

# sha256 (first 16 hex) of inspect.getsource of the stock method replaced here (executorch 1.5.1).
_EXPECTED = "08428a6ba5abd129"


@dataclass
class PartitionStats:
    """How the partitioner's merge test ran: `mode` fast or stock, `reason` when stock was forced,
    `calls` to the fast test."""

    mode: str = "stock"
    reason: str = ""
    calls: int = 0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def _stock_class():
    from executorch.exir.backend.canonical_partitioners.group_partitioner import (
        GroupBasedPartitioner,
    )

    return GroupBasedPartitioner


def guard() -> str:
    """'' when stock's `_can_merge_partitions` is the version reproduced here; otherwise why not."""
    from eagle3_check.program.fast_lowering import _source_digest

    try:
        cls = _stock_class()
    except ImportError as e:  # pragma: no cover - export requires executorch
        return f"executorch's group_partitioner not importable ({e})"
    got = _source_digest(cls._can_merge_partitions)
    if got != _EXPECTED:
        return f"GroupBasedPartitioner._can_merge_partitions source {got} is not the reproduced version {_EXPECTED}"
    return ""


def can_merge(self, p1, p2, partitions_by_id, stats: PartitionStats | None = None) -> bool:
    """Stock's `_can_merge_partitions(p1, p2)` answer: False when an external user of the union
    reaches back into it (its downstream set meets the union) or `validate_partition` finds a cycle."""
    from torch.fx.passes.utils.fuser_utils import validate_partition

    if stats is not None:
        stats.calls += 1
    combined = set(partitions_by_id[p1].nodes.keys()).union(partitions_by_id[p2].nodes.keys())
    downstreams_of = self.dependency_viewer.downstreams_of
    asked: set = set()
    for node in combined:
        for user in node.users:
            if user in combined or user in asked:
                continue
            asked.add(user)
            if not downstreams_of(user).isdisjoint(combined):
                return False
    return validate_partition(list(combined))


@contextlib.contextmanager
def fast_partition(enabled: bool = True):
    """Within: `GroupBasedPartitioner._can_merge_partitions` is `can_merge` (when `enabled` and the
    guard passes). Yields the PartitionStats."""
    stats = PartitionStats()
    why = guard() if enabled else "--stock-lowering"
    if why:
        stats.reason = why
        yield stats
        return
    cls = _stock_class()
    stock = cls.__dict__["_can_merge_partitions"]

    def _can_merge_partitions(self, p1, p2, partitions_by_id):
        return can_merge(self, p1, p2, partitions_by_id, stats)

    cls._can_merge_partitions = _can_merge_partitions
    stats.mode = "fast"
    try:
        yield stats
    finally:
        cls._can_merge_partitions = stock
