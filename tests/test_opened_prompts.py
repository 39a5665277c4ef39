"""Opened self-prompts (`draft train --opened-prompts N`): user turns the target writes after the
first words of a training prompt, so the training data covers the training set's domains."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.errors import InputError
from eagle3_check.fixtures.draft_train import load_target, prepare_data
from eagle3_check.fixtures.recipe import Recipe
from eagle3_check.fixtures.registry import fixtures_root
from eagle3_check.fixtures.self_prompts import _turn_text, openings_of, sample_user_prompts
from eagle3_check.runners.options import RunOptions
from eagle3_check.tokenizer import Tokenizer

TINY = fixtures_root() / "tiny-llama"
STOPS = frozenset({1, 50, 106})


def test_openings_are_the_first_one_to_four_words_never_the_whole_text():
    got = openings_of(["Write a haiku about rain.", "Hi there", "Hello", "Write a list"])
    assert got == ["Write", "Write a", "Write a haiku", "Write a haiku about", "Hi"]  # one-word "Hello": none
    assert openings_of(["one two three four five six"], max_words=2) == ["one", "one two"]


@pytest.fixture(scope="module")
def tiny():
    return load_target(TINY / "target", "cpu", torch.float32), Tokenizer.load(TINY / "tokenizer.json")


def test_each_opened_turn_starts_with_its_opening_and_is_a_function_of_the_seed(tiny):
    target, tok = tiny
    openings = ["Tell me", "List three", "Count"]

    def sample(seed):
        return sample_user_prompts(target, tok, RunOptions(), 6, STOPS, seed, max_len=32, batch_size=4,
                                   openings=openings)

    first = sample(5)
    assert len(first) >= 2 and len(set(first)) == len(first)
    assert all(any(t.startswith(o) for o in openings) for t in first), first
    assert sample(5) == first and sample(6) != first
    plain = sample_user_prompts(target, tok, RunOptions(), 6, STOPS, 5, max_len=32, batch_size=4)
    assert plain != first  # the openings change what is sampled


def test_prepare_data_adds_the_opened_turns_to_the_plain_ones(tiny):
    target, tok = tiny
    recipe = Recipe(self_prompts=3, opened_prompts=3, max_new=8, gen_batch=4, seed=3,
                    train_prompts=["Tell me a story about a cat.", "Count to five."])
    data = prepare_data(target, tok, RunOptions(), STOPS, recipe, 256, lambda total, desc, unit: _Bar())
    opened = [t for t in data["self_prompts"] if t.startswith(("Tell", "Count"))]
    assert opened, data["self_prompts"]
    assert len(data["ids"]) == len(data["prompt_lens"]) >= 2 + len(opened)


def test_a_tokenizer_whose_decode_drops_the_frame_is_refused():
    class Odd:
        def decode(self, ids, skip_special_tokens=False):
            return "".join(chr(97 + i % 26) for i in reversed(ids))  # not prefix-preserving

    with pytest.raises(InputError, match="does not start with the decoded frame"):
        _turn_text(Odd(), [1, 2], [3], "bc")
    assert _turn_text(Odd(), [2], [], "c") == ""


class _Bar:
    def update(self, n=1):
        pass

    def close(self):
        pass
