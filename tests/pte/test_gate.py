"""`eagle3-check gate` and `export` on the good export: verdict table, JSON, JUnit, baseline."""

from __future__ import annotations

import hashlib
import json
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402

pytestmark = pytest.mark.pte


@pytest.fixture
def few_prompts(tmp_path):
    p = tmp_path / "p.json"
    p.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"},
                                         {"id": "count", "text": "Count from one to ten."},
                                         {"id": "sky", "text": "Why is the sky blue?"}]}))
    return p


def _gate(pte_path, tmp_path, prompts, *extra):
    report, junit = tmp_path / "report.json", tmp_path / "gate.xml"
    argv = ["gate", "--pte", str(pte_path), "--prompts", str(prompts), "--max-new-tokens", "24",
            "--report", str(report), "--junit", str(junit), "--suite", "none", *extra]
    return main(argv), report, junit


def test_gate_passes_on_the_good_export(pte_path, tmp_path, few_prompts, capsys):
    rc, report, junit = _gate(pte_path, tmp_path, few_prompts)
    out = capsys.readouterr().out
    assert rc == 0 and "GATE: PASS" in out, out
    data = json.loads(report.read_text())
    status = {c["name"]: c["status"] for c in data["checks"]}
    assert status["load"] == status["metadata"] == "pass"
    assert status["runner vs self reference"] == status["runner vs HF reference"] == "pass"
    assert status["self reference vs HF reference"] == "pass"
    assert data["info"]["kernels"] == "xnnpack" and data["info"]["fixture"] == "tiny-llama"
    prov = data["provenance"]  # what reproduces the report (issue 16 part 6)
    assert prov["files"]["pte"]["sha256"] == hashlib.sha256(pte_path.read_bytes()).hexdigest()
    assert prov["files"]["prompts"]["sha256"] == hashlib.sha256(few_prompts.read_bytes()).hexdigest()
    assert prov["run_options"]["max_new_tokens"] == 24 and "executorch" in prov["versions"]
    hf_refs = next(c for c in data["checks"] if c["name"] == "runner vs HF reference")["details"]["reference"]
    assert sorted(hf_refs) == ["count", "hi", "sky"] and all(r["tokens"] for r in hf_refs.values())
    root = ET.parse(junit).getroot()
    assert root.tag == "testsuites" and root.get("failures") == "0"
    hf = next(s for s in root if s.get("name") == "runner vs HF reference")
    assert [tc.get("name") for tc in hf] == ["hi", "count", "sky"]


def test_gate_baseline_passes_at_equal_tau_and_fails_above(pte_path, tmp_path, few_prompts, capsys):
    base = tmp_path / "base.json"
    base.write_text(json.dumps({"tau": 1.0}))
    rc, report, _ = _gate(pte_path, tmp_path, few_prompts, "--baseline", str(base))
    assert rc == 0
    tau = json.loads(report.read_text())["tau"]
    base.write_text(json.dumps({"tau": tau + 0.5}))
    rc, report, _ = _gate(pte_path, tmp_path, few_prompts, "--baseline", str(base))
    out = capsys.readouterr().out
    assert rc == 1 and f"< baseline {tau + 0.5:.3f}" in out


def test_export_from_pte_omits_keys_fast(pte_path, tmp_path, capsys):
    out = tmp_path / "no-chain.pte"
    rc = main(["export", "--from-pte", str(pte_path), "--omit-metadata", "get_chain_len", "-o", str(out)])
    assert rc == 0 and out.is_file()
    rc = main(["export", "--from-pte", str(pte_path), "--omit-metadata", "get_colour", "-o", str(out)])
    assert rc == 2 and "--omit-metadata get_colour" in capsys.readouterr().err


def test_run_and_check_accept_pte(pte_path, capsys, tmp_path, few_prompts):
    assert main(["run", "--pte", str(pte_path), "--prompt", "Hi", "--max-new-tokens", "6"]) == 0
    assert "tokens: 6" in capsys.readouterr().out
    assert main(["check", "--pte", str(pte_path), "--prompts", str(few_prompts), "--max-new-tokens", "12",
                 "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["passed"] and data["info"]["backend"] == "pte"


def test_edge_suites_pass_on_the_pte(pte_program, tokenizer, hf_reference, fixture):
    pytest.importorskip("eagle3_check.suites", reason="edge-suite registry (issue 4) not on this branch yet")
    from eagle3_check.jobs.gate.gate import GateInputs, edge_suites_check

    inputs = GateInputs(None, tokenizer, fixture.target_dir, fixture.prompts())
    chk = edge_suites_check(pte_program, inputs, hf_reference)
    assert chk.status == "pass", chk.message


def test_gate_verifies_a_golden_on_the_pte(pte_path, tmp_path, few_prompts, program, tokenizer, hf_reference,
                                           capsys):
    from eagle3_check.fixtures.registry import load_prompts
    from eagle3_check.jobs.golden.file import GoldenKey, record_golden, save_golden
    from eagle3_check.judge.tolerance import tolerance_for

    key = GoldenKey("tiny-llama", "pte", "cpu", "float32", 4, 16)
    golden = record_golden(program, tokenizer, hf_reference, load_prompts(few_prompts), key, tolerance_for("float32"))
    path = save_golden(golden, tmp_path / "golden")
    rc, report, _ = _gate(pte_path, tmp_path, few_prompts, "--golden", str(path))
    data = json.loads(report.read_text())
    chk = next(c for c in data["checks"] if c["name"] == "golden")
    assert rc == 0 and chk["status"] == "pass" and len(chk["cases"]) == 3, chk
    golden.prompts[1].tokens[2] += 1  # a drifted golden must fail with the first differing token
    path.write_text(json.dumps(golden.to_json()))
    rc, report, _ = _gate(pte_path, tmp_path, few_prompts, "--golden", str(path))
    chk = next(c for c in json.loads(report.read_text())["checks"] if c["name"] == "golden")
    assert rc == 1 and chk["status"] == "fail" and "count" in chk["message"], chk


def test_gate_all_k_runs_every_chain_length_of_the_export(pte_path, tmp_path, capsys):
    one = tmp_path / "one.json"
    one.write_text(json.dumps({"prompts": [{"id": "count", "text": "Count from one to ten."}]}))
    rc, report, junit = _gate(pte_path, tmp_path, one, "--all-k")
    data = json.loads(report.read_text())
    chk = next(c for c in data["checks"] if c["name"] == "runner vs HF reference")
    assert rc == 0 and [c["name"] for c in chk["cases"]] == [f"count K={k}" for k in range(1, 8)]
