"""`check --aoti`, `gate --aoti` and `golden verify --aoti` on the CPU package (`--device cpu`): the AOTI
program through the same jobs as a `.pte`, judged against HF, its goldens and the gate's checks."""

from __future__ import annotations

import json

import pytest

from eagle3_check.cli import main

# slow: the package's compile (C++, three models) costs 3 to 6 minutes of one core on a clean clone, past
# make check's 8 minutes on CI (docs/contributing.md); `make slow` or `pytest -m aoti` runs them. One work
# unit under -n 2 --dist loadgroup: one worker compiles the package (tests/suite_schedule.py).
pytestmark = [pytest.mark.aoti, pytest.mark.slow, pytest.mark.shared("aoti-tiny-llama")]


def test_check_aoti_passes_identical_against_hf(aoti_path, capsys):
    rc = main(["check", "--aoti", str(aoti_path), "--device", "cpu", "--max-new-tokens", "24", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["passed"], out
    assert out["info"]["backend"] == "aoti" and out["info"]["fixture"] == "tiny-llama"
    assert out["counts"]["tie"] == 0 and out["counts"]["identical"] == out["counts"]["requests"]


def test_golden_verify_aoti_runs_its_fixtures_goldens(aoti_path, capsys):
    rc = main(["golden", "verify", "--aoti", str(aoti_path), "--device", "cpu", "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0, out
    ran = "goldens: 2 (tiny-llama__eager__cpu__float32__k2__n48, tiny-llama__eager__cpu__float32__k4__n48)"
    assert out.startswith(ran) and "golden: identical" in out and "verdict: PASS" in out, out


def test_gate_aoti_passes(aoti_path, tmp_path, capsys):
    report = tmp_path / "gate.json"
    rc = main(["gate", "--aoti", str(aoti_path), "--device", "cpu", "--suite", "none", "--report", str(report),
               "--no-progress", "--max-new-tokens", "24"])
    out = capsys.readouterr().out
    data = json.loads(report.read_text())
    assert rc == 0, out
    assert {c["name"]: c["status"] for c in data["checks"]}["runner vs HF reference"] == "pass"
    assert data["info"]["backend"] == "aoti" and f"({aoti_path})" in out


def test_device_other_than_the_packages_is_refused(aoti_path, capsys):
    rc = main(["check", "--aoti", str(aoti_path), "--device", "cuda"])
    err = capsys.readouterr().err
    assert rc == 2 and len(err.strip().splitlines()) == 1, err
