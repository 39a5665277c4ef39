"""Issue 50's suite cases, each against the class of runner bug it is aimed at: a K clamped into a
narrow verify range (verify-range), a runner-PR runner that ignores -k (every K case under
runner-pr), text that loses its trailing whitespace (text-end). The reference runner passes each
under every profile; the mutant fails the case named."""

from __future__ import annotations

import pytest

from eagle3_check.jobs.suites.execute import SELF, SuiteEnv, run_case
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.mutants import factory
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.profiles import declare
from eagle3_check.suites import suite_cases
from eagle3_check.suites.toy import (
    LO,
    SPAN,
    ToyProgram,
    VerifyRangeError,
    greedy,
    previous_token,
    prompt_to,
)

PROFILES = ("design", "k-runtime", "chunked-prefill", "runner-pr")
# verify range [2, 5] (get_chain_len 3) and [3, 3] (get_chain_len 2): the K each profile runs, None = refused
WANT = {
    "design": {"2-5-k0": None, "2-5-k1": 1, "2-5-k2": 2, "2-5-k4": 4, "2-5-k5": None, "2-5-k7": None, "2-5-k8": None,
               "3-3-k0": None, "3-3-k1": None, "3-3-k2": 2, "3-3-k3": None, "3-3-k8": None},
    "k-runtime": {"2-5-k0": 3, "2-5-k1": 1, "2-5-k2": 2, "2-5-k4": 4, "2-5-k5": None, "2-5-k7": None, "2-5-k8": None,
                  "3-3-k0": 2, "3-3-k1": None, "3-3-k2": 2, "3-3-k3": None, "3-3-k8": None},
    "runner-pr": {"2-5-k0": None, "2-5-k1": None, "2-5-k2": None, "2-5-k4": None, "2-5-k5": None, "2-5-k7": None,
                  "2-5-k8": None, "3-3-k0": None, "3-3-k1": None, "3-3-k2": 2, "3-3-k3": None, "3-3-k8": None},
}
WANT["chunked-prefill"] = WANT["k-runtime"]


@pytest.fixture(scope="module")
def env(program, tokenizer, fixture):
    return SuiteEnv.fixed(program, tokenizer, SELF, [p.text for p in fixture.prompts()], tolerance_for("float32"),
                          fixture=fixture.name)


def _given(name):
    runner = ReferenceRunner()
    declare(runner, name)
    return runner


def test_previous_token_inverts_the_toy_chain():
    assert previous_token(304) == 443 and greedy([443], 1) == [304]
    assert all(greedy([previous_token(u)], 1) == [u] for u in range(LO, LO + SPAN))
    assert greedy(prompt_to(305, 6, [1, 2]), 6)[-1] == 305


def test_the_toy_refuses_a_window_outside_its_verify_range():
    import torch

    toy = ToyProgram(verify_range=(2, 5))
    toy.target_verify(torch.tensor([[300] * 5]), torch.arange(5))
    with pytest.raises(VerifyRangeError, match=r"window C = 6 is outside the method's bounds \[2, 5\]"):
        toy.target_verify(torch.tensor([[300] * 6]), torch.arange(6))


@pytest.mark.parametrize("profile", PROFILES)
def test_the_reference_runs_clamps_or_refuses_each_k_as_its_profile_says(env, profile):
    for case in suite_cases("verify-range"):
        r = run_case(case, env, _given(profile))
        want = WANT[profile][case.name.split("/")[1]]
        assert r.status == "pass", (profile, case.name, r.message)
        if want is None:
            assert r.message.startswith("error: chain length K ="), (profile, case.name, r.message)
        else:
            assert r.details["K"] == want and r.details["tokens"] == 10, (profile, case.name, r.details)


