"""`run` / `check --compile {off,layer,model}` on CPU (jobs/common/world.compile_program): inductor compiles the
tiny fixture's target forward and draft steps here (a C++ compiler is all it needs), the check
passes with the uncompiled run's tokens, the report records the settings, and what would be
ignored or cannot run is a one-line error (exit 2). The CUDA path: tests/gpu/test_compile_cli_cuda.py.
"""

from __future__ import annotations

import json

import pytest
import torch

from eagle3_check.cli import main
from eagle3_check.program.compiled import compile_unavailable

NO_COMPILER = compile_unavailable("cpu")


def write_prompts(tmp_path) -> str:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"prompts": [{"id": "count", "text": "Count from one to ten."},
                                            {"id": "hello", "text": "Hello there"}]}))
    return str(path)


def check_json(capsys, argv: list[str]) -> tuple[int, dict]:
    rc = main(["check", "--fixture", "tiny-llama", *argv, "--json", "--no-progress"])
    return rc, json.loads(capsys.readouterr().out)


def graphs_compiled() -> int:
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


@pytest.mark.skipif(NO_COMPILER is not None, reason=f"needs torch.compile on CPU; {NO_COMPILER}")
def test_check_compile_layer_on_cpu_keeps_the_uncompiled_tokens(capsys, tmp_path):
    prompts = write_prompts(tmp_path)
    argv = ["--prompts", prompts, "--max-new-tokens", "16"]
    rc_off, off = check_json(capsys, argv)
    torch._dynamo.reset()  # a fresh cache: what compiles below is this run's
    before = graphs_compiled()
    rc, report = check_json(capsys, [*argv, "--compile", "layer"])
    assert rc_off == 0 and rc == 0 and report["passed"]
    assert graphs_compiled() - before >= 2  # llama_layer (K + 1 = 5 rows) and the one-token draft step
    assert [r["run"]["tokens"] for r in report["requests"]] == [r["run"]["tokens"] for r in off["requests"]]
    assert off["info"]["compile"] == {"granularity": "off"}
    assert report["info"]["compile"] == {"granularity": "layer", "mode": "default", "attention": "grouped",
                                         "max_compiled_tokens": 8, "draft_steps": True}
    assert report["info"]["cuda_graph"] is False
    assert report["provenance"]["options"]["compile"] == "layer"


@pytest.mark.skipif(NO_COMPILER is not None, reason=f"needs torch.compile on CPU; {NO_COMPILER}")
def test_run_json_records_the_compile_settings(capsys):
    rc = main(["run", "--fixture", "tiny-llama", "--prompt", "Count from one to ten.", "--max-new-tokens", "8", "--json",
               "--compile", "layer", "--compile-attention", "sdpa"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and len(out["tokens"]) == 8
    assert out["info"]["compile"]["attention"] == "sdpa" and out["info"]["compile"]["granularity"] == "layer"


@pytest.mark.slow
@pytest.mark.skipif(NO_COMPILER is not None, reason=f"needs torch.compile on CPU; {NO_COMPILER}")
def test_check_compile_model_on_cpu_keeps_the_uncompiled_tokens(capsys, tmp_path):
    """The whole forward as one graph: about 45 s of compile on 2 busy cores, hence slow."""
    argv = ["--prompts", write_prompts(tmp_path), "--max-new-tokens", "16"]
    _, off = check_json(capsys, argv)
    rc, report = check_json(capsys, [*argv, "--compile", "model"])
    assert rc == 0 and report["passed"] and report["info"]["compile"]["granularity"] == "model"
    assert [r["run"]["tokens"] for r in report["requests"]] == [r["run"]["tokens"] for r in off["requests"]]


@pytest.mark.parametrize("argv, named", [
    pytest.param(["check", "--pte", "{pte}", "--compile", "layer"], "--compile layer with --pte", id="pte"),
    pytest.param(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--compile-mode", "default"], "--compile-mode without --compile",
                 id="mode-without-compile"),
    pytest.param(["check", "--fixture", "tiny-llama", "--compile-attention", "sdpa"], "--compile-attention without --compile",
                 id="attention-without-compile"),
    pytest.param(["check", "--list", "--compile", "layer"], "--compile layer with --list", id="list"),
    pytest.param(["check", "--suite", "edge", "--compile", "model"], "--compile model with --suite",
                 id="fixture-suites"),
    pytest.param(["check", "--fixture", "tiny-llama", "--compile", "layers"], "invalid choice: 'layers'", id="unknown-granularity"),
    pytest.param(["run", "--prompt", "Hi", "--fixture", "tiny-gemma4", "--compile", "layer"],
                 "model_type 'gemma4_text'", id="not-a-llama-target"),
])
def test_what_compile_cannot_do_is_one_line_exit_2(capsys, tmp_path, argv, named):
    pte = tmp_path / "x.pte"
    pte.write_bytes(b"")
    rc = main([a.replace("{pte}", str(pte)) for a in argv])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and named in err and "\n" not in err, err


def test_no_cpu_compiler_is_named_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("CXX", "no-such-compiler-xyz")
    rc = main(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--max-new-tokens", "2", "--compile", "layer"])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and "no C++ compiler ('no-such-compiler-xyz' not on PATH)" in err and "--compile off" in err
    assert "\n" not in err
