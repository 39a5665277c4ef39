"""The real-model fixtures (smollm2-135m, gemma3-270m; docs/real-models.md) end to end: the
conversion from the packaged GGUF is right (a wrong Q/K permutation or norm offset gives no
sensible text) and cached, and every command that takes `--fixture` runs on them.

One test runs in `make check` (SmolLM2: conversion, cached, plus a `check` of three prompts and a
`run`); everything heavier is `slow`. Without the `real` extra they skip, except under CI=true
(make install installs it there), where a missing package fails."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from eagle3_check import gguf_fixture
from eagle3_check.cli import main
from eagle3_check.errors import InputError
from eagle3_check.fixtures.registry import fixtures_root, load_fixture, load_prompts

pytest_plugins = ["pytester"]

SMOL_SYSTEM = "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
# The requests as each model's own files define them (until run options are read from there):
# SmolLM2 ChatML as its chat template renders one user turn, no BOS, <|im_end|> (2) ends it;
# Gemma 3 270M is a base model: raw text after its BOS (2), EOS 1.
FLAGS = {
    "smollm2-135m": ["--chat-prefix", SMOL_SYSTEM + "<|im_start|>user\n",
                     "--chat-suffix", "<|im_end|>\n<|im_start|>assistant\n",
                     "--stop-token", "<|im_end|>", "--stop-ids", "2", "--bos-id", "-1", "--eos-id", "2"],
    "gemma3-270m": ["--raw", "--stop-ids", "1", "--stop-token", "", "--bos-id", "2", "--eos-id", "1"],
}


def real(name: str):
    """The fixture, converted (cached); skipped without its packages unless CI is set."""
    fx = load_fixture(name)
    try:
        assert fx.target_dir.is_dir()  # converts on first use
    except InputError as e:
        if "not installed" in str(e) and os.environ.get("CI") != "true":
            pytest.skip(str(e))
        raise
    return fx


def prompt_file(tmp_path, ids, name="smollm2-135m"):
    """A prompt set of the held-out prompts `ids` (in that order)."""
    by_id = {p.id: p.text for p in load_fixture(name).prompts()}
    path = tmp_path / "prompts.json"
    path.write_text(json.dumps({"prompts": [{"id": i, "text": by_id[i]} for i in ids]}))
    return str(path)


def check_json(capsys, argv) -> tuple[int, dict]:
    rc = main(["check", *argv, "--json", "--no-progress"])
    return rc, json.loads(capsys.readouterr().out)


def test_prompt_set_is_split_into_training_and_held_out():
    train = load_prompts(fixtures_root() / "real-prompts" / "train.json")
    held = load_prompts(fixtures_root() / "real-prompts" / "heldout.json")
    assert len(train) + len(held) >= 60 and 14 <= len(held) <= 18
    assert not {p.id for p in train} & {p.id for p in held} and not {p.text for p in train} & {p.text for p in held}
    for name in ("smollm2-135m", "gemma3-270m"):
        assert [p.id for p in load_fixture(name).prompts()] == [p.id for p in held]


@pytest.mark.long  # minutes on a clean clone (the GGUF conversion): started early under -n 2
def test_smollm2_converts_once_answers_paris_and_passes_check(capsys, tmp_path):
    """The CI real-model check: the conversion (cached: a second use converts nothing), the
    model's own files, the greedy answer to a factual question, and `check` on three prompts --
    both through the commands' default program (no --fixture, no template flags: what a newcomer
    types; jobs/common/default_program.py), which must be this fixture with its own ChatML request."""
    fx = real("smollm2-135m")
    count = gguf_fixture.conversions
    target = fx.target_dir
    assert gguf_fixture.conversions == count and load_fixture("smollm2-135m").tokenizer_path.is_file()
    config = json.loads((target / "config.json").read_text())
    assert "quantization_config" not in config and config["model_type"] == "llama"
    assert json.loads((target / "generation_config.json").read_text())["eos_token_id"] == 2
    assert json.loads((target / "tokenizer_config.json").read_text())["eos_token"] == "<|im_end|>"
    assert "<|im_start|>" in (target / "chat_template.jinja").read_text()
    assert main(["run", "--max-new-tokens", "12", "--prompt", "What is the capital of France?"]) == 0
    out = capsys.readouterr().out
    assert "Paris" in out  # a wrong Q/K permutation or norm gives no such answer
    assert "stop token '<|im_end|>' (chat_template.jinja" in out  # the model's own request, not flags
    rc, report = check_json(capsys, ["--max-new-tokens", "24",
                                     "--prompts", prompt_file(tmp_path, ["capital", "math-sub", "code-palindrome"])])
    assert rc == 0 and report["passed"] and len(report["requests"]) == 3
    assert report["provenance"]["options"]["fixture"] == "smollm2-135m"
    assert all(r["verdict"]["status"] == "pass" for r in report["requests"])
    assert gguf_fixture.conversions == count  # check and run read the cache too


@pytest.mark.slow
@pytest.mark.parametrize("text,needle", [("Water freezes at a temperature of", "0 degrees"),
                                         ("One, two, three, four,", "five")], ids=["freezing", "counting"])
def test_gemma3_raw_completion_is_sensible(capsys, text, needle):
    real("gemma3-270m")
    assert main(["run", "--fixture", "gemma3-270m", *FLAGS["gemma3-270m"], "--max-new-tokens", "8",
                 "--prompt", text]) == 0
    assert needle in capsys.readouterr().out


@pytest.mark.slow
def test_three_prompts_are_past_gemma3s_sliding_window():
    from eagle3_check.tokenizer import Tokenizer

    tok = Tokenizer.load(real("gemma3-270m").tokenizer_path)
    prompts = load_prompts(fixtures_root() / "real-prompts" / "train.json") + load_fixture("gemma3-270m").prompts()
    long = [p.id for p in prompts if len(tok.encode(p.text)) + 1 > 512]
    assert len(long) >= 3 and "long-letter-fr" in long


@pytest.mark.slow
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
@pytest.mark.parametrize("name", ["smollm2-135m", "gemma3-270m"])
def test_check_passes_on_held_out_prompts(capsys, tmp_path, name, dtype):
    real(name)
    ids = ["hi", "capital", "list-animals", "es-recipe", "long-letter-fr"]  # the last is past Gemma 3's window
    rc, report = check_json(capsys, ["--fixture", name, *FLAGS[name], "--dtype", dtype, "--max-new-tokens", "32",
                                     "--prompts", prompt_file(tmp_path, ids, name)])
    assert rc == 0 and report["passed"], [r["verdict"] for r in report["requests"]]


@pytest.mark.slow
def test_chunked_prefill_at_gemma3s_window(capsys, tmp_path):
    """The long prompt (> 512 tokens) prefilled in chunks of the sliding window (512), then judged."""
    real("gemma3-270m")
    rc, report = check_json(capsys, ["--fixture", "gemma3-270m", *FLAGS["gemma3-270m"], "--chunked-prefill",
                                     "--max-prefill", "512", "--max-new-tokens", "24",
                                     "--prompts", prompt_file(tmp_path, ["long-letter-fr"], "gemma3-270m")])
    assert rc == 0 and report["passed"]


@pytest.mark.slow
def test_edge_suite_on_smollm2(capsys):
    real("smollm2-135m")
    rc = main(["check", "--suite", "edge", "--fixture", "smollm2-135m", "--json", "--no-progress"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0, report


@pytest.mark.slow
def test_golden_record_and_verify_on_smollm2(capsys, tmp_path):
    real("smollm2-135m")
    common = ["--fixture", "smollm2-135m", *FLAGS["smollm2-135m"], "-k", "4", "--max-new-tokens", "16",
              "--prompts", prompt_file(tmp_path, ["capital", "math-sub"]), "--no-progress"]
    assert main(["golden", "record", *common, "--dir", str(tmp_path / "golden")]) == 0
    [golden] = sorted((tmp_path / "golden").glob("*.json"))
    capsys.readouterr()
    assert main(["golden", "verify", "--no-baseline", "--no-progress", str(golden)]) == 0, capsys.readouterr()


@pytest.mark.slow
def test_pytest_plugin_on_smollm2(pytester, tmp_path, monkeypatch):
    real("smollm2-135m")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))  # this checkout's package
    pytester.makepyfile("def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess(
        "-p", "eagle3_check.pytest_plugin", "--eagle3-fixture", "smollm2-135m", "--eagle3-suite", "none",
        "--eagle3-goldens", "none", "--eagle3-max-new-tokens", "8",
        "--eagle3-prompts", prompt_file(tmp_path, ["hi", "capital"]), "-q", "-p", "no:cacheprovider")
    assert result.ret == 0, result.stdout.str()[-2000:]
    result.assert_outcomes(passed=3)  # the user's test and one item per prompt


@pytest.mark.slow
def test_export_and_gate_smollm2_fp32(capsys, tmp_path):
    """A real-model .pte through the gate: SmolLM2 exported in fp32 (XNNPACK; ~30 CPU-minutes, the
    lowering of 30 layers is most of it), then gated on three held-out prompts with the state suite:
    load, metadata vs tokenizer and target, runner vs self and HF reference (docs/real-models.md)."""
    pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")
    real("smollm2-135m")
    pte, report = tmp_path / "smollm2.pte", tmp_path / "gate.json"
    assert main(["export", "--fixture", "smollm2-135m", "-o", str(pte), "--no-progress"]) == 0
    capsys.readouterr()
    rc = main(["gate", "--pte", str(pte), "--prompts", prompt_file(tmp_path, ["hi", "capital", "math-sub"]),
               "--max-new-tokens", "24", "--suite", "state", "--report", str(report), "--no-progress"])
    data = json.loads(report.read_text())
    assert rc == 0 and data["passed"], capsys.readouterr().out
    assert data["info"].get("fixture") == "smollm2-135m"  # the export's sidecar names the reference


@pytest.mark.slow
def test_export_and_gate_gemma3_fp32_keeps_its_tanh_gelu(capsys, tmp_path):
    """Gemma 3 270M in fp32 (XNNPACK; ~6 CPU-minutes) through the gate on `hi`: with ExecuTorch
    1.5.1's stock lowering its tanh GELU ran as the exact GELU and `hi` token 10 (HF margin
    0.000298) flipped; the export keeps it tanh (program/gelu_tanh.py: one per layer and target
    method) and the program is identical to HF (docs/calibration.md, "Kernels")."""
    pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")
    real("gemma3-270m")
    pte, report = tmp_path / "gemma3.pte", tmp_path / "gate.json"
    assert main(["export", "--fixture", "gemma3-270m", "-o", str(pte), "--no-progress"]) == 0
    sidecar = json.loads(pte.with_suffix(".export.json").read_text())
    assert sidecar["lowering"]["tanh_gelu_as_ops"] == 36  # 18 layers x prefill, target_verify
    capsys.readouterr()
    rc = main(["gate", "--pte", str(pte), "--prompts", prompt_file(tmp_path, ["hi"], "gemma3-270m"), "--max-new-tokens", "24",
               "--suite", "none", "--report", str(report), "--no-progress"])
    data = json.loads(report.read_text())
    assert rc == 0 and data["passed"], capsys.readouterr().out
    hf = next(c for c in data["checks"] if c["name"] == "runner vs HF reference")
    assert hf["status"] == "pass" and "1/1 requests identical" in hf["message"]
