"""`check --target DIR --dtype bfloat16` calibrates the target once (stored in the cache, named in the
report) and reads the record back on the next check; float32 and the fixtures keep the constants;
`eagle3-check calibrate` measures and prints it (issue 44 item 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from eagle3_check.cli import main

FX = Path(__file__).resolve().parents[3] / "fixtures" / "tiny-llama"


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("EAGLE3_CHECK_CACHE", str(tmp_path / "cache"))
    prompts = tmp_path / "prompts.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "a", "text": "Hello there"}, {"id": "b", "text": "Count"}]}))
    return tmp_path / "cache", prompts


def target_args(prompts: Path, dtype: str) -> list[str]:
    return ["--target", str(FX / "target"), "--draft", str(FX / "draft"), "--tokenizer", str(FX / "tokenizer.json"),
            "--prompts", str(prompts), "--dtype", dtype, "--max-new-tokens", "8"]


def test_a_target_in_bf16_is_calibrated_once_then_read_back(cache, capsys):
    root, prompts = cache
    assert main(["check", *target_args(prompts, "bfloat16"), "--json"]) in (0, 1)
    first = capsys.readouterr()
    assert "calibrating the tie tolerance on this target" in first.err
    (record,) = (root / "calibration").glob("*-bfloat16-cpu-eager.json")
    source = json.loads(first.out)["info"]["tie_source"]
    assert source.startswith("measured: calibration ") and "flips of 16 rows, 2 prompts" in source
    assert main(["check", *target_args(prompts, "bfloat16"), "--json"]) in (0, 1)
    again = capsys.readouterr()
    assert "calibrating" not in again.err and json.loads(again.out)["info"]["tie_source"] == source


def test_reference_self_in_bf16_has_no_tolerance_and_says_so(cache, capsys):
    """vs self there are no margins, so never a tie: no calibration, and the report names no tolerance
    (not the dtype's constants, as if they applied)."""
    root, prompts = cache
    assert main(["check", *target_args(prompts, "bfloat16"), "--reference", "self", "--json"]) == 0
    out = capsys.readouterr()
    report = json.loads(out.out)
    assert report["info"]["tie_source"].startswith("none: vs self") and "calibrating" not in out.err
    assert report["info"]["tie_tolerance"] == "0 ulp(bfloat16), top-4" and report["tie_budget"]["ties_allowed"] == 0
    assert not (root / "calibration").exists()


def test_float32_keeps_the_constants(cache, capsys):
    root, prompts = cache
    assert main(["check", *target_args(prompts, "float32"), "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["info"]["tie_source"].startswith("built-in constants (no flip measured in float32")
    assert not (root / "calibration").exists()


def test_calibrate_prints_the_record(cache, capsys):
    root, prompts = cache
    assert main(["calibrate", *target_args(prompts, "bfloat16")]) == 0
    out = capsys.readouterr().out
    assert "16 positions over 2 prompts, K 4" in out and "tie tolerance: " in out and "binomial bound" in out
    assert len(list((root / "calibration").glob("*.json"))) == 1


def test_a_calibrated_check_reads_the_target_once_for_key_and_provenance(cache, capsys, monkeypatch):
    """The calibration's key and the report's provenance hash the target directory once between them
    (CheckContext.target_record): on an 8B target each read is every weight file again (issue 44)."""
    import eagle3_check.report.provenance as prov

    root, prompts = cache
    seen: list[str] = []
    real = prov.file_record
    monkeypatch.setattr(prov, "file_record", lambda p: seen.append(str(p)) or real(p))
    assert main(["check", *target_args(prompts, "bfloat16"), "--json"]) in (0, 1)
    out = json.loads(capsys.readouterr().out)
    assert seen.count(str(FX / "target")) == 1, seen
    assert out["provenance"]["files"]["target"] == real(FX / "target")  # the same record, path as given
