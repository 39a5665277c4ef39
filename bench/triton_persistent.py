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
every barrier trivial; tests/test_triton_persistent.py). Bench-only: not the library's path.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl
from triton_attention import _attention, _attn_o, _attn_o_weights, _flow_done, _rotary
from triton_grid import POLLS, _barrier_base, _barriers, _grid_sync, _wait_count
from triton_ops import _dot, _ss_partial
from triton_outputs import _argmax_tile, _tap_rows
from triton_splitk import _epilogue
from triton_verify import BLOCK_M, INTERPRET, TritonLlamaForward, _prefetch_rows

FLOWS = ("attention", "o", "down")  # the grid barriers `flow` can replace with counts (FLOW's bits)

# per product (BLOCK_N, BLOCK_K, SPLIT); num_warps / num_stages are one per kernel; per_sm: programs
# per SM (refused where fewer fit); poll: the barrier's wait, "atomic", "load" or "acquire" (triton_grid.POLLS);
# prefetch: before each barrier, bulk-prefetch into L2 the first `prefetch` K columns of this program's
# first unit of the next product (0: none); attn_block: cache slots per attention step;
# attn_o: 0, or attention and the o-proj as one phase with column tiles of attn_o (o's config unused),
# o_preload: its first Wo block loaded before the barrier; embed: the embedding gathered in the kernel;
# preload: the products ("qkv", "o", "gate_up", "down", "lm_head") whose first K block is loaded before
# the barrier ahead of them; attn_window: attention reads the cache only below positions[0] and takes
# the window's keys from registers (consecutive positions); flow: attention waits for its kv group's qkv
# tiles (per-group counts) instead of a grid barrier ("attention"), likewise the o-proj for its K slice's
# heads ("o") and the down-proj for its K slice's gate_up tiles ("down"): FLOWS; rope_early: the rotary
# tables read before that wait; fc: the draft fc's tiles in `verify` (PersistentLlamaForward.verify); fc_early: that fc in the last layer's
# attention phase, on the programs attention leaves idle (else after the lm_head); kv_early: with
# attn_window, attention's first cache block loaded before its wait
DEFAULT = {"qkv": (64, 256, 2), "o": (64, 128, 4), "gate_up": (64, 256, 1), "down": (64, 256, 4),
           "lm_head": (256, 64, 1), "warps": 4, "stages": 3, "per_sm": 1, "poll": "acquire", "prefetch": 0,
           "attn_block": 64, "attn_o": 0, "o_preload": True, "embed": True, "preload": (), "attn_window": True,
           "flow": ("attention", "down"), "rope_early": True, "fc": (64, 256, 4), "fc_early": False,
           "kv_early": False}  # the best of the H200 sweeps, sessions 9, 12 and 13 (docs/cuda.md)


