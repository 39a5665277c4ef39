"""The gate on quantized programs (issue 15, DESIGN §3): the runner must match the program's own
greedy decoding at every position; the program's drift from the full-precision HF target is
reported (agreement, first divergence, rank under HF, tau against the full-precision program)
and fails only past --min-agreement / --max-tau-drop. A broken quantization (one layer's scales
zeroed) fails the drift check with its reason while the runner stays lossless; a lossy runner
(a seeded mutant) on a good quantized program fails the lossless check. Eager CPU programs: the
gate's checks do not depend on the backend (the .pte: tests/pte/test_quantized_pte.py)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import asdict

import pytest

pytest.importorskip("torchao.quantization", reason="torchao not installed (it comes with the pte extra): "
                    "pip install -e .[pte]")

from eagle3_check.fixtures.registry import load_fixture  # noqa: E402
from eagle3_check.jobs.check.drift import DEFAULT_MIN_AGREEMENT, DriftThresholds  # noqa: E402
from eagle3_check.jobs.gate import gate as gate_module  # noqa: E402
from eagle3_check.jobs.gate.gate import DRIFT, GateInputs, format_table, run_gate  # noqa: E402
from eagle3_check.mutants import factory  # noqa: E402
from eagle3_check.program.eager import EagerBackend  # noqa: E402
from eagle3_check.program.quantize import QUANT_KEY, zero_scales  # noqa: E402
from eagle3_check.report.junit import to_xml  # noqa: E402
from eagle3_check.runners.options import RunOptions  # noqa: E402
from eagle3_check.status import FAIL, PASS, SKIP  # noqa: E402

BROKEN_LAYER = "target.model.model.layers.0.mlp.down_proj"  # measured: bench/results/quant-drift.json
# one work unit under -n 2 --dist loadgroup: the INT4 programs and the full-precision tau are built once
pytestmark = pytest.mark.shared("quant-gate")


@pytest.fixture(scope="module")
def q4(fixture):
    return EagerBackend.from_fixture(load_fixture("tiny-llama-int4"))


@pytest.fixture(scope="module")
def broken(fixture):
    p = EagerBackend.from_fixture(load_fixture("tiny-llama-int4"))
    zero_scales(p.module, BROKEN_LAYER)
    return p


@pytest.fixture(scope="module")
def gate(fixture, tokenizer, hf_reference, program):
    """The gate; by default as `eagle3-check gate` runs it (the fixture's 14 prompts, 64 new tokens:
    what the thresholds were measured on), no edge suite unless asked; `n` / `max_new` shrink it
    for checks that do not depend on the default thresholds. The full-precision twin is the
    session's fp32 program."""

    def run(prog, runner=None, suite=None, n=14, max_new=64, **drift):
        inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir,
                            prompts=fixture.prompts()[:n], options=RunOptions(max_new_tokens=max_new), suite=suite, hf_reference=hf_reference,
                            fixture=fixture.name, plugin=runner, full_precision=lambda md: program)
        for k, v in drift.items():
            setattr(inputs.drift, k, v)
        return run_gate(inputs, program=prog)

    taus, measure = {}, gate_module.runner_tau

    def tau_once(fp, tokenizer, prompts, options, ks):
        """The full-precision program's tau (the reference runner over prompts x K), measured once per program,
        prompts, options and K: the two full gates (the good and the broken INT4 program) measure against the
        same fp32 program (14 prompts x 64 tokens, ~5 s each)."""
        key = (id(fp), tuple(p.text for p in prompts), repr(options), tuple(ks))
        if key not in taus:
            taus[key] = measure(fp, tokenizer, prompts, options, ks)
        return taus[key]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gate_module, "runner_tau", tau_once)
        yield run


def test_quantized_program_passes_the_gate_with_a_drift_table(gate, q4):
    report = gate(q4)
    assert report.passed, format_table(report)
    assert report.check("runner vs self reference").status == PASS
    hf = report.check("runner vs HF reference")
    assert hf.status == SKIP and "quantized program (int4-weight g32)" in hf.message
    drift = report.check(DRIFT)
    d = drift.details["drift"]
    assert drift.status == PASS and d["thresholds"] == asdict(DriftThresholds())
    assert d["thresholds"]["min_agreement"] == DEFAULT_MIN_AGREEMENT and d["far_share"] <= d["thresholds"]["max_far_share"]
    assert d["divergences"] == sum(d["rank_histogram"].values()) > 0
    assert DEFAULT_MIN_AGREEMENT <= d["agreement"] < 1  # INT4 drifts, within the bound
    assert d["fp_tau"] is not None and d["tau"] is not None and len(d["prompts"]) == 14
    table = format_table(report)
    assert "quantization drift (int4-weight g32; self reference vs HF full precision" in table
    assert "first div" in table and "rank" in table and "pooled: agreement" in table
    assert "ranks under HF at the " in table and "mean gap" in table
    root = ET.fromstring(to_xml(report.junit_suites()).split("\n", 1)[1])
    suite = next(s for s in root.iter("testsuite") if s.get("name") == DRIFT)
    assert suite.get("tests") == "14" and suite.find("testcase/properties") is not None


def test_thresholds_are_the_only_thing_that_fails_drift(gate, q4):
    """The same program fails when the bounds are tightened past what it measures, each reason named."""
    report = gate(q4, n=4, max_new=24, min_agreement=1.0, max_tau_drop=-1.0)
    drift = report.check(DRIFT)
    assert drift.status == FAIL and report.check("runner vs self reference").status == PASS
    assert "agreement" in drift.message and "< --min-agreement 1" in drift.message
    assert "> --max-tau-drop -1" in drift.message


def test_broken_quantization_fails_the_drift_check_with_a_named_reason(gate, broken):
    """One layer's scales zeroed: the runner is still lossless against the program, but the
    program's drift from HF is past --min-agreement."""
    report = gate(broken)
    assert not report.passed
    assert report.check("runner vs self reference").status == PASS
    drift = report.check(DRIFT)
    assert drift.status == FAIL, drift.message
    assert drift.message.startswith("drift past the thresholds: agreement ") and "< --min-agreement" in drift.message
    assert "first divergence at token" in drift.message
    assert any(c.status == FAIL for c in drift.cases)


def test_lossy_runner_on_a_good_quantized_program_fails_the_lossless_check(gate, q4):
    report = gate(q4, runner=factory("stale_verify_positions")(), n=4, max_new=24, min_agreement=0.0, max_tau_drop=8.0)
    chk = report.check("runner vs self reference")
    assert chk.status == FAIL and "diverged at token" in chk.message, chk.message
    assert not report.passed


def test_gate_edge_suite_on_a_quantized_program_judges_against_the_self_reference(gate, q4):
    report = gate(q4, suite="acceptance", n=2, max_new=16, min_agreement=0.0, max_tau_drop=8.0)
    chk = report.check("edge suites")
    assert chk.status == PASS and chk.details["fail"] == 0 and chk.details["identical"] >= 4, chk.message


def test_full_precision_program_is_not_judged_by_drift(gate, program):
    report = gate(program, n=2, max_new=16)
    assert QUANT_KEY not in program.metadata()
    assert report.check(DRIFT) is None and report.check("self reference vs HF reference").status == PASS
