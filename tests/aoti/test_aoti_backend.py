"""The AOTI backend (program/aoti_export.py, program/aoti_backend.py) on CPU: tiny-llama compiled with
AOTInductor, judged against itself (identical) and against HF in float32 (identical tokens), its
shared caches, and its sidecar's digest check."""

from __future__ import annotations

import json
import shutil

import pytest
import torch

from eagle3_check.errors import InputError
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.judge.self_ref import SelfReference
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.program.aoti_backend import AotiBackend
from eagle3_check.program.aoti_export import AOTI_PHASES
from eagle3_check.program.contract import read_metadata
from eagle3_check.program.export import BACKEND_KEY
from eagle3_check.program.sidecar import sidecar_path
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions

# slow: the package's compile (C++, three models) costs 3 to 6 minutes of one core on a clean clone, past
# make check's 8 minutes on CI (docs/contributing.md); `make slow` or `pytest -m aoti` runs them. One work
# unit under -n 2 --dist loadgroup: one worker compiles the package (tests/suite_schedule.py).
pytestmark = [pytest.mark.aoti, pytest.mark.slow, pytest.mark.shared("aoti-tiny-llama")]


def test_sidecar_records_metadata_caches_and_phases(aoti_program, aoti_path, program):
    rec = json.loads(sidecar_path(aoti_path).read_text())
    assert rec["backend"] == "aoti" and rec["device"] == "cpu" and rec["source"] == {"fixture": "tiny-llama"}
    assert list(rec["phases"]) == list(AOTI_PHASES) and sum(rec["phases"].values()) <= rec["seconds"] + 0.1
    md = aoti_program.metadata()
    assert md.pop(BACKEND_KEY) == "aoti"
    assert md == {k: v for k, v in program.metadata().items() if v != []}  # empty lists are not constant methods
    assert read_metadata(aoti_program.metadata()).k_range == (1, 7)
    n_layers = program.module.target.n_layers
    assert [n for n, _, _ in rec["caches"]["target"]] == [f"target.{kv}_cache_{i}" for i in range(n_layers)
                                                          for kv in ("k", "v")]
    assert rec["caches"]["draft"] and all(n.startswith("draft.") for n, _, _ in rec["caches"]["draft"])


def test_methods_match_eager_ids_exactly_and_features_closely(aoti_program, program):
    toks, pos = torch.tensor([[2, 40, 41, 42, 43, 44, 45]]), torch.arange(7)
    (e_next, e_feat), (a_next, a_feat) = program.prefill(toks, pos), aoti_program.prefill(toks, pos)
    # fp32, another kernel set (inductor's fused C++): measured max |diff| 9.2e-7 on these features
    assert torch.equal(e_next, a_next) and torch.allclose(e_feat, a_feat, atol=1e-5, rtol=1e-5)
    window, wpos = torch.tensor([[int(e_next), 7, 8, 9, 10]]), torch.arange(7, 12)
    (e_ids, e_vf), (a_ids, a_vf) = program.target_verify(window, wpos), aoti_program.target_verify(window, wpos)
    assert torch.equal(e_ids, a_ids) and torch.allclose(e_vf, a_vf, atol=1e-5, rtol=1e-5)
    seed = torch.tensor([[40, 41, 42, 43, 44, 45, int(e_next)]])
    (e_d, e_g), (a_d, a_g) = program.draft_decode(seed, e_feat, pos), aoti_program.draft_decode(seed, e_feat, pos)
    assert torch.equal(e_d, a_d) and torch.allclose(e_g, a_g, atol=1e-5, rtol=1e-5)


