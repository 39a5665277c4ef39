"""A compiled target forward for CUDA-graph capture (gpt-fast's decode recipe), Llama layout.

gpt-fast compiles its decode step with `torch.compile(mode="reduce-overhead")`: inductor fuses
the small ops (RMSNorm, rotary, residual adds, the SiLU gate, the KV-cache write) into a few
Triton kernels and CUDA graphs remove the launches. Here `GraphedProgram` already captures
`target_verify` per window length over the adapter's static KV cache, so the compile uses
inductor's plain mode (the graph around it is ours) with static shapes: one compile per
window length T (T = K + 1 for verify, T = 1 for one-token greedy), frozen by the capture.

Why not compile the HF forward itself: Transformers collects `output_hidden_states` through
forward hooks that read a ContextVar (a graph break in every layer), and its cache indexes
layers by `layer_idx` (one recompile per layer). `FastLlamaForward` is the same Llama
decoder math written as one pure function per layer (`llama_layer`) over the HF model's own
weights, the adapter's KV-cache buffers and HF's own embedding, rotary tables, final norm and
lm_head (eager, a handful of kernels). Every layer calls the one compiled function (weights
are arguments), so a window length compiles one layer's graph ("layer"); "model" compiles
the whole forward as one graph (fusion across layer boundaries, 16x the compile). q/k/v and
gate/up run as one matrix product each, over weights stored as row blocks of one tensor
(`fuse_projections`; the HF Linear layers keep views of it, so nothing is copied).

Compile is optional: `compile_unavailable(device)` says, in one line, why it cannot run here
(dynamo unsupported, no Triton for CUDA, no C++ compiler for CPU); callers print it and stay
eager. Fused arithmetic is not eager's bit for bit: tests hold the compiled forward to the
same bars as eager (fp32 tokens identical to HF eager, bf16 by the verdict).
"""

from __future__ import annotations

import os
import shutil

import torch
import torch.nn.functional as F
from torch import nn

from eagle3_check.errors import OptionError

GRANULARITIES = ("layer", "model", "none")  # none: the same math, eager (the CPU-tested path)
MODES = ("default", "max-autotune-no-cudagraphs")
ATTENTIONS = ("sdpa", "grouped")


def compile_unavailable(device: torch.device | str) -> str | None:
    """None when torch.compile can run on `device` here, else one line saying why not."""
    try:
        import torch._dynamo as dynamo
    except Exception as e:  # a torch built without dynamo
        return f"torch.compile unavailable: torch {torch.__version__} has no dynamo ({type(e).__name__})"
    if not dynamo.is_dynamo_supported():
        return f"torch.compile unavailable: dynamo does not support this Python/torch (torch {torch.__version__})"
    if torch.device(device).type == "cuda":
        from torch.utils._triton import has_triton

        if not has_triton():
            return "torch.compile unavailable on CUDA: Triton is not installed (pip install triton)"
    elif shutil.which(os.environ.get("CXX", "g++")) is None:
        return f"torch.compile unavailable on CPU: no C++ compiler ({os.environ.get('CXX', 'g++')!r} not on PATH)"
    return None


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:  # [1, T, H] -> [1, T, H]
    """LlamaRMSNorm's arithmetic: fp32 statistics, cast back, then the weight."""
    xf = x.float()
    xf = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)
    return weight * xf.to(x.dtype)


def rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """HF apply_rotary_pos_emb on one tensor: x [1, h, T, D], cos/sin [1, T, D]."""
    half = x.shape[-1] // 2
    rotated = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None] + rotated * sin[:, None]


def sdpa_attention(
    q: torch.Tensor,  # [1, h, T, D] (rotated)
    k_cache: torch.Tensor,  # [1, kv, S, D]
    v_cache: torch.Tensor,  # [1, kv, S, D]
    mask: torch.Tensor,  # [1, 1, T, S] bool
) -> torch.Tensor:  # [1, h, T, D]
    """HF's sdpa path for a window of more than one row: kv heads repeated (repeat_kv), one sdpa."""
    rep = q.shape[1] // k_cache.shape[1]
    kc = k_cache.repeat_interleave(rep, dim=1)  # [1, h, S, D]
    vc = v_cache.repeat_interleave(rep, dim=1)
    return F.scaled_dot_product_attention(q, kc, vc, attn_mask=mask, scale=q.shape[-1] ** -0.5)


