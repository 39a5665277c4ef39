"""Runner profiles for in-process runners (issue 28 item 2): a runner declares its profile (ours:
`design`, DESIGN §2 as written; one that declares none is taken as the newest), `--runner-profile`
gives one, and every edge case's expectation follows it: K out of range an error or a run of the
clamped K (the K run checked), L past max prefill an error or a chunked run."""

from __future__ import annotations

import json

import pytest

from eagle3_check.errors import InputError, OptionError
from eagle3_check.jobs.suites.execute import SELF, SuiteEnv
from eagle3_check.jobs.suites.report import run_suite
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.runners.profiles import (
    DESIGN_RULES,
    NEWEST,
    RUNNER_PR,
    declare,
    declared,
    profile_info,
)
from eagle3_check.runners.watchdog import TimeLimited
from eagle3_check.suites import suite_cases


class Undeclared:  # a plug-in that says nothing about its rules
    def run(self, program, tokenizer, prompt, options):
        return ReferenceRunner().run(program, tokenizer, prompt, options)


class ClampOffByOne(ReferenceRunner):
    """Declares k-runtime but clamps K into [1, 6] (a seeded bug: main.cpp's clamp is [1, 7])."""

    profile = "k-runtime"

    def run(self, program, tokenizer, prompt, options):
        if options.chain_len is not None and options.chain_len > 6:
            options = RunOptions(**{**options.__dict__, "chain_len": 6})
        return super().run(program, tokenizer, prompt, options)


def test_ours_declares_design_an_undeclared_one_is_the_newest_and_a_given_one_wins():
    assert declared(ReferenceRunner()) == (DESIGN_RULES, "declared (ReferenceRunner.profile = 'design')")
    assert declared(TimeLimited(Undeclared(), 5.0)) == (NEWEST, "the newest: Undeclared declares no profile")
    runner = ReferenceRunner()
    declare(TimeLimited(runner, 5.0), "runner-pr")  # through the time limit's wrapper
    assert declared(runner) == (RUNNER_PR, "given (--runner-profile runner-pr)")
    assert profile_info(runner) == {"name": "runner-pr", "pr": "#20156", "commit": "ac69057c9b",
                                    "found": "given (--runner-profile runner-pr)"}
    assert declared(ReferenceRunner())[0] is DESIGN_RULES  # the class keeps its own declaration
    with pytest.raises(InputError, match="^--runner-profile newest; expected one of runner-pr, k-runtime"):
        declare(runner, "newest")


def test_the_runner_pr_profile_refuses_a_k_it_has_no_flag_for(program, tokenizer, fixture):
    runner = ReferenceRunner()
    declare(runner, "runner-pr")
    with pytest.raises(OptionError, match=r"^chain length K = 3 under runner profile runner-pr \(#20156\)"):
        runner.run(program, tokenizer, fixture.prompts()[0].text, RunOptions(max_new_tokens=4, chain_len=3))


@pytest.fixture(scope="module")
def env(program, tokenizer, fixture):
    return SuiteEnv.fixed(program, tokenizer, SELF, [p.text for p in fixture.prompts()], tolerance_for("float32"),
                          fixture=fixture.name)


def _suite(env, runner, names):
    rep = run_suite("edge", [c for n in names for c in suite_cases(n)], env, runner)
    return {r.name: r for r in rep.results}


EDGE = ["chain/lo-1", "chain/hi+1", "prefill-range/max+1"]


def _given(name):
    runner = ReferenceRunner()
    declare(runner, name)
    return runner