def test_prefill_writes_the_cache_target_verify_reads(aoti_program, program):
    """One set of caches shared by the three models: prefill's writes are in the backend's target
    caches (equal to the eager module's buffers), and target_verify reads them: the same window on
    zeroed caches gives other features."""
    toks, pos = torch.arange(30, 42)[None], torch.arange(12)
    program.prefill(toks, pos)
    aoti_program.prefill(toks, pos)
    k0 = aoti_program.caches("target")[0]  # [1, kv, S, D]
    eager_k0 = program.module.target.k_cache_0
    assert k0[:, :, :12].abs().sum() > 0 and torch.allclose(k0[:, :, :12], eager_k0[:, :, :12], atol=1e-5)
    window, wpos = torch.tensor([[5, 6, 7, 8, 9]]), torch.arange(12, 17)
    ids, feat = aoti_program.target_verify(window, wpos)
    assert torch.allclose(feat, program.target_verify(window, wpos)[1], atol=1e-5)
    assert torch.allclose(k0[:, :, 12:17], eager_k0[:, :, 12:17], atol=1e-5)  # the window's own slots written
    saved = [c.clone() for c in aoti_program.caches("target")]
    try:
        for c in aoti_program.caches("target"):
            c.zero_()
        _, cold = aoti_program.target_verify(window, wpos)
        assert not torch.allclose(cold, feat, atol=1e-3)  # the prompt's slots were read: now they are zeros
    finally:
        for c, s in zip(aoti_program.caches("target"), saved):
            c.copy_(s)


def test_runner_on_aoti_is_identical_to_its_self_reference(aoti_program, tokenizer, fixture):
    report = run_check(aoti_program, tokenizer, SelfReference(aoti_program), fixture.prompts(),
                       RunOptions(max_new_tokens=48), tolerance_for("float32"))
    counts = report.counts()
    assert counts["identical"] == counts["requests"] == len(fixture.prompts()) and counts["positions"] > 0


def test_runner_on_aoti_equals_hf_and_eager_in_float32(aoti_program, program, tokenizer, hf_reference, fixture):
    report = run_check(aoti_program, tokenizer, hf_reference, fixture.prompts(), RunOptions(max_new_tokens=48),
                       tolerance_for("float32"))
    assert report.passed and report.counts()["tie"] == 0, [o.verdict.message for o in report.outcomes]
    runner = ReferenceRunner()
    for p in fixture.prompts()[:4]:
        a, b = runner.run(program, tokenizer, p.text, RunOptions(max_new_tokens=48)), \
            runner.run(aoti_program, tokenizer, p.text, RunOptions(max_new_tokens=48))
        assert (b.tokens, b.accepted) == (a.tokens, a.accepted), p.id


def test_a_sidecar_of_another_file_is_refused(aoti_path, tmp_path):
    pkg = tmp_path / "changed.pt2"
    shutil.copy(aoti_path, pkg)
    shutil.copy(sidecar_path(aoti_path), sidecar_path(pkg))
    with open(pkg, "ab") as f:
        f.write(b"\0")
    with pytest.raises(InputError, match="describes another file") as e:
        AotiBackend(pkg)
    assert "\n" not in str(e.value)
    sidecar_path(pkg).unlink()
    with pytest.raises(InputError, match="has no sidecar changed.export.json"):
        AotiBackend(pkg)


def test_a_mutated_buffer_is_each_loaded_models_own(tmp_path):
    """Why the caches are inputs (program/aoti_export.py): AOTInductor compiles a buffer the graph
    mutates as a constant of the model, updated in place inside it; a second model (here: the same
    package loaded again) holds its own copy and never sees those writes."""
    from torch import nn
    from torch._inductor.package import load_package
    from torch.export import export

    class Accumulate(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("cache", torch.zeros(4))

        def forward(self, x):  # [1] -> [4]
            self.cache.add_(x)
            return self.cache * 1

    ep = export(Accumulate(), (torch.ones(1),), strict=False)
    path = torch._inductor.aoti_compile_and_package(ep, package_path=str(tmp_path / "acc.pt2"))
    a, b = load_package(path), load_package(path)
    assert a(torch.ones(1)).tolist() == [1.0] * 4 and a(torch.ones(1)).tolist() == [2.0] * 4  # in place, inside a
    assert b(torch.ones(1)).tolist() == [1.0] * 4  # b's own copy: a's writes are not there