def grouped_attention(
    q: torch.Tensor,  # [1, h, T, D] (rotated)
    k_cache: torch.Tensor,  # [1, kv, S, D]
    v_cache: torch.Tensor,  # [1, kv, S, D]
    mask: torch.Tensor,  # [1, 1, T, S] bool
) -> torch.Tensor:  # [1, h, T, D]
    """The same attention without copying the cache per query head: query head i uses kv head
    i // rep (HF repeat_kv's order), so the rep heads of one kv head become rep * T rows of one
    product. Worked example: h = 4, kv = 2, T = 3: q heads 0, 1 -> kv 0; rows of group 0 are
    (head 0, t 0..2), (head 1, t 0..2); mask row r of a group is mask row r % T. Softmax in fp32."""
    _, h, t, d = q.shape
    kv, s = k_cache.shape[1], k_cache.shape[2]
    rep = h // kv
    qg = q.reshape(1, kv, rep * t, d)  # [1, kv, rep*T, D]
    scores = (qg @ k_cache.transpose(-1, -2)).float() * d**-0.5  # [1, kv, rep*T, S]
    m = mask.expand(1, rep, t, s).reshape(1, 1, rep * t, s)  # [1, 1, rep*T, S]
    probs = torch.softmax(scores.masked_fill(~m, float("-inf")), dim=-1).to(q.dtype)
    return (probs @ v_cache).reshape(1, h, t, d)


def llama_layer(
    x: torch.Tensor,  # [1, T, H] the residual stream
    cos: torch.Tensor,  # [1, T, D]
    sin: torch.Tensor,  # [1, T, D]
    mask: torch.Tensor,  # [1, 1, T, S] bool: query row t sees slot s
    positions: torch.Tensor,  # [T] absolute slots written
    k_cache: torch.Tensor,  # [1, kv, S, D] written in place at `positions`
    v_cache: torch.Tensor,  # [1, kv, S, D]
    w: tuple[torch.Tensor, ...],  # ln1 [H], qkv [(h + 2 kv) D, H], o, ln2, gate_up [2 I, H], down
    eps: float,
    n_heads: int,
    n_kv: int,
    grouped: bool = False,
) -> torch.Tensor:  # [1, T, H] the layer's output
    """One LlamaDecoderLayer (sdpa attention over the absolute-slot cache), HF's op order, with
    q/k/v and gate/up each one matrix product (`fuse_projections`: rows of one weight)."""
    ln1, wqkv, wo, ln2, w13, wd = w
    t, d = x.shape[1], cos.shape[-1]
    h = rms_norm(x, ln1, eps)
    q, k, v = F.linear(h, wqkv).split([n_heads * d, n_kv * d, n_kv * d], dim=-1)
    q = q.view(1, t, n_heads, d).transpose(1, 2)  # [1, h, T, D]
    k = k.view(1, t, n_kv, d).transpose(1, 2)  # [1, kv, T, D]
    v = v.view(1, t, n_kv, d).transpose(1, 2)
    q, k = rotate(q, cos, sin), rotate(k, cos, sin)
    k_cache.index_copy_(2, positions, k.to(k_cache.dtype))
    v_cache.index_copy_(2, positions, v.to(v_cache.dtype))
    o = grouped_attention(q, k_cache, v_cache, mask) if grouped else sdpa_attention(q, k_cache, v_cache, mask)
    x = x + F.linear(o.transpose(1, 2).reshape(1, t, n_heads * d), wo)
    h = rms_norm(x, ln2, eps)
    gate, up = F.linear(h, w13).chunk(2, dim=-1)
    return x + F.linear(F.silu(gate) * up, wd)