def test_a_k_clamped_into_the_programs_range_fails_where_the_range_is_narrow(env):
    mutant = factory("k_clamped_to_program_range")
    got = {c.name: run_case(c, env, mutant()) for c in suite_cases("verify-range")}
    r = got["verify-range/2-5-k7"]
    assert r.status == "fail" and r.message == "expected OptionError, but the run emitted 10 tokens (max_new)"
    failed = sorted(n.split("/")[1] for n, r in got.items() if r.status == "fail")
    assert failed == ["2-5-k5", "2-5-k7", "2-5-k8", "3-3-k1", "3-3-k3", "3-3-k8"]
    for name in ("chain/hi+1", "chain/lo-1"):  # on the fixture's range [1, 7] it cannot be told apart
        assert run_case(suite_cases(name)[0], env, mutant()).status == "pass"


def test_a_seed_like_runner_whose_program_refuses_the_window_passes(env):
    """k-runtime as main.cpp runs it: K 7 clamped (stays 7), no range check of its own; the toy's
    target_verify refuses C = 8: the runtime's error, which the case takes as the refusal."""
    from eagle3_check.program.contract import ProgramWrapper

    class Unchecked(ProgramWrapper):  # the seed reads no verify range: its clamp is all it checks
        def metadata(self):
            return {k: v for k, v in self.inner.metadata().items() if "verify_len" not in k}

    class SeedLike(ReferenceRunner):
        profile = "k-runtime"

        def run(self, program, tokenizer, prompt, options):
            return super().run(Unchecked(program), tokenizer, prompt, options)

    r = run_case(suite_cases("verify-range/2-5-k7")[0], env, SeedLike())
    assert r.status == "pass" and "the program refused target_verify" in r.message, r.message
    assert "the runtime's error" in r.message


def test_a_runner_pr_runner_that_ignores_k_fails_every_k_case(env):
    mutant = factory("runner_pr_ignores_k")
    for name in ("chain/lo", "chain/k3", "verify-range/2-5-k1"):
        r = run_case(suite_cases(name)[0], env, mutant())
        assert r.status == "fail" and r.message.startswith("expected OptionError, but the run emitted"), (name, r.message)
    assert run_case(suite_cases("chain/k4")[0], env, mutant()).status == "pass"  # get_chain_len itself runs


@pytest.mark.parametrize("fixture_name", ["tiny-llama", "tiny-gemma4"])
def test_text_ending_in_whitespace_passes_and_a_stripped_text_fails(fixture_name):
    env = SuiteEnv.eager(fixture_name, reference="self")
    cases = suite_cases("text-end")
    assert {c.prompt.ends_in for c in cases} == {" ", "\n", "\t"}
    for case in cases:
        r = run_case(case, env, ReferenceRunner())
        assert r.status == "pass" and r.details["tokens"] == dict(case.options)["max_new_tokens"], (case.name, r)
        bad = run_case(case, env, factory("text_rstripped")())
        assert bad.status == "fail" and bad.message.startswith("text: the run reports"), (case.name, bad.message)


@pytest.mark.parametrize("ending", [" ", "\n", "\t"], ids=["space", "newline", "tab"])
def test_a_binary_that_strips_its_printed_text_fails_by_bytes(tokenizer, fixture, ending):
    """The binary route's side of the text rule: a text-only binary's bytes are judged against the
    reference tokens' pieces, so output ending in whitespace and printed stripped fails at its end
    (the toy's chain spells such an output on the fixture's vocabulary)."""
    from eagle3_check.judge.binary import Request, judge
    from eagle3_check.runners.binary.byte_pieces import BytePieces
    from eagle3_check.runners.binary.protocol import ExecOutput
    from eagle3_check.suites.text_end import ending_prompts

    pieces = BytePieces.from_tokenizer_json(fixture.tokenizer_path)
    ref = greedy(ending_prompts(tokenizer, [], 9, ending, set())[0], 9)
    req = Request(1, 4, 9, 64, frozenset())

    def verdict(text: bytes):
        return judge(ExecOutput(1, 4, 9, text, 2, 9, 4.0, 0, 0), ref, [9.0] * 9, pieces, req)

    assert pieces.of(ref).endswith(ending.encode()) and verdict(pieces.of(ref)).status == "pass"
    bad = verdict(pieces.of(ref).rstrip())
    assert bad.status == "fail" and bad.mode == "bytes", bad.message
