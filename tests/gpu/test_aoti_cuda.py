"""AOTI programs on the GPU (issue 48): each embedded fixture compiled with AOTInductor for CUDA at
test time (`export --aoti`'s compile: program/aoti_export.py), loaded by the AOTI backend and judged
as `check --aoti` judges it: vs its own greedy decoding (identical at every position) and vs HF on
CUDA (float32: identical; bfloat16: within the tie tolerance and budget of the dtype). The shared
caches on the device: prefill's writes are what target_verify reads. Skips without CUDA, or where
AOTInductor cannot compile for it (no Triton), with the reason."""

from __future__ import annotations

import json
import time

import pytest
import torch
from cuda_marks import COMPILE_ON_CUDA

from eagle3_check.fixtures.registry import list_fixtures, load_fixture
from eagle3_check.jobs.check.prompt_set import format_table, run_check
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.self_ref import SelfReference
from eagle3_check.judge.tolerance import default_budget, tolerance_for
from eagle3_check.program.aoti_backend import AotiBackend
from eagle3_check.program.aoti_export import compile_aoti
from eagle3_check.program.contract import VERIFY_KV_WINDOW
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.tokenizer import Tokenizer

pytestmark = COMPILE_ON_CUDA

BASE = [n for n in list_fixtures(real=False) if load_fixture(n).quantization is None]  # quantized: CPU only
OPTS = dict(max_new_tokens=48)
_built: dict = {}


def built(name: str, dtype: str, tmp_path_factory, form: str | None = None) -> tuple[AotiBackend, EagerBackend]:
    """(the AOTI program, its eager source) of a fixture on cuda, compiled once a session; the compile's
    seconds printed (pytest -rP shows them: docs/cuda.md's table)."""
    key = (name, dtype, form)
    if key not in _built:
        eager = EagerBackend.from_fixture(load_fixture(name), "cuda", dtype)
        if form:
            eager.use_verify_form(form)
        out = tmp_path_factory.mktemp("aoti") / f"{name}-{dtype}.pt2"
        t0 = time.perf_counter()
        record = compile_aoti(eager, out, source={"fixture": name})
        print(f"AOTI compile {name} {dtype} {form or 'plain'}: {time.perf_counter() - t0:.1f} s "
              f"{json.dumps(record['phases'])}")
        _built[key] = (AotiBackend(out), eager)
    return _built[key]


@pytest.mark.parametrize("name", BASE)
def test_aoti_float32_is_identical_to_itself_and_to_hf(name, tmp_path_factory):
    program, _ = built(name, "float32", tmp_path_factory)
    assert program.device.type == "cuda" and program.info["kernels"] == "aoti-cuda"
    fx = load_fixture(name)
    tok, prompts, opts = Tokenizer.load(fx.tokenizer_path), fx.prompts(), RunOptions(**OPTS)
    own = run_check(program, tok, SelfReference(program), prompts, opts, tolerance_for("float32"))
    assert own.counts()["identical"] == own.counts()["requests"], format_table(own)
    hf = run_check(program, tok, HFReference(fx.target_dir, "cuda"), prompts, opts, tolerance_for("float32"))
    assert hf.passed and hf.counts()["tie"] == 0, format_table(hf)


@pytest.mark.parametrize("name", BASE)
def test_aoti_bfloat16_is_identical_to_itself_and_within_the_tie_rule_of_hf(name, tmp_path_factory):
    program, _ = built(name, "bfloat16", tmp_path_factory)
    fx = load_fixture(name)
    tok, prompts = Tokenizer.load(fx.tokenizer_path), fx.prompts()
    own = run_check(program, tok, SelfReference(program), prompts, RunOptions(**OPTS), tolerance_for("bfloat16"))
    assert own.counts()["identical"] == own.counts()["requests"], format_table(own)
    hf = run_check(program, tok, HFReference(fx.target_dir, "cuda", torch.bfloat16), prompts, RunOptions(**OPTS),
                   tolerance_for("bfloat16"), tie_budget=default_budget("bfloat16", name))
    print(f"{name} bf16 AOTI vs HF: {hf.counts()}")
    assert hf.passed, format_table(hf)


