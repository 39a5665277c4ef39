"""Mutation testing of the harness: every seeded mutant of the reference runner is caught.

`make mutants` prints the kill table (fp32 and bf16); here the kill run (fp32) stops probing
a mutant at its first kill, once with the toy probes and check, once with check and the edge
suites alone; each mutant runs on both data placements of the runner loop.
"""

import json

import pytest

from eagle3_check.cli import main
from eagle3_check.mutants import BY_NAME, MUTANTS, Mutant
from eagle3_check.mutants.engine import StaleMutant, build_runner_class
from eagle3_check.mutants.kill import PLACEMENTS, format_kill_table, kill_run, mutant_runner
from eagle3_check.mutants.probes import FAST_PROBES, PROBES, Context, _check_fixture
from eagle3_check.program.cuda_graph import GraphedProgram
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.placement import DevicePlacement, HostPlacement


@pytest.fixture(scope="module")
def ctx():
    return Context()


def test_at_least_twelve_distinct_mutants():
    assert len(MUTANTS) >= 12 and len(BY_NAME) == len(MUTANTS)


def test_every_mutant_is_killed_and_the_reference_passes_every_probe(ctx):
    report = kill_run(probes=FAST_PROBES, first_kill=True, ctx=ctx)
    table = format_kill_table(report)
    assert report.reference_failures == {"host": {}, "device": {}}, table
    survivors = [(r.name, p) for r, m in zip(report.rows, MUTANTS) for p in m.placements if not r.killed_on(p)]
    assert survivors == [], table
    assert report.ok and report.score == 1.0 and report.score_on("host") == report.score_on("device") == 1.0
    assert "host: suites/check | toy" in table and "device: suites/check | toy" in table


def test_the_loop_mutants_run_on_both_placements_and_the_placement_mutants_on_theirs():
    shared = [m for m in MUTANTS if m.placements == PLACEMENTS]
    device_only = [m for m in MUTANTS if m.placements == ("device",)]
    host_only = [m for m in MUTANTS if m.placements == ("host",)]
    assert len(shared) >= 20 and len(device_only) >= 2 and len(host_only) >= 1
    assert len(shared) + len(device_only) + len(host_only) == len(MUTANTS)
    m = BY_NAME["accept_off_by_one"]
    assert mutant_runner(m, "host").placement.name == "host"
    assert mutant_runner(m, "device").placement.name == "device"
    loop = mutant_runner(m, "device")  # the mutated loop, the original placement
    assert type(loop) is not ReferenceRunner and loop.placement is DevicePlacement
    assert mutant_runner(m, "host").placement is HostPlacement
    dev = mutant_runner(BY_NAME["device_read_includes_anchor"], "device").placement
    assert dev.name == "device" and dev is not DevicePlacement  # the edited placement module


def test_a_placement_mutant_is_not_run_on_the_other_placement(ctx):
    toy_all_right = [p for p in PROBES if p.name == "toy:all-right"]
    report = kill_run([BY_NAME["device_read_includes_anchor"]], probes=toy_all_right, ctx=ctx)
    row = report.rows[0]
    assert list(row.probes_run) == ["device"] and row.killed and report.ok
    assert "n/a (device only)" in format_kill_table(report)


def test_the_device_placement_runs_over_graph_owned_outputs(ctx):
    """The device column's eager program is emulated CUDA graphs (outputs overwritten by the
    next same-shape call); the device reference passes check over it."""
    graphed = ctx.with_graphs("emulate")
    assert isinstance(graphed.program, GraphedProgram) and not isinstance(ctx.program, GraphedProgram)
    assert graphed.reference is ctx.reference and graphed.tokenizer is ctx.tokenizer
    before = sum(graphed.program.verify_graphs.captures.values())
    assert _check_fixture(ReferenceRunner("device"), graphed) is None
    assert sum(graphed.program.verify_graphs.captures.values()) > before


@pytest.mark.parametrize("mutant", MUTANTS, ids=lambda m: m.name)
def test_mutant_source_differs_from_the_reference(mutant):
    cls = build_runner_class(mutant)
    assert cls is not ReferenceRunner and cls.mutant is mutant


