"""`golden verify --runner exec:` on a bf16 `.pte` that no committed golden applies to (the fake
stack top on tiny-llama in bf16: every golden is float32 or another fixture's): FAIL by the skip
rule, each golden's reason listed, and one line saying how to record a golden for this program."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402
from eagle3_check.jobs.golden.file import golden_root  # noqa: E402

pytestmark = pytest.mark.pte

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_runners" / "fake_seed_runner.py"


@pytest.mark.slow  # the .pte probe child and the fake's --help: ~35 s on two busy cores
def test_golden_verify_through_a_binary_says_how_to_record_a_golden(bf16_pte_path, capsys):
    rc = main(["golden", "verify", "--pte", str(bf16_pte_path), "--runner", f"exec:{sys.executable} {FAKE}",
               "--no-baseline", "--json", str(golden_root())])
    out = json.loads(capsys.readouterr().out)
    assert rc == 1 and not out["passed"] and not out["verified"] and len(out["skipped"]) == len(
        list(golden_root().glob("*.json")))
    line = out["none_applies"]
    assert line.startswith("no golden applies to this program (a bfloat16 program of fixture tiny-llama), "), line
    assert f"`eagle3-check golden record --pte {bf16_pte_path} --fixture tiny-llama --dir {golden_root()}`" in line
    assert "drop --golden" not in line  # golden verify has no --golden