def fuse_projections(layer: nn.Module) -> tuple[torch.Tensor, torch.Tensor]:  # qkv [(h+2kv)D, H], gate_up [2I, H]
    """Stores q/k/v (and gate/up) as row blocks of one weight and points the HF Linear layers
    at views of it: one matrix product where there were three (two), no second copy of the
    weights, and the HF model keeps computing the same values. Idempotent."""
    a, m = layer.self_attn, layer.mlp
    done = getattr(layer, "_fused_projections", None)
    if done is not None and a.q_proj.weight.data_ptr() == done[0].data_ptr() \
            and m.gate_proj.weight.data_ptr() == done[1].data_ptr():
        return done

    def fused(linears: list[nn.Linear]) -> torch.Tensor:
        whole = torch.cat([lin.weight.detach() for lin in linears])
        row = 0
        for lin in linears:
            rows = lin.weight.shape[0]
            lin.weight = nn.Parameter(whole[row : row + rows], requires_grad=False)
            row += rows
        return whole

    layer._fused_projections = (fused([a.q_proj, a.k_proj, a.v_proj]), fused([m.gate_proj, m.up_proj]))
    return layer._fused_projections


def llama_layout_problem(model: nn.Module) -> str | None:
    """None when `model` is a plain Llama decoder this module computes exactly, else what differs."""
    cfg = model.config.get_text_config(decoder=True)
    if getattr(cfg, "model_type", None) != "llama":
        return f"model_type {getattr(cfg, 'model_type', None)!r} (not 'llama')"
    if getattr(cfg, "attention_bias", False) or getattr(cfg, "mlp_bias", False):
        return "attention or MLP biases"
    if getattr(cfg, "hidden_act", "silu") != "silu":
        return f"hidden_act {cfg.hidden_act!r}"
    if getattr(getattr(model.model, "rotary_emb", None), "rope_type", "default") not in ("default", "linear", "llama3"):
        return f"rope type {model.model.rotary_emb.rope_type!r}"
    return None


class FastLlamaForward:
    """The target adapter's forward as pure per-layer functions (see module doc); called by
    `TargetAdapter.forward` once installed with `compile_target`."""

    def __init__(self, target: nn.Module, granularity: str = "layer", mode: str = "default",
                 max_compiled_tokens: int = 16, attention: str = "sdpa"):
        self.target = target
        base = target.model.model
        cfg = target.model.config.get_text_config(decoder=True)
        self.eps = cfg.rms_norm_eps
        self.n_heads, self.n_kv = cfg.num_attention_heads, cfg.num_key_value_heads or cfg.num_attention_heads
        self.granularity = granularity
        self.grouped = attention == "grouped"
        self.max_compiled_tokens = max_compiled_tokens  # longer calls (prefill) run the same math eagerly
        self.weights = []
        for lay in base.layers:
            qkv, gate_up = fuse_projections(lay)
            self.weights.append((lay.input_layernorm.weight, qkv, lay.self_attn.o_proj.weight,
                                 lay.post_attention_layernorm.weight, gate_up, lay.mlp.down_proj.weight))
        kw = {"dynamic": False, "fullgraph": True, "mode": mode}
        self.layer_fn = torch.compile(llama_layer, **kw) if granularity == "layer" else llama_layer
        self.compiled_body = torch.compile(self.body, **kw) if granularity == "model" else None
        self.compiled_calls = 0

    def body(self, x, cos, sin, mask, positions, caches, weights, layer_fn):  # [1, T, H] ... -> T-row hiddens
        hidden = [x]
        for w, (kc, vc) in zip(weights, caches):
            x = layer_fn(x, cos, sin, mask, positions, kc, vc, w, self.eps, self.n_heads, self.n_kv, self.grouped)
            hidden.append(x)
        return hidden

    def __call__(
        self,
        tokens: torch.Tensor,  # [1, T] int64
        positions: torch.Tensor,  # [T] int64
    ) -> tuple[torch.Tensor, torch.Tensor]:  # logits [1, T, V], taps [1, T, n_taps*Ht]
        t, model = self.target, self.target.model
        x = model.model.embed_tokens(tokens)  # [1, T, H]
        cos, sin = model.model.rotary_emb(x, positions[None])  # [1, T, D] each, HF's own tables
        caches = [(getattr(t, f"k_cache_{i}"), getattr(t, f"v_cache_{i}")) for i in range(t.n_layers)]
        args = (x, cos, sin, t.attention_mask(positions), positions, caches, self.weights)
        if self.granularity == "none" or tokens.shape[1] > self.max_compiled_tokens:
            hidden = self.body(*args, llama_layer)
        else:
            self.compiled_calls += 1
            body = self.compiled_body or self.body
            hidden = body(*args, llama_layer if self.compiled_body else self.layer_fn)
        logits = model.lm_head(model.model.norm(hidden[-1]))
        return logits, torch.cat([hidden[k] for k in t.aux_layer_ids], dim=-1)


