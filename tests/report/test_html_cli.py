"""`eagle3-check check --html OUT` end to end through the CLI (in-process main()), on the embedded
fixture with one short prompt: the page is written atomically, is self-contained and holds the
numbers of the JSON report the same run printed. `gate --html` needs a .pte (gate loads only
.pte programs): tests/pte/test_gate_html.py."""

from __future__ import annotations

import json

from html_pages import Renames

from eagle3_check.cli import main


def test_check_html_is_written_atomically_self_contained_with_the_json_reports_numbers(tmp_path, monkeypatch,
                                                                                         capsys):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hello", "text": "Hello there"},
                                               {"id": "count", "text": "Count to five."}]}))
    (tmp_path / "out").mkdir()
    html = tmp_path / "out" / "check.html"
    renames = Renames(monkeypatch)
    rc = main(["check", "--fixture", "tiny-llama", "--prompts", str(prompts), "--max-new-tokens", "8", "--json", "--html", str(html)])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["passed"] is True
    page = renames.written_page(html)
    c = report["counts"]
    assert f"PASS: K = {report['k']}, tau = {report['tau']:.2f}; requests: {c['identical']} identical, " \
           f"{c['tie']} tie, {c['fail']} fail (of {c['requests']})" in page.text
    rows = page.rows("verdicts")
    verdict, tau = page.column("verdicts", "verdict"), page.column("verdicts", "tau")
    assert list(rows) == [r["prompt_id"] for r in report["requests"]] == ["hello", "count"]
    for r in report["requests"]:
        assert rows[r["prompt_id"]][verdict] == r["verdict"]["status"]
        assert rows[r["prompt_id"]][tau] == f"{r['run']['tau']:.2f}"
