"""Issue 20's runner bugs, each caught: stop sources alone, prompt text at its edges, reported
stats, stale reads of graph-owned outputs (on CPU, through the eager program's own reused output
buffers) and state carried between requests of programs of different specs (on both placements).

Each seeded bug (`eagle3_check.mutants`) fails the suite case aimed at it; the reference runner
passes every one of those cases (tests/jobs/suites/test_suites.py runs them all).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

from eagle3_check.fixtures.registry import DEFAULT_FIXTURE
from eagle3_check.jobs.check.prompt_set import run_check, shuffled_prompts
from eagle3_check.jobs.suites.execute import SuiteEnv, run_case
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.judge.verdict import FAIL, PASS
from eagle3_check.mutants import factory
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.status import SKIP
from eagle3_check.suites import ORDERED, SUITES, all_cases, shuffled_cases, suite_cases


@pytest.fixture(scope="module")
def env():
    """The CLI's suite environment: eager programs with graph-owned (reused) output buffers."""
    return SuiteEnv.eager(DEFAULT_FIXTURE)


KILLS = [  # (mutant, the case aimed at it, placement)
    ("tokenizer_eos_ignored", "stop-set/tokenizer-eos", "host"),
    ("tokenizer_eos_ignored", "stop-set/tokenizer-eos-empty-list", "host"),
    ("program_eos_not_replacing", "stop-set/tokenizer-eos-shadowed", "host"),
    ("program_eos_ignored", "stop-set/program-eos-only", "host"),
    ("eos_id_ignored", "stop-set/eos-id", "host"),
    ("stop_token_looked_up", "stop-set/stop-token-not-key", "host"),
    ("stop_token_looked_up", "stop-set/vocab-key-multi", "host"),
    ("prompt_stripped", "options/leading-space", "host"),
    ("prompt_stripped", "options/trailing-newline", "host"),
    ("prompt_stripped", "options/only-whitespace", "device"),
    ("prompt_whitespace_collapsed", "options/inner-newlines", "host"),
    ("text_without_bonus", "acceptance/full", "host"),
    ("accepted_capped_by_budget", "budget/full-end-2", "host"),
    ("max_new_reported_uncapped", "context/cap-1-past", "host"),
    ("chunk_features_not_copied", "chunked-prefill/chunk+1", "host"),
    ("chunk_features_not_copied", "chunked-prefill/chunk+1", "device"),
    ("proposals_kept_as_views", "acceptance/full", "host"),
]


@pytest.mark.parametrize("mutant, case_name, placement", KILLS, ids=[f"{m}-{c}-{p}" for m, c, p in KILLS])
def test_seeded_bug_fails_its_case(mutant, case_name, placement, env):
    (case,) = suite_cases(case_name)
    assert run_case(case, env, ReferenceRunner(placement)).status == PASS, "the reference must pass first"
    result = run_case(case, env, factory(mutant, placement)())
    assert result.status == FAIL, f"{mutant} survived {case_name} on {placement}: {result.message}"


def test_every_new_stop_source_case_runs():
    """The new rule-2 sources are cases of the stop-set suite, each alone (no other source set)."""
    vias = {s.via for c in SUITES["stop-set"] for s in c.stop_at}
    assert {"program_eos_only", "tokenizer_eos", "tokenizer_eos_empty_list", "tokenizer_eos_shadowed",
            "stop_token_not_key", "vocab_key_multi"} <= vias


def test_stop_token_strings_differ_from_vocabulary_keys(env):
    """The fixture tokenizer tells encoding from lookup apart (what stop-token-not-key and
    vocab-key-multi rely on): ' the' is one token but no key; the key 'Ġthe' encodes to several."""
    tok = env.tokenizer
    (the,) = tok.encode(" the")
    assert tok.token_to_id(" the") is None and tok.id_to_token(the) == "Ġthe"
    assert len(tok.encode("Ġthe")) > 1


@pytest.mark.parametrize("placement", ["host", "device"])
def test_state_suite_catches_a_placement_kept_across_programs(placement, env):
    """One runner instance through the state suite (a small program and K, then the default program
    with K at its top, then the small one again): the reference passes all, a runner that keeps the
    first request's placement fails."""
    ref, bad = ReferenceRunner(placement), factory("placement_kept_across_requests", placement)()
    assert [run_case(c, env, ref).status for c in SUITES["state"]] == [PASS] * len(SUITES["state"])
    got = [run_case(c, env, bad).status for c in SUITES["state"]]
    assert FAIL in got, f"placement_kept_across_requests survived the state suite on {placement}: {got}"


