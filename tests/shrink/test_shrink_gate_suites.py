"""The gate shrinks its failing edge-suite cases as `check --suite --shrink` does (jobs/gate/shrink_suites.py,
session/shrink_gate_suites.py): in the env the gate built, through the runner it holds, within the
budget it shares with its request cases. On the tiny-llama eager program (`run_gate(program=...)`:
the gate's own checks, no export), with the config of `check --fixture tiny-llama` (the route
`check --quantize` takes the gate by), so each repro command replays on the same program."""

from __future__ import annotations

import pytest

from eagle3_check.cli import config_of, main
from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.gate.gate import GateInputs, run_gate
from eagle3_check.jobs.gate.model import GateReport
from eagle3_check.jobs.gate.shrink_route import shrink_gate_and_write
from eagle3_check.jobs.gate.shrink_suites import shrink_gate_suites
from eagle3_check.jobs.shrink_route import program_files_of
from eagle3_check.mutants import factory
from eagle3_check.report.html_report import gate_html
from eagle3_check.runners.options import RunOptions
from eagle3_check.shrink.repro import split_line
from eagle3_check.shrink.search import budget_shares
from eagle3_check.status import FAIL, PASS

STRIPPED, EMIT_PAST = "eagle3_check.mutants:prompt_stripped", "eagle3_check.mutants:emit_past_max_new"


def gate(program, tokenizer, hf_reference, fixture, suite: str, runner: str | None) -> tuple[GateReport, GateInputs]:
    """The gate of the eager program on one prompt (8 new tokens) and one suite (or case)."""
    plugin = factory(runner.split(":")[1])() if runner else None
    inputs = GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir, prompts=[Prompt("count", "Count.")],
                        options=RunOptions(max_new_tokens=8), suite=suite, hf_reference=hf_reference,
                        fixture=fixture.name, plugin=plugin)
    return run_gate(inputs, program=program), inputs


def shrink_and_write(report, inputs, program, tmp_path, runner: str | None, *extra: str) -> list[str]:
    argv = ["check", "--fixture", "tiny-llama", "--shrink", "--shrink-dir", str(tmp_path), "--no-progress", *extra]
    cfg, _ = config_of(argv + (["--runner", runner] if runner else []))
    return shrink_gate_and_write(cfg, report, inputs, program, program_files_of({"fixture": "tiny-llama"}))


def edge(report):
    return report.check("edge suites")


def test_a_failing_edge_suite_case_shrinks_and_its_command_replays_it(program, tokenizer, hf_reference, fixture,
                                                                       tmp_path, capsys):
    """prompt_stripped fails options/raw-edge-whitespace ('\\n Count from one to ten. \\n', --raw) and no
    request check (its prompt has no edge whitespace): BOS + one newline, max new tokens 1, K 1."""
    report, inputs = gate(program, tokenizer, hf_reference, fixture, "options/raw-edge-whitespace", STRIPPED)
    assert edge(report).status == FAIL and report.check("runner vs self reference").status == PASS
    [case] = edge(report).cases
    before = case.message
    lines = shrink_and_write(report, inputs, program, tmp_path, STRIPPED)
    shrunk = edge(report).details["shrunk"]["options/raw-edge-whitespace"]
    req = shrunk["shrunk"]
    assert (req["prompt_ids"], req["max_new_tokens"], req["k"]) == ([2, 305], 1, 1)  # 305 = '\n'
    assert shrunk["prompt_text"] == "\n" and shrunk["complete"] and shrunk["probes"] > 0
    assert lines[0].startswith("shrunk 'options/raw-edge-whitespace': L 15, max new tokens 16, K 4 -> L 2, max new "
                               "tokens 1, K 1") and lines[0].endswith("prompt ids: runner used # ids, the request is #")
    assert (tmp_path / "repro-options_raw-edge-whitespace.json").is_file()
    assert case.status == FAIL and case.message == before  # the gate's own verdict, as it was
    assert case.properties["shrunk_k"] == "1" and "repro: eagle3-check check" in case.details
    page = gate_html(report.to_json())  # the HTML report: the shrunk case beside the original
    assert 'id="shrunk"' in page and "edge suites: options/raw-edge-whitespace" in page and "L 2, max new 1, K 1" in page
    command = shrunk["command"]
    assert "--fixture tiny-llama" in command and "--raw" in command and f"--runner {STRIPPED}" in command
    capsys.readouterr()
    assert main(split_line(command)[1:] + ["--no-progress"]) == 1  # the command reproduces the failure
    assert "prompt ids: runner used 1 ids, the request is 2" in capsys.readouterr().out


