"""A hand-fused Triton target_verify forward for short windows (T <= 16 rows), Llama layout, bf16.

Why: at M = T <= 8 rows every matrix product of the verify forward is a weight stream (bytes,
not FLOPs), and the compiled forward (program/compiled.py) spends ~0.4 ms of its 1.17 ms in
about eight small kernels per layer around cuBLAS (bench/verify_variants.py). Here each layer
is five kernels, each reading its weight once:

  1. qkv      = RMSNorm(x; ln1) @ Wqkv^T         (the norm in the product's prologue)
  2. o        = attention(rope(q), cache)        (rope of q and k, the cache write at `positions`,
                                                  and the masked attention over slots <= position,
                                                  one program per kv head)
  3. x        = x + o @ Wo^T                     (the residual add in the epilogue)
  4. a        = silu(g) * u, [g | u] = RMSNorm(x; ln2) @ [Wg | Wu]^T   (one kernel: both tiles)
  5. x        = x + a @ Wd^T
then lm_head with the final norm in its prologue. The products (`skinny_linear`) run one
program per BLOCK_N output columns over all of K (no split-K: every program owns its
epilogue), rows padded to 16 for `tl.dot`. Rounding follows HF eager op by op (bf16 after the
norm, the weight multiply, each product, the residual add, SiLU and the gate product; rope as
HF's three bf16 ops); the sums run in another order (fp32 accumulators), so logits are not
bit-equal, and the bench checks ids against the HF forward.

`tune(forward, t)` times every config in CONFIGS per product shape over the 16 layers' weights
(a CUDA graph of one launch per layer: more bytes than the L2 holds) and keeps the fastest.
`TritonLlamaForward` installs as `TargetAdapter.fast_forward`; windows longer than
`max_rows` (the prefill) run program/compiled.py's eager math. CPU: TRITON_INTERPRET=1 runs
the kernels (tests/bench/test_triton_verify.py). Bench-only: not the library's compiled path.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl
from triton_ops import _attend, _dot

from eagle3_check.program.compiled import FastLlamaForward, fuse_projections, llama_layout_problem


def _interpreter_numpy2_shim() -> None:
    """TRITON_INTERPRET=1 with numpy >= 2.4: Triton 3.6's interpreter makes a loop bound an int by
    int() of a one-element 1-d array, which numpy 2.4 refuses; take the element instead."""
    import triton.runtime.interpreter as ti

    if getattr(ti, "_eagle3_shim", False):
        return
    patch = ti._patch_lang_tensor

    def patched(tensor, scope):
        patch(tensor, scope)
        scope.set_attr(tensor, "__index__", lambda self: int(self.handle.data.reshape(-1)[0]))

    ti._patch_lang_tensor, ti._eagle3_shim = patched, True


INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
if INTERPRET:
    _interpreter_numpy2_shim()

NONE, RESIDUAL, SWIGLU = 0, 1, 2
# Programmatic dependent launch (Hopper): each kernel lets the next one launch at its start
# (griddepcontrol.launch_dependents) and waits for the previous one's writes (griddepcontrol.wait)
# only where it reads them; with PREFETCH a product first asks for its own weight rows into L2
# (cp.async.bulk.prefetch.L2), which no earlier kernel writes: the weight stream starts while the
# previous kernel still runs. Off in the interpreter (no PTX there). Set by the bench per variant.
PDL = False
PREFETCH = False
# ONEPASS_NORM: the RMSNorm statistics accumulate in the product's own K loop and rstd scales the
# fp32 accumulator at the end (rstd * (x * w_ln) @ W^T): no pre-pass over x, but not HF's rounding
# order (HF rounds x * rstd to bf16 before the weight). A bench variant, off by default.
ONEPASS_NORM = False
BLOCK_M = 16  # tl.dot's smallest row block: T <= 16 rows
# (BLOCK_N, BLOCK_K, num_warps, num_stages): the tuning space; the first is the untuned default
CONFIGS = [(16, 256, 4, 4), (16, 512, 4, 3), (16, 512, 4, 4), (16, 512, 8, 4), (16, 1024, 8, 3),
           (32, 256, 4, 4), (32, 512, 4, 3), (64, 256, 4, 3)]
# what `tune` picked on the H200 (bench/results/h200-verify-fused-run1.json), the same at T = 5 and 1
TUNED_H200 = {"qkv": (32, 512, 4, 3), "o": (16, 512, 4, 4), "gate_up": (64, 256, 4, 3), "down": (16, 512, 4, 4),
              "lm_head": (64, 256, 4, 3)}


@triton.jit
def _prefetch_rows(row_ptrs, nbytes, BLOCK: tl.constexpr):
    """Bulk L2 prefetch of `nbytes` from each row start in row_ptrs [BLOCK] (sm_90; a hint, no data)."""
    size = nbytes + tl.zeros([BLOCK], dtype=tl.int32)
    tl.inline_asm_elementwise("cp.async.bulk.prefetch.L2.global [$1], $2; // dummy $0", "=r,l,r",
                              [row_ptrs, size], dtype=tl.int32, is_pure=False, pack=1)


@triton.jit
def _pdl_start(PDL: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_launch_dependents()


@triton.jit
def _pdl_wait(PDL: tl.constexpr):
    if PDL:
        tl.extra.cuda.gdc_wait()


@triton.jit
def _skinny_linear(x_ptr, w_ptr, out_ptr, res_ptr, lnw_ptr, M, N, K, up_offset, eps,
                   NORM: tl.constexpr, EPI: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   BLOCK_K: tl.constexpr, F32: tl.constexpr, PDL: tl.constexpr, PREFETCH: tl.constexpr):
    """out[M, N] = epi(prologue(x)[M, K] @ w[N, K]^T); SWIGLU: g rows n, u rows up_offset + n of w."""
    dt = out_ptr.dtype.element_ty
    rm = tl.arange(0, BLOCK_M)
    rn = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    mmask, nmask = rm < M, rn < N
    _pdl_start(PDL)
    if PREFETCH:  # the weights depend on no earlier kernel: start their stream before the wait
        rows = tl.minimum(rn, N - 1).to(tl.int64) * K
        _prefetch_rows(w_ptr + rows, K * 2, BLOCK_N)
        if EPI == 2:
            _prefetch_rows(w_ptr + up_offset.to(tl.int64) * K + rows, K * 2, BLOCK_N)
    _pdl_wait(PDL)
    ss = tl.zeros([BLOCK_M], dtype=tl.float32)
    if NORM == 1:  # LlamaRMSNorm: fp32 statistics over the whole row, first
        for k0 in range(0, K, BLOCK_K):
            xt = tl.load(x_ptr + rm[:, None] * K + (k0 + rk)[None, :], mask=mmask[:, None], other=0.0)
            xt = xt.to(tl.float32)
            ss += tl.sum(xt * xt, axis=1)
        rstd = tl.rsqrt(ss / K + eps)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k0 in range(0, K, BLOCK_K):
        kk = k0 + rk
        xt = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=mmask[:, None], other=0.0)
        if NORM == 1:  # weight * (x * rstd).to(bf16), rounded as HF
            xn = (xt.to(tl.float32) * rstd[:, None]).to(dt)
            lw = tl.load(lnw_ptr + kk)
            xt = (lw.to(tl.float32)[None, :] * xn.to(tl.float32)).to(dt)
        if NORM == 2:  # one pass: statistics here, rstd applied to the accumulators below
            xf = xt.to(tl.float32)
            ss += tl.sum(xf * xf, axis=1)
            lw = tl.load(lnw_ptr + kk)
            xt = (lw.to(tl.float32)[None, :] * xf).to(dt)
        wt = tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
        acc += _dot(xt, tl.trans(wt), F32)
        if EPI == 2:
            wu = tl.load(w_ptr + (up_offset + rn)[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
            acc_up += _dot(xt, tl.trans(wu), F32)
    if NORM == 2:
        rstd2 = tl.rsqrt(ss / K + eps)
        acc = acc * rstd2[:, None]
        acc_up = acc_up * rstd2[:, None]
    y = acc.to(dt)
    omask = mmask[:, None] & nmask[None, :]
    if EPI == 1:  # x + linear(...): both bf16, the sum rounded once
        r = tl.load(res_ptr + rm[:, None] * N + rn[None, :], mask=omask, other=0.0)
        y = (y.to(tl.float32) + r.to(tl.float32)).to(dt)
    if EPI == 2:  # F.silu(gate) * up, each op rounded to bf16
        g = y.to(tl.float32)
        s = (g / (1.0 + tl.exp(-g))).to(dt)
        y = (s.to(tl.float32) * acc_up.to(dt).to(tl.float32)).to(dt)
    tl.store(out_ptr + rm[:, None] * N + rn[None, :], y, mask=omask)


@triton.jit
def _rope(x, partner, sign, cos, sin, dt):
    """HF apply_rotary_pos_emb: x * cos + rotate_half(x) * sin, each op rounded to bf16."""
    a = (x.to(tl.float32) * cos.to(tl.float32)).to(dt)
    b = ((sign * partner.to(tl.float32)) * sin.to(tl.float32)).to(dt)
    return (a.to(tl.float32) + b.to(tl.float32)).to(dt)


@triton.jit
def _rope_cache_attention(qkv_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr, o_ptr, T, S, scale,
                          NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr, BLOCK_T: tl.constexpr,
                          BLOCK_R: tl.constexpr, BLOCK_S: tl.constexpr, F32: tl.constexpr, PDL: tl.constexpr):
    """One kv head g: rope its k rows, write k and v at `positions`, then attend its NH/NKV query
    heads (rows r = head j * T + t) over the slots <= each row's position (online softmax, fp32)."""
    dt = o_ptr.dtype.element_ty
    g = tl.program_id(0)
    _pdl_start(PDL)
    _pdl_wait(PDL)
    REP: tl.constexpr = NH // NKV
    W: tl.constexpr = (NH + 2 * NKV) * D  # one qkv row
    HALF: tl.constexpr = D // 2
    d = tl.arange(0, D)
    partner = (d + HALF) % D
    sign = tl.where(d < HALF, -1.0, 1.0)[None, :]
    t = tl.arange(0, BLOCK_T)
    tmask = (t < T)[:, None]
    pos = tl.load(pos_ptr + t, mask=t < T, other=0)
    cos = tl.load(cos_ptr + pos[:, None] * D + d[None, :], mask=tmask, other=0.0)
    sin = tl.load(sin_ptr + pos[:, None] * D + d[None, :], mask=tmask, other=0.0)
    row = qkv_ptr + t[:, None] * W
    k = tl.load(row + (NH + g) * D + d[None, :], mask=tmask, other=0.0)
    kp = tl.load(row + (NH + g) * D + partner[None, :], mask=tmask, other=0.0)
    k = _rope(k, kp, sign, cos, sin, dt)
    v = tl.load(row + (NH + NKV + g) * D + d[None, :], mask=tmask, other=0.0)
    cache = g * S * D + pos[:, None] * D + d[None, :]
    tl.store(kc_ptr + cache, k, mask=tmask)
    tl.store(vc_ptr + cache, v, mask=tmask)
    tl.debug_barrier()  # the block's cache writes visible to its reads below
    r = tl.arange(0, BLOCK_R)
    rt = r % T
    rmask = (r < REP * T)[:, None]
    rpos = tl.load(pos_ptr + rt)
    qcol = (g * REP + r // T) * D
    qrow = qkv_ptr + rt[:, None] * W + qcol[:, None]
    rcos = tl.load(cos_ptr + rpos[:, None] * D + d[None, :])
    rsin = tl.load(sin_ptr + rpos[:, None] * D + d[None, :])
    q = _rope(tl.load(qrow + d[None, :], mask=rmask, other=0.0),
              tl.load(qrow + partner[None, :], mask=rmask, other=0.0), sign, rcos, rsin, dt)
    out = _attend(q, kc_ptr, vc_ptr, g, S, rpos, tl.max(pos, axis=0) + 1, scale, BLOCK_R, D, BLOCK_S, F32, False)
    tl.store(o_ptr + rt[:, None] * (NH * D) + qcol[:, None] + d[None, :], out.to(dt), mask=rmask)


def _launch() -> dict:
    return {"launch_pdl": True} if PDL else {}


def skinny_linear(
    x: torch.Tensor,  # [M, K] bf16, M <= 16, contiguous
    w: torch.Tensor,  # [N, K] (SWIGLU: [2 N, K], gate rows then up rows)
    epi: int = NONE,
    res: torch.Tensor | None = None,  # [M, N] RESIDUAL's x
    norm: torch.Tensor | None = None,  # [K] RMSNorm weight: the prologue
    eps: float = 1e-5,
    config: tuple[int, int, int, int] = CONFIGS[0],
) -> torch.Tensor:  # [M, N]
    m, k = x.shape
    n = w.shape[0] // 2 if epi == SWIGLU else w.shape[0]
    bn, bk, warps, stages = config
    while k % bk and bk > 16:  # a K block that divides K (the loops have no K mask)
        bk //= 2
    if m > BLOCK_M or k % bk or not x.is_contiguous() or not w.is_contiguous():
        raise ValueError(f"skinny_linear: x {tuple(x.shape)} w {tuple(w.shape)}: needs M <= {BLOCK_M}, "
                         "K a multiple of 16, contiguous operands")
    out = torch.empty(m, n, device=x.device, dtype=x.dtype)
    _skinny_linear[(triton.cdiv(n, bn),)](
        x, w, out, res if res is not None else out, norm if norm is not None else x, m, n, k, n, eps,
        NORM=(2 if ONEPASS_NORM else 1) if norm is not None else 0, EPI=epi, BLOCK_M=BLOCK_M, BLOCK_N=bn, BLOCK_K=bk, F32=INTERPRET, PDL=PDL, PREFETCH=PREFETCH,
        num_warps=warps, num_stages=stages, **_launch())
    return out


def rope_cache_attention(
    qkv: torch.Tensor,  # [T, (h + 2 kv) D]
    cos: torch.Tensor,  # [S, D] HF's table for every slot
    sin: torch.Tensor,  # [S, D]
    positions: torch.Tensor,  # [T] int64
    k_cache: torch.Tensor,  # [1, kv, S, D] written at positions
    v_cache: torch.Tensor,  # [1, kv, S, D]
    n_heads: int,
) -> torch.Tensor:  # [T, h D]
    t = qkv.shape[0]
    _, n_kv, s, d = k_cache.shape
    out = torch.empty(t, n_heads * d, device=qkv.device, dtype=qkv.dtype)
    block_r = max(16, triton.next_power_of_2(n_heads // n_kv * t))
    _rope_cache_attention[(n_kv,)](qkv, cos, sin, positions, k_cache, v_cache, out, t, s, d**-0.5,
                                   NH=n_heads, NKV=n_kv, D=d, BLOCK_T=max(16, triton.next_power_of_2(t)),
                                   BLOCK_R=block_r, BLOCK_S=64, F32=INTERPRET, PDL=PDL,
                                   num_warps=4, **_launch())
    return out


class TritonLlamaForward:
    """`TargetAdapter.fast_forward` with the fused kernels above for windows of <= max_rows rows."""

    def __init__(self, target: torch.nn.Module, max_rows: int = BLOCK_M):
        problem = llama_layout_problem(target.model)
        dtype = next(target.parameters()).dtype
        if problem or not (dtype == torch.bfloat16 or (INTERPRET and dtype == torch.float32)):
            raise ValueError(f"TritonLlamaForward: needs a bf16 plain Llama target ({problem or dtype}; "
                             "float32 only under TRITON_INTERPRET=1: on a GPU tl.dot would round it to tf32)")
        self.target, self.max_rows = target, max_rows
        self.fallback = FastLlamaForward(target, "none", attention="grouped")  # prefill: the same math, eager
        base = target.model.model
        cfg = target.model.config.get_text_config(decoder=True)
        self.eps, self.n_heads = cfg.rms_norm_eps, cfg.num_attention_heads
        self.weights = []
        for lay in base.layers:
            qkv, gate_up = fuse_projections(lay)
            self.weights.append((lay.input_layernorm.weight, qkv, lay.self_attn.o_proj.weight,
                                 lay.post_attention_layernorm.weight, gate_up, lay.mlp.down_proj.weight))
        slots = torch.arange(target.max_seq_len, device=qkv.device)
        cos, sin = base.rotary_emb(base.embed_tokens.weight[:1][None], slots[None])  # HF's own values
        self.cos, self.sin = cos[0].contiguous(), sin[0].contiguous()  # [S, D]
        self.configs: dict[tuple[str, int], tuple[int, ...]] = {}  # (product, rows) -> config
        # the product kernel and its untuned config: skinny_linear, or triton_splitk.splitk_linear
        self.linear_fn, self.default_config = skinny_linear, CONFIGS[0]

    def linear(self, name, x, w, **kw):  # [M, K] -> [M, N]; config tuned for (name, M) by `tune`
        cfg = self.configs.get((name, x.shape[0]), self.default_config)
        return self.linear_fn(x, w, config=cfg, eps=self.eps, **kw)

    def layer(self, x, i):  # [T, H] -> [T, H]
        ln1, wqkv, wo, ln2, w13, wd = self.weights[i]
        positions = self.positions
        qkv = self.linear("qkv", x, wqkv, norm=ln1)
        kc, vc = getattr(self.target, f"k_cache_{i}"), getattr(self.target, f"v_cache_{i}")
        o = rope_cache_attention(qkv, self.cos, self.sin, positions, kc, vc, self.n_heads)
        x = self.linear("o", o, wo, epi=RESIDUAL, res=x)
        a = self.linear("gate_up", x, w13, epi=SWIGLU, norm=ln2)
        return self.linear("down", a, wd, epi=RESIDUAL, res=x)

    def __call__(
        self,
        tokens: torch.Tensor,  # [1, T] int64
        positions: torch.Tensor,  # [T] int64
    ) -> tuple[torch.Tensor, torch.Tensor]:  # logits [1, T, V], taps [1, T, n_taps*H]
        if tokens.shape[1] > self.max_rows:
            return self.fallback(tokens, positions)
        model = self.target.model
        self.positions = positions
        x = model.model.embed_tokens(tokens)[0]  # [T, H]
        hidden = [x]
        for i in range(len(self.weights)):
            x = self.layer(x, i)
            hidden.append(x)
        logits = self.linear("lm_head", x, model.lm_head.weight, norm=model.model.norm.weight)
        taps = torch.cat([hidden[k] for k in self.target.aux_layer_ids], dim=-1)
        return logits[None], taps[None]


def shapes(fw: TritonLlamaForward) -> dict[str, list[tuple]]:
    """Product name -> per-layer (weight, keyword args) the forward launches (one entry for lm_head)."""
    model = fw.target.model
    out = {"qkv": [], "o": [], "gate_up": [], "down": []}
    for ln1, wqkv, wo, ln2, w13, wd in fw.weights:
        out["qkv"].append((wqkv, {"norm": ln1}))
        out["o"].append((wo, {"epi": RESIDUAL}))
        out["gate_up"].append((w13, {"epi": SWIGLU, "norm": ln2}))
        out["down"].append((wd, {"epi": RESIDUAL}))
    out["lm_head"] = [(model.lm_head.weight, {"norm": model.model.norm.weight})]
    return out


def _inputs(w, kw, t):
    k = w.shape[1]
    n = w.shape[0] // 2 if kw.get("epi") == SWIGLU else w.shape[0]
    x = torch.randn(t, k, device=w.device, dtype=w.dtype)
    return x, ({**kw, "res": torch.randn(t, n, device=w.device, dtype=w.dtype)} if kw.get("epi") == RESIDUAL else kw)


def tune(fw: TritonLlamaForward, t: int, time_graph, configs=None, fits=None) -> dict:
    """Per product: the fastest of `configs` (CONFIGS) for fw.linear_fn over one launch per layer's
    weights (a graph timed by `time_graph(fn) -> ms`), skipping those `fits(config, K)` refuses;
    sets fw.configs[(name, t)]; returns {name: {config: ms, ...}}."""
    configs = configs or CONFIGS
    fits = fits or (lambda cfg, k: k % cfg[1] == 0)
    report = {}
    for name, launches in shapes(fw).items():
        cases = [(w, *_inputs(w, kw, t)) for w, kw in launches]
        times = {}
        for cfg in configs:
            if not fits(cfg, cases[0][0].shape[1]):
                continue

            def fn(cfg=cfg, cases=cases):
                for w, x, kw in cases:
                    fw.linear_fn(x, w, config=cfg, eps=fw.eps, **kw)
            try:
                times[cfg] = time_graph(fn)
            except Exception as e:  # a config the compiler refuses (shared memory): skipped, reported
                report.setdefault("refused", {})[f"{name} {cfg}"] = f"{type(e).__name__}: {str(e)[:120]}"
        best = fw.configs[(name, t)] = min(times, key=times.get)
        gbytes = sum(w.numel() * w.element_size() for w, _, _ in cases) / 1e9
        report[name] = {"best": list(best), "ms": {str(c): v for c, v in times.items()},
                        "best_tb_s": gbytes / times[best], "launches": len(cases)}  # GB / ms = TB/s
    return report


def matmul_only_ms(fw: TritonLlamaForward, t: int, time_graph) -> float:
    """The forward's products alone with these kernels (plain epilogues, no norm), one graph."""
    cases = [(w, _inputs(w, {}, t)[0], n) for n, ls in shapes(fw).items() for w, _ in ls]

    def fn():
        for w, x, name in cases:
            fw.linear_fn(x, w, config=fw.configs.get((name, t), fw.default_config))
    return time_graph(fn)


def attention_only_ms(fw: TritonLlamaForward, t: int, time_graph) -> float:
    """The forward's 16 rope + cache + attention launches alone (random q/k/v at the window's slots)."""
    w = fw.weights[0][1]
    qkv = torch.randn(t, w.shape[0], device=w.device, dtype=w.dtype)
    positions = torch.arange(fw.target.max_seq_len // 4, fw.target.max_seq_len // 4 + t, device=w.device)
    caches = [(getattr(fw.target, f"k_cache_{i}"), getattr(fw.target, f"v_cache_{i}")) for i in range(len(fw.weights))]

    def fn():
        for kc, vc in caches:
            rope_cache_attention(qkv, fw.cos, fw.sin, positions, kc, vc, fw.n_heads)
    return time_graph(fn)
