"""A trained EAGLE-3 draft for the GPU bench target, distilled on the target's own greedy text.

The bench target (bench/gpu_bench.py) is random-init with a permutation-bigram lm_head: its
greedy text is whatever it is (in practice x -> perm[x], wandering one cycle of a random
permutation of the vocab). The draft is trained the way `eagle3_check.fixtures.distill`
trains the fixtures' drafts (EAGLE-3 training-time test over `ttt_steps` chain steps, hard
labels = the target's teacher-forced argmax), on `--train-prompts` random prompts drawn
from a seed other than the bench prompt's, each continued greedily by the target.

Recipe (all seeded; the weights are ~0.3 GB, so the recipe and the card are committed, not
the weights): prompts torch.Generator seed 2, `--train-prompt-len` ids each, `--train-new`
greedy tokens; head initialised from seed 3 (2-D weights N(0, `--init-std`)), embedding and
lm_head copied from the target's (EAGLE-3 practice; full vocab, so the copy is exact);
AdamW, cosine schedule, TrainConfig as printed in the results JSON.

What it can reach: a draft learns a lookup table here, and no draft can predict a bigram it
never saw, so acceptance is bounded by how much of the evaluated text's bigrams the training
text covered; `bigram_coverage` reports that next to the card.
"""

from __future__ import annotations

import time
from dataclasses import asdict

import torch

from eagle3_check.fixtures.distill import Sequence, TrainConfig, offline_tau, train_draft
from eagle3_check.program.draft import DraftConfig, Eagle3DraftHead

TRAIN_PROMPT_SEED, HELD_OUT_SEED, HEAD_SEED = 2, 4, 3


def random_prompts(n: int, length: int, vocab: int, seed: int) -> list[list[int]]:
    gen = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (n, length), generator=gen).tolist()


@torch.no_grad()
def greedy_sequences(model, prompts: list[list[int]], max_new: int, aux_layer_ids: list[int],
                     batch_size: int = 128) -> list[Sequence]:
    """The target's greedy continuation of each (equal-length) prompt, then one teacher-forced
    forward per batch for the taps and the per-position argmax (the labels); kept on the
    model's device."""
    dev = next(model.parameters()).device
    seqs: list[Sequence] = []
    for c in range(0, len(prompts), batch_size):
        inp = torch.tensor(prompts[c : c + batch_size], device=dev)  # [b, Lp]
        out = model.generate(input_ids=inp, attention_mask=torch.ones_like(inp), max_new_tokens=max_new,
                             min_new_tokens=max_new, do_sample=False)  # [b, Lp + max_new]
        for s in range(0, out.shape[0], 32):
            rows = out[s : s + 32]
            res = model(input_ids=rows, output_hidden_states=True)
            taps = torch.cat([res.hidden_states[k] for k in aux_layer_ids], dim=-1).float()  # [b, n, n_taps*H]
            greedy = res.logits.argmax(-1)  # [b, n]
            for i in range(rows.shape[0]):
                seqs.append(Sequence(rows[i].tolist(), inp.shape[1], taps[i], greedy[i], None))
    return seqs


def init_head(model, dcfg: DraftConfig, max_seq: int, std: float, seed: int = HEAD_SEED) -> Eagle3DraftHead:
    """A fresh head: 2-D weights N(0, std) from `seed`, the target's embedding and lm_head copied."""
    if dcfg.draft_vocab_size != dcfg.vocab_size:
        raise ValueError("the bench draft uses the full vocab (a bigram target visits every id)")
    torch.manual_seed(seed)
    dev = next(model.parameters()).device
    with torch.device(dev):
        head = Eagle3DraftHead(dcfg, max_seq)
    with torch.no_grad():
        for p in head.parameters():
            if p.dim() == 2:
                p.normal_(0.0, std)
        head.embed_tokens.weight.copy_(model.get_input_embeddings().weight)
        head.lm_head.weight.copy_(model.lm_head.weight)
    return head.float()


