"""Issue 31 item 1: every default route meets a runner that keeps state from one request to the next.

`check --suite edge` runs the state suite first (a toy program of max_seq_len 24, then a small
program, the default one, the small and the toy again), and the toy cases run on any program, so a
run on one given program (the gate's edge suites on a `.pte`) changes programs too. Seeded bugs:
`device_positions_sized_once` (the device placement's positions sized by the first request's
max_seq_len and kept) and `placement_kept_across_requests` (the whole placement kept).
"""

from __future__ import annotations

import pytest

from eagle3_check.jobs.gate.gate import GateInputs, edge_suites_check
from eagle3_check.jobs.suites.execute import SuiteEnv, run_case
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.judge.verdict import FAIL, PASS
from eagle3_check.mutants import factory
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.suites import SUITES, suite_cases
from eagle3_check.suites.toy import ToyProgram

STATE = SUITES["state"]
SEEDED = [("device_positions_sized_once", "device"), ("placement_kept_across_requests", "host"),
          ("placement_kept_across_requests", "device")]


@pytest.fixture(scope="module")
def env():
    return SuiteEnv.eager("tiny-llama")


@pytest.fixture(scope="module")
def fixed(program, tokenizer, hf_reference, fixture):
    """One given program, as the gate's edge suites see a .pte: spec wishes ignored."""
    return SuiteEnv.fixed(program, tokenizer, hf_reference, [p.text for p in fixture.prompts()],
                          tolerance_for("float32"), fixture=fixture.name)


def test_edge_opens_with_the_state_sequence_on_its_smallest_program(env):
    edge = suite_cases("edge")
    assert [c.name for c in edge[: len(STATE)]] == [c.name for c in STATE]
    assert sorted(c.name for c in edge) == sorted(c.name for cases in SUITES.values() for c in cases)
    first, last = STATE[0], STATE[-1]
    assert first.toy and last.toy and first.toy == last.toy
    small = dict(first.toy)["max_seq_len"]
    sizes = [dict(c.spec).get("max_seq_len", env.program_for({}).metadata()["get_max_seq_len"])
             for c in edge if not c.toy]
    assert small < min(sizes), "the edge route's first request must be its smallest program"


@pytest.mark.parametrize("placement", ["host", "device"])
def test_the_reference_passes_the_state_sequence_on_both_routes(placement, env, fixed):
    for e in (env, fixed):
        runner = ReferenceRunner(placement)
        assert [run_case(c, e, runner).status for c in STATE] == [PASS] * len(STATE)


@pytest.mark.parametrize("mutant, placement", SEEDED, ids=[f"{m}-{p}" for m, p in SEEDED])
def test_the_edge_route_catches_state_sized_by_the_first_request(mutant, placement, env):
    """The edge route's own order, one runner instance: it fails within the state sequence."""
    runner = factory(mutant, placement)()
    got = [run_case(c, env, runner).status for c in suite_cases("edge")[: len(STATE)]]
    assert FAIL in got, f"{mutant} survived the head of the edge route on {placement}: {got}"


def test_on_one_given_program_the_toy_is_what_changes_programs(fixed):
    """On a fixed program the state cases without the toy run one program: the positions buffer sized
    once survives them; with the toy first it fails (what the gate's edge suites now meet)."""
    plain = [c for c in STATE if not c.toy]
    runner = factory("device_positions_sized_once", "device")()
    assert [run_case(c, fixed, runner).status for c in plain] == [PASS] * len(plain)
    runner = factory("device_positions_sized_once", "device")()
    got = [run_case(c, fixed, runner).status for c in STATE]
    assert got[0] == PASS and FAIL in got[1:], got


@pytest.mark.parametrize("mutant, placement", SEEDED, ids=[f"{m}-{p}" for m, p in SEEDED])
def test_the_gate_edge_check_fails_a_runner_that_keeps_state(mutant, placement, program, tokenizer,
                                                             hf_reference, fixture):
    def inputs(plugin):
        return GateInputs(pte=None, tokenizer=tokenizer, target_dir=fixture.target_dir, prompts=fixture.prompts()[:1],
                          suite="state", fixture=fixture.name, plugin=plugin)

    good = edge_suites_check(program, inputs(ReferenceRunner(placement)), hf_reference)
    assert good.status == PASS, good.message
    bad = edge_suites_check(program, inputs(factory(mutant, placement)()), hf_reference)
    assert bad.status == FAIL and "state/" in bad.message, bad.message


def test_a_toy_case_skips_where_the_tokenizer_cannot_name_the_toy_ids(env):
    class Small:
        vocab_size = 300

    short = SuiteEnv(env.program_for, Small(), env.reference, env.prompts, env.tolerance, env.fixture)
    got = run_case(STATE[0], short, ReferenceRunner())
    assert got.status == "skip" and "names 300" in got.message
    toy = env.toy_program(STATE[0])
    assert isinstance(toy, ToyProgram) and toy is env.toy_program(STATE[0])
    assert toy.metadata()["get_max_seq_len"] == 24 and toy.metadata()["get_vocab_size"] == env.tokenizer.vocab_size
