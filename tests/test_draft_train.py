"""`eagle3-check draft train` on the tiny fixture: the draft loads, the card is written, an
interrupted run resumes from its checkpoint and ends bit-equal to an uninterrupted one,
bad input is one line, and the self-prompts are a function of the seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from eagle3_check.cli import main
from eagle3_check.fixtures.draft_recipe import train_for_target
from eagle3_check.fixtures.draft_train import Recipe, load_target
from eagle3_check.fixtures.registry import fixtures_root
from eagle3_check.fixtures.self_prompts import sample_user_prompts
from eagle3_check.program.checkpoint import load_draft
from eagle3_check.runners.options import RunOptions
from eagle3_check.tokenizer import Tokenizer

TINY = fixtures_root() / "tiny-llama"
TRAIN = ["Hello", "List three fruits.", "Tell me a story about a cat.", "Count to five."]
CARD = [{"id": "c0", "text": "Hi"}, {"id": "c1", "text": "Name a color."}]
SMALL = ["--self-prompts", "4", "--steps", "6", "--batch-size", "2", "--max-new-tokens", "16",
         "--gen-batch", "4", "--checkpoint-every", "2", "--seed", "3"]


@pytest.fixture()
def prompt_files(tmp_path):
    train = tmp_path / "train.json"
    train.write_text(json.dumps({"prompts": [{"id": f"t{i}", "text": t} for i, t in enumerate(TRAIN)]}))
    card = tmp_path / "card.json"
    card.write_text(json.dumps({"prompts": CARD}))
    return train, card


def test_cli_trains_a_draft_that_loads_with_its_card(tmp_path, prompt_files, capsys):
    train, card = prompt_files
    out = tmp_path / "draft"
    assert main(["draft", "train", "--target", str(TINY / "target"), "-o", str(out), "--prompts", str(train),
                 "--card-prompts", str(card), *SMALL]) == 0
    summary = json.loads(capsys.readouterr().out)
    head = load_draft(out, 64)
    assert head.needs_target_embedding  # the embedding is shared with the target, not saved
    assert not (tmp_path / "draft.work").exists()
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["training"]["seed"] == 3 and cfg["training"]["self_prompts"] == 4
    card_json = json.loads((out / "card.json").read_text())
    assert sorted(card_json["k"], key=int) == [str(k) for k in range(1, 8)]
    assert all(row["passed"] for row in card_json["k"].values())  # the reference runner is exact
    assert summary["tau"]["4"] == card_json["k"]["4"]["tau"] >= 1.0
    assert summary["draft_bytes"] == (out / "model.safetensors").stat().st_size


def _recipe(steps: int = 6) -> Recipe:
    return Recipe(self_prompts=4, max_new=16, gen_batch=4, steps=steps, batch_size=2, seed=3, train_prompts=TRAIN)


def test_an_interrupted_run_resumes_bit_equal(tmp_path):
    tok = TINY / "tokenizer.json"
    whole = train_for_target(TINY / "target", tok, tmp_path / "whole", RunOptions(), _recipe(), None,
                             checkpoint_every=2)
    assert whole is not None
    cut = tmp_path / "cut"
    assert train_for_target(TINY / "target", tok, cut, RunOptions(), _recipe(), None, checkpoint_every=2,
                            stop_after=3) is None  # killed after step 3: the checkpoint holds step 2
    state = torch.load(tmp_path / "cut.work" / "ckpt.pt", weights_only=False)
    assert len(state["losses"]) == 2 and not cut.exists()
    resumed = train_for_target(TINY / "target", tok, cut, RunOptions(), _recipe(), None, checkpoint_every=2)
    assert resumed.pop("seconds") and whole.pop("seconds")  # per-phase times differ between runs
    assert resumed == whole
    assert (cut / "model.safetensors").read_bytes() == (tmp_path / "whole" / "model.safetensors").read_bytes()


def test_resume_refuses_a_different_recipe(tmp_path):
    from eagle3_check.errors import InputError

    tok = TINY / "tokenizer.json"
    train_for_target(TINY / "target", tok, tmp_path / "d", RunOptions(), _recipe(), None, stop_after=0)
    with pytest.raises(InputError, match="different steps"):
        train_for_target(TINY / "target", tok, tmp_path / "d", RunOptions(), _recipe(steps=7), None)


def test_self_prompts_are_a_function_of_the_seed():
    target = load_target(TINY / "target", "cpu", torch.float32)
    tok = Tokenizer.load(TINY / "tokenizer.json")
    stops = frozenset({1, 50, 106})

    def sample(seed):
        return sample_user_prompts(target, tok, RunOptions(), 6, stops, seed, max_len=32, batch_size=4)

    first = sample(5)  # a random tiny target ends few turns within 32 tokens: 8 tries per prompt
    assert len(first) >= 3 and len(set(first)) == len(first)  # deduplicated
    assert sample(5) == first
    assert sample(6) != first


BAD = [
    ("missing-target", ["--target", "/nonexistent/t"], "--target /nonexistent/t"),
    ("output-exists", ["-o", "EXISTING"], "is a directory"),
    ("missing-tokenizer", ["--tokenizer", "/nonexistent/tokenizer.json"], "does not exist"),
    ("chain-len", ["-k", "3"], "-k / --chunked-prefill"),
    ("zero-steps", ["--steps", "0"], "--steps 0"),
    ("bad-prompts", ["--prompts", "BADPROMPTS"], "prompts[0]"),
    ("unknown-device", ["--device", "tpu"], "--device tpu"),
    ("cuda-absent", ["--device", "cuda"], "--device cuda"),
    ("self-prompts-empty-frame", ["--bos-id", "-1", "--chat-prefix", ""], "with an empty frame (raw prompts, no BOS)"),
]


@pytest.mark.parametrize("case, argv, message", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_one_line(tmp_path, capsys, case, argv, message):
    existing = tmp_path / "exists"
    existing.mkdir()
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"prompts": [{"id": "a", "text": 3}]}))
    base = {"--target": str(TINY / "target"), "-o": str(tmp_path / "new")}
    for flag, value in zip(argv[::2], argv[1::2]):
        base[flag] = value.replace("EXISTING", str(existing)).replace("BADPROMPTS", str(bad))
    args = ["draft", "train", *[x for kv in base.items() for x in kv], "--no-card"]
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "new").exists() and not Path(str(tmp_path / "new") + ".work").exists()
