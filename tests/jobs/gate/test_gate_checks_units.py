"""The gate's load, metadata, golden and baseline checks through `run_gate` on the toy program
(`jobs/gate/gate.py`): the load step probes the file in a child before loading it with its data file,
metadata problems are one case each, a check that raises fails under its own name, the golden
check runs each recorded request (a .pte golden on the given program, other fixtures' skipped),
the metrics and tau baselines, a runner binary in place of the reference runner, and the HF
reference built from --target in the program's dtype."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from test_gate_goldens import KEY, setup
from test_gate_run_units import PROMPTS, Bf16Toy, OtherTarget

from eagle3_check.errors import InputError
from eagle3_check.jobs.check.prompt_set import reference_json
from eagle3_check.jobs.gate.binary import BinaryGate
from eagle3_check.jobs.gate.gate import GateInputs, baseline_check, run_gate
from eagle3_check.jobs.golden.metrics import compute_metrics, format_metric_diffs, write_baseline
from eagle3_check.jobs.golden.tau_baseline import compare_tau
from eagle3_check.jobs.golden.verify import gate_goldens
from eagle3_check.judge.hf import HFReference
from eagle3_check.judge.self_ref import SelfReference
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.report.junit import JUnitCase
from eagle3_check.runners.binary.runner import ExecRunner
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import FAIL, PASS, SKIP
from eagle3_check.suites.toy import ToyProgram

NAMES = ["load", "metadata", "edge suites", "runner vs self reference", "runner vs HF reference",
         "self reference vs HF reference", "golden", "baseline"]
NOTES = [f"optional key {k} absent: not checked" for k in
         ("get_draft_vocab_size", "get_n_layers", "get_sliding_window", "get_eos_ids")]


def _inputs(tokenizer, **kw) -> GateInputs:
    base = dict(pte=None, tokenizer=tokenizer, target_dir=None, prompts=PROMPTS,
                options=RunOptions(max_new_tokens=12), suite=None)
    return GateInputs(**{**base, **kw})


def _rows(report) -> list[tuple]:
    return [(c.name, c.status, c.message) for c in report.checks]


def test_the_load_probes_the_file_in_a_child_then_loads_it_with_its_data_file(tokenizer, tmp_path, monkeypatch):
    calls = []

    def probe(path, data_path=None, meanwhile=None):
        calls.append(("probe", path, data_path))
        return None

    class Loaded(ToyProgram):  # stands in for PteBackend: the toy, loaded from the file
        def __init__(self, path, data_path):
            super().__init__()
            calls.append(("load", path, data_path))
            self.info = {"backend": "pte", "file": Path(path).name}

    monkeypatch.setattr("eagle3_check.program.pte_probe.probe_load", probe)
    monkeypatch.setattr("eagle3_check.program.pte_backend.PteBackend", Loaded)
    pte, ptd = tmp_path / "p.pte", tmp_path / "p.ptd"
    report = run_gate(_inputs(tokenizer, pte=pte, data_path=ptd))
    assert calls == [("probe", pte, ptd), ("load", pte, ptd)]
    assert report.checks[0].message == (f"loaded (backend=pte, file=p.pte; tie tolerance "
                                        f"{tolerance_for('float32').describe()}, tie budget 0.0%)")
    assert report.info["pte"] == str(pte) and report.info["file"] == "p.pte" and report.passed


def test_a_file_the_probe_refuses_is_never_loaded_here(tokenizer, tmp_path, monkeypatch):
    loaded = []
    monkeypatch.setattr("eagle3_check.program.pte_probe.probe_load", lambda path, data_path=None, meanwhile=None: "it died: SIGABRT")
    monkeypatch.setattr("eagle3_check.program.pte_backend.PteBackend", lambda *a: loaded.append(a))
    report = run_gate(_inputs(tokenizer, pte=tmp_path / "p.pte"))
    assert loaded == []
    assert _rows(report) == [("load", FAIL, "it died: SIGABRT"), *[(n, SKIP, "program did not load") for n in NAMES[1:]]]


def test_a_missing_program_file_fails_the_load_with_the_one_line_error(tokenizer, tmp_path):
    """Not probed (there is nothing to load in a child): the backend's own error names the path."""
    report = run_gate(_inputs(tokenizer, pte=tmp_path / "nope.pte"))
    load = report.checks[0]
    assert load.status == FAIL and "crashed" not in load.message and "Traceback" not in load.message
    assert load.message.startswith(f"--pte {tmp_path / 'nope.pte'} does not exist"), load.message
    assert [c.status for c in report.checks[1:]] == [SKIP] * 7


