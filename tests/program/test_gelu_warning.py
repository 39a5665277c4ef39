"""program/metadata_check.py's tanh GELU warning: a Gemma-style target (gelu_pytorch_tanh) in an
XNNPACK program that does not record keeping its tanh GELU is named in the gate's metadata line."""

from __future__ import annotations

import pytest

from eagle3_check.program.metadata_check import TANH_GELU, gelu_warning, validate_metadata

RAW = {"get_chain_len": 4, "get_max_prefill_chunk": 64, "get_min_prefill_chunk": 1, "get_max_seq_len": 128,
       "get_min_verify_len": 2, "get_max_verify_len": 8}


@pytest.mark.parametrize("activation, backend, lowering, warned", [
    pytest.param(TANH_GELU, "xnnpack", {}, True, id="tanh-gelu-xnnpack-stock-lowering"),
    pytest.param(TANH_GELU, "xnnpack-bf16", {}, True, id="tanh-gelu-xnnpack-bf16-stock-lowering"),
    pytest.param(TANH_GELU, None, None, True, id="tanh-gelu-backend-unsaid-no-sidecar"),
    pytest.param(TANH_GELU, "xnnpack", {"tanh_gelu_as_ops": 36}, False, id="tanh-gelu-kept-by-export"),
    pytest.param(TANH_GELU, "portable", None, False, id="tanh-gelu-portable-kernels"),
    pytest.param("silu", "xnnpack", None, False, id="silu-target"),
    pytest.param("gelu", "xnnpack", None, False, id="exact-gelu-target"),
])
def test_gelu_warning(activation, backend, lowering, warned):
    raw = {**RAW, **({"get_export_backend": backend} if backend else {})}
    w = gelu_warning(raw, {"activation": activation}, lowering)
    assert (w is not None) == warned
    f = validate_metadata(raw, target={"activation": activation}, lowering=lowering)
    assert f.ok and (f.warnings == [w] if warned else f.warnings == [])
    if warned:
        assert "exact GELU" in w and "Fix: re-export with eagle3-check export" in w


class FakePte:
    """A loaded `.pte` as program_gelu_warning sees it: metadata and the sidecar's lowering record."""

    def __init__(self, lowering):
        self.sidecar = {"lowering": lowering} if lowering is not None else {}

    def metadata(self):
        return {**RAW, "get_export_backend": "xnnpack"}


@pytest.mark.parametrize("fixture, lowering, warned", [
    pytest.param("tiny-gemma4", None, True, id="gemma-target-stock-pte"),
    pytest.param("tiny-gemma4", {"tanh_gelu_as_ops": 8}, False, id="gemma-target-our-export"),
    pytest.param("tiny-llama", None, False, id="silu-target"),
])
def test_check_names_the_warning_beside_its_verdict(fixture, lowering, warned):
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.jobs.check.prompt_set import CheckReport, format_table
    from eagle3_check.program.metadata_check import program_gelu_warning

    w = program_gelu_warning(FakePte(lowering), load_fixture(fixture).target_dir)
    assert (w is not None) == warned
    report = CheckReport(outcomes=[], k=4, info={"program_warnings": [w]} if w else {})
    shown = [line for line in format_table(report).splitlines() if line.startswith("warning: ")]
    assert shown == ([f"warning: {w}"] if warned else [])