@pytest.mark.parametrize("profile, want", [
    ("design", {"chain/lo-1": ("pass", None), "chain/hi+1": ("pass", None), "prefill-range/max+1": ("pass", None)}),
    ("k-runtime", {"chain/lo-1": ("pass", 4), "chain/hi+1": ("pass", 7), "prefill-range/max+1": ("pass", None)}),
    ("chunked-prefill", {"chain/lo-1": ("pass", 4), "chain/hi+1": ("pass", 7), "prefill-range/max+1": ("pass", 4)}),
], ids=["design-errors", "k-runtime-clamps", "chunked-prefill-clamps-and-chunks"])
def test_the_edge_expectations_follow_the_profile(env, profile, want):
    got = _suite(env, _given(profile), EDGE)
    for name, (status, k) in want.items():
        r = got[name]
        assert r.status == status, (name, r.status, r.message)
        if k is None:  # the case stayed an error case: the error is what passed
            assert r.message.startswith("error: "), (name, r.message)
        else:  # run, with the profile named in the message and the K run checked
            assert r.details["K"] == k and r.details["profile"] == profile, (name, r.details)
            assert f"profile {profile}" in r.message and "instead of refusing it" in r.message, r.message


def test_a_k_clamp_off_by_one_fails_with_the_k_it_ran(env):
    got = _suite(env, ClampOffByOne(), ["chain/hi+1", "chain/lo-1"])
    assert got["chain/lo-1"].status == "pass", got["chain/lo-1"].message
    r = got["chain/hi+1"]
    assert r.status == "fail" and "the runner ran K = 6, expected K = 7 (profile k-runtime (#20345) runs --chain=8 " \
        "as K = 7" in r.message, r.message


def test_a_profile_that_does_not_chunk_skips_the_chunked_cases_and_runner_pr_refuses_a_k(env):
    got = _suite(env, _given("k-runtime"), ["chunked-prefill/chunk"])
    assert got["chunked-prefill/chunk"].status == "skip", got["chunked-prefill/chunk"].message
    assert "the runner's profile k-runtime (#20345) does not chunk" in got["chunked-prefill/chunk"].message
    got = _suite(env, _given("runner-pr"), ["chain/k3", "chain/k4"])  # no --chain: K 3 is refused, K 4 runs
    assert got["chain/k3"].status == "pass" and "has no --chain: K = 3" in got["chain/k3"].message
    assert got["chain/k3"].message.startswith("error: chain length K = 3 under runner profile runner-pr")
    assert got["chain/k4"].status == "pass" and got["chain/k4"].details["K"] == 4


@pytest.mark.parametrize("argv, want", [
    ([], {"name": "design", "pr": "DESIGN §2", "commit": "rules 1-10",
          "found": "declared (ReferenceRunner.profile = 'design')"}),
    (["--runner-profile", "k-runtime", "-k", "8"], {"name": "k-runtime", "pr": "#20345", "commit": "5ac44d4af1",
                                                      "found": "given (--runner-profile k-runtime)"}),
], ids=["declared", "given-k-runtime-clamps-8"])
def test_check_json_and_text_name_the_profile_and_how_it_was_found(capsys, argv, want):
    from eagle3_check.cli import main

    base = ["check", "--fixture", "tiny-llama", "--reference", "self", "--max-new-tokens", "4", "--prompt", "Count to three.", "--no-progress"]
    assert main([*base, "--json", *argv]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["info"]["profile"] == want
    assert report["k"] == (7 if argv else 4)  # --chain 8 clamped to 7 under k-runtime
    assert main([*base, *argv]) == 0
    assert f"runner profile {want['name']} ({want['pr']}, {want['commit']}): {want['found']}" in capsys.readouterr().out


@pytest.mark.parametrize("runner, profile, chunked", [
    (None, "chunked-prefill", True),  # our runner by the stack top's rules: every request chunked
    (None, "k-runtime", False),
    (None, None, False),
    ("exec:./runner", "chunked-prefill", False),  # a binary chunks by itself (its own route)
], ids=["ours-chunked-prefill", "ours-k-runtime", "ours-declared", "binary"])
def test_a_given_profile_that_chunks_asks_every_request_chunked(runner, profile, chunked):
    from eagle3_check.jobs.common.config import Config
    from eagle3_check.jobs.common.world import given_options

    cfg = Config(command="gate", runner=runner, runner_profile=profile, chunked_prefill=False,
                 present=frozenset({"chunked_prefill"}))
    assert given_options(cfg)["chunked_prefill"] is chunked
