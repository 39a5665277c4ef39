"""Draft health's teacher forcing walks the sequence with the largest verify window the program takes
(`draft_health.teacher_window`): on tiny-llama (verify range [2, 8]) 40 emitted tokens take
ceil(40 / 8) = 5 target_verify calls, not the 20 of the smallest window, with the same counts."""

from __future__ import annotations

import dataclasses

import pytest

from eagle3_check.jobs.check import draft_health
from eagle3_check.jobs.check.draft_health import step0_agreement, step0_from_calls, teacher_window
from eagle3_check.program.contract import read_metadata
from eagle3_check.runners.options import RunOptions, prompt_ids


class Counting:
    """The program, counting its target_verify calls."""

    def __init__(self, program):
        self.inner, self.verify_calls = program, 0

    def target_verify(self, *args):
        self.verify_calls += 1
        return self.inner.target_verify(*args)

    def __getattr__(self, name):
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def seq(program, tokenizer, fixture):
    from eagle3_check.judge.self_ref import self_greedy

    ids = prompt_ids(tokenizer, fixture.prompts()[0].text, RunOptions())
    return ids, ids + self_greedy(program, ids, 40).tokens


@pytest.mark.parametrize("md, w", [
    pytest.param({"max_verify_len": 8, "min_verify_len": 2}, 8, id="verify-range-max"),
    pytest.param({"max_verify_len": None, "min_verify_len": None, "verify_bounds": (2, 6)}, 6, id="method-bound"),
    pytest.param({"max_verify_len": None, "min_verify_len": None, "verify_bounds": None}, 5, id="k-plus-one"),
])
def test_the_teacher_window_is_the_largest_the_program_takes(metadata_obj, md, w):
    assert teacher_window(dataclasses.replace(metadata_obj, **md)) == w


@pytest.fixture(scope="module")
def metadata_obj(program):
    return read_metadata(program.metadata())


def test_one_target_verify_per_window_and_the_same_counts_as_the_smallest_window(program, seq, monkeypatch):
    ids, s = seq
    counted = Counting(program)
    wide = step0_agreement(counted, s, len(ids))
    assert counted.verify_calls == -(-(len(s) - len(ids)) // 8) == 5
    monkeypatch.setattr(draft_health, "teacher_window", lambda md: 2)  # the self reference's window
    narrow = Counting(program)
    assert step0_agreement(narrow, s, len(ids)) == wide and narrow.verify_calls == 20


# --- draft health from the run's own calls (draft_health.step0_from_calls) -----------------------


@pytest.fixture(scope="module")
def logged_run(program, tokenizer, fixture):
    """A reference-runner run through the recording wrapper: (prompt ids + tokens, L, its calls)."""
    from eagle3_check.runners.instrument import RecordingProgram
    from eagle3_check.runners.loop import ReferenceRunner

    rec = RecordingProgram(program)
    ids = prompt_ids(tokenizer, fixture.prompts()[0].text, RunOptions())
    run = ReferenceRunner().run(rec, tokenizer, ids, RunOptions(max_new_tokens=40))
    return list(run.prompt_ids) + list(run.tokens), len(run.prompt_ids), list(rec.calls)


def direct_counts(program, s: list[int], L: int, last_label: bool) -> tuple[int, int]:
    """One full-sequence forward of the HF target and the draft (as test_draft_health's), over rows
    p = L - 2 .. n - 2, the last one only when its label (the token after the last) is known."""
    import torch

    module = program.module
    with torch.no_grad():
        out = module.target.model(input_ids=torch.tensor([s]), output_hidden_states=True)
        greedy = out.logits[0].argmax(-1)  # [n]
        taps = torch.cat([out.hidden_states[k] for k in module.draft.cfg.aux_layer_ids], -1)  # [1, n, 3H]
        n = len(s)
        logits, _ = module.draft(torch.tensor([s[1:]]), module.draft.fuse(taps)[:, : n - 1], torch.arange(n - 1))
        proposals = module.draft.to_target_ids(logits.argmax(-1))[0]  # [n-1]
    p = torch.arange(L - 2, n - 1 if last_label else n - 2)
    return int((proposals[p] == greedy[p + 1]).sum()), len(p)


def test_the_run_log_gives_the_direct_counts_without_a_target_forward(program, logged_run):
    s, L, calls = logged_run
    counted = Counting(program)
    got = step0_from_calls(counted, calls, s, L)
    last = calls[-1]  # the last verify labels position n - 1 when the last emitted token was one of its rows
    last_label = last.method == "target_verify" and (len(s) - 1) in last.positions and all(
        t == s[q] for q, t in zip(last.positions, last.tokens) if q <= len(s) - 1)
    assert got == direct_counts(program, s, L, last_label) and counted.verify_calls == 0
    assert got[1] >= len(s) - L  # every emitted position but at most the last is a row


@pytest.mark.parametrize("drop", ["a-verify-call", "the-prefill"])
def test_a_log_that_misses_a_feature_falls_back_to_teacher_forcing(program, logged_run, drop):
    s, L, calls = logged_run
    method = "target_verify" if drop == "a-verify-call" else "prefill"
    i = next(i for i, c in enumerate(calls) if c.method == method)
    assert step0_from_calls(program, calls[:i] + calls[i + 1:], s, L) is None


def test_rows_after_a_rejected_proposal_are_not_read(program, logged_run):
    """A verify row whose window saw another token than the final one (a rejected proposal) is never a
    feature: corrupt every such row's feature and the counts stay the same."""
    import torch

    s, L, calls = logged_run
    want = step0_from_calls(program, calls, s, L)
    spoiled = []
    for c in calls:
        if c.method == "target_verify":
            bad = next((i for i, (q, t) in enumerate(zip(c.positions, c.tokens)) if q >= len(s) or t != s[q]), None)
            if bad is not None:
                f = c.out_feature.clone()
                f[0, bad:] = torch.nan
                c = dataclasses.replace(c, out_feature=f)
        spoiled.append(c)
    assert step0_from_calls(program, spoiled, s, L) == want
