"""`gate` shrinks its failing request cases by default (jobs/gate/shrink.py): a repro file beside
the report, the command in the JUnit case, the gate's own verdicts untouched; `--no-shrink` is off."""

from __future__ import annotations

import json
import shlex

import pytest

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402

pytestmark = pytest.mark.pte

MUTANT = "eagle3_check.mutants:emit_past_max_new"


def _gate(pte_path, tmp_path, *extra):
    tmp_path.mkdir(exist_ok=True)
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "count", "text": "Count from one to ten."}]}))
    out = tmp_path / "out"
    out.mkdir(exist_ok=True)
    report, junit = out / "report.json", out / "gate.xml"
    rc = main(["gate", "--pte", str(pte_path), "--prompts", str(prompts), "--max-new-tokens", "10", "--runner", MUTANT,
               "--report", str(report), "--junit", str(junit), "--suite", "none", "--no-progress", *extra])
    return rc, json.loads(report.read_text()), junit.read_text(), out


def test_the_gate_shrinks_a_failing_request_by_default(pte_path, tmp_path, capsys):
    rc, data, xml, out = _gate(pte_path, tmp_path)
    printed = capsys.readouterr().out
    assert rc == 1
    vs_self = next(c for c in data["checks"] if c["name"] == "runner vs self reference")
    shrunk = vs_self["details"]["shrunk"]["count"]
    assert (len(shrunk["shrunk"]["prompt_ids"]), shrunk["shrunk"]["max_new_tokens"], shrunk["shrunk"]["k"]) == (21, 2, 1)
    assert "runner vs HF reference" in {c["name"] for c in data["checks"]}
    assert (out / "repro-count.json").is_file() and 'name="shrunk_max_new_tokens" value="2"' in xml
    command = shrunk["command"]
    assert f"  repro: {command}" in printed and "--reference self" in command and "--pte" in command
    assert main(shlex.split(command)[1:] + ["--no-progress"]) == 1  # the command reproduces the failure
    assert "length: runner emitted 3 tokens, rules fix 2" in capsys.readouterr().out
    case = next(c for c in vs_self["cases"] if c["name"] == "count")  # the gate's own verdict, as it was
    assert case["status"] == "fail" and case["message"] == shrunk["original_failure"]["message"]
    assert case["message"] == "length: runner emitted 11 tokens, rules fix 10 (max_new)"


def test_no_shrink_turns_it_off():
    from eagle3_check.cli import build_parser

    assert build_parser().parse_args(["gate", "--pte", "x.pte"]).shrink is True
    assert build_parser().parse_args(["gate", "--pte", "x.pte", "--no-shrink"]).shrink is False
