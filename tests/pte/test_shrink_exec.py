"""`check --runner exec:... --shrink`: a runner binary's failing request shrunk (jobs/check/shrink.py),
through the fake seed runner; each probe starts the binary once (slow: about 5 s a probe on 2 cores)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402

pytestmark = [pytest.mark.pte, pytest.mark.slow]

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_runners" / "fake_seed_runner.py"


def test_a_binary_that_emits_past_max_new_shrinks_to_the_frame_as_text(pte_path, tmp_path, capsys):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "count", "text": "Count from one to ten."}]}))
    runner = f"exec:{sys.executable} {FAKE} --fake_bug=extra-token --fake_ids=true"
    rc = main(["check", "--pte", str(pte_path), "--prompts", str(prompts), "--max-new-tokens", "4", "--runner", runner,
               "--shrink", "--shrink-budget", "600", "--shrink-dir", str(tmp_path), "--no-progress", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    shrunk = data["requests"][0]["shrunk"]
    assert shrunk["complete"] and shrunk["prompt_text"] == ""  # a binary takes text: the template's frame alone
    assert (shrunk["shrunk"]["max_new_tokens"], shrunk["shrunk"]["k"]) == (1, 1)
    assert shrunk["failure"]["kind"] == shrunk["original_failure"]["kind"]
    repro = json.loads((tmp_path / "repro-count.json").read_text())
    assert "--prompt ''" in repro["command"] and runner in repro["command"]