def test_metadata_problems_are_one_case_each_and_the_details_keep_the_raw_metadata(tokenizer, fixture):
    toy = ToyProgram(vocab_size=256)  # the target (and the tokenizer) name 512 ids
    report = run_gate(_inputs(tokenizer, target_dir=fixture.target_dir), toy)
    problems = ["get_vocab_size = 256 but the target vocab is 512; expected equal. Fix: export against this target, "
                "or pass the matching --target",
                "tokenizer has 512 tokens but the vocab is 256; expected tokenizer <= vocab. Fix: pass the target's "
                "own --tokenizer"]
    meta = report.check("metadata")
    assert (meta.status, meta.message) == (FAIL, "; ".join(problems))
    assert meta.cases == [JUnitCase("problem 1", FAIL, problems[0]), JUnitCase("problem 2", FAIL, problems[1])]
    assert meta.details == {"raw": toy.metadata(), "notes": NOTES, "problems": problems, "warnings": []}
    ok = run_gate(_inputs(tokenizer), ToyProgram()).check("metadata")
    assert (ok.status, ok.message, ok.details) == (PASS, "consistent (4 notes)",
                                                   {"raw": ToyProgram().metadata(), "notes": NOTES, "problems": [], "warnings": []})


def test_the_target_config_is_checked(tokenizer, fixture):
    toy = ToyProgram(vocab_size=1024)  # the tokenizer fits; the target's 512 does not match
    meta = run_gate(_inputs(tokenizer, target_dir=fixture.target_dir), toy).check("metadata")
    assert meta.message == ("get_vocab_size = 1024 but the target vocab is 512; expected equal. Fix: export against "
                            "this target, or pass the matching --target")


def test_the_compiled_method_lengths_are_checked(tokenizer):
    class ShortVerify(ToyProgram):
        def method_maxima(self) -> dict[str, int]:
            return {"target_verify": 4}  # the metadata declares verify lengths up to 8

    meta = run_gate(_inputs(tokenizer), ShortVerify()).check("metadata")
    assert (meta.status, meta.message) == (FAIL, "target_verify was compiled for lengths up to 4 but the metadata "
                                           "declares 8; expected at least that. Fix: re-export so the dynamic shapes "
                                           "cover the metadata")


def test_a_check_that_raises_fails_under_its_own_name(tokenizer, tmp_path):
    class Unreadable(ToyProgram):
        def method_maxima(self) -> dict[str, int]:
            raise RuntimeError("method table unreadable")

    report = run_gate(_inputs(tokenizer), Unreadable())
    assert report.checks[0].status == PASS and _rows(report)[1:] == [
                             ("metadata", FAIL, "crashed: RuntimeError: method table unreadable"),
                             *[(n, SKIP, "metadata invalid") for n in NAMES[2:]]]
    bad = tmp_path / "tau.json"
    bad.write_text("{not json")
    toy = ToyProgram()
    report = run_gate(_inputs(tokenizer, suite="no-such-suite", hf_reference=SelfReference(toy),
                              golden=tmp_path / "missing", baseline=bad), toy)
    assert [(c.name, c.status, c.message) for c in report.checks if c.status == FAIL] == [
        ("edge suites", FAIL, "unknown suite 'no-such-suite'; expected one of edge, acceptance, one-token, eos-bonus, "
         "eos-in-block, budget, stop-set, context, prefill-range, chunked-prefill, metadata, chain, verify-range, "
         "text-end, options, state (or a case name). Fix: run `eagle3-check check --list`"),
        ("golden", FAIL, f"golden path {tmp_path / 'missing'} does not exist; expected a golden file or a directory of "
         "them. Fix: list golden/ or record one with `eagle3-check golden record`"),
        ("baseline", FAIL, f"tau baseline {bad} is not valid JSON (line 1 column 2: Expecting property name enclosed in "
         "double quotes); expected a tau baseline in its JSON format. Fix: pass a previous gate report (--report) or "
         '{"tau": 2.1}')]


