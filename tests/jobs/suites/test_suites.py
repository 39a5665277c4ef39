"""The edge-case suites under pytest: every registered case, by name, plus proofs that the
checks bite (deliberately broken runners must fail the cases aimed at their bug)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from eagle3_check.fixtures.registry import DEFAULT_FIXTURE, list_fixtures
from eagle3_check.jobs.suites.execute import SKIP, SuiteEnv, run_case
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.judge.verdict import FAIL
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.suites import SUITES, all_cases, suite_cases

CASES = all_cases()
# every case on every embedded fixture; ids: the case name (prefixed by the fixture if not the default)
PARAMS = [pytest.param(fx, c, id=c.name if fx == DEFAULT_FIXTURE else f"{fx}:{c.name}")
          for fx in list_fixtures(real=False) for c in CASES]


@pytest.fixture(scope="session")
def suite_env(fixture, program, tokenizer, hf_reference):
    """The CLI's eager environment, reusing the session's default program and HF reference."""
    built = {(): program}

    def program_for(spec):
        key = tuple(sorted(spec.items()))
        if key not in built:
            built[key] = EagerBackend.from_fixture(fixture, **spec)
        return built[key]

    return SuiteEnv(program_for, tokenizer, hf_reference, [p.text for p in fixture.prompts()],
                    tolerance_for("float32"), fixture=fixture.name)


@pytest.fixture(scope="session")
def suite_envs(suite_env):
    """fixture name -> its eager environment, built on first use."""
    envs = {suite_env.fixture: suite_env}

    def get(name: str) -> SuiteEnv:
        if name not in envs:
            envs[name] = SuiteEnv.eager(name)
        return envs[name]

    return get


@pytest.fixture(scope="session")
def case_result(suite_envs):
    """(fixture name, case) -> its CaseResult, run once a session (test_case and the coverage test share it)."""
    done = {}

    def get(fixture_name, case):
        if (fixture_name, case.name) not in done:
            done[fixture_name, case.name] = run_case(case, suite_envs(fixture_name))
        return done[fixture_name, case.name]

    return get


@pytest.mark.parametrize("fixture_name, case", PARAMS)
def test_case(fixture_name, case, case_result):
    result = case_result(fixture_name, case)
    if result.status == SKIP:
        pytest.skip(result.message)
    assert result.status != FAIL, f"{case.name} ({case.what}): {result.message}"


REAL_ONLY = [c for c in CASES if c.fixture and c.fixture not in list_fixtures(real=False)]  # run by slow tests
TINY_CASES = [c for c in CASES if c not in REAL_ONLY]


@pytest.mark.parametrize("case", TINY_CASES, ids=[c.name for c in TINY_CASES])
def test_every_case_runs_on_some_embedded_fixture(case, case_result):
    """A case that skips on every embedded fixture tests nothing (issue 11 part 4): it must run
    (pass, tie or fail, not skip) on at least one; the default fixture is tried first. A case for a
    real-model fixture (gemma3-270m) runs in its slow test (tests/suites/test_chunk_window.py)."""
    order = sorted(list_fixtures(real=False), key=lambda f: f != DEFAULT_FIXTURE)
    why = {}
    for fx in order:
        result = case_result(fx, case)
        if result.status != SKIP:
            return
        why[fx] = result.message
    pytest.fail(f"{case.name} skips on every embedded fixture: {why}")


def test_registry_names_are_unique_and_prefixed_by_their_suite():
    names = [c.name for c in CASES]
    assert len(names) == len(set(names))
    for suite, cases in SUITES.items():
        assert cases and all(c.suite == suite for c in cases), suite


def test_unknown_suite_says_did_you_mean():
    with pytest.raises(Exception, match="did you mean 'context'"):
        suite_cases("contxt")


# --- the checks bite: broken runners ------------------------------------------------------


class _Tamper:
    """A runner that runs the reference runner, then breaks its result in one way."""

    def __init__(self, fn):
        self.fn = fn

    def run(self, program, tokenizer, prompt, options):
        return self.fn(ReferenceRunner().run(program, tokenizer, prompt, options), program)


def _emit_past_stop(r, _):
    return dataclasses.replace(r, tokens=r.tokens + [r.tokens[-1]]) if r.stop_reason == "stop" else r


def _drop_last(r, _):
    return dataclasses.replace(r, tokens=r.tokens[:-1])


def _claim_one_more(r, _):
    return dataclasses.replace(r, accepted=[a + 1 for a in r.accepted])


def _tau_with_bonus(r, _):
    return dataclasses.replace(r, tau=len(r.tokens) / r.rounds if r.rounds else 0.0)


def _seed_anyway(r, program):
    """Seeds the draft even when the bonus was a stop token."""
    if r.rounds == 0:
        L = len(r.prompt_ids)
        _, feature = program.prefill(torch.tensor([r.prompt_ids]), torch.arange(L))  # [1, L, H]
        program.draft_decode(torch.tensor([r.prompt_ids[1:] + r.tokens[:1]]), feature, torch.arange(L))
    return r


def _verify_past_end(r, program):
    md = program.metadata()
    end = md["get_max_seq_len"]
    program.target_verify(torch.tensor([[r.tokens[-1], r.tokens[-1]]]), torch.arange(end - 1, end + 1))
    return r


@pytest.mark.parametrize(
    "mutant, case_name, complaint",
    [
        (_emit_past_stop, "eos-in-block/middle", "diverged at token"),
        (_drop_last, "budget/full-end", "length"),
        (_claim_one_more, "acceptance/partial", "forced 2"),
        (_tau_with_bonus, "acceptance/zero", "tau"),
        (_seed_anyway, "eos-bonus/bonus-is-stop", "draft_decode calls"),
        (_verify_past_end, "context/room-1-zero", "crashed: IndexError"),
    ],
    ids=["emits-past-stop", "drops-last-token", "overclaims-acceptance", "tau-counts-bonus",
         "seeds-after-stop-bonus", "verifies-past-max-seq-len"],
)
def test_broken_runner_fails_its_case(mutant, case_name, complaint, suite_env):
    (case,) = suite_cases(case_name)
    result = run_case(case, suite_env, runner=_Tamper(mutant))
    assert result.status == FAIL, result.message
    assert complaint in result.message


# --- the CLI: check --list / --suite -----------------------------------------------------


def test_cli_list_shows_every_suite_and_case(capsys):
    from eagle3_check.cli import main

    assert main(["check", "--list"]) == 0
    out = capsys.readouterr().out
    assert all(f"{suite} (" in out for suite in SUITES)
    assert all(c.name in out for c in CASES)


def test_cli_unknown_suite_is_a_one_line_error(capsys):
    from eagle3_check.cli import main

    assert main(["check", "--suite", "contxt"]) == 2
    err = capsys.readouterr().err
    assert "unknown suite 'contxt'" in err and "did you mean 'context'" in err and err.count("\n") == 1


def test_cli_suite_json_passes_and_a_broken_runner_exits_1(capsys):
    import json

    from eagle3_check.cli import main

    assert main(["check", "--suite", "one-token", "--fixture", "tiny-llama", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (report,) = out["reports"]
    assert out["passed"] and report["counts"]["pass"] == len(SUITES["one-token"])
    rc = main(["check", "--suite", "eos-bonus/bonus-is-stop", "--fixture", "tiny-llama", "--no-progress",
               "--runner", "eagle3_check.mutants:speculate_after_stop_bonus"])
    assert rc == 1
    assert "FAIL" in capsys.readouterr().out


class _OffAt3:
    """A reference that prefers another token at emitted index 3, by a chosen margin over the
    runner's token (which it ranks 2nd)."""

    def __init__(self, inner, margin):
        self.inner, self.margin = inner, margin

    def greedy(self, ids, n, stop_ids=frozenset()):
        return self.inner.greedy(ids, n, stop_ids)

    def score(self, ids, tokens):
        s = self.inner.score(ids, tokens)
        s.argmax[3] = (s.argmax[3] + 1) % 512
        s.top2[3] = s.given_logit[3] = s.top1[3] - self.margin
        s.given_rank[3] = 2
        return s


