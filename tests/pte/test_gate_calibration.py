"""`gate` of a bf16 `.pte` whose target the constants were not measured on (issue 44 item 2): the target is
calibrated on first use through its calibration twin (the target lowered with XNNPACK as the program was:
jobs/common/calibrate.py's `pte_calibration`, the function `check --pte` reaches through
CheckContext.calibration), stored in the cache under the xnnpack kernels, named in the load check's
tie budget source, and read back on the next gate. The target: tiny-llama's copied to a directory of its
own (`--target`), so no fixture's constants apply. The twin's export takes about a minute on two idle cores
(7 minutes under a load of 10)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from eagle3_check.cli import main

pytestmark = [pytest.mark.pte, pytest.mark.slow]

FX = Path(__file__).resolve().parents[2] / "fixtures" / "tiny-llama"
PROMPTS = {"prompts": [{"id": "soup", "text": "How do I make a simple vegetable soup?"},
                       {"id": "sky", "text": "Explain why the sky is blue in words a child would understand."}]}


def test_gate_calibrates_a_user_target_s_bf16_pte_once(bf16_pte_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EAGLE3_CHECK_CACHE", str(tmp_path / "cache"))
    shutil.copytree(FX / "target", tmp_path / "target")
    (tmp_path / "p.json").write_text(json.dumps(PROMPTS))
    argv = ["gate", "--pte", str(bf16_pte_path), "--target", str(tmp_path / "target"), "--tokenizer",
            str(FX / "tokenizer.json"), "--prompts", str(tmp_path / "p.json"), "--suite", "none",
            "--max-new-tokens", "8", "--report", str(tmp_path / "r.json"), "--json", "--no-progress"]
    assert main(argv) == 0
    first = capsys.readouterr()
    assert "calibrating the tie tolerance on this target" in first.err and "on its .pte twin" in first.err
    source = json.loads(first.out)["info"]["tie_budget_source"]
    assert source.startswith("measured: calibration ") and "-bfloat16-cpu-xnnpack:" in source, source
    (record,) = (tmp_path / "cache" / "calibration").glob("*-bfloat16-cpu-xnnpack.json")
    stamp = record.stat().st_mtime_ns
    assert main(argv) == 0
    again = capsys.readouterr()
    assert "calibrating" not in again.err and record.stat().st_mtime_ns == stamp
    assert json.loads(again.out)["info"]["tie_budget_source"] == source


def test_gate_of_the_fixture_s_own_pte_keeps_the_constants(bf16_pte_path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EAGLE3_CHECK_CACHE", str(tmp_path / "cache"))
    assert main(["gate", "--pte", str(bf16_pte_path), "--suite", "none", "--max-new-tokens", "4",
                 "--report", str(tmp_path / "r.json"), "--json", "--no-progress"]) in (0, 1)
    out = capsys.readouterr()
    assert "calibrating" not in out.err
    assert json.loads(out.out)["info"]["tie_budget_source"].startswith("built-in constants")
    assert not (tmp_path / "cache" / "calibration").exists()
