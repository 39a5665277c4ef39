"""Runner == HF reference (DESIGN §3) on the whole prompt set of the default fixture, judged
position by position over the runner's tokens; the teacher-forced rows line up with greedy."""

import pytest

from eagle3_check.judge.self_ref import self_greedy, self_score
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.judge.verdict import PASS, judge
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions, prompt_ids, stop_set

MAX_NEW = 40


@pytest.mark.parametrize("k", [1, 2, 4, 7], ids=lambda k: f"K={k}")
def test_runner_equals_hf_reference_on_prompt_set(program, tokenizer, metadata, hf_reference, fixture, k):
    options = RunOptions(max_new_tokens=MAX_NEW, chain_len=k)
    stops = stop_set(tokenizer, metadata, options).ids
    failures = []
    for p in fixture.prompts():
        run = ReferenceRunner().run(program, tokenizer, p.text, options)
        scores = hf_reference.score(run.prompt_ids, run.tokens)
        verdict = judge(run, scores, stops, MAX_NEW, metadata.max_seq_len, tolerance_for("float32"))
        assert run.k == k
        if verdict.status != PASS:
            failures.append(f"{p.id}: {verdict.message}")
    assert not failures, "\n".join(failures)


def test_teacher_forced_rows_line_up_with_greedy(tokenizer, hf_reference, fixture):
    """Row i of score(prompt, greedy tokens) predicts token i: its argmax is greedy token i, its
    margin the greedy margin, and the runner's token ranks 1; row n is one past the end."""
    ids = prompt_ids(tokenizer, fixture.prompts()[0].text, RunOptions())
    ref = hf_reference.greedy(ids, 12)
    s = hf_reference.score(ids, ref.tokens)
    assert len(s.argmax) == len(ref.tokens) + 1 and s.argmax[:-1] == ref.tokens
    assert s.given_rank == [1] * len(ref.tokens) and s.runner_up[:-1] == ref.runner_up
    assert s.margins[:-1] == pytest.approx(ref.margins, abs=1e-4)
    assert s.argmax[-1] == hf_reference.greedy(ids, 13).tokens[-1]


def test_self_score_rows_are_the_self_greedy_tokens(program, tokenizer, fixture):
    ids = prompt_ids(tokenizer, fixture.prompts()[1].text, RunOptions())
    greedy = self_greedy(program, ids, 13).tokens
    s = self_score(program, ids, greedy[:12])
    assert s.argmax == greedy and s.given_rank == [None] * 12 and all(m == float("inf") for m in s.margins)
