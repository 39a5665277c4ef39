"""`check --junit FILE`: the check's report as JUnit XML, grouped as its JSON report groups it.

- the prompt-set check (in-process, `--workers`, or a runner binary) is one report at one K:
  one <testsuite> "check K=k", one <testcase> per prompt, with the verdict's message (a binary's
  prefixed with how it was judged, `[ids]` or `[bytes]`) and the request's wall time;
- `check --suite NAME` is one report per fixture or given program: one <testsuite> each, named
  "NAME on <fixture, .pte or target>", one <testcase> per case (status, message, time as in the
  suite table).

A tie passes (its positions are a property of its case); a report whose ties exceed the tie
budget fails although no request does, so the suite gets one failing "tie budget" case saying
so, as the gate's JUnit does: the XML never passes a check the JSON report fails.
Written atomically by `junit.write_junit`.
"""

from __future__ import annotations

from pathlib import Path

from eagle3_check.report.junit import JUnitCase, JUnitSuite, write_junit
from eagle3_check.status import FAIL, PASS, TIE

NAME = "eagle3-check check"


def _budget_case(report) -> list[JUnitCase]:
    """The report-level failing cases: ties over the budget, and a Ctrl-C that stopped the run."""
    stopped = getattr(report, "interrupted", None)
    out = [JUnitCase("interrupted", FAIL, stopped)] if stopped else []
    c = report.counts()
    if c["tie_positions"] <= report.ties_allowed:
        return out
    return out + [JUnitCase("tie budget", FAIL, f"{c['tie_positions']} tie positions exceed the tie budget of "
                      f"{report.ties_allowed} ({report.budget_text})")]


def _positions(verdict) -> dict[str, str]:
    return {"positions": str(verdict.judged), "tie_positions": str(verdict.ties)}


def shrunk_details(shrunk: dict | None, message: str = "") -> str:
    """The <failure> body of a shrunk failing request: its message, its smallest reproduction and the command."""
    if not shrunk:
        return ""
    r = shrunk["shrunk"]
    return (f"{message}\n" if message else "") + (f"shrunk to L {len(r['prompt_ids'])}, max new tokens {r['max_new_tokens']}, K {r['k']}: "
            f"{shrunk['failure']['message']}\nrepro: {shrunk.get('command', '')}\nfile: {shrunk.get('file', '')}")


def shrunk_properties(shrunk: dict | None) -> dict[str, str]:
    if not shrunk:
        return {}
    r = shrunk["shrunk"]
    return {"shrunk_prompt_len": str(len(r["prompt_ids"])), "shrunk_max_new_tokens": str(r["max_new_tokens"]),
            "shrunk_k": str(r["k"]), "shrunk_command": shrunk.get("command", "")}


def check_suite(report) -> JUnitSuite:
    """A `jobs.check.prompt_set.CheckReport` (the in-process prompt-set check)."""
    cases = [JUnitCase(o.prompt_id, o.verdict.status, o.verdict.message, o.seconds, details=shrunk_details(o.shrunk, o.verdict.message),
                       properties={**_positions(o.verdict), **shrunk_properties(o.shrunk)})
             for o in report.outcomes]
    return JUnitSuite(f"check K={report.k}", cases + _budget_case(report))


def exec_check_suite(report) -> JUnitSuite:
    """A `jobs.check.binary.ExecReport` (the prompt-set check through a runner binary)."""
    cases = [JUnitCase(o.prompt_id, o.verdict.status if o.verdict.status in (PASS, TIE, FAIL) else FAIL,
                       f"[{o.verdict.mode or '-'}] {o.verdict.message}",
                       o.process.seconds, properties=_positions(o.verdict)) for o in report.outcomes]
    return JUnitSuite(f"check K={report.k}", cases + _budget_case(report))


def suite_suite(report) -> JUnitSuite:
    """A `jobs.suites.report.SuiteReport` (`check --suite`): one case per edge case."""
    info = report.info
    where = info.get("fixture") or info.get("pte") or info.get("target")
    name = f"{report.suite} on {where}" if where else report.suite
    stopped = [JUnitCase("interrupted", FAIL, report.interrupted)] if getattr(report, "interrupted", None) else []
    return JUnitSuite(name, [JUnitCase(r.name, r.status, r.message, r.seconds) for r in report.results] + stopped)


def write_check_junit(path: str | Path, suites: list[JUnitSuite]) -> None:
    write_junit(path, suites, NAME, prefix="check")
