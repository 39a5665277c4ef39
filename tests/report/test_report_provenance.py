"""Reports carry what reproduces them (issue 16 part 6): the run options, package versions, the
sha256 of every input file, the program spec and the reference's tokens and margins."""

from __future__ import annotations

import hashlib
import importlib.util
import json

import pytest

from eagle3_check.cli import main
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.gate.gate import GateInputs, run_gate
from eagle3_check.report.provenance import file_record, versions
from eagle3_check.runners.options import RunOptions


def test_file_and_directory_hashes(tmp_path):
    f = tmp_path / "d" / "a.json"
    f.parent.mkdir()
    f.write_bytes(b"{}")
    assert file_record(f) == {"path": str(f), "sha256": hashlib.sha256(b"{}").hexdigest()}
    d1 = file_record(f.parent)
    (f.parent / "b.bin").write_bytes(b"x")
    d2 = file_record(f.parent)
    assert d1["files"] == 1 and d2["files"] == 2 and d1["sha256"] != d2["sha256"]
    assert d2 == file_record(f.parent)  # deterministic
    assert file_record(tmp_path / "nope")["missing"] is True


def test_versions_name_the_packages_that_shape_the_tokens():
    v = versions()
    assert {"python", "eagle3_check", "torch", "transformers", "tokenizers"} <= set(v)
    assert ("executorch" in v) == (importlib.util.find_spec("executorch") is not None)


@pytest.fixture(scope="module")
def check_json(tmp_path_factory):
    prompts = tmp_path_factory.mktemp("p") / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}, {"id": "sky", "text": "Why is the sky blue?"}]}))
    return prompts


def test_check_json_carries_options_versions_hashes_spec_and_reference_tokens(check_json, capsys):
    assert main(["check", "--fixture", "tiny-llama", "--prompts", str(check_json), "--max-new-tokens", "6", "-k", "3", "--json",
                 "--no-progress"]) == 0
    data = json.loads(capsys.readouterr().out)
    prov = data["provenance"]
    assert prov["options"]["max_new_tokens"] == 6 and prov["options"]["chain_len"] == 3
    assert prov["run_options"]["max_new_tokens"] == 6 and prov["run_options"]["stop_ids"] == [1, 50, 106]
    assert prov["versions"]["torch"] and prov["versions"]["transformers"]
    assert prov["files"]["prompts"]["sha256"] == hashlib.sha256(check_json.read_bytes()).hexdigest()
    for role in ("fixture target", "fixture draft", "fixture tokenizer", "fixture card"):
        assert len(prov["files"][role]["sha256"]) == 64, role
    assert data["info"]["program"]["max_seq_len"] == 256 and data["info"]["program"]["chain_len"] == 4
    for req in data["requests"]:
        tokens, ref = req["run"]["tokens"], req["reference"]
        assert req["verdict"]["status"] == "pass"
        assert ref["tokens"][:len(tokens)] == tokens and len(ref["tokens"]) == len(tokens) + 1  # + the next one
        assert len(ref["margins"]) == len(ref["tokens"]) and all(m > 0 for m in ref["margins"])


def test_gate_request_checks_carry_each_reference_s_tokens(program, tokenizer, fixture, hf_reference):
    report = run_gate(GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir,
                                 prompts=[Prompt("hi", "Hi")], options=RunOptions(max_new_tokens=5), suite=None,
                                 hf_reference=hf_reference, fixture=fixture.name), program=program)
    own = report.check("runner vs self reference").details["reference"]["hi"]
    hf = report.check("runner vs HF reference").details["reference"]["hi"]
    assert own["tokens"] == hf["tokens"] and len(own["tokens"]) == 6  # 5 emitted + the next one
    assert own["margins"] == [None] * 6 and all(m > 0 for m in hf["margins"])  # self: no logits
    json.dumps(report.to_json())  # JSON-serialisable as written to --report


def test_golden_verify_json_carries_the_golden_s_hash(capsys):
    from eagle3_check.jobs.golden.file import golden_root

    path = golden_root() / "tiny-llama__eager__cpu__float32__k2__n48.json"
    assert main(["golden", "verify", str(path), "--no-baseline", "--json", "--no-progress"]) == 0
    prov = json.loads(capsys.readouterr().out)["provenance"]
    assert prov["files"]["golden"]["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
    assert prov["options"]["no_baseline"] is True and "torch" in prov["versions"]