@pytest.mark.parametrize("margin, status", [(0.0, "tie"), (1.0, FAIL)], ids=["tiny-margin-tie", "real-margin-fails"])
def test_a_divergence_at_a_numerical_tie_is_a_tie_not_a_failure(margin, status, suite_env):
    env = SuiteEnv(suite_env.program_for, suite_env.tokenizer, _OffAt3(suite_env.reference, margin),
                   suite_env.prompts, suite_env.tolerance, suite_env.fixture)
    (case,) = suite_cases("acceptance/full")
    result = run_case(case, env)
    assert result.status == status, result.message
    assert "at token 3" in result.message and result.details["ties"] == (status == "tie")


def test_a_tie_does_not_excuse_a_forced_acceptance_failure(suite_env):
    """A tie at token 3 and a runner that accepts off by one: the case fails on the acceptance."""
    from eagle3_check.mutants import factory

    env = SuiteEnv(suite_env.program_for, suite_env.tokenizer, _OffAt3(suite_env.reference, 0.0),
                   suite_env.prompts, suite_env.tolerance, suite_env.fixture)
    (case,) = suite_cases("acceptance/full")
    result = run_case(case, env, factory("accept_off_by_one")())
    assert result.status == FAIL, result.message


def test_cli_suite_with_the_self_reference(capsys):
    import json

    from eagle3_check.cli import main

    argv = ["check", "--suite", "eos-in-block/middle", "--fixture", "tiny-llama", "--reference", "self", "--json"]
    assert main(argv) == 0
    (report,) = json.loads(capsys.readouterr().out)["reports"]
    assert report["info"]["reference"] == "self" and report["counts"]["pass"] == 1
    rc = main(argv[:-1] + ["--no-progress", "--runner", "eagle3_check.mutants:stop_not_truncating"])
    assert rc == 1
