"""The configuration of bench/triton_persistent.py's one-kernel verify forward: DEFAULT (every
knob, the best of the H200 sweeps), the refusals of configs the kernel cannot run exactly, and
constants(): the kernel's constexpr arguments for a config on a target. Bench-only.
"""

from __future__ import annotations

import torch
import triton
from triton_grid import POLLS
from triton_verify import BLOCK_M

PRODUCTS = ("qkv", "o", "gate_up", "down", "lm_head")
FLOWS = ("attention", "o", "down")  # the grid barriers `flow` can replace with counts (FLOW's bits)

# per product (BLOCK_N, BLOCK_K, SPLIT); num_warps / num_stages are one per kernel; per_sm: programs
# per SM (refused where fewer fit); poll: the barrier's wait, "atomic", "load" or "acquire" (triton_grid.POLLS);
# prefetch: before each barrier, bulk-prefetch into L2 the first `prefetch` K columns of this program's
# first unit of the next product (0: none; a dict {product: columns} for some products only, e.g.
# {"o": 512}: the o-proj's whole unit, issued before attention); prefetch_op: "bulk" (one
# cp.async.bulk.prefetch a weight row) or "line" (one prefetch.global.L2 a 128-byte line; columns a power
# of two >= 64); prefetch_at: "barrier" (each product's before its barrier) or "attention" (o's and
# gate_up's in the attention window: programs with no attention unit right after qkv, the others after
# it); attn_block: cache slots per attention step;
# attn_o: 0, or attention and the o-proj as one phase with column tiles of attn_o (o's config unused),
# o_preload: its first Wo block loaded before the barrier; embed: the embedding gathered in the kernel;
# preload: the products ("qkv", "o", "gate_up", "down", "lm_head") whose first K block is loaded before
# the barrier ahead of them; attn_window: attention reads the cache only below positions[0] and takes
# the window's keys from registers (consecutive positions); flow: attention waits for its kv group's qkv
# tiles (per-group counts) instead of a grid barrier ("attention"), likewise the o-proj for its K slice's
# heads ("o") and the down-proj for its K slice's gate_up tiles ("down"): FLOWS; rope_early: the rotary
# tables read before that wait; fc: the draft fc's tiles in `verify` (PersistentLlamaForward.verify);
# kv_early: with attn_window, attention's first cache block loaded before its wait; fc_spread: the fc's
# units spread over the attention phases of that many last layers (fc_schedule; 0: after the lm_head;
# 1 replaced session 13's fc_early, the fc in the last layer's attention phase);
# stream: the products run as stream-K (triton_product._stream: every program the same blocks of BLOCK_K
# columns; SPLIT only slices `flow`'s counts), the others as (tile, split) units
DEFAULT = {"qkv": (64, 256, 2), "o": (64, 128, 4), "gate_up": (64, 256, 1), "down": (64, 256, 4),
           "lm_head": (256, 64, 1), "warps": 4, "stages": 3, "per_sm": 1, "poll": "acquire", "prefetch": 0,
           "prefetch_op": "bulk", "prefetch_at": "barrier",
           "attn_block": 64, "attn_o": 0, "o_preload": True, "embed": True, "preload": (), "attn_window": True,
           "flow": ("attention", "down"), "rope_early": True, "fc": (64, 256, 4),
           "kv_early": False, "fc_spread": 0, "stream": ()}  # the best of the H200 sweeps, sessions 9 and 12-14 (docs/cuda.md)


