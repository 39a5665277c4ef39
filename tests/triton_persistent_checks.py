"""bench/triton_splitk.py and bench/triton_persistent.py on CPU through Triton's interpreter
(TRITON_INTERPRET=1), run by tests/bench/test_triton_persistent.py in a fresh interpreter (the variable must
be set before anything imports triton): the split-K product against torch for every epilogue, norm and
split, its tile counters back at 0 after each launch, and the persistent whole-forward kernel (one
program: every barrier trivial) against the five-kernel fused forward on a tiny Llama in fp32.
Skipped, with the reason, where triton is not installed."""

from __future__ import annotations

import copy
import importlib.util
import sys
from pathlib import Path

import pytest
import torch

if importlib.util.find_spec("triton") is None:
    pytest.skip("triton not installed: the persistent verify kernels need it", allow_module_level=True)
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
import persistent_config  # noqa: E402
import triton  # noqa: E402
import triton.language as tl  # noqa: E402
import triton_persistent as tp  # noqa: E402
import triton_product as tp_product  # noqa: E402
import triton_splitk as sk  # noqa: E402
import triton_verify as tv  # noqa: E402
from triton_verify_checks import _one_thread, _tiny_target, rel  # noqa: E402, F401 (_one_thread: the autouse fixture)

from eagle3_check.program.compiled import rms_norm  # noqa: E402
from eagle3_check.program.target import TargetAdapter  # noqa: E402

pytestmark = pytest.mark.skipif(not tv.INTERPRET, reason="imported without TRITON_INTERPRET=1")
# product tiles (BLOCK_N, BLOCK_K, SPLIT) that tile the tiny Llama (hidden 128, ffn 256, vocab 96)
TINY = {"qkv": (16, 32, 2), "o": (16, 32, 2), "gate_up": (16, 64, 1), "down": (32, 32, 4), "lm_head": (32, 64, 1)}
Q1 = (16, 32, 1)  # qkv without split-K workspace: what flow "o" needs (persistent_config.check_config)


@pytest.mark.parametrize("split,epi,norm", [(4, tv.NONE, False), (4, tv.RESIDUAL, False), (2, tv.SWIGLU, True),
                                            (1, tv.SWIGLU, True)],
                         ids=["split4-plain", "split4-residual", "split2-swiglu-norm", "split1-swiglu-norm"])
def test_splitk_linear_matches_torch(split, epi, norm):
    g = torch.Generator().manual_seed(split * 5 + epi + 3 * norm)
    x, w = torch.randn(5, 256, generator=g), torch.randn(128, 256, generator=g)  # [T, K], [N, K]
    ln, res = torch.randn(256, generator=g), torch.randn(5, 128, generator=g)
    y = (rms_norm(x, ln, 1e-5) if norm else x) @ w.T
    want = {tv.NONE: y, tv.RESIDUAL: y + res, tv.SWIGLU: torch.nn.functional.silu(y[:, :64]) * y[:, 64:]}[epi]
    for _ in range(2):  # the second launch starts from the counters the first one left
        got = sk.splitk_linear(x, w, epi=epi, res=res if epi == tv.RESIDUAL else None, norm=ln if norm else None,
                               config=(16, 32, 4, 2, split))
        assert got.shape == want.shape
        assert rel(got, want) < 1e-5  # fp32 throughout: only the summation order differs
    assert int(sk._SCRATCH[x.device][1].abs().sum()) == 0  # every tile's counter reset by its last split


def test_splitk_linear_refuses_a_split_that_does_not_tile_k():
    with pytest.raises(ValueError, match="multiple of BLOCK_K \\* SPLIT"):
        sk.splitk_linear(torch.randn(5, 96), torch.randn(16, 96), config=(16, 32, 4, 2, 2))


