"""`eagle3-check golden record | verify | baseline` end to end on the default fixture, in a tmp dir."""

from __future__ import annotations

import json

import pytest

from eagle3_check.cli import main

STEM = "tiny-llama__eager__cpu__float32__k2__n6"


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    d = tmp_path_factory.mktemp("golden")
    rc = main(["golden", "record", "--dir", str(d), "-k", "2", "--max-new-tokens", "6", "--only", "hi,capital",
               "--no-progress"])
    assert rc == 0
    return d


def test_record_writes_a_file_named_by_every_parameter(recorded, capsys):
    data = json.loads((recorded / f"{STEM}.json").read_text())
    assert [p["prompt_id"] for p in data["prompts"]] == ["hi", "capital"]
    assert data["key"] == {"fixture": "tiny-llama", "backend": "eager", "device": "cpu", "dtype": "float32",
                           "k": 2, "max_new": 6}
    assert all(len(p["tokens"]) == 6 and p["min_margin"] >= data["tie_tolerance"] for p in data["prompts"])


def test_record_refuses_to_overwrite_without_force(recorded, capsys):
    rc = main(["golden", "record", "--dir", str(recorded), "-k", "2", "--max-new-tokens", "6", "--only", "hi"])
    err = capsys.readouterr().err
    assert rc == 2 and f"error: golden {recorded / STEM}.json already exists" in err and "--force" in err


@pytest.mark.parametrize("argv,match", [
    (["--only", "nope"], "error: --only nope; expected prompt ids of the set"),
    (["--max-seq-len", "64"], "error: --max-seq-len for a golden"),
], ids=["unknown-prompt", "shape-override"])
def test_record_refuses_bad_requests_in_one_line(tmp_path, capsys, argv, match):
    rc = main(["golden", "record", "--dir", str(tmp_path), "--max-new-tokens", "4", *argv])
    err = capsys.readouterr().err
    assert rc == 2 and match in err and len(err.strip().splitlines()) == 1


def test_verify_baseline_and_a_tampered_golden(recorded, tmp_path, capsys):
    baseline = tmp_path / "metrics.json"
    assert main(["golden", "baseline", str(recorded), "--baseline", str(baseline), "--no-progress"]) == 0
    assert STEM in json.loads(baseline.read_text())["entries"]
    capsys.readouterr()
    assert main(["golden", "verify", str(recorded), "--baseline", str(baseline), "--no-progress"]) == 0
    assert "verdict: PASS" in capsys.readouterr().out

    path = recorded / f"{STEM}.json"
    data = json.loads(path.read_text())
    data["prompts"][1]["tokens"][3] += 1
    tampered = tmp_path / path.name
    tampered.write_text(json.dumps(data))
    assert main(["golden", "verify", str(tampered), "--no-baseline", "--json", "--no-progress"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["passed"] is False and out["metric_diffs"] == []
    (d,) = out["golden_diffs"]
    assert (d["prompt_id"], d["field"], d["index"], d["want"]) == ("capital", "tokens", 3, d["got"] + 1)
    assert "token 3 differs" in d["message"] and "reference margin there" in d["message"]
