"""Golden files: naming, record (refusals), exact verify with readable diffs, and the K - 1 demo.

Fast cases use ToyProgram (known target, draft right except at chosen positions) with the
fixture's tokenizer and a reference derived from the toy's own greedy chain, so acceptance
is high and a runner that treats K as K - 1 changes rounds, accepted counts and tau.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

from eagle3_check.fixtures.registry import Prompt
from eagle3_check.jobs.golden.diff import diff_golden, format_diffs
from eagle3_check.jobs.golden.file import (
    GoldenError,
    GoldenKey,
    load_golden,
    record_golden,
    run_golden,
    save_golden,
)
from eagle3_check.jobs.golden.metrics import compare_metrics, compute_metrics, format_metric_diffs
from eagle3_check.judge.hf import ReferenceResult, Scores
from eagle3_check.judge.tolerance import Tolerance
from eagle3_check.program.contract import read_metadata
from eagle3_check.runners.loop import ReferenceRunner
from eagle3_check.runners.options import RunOptions, prompt_ids
from eagle3_check.suites.toy import ToyProgram, greedy, next_token

PROMPTS = [Prompt("hi", "Hi"), Prompt("count", "Count from one to ten."), Prompt("sea", "The sea.")]
KEY = GoldenKey("toy", "eager", "cpu", "float32", 4, 24)
TOL = Tolerance("bfloat16", 4)  # 0.03125 at the fake rows' top logit 1.0


class ToyReference:
    """The toy target's greedy chain with chosen margins (default 1.0 everywhere)."""

    def __init__(self, low: dict[tuple[int, int], float] | None = None, shift_at: int | None = None):
        self.low = low or {}  # (prompt length, token index) -> margin
        self.shift_at = shift_at  # make the reference disagree with the runner at this index

    def greedy(self, prompt_ids, max_new, stop_ids=frozenset()):
        toks = greedy(prompt_ids, max_new)
        if self.shift_at is not None and self.shift_at < len(toks):
            toks[self.shift_at] += 1
        margins = [self.low.get((len(prompt_ids), i), 1.0) for i in range(len(toks))]
        return ReferenceResult(toks, margins, [t + 1 for t in toks])

    def score(self, prompt_ids, tokens):
        """Teacher-forced rows: the toy target's next token after each prefix, top logit 1.0."""
        seq = list(prompt_ids) + list(tokens)
        L = len(prompt_ids)
        argmax = [next_token(seq[L + i - 1]) for i in range(len(tokens) + 1)]
        if self.shift_at is not None and self.shift_at < len(argmax):
            argmax[self.shift_at] += 1
        top2 = [1.0 - self.low.get((L, i), 1.0) for i in range(len(argmax))]
        same = [t == a for t, a in zip(tokens, argmax)]
        return Scores(argmax, [1.0] * len(argmax), top2, [a + 1 for a in argmax],
                      [1.0 if s else top2[i] for i, s in enumerate(same)], [1 if s else 2 for s in same])


class KMinusOneRunner(ReferenceRunner):
    """A deliberately broken runner: drafts K - 1 proposals a round but reports the K it was asked for."""

    def run(self, program, tokenizer, prompt, options):
        k = options.chain_len or read_metadata(program.metadata()).chain_len
        result = super().run(program, tokenizer, prompt, dataclasses.replace(options, chain_len=k - 1))
        result.k = k
        return result


@pytest.fixture
def toy():
    return ToyProgram(max_seq_len=128, max_prefill=64, wrong_at={30, 41, 47})


@pytest.fixture
def toy_golden(toy, tokenizer):
    return record_golden(toy, tokenizer, ToyReference(), PROMPTS, KEY, TOL)


@pytest.mark.parametrize("key", [
    KEY,
    GoldenKey("tiny-gemma4", "pte", "cpu", "bfloat16", 7, 128),
    GoldenKey("my__odd_name", "eager", "cuda", "float32", 1, 1),
], ids=lambda k: k.stem)
def test_key_round_trips_through_the_file_name(key):
    assert key.filename == key.stem + ".json"
    assert GoldenKey.from_path(f"golden/{key.filename}") == key


def test_a_file_name_without_every_parameter_is_refused():
    with pytest.raises(GoldenError, match=r"golden file name 'tiny-llama__k4.json'.*<fixture>__<backend>"):
        GoldenKey.from_path("golden/tiny-llama__k4.json")


def test_record_holds_every_listed_field(toy_golden, tokenizer, toy):
    g = toy_golden
    assert [p.prompt_id for p in g.prompts] == ["hi", "count", "sea"]
    assert set(g.versions) == {"torch", "transformers", "tokenizers", "executorch"}
    assert g.versions["torch"] is not None
    for p in g.prompts:
        assert p.tokens == greedy(p.prompt_ids, len(p.tokens))  # the toy's greedy chain
        assert len(p.tokens) == KEY.max_new and p.stop_reason == "max_new"
        assert p.text == tokenizer.decode(p.tokens)
        assert p.rounds == len(p.accepted) and p.tau == (len(p.tokens) - 1) / p.rounds
        assert len(p.margins) == len(p.tokens) and p.min_margin == 1.0
    assert any(a < KEY.k for p in g.prompts for a in p.accepted)  # wrong_at makes some rounds short


def test_save_load_round_trip_and_refusal_to_overwrite(toy_golden, tmp_path):
    path = save_golden(toy_golden, tmp_path)
    assert path.name == KEY.filename
    assert load_golden(path).to_json() == toy_golden.to_json()
    assert json.loads(path.read_text())["key"]["k"] == 4
    with pytest.raises(GoldenError, match=r"already exists.*--force"):
        save_golden(toy_golden, tmp_path)
    assert save_golden(toy_golden, tmp_path, force=True) == path


