"""Targets as hub ids from the local Hugging Face cache (never downloaded), and sharded targets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from eagle3_check.cli import main
from eagle3_check.errors import InputError
from eagle3_check.program.hub import resolve_model_dir
from eagle3_check.program.target import load_hf_target

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "fixtures" / "tiny-llama"
COMMIT = "0123456789abcdef0123456789abcdef01234567"


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory) -> Path:
    """An HF cache holding acme/tiny-llama: the fixture target saved in several shards."""
    cache = tmp_path_factory.mktemp("hub")
    repo = cache / "models--acme--tiny-llama"
    snap = repo / "snapshots" / COMMIT
    model = AutoModelForCausalLM.from_pretrained(FIXTURE / "target", dtype=torch.float32)
    model.save_pretrained(snap, max_shard_size="150KB")
    shutil.copy(FIXTURE / "tokenizer.json", snap / "tokenizer.json")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(COMMIT)
    (repo / "refs" / "v1").write_text(COMMIT + "\n")
    return cache


@pytest.fixture
def in_cache(hub_cache, monkeypatch) -> Path:
    monkeypatch.setenv("HF_HUB_CACHE", str(hub_cache))
    return hub_cache


def test_snapshot_is_sharded(hub_cache):
    snap = hub_cache / "models--acme--tiny-llama" / "snapshots" / COMMIT
    index = json.loads((snap / "model.safetensors.index.json").read_text())
    assert len(set(index["weight_map"].values())) >= 2  # the sharded path is really exercised


@pytest.mark.parametrize("spec", ["acme/tiny-llama", "acme/tiny-llama@main", "acme/tiny-llama@v1",
                                  f"acme/tiny-llama@{COMMIT}"], ids=["id", "at-main", "at-tag", "at-commit"])
def test_hub_id_resolves_to_the_cached_snapshot(in_cache, spec):
    assert resolve_model_dir(spec, "--target") == in_cache / "models--acme--tiny-llama" / "snapshots" / COMMIT


def test_a_local_directory_wins(in_cache):
    assert resolve_model_dir(str(FIXTURE / "target"), "--target") == FIXTURE / "target"


@pytest.mark.parametrize(("spec", "needle"), [
    ("acme/not-cached", "not in the local Hugging Face cache"),
    ("acme/tiny-llama@v9", "revision 'v9' is not cached"),
    ("./no/such/dir", "directory does not exist"),
    ("/no/such/dir", "directory does not exist"),
], ids=["not-cached", "unknown-revision", "relative-path", "absolute-path"])
def test_refusals_say_where_and_how(in_cache, spec, needle):
    with pytest.raises(InputError, match=needle) as e:
        resolve_model_dir(spec, "--target")
    if "cache" in needle:
        assert str(in_cache) in str(e.value) and "huggingface-cli download" in str(e.value)


def test_sharded_target_loads_the_same_weights(in_cache):
    sharded = load_hf_target(resolve_model_dir("acme/tiny-llama", "--target"))
    single = load_hf_target(FIXTURE / "target")
    ids = torch.arange(12)[None]
    with torch.no_grad():
        assert torch.equal(sharded(ids).logits, single(ids).logits)


def test_a_missing_shard_is_named(hub_cache, tmp_path):
    snap = tmp_path / "snap"
    shutil.copytree(hub_cache / "models--acme--tiny-llama" / "snapshots" / COMMIT, snap)
    shard = sorted(snap.glob("model-*.safetensors"))[-1]
    shard.unlink()
    with pytest.raises(InputError, match=f"{shard.name} is missing"):
        load_hf_target(snap)


def test_check_runs_a_hub_id_target_offline(in_cache, tmp_path, capsys):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "a", "text": "The cat"}, {"id": "b", "text": "Once"}]}))
    rc = main(["check", "--target", "acme/tiny-llama", "--draft", str(FIXTURE / "draft"), "--prompts",
               str(prompts), "--max-new-tokens", "12", "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["passed"] and report["counts"]["identical"] == 2
    assert report["info"]["target"] == str(in_cache / "models--acme--tiny-llama" / "snapshots" / COMMIT)
    assert main(["check", "--target", "acme/missing", "--draft", str(FIXTURE / "draft")]) == 2
    assert "not in the local Hugging Face cache" in capsys.readouterr().err
