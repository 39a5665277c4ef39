"""runners/binary/acceptance.py: a binary's rounds and tau held to our runner's exactly."""

from eagle3_check.runners.binary.acceptance import acceptance_problem, our_run
from eagle3_check.runners.options import RunOptions


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
    from eagle3_check.judge.binary import ExecVerdict
    from eagle3_check.runners.binary.acceptance import held_to_ours
    from eagle3_check.runners.binary.protocol import ExecOutput

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


def _seed_stdout(pieces, run, rounds: int) -> bytes:
    n = len(run.tokens)
    return (f"Prompt tokens: {len(run.prompt_ids)}, chain K={run.k}, max_new={run.max_new}\n".encode()
            + pieces.of(list(run.tokens))
            + f"\n[timing] verify=1ms draft=1ms over {rounds} rounds (1.0 / 1.0 ms per round)\n".encode()
            + b"\n--- EAGLE-3 speculative decode ---\n"
            + f"generated {n} tokens in {rounds} rounds (tau={(n - 1) / rounds:.3f})\n".encode())


def test_check_through_a_text_only_binary_holds_its_rounds_to_ours(program, tokenizer, fixture, runner_writable):
    """`check --runner exec:` end to end on a shell-script binary that prints our own run's bytes:
    with our R it passes; with one round more (tau recomputed, still within the bounds) it fails.
    (Its files sit where the binary's account may read them: as root it runs as `nobody`.)"""
    tmp_path = runner_writable
    import dataclasses

    from eagle3_check.jobs.check.binary import run_exec_check
    from eagle3_check.judge.self_ref import SelfReference
    from eagle3_check.judge.tolerance import tolerance_for
    from eagle3_check.program.contract import ProgramWrapper
    from eagle3_check.runners.binary.byte_pieces import BytePieces
    from eagle3_check.runners.binary.runner import ExecRunner

    class NamedPte(ProgramWrapper):
        path = "model.pte"  # runners.binary.runner.program_file reads it; the script never opens it

    prompt = fixture.prompts()[0]
    opts = RunOptions(max_new_tokens=12)
    run = our_run(program, tokenizer, prompt.text, opts, "chunked-prefill")
    pieces = BytePieces.from_tokenizer_json(tokenizer.path)
    assert run.rounds >= 2 and run.rounds + 1 <= len(run.tokens) - 1  # one more round is within the bounds
    verdicts = {}
    for name, rounds in (("same", run.rounds), ("one-more", run.rounds + 1)):
        (tmp_path / f"{name}.out").write_bytes(_seed_stdout(pieces, run, rounds))
        exe = tmp_path / name
        exe.write_text(f'#!/bin/sh\ncase "$*" in *--help*) printf "  -model_path (m) type: string\\n  -chain (K) '
                       f'type: int32\\n  -prompt_file (f) type: string\\n"; exit 1;; esac\ncat "{tmp_path / name}.out"\n')
        exe.chmod(0o755)
        report = run_exec_check(ExecRunner(f"exec:{exe}", timeout=30.0), NamedPte(program), tokenizer,
                                SelfReference(program), [prompt], dataclasses.replace(opts), tolerance=tolerance_for("float32"))
        verdicts[name] = report.outcomes[0].verdict
    assert verdicts["same"].status == "pass", verdicts["same"].message
    bad = verdicts["one-more"]
    assert bad.status == "fail" and bad.message.startswith(
        f"acceptance: the binary reports {run.rounds + 1} rounds"), bad.message
    assert f"accepted per round {run.accepted}" in bad.message
