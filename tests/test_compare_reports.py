"""tests/compare_reports.py: two runs' reports are the same once times and paths are taken out, and
nothing else is taken out (a token, a verdict or a missing report is a difference)."""

from __future__ import annotations

import json

import compare_reports as cr  # tests/compare_reports.py (tests/ is on sys.path: no __init__.py)


def write_run(out, root, tokens=(5, 6, 7), seconds=0.184, verdict="pass"):
    """A small check report as `check --json --junit` writes it: times, a path, tokens, a verdict."""
    out.mkdir(parents=True)
    report = {"verdict": verdict, "requests": [{"id": "hi", "tokens": list(tokens), "seconds": seconds,
                                                "method_ms": {"prefill": seconds * 30, "draft_decode": 72.5}}],
              "provenance": {"files": {"prompts": {"path": f"{root}/fixtures/prompts.json"}},
                             "options": {"junit": f"{out}/check.junit.xml"}}}
    (out / "check.json").write_text(json.dumps(report))
    (out / "check.junit.xml").write_text(
        f'<testsuites><testsuite name="k4" time="{seconds}" timestamp="2026-12-04T19:41:{int(seconds * 99):02d}" '
        f'hostname="h{seconds}"><testcase name="hi" time="{seconds}"/></testsuite></testsuites>')
    (out / "check.html").write_text(f"<td>{seconds:.3f} s</td><td>{verdict}</td><td>{root}/fixtures</td>")


def test_two_runs_that_differ_in_times_and_paths_only_are_the_same(tmp_path):
    write_run(tmp_path / "before", "/work/a", seconds=0.184)
    write_run(tmp_path / "after", "/srv/b", seconds=1.5)
    roots = ["/work/a", "/srv/b", str(tmp_path / "before"), str(tmp_path / "after")]
    assert cr.compare(tmp_path / "before", tmp_path / "after", roots) == []
    assert cr.main([str(tmp_path / "before"), str(tmp_path / "after"), "--root", "/work/a", "--root", "/srv/b"]) == 0


def test_a_token_a_verdict_or_an_unnamed_path_is_a_difference(tmp_path):
    write_run(tmp_path / "before", "/work/a")
    write_run(tmp_path / "after", "/srv/b", tokens=(5, 6, 8), verdict="fail")
    problems = cr.compare(tmp_path / "before", tmp_path / "after", [str(tmp_path / "before"), str(tmp_path / "after")])
    assert [p.splitlines()[0] for p in problems] == ["--- before/check.html", "--- before/check.json"]  # not the XML
    lines = problems[1].splitlines()
    assert {"-    7", "+    8", '- "verdict": "pass"', '+ "verdict": "fail"',
            '+    "path": "/srv/b/fixtures/prompts.json"'} <= set(lines)


def test_a_missing_report_is_a_difference(tmp_path):
    write_run(tmp_path / "before", "/work/a")
    (tmp_path / "after").mkdir()
    assert cr.compare(tmp_path / "before", tmp_path / "after", []) == [
        f"check.html: missing from {tmp_path / 'after'}", f"check.json: missing from {tmp_path / 'after'}",
        f"check.junit.xml: missing from {tmp_path / 'after'}"]
    assert cr.main([str(tmp_path / "before"), str(tmp_path / "after")]) == 1


def test_a_number_under_a_time_key_is_a_time_at_any_depth_and_nowhere_else():
    assert cr.normalise_json({"seconds": 1.5, "method_ms": {"prefill": 7.1, "calls": [1, 2]}, "tokens": [3, 4],
                              "k": 4, "ok": True}) == \
        {"seconds": "<T>", "method_ms": {"prefill": "<T>", "calls": ["<T>", "<T>"]}, "tokens": [3, 4], "k": 4, "ok": True}