@pytest.mark.parametrize("placement", ["host", "device"])
def test_shuffled_cases_of_different_specs_on_one_runner(placement, env):
    """A shuffled (seeded) sequence of cases on programs of four specs, one runner instance: the
    reference passes every one in that order too."""
    names = ["context/room-1-full", "chain/k2", "chunked-prefill/chunk+1", "prefill-range/max-default-spec",
             "acceptance/partial", "chain/hi"]
    cases = shuffled_cases([c for n in names for c in suite_cases(n)], seed=7)
    assert [c.name for c in cases] != names
    runner = ReferenceRunner(placement)
    got = {c.name: run_case(c, env, runner) for c in cases}
    assert {n: r.status for n, r in got.items() if r.status not in (PASS, SKIP)} == {}


def test_shuffle_is_seeded_reproducible_and_keeps_ordered_suites():
    cases = all_cases()
    a, b, c = shuffled_cases(cases, 1), shuffled_cases(cases, 1), shuffled_cases(cases, 2)
    assert [x.name for x in a] == [x.name for x in b] != [x.name for x in c]
    assert sorted(x.name for x in a) == sorted(x.name for x in cases) and a != cases
    for name in ORDERED:
        assert [x.name for x in a if x.suite == name] == [x.name for x in SUITES[name]]
    prompts = list(range(14))
    assert shuffled_prompts(prompts, 3) == shuffled_prompts(prompts, 3) != prompts


def test_cli_check_shuffle_prints_its_order(capsys):
    from eagle3_check.cli import main

    rc = main(["check", "--fixture", "tiny-llama", "--max-new-tokens", "4", "--shuffle", "5", "--no-progress", "--json"])
    err = capsys.readouterr().err
    line = next(x for x in err.splitlines() if x.startswith("order: --shuffle 5: "))
    from eagle3_check.fixtures.registry import load_fixture

    want = [p.id for p in shuffled_prompts(load_fixture().prompts(), 5)]
    assert line.removeprefix("order: --shuffle 5: ").split(", ") == want and rc == 0


def test_eager_outputs_are_graph_owned_when_asked(fixture):
    """reuse_outputs: an output is a view of the method's one buffer, overwritten by its next call
    (any length); without it every call returns fresh tensors."""
    for reuse in (True, False):
        p = EagerBackend.from_fixture(fixture, reuse_outputs=reuse)
        p.prefill(torch.tensor([[2, 5, 6, 7]]), torch.arange(4))
        ids, g = p.draft_decode(torch.tensor([[5, 6, 7, 8]]), torch.randn(1, 4, p.module.draft.cfg.hidden_size),
                                torch.arange(4))
        first = (ids.clone(), g.clone())
        p.draft_decode(torch.tensor([[9]]), g[:, -1:].clone(), torch.tensor([4]))
        changed = not torch.equal(ids, first[0]) or not torch.equal(g, first[1])
        assert changed == reuse


class _Lying:
    """The reference runner, then one reported field changed (what a runner may get wrong while its
    tokens are right)."""

    def __init__(self, field: str, value):
        self.field, self.value = field, value

    def run(self, program, tokenizer, prompt, options):
        run = ReferenceRunner().run(program, tokenizer, prompt, options)
        value = self.value(run) if callable(self.value) else self.value
        return dataclasses.replace(run, **{self.field: value})


LIES = [
    ("text", lambda r: r.text + " "),
    ("max_new", lambda r: r.max_new + 1),
    ("accepted", lambda r: r.accepted[:-1] + [max(r.accepted[-1] - 1, 0) if r.accepted[-1] else 1]),
    ("method_calls", lambda r: {**r.method_calls, "draft_decode": r.method_calls["draft_decode"] - 1}),
    ("method_ms", lambda r: {**r.method_ms, "prefill": -1.0}),
    ("notes", "not a list"),
    ("stop_reason", lambda r: "stop" if r.stop_reason != "stop" else "max_new"),
]


@pytest.mark.parametrize("field, lie", LIES, ids=[f for f, _ in LIES])
def test_every_reported_field_is_audited(field, lie, program, tokenizer, hf_reference, fixture):
    prompts = fixture.prompts()[:1]
    opts = RunOptions(max_new_tokens=10)
    honest = run_check(program, tokenizer, hf_reference, prompts, opts, tolerance_for("float32"))
    assert honest.passed and honest.outcomes[0].run.rounds > 0
    report = run_check(program, tokenizer, hf_reference, prompts, opts, tolerance_for("float32"),
                       runner=_Lying(field, lie))
    verdict = report.outcomes[0].verdict
    assert verdict.status == FAIL, f"a wrong {field} passed: {verdict.message}"
    assert field.split("_")[0] in verdict.message or field == "accepted" and "a =" in verdict.message
