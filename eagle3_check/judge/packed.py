"""The HF reference for many requests in one forward: packed, each request's logits exactly its own.

`HFReference.score` runs one forward a request. `score_packed` runs several requests as one
sequence (no padding): their ids concatenated, each with its own positions 0..n-1, and every
attention call split back into one call per request, on exactly the query, key and value rows and
the causal mask that request's own forward has (`_split_attention`, registered with Transformers'
`AttentionInterface`); everything else in a decoder (embedding, norms, RoPE from the position
ids, the MLP, the linears, the LM head on the kept rows) works row by row. So each request's rows
are bit-identical to `score`'s where the row-wise kernels do not depend on how many rows they get:
on CPU, float32 and bfloat16, pinned by tests/judge/test_packed_reference.py on the tiny fixtures
and by the SmolLM2 check's reports before and after (docs/speed.md). Where that is not known to
hold (a CUDA GEMM picks its kernel by shape), `packable` says no and `score_many` scores one at a time.

Worked example (the index arithmetic the test pins): request A = prompt [a0 a1 a2] + tokens [t0 t1],
B = prompt [b0 b1] + tokens [u0]:

    ids        a0 a1 a2 t0 t1 | b0 b1 u0        N = 8 packed rows
    positions   0  1  2  3  4 |  0  1  2        each request from 0
    spans      (0, 5), (5, 8)                   attention runs on rows 0..4 and on 5..7 apart
    kept rows  2 3 4 | 6 7                      request r: start + L - 1 .. start + L + m - 1
                                                (m + 1 rows, `Scores`' rows 0..m)

so A's Scores come from the 3 kept rows 0..2 of the LM head's output and B's from rows 3..4.
"""

from __future__ import annotations

import contextvars
import inspect

import torch

from eagle3_check.judge.hf import Scores, scores_from_logits, valid_prefix

PACK_ROWS = 4096  # packed rows a forward: the activations are N x hidden, each attention only its own request's
# Fewest rows a linear gets on either side. A float32 CPU GEMM takes other kernels below 4 rows (MKL's
# small-M paths): a row of a 1-, 2- or 3-row product differs in the last bit from the same row in a
# product of 4 to 3000 rows, which agree (measured on every SmolLM2 and tiny-fixture weight shape,
# torch 2.13 CPU; bfloat16 agreed at every M). A request under 16 rows, or a pack keeping fewer than
# 16 LM-head rows, is scored by `score`; any other, even alone, goes through `score_packed`, whose LM
# head reads only the kept rows (`score` projects every prompt row too: 825 of SmolLM2's longest).
MIN_ROWS = 16

_SPANS: contextvars.ContextVar = contextvars.ContextVar("eagle3_packed_spans", default=None)
_SPLIT: dict = {}  # inner implementation -> its split attention, made once by this module
_NAME = "eagle3_packed_{}"  # the split attention registered over an implementation (sdpa, eager)


def packable(reference) -> bool:
    """May this reference pack requests: on CPU (module doc), a model whose forward keeps chosen rows
    (`logits_to_keep`) and an attention implementation the split wraps."""
    model = getattr(reference, "model", None)
    if model is None or str(getattr(reference, "device", "cpu")) != "cpu":
        return False
    if "logits_to_keep" not in inspect.signature(model.forward).parameters:
        return False
    return getattr(model.config, "_attn_implementation", None) in ("sdpa", "eager")


def spans_of(lengths: list[int]) -> list[tuple[int, int]]:
    """(start, end) of each packed request: [5, 3] -> [(0, 5), (5, 8)]."""
    out, at = [], 0
    for n in lengths:
        out.append((at, at + n))
        at += n
    return out


def kept_rows(spans: list[tuple[int, int]], prompt_lens: list[int]) -> list[int]:
    """The packed rows `Scores` reads: request r's start + L_r - 1 .. end - 1 (module doc:
    spans [(0, 5), (5, 8)], prompts [3, 2] -> [2, 3, 4, 6, 7])."""
    return [i for (s, e), L in zip(spans, prompt_lens) for i in range(s + L - 1, e)]


def groups(lengths: list[int], limit: int = PACK_ROWS) -> list[list[int]]:
    """Request indices in order, cut into packs of at most `limit` rows (a longer request alone):
    [3, 3, 3], limit 6 -> [[0, 1], [2]]."""
    out: list[list[int]] = []
    rows = 0
    for i, n in enumerate(lengths):
        if out and rows + n <= limit:
            out[-1].append(i)
            rows += n
        else:
            out.append([i])
            rows = n
    return out


def _pure_causal(mask: torch.Tensor) -> bool:  # [1, 1, S, S] bool
    n = mask.shape[-1]
    return mask.dtype == torch.bool and torch.equal(mask[0, 0], torch.ones(n, n, dtype=torch.bool).tril())