@pytest.mark.slow
@triton.jit
def _stream_kernel(x_ptr, w_ptr, out_ptr, res_ptr, ws_ptr, cnt_ptr, M, N, K: tl.constexpr, EPI: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, MAXC: tl.constexpr):
    """triton_product._product with STREAM on a grid of programs and no barrier: the interpreter runs
    them one after another, so each tile's last contributor is its last program."""
    wz = tl.zeros([BLOCK_N, BLOCK_K], dtype=tl.float32)
    tp_product._product(x_ptr, w_ptr, out_ptr, res_ptr, x_ptr, ws_ptr, cnt_ptr, x_ptr, x_ptr, M, N, K, 1e-5,
                        tl.program_id(0), tl.num_programs(0), 1, False, False, EPI, tv.BLOCK_M, BLOCK_N, BLOCK_K, 1,
                        True, wz, wz, False, cnt_ptr, 0, 1, cnt_ptr, 0, False, cnt_ptr, 0, 1, 1, 1, 0, 0, 0, 0,
                        x_ptr, cnt_ptr, cnt_ptr, cnt_ptr, 0, MAXC)


def test_stream_contributors_bounds_every_tile():
    """The bound against the ranges themselves, over tile counts, blocks a tile and programs: never
    under a tile's real contributor count (the unrolled reduction would drop a partial)."""
    for tiles in (1, 3, 4, 48):
        for kb in (1, 2, 8, 16, 32):
            for programs in (1, 5, 7, 13, 40, 132):
                nb = tiles * kb
                p = min(programs, nb)
                owner = [((b + 1) * p - 1) // nb for b in range(nb)]
                worst = max(owner[t * kb + kb - 1] - owner[t * kb] + 1 for t in range(tiles))
                bound = persistent_config.stream_contributors(tiles * 16, kb * 32, 16, 32, programs)
                assert worst <= bound <= kb, (tiles, kb, programs, worst, bound)
    assert persistent_config.stream_contributors(3072, 2048, 64, 256, 132) == 5  # the docstring's qkv
    assert max(((8 * t + 8) * 132 - 1) // 384 - ((8 * t + 1) * 132 - 1) // 384 + 1 for t in range(48)) == 4


@pytest.mark.parametrize("programs,epi", [(1, tv.NONE), (5, tv.NONE), (7, tv.RESIDUAL), (13, tv.SWIGLU),
                                          (40, tv.NONE)],
                         ids=["one-program-whole-tiles", "five-programs-ranges-cross-tiles",
                              "seven-programs-residual", "thirteen-programs-swiglu", "more-programs-than-blocks"])
def test_stream_k_product_matches_torch(programs, epi):
    """4 column tiles x 8 K blocks = 32 blocks cut into `programs` ranges (triton_product._stream's
    worked example, small): with 5 programs, [0, 6), [6, 12), [12, 19), [19, 25), [25, 32), so tile 0
    (blocks 0-7) sums programs 0 and 1's partials, tile 2 (16-23) programs 2 and 3's; with 40, the
    ranges are cut for 32 (one block each) and programs 32-39 take none."""
    g = torch.Generator().manual_seed(programs * 3 + epi)
    n = 128 if epi == tv.SWIGLU else 64  # SwiGLU: gate rows then up rows, 64 output columns either way
    x, w, res = torch.randn(5, 256, generator=g), torch.randn(n, 256, generator=g), torch.randn(5, 64, generator=g)
    y = x @ w.T  # [5, n]
    want = torch.nn.functional.silu(y[:, :64]) * y[:, 64:] if epi == tv.SWIGLU else y + res * (epi == tv.RESIDUAL)
    out = torch.empty(5, 64)
    ws, cnt = torch.zeros(8 * tv.BLOCK_M * n), torch.zeros(4, dtype=torch.int32)
    for _ in range(2):  # the second launch starts from the counters the first one left
        _stream_kernel[(programs,)](x, w, out, res, ws, cnt, 5, 64, 256, epi, 16, 32,
                                    persistent_config.stream_contributors(64, 256, 16, 32, programs))
        assert rel(out, want) < 1e-5  # fp32: summation order only
        assert int(cnt.abs().sum()) == 0  # every shared tile's counter reset by its last contributor


@pytest.mark.parametrize("extra", [{"flow": (), "embed": False, "rope_early": False, "poll": "load"},
                                   {"attn_o": 32, "embed": True, "flow": ()},
                                   {"attn_o": 64, "o_preload": False, "flow": ()},
                                   {"preload": ("qkv", "o", "gate_up", "down", "lm_head")},
                                   {"preload": ("qkv", "gate_up"), "attn_o": 32, "flow": ()}, {"attn_window": False},
                                   {"flow": ["attention", "o", "down"], "rope_early": True, "poll": "red", "qkv": Q1},
                                   {"flow": ["attention"], "attn_window": False, "poll": "acquire"},
                                   {"flow": ["o", "down"], "qkv": Q1},
                                   {"flow": ["attention"], "kv_early": True, "attn_block": 4},
                                   {"prefetch_at": "attention", "prefetch": {"o": 512, "gate_up": 256},
                                    "prefetch_op": "line"}, {"stream": ["qkv", "o", "down"]},
                                   {"stream": ["gate_up", "lm_head"], "flow": ["attention"], "fc_spread": 1}, {}],
                         ids=["five-phases", "attn-o-32-embed-in-kernel", "attn-o-64-no-preload", "preload-all",
                              "preload-qkv-gate-up-attn-o", "attention-reads-the-window-back-from-the-cache",
                              "flow-all-rope-early", "flow-attention-window-from-the-cache", "flow-o-down",
                              "kv-early-first-block-then-the-loop", "prefetch-in-the-attention-window",
                              "stream-qkv-o-down", "stream-gate-up-lm-head", "default"])
def test_persistent_forward_equals_fused_forward_fp32(extra):
    """Two windows through each forward after the same prefill: logits, taps and both caches agree,
    with the five phases a layer and with attention + o-proj as one phase (4 units of 32 columns x 2
    kv groups: more units than the interpreter's one program, so the preloaded block is the first
    unit's only), with each product's first K block loaded before its barrier (`preload`), and with
    attention reading the window's keys back from the cache (DEFAULT takes them from registers)."""
    base = _tiny_target(torch.float32)
    g = torch.Generator().manual_seed(1)
    prefill, window = torch.randint(0, 96, (1, 9), generator=g), torch.randint(0, 96, (1, 5), generator=g)
    configs = {**TINY, **extra}
    out = {}
    for kind in ("fused", "persistent"):
        adapter = TargetAdapter(copy.deepcopy(base), [0, 1], 64)
        with torch.no_grad():
            adapter(prefill, torch.arange(9))
            fw = tv.TritonLlamaForward(adapter) if kind == "fused" else tp.PersistentLlamaForward(adapter, configs)
            fw(window, torch.arange(9, 14))
            logits, taps = fw(window[:, :1], torch.arange(14, 15))  # T = 1 after T = 5
        out[kind] = logits, taps, adapter.k_cache_1.clone(), adapter.v_cache_0.clone()
        if kind == "persistent":
            assert fw.failed_barriers() == 0 and int(fw.cnt.abs().sum()) == 0
            assert int(fw.flow.abs().sum()) == 0  # the flow counts zeroed at the end of each launch
    for got, want in zip(out["persistent"], out["fused"]):
        assert got.shape == want.shape
        assert rel(got, want) < 1e-5  # fp32: summation order only


def test_persistent_forward_refuses_a_config_that_does_not_tile_k():
    adapter = TargetAdapter(_tiny_target(torch.float32), [0, 1], 64)
    with pytest.raises(ValueError, match="not a multiple of BLOCK_K \\* SPLIT"):
        tp.PersistentLlamaForward(adapter, {"down": (16, 256, 4), "flow": ()})


def test_persistent_forward_refuses_attn_o_tiles_that_do_not_divide_the_columns():
    adapter = TargetAdapter(_tiny_target(torch.float32), [0, 1], 64)
    with pytest.raises(ValueError, match="attn_o 48: the o-proj's 128 columns"):
        tp.PersistentLlamaForward(adapter, {"attn_o": 48, "flow": ()})


def test_persistent_forward_refuses_flow_with_attn_o():
    adapter = TargetAdapter(_tiny_target(torch.float32), [0, 1], 64)
    with pytest.raises(ValueError, match="needs attn_o 0 \\(not 32\\)"):
        tp.PersistentLlamaForward(adapter, {**TINY, "flow": ["attention"], "attn_o": 32})
    with pytest.raises(ValueError, match="\\['gate'\\] not among"):
        tp.PersistentLlamaForward(adapter, {**TINY, "flow": ["gate"]})
    with pytest.raises(ValueError, match="config keys \\['fc_early'\\] are not knobs of the kernel"):
        tp.PersistentLlamaForward(adapter, {**TINY, "fc_early": True})


@pytest.mark.parametrize("prefetch,want", [(0, (0, 0, 0, 0, 0)), (256, (256,) * 5),
                                           ({"o": 512, "qkv": 1024}, (1024, 512, 0, 0, 0))],
                         ids=["none", "every-product", "o-and-qkv-only"])
def test_prefetch_columns_per_product(prefetch, want):
    """`prefetch` as _forward's PFQ, PFO, PFG, PFD, PFL (in that order); the interpreter gets none."""
    got = persistent_config.prefetch_columns(prefetch)
    assert tuple(got[k] for k in ("PFQ", "PFO", "PFG", "PFD", "PFL")) == want
    assert set(persistent_config.prefetch_columns(prefetch, interpret=True).values()) == {0}
    assert persistent_config.prefetch_columns(prefetch, op="line")["PFLINES"] is True


def test_persistent_forward_refuses_a_prefetch_it_cannot_read():
    adapter = TargetAdapter(_tiny_target(torch.float32), [0, 1], 64)
    with pytest.raises(ValueError, match="prefetch \\{'attention': 64\\}: \\{'attention': 64\\} is not a column count"):
        tp.PersistentLlamaForward(adapter, {**TINY, "prefetch": {"attention": 64}})
    with pytest.raises(ValueError, match="\\{'o': -1\\} is not a column count"):
        tp.PersistentLlamaForward(adapter, {**TINY, "prefetch": {"o": -1}})
    with pytest.raises(ValueError, match="prefetch_op 'line' prefetches 64 columns a line: \\{'o': 96\\}"):
        tp.PersistentLlamaForward(adapter, {**TINY, "prefetch": {"o": 96}, "prefetch_op": "line"})
    with pytest.raises(ValueError, match="prefetch_op 'lines' is not 'bulk' or 'line'"):
        tp.PersistentLlamaForward(adapter, {**TINY, "prefetch_op": "lines"})
    with pytest.raises(ValueError, match="prefetch_at 'attention' with attn_o 32: expected"):
        tp.PersistentLlamaForward(adapter, {**TINY, "prefetch_at": "attention", "attn_o": 32, "flow": ()})


@pytest.mark.parametrize("extra,match", [
    ({"stream": ["attention"]}, "stream products among"),
    ({"stream": ["qkv"], "preload": ["qkv"]}, "no product both in stream and in preload"),
    ({"stream": ["gate_up"]}, "gate_up out of stream \\(with flow \"down\""),
    ({"stream": ["qkv"], "flow": ["o"], "qkv": Q1}, "with flow \"o\" the o-proj's partials"),
    ({"flow": ["o"]}, "a qkv with no split-K workspace, SPLIT 1"),
    ({"stream": ["lm_head"]}, "fc_spread with lm_head in stream")],
    ids=["not-a-product", "stream-and-preload", "gate-up-with-flow-down", "qkv-stream-with-flow-o",
         "qkv-split-with-flow-o", "lm-head-before-the-fc"])
def test_persistent_forward_refuses_a_stream_that_would_share_its_workspace(extra, match):
    adapter = TargetAdapter(_tiny_target(torch.float32), [0, 1], 64)
    with pytest.raises(ValueError, match=match):
        tp.PersistentLlamaForward(adapter, {**TINY, **extra})


def test_persistent_forward_refuses_an_unknown_poll():
    adapter = TargetAdapter(_tiny_target(torch.float32), [0, 1], 64)
    with pytest.raises(ValueError, match="poll 'spin' is not one of"):
        tp.PersistentLlamaForward(adapter, {**TINY, "poll": "spin"})


@pytest.mark.parametrize("extra,barriers", [({"flow": (), "embed": False}, 10),
                                            ({"attn_o": 32, "flow": (), "embed": False}, 8),
                                            ({"attn_o": 32, "flow": ()}, 9),
                                            ({"flow": ["attention"], "embed": False}, 8),
                                            ({"flow": ["attention", "o", "down"], "embed": False, "qkv": Q1}, 4), ({}, 7)],
                         ids=["five-a-layer", "attn-o-four-a-layer", "attn-o-plus-the-embedding", "flow-four-a-layer",
                              "flow-all-two-a-layer", "default-three-a-layer-plus-the-embedding"])
def test_persistent_forward_counts_the_barriers_one_launch_makes(extra, barriers):
    """bench/verify_fused.py times `barriers` grid barriers alone: the tiny target's 2 layers."""
    fw = tp.PersistentLlamaForward(TargetAdapter(_tiny_target(torch.float32), [0, 1], 64), {**TINY, **extra})
    assert fw.barriers == barriers


@pytest.mark.parametrize("extra", [{"flow": (), "embed": False}, {"flow": ["attention", "o", "down"], "qkv": Q1},
                                   {"flow": ["attention"], "fc_spread": 1}, {}, {"fc_spread": 2},
                                   {"fc_spread": 1, "flow": ()}, {"fc_spread": 2, "stream": ["qkv", "lm_head"]}],
                         ids=["five-phases", "flow-all", "fc-in-the-last-attention-phase", "default",
                              "fc-spread-over-both-layers", "fc-spread-over-the-last-layer",
                              "stream-qkv-lm-head-argmax"])
def test_persistent_verify_returns_the_argmax_and_the_fc_of_the_taps(extra):
    """`verify`: the ids and the draft's fc over the taps from the one launch equal the forward's
    logits.argmax and fc(cat(taps)), for a T = 5 window then T = 1 (the argmax count reset between)."""
    adapter = TargetAdapter(_tiny_target(torch.float32), [0, 1], 64)
    g = torch.Generator().manual_seed(2)
    fc = torch.randn(128, 256, generator=g) / 16  # [H, n_taps * H]
    with torch.no_grad():
        adapter(torch.randint(0, 96, (1, 9), generator=g), torch.arange(9))
        fw = tp.PersistentLlamaForward(adapter, {**TINY, "fc": (16, 32, 2), **extra})
        for tokens, positions in ((torch.randint(0, 96, (1, 5), generator=g), torch.arange(9, 14)),
                                  (torch.randint(0, 96, (1, 1), generator=g), torch.arange(14, 15))):
            logits, taps = fw(tokens, positions)  # verify rewrites the same k, v at the same slots
            ids, feature = fw.verify(tokens, positions, fc)
            assert ids.shape == tokens.shape and torch.equal(ids, logits.argmax(-1))
            assert rel(feature, taps @ fc.T) < 1e-5  # fp32: summation order only
            assert int(fw.am_n.item()) == 0 and int(fw.cntf.abs().sum()) == 0  # counts reset for the next launch
    with pytest.raises(ValueError, match="an fc of \\(128, 256\\)"):
        fw.verify(tokens, positions, fc[:, :128])


def test_persistent_verify_refuses_an_fc_spread_that_reads_a_tap_before_it_is_stored():
    """Taps hs[1] then hs[0] of 2 layers, spread over both: the first units (tap hs[1], layer 0's
    output) would run in layer 0's attention phase, before hs[1] exists (persistent_config.fc_schedule);
    and fc_spread with attn_o, which has no attention phase of its own."""
    adapter = TargetAdapter(_tiny_target(torch.float32), [1, 0], 64)
    with torch.no_grad():
        adapter(torch.randint(0, 96, (1, 9)), torch.arange(9))
        fw = tp.PersistentLlamaForward(adapter, {**TINY, "fc": (16, 32, 2), "fc_spread": 2})
        with pytest.raises(ValueError, match="unit 0 reads hs\\[1\\], stored only at layer 1, but would run at layer 0"):
            fw.verify(torch.randint(0, 96, (1, 5)), torch.arange(9, 14), torch.randn(128, 256))
    adapter = TargetAdapter(_tiny_target(torch.float32), [0, 1], 64)
    with torch.no_grad():  # attn_o leaves no attention phase: the fc would run nowhere, so refused
        adapter(torch.randint(0, 96, (1, 9)), torch.arange(9))
        fw = tp.PersistentLlamaForward(adapter, {**TINY, "fc": (16, 32, 2), "fc_spread": 1, "attn_o": 32, "flow": ()})
        with pytest.raises(ValueError, match="attn_o 32 merges attention into the o-proj"):
            fw.verify(torch.randint(0, 96, (1, 5)), torch.arange(9, 14), torch.randn(128, 256))
