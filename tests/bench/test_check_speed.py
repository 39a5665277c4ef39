"""bench/check_speed.py on the tiny fixture (CPU): both scoring paths in one process, every phase
timed, the reports asserted identical, the packed scores those of one forward a request."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def check_speed(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import check_speed

    yield check_speed
    sys.modules.pop("check_speed", None)


@pytest.mark.slow
def test_phases_and_the_same_reports(tmp_path, check_speed, capsys):
    out = tmp_path / "speed.json"
    assert check_speed.main(["--fixture", "tiny-llama", "--max-new-tokens", "6", "--out", str(out)]) == 0
    got = json.loads(out.read_text())
    assert got["reports_identical"] and got["packed_identical"] and got["threads"] >= 1
    assert set(got["phases"]) == {"imports", "load", "check (previous)", "check (current)",
                                  "reference (one a forward)", "reference (packed)", "health"}
    for name in ("check (previous)", "check (current)"):
        phase = got["phases"][name]
        assert phase["runner"] > 0 and phase["reference"] > 0 and phase["wall"] >= phase["runner"]
    assert "load average" in got["load_start"] and "reports identical (times out): True" in capsys.readouterr().out
