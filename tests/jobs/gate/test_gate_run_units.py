"""How `run_gate` wires its checks (`jobs/gate/gate.py`), on the toy program in well under a second a
test: what each check is given (K, the tie budget, the reference, the plug-in runner, the
fixture, progress), the report's info, the quantized path (drift against a full-precision twin,
edge suites against the program itself), ties within and past the budget, the dtype defaults,
metadata problems named one case each, the golden and baseline checks end to end, and the load
step (a probe in a child first, then the program with its data file)."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.gate.gate import (
    DRIFT,
    GateInputs,
    _dtype_defaults,
    edge_suites_check,
    follow_dtype,
    program_dtype,
    run_gate,
)
from eagle3_check.judge.hf import Scores
from eagle3_check.judge.self_ref import SelfReference
from eagle3_check.judge.tie_rule import tie_rule
from eagle3_check.judge.tolerance import default_budget, tolerance_for
from eagle3_check.mutants import factory
from eagle3_check.program.quantize import QUANT_KEY
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import FAIL, PASS, SKIP
from eagle3_check.suites.toy import ToyProgram

PROMPTS = [Prompt("hi", "Hi"), Prompt("sky", "The sky")]
REQUESTS = ["runner vs self reference", "runner vs HF reference", "self reference vs HF reference"]
INT4 = "int4-weight;group_size=32;scope=target"


def _inputs(tokenizer, **kw) -> GateInputs:
    base = dict(pte=None, tokenizer=tokenizer, target_dir=None, prompts=PROMPTS,
                options=RunOptions(max_new_tokens=12), suite=None)
    return GateInputs(**{**base, **kw})


class QuantToy(ToyProgram):
    """The toy, saying in its metadata that its target is int4-quantized."""

    def metadata(self) -> dict:
        return {**super().metadata(), QUANT_KEY: INT4}


class Bf16Toy(ToyProgram):
    dtype = torch.bfloat16  # as an eager program reports its weights' dtype


class OtherTarget(ToyProgram):
    """A target whose every greedy token is one above the toy's: a reference the toy never matches."""

    def prefill(self, tokens, positions):  # [1, T], [T] -> [1, 1], [1, T, 2]
        ids, feature = super().prefill(tokens, positions)
        return ids + 1, feature

    def target_verify(self, tokens, positions):  # [1, C], [C] -> [1, C], [1, C, 2]
        ids, feature = super().target_verify(tokens, positions)
        return ids + 1, feature


class TieAt:
    """An HF reference with logits: the toy's own greedy rows (margin 10), except row `at`, where
    another token (the toy's + 1) leads the toy's by 1e-5, inside float32's tie tolerance at 10
    (`tolerance_for("float32").at(10.0)`, ~2e-4): the toy's token there is a tie, rank 2."""

    def __init__(self, program, at: int = 2):
        self.inner, self.at = SelfReference(program), at

    def score(self, prompt_ids: list[int], tokens: list[int]) -> Scores:
        rows = len(self.inner.score(prompt_ids, tokens).argmax)
        s = Scores(list(self.inner.score(prompt_ids, tokens).argmax), [10.0] * rows, [0.0] * rows, [-1] * rows,
                   [10.0] * len(tokens), [1] * len(tokens))
        if self.at < len(tokens):
            got = tokens[self.at]
            s.argmax[self.at], s.runner_up[self.at], s.given_rank[self.at] = got + 1, got, 2
            s.top2[self.at] = s.given_logit[self.at] = 10.0 - 1e-5
        return s


def test_the_report_info_and_the_request_details(tokenizer, tmp_path):
    toy, seen = ToyProgram(), []
    report = run_gate(_inputs(tokenizer, pte=tmp_path / "toy.pte", hf_reference=SelfReference(toy),
                              options=RunOptions(max_new_tokens=12, chain_len=3)), toy, on_check=seen.append)
    assert seen == report.checks
    assert report.info == {"pte": str(tmp_path / "toy.pte"), "backend": "ToyProgram", "dtype": "float32",
                           "tie_tolerance": tolerance_for("float32").describe(), "tie_budget": 0.0, "k": 3,
                           "tie_budget_source": "built-in constants (no flip measured in float32: docs/calibration.md)",
                           "k_range": [1, 7],  # verify lengths 2..8 hold K + 1
                           "k_source": "the program's verify range metadata (get_min/max_verify_len)"}
    own = report.check("runner vs self reference").details
    assert own["k"] == [3] and own["requests"] == 2 and own["tau"] == report.tau
    assert [r["prompt_id"] for r in own["runs"]] == ["hi", "sky"] and all(r["k"] == 3 for r in own["runs"])
    assert list(own["reference"]) == ["hi", "sky"] and own["reference"]["hi"]["margins"][0] is None  # no logits
    hf = report.check("runner vs HF reference").details["reference"]
    assert hf == own["reference"]  # the HF reference here is the toy itself
    assert "reference" not in report.check("self reference vs HF reference").details
    without = run_gate(_inputs(tokenizer), toy)
    assert without.info["pte"] is None and "reference" not in without.check("runner vs HF reference").details


