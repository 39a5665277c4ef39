"""Drift by rank on a real model (issue 26 item 4): on SmolLM2-135M-Instruct the int8-weight program
passes the drift check and a broken one fails it, with the default thresholds. The broken program
is int4 with `layers.29.mlp.down_proj` scales zeroed: its agreement (0.59 measured) is above
--min-agreement, so only the ranks of its tokens under the full-precision target catch it
(docs/quantization.md). Slow: two quantized programs and the full-precision twin, 3 prompts x 32
tokens each, about a minute a program on an idle core."""

from __future__ import annotations

import pytest

pytest.importorskip("torchao.quantization", reason="torchao not installed (it comes with the pte extra): "
                    "pip install -e .[pte]")

from eagle3_check.errors import InputError  # noqa: E402
from eagle3_check.fixtures.registry import load_fixture  # noqa: E402
from eagle3_check.jobs.check.drift import DriftThresholds  # noqa: E402
from eagle3_check.jobs.gate.gate import DRIFT, GateInputs, request_checks  # noqa: E402
from eagle3_check.judge.hf import HFReference  # noqa: E402
from eagle3_check.judge.tolerance import tolerance_for  # noqa: E402
from eagle3_check.program.eager import EagerBackend  # noqa: E402
from eagle3_check.program.quantize import make_spec, zero_scales  # noqa: E402
from eagle3_check.runners.options import RunOptions  # noqa: E402
from eagle3_check.tokenizer import Tokenizer  # noqa: E402

pytestmark = pytest.mark.slow

BROKEN = "target.model.model.layers.29.mlp.down_proj"
CHATML = dict(chat_prefix="<|im_start|>user\n", chat_suffix="<|im_end|>\n<|im_start|>assistant\n",
              stop_token="<|im_end|>", stop_ids=(2,), bos_id=-1, eos_id=2)


def drift_of(build, target_dir, tokenizer, prompts, options, scheme: str, broken: str | None = None,
             hf=None, full=None):
    """The gate's drift check on `build()` quantized with `scheme` (one layer's scales zeroed when
    `broken`), against the full-precision HF target and twin: (GateCheck, its details' drift)."""
    program = build()
    program.quantize(make_spec(scheme))
    if broken:
        zero_scales(program.module, broken)
    full = full or build()
    inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=target_dir, prompts=prompts, options=options,
                        tolerance=tolerance_for("float32"), tie_budget=0.0, suite=None, drift=DriftThresholds(),
                        hf_reference=hf or HFReference(target_dir), full_precision=lambda md: full)
    checks, _ = request_checks(program, inputs, inputs.hf_reference)
    chk = next(c for c in checks if c.name == DRIFT)
    assert next(c for c in checks if c.name == "runner vs self reference").status == "pass"  # lossless either way
    return chk, chk.details["drift"]


@pytest.fixture(scope="module")
def smollm2():
    try:
        fx = load_fixture("smollm2-135m")
        target = fx.target_dir
        assert target.is_dir() and fx.draft_dir.is_dir()
    except (InputError, AssertionError) as e:
        pytest.skip(f"the smollm2-135m fixture (target and draft) is not available here: {e}")
    hf = HFReference(target)
    return (lambda: EagerBackend.from_fixture(fx)), target, Tokenizer.load(fx.tokenizer_path), fx.prompts()[:3], hf


def test_int8_passes_and_a_broken_program_agreement_cannot_see_fails_by_rank(smollm2):
    build, target, tok, prompts, hf = smollm2
    opts = RunOptions(max_new_tokens=32, **CHATML)
    full = build()
    good, d = drift_of(build, target, tok, prompts, opts, "int8-weight", hf=hf, full=full)
    assert good.status == "pass", good.message
    assert d["far"] == 0, d["rank_histogram"]
    bad, d = drift_of(build, target, tok, prompts, opts, "int4-weight", BROKEN, hf=hf, full=full)
    assert bad.status == "fail", bad.message
    assert any(r.startswith("far divergences ") for r in d["reasons"]), d["reasons"]  # the ranks caught it
