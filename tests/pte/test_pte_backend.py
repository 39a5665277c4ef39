"""The `.pte` backend against the eager backend and the HF reference, and its load errors."""

from __future__ import annotations

import json
import os

import pytest
import torch

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.errors import InputError, OptionError  # noqa: E402
from eagle3_check.jobs.check.prompt_set import run_check  # noqa: E402
from eagle3_check.judge.self_ref import self_greedy  # noqa: E402
from eagle3_check.judge.tolerance import tolerance_for  # noqa: E402
from eagle3_check.program.contract import read_metadata  # noqa: E402
from eagle3_check.program.export import BACKEND_KEY, PHASES  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend  # noqa: E402
from eagle3_check.program.sidecar import sidecar_path  # noqa: E402
from eagle3_check.runners.loop import ReferenceRunner  # noqa: E402
from eagle3_check.runners.options import RunOptions, prompt_ids  # noqa: E402

pytestmark = pytest.mark.pte


def test_metadata_matches_the_eager_program(pte_program, program):
    md = pte_program.metadata()
    assert md.pop(BACKEND_KEY) == "xnnpack"
    assert md == program.metadata()
    assert read_metadata(md).k_range == (1, 7)


def test_compiled_maxima_and_sidecar_record_the_backend(pte_program, pte_path):
    assert pte_program.method_maxima() == {"prefill": 128, "target_verify": 8, "draft_decode": 128}
    rec = json.loads(sidecar_path(pte_path).read_text())
    assert rec["backend"] == "xnnpack" and rec["source"] == {"fixture": "tiny-llama"}
    assert all(rec["delegated"][m] > 0 for m in ("prefill", "target_verify", "draft_decode"))
    assert "index_put.default" in rec["portable_ops"]["prefill"]  # cache writes stay portable
    # every phase of the export was announced and timed, in order (issue 16 part 4)
    assert list(rec["phases"]) == list(PHASES) and all(t >= 0 for t in rec["phases"].values())
    assert sum(rec["phases"].values()) <= rec["seconds"] + 0.1


def test_methods_match_eager_ids_exactly_and_features_closely(pte_program, program):
    toks = torch.tensor([[2, 40, 41, 42, 43, 44, 45]])
    pos = torch.arange(7)
    for be in (pte_program, program):
        be.reset()
    (e_next, e_feat), (p_next, p_feat) = program.prefill(toks, pos), pte_program.prefill(toks, pos)
    assert torch.equal(e_next, p_next) and torch.allclose(e_feat, p_feat, atol=1e-4, rtol=1e-4)
    window, wpos = torch.tensor([[int(e_next), 7, 8, 9, 10]]), torch.arange(7, 12)
    (e_ids, e_vf), (p_ids, p_vf) = program.target_verify(window, wpos), pte_program.target_verify(window, wpos)
    assert torch.equal(e_ids, p_ids) and torch.allclose(e_vf, p_vf, atol=1e-4, rtol=1e-4)
    seed = torch.tensor([[40, 41, 42, 43, 44, 45, int(e_next)]])
    (e_d, e_g), (p_d, p_g) = program.draft_decode(seed, e_feat, pos), pte_program.draft_decode(seed, e_feat, pos)
    assert torch.equal(e_d, p_d) and torch.allclose(e_g, p_g, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize("k", [None, 1, 7], ids=["k-default", "k1", "k7"])
def test_pte_equals_eager_token_for_token_on_the_prompt_set(pte_program, program, tokenizer, fixture, k):
    runner, opts = ReferenceRunner(), RunOptions(max_new_tokens=48, chain_len=k)
    prompts = fixture.prompts() if k is None else fixture.prompts()[:4]
    for p in prompts:
        a, b = runner.run(program, tokenizer, p.text, opts), runner.run(pte_program, tokenizer, p.text, opts)
        assert (b.tokens, b.accepted, b.stop_reason) == (a.tokens, a.accepted, a.stop_reason), p.id


def test_runner_on_pte_equals_hf_reference(pte_program, tokenizer, hf_reference, fixture):
    report = run_check(pte_program, tokenizer, hf_reference, fixture.prompts(), RunOptions(max_new_tokens=48), tolerance_for("float32"))
    assert report.passed, [o.verdict.message for o in report.outcomes if o.verdict.status == "fail"]


def test_self_reference_on_pte_equals_hf_reference(pte_program, tokenizer, hf_reference, fixture):
    for p in fixture.prompts()[:5]:
        ids = prompt_ids(tokenizer, p.text, RunOptions())
        assert self_greedy(pte_program, ids, 40).tokens == hf_reference.greedy(ids, 40).tokens, p.id


def test_self_reference_reaches_the_context_end(pte_program, hf_reference):
    ids = [5 + (i * 13) % 400 for i in range(120)]  # L = 120; 136 tokens to max_seq_len 256
    got = self_greedy(pte_program, ids, 1000).tokens
    assert len(got) == 136 and got == hf_reference.greedy(ids, 136).tokens


def test_verify_window_outside_the_exported_range_is_refused(pte_program):
    with pytest.raises(OptionError, match=r"target_verify called with length 1.*\[2, 8\]"):
        pte_program.target_verify(torch.tensor([[5]]), torch.tensor([3]))
    with pytest.raises(OptionError, match=r"prefill called with length 129.*\[1, 128\]"):
        pte_program.prefill(torch.zeros(1, 129, dtype=torch.long), torch.arange(129))


@pytest.mark.parametrize("make, named", [
    pytest.param(lambda good, bad: None, "does not exist", id="missing"),
    pytest.param(lambda good, bad: bad.write_bytes(b""), "is empty", id="empty"),
    pytest.param(lambda good, bad: bad.write_bytes(good.read_bytes()[: good.stat().st_size // 2]),
                 "truncated or corrupt", id="truncated"),
    pytest.param(lambda good, bad: bad.write_bytes(os.urandom(4096)), "not an ExecuTorch program", id="random-bytes"),
])
def test_unloadable_files_are_one_clear_error(pte_path, tmp_path, make, named):
    bad = tmp_path / "bad.pte"
    make(pte_path, bad)
    with pytest.raises(InputError, match=named) as err:
        PteBackend(bad)
    assert str(bad) in str(err.value) and "\n" not in str(err.value)


def test_export_leaves_the_eager_module_usable(program):
    from eagle3_check.program.export import export_methods

    toks, pos = torch.tensor([[2, 40, 41, 42]]), torch.arange(4)
    program.reset()
    before = program.prefill(toks, pos)
    export_methods(program.module, program.spec, program.module.draft.cfg.hidden_size)
    after = program.prefill(toks, pos)
    assert torch.equal(before[0], after[0]) and torch.equal(before[1], after[1])