def test_progress_names_each_check_and_counts_its_cases(tokenizer):
    toy, steps = ToyProgram(), []
    run_gate(_inputs(tokenizer, suite="chain/lo", hf_reference=SelfReference(toy),
                     on_step=lambda *s: steps.append(s)), toy)
    assert steps == [("edge suites", 1, 1), ("requests", 1, 2), ("requests", 2, 2)]
    steps.clear()
    run_gate(_inputs(tokenizer, suite="metadata", hf_reference=SelfReference(toy),
                     on_step=lambda *s: steps.append(s)), toy)
    assert steps[:4] == [("edge suites", n, 4) for n in (1, 2, 3, 4)]  # the metadata suite's four cases


def test_ties_pass_within_the_budget_and_fail_past_it(tokenizer):
    toy = ToyProgram()
    over = run_gate(_inputs(tokenizer, hf_reference=TieAt(toy)), toy)  # float32: budget 0
    tol = tolerance_for("float32").at(10.0)
    assert tol > 1e-5
    tie = (f"at token 2: runner 314, reference 315 (margin 1e-05 <= tolerance {tol:.3g}, runner's token rank 2, "
           "1e-05 below the top)")
    assert over.check("runner vs HF reference").message == (
        "0 identical, 2 tie, 0 fail of 2 requests: 2 tie positions exceed the tie budget of 0 (0.0% of 24); "
        f"first tie: hi: 1 tie in 12 tokens (max_new); first {tie}")
    assert over.check("self reference vs HF reference").message == (
        "0 identical, 2 tie, 0 fail of 2 prompts: 2 tie positions exceed the tie budget of 0 (0.0% of 24); "
        f"first tie: hi: self vs HF: 1 ties in 12 tokens; first {tie}")
    within = run_gate(_inputs(tokenizer, hf_reference=TieAt(toy), tie_budget=1.0, suite="chain/lo"), toy)
    assert [(c.status, c.message) for c in within.checks[2:6]] == [
        (PASS, "0 passed, 1 tie, 0 fail of 1 cases (1 tie positions, budget 12)"),  # a case counts its 12 judged tokens
        (PASS, "2/2 requests identical"),
        (PASS, "0 identical, 2 tie, 0 fail of 2 requests (2 tie positions, budget 24)"),
        (PASS, "0 identical, 2 tie, 0 fail of 2 prompts (2 tie positions, budget 24)")]
    assert within.info["tie_budget"] == 1.0 and within.passed


def test_a_plugin_runner_is_the_one_judged(tokenizer):
    toy = ToyProgram()
    lossy = factory("emit_past_max_new")()
    report = run_gate(_inputs(tokenizer, plugin=lossy, suite="chain/lo", hf_reference=SelfReference(toy)), toy)
    suite = report.check("edge suites")
    assert suite.status == FAIL and suite.cases[0].status == FAIL, suite.message
    for name in REQUESTS[:2]:  # one token past max new tokens, judged against both references
        chk = report.check(name)
        assert (chk.status, chk.message) == (FAIL, "0 identical, 0 tie, 2 fail of 2 requests; first failure: hi: "
                                                   "length: runner emitted 13 tokens, rules fix 12 (max_new)")


def test_the_edge_suites_judge_against_hf_with_the_gates_fixture(tokenizer):
    toy = ToyProgram()
    ok = run_gate(_inputs(tokenizer, suite="chain/lo", hf_reference=SelfReference(toy)), toy).check("edge suites")
    assert (ok.name, ok.status, ok.message) == ("edge suites", PASS, "1/1 cases passed")
    assert [(c.name, c.status, c.message) for c in ok.cases] == [("chain/lo", PASS, "identical (12 tokens, max_new)")]
    assert ok.cases[0].seconds > 0
    other = run_gate(_inputs(tokenizer, suite="chain/lo", hf_reference=SelfReference(OtherTarget())), toy)
    chk = other.check("edge suites")
    assert chk.status == FAIL and chk.cases[0].status == FAIL and "first failure: chain/lo: " in chk.message
    gemma = run_gate(_inputs(tokenizer, suite="chunked-prefill/window-ring", fixture="toy", hf_reference=SelfReference(toy)),
                     toy).check("edge suites")
    assert gemma.message == ("no cases ran, 1 skipped (first: chunked-prefill/window-ring: a case for fixture tiny-gemma4 "
                             "(this run: toy))")