def compile_target(target: nn.Module, granularity: str = "layer", mode: str = "default",
                   max_compiled_tokens: int = 16, attention: str = "sdpa") -> FastLlamaForward:
    """Installs `FastLlamaForward` on a `TargetAdapter` (its forward uses it from now on) and
    returns it. Compiles lazily: the first call of each window length up to
    `max_compiled_tokens` (longer calls, the prefill, run the same math eagerly).
    `granularity="none"` installs the same math uncompiled (runs anywhere). Fuses the q/k/v
    and gate/up weights in place (`fuse_projections`): call it once the module sits on its
    device and dtype. `attention`: "sdpa" (HF's repeat_kv + sdpa, the default) or "grouped"
    (`grouped_attention`: no per-head copy of the cache; not HF's reduction order). Errors, one line, when the target is
    not a plain Llama or torch.compile cannot run here."""
    if granularity not in GRANULARITIES:
        raise OptionError(f"compile granularity {granularity!r}", f"one of {GRANULARITIES}",
                          "pass --compile layer (bench/gpu_bench.py), i.e. granularity=\"layer\"")
    if attention not in ATTENTIONS:
        raise OptionError(f"compile attention {attention!r}", f"one of {ATTENTIONS}", "pass --compile-attention sdpa")
    if mode not in MODES:  # reduce-overhead would nest inductor's CUDA graphs inside ours
        raise OptionError(f"compile mode {mode!r}", f"one of {MODES} (CUDA graphs are GraphedProgram's)",
                          "pass --compile-mode default")
    problem = llama_layout_problem(target.model)
    if problem:
        raise OptionError(f"--compile on a target with {problem}", "a plain Llama-layout target (bias-free, SiLU)",
                          "run this target uncompiled (--compile off)")
    if granularity != "none":
        reason = compile_unavailable(next(target.parameters()).device)
        if reason:
            raise OptionError(reason, "a platform where torch.compile runs", "run uncompiled (--compile off)")
    target.fast_forward = FastLlamaForward(target, granularity, mode, max_compiled_tokens, attention)
    return target.fast_forward


def compile_program(program, granularity: str, mode: str = "default", attention: str = "grouped") -> dict:
    """The fast path `bench/gpu_bench.py` measures, on an eager program (`EagerBackend`): its target
    forward compiled (`compile_target`) for every window up to the program's longest verify window
    (the verify windows K + 1, and a prefill that short; longer prefills run the same math eagerly).
    Worked example: max_verify_len 8 (the fixtures, `--target`) -> T in 1..8, at most 8 graphs,
    within dynamo's default recompile limit of 8 (past it dynamo would run eagerly). The draft's one-token chain steps are compiled by the caller's
    `GraphedProgram(..., compile_draft_steps=True)` (`cuda_graph.with_cuda_graphs`). Returns the
    settings, for the report. Errors, one line: not an eager program, not a plain Llama target,
    torch.compile unavailable here (`compile_unavailable`)."""
    from eagle3_check.program.contract import read_metadata

    if not hasattr(program, "module"):
        raise OptionError(f"--compile {granularity} on a {type(program).__name__}",
                          "an eager program (--fixture or --target/--draft)", "drop --compile")
    window = read_metadata(program.metadata()).max_verify_len or 16
    compile_target(program.module.target, granularity, mode, max_compiled_tokens=window, attention=attention)
    return {"granularity": granularity, "mode": mode, "attention": attention, "max_compiled_tokens": window,
            "draft_steps": True}
