"""Runner == HF reference (DESIGN §3) on the whole prompt set of the default fixture."""

import pytest

from eagle3_check.options import RunOptions, stop_set
from eagle3_check.runner import ReferenceRunner
from eagle3_check.verdict import PASS, TIE_TOLERANCE, compare

MAX_NEW = 40
_reference_cache: dict[tuple, object] = {}


def reference_for(hf_reference, prompt_ids, max_new, stops):
    key = (tuple(prompt_ids), max_new, stops)
    if key not in _reference_cache:  # the reference does not depend on K: decode once per prompt
        _reference_cache[key] = hf_reference.greedy(prompt_ids, max_new, stops)
    return _reference_cache[key]


@pytest.mark.parametrize("k", [1, 2, 4, 7], ids=lambda k: f"K={k}")
def test_runner_equals_hf_reference_on_prompt_set(program, tokenizer, metadata, hf_reference, fixture, k):
    options = RunOptions(max_new_tokens=MAX_NEW, chain_len=k)
    stops = stop_set(tokenizer, metadata, options).ids
    failures = []
    for p in fixture.prompts():
        run = ReferenceRunner().run(program, tokenizer, p.text, options)
        ref = reference_for(hf_reference, run.prompt_ids, run.max_new, stops)
        verdict = compare(run, ref, stops, MAX_NEW, metadata.max_seq_len, TIE_TOLERANCE["float32"])
        assert run.k == k
        if verdict.status != PASS:
            failures.append(f"{p.id}: {verdict.message}")
    assert not failures, "\n".join(failures)
