"""Shared by the HTML report tests (test_html_report.py, test_html_browser.py): small reports
built from hand-made reference rows (no model), and a parser that reads a page back.

The check report has three requests (L = 10, K = 2, max_new 6, judged with bf16's 4-ulp
tolerance at a top logit of 1.0, i.e. 4 x 2^-7 = 0.03125; see tests/judge/test_verdict.py):
  "same"  identical,
  "tied"  a tie at token 2 (margin 0.02, rank 2),
  "broke" a failure at token 3 (runner 999, reference 213, margin 0.5, rank 5).
"""

from __future__ import annotations

import os
import re
from html.parser import HTMLParser
from pathlib import Path

from eagle3_check.jobs.check.prompt_set import CheckReport, RequestOutcome
from eagle3_check.jobs.gate.model import GateCheck, GateReport
from eagle3_check.judge.hf import Scores
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.judge.verdict import judge
from eagle3_check.report.junit import JUnitCase
from eagle3_check.runners.result import RunResult

TOL = Tolerance("bfloat16", 4)
WANT = [210, 211, 212, 213, 214, 215, 216]  # the reference's argmax of rows 0..6
CHANGES = {  # prompt id -> {index: (runner token, margin, gap, rank)}
    "same": {},
    "tied": {2: (9, 0.02, 0.02, 2)},
    "broke": {3: (999, 0.5, 0.7, 5)},
}
ACCEPTED = {"same": [2, 2], "tied": [2, 0, 1], "broke": [1, 2]}


def scores(changes: dict) -> Scores:
    rows = dict(argmax=list(WANT), top1=[1.0] * 7, top2=[0.5] * 7, runner_up=[9] * 7,
                given_logit=[1.0] * 6, given_rank=[1] * 6)
    for i, (_, margin, gap, rank) in changes.items():
        rows["top2"][i], rows["given_logit"][i], rows["given_rank"][i] = 1.0 - margin, 1.0 - gap, rank
    return Scores(**rows)


def run_for(prompt_id: str) -> RunResult:
    tokens = list(WANT[:6])
    for i, change in CHANGES[prompt_id].items():
        tokens[i] = change[0]
    accepted = ACCEPTED[prompt_id]
    return RunResult(prompt_ids=list(range(10)), tokens=tokens, text="", rounds=len(accepted), accepted=accepted,
                     tau=(len(tokens) - 1) / len(accepted), stop_reason="max_new", k=2, max_new=6)


def check_report() -> CheckReport:
    outcomes = []
    for pid, changes in CHANGES.items():
        run = run_for(pid)
        outcomes.append(RequestOutcome(pid, run, judge(run, scores(changes), frozenset(), 6, 64, TOL)))
    return CheckReport(k=2, outcomes=outcomes, info={"fixture": "hand-made", "dtype": "bfloat16"}, tie_budget=0.5)


def gate_report() -> GateReport:
    """A gate over the same runs at K=2 and K=3 (the K=3 runs are the K=2 runs relabelled)."""
    report = check_report()
    cases = [JUnitCase(o.prompt_id, o.verdict.status, o.verdict.message) for o in report.outcomes]
    runs = [o.run.summary(o.prompt_id) for o in report.outcomes]
    runs += [{**r, "k": 3} for r in runs]
    checks = [GateCheck("load", "pass", "loaded (backend=eager)", 0.5),
              GateCheck("runner vs self reference", "fail", "1 identical, 1 tie, 1 fail of 3 requests", 2.0,
                        cases=cases, details={"k": [2, 3], "tau": report.tau, "runs": runs}),
              GateCheck("golden", "skip", "no --golden given")]
    return GateReport(checks=checks, info={"pte": "model.pte"}, tau=report.tau)


class Page(HTMLParser):
    """A page read back: every start tag with its attributes, the text, and each table with an
    id as rows of cell texts (the header row first)."""

    def __init__(self, text: str):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []
        self.text_parts: list[str] = []
        self.tables: dict[str, list[list[str]]] = {}
        self._table: str | None = None
        self._cell: list[str] | None = None
        self.feed(text)
        self.close()

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        self.tags.append((tag, a))
        if tag == "table" and a.get("id"):
            self._table = a["id"]
            self.tables[self._table] = []
        elif tag == "tr" and self._table:
            self.tables[self._table].append([])
        elif tag in ("td", "th") and self._table:
            self._cell = []

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._table and self._cell is not None:
            self.tables[self._table][-1].append("".join(self._cell).strip())
            self._cell = None
        elif tag == "table":
            self._table = None

    def handle_data(self, data):
        self.text_parts.append(data)
        if self._cell is not None:
            self._cell.append(data)

    @property
    def text(self) -> str:
        return " ".join(self.text_parts)

    def rows(self, table_id: str) -> dict[str, list[str]]:
        """A table's body rows by their first cell (header -> column names are row 0)."""
        return {r[0]: r for r in self.tables[table_id][1:]}

    def column(self, table_id: str, name: str) -> int:
        return self.tables[table_id][0].index(name)

    def external_references(self) -> list[str]:
        """Every attribute or style that makes the browser fetch something that is not in the page."""
        bad = []
        for tag, attrs in self.tags:
            if tag in ("script", "link", "iframe", "object", "embed", "base"):
                bad.append(f"<{tag}>")
            for name, value in attrs.items():
                if name in ("src", "href", "xlink:href", "srcset", "action", "data", "poster") and value and \
                        not value.startswith(("#", "data:")):
                    bad.append(f"<{tag} {name}={value}>")
                if name == "style" and value and "url(" in value and "url(#" not in value:
                    bad.append(f"<{tag} style={value}>")
        return bad


def self_contained(doc: str) -> None:
    """Nothing in the page makes a browser fetch: no script, link, external src/href, CSS url()."""
    page = Page(doc)
    assert page.external_references() == []
    style = "".join(re.findall(r"<style>(.*?)</style>", doc, re.S))
    assert "url(" not in style and "@import" not in style
    # the only http(s) strings left are the SVG namespace names, which nothing fetches
    assert set(re.findall(r"https?://[^\s\"'<>]+", doc)) <= {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}


class Renames:
    """Records every `os.replace(src, dst)` (installed with monkeypatch): an atomic write shows
    as a rename of a temp file beside the target onto it."""

    def __init__(self, monkeypatch):
        self.calls: list[tuple[Path, Path]] = []
        real = os.replace

        def replace(src, dst, *a, **kw):
            self.calls.append((Path(src), Path(dst)))
            return real(src, dst, *a, **kw)

        monkeypatch.setattr(os, "replace", replace)

    def assert_atomic(self, target: Path) -> None:
        """`target` was renamed into place from a temp file in its own directory, and no temp
        file is left there."""
        sources = [src for src, dst in self.calls if dst == target]
        assert len(sources) == 1, f"{target} was renamed into place {len(sources)} times: {self.calls}"
        assert sources[0].parent == target.parent and sources[0] != target and not sources[0].exists()
        assert sorted(p.name for p in target.parent.iterdir()) == [target.name]  # nothing else left there

    def written_page(self, target: Path) -> Page:
        """The page at `target`, checked written atomically (`assert_atomic`) and self-contained."""
        self.assert_atomic(target)
        doc = target.read_text()
        self_contained(doc)
        assert "<script" not in doc.lower()
        return Page(doc)
