"""GraphedMethod's buffer discipline (emulated on CPU), with_cuda_graphs' choices, the oracle table.

The CUDA path itself is exercised by tests/gpu; here the logic that does not need a GPU:
one entry per input shape, inputs copied into stable buffers, outputs are the same tensor
objects every call (overwritten in place), long calls run eagerly.
"""

from __future__ import annotations

import pytest
import torch

import eagle3_check.program.cuda_graph as cg
from eagle3_check.errors import OptionError
from eagle3_check.program.cuda_graph import GraphedMethod, with_cuda_graphs
from eagle3_check.suites.oracle import oracle_table


def double_and_sum(tokens, positions):  # [1, T], [T] -> [1, T], [1, 1]
    return tokens * 2, (tokens + positions).sum(dim=1, keepdim=True)


def test_one_entry_per_shape_and_outputs_are_owned_by_the_entry():
    m = GraphedMethod(double_and_sum, torch.device("cpu"), mode="emulate")
    a1, s1 = m(torch.tensor([[1, 2, 3]]), torch.arange(3))
    a2, s2 = m(torch.tensor([[4, 5, 6]]), torch.arange(3, 6))
    assert a2 is a1 and s2 is s1  # the entry's own outputs, overwritten in place
    assert a1.tolist() == [[8, 10, 12]] and s1.tolist() == [[27]]  # the latest call's values
    m(torch.tensor([[7]]), torch.tensor([0]))
    assert sorted(key[0][0] for key in m.entries) == [(1, 1), (1, 3)]
    assert m.captures == {key: n for key, n in zip(m.entries, [2, 1])}


def test_calls_longer_than_max_tokens_run_eagerly():
    m = GraphedMethod(double_and_sum, torch.device("cpu"), mode="emulate", max_tokens=2)
    out, _ = m(torch.tensor([[1, 2, 3]]), torch.arange(3))
    assert m.eager_calls == 1 and not m.entries
    assert out.tolist() == [[2, 4, 6]]


def test_off_mode_calls_through():
    m = GraphedMethod(double_and_sum, torch.device("cpu"), mode="off")
    a, _ = m(torch.tensor([[1]]), torch.tensor([0]))
    b, _ = m(torch.tensor([[2]]), torch.tensor([0]))
    assert a is not b and (a.item(), b.item()) == (2, 4)


@pytest.mark.parametrize("mode, device", [("bogus", "cpu"), ("cuda", "cpu")], ids=["unknown-mode", "cuda-on-cpu"])
def test_bad_mode_is_an_option_error(mode, device):
    with pytest.raises(OptionError, match="cuda graph"):
        GraphedMethod(double_and_sum, torch.device(device), mode=mode)


def test_with_cuda_graphs_defaults_off_on_cpu_and_refuses_forcing(program):
    assert with_cuda_graphs(program) is program
    assert with_cuda_graphs(program, False) is program
    with pytest.raises(OptionError, match="--cuda-graph with a program on cpu"):
        with_cuda_graphs(program, True)


def test_one_token_compiled_dispatches_only_one_token_calls(monkeypatch):
    calls = []
    monkeypatch.setattr(cg.torch, "compile", lambda fn, **kw: lambda *a: (calls.append(a[0].shape[-1]), fn(*a))[1])
    step = cg._one_token_compiled(lambda tokens, feature, positions: double_and_sum(tokens, positions))
    one = step(torch.tensor([[1]]), torch.zeros(1, 1, 4), torch.tensor([0]))
    two = step(torch.tensor([[1, 2]]), torch.zeros(1, 2, 4), torch.arange(2))
    assert calls == [1]
    assert one[0].tolist() == [[2]] and two[0].tolist() == [[2, 4]]


@pytest.mark.parametrize("accept", [1.0, 0.0], ids=["always-right", "never-right"])
def test_oracle_table_right_or_plus_one(accept):
    """proposal[q] = sequence[q] where right, else sequence[q] + 1 (mod V); nothing past the sequence is right."""
    table, right = oracle_table([5, 6, 7], accept=accept, vocab_size=8, max_seq_len=4)
    assert right.tolist() == [accept == 1.0] * 3 + [False] * 3
    assert table.tolist() == ([5, 6, 7] if accept else [6, 7, 0]) + [1, 1, 1]


def test_row_major_copies_only_views_with_other_strides():
    """The worked example of `_row_major`: row 4 of a [1, 5, 64] feature has strides (320, 64, 1)
    and is copied to (64, 64, 1) with the same values; a tensor already row-major is returned as is."""
    feature = torch.randn(1, 5, 64)
    row = feature[:, 4:5]  # [1, 1, 64]
    assert row.stride() == (320, 64, 1)
    dense = cg._row_major(row)
    assert dense.stride() == (64, 64, 1) and torch.equal(dense, row)
    own = torch.zeros(1, 1, 64)
    assert cg._row_major(own) is own
    positions = torch.arange(10)[3:4]  # [1], stride (1,), offset 3: row-major already
    assert cg._row_major(positions) is positions
