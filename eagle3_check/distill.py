"""Draft training by distillation on the target's own greedy text (EAGLE-3 training-time test).

Data: for every training prompt, the target's greedy continuation (`greedy_data`), then one
teacher-forced target forward over prompt + continuation for the taps and the target's
argmax at every position (the label: what `target_verify` would return there).

Indexing (the same as the runner's; see runner.py). A sequence x_0..x_{n-1}, taps f_p at
each position p. Draft row r at chain step s sits at position r + s and reads token
x_{r+s+1}; its label is the target's argmax at position r + s + 1 (= x_{r+s+2} inside
the greedy continuation). Step 0 takes the fused feature fc(f_r) (a confirmed position),
step s > 0 takes the draft's own g from step s - 1 at the same row. Worked example, r = 10:

    step 0: position 10, token x11, hidden fc(f10)  -> label x12  (proposal 0 of a chain
            seeded at anchor x11; the runner's reseed row for position 10)
    step 1: position 11, token x12, hidden g0[10]   -> label x13  (proposal 1)
    step 2: position 12, token x13, hidden g1[10]   -> label x14  (proposal 2)

Attention of step s at row r sees exactly what the draft KV cache holds at inference:
the step-0 keys of rows 0..r (confirmed slots) and the step-j keys of row r for j = 1..s
(this chain's own slots r + 1..r + s). Later-step tokens are the true tokens, which is
exact for acceptance: proposal j only counts when proposals 0..j-1 were right.
"""

from __future__ import annotations

import math
import random
from collections import Counter
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from eagle3_check.draft import Eagle3DraftHead, rope
from eagle3_check.options import RunOptions, prompt_ids
from eagle3_check.tokenizer import Tokenizer


@dataclass
class Sequence:
    ids: list[int]  # prompt + greedy continuation
    prompt_len: int
    taps: torch.Tensor  # [n, n_taps*Ht]
    greedy: torch.Tensor  # [n] target argmax at each position (prediction for position + 1)
    logits: torch.Tensor | None = None  # [n, V] target logits (soft labels), when kept


@dataclass
class TrainConfig:
    steps: int = 400
    batch_size: int = 16
    lr: float = 3e-3
    ttt_steps: int = 5  # chain steps trained (>= the K the card cares about)
    step_decay: float = 0.8  # loss weight of step s: decay ** s
    soft: float = 1.0  # weight of the soft-label loss (target distribution over the draft vocab)
    max_new: int = 96  # greedy continuation length of each training prompt
    seed: int = 0


@torch.no_grad()
def greedy_data(
    model: torch.nn.Module,  # an HF causal LM (the target)
    tokenizer: Tokenizer,
    texts: list[str],
    aux_layer_ids: list[int],
    max_new: int,
    stop_ids: frozenset[int],
    options: RunOptions | None = None,
    progress=None,
    keep_logits: bool = True,
    batch_size: int = 64,
) -> list[Sequence]:
    """Greedy continuation of every prompt (chat template as the runner builds it; ended
    right after the first stop id), then one unpadded forward per sequence for taps,
    logits and the per-position argmax (the labels: what target_verify returns there).
    Continuations are generated in left-padded batches; a rare argmax flip from padding
    only changes an input token, never a label."""
    opts = options or RunOptions()
    dev = next(model.parameters()).device
    prompts = [prompt_ids(tokenizer, t, opts) for t in texts]
    conts: list[list[int]] = []
    for c in range(0, len(prompts), batch_size):
        chunk = prompts[c : c + batch_size]
        width = max(len(p) for p in chunk)
        inp = torch.zeros(len(chunk), width, dtype=torch.long)  # [b, W] left-padded with 0
        mask = torch.zeros(len(chunk), width, dtype=torch.long)
        for i, p in enumerate(chunk):
            inp[i, width - len(p) :], mask[i, width - len(p) :] = torch.tensor(p), 1
        out = model.generate(input_ids=inp.to(dev), attention_mask=mask.to(dev), max_new_tokens=max_new,
                             do_sample=False, pad_token_id=0)
        for row in out[:, width:].tolist():
            stop = next((i for i, t in enumerate(row) if t in stop_ids), None)
            conts.append(row if stop is None else row[: stop + 1])
        if progress:
            progress.update(len(chunk))
    seqs: list[Sequence] = []
    for ids, cont in zip(prompts, conts):
        seq = ids + cont
        res = model(input_ids=torch.tensor([seq], device=dev), output_hidden_states=True)
        taps = torch.cat([res.hidden_states[k] for k in aux_layer_ids], dim=-1)[0].float().cpu()
        logits = res.logits[0].float().cpu()  # [n, V]
        seqs.append(Sequence(seq, len(ids), taps, logits.argmax(-1), logits if keep_logits else None))
    return seqs


