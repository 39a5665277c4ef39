"""Chunked prefill (DESIGN §2 rule 4): the chunk plan, pinned by hand, and the runner loop's chunks."""

import pytest

from eagle3_check.errors import OptionError
from eagle3_check.runners.instrument import RecordingProgram
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions
from eagle3_check.runners.rules import prefill_chunks
from eagle3_check.suites import toy

# (L, max_prefill, min_prefill, sliding_window) -> chunks, each worked out by hand from the rule
PLANS = [
    ("docstring-example", (40, 32, 9, None), [16, 15, 9]),  # 16 leaves 24; 16 would leave 8 < 9 -> 15; 9
    ("one-chunk", (10, 32, 9, None), [10]),
    ("exact-chunk", (16, 32, 9, None), [16]),
    ("chunk+1-tail-rule", (17, 32, 9, None), [8, 9]),  # 16 would leave 1 < 9 -> 17 - 9 = 8
    ("two-chunks", (32, 32, 9, None), [16, 16]),
    ("two-chunks+min", (41, 32, 9, None), [16, 16, 9]),  # tail exactly min_prefill: not shortened
    ("window", (40, 32, 9, 16), [16, 15, 9]),
    ("window-small", (20, 32, 1, 8), [8, 8, 4]),  # min 1: no tail is too short
    ("window-capped", (70, 32, 1, 64), [32, 32, 6]),  # window 64 > max_prefill: chunk 32
    ("odd-max", (10, 7, 1, None), [3, 3, 3, 1]),  # max_prefill // 2 = 3
    ("min-4", (18, 47, 4, 8), [8, 6, 4]),  # 8 would leave 2 < 4 -> 10 - 4 = 6
    ("chunk-below-min", (12, 47, 9, 4), [3, 9]),  # 4 would leave 8 < 9 -> 3; then the rest (9 = min)
]


@pytest.mark.parametrize("args,want", [p[1:] for p in PLANS], ids=[p[0] for p in PLANS])
def test_prefill_chunk_plan(args, want):
    got = prefill_chunks(*args)
    assert got == want
    assert sum(got) == args[0]


def _opts(**kw):
    base = dict(stop_ids=(), stop_token=None, eos_id=None, max_new_tokens=12, chain_len=4, chunked_prefill=True)
    return RunOptions(**{**base, **kw})


@pytest.mark.parametrize("placement", ["host", "device"])
def test_loop_prefills_and_seeds_in_the_plan_chunks(tokenizer, placement):
    """L = 40 on a toy with prefill range [9, 32]: prefill and seed in [16, 15, 9] at their positions."""
    prompt = list(range(300, 340))
    prog = RecordingProgram(toy.ToyProgram(max_seq_len=64, min_prefill=9, max_prefill=32))
    result = ReferenceRunner(placement).run(prog, tokenizer, prompt, _opts())
    pre = prog.of("prefill")
    assert [c.positions for c in pre] == [list(range(0, 16)), list(range(16, 31)), list(range(31, 40))]
    assert [t for c in pre for t in c.tokens] == prompt
    assert result.tokens[0] == pre[-1].out_ids[0] == toy.next_token(prompt[-1])  # the last chunk's bonus
    seeds = prog.of("draft_decode")[:3]
    assert [c.positions for c in seeds] == [c.positions for c in pre]
    assert [t for c in seeds for t in c.tokens] == prompt[1:] + [result.tokens[0]]
    for s, p in zip(seeds, pre):  # each seed chunk gets its own prefill chunk's features
        assert s.feature.equal(p.out_feature)
    assert result.tokens == toy.greedy(prompt, len(result.tokens))


def test_chunked_matches_unchunked_on_the_real_fixture(program, tokenizer):
    """Same tokens with and without chunking where both apply (L within the prefill range)."""
    text = "The quick brown fox jumps over the lazy dog, again and again."
    plain = ReferenceRunner().run(program, tokenizer, text, RunOptions(max_new_tokens=12))
    chunked = ReferenceRunner().run(program, tokenizer, text, RunOptions(max_new_tokens=12, chunked_prefill=True))
    assert chunked.tokens == plain.tokens


@pytest.mark.parametrize("L,ok", [(8, False), (9, True), (63, True), (64, False)], ids=["min-1", "min", "msl-1", "msl"])
def test_chunked_prompt_length_limits(tokenizer, L, ok):
    prog = RecordingProgram(toy.ToyProgram(max_seq_len=64, min_prefill=9, max_prefill=32))
    run = lambda: ReferenceRunner().run(prog, tokenizer, list(range(300, 300 + L)), _opts())  # noqa: E731
    if ok:
        assert len(run().tokens) >= 1
    else:
        with pytest.raises(OptionError, match=f"prompt length L = {L}"):
            run()
        assert not prog.calls


def test_without_the_option_a_long_prompt_stays_an_error(tokenizer):
    prog = toy.ToyProgram(max_seq_len=64, min_prefill=9, max_prefill=32)
    with pytest.raises(OptionError, match="prefill range"):
        ReferenceRunner().run(prog, tokenizer, list(range(300, 333)), _opts(chunked_prefill=False))


