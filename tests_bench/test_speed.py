"""The speculative runner vs greedy decoding through the same program (the self reference).

Both decode the same prompt to the same length on the default fixture's eager program (CPU,
fp32, one thread); the ratio of their medians is printed at the end of the session and
stored in the benchmark JSON (`eagle3.ratio`). The tokens are checked equal first: a speed
number for a wrong output means nothing.
"""

from __future__ import annotations

import pytest

from eagle3_check.program.contract import read_metadata
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions, prompt_ids, stop_set

self_reference = pytest.importorskip(
    "eagle3_check.judge.self_ref", reason="needs eagle3_check.judge.self_ref (greedy through the program)")

PROMPT = "Count from one to ten."
OPTIONS = RunOptions(max_new_tokens=64)
ROUNDS, WARMUP = 5, 1


@pytest.fixture(scope="module")
def request_ids(bench_setup):
    program, tokenizer = bench_setup
    ids = prompt_ids(tokenizer, PROMPT, OPTIONS)
    stops = stop_set(tokenizer, read_metadata(program.metadata()), OPTIONS).ids
    run = ReferenceRunner().run(program, tokenizer, ids, OPTIONS)
    plain = self_reference.self_greedy(program, ids, OPTIONS.max_new_tokens, stops)
    assert plain.tokens == run.tokens, "self reference and runner disagree: run `eagle3-check check` first"
    return ids, stops


@pytest.mark.benchmark(group="default-fixture")
def test_self_reference(benchmark, bench_setup, request_ids, record_median):
    program, _ = bench_setup
    ids, stops = request_ids
    out = benchmark.pedantic(self_reference.self_greedy, args=(program, ids, OPTIONS.max_new_tokens, stops),
                             rounds=ROUNDS, warmup_rounds=WARMUP)
    assert len(out.tokens) == OPTIONS.max_new_tokens
    record_median.self_reference(benchmark)


@pytest.mark.benchmark(group="default-fixture")
def test_speculative_runner(benchmark, bench_setup, request_ids, record_median):
    program, tokenizer = bench_setup
    ids, _ = request_ids
    runner = ReferenceRunner()
    out = benchmark.pedantic(runner.run, args=(program, tokenizer, ids, OPTIONS), rounds=ROUNDS, warmup_rounds=WARMUP)
    assert len(out.tokens) == OPTIONS.max_new_tokens
    benchmark.extra_info.update(tau=out.tau, rounds=out.rounds, k=out.k)
    record_median.speculative(benchmark)
