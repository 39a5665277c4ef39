"""Draft health: the teacher-forced step-0 agreement, and the flag for a draft far below its tau."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace

import pytest
import torch

from eagle3_check.fixtures.registry import load_fixture
from eagle3_check.jobs.check.draft_health import assess, step0_agreement
from eagle3_check.jobs.check.prompt_set import run_check
from eagle3_check.judge.tolerance import tolerance_for
from eagle3_check.program.eager import EagerBackend
from eagle3_check.runners.options import RunOptions, prompt_ids


@pytest.fixture(scope="module")
def seq(program, tokenizer, fixture):
    """A prompt and the program's greedy continuation (through the self reference's path)."""
    from eagle3_check.judge.self_ref import self_greedy

    ids = prompt_ids(tokenizer, fixture.prompts()[0].text, RunOptions())
    return ids, ids + self_greedy(program, ids, 40).tokens


def test_step0_agreement_equals_a_direct_forward(program, seq):
    """The contract-driven count equals one full-sequence forward of the HF target and the draft."""
    ids, s = seq
    hits, rows = step0_agreement(program, s, len(ids))
    module = program.module
    with torch.no_grad():
        out = module.target.model(input_ids=torch.tensor([s]), output_hidden_states=True)
        greedy = out.logits[0].argmax(-1)  # [n] greedy token for position q + 1
        taps = torch.cat([out.hidden_states[k] for k in module.draft.cfg.aux_layer_ids], -1)  # [1, n, 3H]
        n = len(s)
        logits, _ = module.draft(torch.tensor([s[1:]]), module.draft.fuse(taps)[:, : n - 1], torch.arange(n - 1))
        proposals = module.draft.to_target_ids(logits.argmax(-1))[0]  # [n-1] row p proposes p + 2
    p = torch.arange(len(ids) - 2, n - 1)
    assert rows == len(p) and rows > 0
    assert hits == int((proposals[p] == greedy[p + 1]).sum())


def test_step0_agreement_prefills_a_long_prompt_in_the_rule_4_chunks(program, seq):
    """A prompt past the max prefill (checked with --chunked-prefill) is prefilled in chunks that
    each fit the program's range, and the counts equal a one-call prefill's."""
    from eagle3_check.fixtures.registry import ProgramSpec
    from eagle3_check.runners.instrument import RecordingProgram

    ids, s = seq
    L = len(s) - 8  # L = prompt + 32 generated tokens > 32
    small = EagerBackend(program.module, ProgramSpec(**{**program.spec.__dict__, "min_prefill": 9, "max_prefill": 32}))
    rec = RecordingProgram(small)
    assert step0_agreement(rec, s, L) == step0_agreement(program, s, L)
    assert L > 32 and all(9 <= len(c.tokens) <= 32 for c in rec.of("prefill")) and len(rec.of("prefill")) > 1


@pytest.mark.parametrize("max_prefill", [128, 32], ids=["one-prefill", "chunked-prefill"])
def test_step0_agreement_on_graph_owned_outputs(program, seq, max_prefill):
    """The CLI's program has graph-owned outputs (EagerBackend(reuse_outputs=True): each method's next
    call overwrites its last outputs). The features must be copied as they arrive: kept as views, the
    check of tiny-llama reported 0.484 instead of 0.609 (the .pte's number; 25 instead of 32 hits on 'hi')."""
    from eagle3_check.fixtures.registry import ProgramSpec

    ids, s = seq
    L = 48 if max_prefill == 32 else len(ids)  # 32: L = 48 prefills in chunks [16, 16, 16] (one shape)
    spec = ProgramSpec(**{**program.spec.__dict__, "min_prefill": 9, "max_prefill": max_prefill})
    plain, owned = EagerBackend(program.module, spec), EagerBackend(program.module, spec, reuse_outputs=True)
    want = step0_agreement(plain, s, L)
    assert want[1] > 0 and step0_agreement(owned, s, L) == want


@dataclass
class _Report:  # what assess reads of a CheckReport
    tau: float
    n_alpha: list = field(default_factory=lambda: [0.5])
    outcomes: list = field(default_factory=list)


@pytest.mark.parametrize("tau,flagged", [(0.8 * 2.0 - 1e-9, True), (0.8 * 2.0, False), (2.5, False)],
                         ids=["just-below-80pct", "at-80pct", "above"])
def test_flag_threshold(tau, flagged):
    health = assess(None, _Report(tau), expect_tau=2.0)
    assert bool(health.flags) is flagged
    assert not assess(None, _Report(tau)).flags  # no expectation, no flag


def test_draft_for_another_target_is_flagged(fixture, tokenizer, hf_reference, program, seq):
    """tiny-gemma4's draft fits tiny-llama's shapes: it loads and passes greedy equality, and
    draft health shows it (agreement collapses; tau far below the card's)."""
    other = load_fixture("tiny-gemma4").draft_dir
    bad = EagerBackend.from_dirs(fixture.target_dir, other, fixture.spec)
    ids, s = seq
    good_hits, rows = step0_agreement(program, s, len(ids))
    bad_hits, _ = step0_agreement(bad, s, len(ids))
    assert bad_hits < good_hits / 2, (bad_hits, good_hits, rows)
    report = run_check(bad, tokenizer, hf_reference, fixture.prompts()[:4], RunOptions(max_new_tokens=24),
                       tolerance_for("float32"))
    assert report.passed  # greedy verification cannot see it
    expected = json.loads((fixture.root / "card.json").read_text())["k"]["4"]["tau"]
    health = assess(bad, report, expect_tau=expected)
    assert health.flags and "FLAG tau" in health.lines()[-1], health.lines()


CARD = {"max_new_tokens": 64, "k": {"4": {"tau": 2.15}}}
# a real fixture's own request (SmolLM2-like: ChatML frame, no BOS), resolved from its files
CHATML = RunOptions(chat_prefix="<|im_start|>user\n", chat_suffix="<|im_end|>\n<|im_start|>assistant\n",
                    stop_ids=(), stop_token="<|im_end|>", bos_id=-1, eos_id=2)


@pytest.mark.parametrize("card,k,options,own,request_,expect,why", [
    (CARD, 4, RunOptions(max_new_tokens=64, chain_len=4), True, None, 2.15, "at K=4"),
    (CARD, 4, RunOptions(max_new_tokens=64), True, None, 2.15, "at K=4"),
    (CARD, 3, RunOptions(max_new_tokens=64, chain_len=3), True, None, None, "no K=3 row"),
    (CARD, 4, RunOptions(max_new_tokens=32), True, None, None, "options differ"),
    (CARD, 4, RunOptions(max_new_tokens=64, raw=True), True, None, None, "options differ"),
    (CARD, 4, RunOptions(max_new_tokens=64), False, None, None, "other prompts"),
    (None, 4, RunOptions(max_new_tokens=64), True, None, None, "no card"),
    (CARD, 4, replace(CHATML, max_new_tokens=64), True, CHATML, 2.15, "at K=4"),
    (CARD, 4, replace(CHATML, max_new_tokens=64), True, None, None, "options differ"),
    (CARD, 4, replace(CHATML, max_new_tokens=64, bos_id=1), True, CHATML, None, "options differ"),
    (CARD, 4, RunOptions(max_new_tokens=64), True, CHATML, None, "options differ"),
], ids=["same-run", "default-k", "k-not-on-card", "other-max-new", "raw", "other-prompts", "no-card",
        "own-request-chatml", "chatml-against-the-gemma4-default", "chatml-with-a-bos-flag", "gemma4-frame-on-chatml"])
def test_card_expectation_only_for_the_card_s_own_run(card, k, options, own, request_, expect, why):
    """The card's run is the fixture's own request (`request_`; none: the Gemma 4 frame of the
    tiny fixtures) at the card's max new tokens: a real fixture's default check (its ChatML
    frame) is that run; any flag that changes the request is not."""
    from eagle3_check.jobs.check.draft_health import card_expectation

    tau, source = card_expectation(card, "fx/card.json", k, options, own, request=request_)
    assert tau == expect and why in source, source


def test_check_flags_a_tau_far_below_the_card(monkeypatch, capsys):
    """check reads the fixture card by itself: a card that promises tau 9 at K = 4 for this run
    flags the draft (exit 1); the same run with another max-new has no expectation (exit 0)."""
    import eagle3_check.fixtures.card as card_mod
    from eagle3_check.cli import main

    monkeypatch.setattr(card_mod, "read_card", lambda fx: {"max_new_tokens": 8, "k": {"4": {"tau": 9.0}}})
    assert main(["check", "--fixture", "tiny-llama", "--max-new-tokens", "8", "--json", "--no-progress"]) == 1
    health = json.loads(capsys.readouterr().out)["draft_health"]
    assert health["expect_tau"] == 9.0 and "at K=4" in health["expect_source"] and health["flags"]
    assert main(["check", "--fixture", "tiny-llama", "--max-new-tokens", "6", "--json", "--no-progress"]) == 0
    health = json.loads(capsys.readouterr().out)["draft_health"]
    assert health["expect_tau"] is None and not health["flags"]
