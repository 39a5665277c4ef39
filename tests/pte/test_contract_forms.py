"""The seed's contract as it evolved (issue 12) on real `.pte` exports of the tiny fixture: both
target_verify forms, K at runtime from the method's own bounds, bfloat16 programs and the
tolerance they are judged with, and weights in an external `.ptd` data file."""

from __future__ import annotations

import json
import shutil

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402
from eagle3_check.errors import InputError, OptionError  # noqa: E402
from eagle3_check.jobs.check.prompt_set import run_check  # noqa: E402
from eagle3_check.judge.tolerance import default_budget, tolerance_for  # noqa: E402
from eagle3_check.program.contract import VERIFY_KV_WINDOW, VERIFY_PLAIN, read_metadata  # noqa: E402
from eagle3_check.program.pte_backend import PteBackend  # noqa: E402
from eagle3_check.program.sidecar import data_path_for  # noqa: E402
from eagle3_check.runners.loop import ReferenceRunner  # noqa: E402
from eagle3_check.runners.options import RunOptions  # noqa: E402

pytestmark = pytest.mark.pte


@pytest.fixture(scope="module")
def kvwin_program(kvwin_pte_path) -> PteBackend:
    return PteBackend(kvwin_pte_path)


@pytest.fixture
def few_prompts(tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"},
                                         {"id": "count", "text": "Count from one to ten."},
                                         {"id": "sky", "text": "Why is the sky blue?"}]}))
    return p


def _gate(pte, tmp_path, prompts, *extra):
    report = tmp_path / "report.json"
    argv = ["gate", "--pte", str(pte), "--prompts", str(prompts), "--max-new-tokens", "24",
            "--report", str(report), "--suite", "none", *extra]
    return main(argv), json.loads(report.read_text())


# 1. both target_verify forms


def test_each_form_is_detected_from_the_method_inputs(pte_program, kvwin_program):
    assert pte_program.verify_form == VERIFY_PLAIN and pte_program.info["target_verify"] == VERIFY_PLAIN
    assert kvwin_program.verify_form == VERIFY_KV_WINDOW and kvwin_program.info["target_verify"] == VERIFY_KV_WINDOW
    assert kvwin_program._program.metadata("target_verify").num_inputs() == 3


def test_both_forms_are_lossless_against_the_hf_reference(pte_program, kvwin_program, tokenizer, hf_reference, fixture):
    for prog in (pte_program, kvwin_program):
        report = run_check(prog, tokenizer, hf_reference, fixture.prompts()[:6], RunOptions(max_new_tokens=40),
                           tolerance_for("float32"))
        assert report.passed, (prog.verify_form, [o.verdict.message for o in report.outcomes if o.verdict.status == "fail"])


def test_gate_passes_the_kv_window_export_and_names_its_form(kvwin_pte_path, tmp_path, few_prompts, capsys):
    rc, data = _gate(kvwin_pte_path, tmp_path, few_prompts)
    out = capsys.readouterr().out
    assert rc == 0 and "GATE: PASS" in out and "target_verify=kv_window" in out, out
    assert data["info"]["target_verify"] == VERIFY_KV_WINDOW
    assert data["info"]["k_range"] == [1, 7] and "input bounds" in data["info"]["k_source"]


