"""One persistent Triton kernel for the whole T <= 16-row target_verify forward (Llama layout, bf16).

Why: bench/triton_verify.py's fused forward is 81 product launches and 16 attention launches,
and each launch on the H200 costs ~4 us more than its bytes take (the o-proj: 8.4 MB in 6.3 us,
split-K or not: bench/triton_splitk.py), ~0.3 ms of a 1.0 ms forward. Here one launch of one
program per SM runs every layer: per layer five phases separated by grid-wide barriers

  qkv   = RMSNorm(x; ln1) @ Wqkv^T                  (units: column tiles x K splits)
  o     = attention(rope(q), cache)                  (units: query heads; rope(k) and the cache
                                                      write by each of a kv head's programs)
  xm    = x + o @ Wo^T
  a     = silu(g) * u, [g | u] = RMSNorm(xm; ln2) @ [Wg | Wu]^T
  x'    = xm + a @ Wd^T
then logits = RMSNorm(x; norm) @ Wlm^T. Config `flow` replaces the barrier before attention (and
the down-proj, or the o-proj) with counts of the producer tiles a unit needs (bench/triton_grid.py's
_wait_count); `verify` (PersistentLlamaForward.verify) adds the argmax and the draft's fc, so a
target_verify is one launch (bench/triton_outputs.py). Config `attn_o` merges attention and the o-proj into one
phase (bench/triton_attention.py: 4 barriers a layer) and `embed` gathers the embedding and the
first norm's partials in the kernel (one more barrier, ~5 fewer launches around it). A phase's
units go round-robin over the programs; a unit with SPLIT > 1 sums its K slice into an fp32 workspace and the last of a tile's SPLIT programs
reduces them in split order and runs the epilogue (triton_splitk's scheme, deterministic). The
math and its bf16 rounding are triton_verify's op for op. Activations are read with `.cg` (L2,
not the SM's L1, which other SMs' writes do not update). The barrier (bench/triton_grid.py) is one
arrival count that only grows, bounded: a program that gives up waiting bumps an error count the
forward checks (never a hang).

Needs every program resident at once: the grid is the SM count (one program per SM). Weights are
stacked per kind ([L, N, K] copies, 2 GB on the bench target) and the target's per-layer KV caches
rebound to views of one [L, kv, S, D] tensor. CPU: TRITON_INTERPRET=1 runs one program (grid 1,
every barrier trivial; tests/bench/test_triton_persistent.py). Bench-only: not the library's path.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from persistent_config import DEFAULT, check_config, constants, fc_schedule, resident_per_sm
from triton_attention import _attention, _attn_o, _attn_o_weights, _rotary
from triton_grid import _barrier_base, _barriers, _grid_sync
from triton_product import _first_block, _prefetch, _product
from triton_verify import BLOCK_M, INTERPRET, TritonLlamaForward

__all__ = ["DEFAULT", "PersistentLlamaForward", "barriers_only_ms", "constants"]


@triton.jit
def _stamp(times_ptr, i, pid, TIMED: tl.constexpr):
    """Program 0 records %globaltimer (ns) at slot i: where a timed forward's phases end."""
    if TIMED:
        if pid == 0:
            now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer; // $1", "=l,r", [pid], dtype=tl.int64,
                                            is_pure=False, pack=1)
            tl.store(times_ptr + i, now)


@triton.jit
def _fc(hs_ptr, wfc_ptr, feat_ptr, lnw_ptr, ws_ptr, cnt_ptr, ss_ptr, T, FCN, eps, pid, nprog, H: tl.constexpr,
        NTAP: tl.constexpr, BLOCK_M: tl.constexpr, FN: tl.constexpr, FK: tl.constexpr, FS: tl.constexpr,
        F32: tl.constexpr, flow_ptr, bar_ptr, POLL: tl.constexpr, NH: tl.constexpr, NKV: tl.constexpr,
        D: tl.constexpr, A0: tl.constexpr, A1: tl.constexpr, A2: tl.constexpr, am_v, am_i, am_n, ids_ptr):
    """feature [T, FCN] = taps @ wfc^T, taps = hs[A0 | A1 | A2] (never concatenated), `verify`'s fc."""
    wz = tl.zeros([FN, FK], dtype=wfc_ptr.dtype.element_ty)
    _product(hs_ptr, wfc_ptr, feat_ptr, feat_ptr, lnw_ptr, ws_ptr, cnt_ptr, ss_ptr, ss_ptr, T, FCN, NTAP * H, eps,
             pid, nprog, 1, False, False, 0, BLOCK_M, FN, FK, FS, F32, wz, wz, False,
             flow_ptr, 0, 1, flow_ptr, 0, False, bar_ptr + 2, POLL, NH, NKV, D,
             H, A0, A1, A2, am_v, am_i, am_n, ids_ptr, 0, 0)


