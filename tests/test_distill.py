"""Draft distillation: the training forward is the inference forward, labels sit where the
runner reads them, and the offline acceptance count is the runner's."""

from __future__ import annotations

import pytest
import torch

from eagle3_check.fixtures.distill import (
    Sequence,
    batch,
    offline_accepts,
    select_draft_vocab,
    set_draft_vocab,
    ttt_forward,
)
from eagle3_check.program.draft import DraftConfig, Eagle3DraftHead


def small_head(seed: int = 0, max_seq_len: int = 64) -> Eagle3DraftHead:
    cfg = DraftConfig(hidden_size=32, num_attention_heads=4, num_key_value_heads=2, intermediate_size=48,
                      vocab_size=40, draft_vocab_size=24, aux_layer_ids=[0, 1], target_hidden_size=16)
    torch.manual_seed(seed)
    head = Eagle3DraftHead(cfg, max_seq_len)
    for p in head.parameters():
        torch.nn.init.normal_(p, std=0.3)
    set_draft_vocab(head, sorted(list(range(0, 40, 2)) + list(range(1, 9, 2))))
    return head.eval()


@pytest.mark.parametrize("row", [0, 5, 13], ids=lambda r: f"row{r}")
def test_ttt_forward_equals_cached_draft_chain(row):
    """Step s of the training forward at row r == the draft seeded on rows 0..r, then s
    single chain steps through its KV cache (what the runner does)."""
    head = small_head()
    n, steps = 20, 4
    torch.manual_seed(1)
    tokens = torch.randint(0, 40, (1, n))  # [1, N]
    taps = torch.randn(1, n, 32)  # [1, N, 2*16]
    with torch.no_grad():
        train_logits = ttt_forward(head, tokens, taps, steps)
        logits, g = head(tokens[:, 1 : row + 2], head.fuse(taps[:, : row + 1]), torch.arange(row + 1))
        got = [logits[0, -1]]
        for s in range(1, steps):
            logits, g = head(tokens[:, row + s + 1 : row + s + 2], g[:, -1:], torch.tensor([row + s]))
            got.append(logits[0, -1])
    for s in range(steps):
        torch.testing.assert_close(train_logits[s][0, row], got[s], rtol=1e-4, atol=1e-5)


def test_ttt_forward_batch_rows_independent():
    """Right padding and a second sequence do not change a sequence's logits."""
    head = small_head()
    torch.manual_seed(2)
    a, b = torch.randint(0, 40, (1, 12)), torch.randint(0, 40, (1, 16))
    ta, tb = torch.randn(1, 12, 32), torch.randn(1, 16, 32)
    tokens = torch.zeros(2, 16, dtype=torch.long)
    taps = torch.zeros(2, 16, 32)
    tokens[0, :12], tokens[1] = a[0], b[0]
    taps[0, :12], taps[1] = ta[0], tb[0]
    with torch.no_grad():
        alone = ttt_forward(head, a, ta, 3)
        both = ttt_forward(head, tokens, taps, 3)
    for s in range(3):
        valid = 11 - s  # rows whose input token x_{r+s+1} is inside the 12-token sequence
        torch.testing.assert_close(both[s][0, :valid], alone[s][0, :valid], rtol=1e-4, atol=1e-5)


def test_batch_labels_index():
    """Worked example: prompt_len 4, n = 8. Step s row r is labelled with greedy[r+s+1] for
    label positions 3..7 (the last prompt token's prediction on) and -100 elsewhere."""
    greedy = torch.tensor([9, 9, 9, 10, 11, 12, 13, 14])
    seq = Sequence(ids=[2, 3, 4, 5, 10, 11, 12, 13], prompt_len=4, taps=torch.zeros(8, 4), greedy=greedy)
    t2d = torch.arange(20)  # identity draft vocab
    _, _, labels, _ = batch([seq], 3, t2d)
    assert labels.shape == (3, 1, 7)
    assert labels[0, 0].tolist() == [-100, -100, 10, 11, 12, 13, 14]  # row 2 -> greedy[3]
    assert labels[1, 0].tolist() == [-100, 10, 11, 12, 13, 14, -100]  # row 1 -> greedy[3]
    assert labels[2, 0].tolist() == [10, 11, 12, 13, 14, -100, -100]  # row 0 -> greedy[3]


def test_select_draft_vocab_keeps_stops_and_frequent_ids():
    greedy = torch.tensor([0, 0, 7, 7, 7, 5, 5, 30])
    seq = Sequence(ids=list(range(8)), prompt_len=2, taps=torch.zeros(8, 1), greedy=greedy)
    kept = select_draft_vocab([seq], 6, {1, 3}, 40)
    assert kept == sorted(kept) and len(kept) == 6
    assert {1, 3, 7, 5}.issubset(kept)  # stops, then the most frequent generated labels
    assert kept == [0, 1, 3, 5, 7, 30]  # generated ids (0, 30) outrank unused fillers (2, 4, ...)


def test_offline_accepts_match_the_runner(fixture, program, tokenizer):
    """The acceptance simulated on the target's greedy text equals each round's `a` in the
    reference runner (this is what makes offline tau a faithful training metric)."""
    from transformers import AutoModelForCausalLM

    from eagle3_check.fixtures.distill import greedy_data
    from eagle3_check.runners.loop import ReferenceRunner
    from eagle3_check.runners.options import RunOptions

    text, k, max_new = "Count from one to ten.", 4, 40
    run = ReferenceRunner().run(program, tokenizer, text, RunOptions(max_new_tokens=max_new, chain_len=k))
    model = AutoModelForCausalLM.from_pretrained(fixture.target_dir, dtype=torch.float32,
                                                 attn_implementation="eager").eval()
    head = program.module.draft
    seq = greedy_data(model, tokenizer, [text], head.cfg.aux_layer_ids, max_new + k + 1, frozenset())[0]
    acc = offline_accepts(head, seq, k)
    simulated, i = [], 0
    while len(simulated) < run.rounds:
        simulated.append(acc[i])
        i += acc[i] + 1
    assert seq.ids[seq.prompt_len : seq.prompt_len + len(run.tokens)] == run.tokens
    assert simulated[:-1] == run.accepted[:-1]  # the last round may be cut by max_new