def _recorded(tmp_path, tokenizer, key=KEY):
    """A golden of the toy (prompts 'hi' and 'count') and the metrics baseline of its runs."""
    toy, path = setup(tmp_path, tokenizer, key)
    runs = gate_goldens([path], build=lambda k: (toy, tokenizer)).runs[key.stem]
    return toy, path, write_baseline(tmp_path / "metrics.json", {key.stem: compute_metrics(runs.values(), key.k)})


def test_golden_and_metrics_baseline_pass_one_case_per_request_and_per_golden(tokenizer, tmp_path):
    toy, path, baseline = _recorded(tmp_path, tokenizer)
    steps = []
    report = run_gate(_inputs(tokenizer, golden=path, baseline=baseline, fixture="toy",
                              on_step=lambda *s: steps.append(s)), toy)
    golden, base = report.check("golden"), report.check("baseline")
    assert (golden.status, golden.message) == (PASS, "2/2 golden requests identical")
    assert [(c.name, c.status, c.message) for c in golden.cases] == [
        (f"{KEY.stem} hi", PASS, "identical"), (f"{KEY.stem} count", PASS, "identical")]
    assert (base.status, base.message) == (PASS, "1/1 metric sets equal to the baseline")
    assert [(c.name, c.status, c.message) for c in base.cases] == [(KEY.stem, PASS, "identical to the baseline")]
    assert steps[-2:] == [("golden", 1, 2), ("golden", 2, 2)]


def test_a_program_that_changed_on_one_request_fails_that_case_and_the_metrics(tokenizer, tmp_path):
    _, path, baseline = _recorded(tmp_path, tokenizer)
    worse = ToyProgram(max_seq_len=128, max_prefill=64, wrong_at={24, 29, 33})  # 24: inside 'hi' only
    want = gate_goldens([path], baseline, build=lambda k: (worse, tokenizer))
    hi = "; ".join(d.message for d in want.golden_diffs)
    assert hi and all(d.prompt_id == "hi" for d in want.golden_diffs)
    report = run_gate(_inputs(tokenizer, golden=path, baseline=baseline), worse)
    golden, base = report.check("golden"), report.check("baseline")
    assert [(c.name, c.status, c.message) for c in golden.cases] == [
        (f"{KEY.stem} hi", FAIL, hi), (f"{KEY.stem} count", PASS, "identical")]
    assert golden.message == f"1 identical, 0 tie, 1 fail of 2 golden requests; first failure: {KEY.stem} hi: {hi}"
    diffs = format_metric_diffs(want.metric_diffs, baseline)
    assert str(baseline) in diffs
    assert (base.status, base.message) == (FAIL, diffs)
    assert [(c.name, c.status, c.message) for c in base.cases] == [(KEY.stem, FAIL, diffs)]


def test_every_difference_of_a_request_is_in_its_case(tokenizer, tmp_path):
    _, path, _ = _recorded(tmp_path, tokenizer)
    other = OtherTarget(max_seq_len=128, max_prefill=64)  # other tokens, so other rounds too
    want = gate_goldens([path], build=lambda k: (other, tokenizer))
    hi = [d.message for d in want.golden_diffs if d.prompt_id == "hi"]
    assert len(hi) == 2
    golden = run_gate(_inputs(tokenizer, golden=path), other).check("golden")
    assert (golden.cases[0].name, golden.cases[0].status, golden.cases[0].message) == (
        f"{KEY.stem} hi", FAIL, f"{hi[0]}; {hi[1]}")


def test_goldens_of_another_fixture_skip_and_a_pte_golden_runs_on_the_given_program(tokenizer, tmp_path):
    toy, path, _ = _recorded(tmp_path / "eager", tokenizer)
    steps = []
    report = run_gate(_inputs(tokenizer, golden=path, fixture="tiny-gemma4", on_step=lambda *s: steps.append(s)), toy)
    why = "a golden of fixture toy; this program is tiny-gemma4"
    golden = report.check("golden")
    assert golden.status == FAIL and golden.message == (  # the skip rule, and the way out
        f"no golden applies to this program (a program of fixture tiny-gemma4), 1 skipped (first: {KEY.stem}: {why}); "
        f"record one for it: `eagle3-check golden record --fixture tiny-gemma4 --dir {path.parent}`, or drop --golden")
    assert golden.cases == [JUnitCase(KEY.stem, SKIP, why)]
    assert steps[-2:] == [("golden", 1, 2), ("golden", 2, 2)]  # a skipped golden's requests count as done
    pte_key = dataclasses.replace(KEY, backend="pte")
    toy, path = setup(tmp_path / "pte", tokenizer, pte_key)
    golden = run_gate(_inputs(tokenizer, golden=path), toy).check("golden")  # no --pte: the program is given
    assert (golden.status, golden.message) == (PASS, "2/2 golden requests identical")