@triton.jit
def _embed(tok_ptr, emb_ptr, hs_ptr, ss_out, T, H: tl.constexpr, pid, nprog, BLOCK_M: tl.constexpr,
           BLOCK_N: tl.constexpr):
    """hs[0] = embed_tokens(tokens) by column tiles of BLOCK_N, each tile's sum-of-squares partial
    [BLOCK_M] into ss_out (the first norm's input; rows past T are 0)."""
    rm = tl.arange(0, BLOCK_M)
    mmask = rm < T
    tok = tl.load(tok_ptr + rm, mask=mmask, other=0).to(tl.int64)
    for tile in range(pid, H // BLOCK_N, nprog):
        rn = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        e = tl.load(emb_ptr + tok[:, None] * H + rn[None, :], mask=mmask[:, None], other=0.0)
        tl.store(hs_ptr + rm[:, None] * H + rn[None, :], e, mask=mmask[:, None])
        ef = e.to(tl.float32)
        tl.store(ss_out + tile * BLOCK_M + rm, tl.sum(ef * ef, axis=1))


@triton.jit
def _forward(hs_ptr, qkv_ptr, o_ptr, xm_ptr, a_ptr, logits_ptr, ln1_ptr, wqkv_ptr, wo_ptr, ln2_ptr, wgu_ptr,
             wd_ptr, lnf_ptr, wlm_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr, vc_ptr, ws_ptr, cnt_ptr, bar_ptr,
             ssq_ptr, ssg_ptr, T, S, V, eps, scale, L: tl.constexpr, H: tl.constexpr, FF: tl.constexpr, NH: tl.constexpr,
             NKV: tl.constexpr, D: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr,
             QN: tl.constexpr, QK: tl.constexpr, QS: tl.constexpr, ON: tl.constexpr, OK: tl.constexpr,
             OS: tl.constexpr, GN: tl.constexpr, GK: tl.constexpr, GS: tl.constexpr, DN: tl.constexpr,
             DK: tl.constexpr, DS: tl.constexpr, LN: tl.constexpr, LK: tl.constexpr, LS: tl.constexpr,
             F32: tl.constexpr, POLL: tl.constexpr, PFQ: tl.constexpr, PFO: tl.constexpr, PFG: tl.constexpr,
             PFD: tl.constexpr, PFL: tl.constexpr, PFLINES: tl.constexpr, PFATT: tl.constexpr, AO: tl.constexpr,
             OPRE: tl.constexpr, STQ: tl.constexpr, STO: tl.constexpr, STG: tl.constexpr, STD: tl.constexpr,
             STL: tl.constexpr,
             NB: tl.constexpr, SSG: tl.constexpr, EMB: tl.constexpr, tok_ptr, emb_ptr, PQ: tl.constexpr,
             PO: tl.constexpr, PG: tl.constexpr, PD: tl.constexpr, PL: tl.constexpr, WIN: tl.constexpr, times_ptr,
             TIMED: tl.constexpr, flow_ptr, FLOW: tl.constexpr, ATT0: tl.constexpr, ROPE_EARLY: tl.constexpr,
             IA: tl.constexpr, IO: tl.constexpr, IG: tl.constexpr, ID: tl.constexpr, am_v, am_i, am_n, ids_ptr,
             AM: tl.constexpr, wfc_ptr, feat_ptr, FCN, VERIFY: tl.constexpr, NTAP: tl.constexpr, A0: tl.constexpr,
             A1: tl.constexpr, A2: tl.constexpr, FN: tl.constexpr, FK: tl.constexpr, FS: tl.constexpr,
             KV_EARLY: tl.constexpr, wsf_ptr, cntf_ptr, FC_SPREAD: tl.constexpr,
             FC_PER: tl.constexpr, FC_W: tl.constexpr):
    """The whole forward, one program per SM; hs [L + 1, T, H]: the embedding, then each layer's output.
    AO > 0: attention and the o-proj are one phase (_attn_o, column tiles of AO); NB: grid barriers a
    layer (4 with AO, else 5); SSG: the o-proj's column tiles (its sum-of-squares partials for gate_up).
    EMB: hs[0] and its norm partials are gathered here from tok_ptr [T] and emb_ptr [V, H] (one more
    barrier), not by the caller's embedding and sum-of-squares launches. PQ, PO, PG, PD, PL: that
    product's first K block is loaded before the barrier ahead of it (_first_block), so its first
    bytes stream while the grid waits. WIN: attention takes the window's keys from registers
    (triton_attention._attention). FLOW, a bit mask (`flow`): counts in place of the grid barrier
    before attention (1: each unit waits for its kv group's qkv tiles), the o-proj (2: each unit for
    its K slice's heads) and the down-proj (4: for its K slice's gate_up tiles); flow_ptr [NKV + OS +
    DS] holds the counts, zeroed again at the end. Attention runs on the programs from ATT0 on (with
    flow 1: those with no qkv unit, where enough are left). IA, IO, IG, ID: the layer's barrier
    indices before attention, o, gate_up and down (those FLOW skips unused); NB a layer in all.
    ROPE_EARLY: the window's positions, cos and sin are read before the wait that precedes attention."""
    pid, nprog = tl.program_id(0), tl.num_programs(0)
    QKV: tl.constexpr = (NH + 2 * NKV) * D
    base = _barrier_base(bar_ptr, nprog)
    _stamp(times_ptr, 10 * L + 1, pid, TIMED)
    if EMB:
        _embed(tok_ptr, emb_ptr, hs_ptr, ssq_ptr, T, H, pid, nprog, BLOCK_M, DN)
        _grid_sync(bar_ptr, base + nprog, POLL)
        base = base + nprog
    for lay in range(L):
        li = tl.full([], 0, tl.int64) + lay  # int64 offsets (lay is a plain int in the interpreter)
        x = hs_ptr + li * T * H
        wq = _first_block(wqkv_ptr + li * QKV * H, QKV, H, pid, QN, QK, QS, False, PQ)
        if lay > 0:  # the previous layer's down-proj -> this layer's norm
            _grid_sync(bar_ptr, base + (lay * NB) * nprog, POLL)
            _stamp(times_ptr, lay * 10 - 1, pid, TIMED)
        _product(x, wqkv_ptr + li * QKV * H, qkv_ptr, x, ln1_ptr + li * H, ws_ptr, cnt_ptr, ssq_ptr, ssq_ptr, T,
                 QKV, H, eps, pid, nprog, H // DN, False, True, 0, BLOCK_M, QN, QK, QS, F32, wq, wq, PQ,
                 flow_ptr, FLOW % 2, 1, flow_ptr, 0, False, bar_ptr + 2, POLL, NH, NKV, D,
                 0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, 0, STQ)
        if AO > 0:  # attention + o-proj in one phase: 4 barriers a layer
            if OPRE:
                wpre = _attn_o_weights(wo_ptr + li * H * (NH * D), pid, H, NH * D, AO, (NH // NKV) * D, NKV)
            else:
                wpre = tl.zeros([AO, (NH // NKV) * D], dtype=wo_ptr.dtype.element_ty)
            _stamp(times_ptr, lay * 10 + 0, pid, TIMED)
            _grid_sync(bar_ptr, base + (lay * NB + IA) * nprog, POLL)
            _stamp(times_ptr, lay * 10 + 1, pid, TIMED)
            _attn_o(qkv_ptr, cos_ptr, sin_ptr, pos_ptr, kc_ptr + li * NKV * S * D, vc_ptr + li * NKV * S * D,
                    wo_ptr + li * H * (NH * D), wpre, xm_ptr, x, ws_ptr, cnt_ptr, ssg_ptr, T, S, scale, pid, nprog,
                    H, NH, NKV, D, BLOCK_M, BLOCK_S, AO, F32, OPRE)
            _prefetch(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GS, 2, PFG, PFLINES)
            _stamp(times_ptr, lay * 10 + 2, pid, TIMED)  # slots 2-4 together: no attention barrier, no o phase
            _stamp(times_ptr, lay * 10 + 3, pid, TIMED)
            _stamp(times_ptr, lay * 10 + 4, pid, TIMED)
        else:
            attends = (pid + nprog - ATT0) % nprog < NH  # this program has an attention unit
            if not PFATT or not attends:  # PFATT: o's and gate_up's prefetch in the attention window
                _prefetch(wo_ptr + li * H * (NH * D), H, NH * D, pid, ON, OS, 1, PFO, PFLINES)
                if PFATT:
                    _prefetch(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GS, 2, PFG, PFLINES)
            _stamp(times_ptr, lay * 10 + 0, pid, TIMED)
            if ROPE_EARLY:
                pos, cos, sin = _rotary(pos_ptr, cos_ptr, sin_ptr, T, BLOCK_M, D)
            if FLOW % 2 == 0:
                _grid_sync(bar_ptr, base + (lay * NB + IA) * nprog, POLL)
            _stamp(times_ptr, lay * 10 + 1, pid, TIMED)
            if not ROPE_EARLY:
                pos, cos, sin = _rotary(pos_ptr, cos_ptr, sin_ptr, T, BLOCK_M, D)
            _attention(qkv_ptr, pos, cos, sin, pos_ptr, kc_ptr + li * NKV * S * D, vc_ptr + li * NKV * S * D,
                       o_ptr, T, S, scale, pid, nprog, flow_ptr, (lay + 1) * ((NH // NKV + 2) * D // QN), bar_ptr + 2,
                       NH, NKV, D, BLOCK_M, BLOCK_S, F32, WIN, FLOW % 2 == 1, ATT0, POLL,
                       (NH // OS) * (FLOW // 2 % 2), KV_EARLY)
            if PFATT and attends:  # after its attention unit, which the prefetch would have delayed
                _prefetch(wo_ptr + li * H * (NH * D), H, NH * D, pid, ON, OS, 1, PFO, PFLINES)
                _prefetch(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GS, 2, PFG, PFLINES)
            if VERIFY and FC_SPREAD > 0:  # this layer's share of the fc's units
                if lay >= L - FC_SPREAD:
                    lo = (lay - (L - FC_SPREAD)) * FC_PER
                    workers = FC_W if FC_W > 0 else nprog
                    units = (FCN // FN) * FS
                    if pid < workers:
                        for u in range(lo + pid, tl.minimum(lo + FC_PER, units), workers):
                            _fc(hs_ptr, wfc_ptr, feat_ptr, lnf_ptr, wsf_ptr, cntf_ptr, ssq_ptr, T, FCN, eps, u, units,
                                H, NTAP, BLOCK_M, FN, FK, FS, F32, flow_ptr, bar_ptr, POLL, NH, NKV, D, A0, A1, A2,
                                am_v, am_i, am_n, ids_ptr)
            wo = _first_block(wo_ptr + li * H * (NH * D), H, NH * D, pid, ON, OK, OS, False, PO)
            _stamp(times_ptr, lay * 10 + 2, pid, TIMED)
            if FLOW // 2 % 2 == 0:
                _grid_sync(bar_ptr, base + (lay * NB + IO) * nprog, POLL)
            _stamp(times_ptr, lay * 10 + 3, pid, TIMED)
            _product(o_ptr, wo_ptr + li * H * (NH * D), xm_ptr, x, x, ws_ptr, cnt_ptr, ssg_ptr, ssg_ptr, T, H,
                     NH * D, eps, pid, nprog, H // ON, True, False, 1, BLOCK_M, ON, OK, OS, F32, wo, wo, PO,
                     flow_ptr, 0, 1, flow_ptr + NKV, (lay + 1) * (NH // OS), FLOW // 2 % 2 == 1, bar_ptr + 2, POLL,
                     NH, NKV, D, 0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, 0, STO)
            if not PFATT:
                _prefetch(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GS, 2, PFG, PFLINES)
            _stamp(times_ptr, lay * 10 + 4, pid, TIMED)
        wg = _first_block(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GK, GS, False, PG)
        wu = _first_block(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GK, GS, True, PG)
        _grid_sync(bar_ptr, base + (lay * NB + IG) * nprog, POLL)
        _stamp(times_ptr, lay * 10 + 5, pid, TIMED)
        _product(xm_ptr, wgu_ptr + li * 2 * FF * H, a_ptr, xm_ptr, ln2_ptr + li * H, ws_ptr, cnt_ptr, ssg_ptr,
                 ssg_ptr, T, FF, H, eps, pid, nprog, SSG, False, True, 2, BLOCK_M, GN, GK, GS, F32, wg, wu, PG,
                 flow_ptr + NKV + OS, 2 * (FLOW // 4), FF // DS, flow_ptr, 0, False, bar_ptr + 2, POLL, NH, NKV, D,
                 0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, 0, STG)
        _prefetch(wd_ptr + li * H * FF, H, FF, pid, DN, DS, 1, PFD, PFLINES)
        wd = _first_block(wd_ptr + li * H * FF, H, FF, pid, DN, DK, DS, False, PD)
        _stamp(times_ptr, lay * 10 + 6, pid, TIMED)
        if FLOW // 4 == 0:
            _grid_sync(bar_ptr, base + (lay * NB + ID) * nprog, POLL)
        _stamp(times_ptr, lay * 10 + 7, pid, TIMED)
        _product(a_ptr, wd_ptr + li * H * FF, x + T * H, xm_ptr, a_ptr, ws_ptr, cnt_ptr, ssq_ptr, ssq_ptr, T, H,
                 FF, eps, pid, nprog, H // DN, True, False, 1, BLOCK_M, DN, DK, DS, F32, wd, wd, PD,
                 flow_ptr, 0, 1, flow_ptr + NKV + OS, (lay + 1) * (FF // DS // GN), FLOW // 4 == 1, bar_ptr + 2, POLL,
                 NH, NKV, D, 0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, 0, STD)
        if lay + 1 < L:
            _prefetch(wqkv_ptr + (li + 1) * QKV * H, QKV, H, pid, QN, QS, 0, PFQ, PFLINES)
        else:
            _prefetch(wlm_ptr, V, H, pid, LN, LS, 0, PFL, PFLINES)
        _stamp(times_ptr, lay * 10 + 8, pid, TIMED)
    wl = _first_block(wlm_ptr, V, H, pid, LN, LK, LS, False, PL)
    _grid_sync(bar_ptr, base + (L * NB) * nprog, POLL)  # the last down-proj -> the final norm
    if FLOW > 0:  # every waiting unit is past its wait: the next launch counts from 0
        if pid == 0:
            for g in range(NKV + OS + DS):
                tl.store(flow_ptr + g, 0)
    _stamp(times_ptr, L * 10 - 1, pid, TIMED)
    _product(hs_ptr + L * T * H, wlm_ptr, logits_ptr, logits_ptr, lnf_ptr, ws_ptr, cnt_ptr, ssq_ptr, ssq_ptr, T, V,
             H, eps, pid, nprog, H // DN, False, True, 0, BLOCK_M, LN, LK, LS, F32, wl, wl, PL,
             flow_ptr, 0, 1, flow_ptr, 0, False, bar_ptr + 2, POLL, NH, NKV, D,
             0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, AM * VERIFY, STL)
    if VERIFY and FC_SPREAD == 0:  # the draft's fc over the taps: they were stored layers ago, no barrier needed
        _fc(hs_ptr, wfc_ptr, feat_ptr, lnf_ptr, ws_ptr, cnt_ptr, ssq_ptr, T, FCN, eps, pid, nprog, H, NTAP, BLOCK_M,
            FN, FK, FS, F32, flow_ptr, bar_ptr, POLL, NH, NKV, D, A0, A1, A2, am_v, am_i, am_n, ids_ptr)
    _stamp(times_ptr, 10 * L, pid, TIMED)


def barriers_only_ms(fw: PersistentLlamaForward, n: int, time_graph) -> float:
    """Median ms of one launch of fw's grid doing n grid barriers and nothing else (a CUDA graph)."""
    bar = torch.zeros(4, device=fw.ws.device, dtype=torch.int64)

    def fn():
        _barriers[(fw.programs,)](bar, n, POLL=fw.consts["POLL"], num_warps=fw.pconfigs["warps"])
    return time_graph(fn)


class PersistentLlamaForward(TritonLlamaForward):
    """`TargetAdapter.fast_forward` as one persistent kernel for windows of <= max_rows rows."""

    def __init__(self, target: torch.nn.Module, configs: dict | None = None, programs: int | None = None):
        super().__init__(target)
        self.pconfigs = {**DEFAULT, **(configs or {})}
        cfg = target.model.config.get_text_config(decoder=True)
        qkv_rows, ffn = self.weights[0][1].shape[0], self.weights[0][5].shape[1]
        self.n_kv, self.head_dim = cfg.num_key_value_heads, qkv_rows // (cfg.num_attention_heads + 2 * cfg.num_key_value_heads)
        check_config(self.pconfigs, self.head_dim, self.n_heads, ffn)  # before the target's caches are rebound
        ln1, wqkv, wo, ln2, wgu, wd = (torch.stack(ws).contiguous() for ws in zip(*self.weights))
        self.stacked = ln1, wqkv, wo, ln2, wgu, wd
        n = len(self.weights)
        for name in ("k", "v"):  # one [L, kv, S, D] tensor; the target's buffers become its views
            stacked = torch.stack([getattr(target, f"{name}_cache_{i}")[0] for i in range(n)]).contiguous()
            setattr(self, f"{name}_stacked", stacked)
            for i in range(n):
                setattr(target, f"{name}_cache_{i}", stacked[i][None])
        target._bind_cache()
        dev = wqkv.device
        self.sms = torch.cuda.get_device_properties(dev).multi_processor_count if dev.type == "cuda" else 1
        self.programs = programs or self.sms * self.pconfigs["per_sm"]
        self.resident: int | None = None  # programs per SM the compiled kernel allows (first call)
        self.kernel_info: dict = {}  # the compiled kernel's registers a thread, spills, shared memory (first call)
        self.times: torch.Tensor | None = None  # set to int64 [10 L + 2] to record phase ends (`phase_us`)
        sizes = [(wqkv.shape[1], "qkv"), (wo.shape[1], "o"), (wgu.shape[1], "gate_up"), (wd.shape[1], "down"),
                 (target.model.lm_head.weight.shape[0], "lm_head")]
        ao = self.pconfigs["attn_o"]
        self.consts = constants(self.pconfigs, n, wqkv.shape[2], wd.shape[2], self.n_heads, self.n_kv, self.head_dim,
                                INTERPRET, self.programs, target.model.lm_head.weight.shape[0])
        lm_tiles = triton.cdiv(target.model.lm_head.weight.shape[0], self.pconfigs["lm_head"][0])
        self.am_v = torch.empty(lm_tiles, BLOCK_M, device=dev, dtype=torch.float32)  # `verify`'s argmax partials
        self.am_i = torch.empty(lm_tiles, BLOCK_M, device=dev, dtype=torch.int32)
        self.am_n = torch.zeros(1, device=dev, dtype=torch.int32)
        fn, _, fs = self.pconfigs["fc"]  # fc_spread's own split-K workspace (the layers' products use ws)
        self.wsf = torch.empty(fs * BLOCK_M * wqkv.shape[2] if self.pconfigs["fc_spread"] else 1, device=dev,
                               dtype=torch.float32)
        self.cntf = torch.zeros(triton.cdiv(wqkv.shape[2], fn), device=dev, dtype=torch.int32)
        self._fc_schedules: dict = {}  # fc rows -> _fc_schedule's constexprs
        self.flow = torch.zeros(self.n_kv + self.pconfigs["o"][2] + self.pconfigs["down"][2], device=dev,
                                dtype=torch.int64)  # `flow`'s counts: per kv group, o K slice, down K slice
        sizes_fc = sizes + [(wqkv.shape[2], "fc")]  # `verify`'s fc: a draft of the target's hidden size
        ks = dict(zip(("qkv", "o", "gate_up", "down", "lm_head", "fc"), (wqkv.shape[2], wo.shape[2], wgu.shape[2],
                                                                         wd.shape[2], ln1.shape[1], 0)))
        slots = {k: ks[k] // self.pconfigs[k][1] if k in self.pconfigs["stream"] else self.pconfigs[k][2]
                 for _, k in sizes_fc}  # stream: a slot a K block (triton_product._stream), else a split
        ws = max([slots[k] * BLOCK_M * n_ for n_, k in sizes_fc] + [self.n_kv * BLOCK_M * wo.shape[1]])
        tiles = max(triton.cdiv(n_ if k != "gate_up" else n_ // 2, self.pconfigs[k][0]) for n_, k in sizes_fc)
        tiles = max(tiles, triton.cdiv(wo.shape[1], ao) if ao else 0)
        if ao and wo.shape[1] % ao:
            raise ValueError(f"PersistentLlamaForward: attn_o {ao}: the o-proj's {wo.shape[1]} columns are not a "
                             "multiple of it; pick a divisor")
        self.ws = torch.empty(ws, device=dev, dtype=torch.float32)
        self.cnt = torch.zeros(tiles, device=dev, dtype=torch.int32)
        self.bar = torch.zeros(4, device=dev, dtype=torch.int64)  # arrivals (only grow), -, gave-up count
        for (_, k), kk in zip(sizes, (wqkv.shape[2], wo.shape[2], wgu.shape[2], wd.shape[2], ln1.shape[1])):
            bn, bk, split = self.pconfigs[k]
            if kk % (bk * split):
                raise ValueError(f"PersistentLlamaForward: {k} config {self.pconfigs[k]}: K = {kk} is not a "
                                 "multiple of BLOCK_K * SPLIT; pick another")

    def phase_us(self) -> dict:
        """Mean us per layer of each phase (and its barrier) from the last timed call (self.times)."""
        t = self.times.cpu().double() / 1e3
        n = len(self.weights)
        starts = torch.cat([t[10 * n + 1:10 * n + 2], t[:10 * n - 1]]).view(n, 10)  # slot 10 L + 1: the start
        names = [f"{p}{b}" for p in ("qkv", "attention", "o", "gate_up", "down") for b in ("", " barrier")]
        per = (t[:10 * n].view(n, 10) - starts).mean(0)
        out = {k: round(float(v), 2) for k, v in zip(names, per)}
        out["lm_head"] = round(float(t[10 * n] - t[10 * n - 1]), 2)
        out["total"] = round(float(t[10 * n] - t[10 * n + 1]), 2)
        return out

    @property
    def barriers(self) -> int:
        """Grid barriers one forward launch makes: NB a layer, plus the embedding's with `embed`."""
        return self.consts["NB"] * len(self.weights) + self.consts["EMB"]

    def failed_barriers(self) -> int:
        """How many barrier waits gave up (SPIN_LIMIT) since construction: nonzero = wrong output."""
        return int(self.bar[2].item())

    def __call__(
        self,
        tokens: torch.Tensor,  # [1, T] int64
        positions: torch.Tensor,  # [T] int64
    ) -> tuple[torch.Tensor, torch.Tensor]:  # logits [1, T, V], taps [1, T, n_taps*H]
        if tokens.shape[1] > self.max_rows:
            return self.fallback(tokens, positions)
        logits, hs, _, _ = self._launch(tokens, positions, None)
        taps = torch.cat([hs[k] for k in self.target.aux_layer_ids], dim=-1)
        return logits[None], taps[None]

    def verify(
        self,
        tokens: torch.Tensor,  # [1, T] int64
        positions: torch.Tensor,  # [T] int64
        fc: torch.Tensor,  # [Hd, n_taps*H] the draft's fc weight (no norm before it)
    ) -> tuple[torch.Tensor, torch.Tensor]:  # verify_ids [1, T], feature [1, T, Hd]
        """target_verify's outputs from one launch: the logits' argmax and the draft's fc over the taps
        computed in the kernel (bench/triton_outputs.py), where the library would launch both after it."""
        h, (_, fk, fs) = self.stacked[1].shape[2], self.pconfigs["fc"]
        n_taps = len(self.target.aux_layer_ids)
        if tokens.shape[1] > self.max_rows or n_taps > 3 or tuple(fc.shape) != (h, n_taps * h):
            raise ValueError(f"PersistentLlamaForward.verify: {tokens.shape[1]} rows, {n_taps} taps, fc {tuple(fc.shape)}; "
                             f"it takes <= {self.max_rows} rows, <= 3 taps and an fc of ({h}, {n_taps * h}): call the "
                             "forward and fuse the taps instead")
        if h % fk or (n_taps * h) % (fk * fs):
            raise ValueError(f"PersistentLlamaForward.verify: fc config {self.pconfigs['fc']}: BLOCK_K must divide the "
                             f"hidden size {h} and BLOCK_K * SPLIT the fc's K = {n_taps * h}; pick another")
        _, _, ids, feature = self._launch(tokens, positions, fc)
        return ids[None], feature[None]

    def _fc_schedule(self, fc_rows: int) -> dict:
        """fc_schedule's constexprs for an fc of fc_rows rows, computed once per size (not per launch)."""
        if fc_rows not in self._fc_schedules:
            self._fc_schedules[fc_rows] = fc_schedule(self.pconfigs, len(self.weights),
                                                      list(self.target.aux_layer_ids), fc_rows, self.consts["ATT0"])
        return self._fc_schedules[fc_rows]

    def _launch(self, tokens, positions, fc):  # [1, T], [T], [Hd, n_taps*H] or None
        """One launch of _forward: (logits [T, V], hs [L + 1, T, H], ids [T] | None, feature [T, Hd] | None)."""
        model = self.target.model
        ln1, wqkv, wo, ln2, wgu, wd = self.stacked
        n, t, h = wqkv.shape[0], tokens.shape[1], wqkv.shape[2]
        i, v, dev, dt = wd.shape[2], model.lm_head.weight.shape[0], wqkv.device, wqkv.dtype
        c = self.pconfigs
        hs = torch.empty(n + 1, t, h, device=dev, dtype=dt)  # [L + 1, T, H]
        if not c["embed"]:
            hs[0] = model.model.embed_tokens(tokens)[0]
        qkv = torch.empty(t, wqkv.shape[1], device=dev, dtype=dt)
        o, xm = torch.empty(t, wo.shape[2], device=dev, dtype=dt), torch.empty(t, h, device=dev, dtype=dt)
        a, logits = torch.empty(t, i, device=dev, dtype=dt), torch.empty(t, v, device=dev, dtype=dt)
        # per-tile partial sums of squares [slots, BLOCK_M] fp32 feeding the norms: ssq from the
        # embedding (slot 0, written here; every slot by the kernel with `embed`) and each down-proj;
        # ssg from each o-proj (attn_o's tiles with `attn_o`)
        if c["embed"]:
            ssq = torch.empty(h // c["down"][0], BLOCK_M, device=dev, dtype=torch.float32)
        else:
            ssq = torch.zeros(h // c["down"][0], BLOCK_M, device=dev, dtype=torch.float32)
            ssq[0, :t] = hs[0].float().square().sum(-1)
        ssg = torch.empty(self.consts["SSG"], BLOCK_M, device=dev, dtype=torch.float32)
        ids = torch.empty(t, device=dev, dtype=torch.int64) if fc is not None else None
        feature = torch.empty(t, fc.shape[0], device=dev, dtype=dt) if fc is not None else None
        aux = list(self.target.aux_layer_ids)
        aux = (aux + aux[-1:] * 3)[:3]
        args = ((
            hs, qkv, o, xm, a, logits, ln1, wqkv, wo, ln2, wgu, wd, model.model.norm.weight, model.lm_head.weight,
            self.cos, self.sin, positions, self.k_stacked, self.v_stacked, self.ws, self.cnt, self.bar, ssq, ssg,
            t, self.k_stacked.shape[2], v, self.eps, self.head_dim**-0.5), dict(
            times_ptr=self.times, TIMED=self.times is not None, tok_ptr=tokens[0],
            emb_ptr=model.model.embed_tokens.weight, flow_ptr=self.flow, am_v=self.am_v, am_i=self.am_i,
            am_n=self.am_n, ids_ptr=ids if fc is not None else self.am_n, wfc_ptr=fc if fc is not None else wd,
            feat_ptr=feature if fc is not None else xm, FCN=fc.shape[0] if fc is not None else 0,
            VERIFY=fc is not None, NTAP=len(self.target.aux_layer_ids), A0=aux[0], A1=aux[1], A2=aux[2],
            wsf_ptr=self.wsf, cntf_ptr=self.cntf,
            **self._fc_schedule(fc.shape[0] if fc is not None else 0),
            num_warps=c["warps"], num_stages=c["stages"], **self.consts))
        if self.resident is None and not INTERPRET:
            kernel = _forward.warmup(*args[0], grid=(1,), **args[1])
            self.resident = resident_per_sm(kernel, dev)
            self.kernel_info = {"registers": kernel.n_regs, "spills": kernel.n_spills, "shared": kernel.metadata.shared}
            if self.programs > self.resident * self.sms:
                raise ValueError(f"PersistentLlamaForward: {self.programs} programs on {self.sms} SMs, but only "
                                 f"{self.resident} fit an SM at once (registers, shared memory): use per_sm <= "
                                 f"{self.resident}")
        _forward[(self.programs,)](*args[0], **args[1])
        return logits, hs, ids, feature
