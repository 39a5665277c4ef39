"""`eagle3-check gate --pte FILE --html OUT` end to end through the CLI (in-process main()), on
the session's export of the embedded fixture with the cheapest options (no edge suite, one
prompt, 8 new tokens): the page is written atomically, is self-contained and holds the numbers
of the JSON report (--report) the same run wrote: tau and every check's status. Marked `pte`:
gate loads only .pte programs (no plug-in or fixture program replaces the one under the gate)."""

from __future__ import annotations

import json

import pytest
from html_pages import Renames

pytest.importorskip("executorch.runtime", reason="executorch not installed: pip install -e .[pte]")

from eagle3_check.cli import main  # noqa: E402

pytestmark = pytest.mark.pte


def test_gate_html_is_written_atomically_self_contained_with_the_reports_numbers(pte_path, tmp_path, monkeypatch,
                                                                                  capsys):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    report_path = tmp_path / "gate-report.json"
    (tmp_path / "out").mkdir()
    html = tmp_path / "out" / "gate.html"
    renames = Renames(monkeypatch)
    rc = main(["gate", "--pte", str(pte_path), "--suite", "none", "--prompts", str(prompts), "--max-new-tokens",
               "8", "--report", str(report_path), "--html", str(html), "--no-progress"])
    out = capsys.readouterr().out
    report = json.loads(report_path.read_text())
    assert rc == 0 and report["passed"] is True and "GATE: PASS" in out, out
    assert f"html: {html}" in out
    page = renames.written_page(html)
    checks = report["checks"]
    assert f"PASS: {len(checks)} checks, 0 fail, tau = {report['tau']:.2f}" in page.text
    rows = page.rows("checks")
    assert list(rows) == [c["name"] for c in checks]
    assert {name: row[1] for name, row in rows.items()} == {c["name"]: c["status"] for c in checks}
    ran = {c["name"] for c in checks if c["status"] == "pass"}
    assert {"load", "metadata", "runner vs self reference", "runner vs HF reference"} <= ran
    assert {c["name"]: c["status"] for c in checks}["edge suites"] == "skip"  # --suite none