def seen_bigrams(train: list[Sequence]) -> set[tuple[int, int]]:
    """The (token, label) pairs the training continuations hold."""
    seen = set()
    for s in train:
        ids, g = s.ids, s.greedy.tolist()
        seen.update((ids[p], g[p]) for p in range(max(s.prompt_len - 1, 0), len(ids)))
    return seen


def bigram_coverage(seen: set[tuple[int, int]], text: list[int]) -> float:
    """Share of `text`'s consecutive pairs (x, y) among the training pairs `seen`: a
    proposal for a pair never seen is a guess."""
    pairs = list(zip(text, text[1:]))
    return sum(p in seen for p in pairs) / len(pairs) if pairs else 0.0


class _Every:
    """A tqdm-shaped progress sink for train_draft: logs the loss every n steps."""

    def __init__(self, n: int, log):
        self.n, self.log, self.i, self.t0 = n, log, 0, time.perf_counter()

    def update(self, k: int) -> None:
        self.i += k

    def set_postfix(self, loss: str) -> None:
        if self.i % self.n == 0:
            self.log(f"  step {self.i}: loss {loss} ({time.perf_counter() - self.t0:.1f} s)")


def distill_bench_draft(model, dcfg: DraftConfig, max_seq: int, args, log=print):
    """Builds data, trains, measures offline tau; returns (head in bf16, eval mode; the
    training bigrams; info). The training taps (~3 GB on the device) are freed here."""
    t0 = time.perf_counter()
    prompts = random_prompts(args.train_prompts, args.train_prompt_len, dcfg.vocab_size, TRAIN_PROMPT_SEED)
    seqs = greedy_sequences(model, prompts, args.train_new, dcfg.aux_layer_ids)
    held = greedy_sequences(model, random_prompts(16, args.train_prompt_len, dcfg.vocab_size, HELD_OUT_SEED),
                            args.train_new, dcfg.aux_layer_ids)
    t_data = time.perf_counter() - t0
    log(f"draft data: {len(seqs)} sequences of {len(seqs[0].ids)} ids in {t_data:.1f} s")
    head = init_head(model, dcfg, max_seq, args.init_std)
    cfg = TrainConfig(steps=args.train_steps, batch_size=args.train_batch, lr=args.train_lr,
                      ttt_steps=args.ttt_steps, soft=0.0, max_new=args.train_new, seed=0)
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True  # training only; restored before anything is timed
    try:
        t1 = time.perf_counter()
        losses = train_draft(head, seqs, cfg, progress=_Every(100, log))
        t_train = time.perf_counter() - t1
        tau_offline = {k: offline_tau(head, held, k) for k in (1, 2, 4, 6)}
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    log(f"draft trained: {cfg.steps} steps in {t_train:.1f} s, loss {losses[0]:.3f} -> {losses[-1]:.3f}, "
        f"offline tau (held-out, fp32) {tau_offline}")
    info = {
        "mode": "trained (distilled on the target's greedy text; bench/gpu_draft.py)",
        "recipe": {"train_prompts": args.train_prompts, "train_prompt_len": args.train_prompt_len,
                   "train_new": args.train_new, "prompt_seed": TRAIN_PROMPT_SEED, "head_seed": HEAD_SEED,
                   "init_std": args.init_std, "init": "embedding and lm_head copied from the target",
                   "train": asdict(cfg), "tf32_in_training": True},
        "data_s": round(t_data, 2), "train_s": round(t_train, 2),
        "loss_first_last": [round(losses[0], 4), round(losses[-1], 4)] if losses else None,
        "loss_every_50": [round(x, 4) for x in losses[::50]],
        "offline_tau_held_out_fp32": {str(k): round(v, 4) for k, v in tau_offline.items()},
    }
    seen = seen_bigrams(seqs)
    del seqs, held
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    return head.to(torch.bfloat16).eval(), seen, info