def test_check_table_and_json_name_the_form(kvwin_pte_path, capsys):
    argv = ["check", "--pte", str(kvwin_pte_path), "--max-new-tokens", "8", "--no-progress"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "target_verify kv_window" in out and "K range [1, 7] from target_verify's own input bounds" in out, out
    assert main([*argv, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)["info"]
    assert (info["target_verify"], info["dtype"], info["k_range"]) == (VERIFY_KV_WINDOW, "float32", [1, 7])


# 2. K at runtime from the method's own bounds


def test_kv_window_export_has_no_verify_metadata_and_k_comes_from_its_inputs(kvwin_program):
    md = read_metadata(kvwin_program.metadata())
    assert md.min_verify_len is None and md.max_verify_len is None
    assert md.k_range == (1, 7) and "ExecuTorch method meta" in md.k_source


def test_two_input_form_without_verify_metadata_runs_only_its_chain_len(pte_path, tmp_path, tokenizer):
    from eagle3_check.program.pte_edit import omit_metadata

    bare = tmp_path / "no-verify-range.pte"
    omit_metadata(pte_path, bare, ["get_min_verify_len", "get_max_verify_len"])
    prog = PteBackend(bare)
    md = read_metadata(prog.metadata())
    assert md.k_range == (4, 4) and "2-input form: C = K + 1 static" in md.k_source
    with pytest.raises(OptionError, match=r"K in \[4, 4\] \(the verify window range minus one, from target_verify's own input bounds"):
        ReferenceRunner().run(prog, tokenizer, "Hi", RunOptions(max_new_tokens=4, chain_len=5))


@pytest.mark.parametrize("k", range(1, 8), ids=[f"k{k}" for k in range(1, 8)])
def test_every_k_in_the_method_bounds_runs_and_equals_eager(kvwin_program, program, tokenizer, fixture, k):
    runner, opts = ReferenceRunner(), RunOptions(max_new_tokens=32, chain_len=k)
    p = fixture.prompts()[1]
    a, b = runner.run(program, tokenizer, p.text, opts), runner.run(kvwin_program, tokenizer, p.text, opts)
    assert (b.tokens, b.accepted, b.stop_reason) == (a.tokens, a.accepted, a.stop_reason)


def test_k_outside_the_method_bounds_is_one_line_naming_range_and_source(kvwin_pte_path, capsys):
    rc = main(["run", "--pte", str(kvwin_pte_path), "--prompt", "Hi", "-k", "8", "--max-new-tokens", "4"])
    err = capsys.readouterr().err.strip()
    assert rc != 0 and len(err.splitlines()) == 1, err
    assert "chain length K = 8" in err and "K in [1, 7] (the verify window range minus one, from target_verify's own input bounds" in err


# 3. bfloat16 programs


def test_bf16_export_reads_its_dtype_and_gates_with_the_bf16_tolerance(bf16_pte_path, tmp_path, few_prompts, capsys):
    prog = PteBackend(bf16_pte_path)
    assert prog.dtype == "bfloat16" and prog.info["dtype"] == "bfloat16"
    rc, data = _gate(bf16_pte_path, tmp_path, few_prompts)
    out = capsys.readouterr().out
    assert f"tie tolerance {tolerance_for('bfloat16').describe()}" in out, out
    assert data["info"]["dtype"] == "bfloat16" and data["info"]["tie_budget"] == pytest.approx(default_budget("bfloat16"))
    hf = next(c for c in data["checks"] if c["name"] == "runner vs HF reference")
    counted = hf["details"]
    assert {"tie", "tie_positions", "ties_allowed"} <= counted.keys()  # ties counted, against the bf16 budget
    assert rc == 0 and "GATE: PASS" in out, out


def test_fp32_export_keeps_the_fp32_tolerance(pte_path, tmp_path, few_prompts, capsys):
    rc, data = _gate(pte_path, tmp_path, few_prompts)
    assert rc == 0 and data["info"]["dtype"] == "float32" and data["info"]["tie_budget"] == 0.0
    assert data["info"]["tie_tolerance"] == tolerance_for("float32").describe()


# 4. external data (.ptd)


def test_ptd_export_runs_with_its_data_file_and_equals_the_inline_export(ptd_pte_path, pte_path, pte_program,
                                                                          tokenizer, fixture):
    ptd = data_path_for(ptd_pte_path)
    # the constants outside the XNNPACK delegates (embeddings, d2t) left the .pte for the .ptd
    assert ptd.is_file() and ptd.stat().st_size > 0 and ptd_pte_path.stat().st_size < pte_path.stat().st_size
    prog = PteBackend(ptd_pte_path, ptd)
    assert prog.info["data_path"] == str(ptd)
    runner, opts = ReferenceRunner(), RunOptions(max_new_tokens=24)
    for p in fixture.prompts()[:3]:
        assert runner.run(prog, tokenizer, p.text, opts).tokens == runner.run(pte_program, tokenizer, p.text, opts).tokens


def test_gate_takes_data_path(ptd_pte_path, tmp_path, few_prompts):
    rc, data = _gate(ptd_pte_path, tmp_path, few_prompts, "--data-path", str(data_path_for(ptd_pte_path)))
    assert rc == 0 and data["info"]["data_path"] == str(data_path_for(ptd_pte_path))


@pytest.mark.parametrize("case", ["not-given", "missing", "not-a-ptd", "other-export"])
def test_missing_or_mismatched_ptd_is_one_clear_error(ptd_pte_path, pte_path, tmp_path, case):
    other = tmp_path / "other.ptd"
    if case == "not-a-ptd":
        shutil.copy(pte_path, other)  # a .pte where the .ptd belongs
    elif case == "other-export":
        other.write_bytes(data_path_for(ptd_pte_path).read_bytes()[:4096])  # a cut-short data file
    data = {"not-given": None, "missing": tmp_path / "nope.ptd"}.get(case, other)
    named = {"not-given": "pass --data-path", "missing": "does not exist", "not-a-ptd": "not an ExecuTorch data file",
             "other-export": "--data-path"}[case]
    with pytest.raises(InputError, match=named) as e:
        PteBackend(ptd_pte_path, data)
    assert "\n" not in str(e.value)


def test_data_path_without_pte_is_refused_before_loading(tmp_path, capsys):
    ptd = tmp_path / "w.ptd"
    ptd.write_bytes(b"x")
    assert main(["run", "--fixture", "tiny-llama", "--prompt", "Hi", "--data-path", str(ptd)]) == 2
    err = capsys.readouterr().err
    assert f"--data-path {ptd} without --pte" in err and len(err.strip().splitlines()) == 1, err


def test_inline_program_with_k_outside_metadata_range_still_names_the_metadata(pte_program, tokenizer):
    with pytest.raises(OptionError, match=r"K in \[1, 7\] \(the verify window range minus one, from the program's verify range metadata"):
        ReferenceRunner().run(pte_program, tokenizer, "Hi", RunOptions(max_new_tokens=4, chain_len=8))