@triton.jit
def _prefetch(w_ptr, N, K, pid, BLOCK_N: tl.constexpr, SPLIT: tl.constexpr, EPI: tl.constexpr, COLS: tl.constexpr):
    """L2 prefetch of the first COLS K columns of this program's first unit's weight rows (a hint)."""
    if COLS > 0:
        tiles = tl.cdiv(N, BLOCK_N)
        if pid < tiles * SPLIT:
            tile, ks = pid % tiles, pid // tiles
            rn = tl.minimum(tile * BLOCK_N + tl.arange(0, BLOCK_N), N - 1).to(tl.int64)
            cols = tl.minimum(K // SPLIT, COLS)
            _prefetch_rows(w_ptr + rn * K + ks * (K // SPLIT), cols * 2, BLOCK_N)
            if EPI == 2:
                _prefetch_rows(w_ptr + (N + rn) * K + ks * (K // SPLIT), cols * 2, BLOCK_N)


@triton.jit
def _stamp(times_ptr, i, pid, TIMED: tl.constexpr):
    """Program 0 records %globaltimer (ns) at slot i: where a timed forward's phases end."""
    if TIMED:
        if pid == 0:
            now = tl.inline_asm_elementwise("mov.u64 $0, %globaltimer; // $1", "=l,r", [pid], dtype=tl.int64,
                                            is_pure=False, pack=1)
            tl.store(times_ptr + i, now)


@triton.jit
def _first_block(w_ptr, N, K: tl.constexpr, pid, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SPLIT: tl.constexpr,
                 UP: tl.constexpr, PRE: tl.constexpr):
    """This program's first unit's first K block of w [BLOCK_N, BLOCK_K] (UP: the rows N + n, SwiGLU's up),
    loaded before the barrier that precedes the product (weights depend on nothing); zeros unless PRE."""
    if PRE:
        tiles = tl.cdiv(N, BLOCK_N)
        rn = (pid % tiles) * BLOCK_N + tl.arange(0, BLOCK_N)
        kk = (pid // tiles) * (K // SPLIT) + tl.arange(0, BLOCK_K)
        if UP:
            rn = rn + N
        wmask = (rn < tl.where(pid < tiles * SPLIT, N * (1 + UP), 0))[:, None]  # no unit: nothing loaded
        return tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=wmask, other=0.0)
    else:
        return tl.zeros([BLOCK_N, BLOCK_K], dtype=w_ptr.dtype.element_ty)


@triton.jit
def _x_block(x_ptr, lnw_ptr, rstd, rm, kk, mmask, K: tl.constexpr, NORM: tl.constexpr, dt: tl.constexpr):
    """x[:, kk] [BLOCK_M, BLOCK_K] read through L2 (another SM wrote it); NORM: weight * (x * rstd).to(bf16),
    rounded as HF."""
    xt = tl.load(x_ptr + rm[:, None] * K + kk[None, :], mask=mmask[:, None], other=0.0, cache_modifier=".cg")
    if NORM:
        xn = (xt.to(tl.float32) * rstd[:, None]).to(dt)
        lw = tl.load(lnw_ptr + kk)
        xt = (lw.to(tl.float32)[None, :] * xn.to(tl.float32)).to(dt)
    return xt


@triton.jit
def _count_tile(flow_ptr, c, DONE: tl.constexpr, DONE_COLS: tl.constexpr, NH: tl.constexpr, NKV: tl.constexpr,
                D: tl.constexpr):
    """The tile from column c is stored: count it (DONE 1: for its kv group, _flow_done; 2: for its
    slice of DONE_COLS columns), released after every thread's stores. DONE 0: nothing."""
    if DONE == 1:
        _flow_done(flow_ptr, c, NH, NKV, D)
    elif DONE == 2:
        tl.debug_barrier()
        tl.atomic_add(flow_ptr + c // DONE_COLS, 1, sem="release")


@triton.jit
def _product(x_ptr, w_ptr, out_ptr, res_ptr, lnw_ptr, ws_ptr, cnt_ptr, ss_in, ss_out, M, N, K: tl.constexpr, eps,
             pid, nprog, SS_SLOTS: tl.constexpr, SS_OUT: tl.constexpr, NORM: tl.constexpr, EPI: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
             BLOCK_K: tl.constexpr, SPLIT: tl.constexpr, F32: tl.constexpr, wpre, wpre_up, PRE: tl.constexpr,
             flow_ptr, DONE: tl.constexpr, DONE_COLS: tl.constexpr, wait_ptr, wait_at, WAIT: tl.constexpr,
             err_ptr, POLL: tl.constexpr, NH: tl.constexpr, NKV: tl.constexpr, D: tl.constexpr,
             TAPS: tl.constexpr, A0: tl.constexpr, A1: tl.constexpr, A2: tl.constexpr, am_v, am_i, am_n, ids_ptr,
             AM: tl.constexpr):
    """out[M, N] = epi(prologue(x) @ w^T) over this program's units (triton_splitk's math). PRE: the
    first unit's first K block is wpre (wpre_up) [BLOCK_N, BLOCK_K], loaded before the barrier
    (_first_block); its product is added after the loop (the loop streams the rest at once).
    `flow` (counts in place of grid barriers): DONE 1 counts each stored qkv tile for its kv group
    (_flow_done), DONE 2 for its slice of DONE_COLS columns (a consumer's K slice); WAIT: unit (tile,
    ks) first waits for wait_ptr[ks] >= wait_at (its K slice's producers, triton_grid._wait_count).
    `verify` (bench/triton_outputs.py): TAPS = H: x is the taps hs[A0 | A1 | A2] of hs [L + 1, M, H]
    (the draft's fc); AM > 0: the argmax of each row into ids_ptr (AM: a power of 2 >= the tiles)."""
    dt = out_ptr.dtype.element_ty
    rm = tl.arange(0, BLOCK_M)
    rk = tl.arange(0, BLOCK_K)
    mmask = rm < M
    rstd = tl.zeros([BLOCK_M], dtype=tl.float32)
    if NORM:  # LlamaRMSNorm: the row's sum of squares from its producer's per-tile partials
        slots = tl.arange(0, SS_SLOTS)
        ss = tl.sum(tl.load(ss_in + slots[:, None] * BLOCK_M + rm[None, :], cache_modifier=".cg"), axis=0)
        rstd = tl.rsqrt(ss / K + eps)
    tiles = tl.cdiv(N, BLOCK_N)
    k_len = K // SPLIT
    NW = N * 2 if EPI == 2 else N
    for u in range(pid, tiles * SPLIT, nprog):
        tile, ks = u % tiles, u // tiles
        rn = tile * BLOCK_N + tl.arange(0, BLOCK_N)
        nmask = rn < N
        omask = mmask[:, None] & nmask[None, :]
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        if WAIT:
            _wait_count(wait_ptr + ks, wait_at, err_ptr, POLL)
        k_lo = ks * k_len
        if PRE:
            k_lo += tl.where(u == pid, BLOCK_K, 0)  # the first unit's first block came before the barrier
        for k0 in range(k_lo, (ks + 1) * k_len, BLOCK_K):
            kk = k0 + rk
            if TAPS > 0:
                xb, kc = _tap_rows(x_ptr, k0, M, TAPS, A0, A1, A2)
                xt = _x_block(xb, lnw_ptr, rstd, rm, kk - kc, mmask, TAPS, NORM, dt)
            else:
                xt = _x_block(x_ptr, lnw_ptr, rstd, rm, kk, mmask, K, NORM, dt)
            wt = tl.load(w_ptr + rn[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
            acc += _dot(xt, tl.trans(wt), F32)
            if EPI == 2:
                wu = tl.load(w_ptr + (N + rn)[:, None] * K + kk[None, :], mask=nmask[:, None], other=0.0)
                acc_up += _dot(xt, tl.trans(wu), F32)
        if PRE:
            if u == pid:
                xt = _x_block(x_ptr, lnw_ptr, rstd, rm, ks * k_len + rk, mmask, K, NORM, dt)
                acc += _dot(xt, tl.trans(wpre), F32)
                if EPI == 2:
                    acc_up += _dot(xt, tl.trans(wpre_up), F32)
        if SPLIT == 1:
            y = _epilogue(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI)
            if SS_OUT:  # this tile's partial sum of squares of the stored (bf16) rows, for the next norm
                _ss_partial(y, omask, ss_out, tile, rm, BLOCK_M)
            _count_tile(flow_ptr, tile * BLOCK_N, DONE, DONE_COLS, NH, NKV, D)
            if AM > 0:
                _argmax_tile(y, omask, rn, tile, tiles, rm, mmask, am_v, am_i, am_n, ids_ptr, BLOCK_M, AM)
        else:
            part = rm[:, None] * NW + rn[None, :]
            tl.store(ws_ptr + ks * BLOCK_M * NW + part, acc, mask=omask)
            if EPI == 2:
                tl.store(ws_ptr + ks * BLOCK_M * NW + part + N, acc_up, mask=omask)
            tl.debug_barrier()
            arrived = tl.atomic_add(cnt_ptr + tile, 1, sem="acq_rel")
            if arrived == SPLIT - 1:  # the tile's last split: reduce in split order, then the epilogue
                acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
                for s in tl.static_range(SPLIT):
                    acc += tl.load(ws_ptr + s * BLOCK_M * NW + part, mask=omask, other=0.0, cache_modifier=".cg")
                    if EPI == 2:
                        acc_up += tl.load(ws_ptr + s * BLOCK_M * NW + part + N, mask=omask, other=0.0,
                                          cache_modifier=".cg")
                tl.store(cnt_ptr + tile, 0)
                y = _epilogue(acc, acc_up, out_ptr, res_ptr, rm, rn, N, omask, EPI)
                if SS_OUT:
                    _ss_partial(y, omask, ss_out, tile, rm, BLOCK_M)
                _count_tile(flow_ptr, tile * BLOCK_N, DONE, DONE_COLS, NH, NKV, D)
                if AM > 0:
                    _argmax_tile(y, omask, rn, tile, tiles, rm, mmask, am_v, am_i, am_n, ids_ptr, BLOCK_M, AM)


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
             H, A0, A1, A2, am_v, am_i, am_n, ids_ptr, 0)


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
             F32: tl.constexpr, POLL: tl.constexpr, PF: tl.constexpr, AO: tl.constexpr, OPRE: tl.constexpr,
             NB: tl.constexpr, SSG: tl.constexpr, EMB: tl.constexpr, tok_ptr, emb_ptr, PQ: tl.constexpr,
             PO: tl.constexpr, PG: tl.constexpr, PD: tl.constexpr, PL: tl.constexpr, WIN: tl.constexpr, times_ptr,
             TIMED: tl.constexpr, flow_ptr, FLOW: tl.constexpr, ATT0: tl.constexpr, ROPE_EARLY: tl.constexpr,
             IA: tl.constexpr, IO: tl.constexpr, IG: tl.constexpr, ID: tl.constexpr, am_v, am_i, am_n, ids_ptr,
             AM: tl.constexpr, wfc_ptr, feat_ptr, FCN, VERIFY: tl.constexpr, NTAP: tl.constexpr, A0: tl.constexpr,
             A1: tl.constexpr, A2: tl.constexpr, FN: tl.constexpr, FK: tl.constexpr, FS: tl.constexpr,
             FC_EARLY: tl.constexpr, KV_EARLY: tl.constexpr):
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
                 0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, 0)
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
            _prefetch(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GS, 2, PF)
            _stamp(times_ptr, lay * 10 + 2, pid, TIMED)  # slots 2-4 together: no attention barrier, no o phase
            _stamp(times_ptr, lay * 10 + 3, pid, TIMED)
            _stamp(times_ptr, lay * 10 + 4, pid, TIMED)
        else:
            _prefetch(wo_ptr + li * H * (NH * D), H, NH * D, pid, ON, OS, 1, PF)
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
            if VERIFY and FC_EARLY:  # the last layer's attention window: the fc on the programs it leaves idle
                if lay == L - 1:
                    _fc(hs_ptr, wfc_ptr, feat_ptr, lnf_ptr, ws_ptr, cnt_ptr, ssq_ptr, T, FCN, eps, pid, nprog, H, NTAP,
                        BLOCK_M, FN, FK, FS, F32, flow_ptr, bar_ptr, POLL, NH, NKV, D, A0, A1, A2, am_v, am_i, am_n,
                        ids_ptr)
            wo = _first_block(wo_ptr + li * H * (NH * D), H, NH * D, pid, ON, OK, OS, False, PO)
            _stamp(times_ptr, lay * 10 + 2, pid, TIMED)
            if FLOW // 2 % 2 == 0:
                _grid_sync(bar_ptr, base + (lay * NB + IO) * nprog, POLL)
            _stamp(times_ptr, lay * 10 + 3, pid, TIMED)
            _product(o_ptr, wo_ptr + li * H * (NH * D), xm_ptr, x, x, ws_ptr, cnt_ptr, ssg_ptr, ssg_ptr, T, H,
                     NH * D, eps, pid, nprog, H // ON, True, False, 1, BLOCK_M, ON, OK, OS, F32, wo, wo, PO,
                     flow_ptr, 0, 1, flow_ptr + NKV, (lay + 1) * (NH // OS), FLOW // 2 % 2 == 1, bar_ptr + 2, POLL,
                     NH, NKV, D, 0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, 0)
            _prefetch(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GS, 2, PF)
            _stamp(times_ptr, lay * 10 + 4, pid, TIMED)
        wg = _first_block(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GK, GS, False, PG)
        wu = _first_block(wgu_ptr + li * 2 * FF * H, FF, H, pid, GN, GK, GS, True, PG)
        _grid_sync(bar_ptr, base + (lay * NB + IG) * nprog, POLL)
        _stamp(times_ptr, lay * 10 + 5, pid, TIMED)
        _product(xm_ptr, wgu_ptr + li * 2 * FF * H, a_ptr, xm_ptr, ln2_ptr + li * H, ws_ptr, cnt_ptr, ssg_ptr,
                 ssg_ptr, T, FF, H, eps, pid, nprog, SSG, False, True, 2, BLOCK_M, GN, GK, GS, F32, wg, wu, PG,
                 flow_ptr + NKV + OS, 2 * (FLOW // 4), FF // DS, flow_ptr, 0, False, bar_ptr + 2, POLL, NH, NKV, D,
                 0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, 0)
        _prefetch(wd_ptr + li * H * FF, H, FF, pid, DN, DS, 1, PF)
        wd = _first_block(wd_ptr + li * H * FF, H, FF, pid, DN, DK, DS, False, PD)
        _stamp(times_ptr, lay * 10 + 6, pid, TIMED)
        if FLOW // 4 == 0:
            _grid_sync(bar_ptr, base + (lay * NB + ID) * nprog, POLL)
        _stamp(times_ptr, lay * 10 + 7, pid, TIMED)
        _product(a_ptr, wd_ptr + li * H * FF, x + T * H, xm_ptr, a_ptr, ws_ptr, cnt_ptr, ssq_ptr, ssq_ptr, T, H,
                 FF, eps, pid, nprog, H // DN, True, False, 1, BLOCK_M, DN, DK, DS, F32, wd, wd, PD,
                 flow_ptr, 0, 1, flow_ptr + NKV + OS, (lay + 1) * (FF // DS // GN), FLOW // 4 == 1, bar_ptr + 2, POLL,
                 NH, NKV, D, 0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, 0)
        if lay + 1 < L:
            _prefetch(wqkv_ptr + (li + 1) * QKV * H, QKV, H, pid, QN, QS, 0, PF)
        else:
            _prefetch(wlm_ptr, V, H, pid, LN, LS, 0, PF)
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
             0, 0, 0, 0, am_v, am_i, am_n, ids_ptr, AM * VERIFY)
    if VERIFY and not FC_EARLY:  # the draft's fc over the taps: they were stored layers ago, no barrier needed
        _fc(hs_ptr, wfc_ptr, feat_ptr, lnf_ptr, ws_ptr, cnt_ptr, ssq_ptr, T, FCN, eps, pid, nprog, H, NTAP, BLOCK_M,
            FN, FK, FS, F32, flow_ptr, bar_ptr, POLL, NH, NKV, D, A0, A1, A2, am_v, am_i, am_n, ids_ptr)
    _stamp(times_ptr, 10 * L, pid, TIMED)


def constants(c: dict, L: int, H: int, FF: int, NH: int, NKV: int, D: int, interpret: bool = False,
              programs: int = 1, vocab: int = 1) -> dict:
    """_forward's constexpr arguments for config c (DEFAULT's keys) on a target of L layers, hidden H,
    intermediate FF, NH query and NKV kv heads of D, launched on `programs` (PersistentLlamaForward.consts).
    ATT0, with `flow`: the first attention program, past the qkv units where NH programs are left."""
    qkv_units = -(-(NH + 2 * NKV) * D // c["qkv"][0]) * c["qkv"][2]
    flow = sum(1 << FLOWS.index(k) for k in c["flow"])
    att0 = qkv_units if flow & 1 and programs - qkv_units >= NH else 0
    if c["attn_o"]:  # qkv, (attention + o), gate_up, down
        ia, io, ig, id_, nb = 1, 1, 2, 3, 4
    else:  # each barrier `flow` leaves out shifts the later ones down
        ia = 1 - (flow & 1)
        io = ia + 1 - (flow >> 1 & 1)
        ig = io + 1
        id_ = ig + 1 - (flow >> 2 & 1)
        nb = id_ + 1
    names = {"qkv": "Q", "o": "O", "gate_up": "G", "down": "D", "lm_head": "L"}
    tiles = {f"{p}{x}": c[k][j] for k, p in names.items() for j, x in enumerate("NKS")}
    return dict(L=L, H=H, FF=FF, NH=NH, NKV=NKV, D=D, BLOCK_M=BLOCK_M, BLOCK_S=c["attn_block"], **tiles,
                F32=interpret, POLL=min(POLLS[c["poll"]], 1) if interpret else POLLS[c["poll"]], PF=0 if interpret else c["prefetch"], AO=c["attn_o"],
                OPRE=bool(c["o_preload"]), NB=nb, IA=ia, IO=io, IG=ig, ID=id_, SSG=H // (c["attn_o"] or c["o"][0]),
                EMB=bool(c["embed"]), WIN=bool(c["attn_window"]), FLOW=flow, ATT0=att0,
                ROPE_EARLY=bool(c["rope_early"]), KV_EARLY=bool(c["kv_early"]) and bool(c["attn_window"]), AM=triton.next_power_of_2(-(-vocab // c["lm_head"][0])),
                FN=c["fc"][0], FK=c["fc"][1], FS=c["fc"][2],
                **{f"P{p}": k in c["preload"] for k, p in names.items()})


def resident_per_sm(kernel, device: torch.device) -> int:
    """Programs of a compiled kernel one SM holds at once (registers, shared memory, warps)."""
    kernel._init_handles()  # loads the binary: sets n_regs
    props = torch.cuda.get_device_properties(device)
    threads = kernel.metadata.num_warps * 32
    regs = getattr(props, "regs_per_multiprocessor", 65536) // max(1, kernel.n_regs * threads)
    smem = getattr(props, "shared_memory_per_multiprocessor", 233472) // max(1, kernel.metadata.shared + 1024)
    warps = getattr(props, "max_threads_per_multi_processor", 2048) // threads
    return max(0, min(regs, smem, warps))


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
        if self.pconfigs["poll"] not in POLLS:
            raise ValueError(f"PersistentLlamaForward: poll {self.pconfigs['poll']!r} is not one of {sorted(POLLS)}; "
                             "pick one of them")
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
        cfg = target.model.config.get_text_config(decoder=True)
        self.n_kv, self.head_dim = cfg.num_key_value_heads, wqkv.shape[1] // (cfg.num_attention_heads + 2 * cfg.num_key_value_heads)
        sizes = [(wqkv.shape[1], "qkv"), (wo.shape[1], "o"), (wgu.shape[1], "gate_up"), (wd.shape[1], "down"),
                 (target.model.lm_head.weight.shape[0], "lm_head")]
        ao = self.pconfigs["attn_o"]
        self._check_flow(ao, wd.shape[2])
        self.consts = constants(self.pconfigs, n, wqkv.shape[2], wd.shape[2], self.n_heads, self.n_kv, self.head_dim,
                                INTERPRET, self.programs, target.model.lm_head.weight.shape[0])
        lm_tiles = triton.cdiv(target.model.lm_head.weight.shape[0], self.pconfigs["lm_head"][0])
        self.am_v = torch.empty(lm_tiles, BLOCK_M, device=dev, dtype=torch.float32)  # `verify`'s argmax partials
        self.am_i = torch.empty(lm_tiles, BLOCK_M, device=dev, dtype=torch.int32)
        self.am_n = torch.zeros(1, device=dev, dtype=torch.int32)
        self.flow = torch.zeros(self.n_kv + self.pconfigs["o"][2] + self.pconfigs["down"][2], device=dev,
                                dtype=torch.int64)  # `flow`'s counts: per kv group, o K slice, down K slice
        sizes_fc = sizes + [(wqkv.shape[2], "fc")]  # `verify`'s fc: a draft of the target's hidden size
        ws = max([self.pconfigs[k][2] * BLOCK_M * n_ for n_, k in sizes_fc] + [self.n_kv * BLOCK_M * wo.shape[1]])
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

    def _check_flow(self, attn_o: int, ffn: int):
        """Refuse a `flow` these tiles cannot count exactly (each count needs whole tiles or heads)."""
        c, flow = self.pconfigs, list(self.pconfigs["flow"])
        bad = [k for k in flow if k not in FLOWS]
        if bad:
            raise ValueError(f"PersistentLlamaForward: flow {flow}: {bad} not among {list(FLOWS)}; pick from them")
        need = [(flow and attn_o, f"attn_o 0 (not {attn_o})"),
                ("attention" in flow and self.head_dim % c["qkv"][0], f"a qkv BLOCK_N that divides head_dim {self.head_dim}"),
                ("o" in flow and self.n_heads % c["o"][2], f"an o SPLIT that divides the {self.n_heads} heads"),
                ("down" in flow and (ffn // c["down"][2]) % c["gate_up"][0],
                 "a gate_up BLOCK_N that divides the down-proj's K slice"),
                (c["fc_early"] and "o" in flow, "fc_early off (the fc and the o-proj would share the split-K "
                 "workspace with no barrier between them)")]
        for failed, what in need:
            if failed:
                raise ValueError(f"PersistentLlamaForward: flow {flow} needs {what}; change the tiles or the flow")

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
            FC_EARLY=bool(c["fc_early"]) and max(aux) < n and c["attn_o"] == 0,
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