def test_a_stale_mutant_is_reported_not_silently_equal():
    ghost = Mutant("ghost", "no such code", "nothing", (("this text is not in runners/loop.py", "x"),))
    with pytest.raises(StaleMutant, match="occurs 0 times"):
        build_runner_class(ghost)
    report = kill_run([ghost], probes=PROBES[:1], ctx=Context())
    assert report.rows[0].error and not report.rows[0].probes_run
    assert not report.ok and "STALE" in format_kill_table(report)


def test_check_catches_a_mutant_plugged_in_with_runner(capsys, tmp_path):
    prompts = tmp_path / "p.json"
    prompts.write_text(json.dumps({"prompts": [{"id": "hi", "text": "Hi"}]}))
    rc = main(["check", "--fixture", "tiny-llama", "--runner", "eagle3_check.mutants:bos_twice", "--prompts", str(prompts),
               "--max-new-tokens", "6", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 1 and report["passed"] is False
    assert report["info"]["runner"] == "eagle3_check.mutants:bos_twice"
    assert report["requests"][0]["verdict"]["message"].startswith("prompt ids:")


def test_mutants_subcommand_prints_a_kill_table(capsys):
    rc = main(["mutants", "--only", "tau_counts_prefill", "emit_past_max_new", "--first-kill", "--no-suites",
               "--no-progress"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "tau_counts_prefill" in out and "killed" in out and "mutation score: 2/2 killed (100 %)" in out
    assert "host: 2/2 killed (100 %)" in out and "device: 2/2 killed (100 %)" in out and "float32" in out


def test_mutants_subcommand_runs_the_check_probe_in_bfloat16(capsys):
    rc = main(["mutants", "--only", "tau_counts_prefill", "--first-kill", "--no-suites", "--no-progress",
               "--dtype", "bfloat16", "--placement", "host", "--json"])
    report = json.loads(capsys.readouterr().out)
    assert rc == 0 and report["dtype"] == "bfloat16" and report["placements"] == ["host"]
    assert report["reference_failures"] == {"host": {}} and "check:fixture" in report["probes"]


def test_a_survivor_names_the_case_the_suites_lack(ctx):
    only_stop_bonus = [p for p in PROBES if p.name == "toy:stop-bonus"]
    report = kill_run([BY_NAME["tau_counts_prefill"]], probes=only_stop_bonus, ctx=ctx)
    table = format_kill_table(report)
    assert not report.ok and report.score == 0.0
    assert "SURVIVED" in table and BY_NAME["tau_counts_prefill"].needs in table


@pytest.mark.slow  # 149 s on CI's 2-core machine: `make slow`, and `make mutants` (--strict-suites) requires the same
def test_check_and_the_edge_suites_alone_kill_every_mutant(ctx):
    """Without the toy probes: the suites users run (`check`, `check --suite`) catch each bug, and the
    reference passes every suite case on both placements."""
    suites_and_check = [p for p in PROBES if p.group != "toy"]
    assert any(p.group == "suite" for p in suites_and_check), "the edge suites are not importable"
    report = kill_run(probes=suites_and_check, first_kill=True, ctx=ctx)
    table = format_kill_table(report)
    assert report.reference_failures == {"host": {}, "device": {}}, table
    assert [r.name for r in report.rows if not r.killed] == [], table


@pytest.mark.parametrize("strict", [False, True], ids=["toy-kills-count", "strict-suites"])
def test_strict_suites_fails_a_mutant_only_the_toy_probes_kill(capsys, strict):
    """program_eos_ignored: check on the prompt set cannot see it (no get_eos_ids), toy:program-eos can."""
    args = ["mutants", "--only", "program_eos_ignored", "--no-suites", "--no-progress", "--placement", "host"]
    rc = main(args + (["--strict-suites"] if strict else []))
    out = capsys.readouterr().out
    assert "host: 1/1 killed (100 %) (0/1 by check and the edge suites alone)" in out
    assert rc == (1 if strict else 0)
