"""Issue 31 item 2: chunked-prefill specs whose sliding window differs from max prefill / 2.

On the suite's first spec (max prefill 32, tiny-gemma4's window 16) "chunk = the window" and "chunk =
max prefill // 2" coincide; the window specs tell them apart in both directions and above max prefill
(tiny-gemma4's real window, tiny-llama without one), the toy cases declare a window on any program,
and Gemma 3's real window 512 (slow). The seeded `chunk_plan_ignores_window` fails each of them
where the program has a window, on both placements, by its call log.
"""

from __future__ import annotations

import pytest

from eagle3_check.jobs.suites.execute import SuiteEnv, run_case
from eagle3_check.judge.verdict import FAIL, PASS
from eagle3_check.mutants import factory
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.rules import prefill_chunk_size, prefill_chunks
from eagle3_check.status import SKIP
from eagle3_check.suites import SUITES
from eagle3_check.suites.chunked import GEMMA3, TOY_WINDOWS, WINDOW_SPECS

NAMES = {f"chunked-prefill/{n}" for n, _, _ in WINDOW_SPECS} | {f"chunked-prefill/toy-{n}" for n, _ in TOY_WINDOWS}
WINDOW_CASES = [c for c in SUITES["chunked-prefill"] if c.name in NAMES]
TINY_WINDOW = 16  # tiny-gemma4's sliding window (fixtures/tiny-gemma4/target/config.json)


@pytest.fixture(scope="module", params=["tiny-llama", "tiny-gemma4"])
def env(request):
    return SuiteEnv.eager(request.param)


def _rules(max_prefill: int, window: int | None) -> dict[str, int]:
    """The chunk each candidate rule gives: the stack top's (#20347), half alone, the window uncapped,
    one chunk of max prefill (before #20346)."""
    return {"stack top": prefill_chunk_size(max_prefill, window), "half": max_prefill // 2,
            "window uncapped": window or max_prefill // 2, "max prefill": max_prefill}


def test_the_window_specs_tell_every_chunk_rule_apart():
    """Every spec's window differs from max prefill / 2; over the specs, each other rule gives another
    chunk than the stack top's somewhere; the window is below half, above half, and above max."""
    assert len(WINDOW_CASES) == len(NAMES) == 6
    specs = [(dict(spec)["max_prefill"], TINY_WINDOW) for _, _, spec in WINDOW_SPECS]
    specs += [(dict(t)["max_prefill"], dict(t)["sliding_window"]) for _, t in TOY_WINDOWS]
    for fixture_specs in (specs[:3], specs[3:]):  # the fixtures' three, the toy's three
        assert {"below" if w < mp // 2 else "above-max" if w > mp else "above" for mp, w in fixture_specs} == \
            {"below", "above", "above-max"}
        for other in ("half", "window uncapped", "max prefill"):
            assert any(_rules(mp, w)["stack top"] != _rules(mp, w)[other] for mp, w in fixture_specs), other
    assert all(w != mp // 2 for mp, w in specs)
    assert _rules(768, 512)["stack top"] == 512 != _rules(768, 512)["half"] == 384  # Gemma 3's own spec
    assert _rules(1152, 512)["half"] == 576 > 512  # and the other direction


def test_each_window_case_plans_chunks_a_window_blind_rule_would_not(env):
    """On the case's own program: the harness's plan (the audit's) differs from max prefill // 2's
    wherever the program declares a window."""
    for case in WINDOW_CASES:
        md = (env.toy_program(case) if case.toy else env.program_for(dict(case.spec))).metadata()
        window = md.get("get_sliding_window")
        L = case.prompt.resolve_length(_md(md), md["get_chain_len"])
        plan = prefill_chunks(L, md["get_max_prefill_chunk"], md["get_min_prefill_chunk"], window)
        blind = prefill_chunks(L, md["get_max_prefill_chunk"], md["get_min_prefill_chunk"], None)
        assert len(plan) >= 2 and (plan != blind) == bool(window), (case.name, plan, blind)


def _md(raw):
    from eagle3_check.program.contract import read_metadata

    return read_metadata(raw)


@pytest.mark.parametrize("placement", ["host", "device"])
def test_the_reference_passes_and_a_window_blind_plan_fails(placement, env):
    ref = {c.name: run_case(c, env, ReferenceRunner(placement)) for c in WINDOW_CASES}
    assert {n: r.message for n, r in ref.items() if r.status != PASS} == {}
    bad = factory("chunk_plan_ignores_window", placement)()
    got = {c.name: run_case(c, env, bad) for c in WINDOW_CASES}
    windowed = env.fixture == "tiny-gemma4"
    for case in WINDOW_CASES:
        status = got[case.name].status
        if case.toy or windowed:
            assert status == FAIL and "prefill" in got[case.name].message, (case.name, got[case.name].message)
        else:  # no window: the blind plan is the rule's plan (an equivalent mutant here)
            assert status == PASS, (case.name, got[case.name].message)


def test_gemma3_cases_skip_on_the_tiny_fixtures(env):
    for case in (c for c in SUITES["chunked-prefill"] if c.fixture == GEMMA3):
        got = run_case(case, env, ReferenceRunner())
        assert got.status == SKIP and GEMMA3 in got.message


@pytest.mark.slow
def test_gemma3_real_window_both_directions():
    """gemma3-270m (window 512; cached conversion): chunks of 512 where max prefill / 2 is 384 and
    576; the reference passes, the window-blind plan fails by its call log (minutes on CPU)."""
    env = SuiteEnv.eager(GEMMA3)
    for case in (c for c in SUITES["chunked-prefill"] if c.fixture == GEMMA3):
        assert run_case(case, env, ReferenceRunner()).status == PASS, case.name
        got = run_case(case, env, factory("chunk_plan_ignores_window", "host")())
        assert got.status == FAIL and "prefill" in got.message, (case.name, got.message)