def test_a_tau_baseline_beside_a_golden_keeps_the_tau_rule(tokenizer, tmp_path):
    toy, path, _ = _recorded(tmp_path, tokenizer)
    base = tmp_path / "report.json"
    base.write_text(json.dumps({"tau": 99.0}))
    report = run_gate(_inputs(tokenizer, golden=path, baseline=base), toy)
    assert report.check("golden").status == PASS  # a tau report is not a metrics baseline
    status, message, details = compare_tau(base, report.tau, [4], 0.05)
    chk = report.check("baseline")
    assert (chk.status, chk.message, chk.details) == (FAIL, message, details) and status == FAIL


def test_a_tau_baseline_takes_the_given_tolerance(tokenizer, tmp_path):
    base = tmp_path / "report.json"
    base.write_text(json.dumps({"tau": 2.0}))
    inputs = _inputs(tokenizer, baseline=base, tau_tolerance=0.5)
    status, message, details = compare_tau(base, 1.6, [4], 0.5)
    chk = baseline_check(inputs, 1.6, [4])
    assert (chk.name, chk.status, chk.message, chk.details) == ("baseline", PASS, message, details) and status == PASS


def test_a_metrics_baseline_without_a_golden_names_the_fix(tokenizer, tmp_path):
    toy, _, baseline = _recorded(tmp_path, tokenizer)
    chk = run_gate(_inputs(tokenizer, baseline=baseline), toy).check("baseline")
    assert (chk.status, chk.message) == (FAIL, f"--baseline {baseline} is a metrics baseline (per golden) but no "
                                         "--golden ran; expected --golden FILE|DIR. Fix: pass --golden golden/")


def test_a_runner_binary_is_gated_in_place_of_the_reference_runner(tokenizer):
    toy = ToyProgram()
    report = run_gate(_inputs(tokenizer, runner=BinaryGate(ExecRunner("exec:/bin/true")), hf_reference=SelfReference(toy)), toy)
    why = ("a ToyProgram program with an exec runner; expected a .pte program file. Fix: pass --pte FILE (export one "
           "with `eagle3-check export -o FILE.pte`)")
    assert _rows(report)[2:] == [
        ("edge suites", SKIP, "disabled (--suite none)"),
        ("runner vs self reference", FAIL, why), ("runner vs HF reference", FAIL, why),
        ("self reference vs HF reference", SKIP, "does not involve the runner: run the gate without --runner exec:... "
         "for it"),
        ("golden", SKIP, "no --golden given"), ("baseline", SKIP, "no --baseline given")]
    assert report.info["runner"] == "exec:/bin/true" and report.tau is None


def test_a_bare_runner_binary_is_a_one_line_error_naming_the_wrapper(tokenizer):
    with pytest.raises(InputError) as e:
        run_gate(_inputs(tokenizer, runner=ExecRunner("exec:/bin/true")), ToyProgram())
    assert str(e.value) == ("GateInputs.runner is a ExecRunner; expected a runner binary's gate (jobs.gate.binary.BinaryGate). "
                            "Fix: pass runner=BinaryGate(ExecRunner(spec))")


def test_the_hf_reference_is_built_from_the_target_in_the_programs_dtype(tokenizer, fixture):
    toy = Bf16Toy()
    report = run_gate(_inputs(tokenizer, prompts=PROMPTS[:1], target_dir=fixture.target_dir), toy)
    hf = report.check("runner vs HF reference")
    assert hf.status == FAIL  # the toy is not the tiny-llama target
    run = ReferenceRunner().run(toy, tokenizer, "Hi", RunOptions(max_new_tokens=12, chain_len=4))
    scores = HFReference(fixture.target_dir, dtype=torch.bfloat16).score(run.prompt_ids, list(run.tokens))
    assert hf.details["reference"]["hi"] == reference_json(scores)