def test_forced_cases_keep_the_whole_case_and_one_budget_of_0_probes_nothing(program, tokenizer, hf_reference,
                                                                              fixture, tmp_path, capsys):
    """emit_past_max_new fails the request checks and every acceptance case: 4 forced (kept, with their
    command), 1 plain; --shrink-budget 0 is shared by all of them, so none is probed."""
    report, inputs = gate(program, tokenizer, hf_reference, fixture, "acceptance", EMIT_PAST)
    assert [c.status for c in edge(report).cases] == [FAIL] * 5
    lines = shrink_and_write(report, inputs, program, tmp_path, EMIT_PAST, "--shrink-budget", "0")
    plain = edge(report).details["shrunk"]["acceptance/unforced"]
    request = report.check("runner vs self reference").details["shrunk"]["count"]
    for shrunk in (plain, request):
        assert shrunk["probes"] == 0 and not shrunk["complete"] and shrunk["shrunk"] == shrunk["original"]
    assert sum("(budget spent: smaller may exist)" in x for x in lines) == 2
    at = lines.index("acceptance/full: not shrunk: its draft is forced along the case's own trajectory")
    assert lines[at + 1] == "  kept: the whole case (its draft is forced along the case's own trajectory)"
    command = lines[at + 2].removeprefix("  repro: ")
    assert command == f"eagle3-check check --fixture tiny-llama --runner {EMIT_PAST} --suite acceptance/full"
    assert edge(report).cases[0].properties["repro_command"] == command
    capsys.readouterr()
    assert main(split_line(command)[1:] + ["--no-progress"]) == 1
    assert "length: runner emitted 17 tokens, rules fix 16" in capsys.readouterr().out


def test_a_passing_gate_writes_no_repro(program, tokenizer, hf_reference, fixture, tmp_path):
    report, inputs = gate(program, tokenizer, hf_reference, fixture, "options/raw-edge-whitespace", None)
    assert report.passed
    assert shrink_and_write(report, inputs, program, tmp_path, None) == []
    assert list(tmp_path.iterdir()) == [] and "shrunk" not in edge(report).details
    assert 'id="shrunk"' not in gate_html(report.to_json())


@pytest.mark.parametrize("budget", [0.0, 5.0], ids=["budget-0", "budget-5s"])
def test_the_suite_shrinker_runs_through_the_runner_the_gate_holds(program, tokenizer, hf_reference, fixture,
                                                                   budget):
    """The probes go through `inputs.plugin` (counted), none with a budget of 0 (`on_probe` is told of
    each search probe; the result's count has the final re-run too)."""
    report, inputs = gate(program, tokenizer, hf_reference, fixture, "options/raw-edge-whitespace", STRIPPED)
    calls, probes = [], []
    run = inputs.plugin.run
    inputs.plugin.run = lambda *a, **k: calls.append(1) or run(*a, **k)
    [done] = shrink_gate_suites(report, inputs, program, hf_reference, budget_shares(1, budget), inputs.plugin,
                                on_probe=lambda *a: probes.append(1))
    assert done.result is not None and done.result.probes == len(probes) + done.result.reduced
    assert (len(probes) == 0) == (budget == 0) and len(calls) == 1 + done.result.probes  # the check's re-run, then each


def test_a_case_whose_prompt_no_longer_fits_is_not_shrunk_and_says_why(program, tokenizer, hf_reference, fixture,
                                                                       monkeypatch):
    """The shrink picks the failing case's prompt again; where none of its shape fits the program (a
    CaseSkip: the gate found this through a binary on a `.pte`), the case is "not shrunk" with the reason,
    never a traceback."""
    from eagle3_check.jobs.suites import shrink
    from eagle3_check.suites.request import CaseSkip

    report, inputs = gate(program, tokenizer, hf_reference, fixture, "options/raw-edge-whitespace", STRIPPED)
    assert edge(report).status == FAIL

    def no_fit(*a, **k):
        raise CaseSkip("no prompt of L+K=max_seq_len+1 fits this program's prefill range [1, 128]")

    monkeypatch.setattr(shrink, "pick_prompt", no_fit)
    [done] = shrink_gate_suites(report, inputs, program, hf_reference, budget_shares(1, 30.0), inputs.plugin)
    assert done.result is None and done.note == ("not shrunk: no prompt of L+K=max_seq_len+1 fits this program's "
                                                 "prefill range [1, 128]")
