"""The runner loop's two data placements: the worked example of runners/placement.py, pinned.

Both placements must answer the loop's data questions identically (the same tokens and
positions for every call); they differ only in where the data lives and when it is read.
"""

from __future__ import annotations

import pytest
import torch

from eagle3_check.runners.device_loop import DeviceRunner
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.placement import PLACEMENTS, DevicePlacement, HostPlacement
from eagle3_check.suites.toy import ToyProgram

A, X, Y, Q, R = 300, 301, 302, 303, 304


def filled(cls):
    """A placement for K = 2 with window [A, x, y] (the module doc's worked example)."""
    place = cls(ToyProgram(), max_seq_len=32, k=2, vocab=1000)
    place.put(0, torch.tensor([[A]]))
    place.put(1, torch.tensor([[7, X]]))  # slot := the last id of a [1, T] output
    place.put(2, torch.tensor([[Y]]))
    return place


@pytest.mark.parametrize("cls", [HostPlacement, DevicePlacement], ids=["host", "device"])
def test_worked_example_of_one_round(cls):
    place = filled(cls)
    verify_ids = torch.tensor([[X, Q, R]])  # [1, K + 1]
    assert place.window(0, 3).tolist() == [[A, X, Y]]
    proposals, v = place.read_round(verify_ids)
    assert (proposals, v) == ([X, Y], [X, Q, R])
    a = 1  # p0 == v0, p1 = y != v1 = q
    round_tokens = proposals[:a] + [v[a]]
    assert place.reseed_tokens(round_tokens, verify_ids).tolist() == [[X, Q]]
    assert place.positions(10, 3).tolist() == [10, 11, 12]


def test_device_window_is_one_buffer_and_the_fed_row_is_runner_owned():
    place = filled(DevicePlacement)
    assert place.window(1, 2).data_ptr() == place.buf[:, 1:2].data_ptr()
    g = torch.randn(1, 3, 4)  # [1, T, H], as a graph would own it
    fed = place.feed(g[:, -1:])
    g.zero_()  # the graph's next call overwrites its output
    assert fed.abs().sum() > 0 and fed.data_ptr() != g.data_ptr()


def test_device_read_range_checks_the_window_and_verify_ids():
    from eagle3_check.errors import ContractViolation

    place = filled(DevicePlacement)
    with pytest.raises(ContractViolation, match="target_verify returned id 5000"):
        place.read_round(torch.tensor([[X, 5000, R]]))


def test_one_loop_two_placements():
    assert set(PLACEMENTS) == {"host", "device"}
    assert DeviceRunner.run is ReferenceRunner.run
    assert ReferenceRunner().placement is HostPlacement and DeviceRunner().placement is DevicePlacement
    assert ReferenceRunner("device").placement is DevicePlacement
