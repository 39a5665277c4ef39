"""The seed's out-of-bounds reseed, shrunk through a runner binary (issue 33): the fake stack-top
runner (fixtures/fake_runners/, `--fake_bug=oob-reseed`: after the last verify it reseeds the draft
before checking the room left and writes draft position max_seq_len) on the issue-28 spec
(max_seq_len 48, prefill [4, 47], K 4) with the prompt of `options/trailing-space` (L 32).

The smallest request is the chat template's frame alone (prompt text '', L 21) with the 27 new
tokens that bring the run to its last round (21 + 27 = 48); K 3 and below never reach past the
end. Each probe starts the fake (a Python process that loads torch and executorch): slow.
"""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402
from eagle3_check.shrink.repro import load_repro  # noqa: E402

pytestmark = [pytest.mark.pte, pytest.mark.slow]

FAKE = Path(__file__).resolve().parents[2] / "fixtures" / "fake_runners" / "fake_seed_runner.py"
RUNNER = f"exec:{sys.executable} {FAKE} --fake_bug=oob-reseed"
PROMPT = "Count from one to ten.  "  # options/trailing-space: L 32 under the template


def test_the_oob_reseed_shrinks_to_its_minimal_request_and_the_repro_replays(small_kvwin_pte_path, tmp_path, capsys):
    rc = main(["check", "--pte", str(small_kvwin_pte_path), "--runner", RUNNER, "--prompt", PROMPT, "-k", "4",
               "--shrink", "--shrink-budget", "900", "--shrink-dir", str(tmp_path), "--no-progress", "--json"])
    data = json.loads(capsys.readouterr().out)
    assert rc == 1
    request = data["requests"][0]
    assert "Index 48 is out of bounds" in request["verdict"]["message"]
    assert "reseeded past max_seq_len 48 after the last verify" in request["verdict"]["message"]
    shrunk = request["shrunk"]
    assert shrunk["complete"] and shrunk["failure"]["kind"] == shrunk["original_failure"]["kind"]
    assert "Index # is out of bounds" in shrunk["failure"]["kind"]  # the binary's own error, not any exit 1
    req = shrunk["shrunk"]
    assert (len(shrunk["original"]["prompt_ids"]), shrunk["original"]["max_new_tokens"]) == (32, 64)
    assert (len(req["prompt_ids"]), req["max_new_tokens"], req["k"]) == (21, 27, 4)
    assert shrunk["prompt_text"] == "" and shrunk["kept"] == ["program spec (a runner binary runs the given .pte)"]
    repro = load_repro(tmp_path / "repro-prompt.json")
    assert RUNNER in repro.command and "--prompt ''" in repro.command
    assert main(shlex.split(repro.command)[1:] + ["--no-progress", "--json"]) == 1  # the command replays it
    again = json.loads(capsys.readouterr().out)["requests"][0]["verdict"]["message"]
    assert "Index 48 is out of bounds" in again and "reseeded past max_seq_len 48" in again


def test_a_binarys_gate_shrinks_its_failing_request_cases(pte_path, tmp_path, capsys):
    """`gate --runner exec:...` (shrinking on by default): the fake's extra-token bug (one token past
    max new tokens) fails both request checks; the case is shrunk once, against the self reference,
    to the template's frame as text, max new tokens 1 and K 1, and its repro replays it."""
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "count", "text": "Count from one to ten."}]}))
    runner = f"exec:{sys.executable} {FAKE} --fake_bug=extra-token --fake_ids=true"
    report = tmp_path / "report.json"
    rc = main(["gate", "--pte", str(pte_path), "--prompts", str(prompts), "--max-new-tokens", "4", "--runner", runner,
               "--suite", "none", "--report", str(report), "--shrink-budget", "900", "--no-progress"])
    printed = capsys.readouterr().out
    assert rc == 1
    data = json.loads(report.read_text())
    vs_self = next(c for c in data["checks"] if c["name"] == "runner vs self reference")
    shrunk = vs_self["details"]["shrunk"]["count"]
    assert shrunk["prompt_text"] == "" and (shrunk["shrunk"]["max_new_tokens"], shrunk["shrunk"]["k"]) == (1, 1)
    assert "kept: program spec" in printed and printed.count("shrunk 'count'") == 1
    repro = load_repro(tmp_path / "repro-count.json")
    assert "--reference self" in repro.command and runner in repro.command
    assert main(shlex.split(repro.command)[1:] + ["--no-progress"]) == 1
    assert "length" in capsys.readouterr().out