def test_a_quantized_program_is_judged_against_itself_and_its_drift_measured(tokenizer):
    """A quantized toy whose draft is always wrong, against the plain toy as HF and as its
    full-precision twin: lossless, identical to HF, but its tau drop fails the drift check."""
    q, fp, asked = QuantToy(wrong_at=set(range(64))), ToyProgram(), []
    inputs = _inputs(tokenizer, suite="chain/lo", hf_reference=SelfReference(OtherTarget()),
                     full_precision=lambda md: asked.append(md) or fp)
    report = run_gate(inputs, q)
    assert [c.name for c in report.checks[3:6]] == [*REQUESTS[:2], DRIFT]
    assert report.check("edge suites").status == PASS  # against the program itself, not HF
    assert report.check("runner vs self reference").status == PASS
    assert report.check("runner vs HF reference").status == SKIP
    assert report.check("runner vs HF reference").message == (
        "quantized program (int4-weight g32): the runner is judged against the self reference; its target's "
        "distance from HF is the drift check")
    assert asked == [q.metadata()]  # the twin is built from the program's metadata
    fp_tau = run_gate(_inputs(tokenizer), fp).tau  # the twin's own tau, on the same prompts and K
    drift = report.check(DRIFT)
    d = drift.details["drift"]
    assert (d["quantization"], d["tau"], d["fp_tau"], d["fp_note"]) == ("int4-weight g32", report.tau, fp_tau, "")
    assert d["agreement"] == 0.0 and d["positions"] == 24  # OtherTarget never agrees
    assert drift.status == FAIL and drift.message.startswith("drift past the thresholds: agreement 0.000 < ")
    assert [(c.name, c.status) for c in drift.cases] == [("hi", FAIL), ("sky", FAIL)]
    assert drift.seconds == 0.0  # its time is its cases' (none timed)


def test_a_quantized_program_without_a_twin_or_a_reference(tokenizer):
    q = QuantToy()
    report = run_gate(_inputs(tokenizer, hf_reference=SelfReference(ToyProgram())), q)
    d = report.check(DRIFT).details["drift"]
    assert report.check(DRIFT).status == PASS and d["agreement"] == 1.0
    assert (d["fp_tau"], d["fp_note"]) == (None, GateInputs.full_precision_note)
    bare = run_gate(_inputs(tokenizer), q)
    assert [(c.name, c.status, c.message) for c in bare.checks[4:6]] == [
        ("runner vs HF reference", SKIP, "no reference target given (--target or --fixture)"),
        (DRIFT, SKIP, "no reference target given")]


@pytest.mark.parametrize("program, want", [pytest.param(ToyProgram(), "float32", id="no-dtype-is-float32"),
                                           pytest.param(Bf16Toy(), "bfloat16", id="torch-dtype")])
def test_program_dtype(program, want):
    assert program_dtype(program) == want


def test_the_tie_tolerance_and_budget_follow_the_programs_dtype(tokenizer):
    report = run_gate(_inputs(tokenizer), Bf16Toy())
    assert (report.info["dtype"], report.info["tie_tolerance"], report.info["tie_budget"]) == (
        "bfloat16", tolerance_for("bfloat16").describe(), default_budget("bfloat16"))
    assert report.checks[0].message == (f"loaded (backend=Bf16Toy; tie tolerance {tolerance_for('bfloat16').describe()}, "
                                        f"tie budget {default_budget('bfloat16'):.1%})")
    given = _inputs(tokenizer, tolerance=tolerance_for("bfloat16"))  # a given tolerance sets the budget's dtype
    info: dict = {}
    follow_dtype(given, "float32", info)
    assert info == {"dtype": "float32", "tie_tolerance": tolerance_for("bfloat16").describe(),
                    "tie_budget": default_budget("bfloat16"), "tie_budget_source": tie_rule("bfloat16").source}


@pytest.mark.parametrize("given, want", [
    pytest.param({"tie_budget": 0.5}, (tolerance_for("bfloat16"), 0.5), id="budget-given"),
    pytest.param({"tolerance": tolerance_for("float32")}, (tolerance_for("float32"), 0.0), id="tolerance-given"),
    pytest.param({}, (tolerance_for("bfloat16"), default_budget("bfloat16")), id="neither"),
])
def test_a_check_run_on_its_own_takes_the_missing_dtype_defaults(tokenizer, given, want):
    inputs = _inputs(tokenizer, **given)
    _dtype_defaults(inputs, Bf16Toy())
    assert (inputs.tolerance, inputs.tie_budget) == want


def test_the_edge_suites_on_their_own_use_the_programs_dtype(tokenizer):
    toy = Bf16Toy()
    inputs = _inputs(tokenizer, suite="chain/lo", tie_budget=0.25)
    chk = edge_suites_check(toy, inputs, SelfReference(toy))
    assert (chk.status, inputs.tolerance, inputs.tie_budget) == (PASS, tolerance_for("bfloat16"), 0.25)