def test_aoti_kv_window_form_equals_the_plain_form(tmp_path_factory):
    plain, _ = built("tiny-llama", "float32", tmp_path_factory)
    kvwin, _ = built("tiny-llama", "float32", tmp_path_factory, VERIFY_KV_WINDOW)
    assert kvwin.verify_form == VERIFY_KV_WINDOW and kvwin.metadata()["target_verify_input_bounds"] == [2, 8]
    fx = load_fixture("tiny-llama")
    tok, runner = Tokenizer.load(fx.tokenizer_path), ReferenceRunner()
    for p in fx.prompts()[:4]:
        a, b = runner.run(plain, tok, p.text, RunOptions(**OPTS)), runner.run(kvwin, tok, p.text, RunOptions(**OPTS))
        assert (a.tokens, a.accepted) == (b.tokens, b.accepted), p.id


def test_prefill_cache_on_the_device_is_what_target_verify_reads(tmp_path_factory):
    program, eager = built("tiny-llama", "float32", tmp_path_factory)
    toks, pos = torch.arange(30, 42)[None], torch.arange(12)
    program.prefill(toks, pos)
    eager.prefill(toks, pos)
    k0 = program.caches("target")[0]
    assert k0.device.type == "cuda" and torch.allclose(k0[:, :, :12], eager.module.target.k_cache_0[:, :, :12],
                                                       atol=1e-4)
    window, wpos = torch.tensor([[5, 6, 7, 8, 9]]), torch.arange(12, 17)
    ids, feat = program.target_verify(window, wpos)
    e_ids, e_feat = eager.target_verify(window, wpos)
    assert torch.equal(ids.cpu(), e_ids.cpu()) and torch.allclose(feat, e_feat, atol=1e-4)
    for c in program.caches("target"):
        c.zero_()
    assert not torch.allclose(program.target_verify(window, wpos)[1], feat, atol=1e-3)  # it read the prompt's slots


def test_check_aoti_cli_on_cuda(tmp_path_factory, tmp_path, capsys):
    """`export --aoti` and `check --aoti` as a user runs them on the GPU machine (no --device: cuda)."""
    from eagle3_check.cli import main

    out = tmp_path / "tiny.pt2"
    assert main(["export", "--aoti", "-o", str(out), "--no-progress"]) == 0
    capsys.readouterr()
    rc = main(["check", "--aoti", str(out), "--json", "--max-new-tokens", "32"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["passed"] and report["info"]["device"].startswith("cuda"), report["info"]


def test_aoti_external_weights_bound_on_the_gpu_equal_the_embedded_package(tmp_path_factory):
    """`--aoti-weights external` on CUDA (program/aoti_weights.py): the kernels-only package bound to the
    eager program's tensors on the device gives the embedded package's tokens; float32 vs HF identical."""
    embedded, _ = built("tiny-llama", "float32", tmp_path_factory)
    eager = EagerBackend.from_fixture(load_fixture("tiny-llama"), "cuda", "float32")
    out = tmp_path_factory.mktemp("aoti-ext") / "tiny-llama-external.pt2"
    t0 = time.perf_counter()
    compile_aoti(eager, out, source={"fixture": "tiny-llama"}, weights="external")
    print(f"AOTI compile tiny-llama float32 external weights: {time.perf_counter() - t0:.1f} s, "
          f"{out.stat().st_size / 2**20:.1f} MiB")
    program = AotiBackend(out, weights_source=eager)
    assert program.info["weights"] == "external" and program.device.type == "cuda"
    fx = load_fixture("tiny-llama")
    tok, prompts, opts = Tokenizer.load(fx.tokenizer_path), fx.prompts(), RunOptions(**OPTS)
    runner = ReferenceRunner()
    for p in prompts[:4]:
        a, b = runner.run(embedded, tok, p.text, opts), runner.run(program, tok, p.text, opts)
        assert (b.tokens, b.accepted) == (a.tokens, a.accepted), p.id
    hf = run_check(program, tok, HFReference(fx.target_dir, "cuda"), prompts, opts, tolerance_for("float32"))
    assert hf.passed and hf.counts()["tie"] == 0, format_table(hf)
