"""Issue 51 on a multi-GPU host (`pytest -m multigpu`): one target's layers over two GPUs
(`--devices cuda:0,cuda:1`, program/placement.py) compute what one GPU computes, bit for bit.

The tiny fixture split over two GPUs: every output of prefill, target_verify and draft_decode equal
to the same program on cuda:0, and its check identical on every prompt; then the CLI on the
8B-shaped target built from a seed (fixtures/scale_target.py): float32 over two GPUs gives the same
report tokens as one GPU. Skips with the device count it found."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.program.eager import EagerBackend

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.multigpu,
    pytest.mark.skipif(torch.cuda.device_count() < 2,
                       reason=f"needs 2 CUDA devices; found {torch.cuda.device_count()}"),
]


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_tiny_split_over_two_gpus_equals_one_gpu(dtype):
    fx = load_fixture("tiny-llama")
    one = EagerBackend.from_fixture(fx, "cuda:0", dtype)
    split = EagerBackend.from_fixture(fx, "cuda:0,cuda:1", dtype)
    caches = {getattr(split.module.target, f"k_cache_{i}").device.index for i in range(split.module.target.n_layers)}
    assert caches == {0, 1}, split.placement.describe()
    toks, pos = torch.tensor([[1, 5, 9, 22, 7, 3]]), torch.arange(6)
    outs = []
    for program in (one, split):
        logits, feature = program.prefill(toks, pos)
        got = [logits.clone(), feature.clone()]
        got += [t.clone() for t in program.target_verify(torch.tensor([[4, 8, 2]]), torch.arange(6, 9))]
        got += [t.clone() for t in program.draft_decode(torch.tensor([[4]]), feature[:, -1:], torch.tensor([6]))]
        outs.append([t.cpu() for t in got])
    assert all(torch.equal(a, b) for a, b in zip(*outs))


def _check(tmp_path, name: str, *args: str) -> dict:
    out = tmp_path / f"{name}.json"
    proc = subprocess.run([sys.executable, "-m", "eagle3_check.cli", "check", *args, "--no-progress", "--json"],
                          capture_output=True, text=True, timeout=1200)
    out.write_text(proc.stdout)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def _tokens(report: dict) -> list:
    return [(r["prompt_id"], r["run"]["tokens"]) for r in report["requests"]]


def test_8b_shape_float32_over_two_gpus_reports_one_gpus_tokens(tmp_path):
    from eagle3_check.fixtures.scale_target import build_scale_pair

    fx = load_fixture("smollm2-135m")
    pair = build_scale_pair(tmp_path / "s8b", fx.target_dir, seed=0, device="cuda:0", dtype=torch.float32)
    common = ("--target", pair["target"], "--draft", pair["draft"], "--tokenizer", str(fx.tokenizer_path),
              "--dtype", "float32", "--max-new-tokens", "32", "--prompts", str(fx.prompts_path))
    one = _check(tmp_path, "one", *common, "--device", "cuda:0", "--no-cuda-graph")
    two = _check(tmp_path, "two", *common, "--devices", "cuda:0,cuda:1")
    assert _tokens(two) == _tokens(one)
    assert "cuda:1" in json.dumps(two["info"].get("placement", ""))