def check_config(c: dict, head_dim: int, n_heads: int, ffn: int):
    """Refuse a config (DEFAULT's keys) the kernel cannot run exactly on a target of head_dim, n_heads
    and intermediate size ffn: an unknown poll, or a `flow` whose counts would need partial tiles or
    heads, or one that would share the split-K workspace with no barrier."""
    unknown = sorted(set(c) - set(DEFAULT))
    if unknown:
        raise ValueError(f"PersistentLlamaForward: config keys {unknown} are not knobs of the kernel; pick from "
                         f"{sorted(DEFAULT)} (bench/persistent_config.py DEFAULT)")
    if c["poll"] not in POLLS:
        raise ValueError(f"PersistentLlamaForward: poll {c['poll']!r} is not one of {sorted(POLLS)}; pick one of them")
    if c["prefetch_at"] not in ("barrier", "attention") or (c["prefetch_at"] == "attention" and c["attn_o"]):
        raise ValueError(f"PersistentLlamaForward: prefetch_at {c['prefetch_at']!r} with attn_o {c['attn_o']}: "
                         "expected 'barrier', or 'attention' with attn_o 0 (attn_o has no attention window)")
    flow, attn_o = list(c["flow"]), c["attn_o"]
    bad = [k for k in flow if k not in FLOWS]
    if bad:
        raise ValueError(f"PersistentLlamaForward: flow {flow}: {bad} not among {list(FLOWS)}; pick from them")
    need = [(flow and attn_o, f"attn_o 0 (not {attn_o})"),
            ("attention" in flow and head_dim % c["qkv"][0], f"a qkv BLOCK_N that divides head_dim {head_dim}"),
            ("o" in flow and n_heads % c["o"][2], f"an o SPLIT that divides the {n_heads} heads"),
            ("down" in flow and (ffn // c["down"][2]) % c["gate_up"][0],
             "a gate_up BLOCK_N that divides the down-proj's K slice")]
    stream = list(c["stream"])
    need += [(set(stream) - set(PRODUCTS), f"stream products among {list(PRODUCTS)} (not {stream})"),
             (set(stream) & set(c["preload"]), "no product both in stream and in preload (stream has no first unit)"),
             ("gate_up" in stream and "down" in flow, "gate_up out of stream (with flow \"down\" its workspace "
              "and counters would be shared with the down-proj's with no barrier between them)"),
             ("o" in flow and (c["qkv"][2] > 1 or "qkv" in stream), "a qkv with no split-K workspace, SPLIT 1 "
              "and out of stream (with flow \"o\" the o-proj's partials and tile counts would share it with qkv's "
              "last reductions, no barrier between them)"),
             ("lm_head" in stream and not c["fc_spread"], "fc_spread with lm_head in stream (verify's fc after the "
              "lm_head would share its workspace with no barrier between them)")]
    for failed, what in need:
        if failed:
            raise ValueError(f"PersistentLlamaForward: flow {flow} with stream {stream} needs {what}; change the "
                             "tiles, the flow or the stream")


def constants(c: dict, L: int, H: int, FF: int, NH: int, NKV: int, D: int, interpret: bool = False,
              programs: int = 1, vocab: int = 1) -> dict:
    """_forward's constexpr arguments for config c (DEFAULT's keys) on a target of L layers, hidden H,
    intermediate FF, NH query and NKV kv heads of D, launched on `programs` (PersistentLlamaForward.consts).
    ATT0, with `flow`: the first attention program, past the qkv units where NH programs are left."""
    qkv_units = -(-(NH + 2 * NKV) * D // c["qkv"][0]) * c["qkv"][2]
    flow = sum(1 << FLOWS.index(k) for k in c["flow"])
    att0 = qkv_units if flow & 1 and programs - qkv_units >= NH else 0
    if "qkv" in c["stream"]:  # every program has qkv blocks: attention on the last NH
        att0 = programs - NH if flow & 1 and programs > NH else 0
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
                F32=interpret, POLL=min(POLLS[c["poll"]], 1) if interpret else POLLS[c["poll"]],
                **prefetch_columns(c["prefetch"], interpret, c["prefetch_op"]), PFATT=c["prefetch_at"] == "attention", AO=c["attn_o"],
                OPRE=bool(c["o_preload"]), NB=nb, IA=ia, IO=io, IG=ig, ID=id_, SSG=H // (c["attn_o"] or c["o"][0]),
                EMB=bool(c["embed"]), WIN=bool(c["attn_window"]), FLOW=flow, ATT0=att0,
                ROPE_EARLY=bool(c["rope_early"]), KV_EARLY=bool(c["kv_early"]) and bool(c["attn_window"]), AM=triton.next_power_of_2(-(-vocab // c["lm_head"][0])),
                FN=c["fc"][0], FK=c["fc"][1], FS=c["fc"][2],
                **{f"ST{p}": stream_contributors(n, k, c[name][0], c[name][1], programs) if name in c["stream"] else 0
                   for name, p, n, k in (("qkv", "Q", (NH + 2 * NKV) * D, H), ("o", "O", H, NH * D),
                                         ("gate_up", "G", FF, H), ("down", "D", H, FF), ("lm_head", "L", vocab, H))},
                **{f"P{p}": k in c["preload"] for k, p in names.items()})


def stream_contributors(n: int, k: int, block_n: int, block_k: int, programs: int) -> int:
    """The most programs one tile of an [n, k] product's stream-K ranges can take blocks from
    (triton_product._stream's MAXC): the first and the last at least one block each, every one between
    them its whole range, at least nb // programs blocks, so c <= (kb - 2) // (nb // programs) + 2.
    The bench's qkv: 8 blocks a tile, 384 on 132 programs (2 or 3 each): 6 // 2 + 2 = 5."""
    kb = k // block_k
    nb = -(-n // block_n) * kb
    if kb < 2:
        return 1
    return min(kb, (kb - 2) // (nb // min(programs, nb)) + 2)


def prefetch_columns(prefetch, interpret: bool = False, op: str = "bulk") -> dict:
    """_forward's PFQ, PFO, PFG, PFD, PFL and PFLINES from a config's `prefetch` (an int for every product,
    or a dict {product: K columns}) and `prefetch_op`; columns 0 in the interpreter (PTX, and only a hint)."""
    names = {"qkv": "PFQ", "o": "PFO", "gate_up": "PFG", "down": "PFD", "lm_head": "PFL"}
    per = prefetch if isinstance(prefetch, dict) else dict.fromkeys(names, prefetch)
    bad = {k: v for k, v in per.items() if k not in names or not isinstance(v, int) or isinstance(v, bool) or v < 0}
    if bad:
        raise ValueError(f"PersistentLlamaForward: prefetch {prefetch!r}: {bad} is not a column count >= 0 for one of "
                         f"{list(names)}; give an int or a dict of them")
    if op not in ("bulk", "line"):
        raise ValueError(f"PersistentLlamaForward: prefetch_op {op!r} is not 'bulk' or 'line'; pick one of them")
    odd = {k: v for k, v in per.items() if v and (v < 64 or v & (v - 1))}
    if op == "line" and odd:
        raise ValueError(f"PersistentLlamaForward: prefetch_op 'line' prefetches 64 columns a line: {odd} must be "
                         "powers of two >= 64; round them")
    return {**{pf: 0 if interpret else per.get(k, 0) for k, pf in names.items()}, "PFLINES": op == "line"}


def resident_per_sm(kernel, device: torch.device) -> int:
    """Programs of a compiled kernel one SM holds at once (registers, shared memory, warps)."""
    kernel._init_handles()  # loads the binary: sets n_regs
    props = torch.cuda.get_device_properties(device)
    threads = kernel.metadata.num_warps * 32
    regs = getattr(props, "regs_per_multiprocessor", 65536) // max(1, kernel.n_regs * threads)
    smem = getattr(props, "shared_memory_per_multiprocessor", 233472) // max(1, kernel.metadata.shared + 1024)
    warps = getattr(props, "max_threads_per_multi_processor", 2048) // threads
    return max(0, min(regs, smem, warps))


def fc_schedule(c: dict, L: int, aux: list[int], fc_rows: int, att0: int) -> dict:
    """_forward's FC_SPREAD, FC_PER, FC_W for config c's `fc_spread` on L layers with taps hs[a], a in
    aux, and an fc of fc_rows rows (0: no fc in this launch). The fc's units, ks-major (unit u = tile
    + tiles * ks, K slice ks of the taps' concatenation), go FC_PER a layer to the last fc_spread
    layers' attention phases; a unit runs only once its tap is stored: hs[a] is layer a - 1's output,
    so unit u at layer L - fc_spread + u // FC_PER needs a <= that layer. Worked example, the bench
    target (L 16, aux 2, 8, 13, fc (64, 256, 12): 32 tiles x 12 = 384 units, 4 K slices a tap) with
    fc_spread 4: FC_PER 96; unit 256, the first of tap 2 (hs[13]), runs at layer 12 + 256 // 96 = 14 >= 13."""
    spread = c["fc_spread"]
    if not spread or not fc_rows:
        return dict(FC_SPREAD=0, FC_PER=1, FC_W=0)
    fn, _, fs = c["fc"]
    tiles = -(-fc_rows // fn)
    units = tiles * fs
    per = -(-units // spread)
    problem = None
    if c["attn_o"]:
        problem = f"attn_o {c['attn_o']} merges attention into the o-proj: no attention phase takes the pieces"
    elif spread > L or fs % len(aux):
        problem = f"the fc SPLIT {fs} must be a multiple of the {len(aux)} taps and fc_spread at most {L}"
    else:
        for u in range(units):
            tap, layer = (u // tiles) // (fs // len(aux)), L - spread + u // per
            if aux[tap] > layer:
                problem = f"unit {u} reads hs[{aux[tap]}], stored only at layer {aux[tap]}, but would run at layer {layer}"
                break
    if problem:
        raise ValueError(f"PersistentLlamaForward: fc_spread {spread} with fc {tuple(c['fc'])} over taps {aux} on "
                         f"{L} layers: {problem}; spread over fewer layers, change the fc SPLIT or set fc_spread 0")
    return dict(FC_SPREAD=spread, FC_PER=per, FC_W=att0)