# --- the suite catches wrong chunking: plug-in runners (`--runner tests.runners.test_chunked_prefill:NAME`) ----


def _split(L, chunk, min_prefill, tail_rule):
    out = []
    while L > 0:
        step = min(L, chunk)
        if tail_rule and 0 < L - step < min_prefill:
            step = L - min_prefill
        out.append(step)
        L -= step
    return out


class WindowOverflowRunner(ReferenceRunner):
    """Chunks of max_prefill whatever the sliding window (32 > window 16 on tiny-gemma4): the
    ring-cache overflow of the stack's #20346."""

    name = "chunk-over-window"
    plan = staticmethod(lambda L, max_prefill, min_prefill, window: _split(L, max_prefill, min_prefill, True))


class TailIgnoringRunner(ReferenceRunner):
    """The rule's chunk, but the min-prefill tail rule ignored (L = 17, chunk 16 -> [16, 1])."""

    name = "chunk-tail-ignored"
    plan = staticmethod(lambda L, max_prefill, min_prefill, window: _split(
        L, window or max_prefill // 2, min_prefill, False))


@pytest.fixture(scope="module")
def gemma_env():
    from eagle3_check.jobs.suites.execute import SuiteEnv

    return SuiteEnv.eager("tiny-gemma4")


@pytest.mark.parametrize("runner,case_name", [
    (WindowOverflowRunner, "chunked-prefill/window-ring"),
    (TailIgnoringRunner, "chunked-prefill/chunk+1"),
    (TailIgnoringRunner, "chunked-prefill/3chunks+1"),
], ids=["window-overflow", "tail-ignored-chunk+1", "tail-ignored-3chunks+1"])
def test_wrong_chunking_fails_the_suite(gemma_env, runner, case_name):
    from eagle3_check.jobs.suites.execute import run_case
    from eagle3_check.suites import suite_cases

    case = suite_cases(case_name)[0]
    assert run_case(case, gemma_env).status == "pass"  # the reference runner passes it
    got = run_case(case, gemma_env, runner())
    assert got.status == "fail", got.message
    assert "prefill" in got.message


def test_an_exec_runner_with_chunked_prefill_is_an_error(tokenizer):
    """A runner binary whose profile does not chunk: asking for chunked prefill is an error, not a silent drop."""
    from eagle3_check.fixtures.registry import Prompt
    from eagle3_check.jobs.check.binary import run_exec_check
    from eagle3_check.runners.binary.runner import ExecRunner

    prog = toy.ToyProgram(max_seq_len=64, min_prefill=1, max_prefill=32)
    prog.path = "toy.pte"  # program_file() finds it; the binary never starts
    runner = ExecRunner("exec:/bin/true")
    runner.set_profile("runner-pr")  # the runner PR's binary: no chunking (runners/profiles.py)
    with pytest.raises(OptionError, match="--chunked-prefill with the runner binary .* runner-pr"):
        run_exec_check(runner, prog, tokenizer, None, [Prompt("p", "hi")],
                       RunOptions(max_new_tokens=4, chunked_prefill=True))


def test_self_reference_chunks_a_prompt_beyond_max_prefill():
    """The self reference prefills L = 40 > max prefill 32 in the rule's chunks [16, 15, 9]."""
    from eagle3_check.judge.self_ref import SelfReference

    prompt = list(range(300, 340))
    prog = RecordingProgram(toy.ToyProgram(max_seq_len=64, min_prefill=9, max_prefill=32))
    ref = SelfReference(prog)
    got = ref.greedy(prompt, 6)
    assert [len(c.tokens) for c in prog.of("prefill")] == [16, 15, 9]
    assert got.tokens == toy.greedy(prompt, 6)
    scores = ref.score(prompt, got.tokens)
    assert scores.argmax[: len(got.tokens)] == got.tokens


def test_check_audits_a_chunked_run_against_its_chunk_plan(program, tokenizer, fixture, hf_reference):
    """`check --chunked-prefill`: the call audit expects the plan's prefill and seed chunks (one
    draft_decode per chunk, not one for the prompt), so a correct chunked run passes."""
    from eagle3_check.fixtures.registry import ProgramSpec
    from eagle3_check.jobs.check.prompt_set import run_check
    from eagle3_check.judge.tolerance import tolerance_for
    from eagle3_check.program.eager import EagerBackend

    small = EagerBackend(program.module, ProgramSpec(**{**program.spec.__dict__, "min_prefill": 9, "max_prefill": 32}))
    prompts = fixture.prompts()[:3]
    report = run_check(small, tokenizer, hf_reference, prompts, RunOptions(max_new_tokens=16, chunked_prefill=True),
                       tolerance_for("float32"))
    assert report.passed, [o.verdict.message for o in report.outcomes if o.verdict.status == "fail"]
    assert all(len(o.run.prompt_ids) > 16 for o in report.outcomes)  # each prompt is prefilled in 2+ chunks