def select_draft_vocab(seqs: list[Sequence], size: int, always: set[int], vocab_size: int) -> list[int]:
    """The `size` target ids the draft can propose: `always` (stop ids), then the most
    frequent target-greedy labels of the training data, then the lowest unused ids;
    ascending (so d2t offsets are non-negative)."""
    counts: Counter = Counter()
    for s in seqs:
        counts.update(s.greedy[max(s.prompt_len - 1, 0):].tolist())
    keep = {i for i in always if i < vocab_size}
    for i, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        if len(keep) >= size:
            break
        keep.add(i)
    i = 0
    while len(keep) < size:
        keep.add(i)
        i += 1
    return sorted(keep)


def set_draft_vocab(head: Eagle3DraftHead, kept: list[int]) -> None:
    k = torch.tensor(kept, dtype=torch.long)
    head.d2t.copy_(k - torch.arange(len(kept)))
    head.t2d.zero_()
    head.t2d[k] = True


def ttt_forward(
    head: Eagle3DraftHead,
    tokens: torch.Tensor,  # [B, N] x_0..x_{N-1}, right-padded
    taps: torch.Tensor,  # [B, N, n_taps*Ht]
    n_steps: int,
) -> list[torch.Tensor]:  # n_steps x logits [B, N-1, Vd]; step s, row r predicts position r+s+2
    """Cache-free draft forward over whole sequences, chain steps 0..n_steps-1 (see module doc).
    The math is DraftLayer.forward's with the attention of the draft KV cache spelled out."""
    layer, attn = head.layers[0], head.layers[0].self_attn
    b, n = tokens.shape
    r = n - 1
    pos = torch.arange(r, device=tokens.device)  # [R]
    scale = 1.0 / math.sqrt(attn.d)
    rep = attn.n_heads // attn.n_kv
    causal = pos[None, :] <= pos[:, None]  # [R, R] key row m visible from row r
    padded = F.pad(tokens, (0, n_steps))  # [B, N + n_steps]
    hidden = head.fc(taps[:, :r].to(head.fc.weight.dtype))  # [B, R, H]
    k0 = v0 = None
    chain_k: list[torch.Tensor] = []
    chain_v: list[torch.Tensor] = []
    out = []
    for s in range(n_steps):
        tok = padded[:, s + 1 : s + 1 + r]  # [B, R] x_{r+s+1}
        normed_hidden = layer.hidden_norm(hidden)
        residual = normed_hidden if layer.norm_before_residual else hidden
        x = torch.cat([layer.input_layernorm(head.embed_tokens(tok)), normed_hidden], dim=-1)
        q = attn.q_proj(x).view(b, r, attn.n_heads, attn.d).transpose(1, 2)  # [B, h, R, D]
        k = attn.k_proj(x).view(b, r, attn.n_kv, attn.d).transpose(1, 2)  # [B, kv, R, D]
        v = attn.v_proj(x).view(b, r, attn.n_kv, attn.d).transpose(1, 2)
        q, k = rope(q, pos + s, attn.theta), rope(k, pos + s, attn.theta)
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)  # [B, h, R, D]
        if s == 0:
            k0, v0 = k, v
        else:
            chain_k.append(k)
            chain_v.append(v)
        scores = (q @ k0.transpose(-1, -2)) * scale  # [B, h, R, R]
        scores = scores.masked_fill(~causal, float("-inf"))
        diag = [(q * kj).sum(-1, keepdim=True) * scale for kj in chain_k]  # s x [B, h, R, 1]
        probs = torch.softmax(torch.cat([scores, *diag], dim=-1), dim=-1)
        o = probs[..., :r] @ v0
        for j, vj in enumerate(chain_v):
            o = o + probs[..., r + j : r + j + 1] * vj
        o = attn.o_proj(o.transpose(1, 2).reshape(b, r, attn.n_heads * attn.d))
        h = o + residual
        m = layer.post_attention_layernorm(h)
        m = layer.mlp["down_proj"](F.silu(layer.mlp["gate_proj"](m)) * layer.mlp["up_proj"](m))
        hidden = m + h  # g of step s: the next step's hidden
        out.append(head.lm_head(head.norm(hidden)))
    return out


def batch(seqs: list[Sequence], n_steps: int, t2d_index: torch.Tensor, kept: torch.Tensor | None = None):
    """Pads a batch. labels [S, B, R]: draft-vocab indices (-100 = not trained); soft
    [S, B, R, Vd]: the target's distribution over the draft vocab there (when `kept` ids
    are given and the sequences carry logits), else None."""
    n = max(len(s.ids) for s in seqs)
    tokens = torch.zeros(len(seqs), n, dtype=torch.long)
    taps = torch.zeros(len(seqs), n, seqs[0].taps.shape[-1])
    labels = torch.full((n_steps, len(seqs), n - 1), -100, dtype=torch.long)
    use_soft = kept is not None and all(s.logits is not None for s in seqs)
    soft = torch.zeros(n_steps, len(seqs), n - 1, len(kept)) if use_soft else None
    for i, s in enumerate(seqs):
        ln = len(s.ids)
        tokens[i, :ln] = torch.tensor(s.ids)
        taps[i, :ln] = s.taps
        probs = torch.softmax(s.logits[:, kept], dim=-1) if use_soft else None  # [n, Vd]
        for st in range(n_steps):
            # row r's label is greedy[r+s+1]; train where that position is < ln and at or
            # after the last prompt token (labels inside the target's own continuation)
            lo, hi = max(s.prompt_len - 2 - st, 0), ln - 1 - st
            if hi > lo:
                labels[st, i, lo:hi] = t2d_index[s.greedy[lo + st + 1 : hi + st + 1]]
                if use_soft:
                    soft[st, i, lo:hi] = probs[lo + st + 1 : hi + st + 1]
    return tokens, taps, labels, soft


