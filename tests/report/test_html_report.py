"""The HTML reports (eagle3_check/report/html_report.py, bench_report.py): read back with
html.parser, the key numbers are the report's own, and nothing is fetched at view time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from html_pages import TOL, Page, check_report, gate_report, run_for, self_contained

from eagle3_check.cli import main as cli_main
from eagle3_check.errors import InputError
from eagle3_check.jobs.golden.diff import GoldenDiff
from eagle3_check.jobs.golden.verify import GateOutcome
from eagle3_check.report.bench_report import bench_html
from eagle3_check.report.html_page import write_html
from eagle3_check.report.html_report import check_html, gate_html, golden_html, n_alpha

BENCH = Path(__file__).resolve().parents[2] / "bench" / "results" / "h200.json"


@pytest.fixture(scope="module")
def check_page():
    report = check_report()
    health = {"step0_agreement": 0.625, "step0_rows": 16, "tau": report.tau, "n_alpha": report.n_alpha,
              "expect_tau": None, "expect_source": None, "flags": []}
    return report, check_html(report.to_json(), health)


def test_n_alpha_worked_example():
    assert n_alpha([4, 2, 0, 0], 4) == [0.5, 0.5, 0.25, 0.25]
    assert n_alpha([], 3) == [0.0, 0.0, 0.0]


def test_verdicts_record_every_tie_margin_and_its_tolerance():
    report = check_report()
    tied = next(o.verdict for o in report.outcomes if o.prompt_id == "tied")
    assert (tied.tie_at, tied.tie_margins, tied.tie_tolerances) == ([2], [pytest.approx(0.02)], [TOL.at(1.0)])


def test_check_page_is_self_contained(check_page):
    self_contained(check_page[1])


def test_check_page_verdict_table_matches_the_report(check_page):
    report, doc = check_page
    page = Page(doc)
    rows = page.rows("verdicts")
    assert list(rows) == [o.prompt_id for o in report.outcomes]
    for o in report.outcomes:
        row = rows[o.prompt_id]
        got = [row[page.column("verdicts", c)] for c in ("identical", "tie", "fail", "verdict", "tau")]
        assert got == [str(o.verdict.identical), str(o.verdict.ties), str(o.verdict.fails), str(o.verdict.status),
                       f"{o.run.tau:.2f}"]
    c = report.counts()
    verdict = next(a for t, a in page.tags if a.get("id") == "verdict")
    assert verdict["class"] == "verdict fail"
    assert f"tau = {report.tau:.2f}" in page.text
    assert (f"requests: {c['identical']} identical, {c['tie']} tie, {c['fail']} fail (of {c['requests']})"
            in page.text)


def test_check_page_forensics_name_the_first_divergence_and_the_first_tie(check_page):
    report, doc = check_page
    page = Page(doc)
    rows = page.rows("forensics-table")
    assert sorted(rows) == ["broke", "tied"]  # the identical request has no forensics row
    for pid in rows:
        v = next(o.verdict for o in report.outcomes if o.prompt_id == pid)
        cells = [rows[pid][page.column("forensics-table", c)]
                 for c in ("index", "runner token", "reference token", "runner token rank")]
        assert cells == [str(v.index), str(v.got), str(v.want), str(v.rank)]
    assert rows["broke"][page.column("forensics-table", "margin (top-1 - top-2)")] == "0.5"


def test_check_page_n_alpha_per_prompt_and_tie_margins(check_page):
    report, doc = check_page
    page = Page(doc)
    rows = page.rows("n-alpha")
    for o in report.outcomes:
        want = [f"{a:.2f}" for a in n_alpha(o.run.accepted, report.k)]
        assert rows[o.prompt_id][4:] == want
    ties = page.tables["tie-table"][1:]
    assert ties == [["tied", "2", "0.02", f"{TOL.at(1.0):.4g}"]]
    svgs = [a for t, a in page.tags if t == "svg"]
    assert len(svgs) == 3  # tau per prompt, n-alpha, tie margins
    assert "tau per prompt" in page.text and "tie margins" in page.text  # plot titles are SVG text
    assert "0.625 over 16 positions" in page.text  # draft health


def test_gate_page_lists_the_checks_and_plots_tau_per_k():
    report = gate_report()
    page = Page(gate_html(report.to_json()))
    self_contained(gate_html(report.to_json()))
    checks = page.rows("checks")
    assert {name: row[1] for name, row in checks.items()} == {c.name: c.status for c in report.checks}
    assert checks["runner vs self reference"][2] == "2.0s"
    assert "tau per K (all prompts)" in page.text  # two K: a tau-per-K plot
    n_alpha_rows = page.tables["n-alpha"][1:]
    assert [(r[0], r[1]) for r in n_alpha_rows] == [(p, k) for k in ("2", "3") for p in ("same", "tied", "broke")]
    assert "1 identical, 1 tie, 1 fail of 3 requests" in page.text and "FAIL" in page.text


def test_golden_page_tables_diffs_and_runs():
    runs = {pid: run_for(pid) for pid in ("same", "tied")}
    from eagle3_check.jobs.golden.file import GoldenKey

    key = GoldenKey("tiny-llama", "eager", "cpu", "float32", 2, 6)
    diff = GoldenDiff(key.stem, "tied", "tokens", "token 2: 9, golden 212", index=2, got=9, want=212, margin=0.02)
    outcome = GateOutcome(golden_diffs=[diff], runs={key.stem: runs}, keys={key.stem: key},
                          skipped={"x__pte": "a .pte golden: pass --pte FILE"})
    doc = golden_html(outcome.to_json())
    self_contained(doc)
    page = Page(doc)
    tau = (sum(len(r.tokens) - 1 for r in runs.values()) / sum(r.rounds for r in runs.values()))
    assert page.rows("goldens")[key.stem] == [key.stem, "2", "2", f"{tau:.2f}"]
    diffs = page.rows("diffs")
    assert diffs[key.stem][page.column("diffs", "message")] == "token 2: 9, golden 212"
    assert "a .pte golden: pass --pte FILE" in page.text and "golden difference(s)" in page.text


def test_bench_page_numbers_are_the_bench_json():
    bench = json.loads(BENCH.read_text())
    doc = bench_html(bench, BENCH.name)
    self_contained(doc)
    page = Page(doc)
    rows = page.rows("methods")
    assert list(rows) == list(bench["results"])
    for method, r in bench["results"].items():
        assert rows[method][page.column("methods", "tokens/s")] == f"{r['tokens_per_s']:.1f}"
        assert rows[method][page.column("methods", "ms/round")] == f"{r['ms_per_round']:.3f}"
    assert "tokens/s per method" in page.text and "ms per round per method" in page.text
    assert len([t for t, _ in page.tags if t == "svg"]) == 4


@pytest.mark.parametrize("bench,match", [
    ({}, "no 'results' object of methods"),
    ({"results": {"spec-K4": {"tokens_per_s": 1.0}}}, "method 'spec-K4' has ms_per_round = None"),
    ({"results": {"m": {"tokens_per_s": "fast", "ms_per_round": 1.0}}}, "method 'm' has tokens_per_s = 'fast'"),
], ids=["no-results", "missing-ms-per-round", "string-tokens-per-s"])
def test_a_bench_json_without_the_numbers_is_an_error(bench, match):
    with pytest.raises(InputError, match=match):
        bench_html(bench, "b.json")


def test_write_is_atomic_and_refuses_a_missing_directory(tmp_path):
    out = tmp_path / "r.html"
    write_html(out, "<p>old</p>")
    write_html(out, "<p>new</p>")
    assert out.read_text() == "<p>new</p>" and [p.name for p in tmp_path.iterdir()] == ["r.html"]
    with pytest.raises(InputError, match="does not exist"):
        write_html(tmp_path / "missing" / "r.html", "x")


def test_cli_report_renders_a_bench_json_and_a_saved_check(tmp_path, capsys):
    out = tmp_path / "bench.html"
    assert cli_main(["report", "--bench", str(BENCH), "--html", str(out)]) == 0
    assert "NVIDIA H200" in Page(out.read_text()).text
    saved = tmp_path / "check.json"
    saved.write_text(json.dumps({**check_report().to_json(), "draft_health": None}))
    assert cli_main(["report", "--check", str(saved), "--html", str(tmp_path / "c.html")]) == 0
    assert "broke" in Page((tmp_path / "c.html").read_text()).rows("verdicts")
    assert cli_main(["report", "--gate", str(BENCH), "--html", str(tmp_path / "g.html")]) == 2
    assert "cannot read KeyError 'checks'" in capsys.readouterr().err


@pytest.mark.parametrize("argv,match", [
    (["check", "--fixture", "tiny-llama", "--html", "{tmp}/missing/r.html"], "--html {tmp}/missing/r.html: directory"),
    (["check", "--suite", "stop-set", "--html", "{tmp}/r.html"], "--html with --suite"),
    (["check", "--list", "--html", "{tmp}/r.html"], "--html with --list"),
], ids=["missing-directory", "suite", "list"])
def test_cli_html_errors_are_one_line_before_anything_runs(argv, match, tmp_path, capsys):
    assert cli_main([a.replace("{tmp}", str(tmp_path)) for a in argv]) == 2
    err = capsys.readouterr().err
    assert match.replace("{tmp}", str(tmp_path)) in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "r.html").exists()


def test_cli_check_html_is_the_json_report_as_a_page(tmp_path, capsys):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hello", "text": "Hello there"}]}))
    out = tmp_path / "r.html"
    rc = cli_main(["check", "--fixture", "tiny-llama", "--prompts", str(prompts), "--max-new-tokens", "8", "--json", "--html", str(out)])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and out.is_file()
    page = Page(out.read_text())
    row = page.rows("verdicts")["hello"]
    run, verdict = report["requests"][0]["run"], report["requests"][0]["verdict"]
    assert row[1:5] == [str(len(run["prompt_ids"])), str(len(run["tokens"])), str(run["rounds"]), f"{run['tau']:.2f}"]
    assert row[page.column("verdicts", "identical")] == str(verdict["identical"])
    health = report["draft_health"]
    assert f"{health['step0_agreement']:.3f} over {health['step0_rows']} positions" in page.text


def test_a_saved_check_without_tie_margins_is_an_error_not_a_page_without_ties(tmp_path, capsys):
    js = check_report().to_json()
    for r in js["requests"]:
        del r["verdict"]["tie_margins"]  # a report written before the field existed
    saved = tmp_path / "old.json"
    saved.write_text(json.dumps(js))
    assert cli_main(["report", "--check", str(saved), "--html", str(tmp_path / "c.html")]) == 2
    assert "cannot read KeyError 'tie_margins'" in capsys.readouterr().err
    assert not (tmp_path / "c.html").exists()


def test_a_prompt_without_a_run_at_one_k_gets_no_bar():
    js = gate_report().to_json()
    runs = js["checks"][1]["details"]["runs"]
    runs.remove(next(r for r in runs if r["prompt_id"] == "broke" and r["k"] == 3))  # it crashed at K=3
    page = Page(gate_html(js))
    assert "no run" in page.text  # the bar's label, never a tau of 0
    assert ("broke", "3") not in [(r[0], r[1]) for r in page.tables["n-alpha"][1:]]


def test_every_value_is_human_text_never_a_python_repr():
    """Issue 52: the info table showed `{'granularity': 'off'}` and `True`."""
    from eagle3_check.report.html_page import esc, human, info_list, table

    value = {"granularity": "off", "graphs": True, "ks": [1, 2], "mode": None}
    assert human(value) == "granularity: off; graphs: yes; ks: (1, 2); mode: none"
    assert (human(True), human(False), human(None), human([]), human({}), human([3]), human(("a", "b"))) == \
        ("yes", "no", "", "none", "none", "3", "a, b")
    assert human({"compile": {"granularity": "layer", "mode": "default"}}) == "compile: (granularity: layer; mode: default)"
    assert esc({"a": "<b>"}) == "a: &lt;b&gt;"
    report = check_report().to_json()
    report["info"].update(compile=value, cuda_graph=False, stop_ids=[], bos=None, nested=[[1, 2], {"x": True}])
    doc = check_html(report, None) + info_list(value) + table(("a", "b"), [[True, None], [{"k": 1}, [1, 2]]])
    text = Page(doc).text
    for repr_ in ("{'", "': ", "True", "False", "None", "[1, 2]", "[]"):
        assert repr_ not in text, (repr_, text[:400])
    assert "granularity: off; graphs: yes; ks: (1, 2); mode: none" in text and "(1, 2), x: yes" in text
