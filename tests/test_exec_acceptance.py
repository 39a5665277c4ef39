"""binary/acceptance.py: a binary's rounds and tau held to our runner's exactly."""

from eagle3_check.binary.acceptance import acceptance_problem, our_run
from eagle3_check.run.options import RunOptions


def test_the_same_rounds_and_tau_pass():
    assert acceptance_problem(3, 3.0, 10, [4, 2, 0], 10) is None
    assert acceptance_problem(3, 3.0, 10, [4, 2, 0], 10, binary_accepted=[4, 2, 0]) is None


def test_one_round_more_with_tau_recomputed_fails_though_within_the_bounds():
    """R = 4 lies in ceil(9 / 5) = 2 <= R <= 9: only ours tells it apart."""
    msg = acceptance_problem(4, 2.25, 10, [4, 2, 0], 10)
    assert msg == ("acceptance: the binary reports 4 rounds (tau 2.250), our runner on the same program and options 3 "
                   "(tau 3.000; accepted per round [4, 2, 0]); the binary prints no acceptance per round, so the first "
                   "round that differs is not named")


def test_the_first_round_that_differs_is_named_with_a_draft_near_tie():
    msg = acceptance_problem(4, 2.25, 10, [4, 2, 0], 10, binary_accepted=[4, 1, 1, 0], draft_margins=[3.0, 0.125, 2.0])
    assert msg.endswith("first differs at round 2: the binary accepted 1, ours 2 (a draft near-tie explains it: the "
                        "draft's margin there is 0.125 < 0.5)")
    wide = acceptance_problem(4, 2.25, 10, [4, 2, 0], 10, binary_accepted=[4, 1, 1, 0], draft_margins=[3.0, 2.0, 2.0])
    assert wide.endswith("first differs at round 2: the binary accepted 1, ours 2")


def test_tau_alone_differs_and_another_length_is_left_to_the_verdict():
    assert acceptance_problem(3, 2.0, 10, [4, 2, 0], 10).startswith("acceptance: the binary reports 3 rounds (tau 2.000)")
    assert acceptance_problem(4, 2.25, 11, [4, 2, 0], 10) is None


def test_our_run_follows_the_binarys_profile(program, tokenizer):
    opts = RunOptions(max_new_tokens=8, chain_len=8)
    run = our_run(program, tokenizer, "Count to three.", opts, "k-runtime")  # --chain 8 clamped to 7
    assert run.k == 7 and acceptance_problem(run.rounds, run.tau, len(run.tokens), run.accepted, len(run.tokens)) is None


def test_a_passing_verdict_fails_when_the_binary_reports_one_round_more(program, tokenizer):
    from eagle3_check.binary.acceptance import held_to_ours
    from eagle3_check.binary.judge import ExecVerdict
    from eagle3_check.binary.protocol import ExecOutput

    opts = RunOptions(max_new_tokens=12)
    ours = our_run(program, tokenizer, "Count to three.", opts, "chunked-prefill")
    n, r = len(ours.tokens), ours.rounds

    def verdict_for(rounds):
        out = ExecOutput(len(ours.prompt_ids), ours.k, 12, b"", rounds, n, (n - 1) / rounds, 0, 0)
        v = ExecVerdict("pass", "identical", judged=n)
        held_to_ours(v, out, list(ours.tokens), program, tokenizer, "Count to three.", opts, "chunked-prefill")
        return v

    assert verdict_for(r).status == "pass"
    v = verdict_for(r + 1)
    assert v.status == "fail" and v.message.startswith(f"acceptance: the binary reports {r + 1} rounds"), v.message