def _split_attention(inner: str):
    """The attention of `inner` ("sdpa" or "eager") called once a request on its own rows (`_SPANS`)."""

    def attention(module, query, key, value, attention_mask, **kwargs):  # [1, h, N, D] x3 -> [1, N, h, D]
        spans = _SPANS.get()
        if inner == "eager":  # each model's own eager function (Transformers' default for "eager")
            fn = inspect.unwrap(type(module).forward).__globals__["eager_attention_forward"]  # even a module dropped from sys.modules
        else:
            from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

            fn = ALL_ATTENTION_FUNCTIONS[inner]
        if spans is None:
            return fn(module, query, key, value, attention_mask, **kwargs)
        window = getattr(module, "sliding_window", None) or kwargs.get("sliding_window")
        outs = []
        for s, e in spans:
            mask = None if attention_mask is None else attention_mask[..., s:e, s:e]  # the request's own block
            if inner == "sdpa" and mask is not None and _pure_causal(mask) and (window is None or e - s < window):
                mask = None  # what one request alone gets: HF skips a plain causal mask for SDPA (is_causal)
            outs.append(fn(module, query[:, :, s:e], key[:, :, s:e], value[:, :, s:e], mask, **kwargs)[0])
        return torch.cat(outs, dim=1), None

    return attention


def _registered(inner: str) -> str:
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS

    name = _NAME.format(inner)
    if inner not in _SPLIT:
        _SPLIT[inner] = _split_attention(inner)
    fn = _SPLIT[inner]
    # Registered by this copy of the module: Transformers' registry outlives a re-import of ours (pytest's
    # in-process runs drop and re-import eagle3_check), and a function registered by a dropped copy reads
    # that copy's _SPANS, never set: it would attend over the whole pack.
    if name not in ALL_ATTENTION_FUNCTIONS or ALL_ATTENTION_FUNCTIONS[name] is not fn:
        ALL_ATTENTION_FUNCTIONS.register(name, fn)
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, ALL_MASK_ATTENTION_FUNCTIONS[inner])  # the inner's own masks
    return name


@torch.no_grad()
def score_packed(reference, requests: list[tuple[list[int], list[int]]]) -> list[Scores]:
    """`reference.score(p, t)` for every (prompt ids, tokens) in one forward (module doc); the
    caller checks `packable(reference)`. The reference's config names the split attention for the
    forward (its own config: a shared reference's is a copy, judge/shared.py)."""
    model = reference.model
    vocab = model.config.get_text_config(decoder=True).vocab_size
    toks = [valid_prefix(t, vocab) for _, t in requests]
    seqs = [list(p) + t for (p, _), t in zip(requests, toks)]
    spans = spans_of([len(s) for s in seqs])
    dev = reference.device
    ids = torch.tensor([[i for s in seqs for i in s]], device=dev)  # [1, N]
    positions = torch.cat([torch.arange(len(s), device=dev) for s in seqs])[None]  # [1, N]
    keep = torch.tensor(kept_rows(spans, [len(p) for p, _ in requests]), device=dev)  # [R]
    cfg = model.config
    inner = cfg._attn_implementation
    cfg._attn_implementation = _registered(inner)
    token = _SPANS.set(spans)
    try:
        logits = model(input_ids=ids, position_ids=positions, use_cache=False, logits_to_keep=keep).logits[0]  # [R, V]
    finally:
        _SPANS.reset(token)
        cfg._attn_implementation = inner
    out, at = [], 0
    for t in toks:
        out.append(scores_from_logits(logits[at : at + len(t) + 1].float(), t, dev))  # [m + 1, V]
        at += len(t) + 1
    return out


def score_many(reference, requests: list[tuple[list[int], list[int]]], limit: int = PACK_ROWS) -> list[Scores]:
    """Every request's `Scores`, packed (`groups` of at most `limit` rows) where `packable`, else one
    forward a request; a shared reference's fingerprint is checked once, before the first forward."""
    if not packable(reference):
        return [reference.score(p, t) for p, t in requests]
    if reference.shared is not None:
        reference.shared.check()
    out: list[Scores | None] = [None] * len(requests)
    rows = [len(p) + len(t) for p, t in requests]
    packs = [i for i, n in enumerate(rows) if n >= MIN_ROWS]
    for g in groups([rows[i] for i in packs], limit):
        idx = [packs[j] for j in g]
        if sum(len(requests[i][1]) + 1 for i in idx) >= MIN_ROWS:  # a pack of one too: the LM head on its kept rows
            for i, sc in zip(idx, score_packed(reference, [requests[i] for i in idx])):
                out[i] = sc
    return [sc if sc is not None else reference.score(*requests[i]) for i, sc in enumerate(out)]