def test_a_renamed_golden_is_refused(toy_golden, tmp_path):
    path = save_golden(toy_golden, tmp_path)
    other = tmp_path / GoldenKey("toy", "eager", "cpu", "float32", 3, 24).filename
    path.rename(other)
    with pytest.raises(GoldenError, match=r"holds key toy__eager__cpu__float32__k4__n24"):
        load_golden(other)


def test_record_refuses_a_near_tie_prompt_naming_it_and_its_margin(toy, tokenizer):
    lengths = {p.id: len(prompt_ids(tokenizer, p.text, RunOptions())) for p in PROMPTS}
    assert len(set(lengths.values())) == len(PROMPTS)  # the fake reference tells prompts apart by length
    ref = ToyReference(low={(lengths["count"], 9): 3e-5})
    with pytest.raises(GoldenError) as e:
        record_golden(toy, tokenizer, ref, PROMPTS, KEY, TOL)
    msg = str(e.value)
    assert "'count' (margin 3e-05 at token 9, tolerance 0.0312)" in msg and "pick another prompt" in msg
    assert "'hi'" not in msg


def test_record_refuses_a_run_that_diverges_from_the_reference(toy, tokenizer):
    with pytest.raises(GoldenError, match=r"prompt 'hi': diverged at token 5"):
        record_golden(toy, tokenizer, ToyReference(shift_at=5), PROMPTS, KEY, TOL)


def test_verify_is_clean_for_the_same_runner(toy, tokenizer, toy_golden):
    assert diff_golden(run_golden(toy, tokenizer, toy_golden), toy_golden) == []


def test_verify_names_the_first_differing_token_both_values_and_margin(toy, tokenizer, toy_golden):
    runs = run_golden(toy, tokenizer, toy_golden)
    runs["count"].tokens[7] += 1
    runs["count"].tokens[9] += 1
    diffs = diff_golden(runs, toy_golden)
    assert [(d.prompt_id, d.field, d.index) for d in diffs] == [("count", "tokens", 7)]
    want = toy_golden.prompts[1].tokens[7]
    assert (diffs[0].got, diffs[0].want, diffs[0].margin) == (want + 1, want, 1.0)
    assert f"token 7 differs: got {want + 1}, golden {want} (reference margin there 1" in diffs[0].message


@pytest.mark.parametrize("field,change,expect", [
    ("rounds", lambda r: setattr(r, "rounds", r.rounds + 1), "rounds"),
    ("accepted", lambda r: r.accepted.__setitem__(2, r.accepted[2] - 1), "accepted count of round 2"),
    ("tau", lambda r: setattr(r, "tau", r.tau + 0.5), "tau"),
    ("stop_reason", lambda r: setattr(r, "stop_reason", "context"), "stop reason 'context'"),
    ("text", lambda r: setattr(r, "text", r.text + "!"), "text differs"),
    ("length", lambda r: r.tokens.pop(), "emitted 23 tokens, golden 24"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_verify_names_the_first_differing_stat(toy, tokenizer, toy_golden, field, change, expect):
    runs = run_golden(toy, tokenizer, toy_golden)
    change(runs["sea"])
    diffs = diff_golden(runs, toy_golden)
    assert [(d.prompt_id, d.field) for d in diffs] == [("sea", field)]
    assert expect in diffs[0].message


def test_diff_golden_reads_a_golden_file(toy, tokenizer, toy_golden, tmp_path):
    path = save_golden(toy_golden, tmp_path)
    runs = run_golden(toy, tokenizer, toy_golden)
    assert diff_golden(runs, path) == []
    runs["hi"].tokens[0] += 1
    assert [d.field for d in diff_golden(runs, path)] == ["tokens"]


def test_verify_reports_a_missing_prompt(toy, tokenizer, toy_golden):
    runs = run_golden(toy, tokenizer, toy_golden)
    del runs["hi"]
    assert [(d.prompt_id, d.field) for d in diff_golden(runs, toy_golden)] == [("hi", "missing")]


def test_k_minus_one_runner_fails_golden_verify_and_the_metric_gate(toy, tokenizer, toy_golden):
    """The 'done when' demo: a runner treating K as K - 1 fails both, with readable diffs."""
    good = run_golden(toy, tokenizer, toy_golden)
    baseline = compute_metrics(good.values(), KEY.k).to_json()
    bad = run_golden(toy, tokenizer, toy_golden, runner=KMinusOneRunner())

    golden_diffs = diff_golden(bad, toy_golden)
    text = format_diffs(golden_diffs)
    print(text)
    assert {d.prompt_id for d in golden_diffs} == {"hi", "count", "sea"}
    assert all(d.field == "rounds" for d in golden_diffs)  # same tokens (lossless), more rounds
    assert "golden: DIFFERS" in text and "toy__eager__cpu__float32__k4__n24 'hi': rounds" in text

    metric_diffs = compare_metrics(KEY.stem, compute_metrics(bad.values(), KEY.k), baseline)
    table = format_metric_diffs(metric_diffs)
    print(table)
    by_name = {d.metric: d for d in metric_diffs}
    assert by_name["tau"].direction == "regression" and by_name["tau"].now < by_name["tau"].baseline
    assert by_name["target_per_token"].direction == "regression"
    assert by_name["n_alpha[3]"].now == 0.0 and by_name["n_alpha[3]"].baseline > 0
    tau_line = next(line for line in table.splitlines() if line.strip().startswith("tau "))
    assert f"{by_name['tau'].baseline:.4f}" in tau_line and f"{by_name['tau'].now:.4f}" in tau_line
    assert "regression" in tau_line
