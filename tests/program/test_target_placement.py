"""Issue 51: one target over several devices (program/placement.py), proven on CPU groups.

`--devices cpu,cpu` is the library's own test spelling (the CLI takes CUDA devices only): Accelerate's
hooks go in exactly as on a multi-GPU host, the caches are bound per layer, and the tokens, logits
and features must equal the unplaced program's bit for bit. `pytest -m multigpu` repeats this on two
GPUs (tests/gpu/test_multigpu.py)."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.errors import InputError, OptionError
from eagle3_check.program.eager import EagerBackend
from eagle3_check.program.placement import Placement, parse_devices, split_layers
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions

pytest.importorskip("accelerate", reason="--devices needs Accelerate (the dev extra installs it)")


@pytest.mark.parametrize(("sizes", "extra", "n", "want"), [
    ([10] * 4, 10, 2, [0, 0, 1, 1]),  # the docstring's worked example: largest load 30 either way, earlier first
    ([10] * 4, 25, 2, [0, 1, 1, 1]),  # 35 / 30 beats 45 / 20
    ([1, 1, 100], 0, 3, [0, 1, 2]),  # every device gets a layer even when two fit on one
    ([10] * 8, 0, 8, list(range(8))),
    ([5] * 3, 1000, 3, [0, 1, 2]),  # a huge first device: one layer each
    ([10] * 32, 50, 2, [0] * 14 + [1] * 18),  # 8B-like: 50 + 140 = 190 and 180
], ids=["worked-example", "heavy-first", "one-each", "eight", "huge-extra", "thirty-two"])
def test_split_layers_balances_the_largest_load(sizes, extra, n, want):
    got = split_layers(sizes, extra, n)
    assert got == want
    assert got == sorted(got) and set(got) == set(range(n))  # contiguous runs, every device used
    loads = [extra * (d == 0) + sum(b for b, g in zip(sizes, got) if g == d) for d in range(n)]
    for other in _contiguous_splits(len(sizes), n):  # no contiguous split has a smaller largest load
        assert max(loads) <= max(extra * (d == 0) + sum(b for b, g in zip(sizes, other) if g == d) for d in range(n))


def _contiguous_splits(n_layers: int, n: int):
    from itertools import combinations

    for cuts in combinations(range(1, n_layers), n - 1):
        bounds = [0, *cuts, n_layers]
        yield [d for d in range(n) for _ in range(bounds[d], bounds[d + 1])]


def test_split_layers_refuses_more_devices_than_layers():
    with pytest.raises(InputError, match=r"2 decoder layers over 3 devices.*at least one layer per device"):
        split_layers([1, 1], 0, 3)


@pytest.mark.parametrize(("text", "match"), [
    ("cuda:0", r"--devices cuda:0.*two or more.*pass --device cuda:0 instead"),
    ("cuda:0,cuda:0", r"--devices cuda:0,cuda:0.*name each GPU once"),
    ("cuda:0,gpu1", r"--devices cuda:0,gpu1: 'gpu1'.*cuda:N"),
    ("cpu,cpu", r"'cpu'.*two or more distinct CUDA devices"),
    ("cuda:0,,cuda:1", r"''.*cuda:N"),
])
def test_parse_devices_refuses_with_the_value(text, match):
    with pytest.raises(OptionError, match=match):
        parse_devices(text)


def test_parse_devices_keeps_the_order():
    assert parse_devices(" cuda:1, cuda:0 ") == ("cuda:1", "cuda:0")
    assert parse_devices("cpu,cpu", allow_cpu=True) == ("cpu", "cpu")


def test_placement_describes_each_device():
    p = Placement(("cuda:0", "cuda:1"), (0, 0, 1, 1))
    assert p.describe() == "cuda:0 (layers 0-1, embeddings, lm_head, draft), cuda:1 (layers 2-3)"


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gemma4"])
def test_a_placed_program_equals_the_unplaced_one_bit_for_bit(name):
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.jobs.common.world import load_tokenizer

    fx = load_fixture(name)
    one = EagerBackend.from_fixture(fx)
    split = EagerBackend.from_fixture(fx, device="cpu,cpu")
    layers = split.module.target.model.model.layers if hasattr(split.module.target.model.model, "layers") else None
    assert split.placement is not None and split.placement.layers == tuple(sorted(split.placement.layers))
    assert layers is None or all(hasattr(m, "_hf_hook") for m in layers)  # Accelerate's hooks are in
    toks, pos = torch.tensor([[1, 5, 9, 22, 7, 3]]), torch.arange(6)  # prefill, then a verify of 3 and a draft step
    for program in (one, split):
        logits, feature = program.prefill(toks, pos)
        program.outs = [logits.clone(), feature.clone()]
        ids, vfeat = program.target_verify(torch.tensor([[4, 8, 2]]), torch.arange(6, 9))
        program.outs += [ids.clone(), vfeat.clone()]
        ids, dfeat = program.draft_decode(torch.tensor([[4]]), feature[:, -1:], torch.tensor([6]))
        program.outs += [ids.clone(), dfeat.clone()]
    assert all(torch.equal(a, b) for a, b in zip(one.outs, split.outs))
    tok = load_tokenizer(fx.tokenizer_path)
    runner, opts = ReferenceRunner(), RunOptions(max_new_tokens=24)
    for p in fx.prompts()[:2]:
        a, b = runner.run(one, tok, p.text, opts), runner.run(split, tok, p.text, opts)
        assert (b.tokens, b.accepted, b.stop_reason) == (a.tokens, a.accepted, a.stop_reason), p.id


def test_the_hf_reference_shares_a_placed_targets_weights():
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.judge.shared import shareable, shared_reference

    split = EagerBackend.from_fixture(load_fixture("tiny-llama"), device="cpu,cpu")
    model = shareable(split, "cpu", torch.float32)
    assert model is not None
    ref = shared_reference(model, "cpu")
    assert {id(p) for p in ref.model.parameters()} == {id(p) for p in model.parameters()}
