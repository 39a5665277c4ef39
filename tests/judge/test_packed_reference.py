"""The packed HF reference (judge/packed.py): several requests in one forward, each request's
Scores bit for bit those of its own forward (`HFReference.score`), in float32 and bfloat16, with
SDPA (a shared reference's) and eager attention (a loaded one's), on a Llama and a Gemma 4
(sliding-window layers) tiny fixture; and the index arithmetic of its worked example."""

from __future__ import annotations

import functools
import random

import pytest
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.packed import (
    groups,
    kept_rows,
    packable,
    score_many,
    score_packed,
    spans_of,
)


def test_worked_example_index_arithmetic():
    spans = spans_of([5, 3])  # A: prompt 3 + tokens 2, B: prompt 2 + tokens 1
    assert spans == [(0, 5), (5, 8)]
    assert kept_rows(spans, [3, 2]) == [2, 3, 4, 6, 7]
    assert kept_rows(spans_of([4]), [4]) == [3]  # no tokens: the one row after the prompt
    assert groups([3, 3, 3], 6) == [[0, 1], [2]]
    assert groups([9, 2, 2], 6) == [[0], [1, 2]]  # longer than a pack: alone


def _requests(vocab: int, seed: int, n: int = 6) -> list[tuple[list[int], list[int]]]:
    rnd = random.Random(seed)  # prompt and token lengths of every size around the kernels' blocks
    out = [([rnd.randrange(vocab) for _ in range(rnd.randint(1, 70))],
            [rnd.randrange(vocab) for _ in range(rnd.randint(0, 40))]) for _ in range(n)]
    out.append(([rnd.randrange(vocab) for _ in range(3)], [vocab + 5, 1]))  # a token outside the vocab: cut there
    return out


def _assert_same(ref, reqs, limit=4096):
    want = [ref.score(p, t) for p, t in reqs]
    real, forwards = ref.model.forward, []
    ref.model.forward = functools.wraps(real)(lambda *a, **kw: forwards.append(kw) or real(*a, **kw))  # its signature
    try:
        got = score_many(ref, reqs, limit)
    finally:
        del ref.model.forward
    assert got == want  # every field, float for float: argmax, top-1/top-2 logits, given logit, rank
    packed = [f for f in forwards if "logits_to_keep" in f]
    assert packed and len(forwards) < len(reqs)  # really packed, not every request alone


@pytest.mark.parametrize("name", ["tiny-llama", "tiny-gemma4"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("attention", ["eager", "sdpa"])
def test_packed_scores_bit_identical(name, dtype, attention):
    fx = load_fixture(name)
    ref = HFReference(fx.target_dir, dtype=dtype)
    ref.model.config._attn_implementation = attention
    assert packable(ref)
    reqs = _requests(ref.model.config.get_text_config(decoder=True).vocab_size, seed=len(name))
    _assert_same(ref, reqs)
    _assert_same(ref, reqs, limit=150)  # cut into several packs
    assert ref.model.config._attn_implementation == attention  # left as found


def test_shared_reference_packs_and_checks_its_weights(program):
    from eagle3_check.errors import InputError
    from eagle3_check.judge.shared import shareable, shared_reference

    ref = shared_reference(shareable(program, "cpu", torch.float32), "cpu")
    reqs = _requests(ref.model.config.vocab_size, seed=3)
    _assert_same(ref, reqs)
    w = next(ref.model.parameters())
    with torch.no_grad():
        w[0, 0] += 1.0
    try:
        with pytest.raises(InputError, match="changed its own target weights"):
            score_many(ref, reqs)
    finally:
        with torch.no_grad():
            w[0, 0] -= 1.0


def test_not_packable_scores_one_at_a_time(hf_reference, monkeypatch):
    reqs = _requests(hf_reference.model.config.vocab_size, seed=5, n=2)
    monkeypatch.setattr(hf_reference, "device", "cuda")  # a GEMM picks its kernel by shape there: never packed
    assert not packable(hf_reference)
    calls = []
    monkeypatch.setattr(hf_reference, "score", lambda p, t: calls.append((p, t)) or "scored")
    assert score_many(hf_reference, reqs) == ["scored"] * len(reqs) and calls == reqs


def test_one_packed_forward(hf_reference, monkeypatch):
    reqs = _requests(hf_reference.model.config.vocab_size, seed=7)
    forwards = []
    real = hf_reference.model.forward
    monkeypatch.setattr(hf_reference.model, "forward", functools.wraps(real)(lambda *a, **kw: forwards.append(kw) or real(*a, **kw)))
    score_packed(hf_reference, reqs)
    rows = sum(len(p) + len(t) for p, t in reqs[:-1]) + 3  # the last request's tokens cut at the first outside the vocab
    assert len(forwards) == 1 and forwards[0]["input_ids"].shape[1] == rows
    assert forwards[0]["logits_to_keep"].tolist() == kept_rows(spans_of([len(p) + len(t) for p, t in reqs[:-1]] + [3]),
                                                               [len(p) for p, _ in reqs])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_a_request_alone_keeps_only_its_rows(dtype):
    ref = HFReference(load_fixture("tiny-llama").target_dir, dtype=dtype)
    req = [(list(range(3, 63)), list(range(100, 130)))]  # 60 prompt rows, 31 kept: the LM head on 31 rows, not 90
    forwards = []
    real = ref.model.forward
    ref.model.forward = functools.wraps(real)(lambda *a, **kw: forwards.append(kw) or real(*a, **kw))
    try:
        got = score_many(ref, req)
    finally:
        del ref.model.forward
    assert got == [ref.score(*req[0])]
    assert len(forwards) == 1 and forwards[0]["logits_to_keep"].tolist() == list(range(59, 90))