def step_loss(
    logits: torch.Tensor,  # [B, R, Vd]
    labels: torch.Tensor,  # [B, R] draft-vocab index, -100 = not trained
    soft: torch.Tensor | None,  # [B, R, Vd] target distribution, or None
    soft_weight: float,
) -> torch.Tensor:
    """Cross-entropy on the target's greedy token, plus `soft_weight` x cross-entropy on the
    target's distribution (renormalised over the draft vocab), both over trained rows."""
    valid = labels >= 0  # [B, R]
    hard = F.cross_entropy(logits[valid], labels[valid])
    if soft is None or not soft_weight:
        return hard
    return hard + soft_weight * -(soft[valid] * F.log_softmax(logits[valid], -1)).sum(-1).mean()


def train_draft(head: Eagle3DraftHead, seqs: list[Sequence], cfg: TrainConfig, progress=None) -> list[float]:
    """Trains `head` in place (AdamW, cosine schedule, fixed seed); returns the loss per step.
    `steps = 0` leaves the head as initialised (an untrained draft)."""
    if cfg.steps == 0:
        return []
    torch.manual_seed(cfg.seed)
    rng = random.Random(cfg.seed)
    dev = next(head.parameters()).device  # batches are built on CPU, trained where the head is
    kept = (head.d2t + torch.arange(head.cfg.draft_vocab_size)).tolist()
    t2d_index = torch.full((head.cfg.vocab_size,), -100, dtype=torch.long)
    kept_t = torch.tensor(kept)
    t2d_index[kept_t] = torch.arange(len(kept))
    params = [p for p in head.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=0.0)
    warm = max(cfg.steps // 20, 1)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda i: min((i + 1) / warm, 0.5 * (1 + math.cos(math.pi * min(i / cfg.steps, 1.0))))
    )
    weights = [cfg.step_decay**s for s in range(cfg.ttt_steps)]
    head.train()
    losses = []
    order: list[int] = []
    for _ in range(cfg.steps):
        if len(order) < cfg.batch_size:
            extra = list(range(len(seqs)))
            rng.shuffle(extra)
            order += extra
        pick, order = order[: cfg.batch_size], order[cfg.batch_size :]
        tokens, taps, labels, soft = (
            None if t is None else t.to(dev)
            for t in batch([seqs[i] for i in pick], cfg.ttt_steps, t2d_index, kept_t if cfg.soft else None)
        )
        logits = ttt_forward(head, tokens, taps, cfg.ttt_steps)
        loss = sum(w * step_loss(lg, lb, None if soft is None else soft[s], cfg.soft)
                   for s, (w, lg, lb) in enumerate(zip(weights, logits, labels))) / sum(weights)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(loss.item())
        if progress:
            progress.update(1)
            progress.set_postfix(loss=f"{losses[-1]:.3f}")
    head.eval()
    return losses


@torch.no_grad()
def offline_accepts(head: Eagle3DraftHead, seq: Sequence, k: int) -> list[int]:
    """a(r) for every row r from the last prompt token on: leading chain steps whose proposal
    equals the target's greedy token (the count the runner would see for a chain at r)."""
    tokens = torch.tensor([seq.ids])
    logits = ttt_forward(head, tokens, seq.taps[None], k)
    props = [head.to_target_ids(lg.argmax(-1))[0] for lg in logits]  # k x [R]
    r_total = len(seq.ids) - 1
    accepts = []
    for r in range(seq.prompt_len - 1, r_total):
        a = 0
        while a < k and r + a + 1 < len(seq.greedy) and int(props[a][r]) == int(seq.greedy[r + a + 1]):
            a += 1
        accepts.append(a)
    return accepts


def offline_tau(head: Eagle3DraftHead, seqs: list[Sequence], k: int) -> float:
    """tau of the runner's rounds simulated on the greedy continuations (no stop/max_new edge)."""
    emitted = rounds = 0
    for s in seqs:
        acc = offline_accepts(head, s, k)
        i = 0  # row index into acc: row prompt_len - 1 + i
        while i < len(acc):
            a = acc[i]
            emitted += a + 1
            rounds += 1
            i += a + 1
    return emitted / rounds if rounds else 0.0
