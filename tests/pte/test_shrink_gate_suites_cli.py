"""`gate --pte` shrinks its failing edge-suite cases by default, beside its request cases, in one budget
(jobs/gate/shrink_route.py): the whole route on the exported program, its repro command replayed."""

from __future__ import annotations

import json
import shlex

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402

pytestmark = [pytest.mark.pte, pytest.mark.slow]  # the gate and a replay on the .pte: ~60 s on two busy cores

MUTANT = "eagle3_check.mutants:emit_past_max_new"


def test_the_gate_shrinks_its_failing_suite_cases_and_keeps_the_forced_ones(pte_path, tmp_path, capsys):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "count", "text": "Count from one to ten."}]}))
    report, junit = tmp_path / "report.json", tmp_path / "gate.xml"
    rc = main(["gate", "--pte", str(pte_path), "--prompts", str(prompts), "--max-new-tokens", "10", "--runner", MUTANT,
               "--suite", "acceptance", "--report", str(report), "--junit", str(junit), "--no-progress"])
    out = capsys.readouterr().out.splitlines()
    assert rc == 1
    data = json.loads(report.read_text())
    edge = next(c for c in data["checks"] if c["name"] == "edge suites")
    assert [c["status"] for c in edge["cases"]] == ["fail"] * 5  # the gate's verdicts, as they were
    shrunk = edge["details"]["shrunk"]["acceptance/unforced"]
    assert (len(shrunk["shrunk"]["prompt_ids"]), shrunk["shrunk"]["max_new_tokens"], shrunk["shrunk"]["k"]) == (21, 2, 1)
    assert "count" in next(c for c in data["checks"] if c["name"] == "runner vs self reference")["details"]["shrunk"]
    at = out.index("acceptance/full: not shrunk: its draft is forced along the case's own trajectory")
    assert out[at + 1].startswith("  kept: the whole case (")
    assert out[at + 2] == (f"  repro: eagle3-check check --pte {pte_path} --prompts {prompts} --runner {MUTANT} "
                           "--suite acceptance/full")
    xml = junit.read_text()
    assert 'name="shrunk_command"' in xml and 'name="repro_command"' in xml
    assert (tmp_path / "repro-acceptance_unforced.json").is_file() and (tmp_path / "repro-count.json").is_file()
    command = shrunk["command"]
    assert "--pte" in command and "--reference" not in command  # the suites judge against HF, as check does
    assert main(shlex.split(command)[1:] + ["--no-progress"]) == 1
    assert "length: runner emitted 3 tokens, rules fix 2" in capsys.readouterr().out
