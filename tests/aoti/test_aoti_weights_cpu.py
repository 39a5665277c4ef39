"""A CPU AOTI package without its weights (program/aoti_weights.py): tiny-llama compiled by `export --aoti
--aoti-weights external --device cpu`, bound at load to an eager program's tensors: the same tokens as
the eager program, one copy of the weights (the HF reference shares them), and the refusals of a
package with nothing or something else to bind to."""

from __future__ import annotations

import json

import pytest
import torch

from eagle3_check.cli import main
from eagle3_check.errors import InputError
from eagle3_check.judge.shared import shareable
from eagle3_check.program.aoti_backend import AotiBackend
from eagle3_check.program.eager import EagerBackend
from eagle3_check.program.sidecar import sidecar_path
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions

# slow: a compile of three models (about 35 s of one core with a warm inductor cache, minutes cold);
# `make slow` or `pytest -m aoti` runs them.
pytestmark = [pytest.mark.aoti, pytest.mark.slow, pytest.mark.shared("aoti-tiny-llama-external")]


@pytest.fixture(scope="module")
def bound(aoti_external_path, fixture):
    source = EagerBackend.from_fixture(fixture)
    return AotiBackend(aoti_external_path, weights_source=source), source


def test_the_sidecar_says_external_and_fingerprints_every_weight(aoti_external_path, program):
    rec = json.loads(sidecar_path(aoti_external_path).read_text())
    assert rec["weights"]["mode"] == "external"
    assert rec["inductor_options"]["aot_inductor.package_constants_in_so"] is False
    names = [row[0] for row in rec["weights"]["fingerprint"]]
    assert "target.model.model.embed_tokens.weight" in names and not any("_cache" in n for n in names)
    assert len(names) == len({n for n, _ in program.module.named_parameters()} |
                             {n for n, _ in program.module.named_buffers() if "_cache" not in n})


def test_bound_methods_and_runs_equal_the_eager_program(bound, program, tokenizer, fixture):
    aoti, _ = bound
    toks, pos = torch.tensor([[2, 40, 41, 42, 43, 44, 45]]), torch.arange(7)
    (e_next, e_feat), (a_next, a_feat) = program.prefill(toks, pos), aoti.prefill(toks, pos)
    # fp32, inductor's fused C++ against eager: as the embedded package (tests/aoti/test_aoti_backend.py)
    assert torch.equal(e_next, a_next) and torch.allclose(e_feat, a_feat, atol=1e-5, rtol=1e-5)
    runner, opts = ReferenceRunner(), RunOptions(max_new_tokens=32)
    for p in fixture.prompts()[:3]:
        a, b = runner.run(program, tokenizer, p.text, opts), runner.run(aoti, tokenizer, p.text, opts)
        assert (b.tokens, b.accepted) == (a.tokens, a.accepted), p.id


def test_the_weights_are_the_eager_programs_by_reference(bound):
    aoti, source = bound
    assert aoti.weights_source is source and aoti.info["weights"] == "external"
    assert shareable(aoti, "cpu", torch.float32) is source.module.target.model  # the HF reference shares them
    toks, pos = torch.tensor([[2, 40, 41, 42]]), torch.arange(4)
    before = aoti.prefill(toks, pos)[1].clone()
    w = source.module.target.model.model.layers[0].mlp.down_proj.weight  # the features read it
    saved = w.detach().clone()
    try:
        with torch.no_grad():
            w.mul_(0.5)  # the package reads this very storage
        assert not torch.allclose(aoti.prefill(toks, pos)[1], before)
    finally:
        with torch.no_grad():
            w.copy_(saved)


def test_without_a_source_or_with_other_weights_it_is_refused(aoti_external_path, fixture):
    with pytest.raises(InputError, match="compiled without its weights, given no eager program"):
        AotiBackend(aoti_external_path)
    other = EagerBackend.from_fixture(fixture)
    with torch.no_grad():
        other.module.draft.fc.weight[0, 0] += 1.0
    with pytest.raises(InputError, match=r"weight draft\.fc\.weight: checksum \d+ here") as e:
        AotiBackend(aoti_external_path, weights_source=other)
    assert "\n" not in str(e.value)


def test_check_aoti_builds_the_weights_and_passes_identical(aoti_external_path, capsys):
    rc = main(["check", "--aoti", str(aoti_external_path), "--device", "cpu", "--max-new-tokens", "24", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["passed"], out
    assert out["info"]["weights"] == "external" and out["counts"]["tie"] == 0
    assert out["counts"]["identical"] == out["counts"]["requests"]


def test_an_embedded_compile_after_a_weightless_one_keeps_its_weights(tmp_path, monkeypatch):
    """generated_name: inductor's code cache does not key on package_constants_in_so, so with one file
    name a weightless compile's library was reused by the embedded compile of the same graph, whose
    package then crashed at its first call. A fresh inductor cache, the weightless compile first."""
    from torch import nn
    from torch._inductor.package import load_package, package_aoti
    from torch.export import export

    from eagle3_check.program.aoti_export import _aot_compile
    from eagle3_check.program.aoti_weights import compile_options

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "inductor"))
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU()).eval()
    x = torch.randn(2, 64)  # [2, 64]
    ep = export(model, (x,), strict=False)
    for mode in ("external", "embedded"):
        package_aoti(str(tmp_path / f"{mode}.pt2"), {"m": _aot_compile(ep, "m", compile_options(mode))})
    embedded = load_package(str(tmp_path / "embedded.pt2"), "m")
    with torch.no_grad():
        assert torch.equal(embedded(x), model(x))
    external = load_package(str(tmp_path / "external.pt2"), "m")
    external.load_constants({k: v.detach() for k, v in model.state_dict().items() if k in external.get_constant_fqns()},
                            check_full_update=True, user_managed=True)
    with torch.no_grad():
        assert torch.equal(external(x), model(x))
