"""GPU benchmark: speculative decoding with a graph-captured target_verify vs greedy peers.

Target: a Llama-shaped model of about 1B parameters with random bf16 weights (built in
memory, seeded). Draft: a real EAGLE-3 head sized for it (one layer, hidden = the target's),
random weights, in "oracle" mode: the head runs and is timed on every draft call, then its
ids are replaced by the known greedy continuation, right with probability --accept per
position (`eagle3_check.suites.oracle`). A random-weight target cannot be predicted by a head
trained within a short GPU budget, so acceptance is controlled; the JSON says so.

Measured in one run, prompt --prompt-len tokens, --new tokens, greedy, batch 1:
  (a) hf-eager      HF generate, dynamic cache, eager
  (b) hf-compiled   HF generate, static cache + torch.compile(mode="reduce-overhead")
  (c) self-graph    greedy through our target, target_verify of one token replayed as a CUDA graph
  (d) spec-K        DeviceRunner, graph-captured verify and draft calls, K in --ks
  plus spec-K4-eager-draft (draft calls not captured) and spec-K4-own-draft (the head's own ids).
Each: tokens/s (new tokens over the whole call, prefill included; median of --repeats), tau,
ms per round split into verify / draft / host (device-timeline spans from CUDA events), peak
GPU memory (weights included). Ratios printed last.

Reproduce: python bench/gpu_bench.py --out bench/results/h200.json
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_check.fixtures.registry import ProgramSpec  # noqa: E402
from eagle3_check.program.cuda_graph import GraphedProgram  # noqa: E402
from eagle3_check.program.draft import DraftConfig, Eagle3DraftHead  # noqa: E402
from eagle3_check.program.eager import EagerBackend  # noqa: E402
from eagle3_check.program.speculator import Eagle3Speculator  # noqa: E402
from eagle3_check.program.target import TargetAdapter  # noqa: E402
from eagle3_check.run.device_loop import DeviceRunner, PhaseTimer, program_device  # noqa: E402
from eagle3_check.run.options import RunOptions  # noqa: E402
from eagle3_check.suites.oracle import OracleDraftProgram  # noqa: E402


class IdTokenizer:
    """The runner needs a tokenizer only for the stop set and the text: ids in, nothing out."""

    eos_ids: tuple[int, ...] = ()

    def __init__(self, vocab_size: int):
        self.vocab_size = vocab_size

    def encode(self, text: str) -> list[int]:
        return []

    def decode(self, ids: list[int], skip_special_tokens: bool = False) -> str:
        return ""


def graph_greedy(program, prompt_ids: list[int], max_new: int, timer: PhaseTimer | None = None) -> list[int]:
    """(c): greedy through the program's own target, data on the device: prefill, then
    target_verify of a one-token window [last] at position pos (its id is the token for
    pos + 1), replayed as a CUDA graph by a GraphedProgram. One id read back per token, as any
    greedy decoder with a stop check needs. Tokens: the prefill bonus first.
    (`self_reference.self_greedy` is the contract-general version: it uses the program's
    smallest exported window and host tensors, so it is no speed baseline.)"""
    dev = program_device(program)
    L = len(prompt_ids)
    slots = torch.arange(L + max_new, device=dev)
    program.reset()
    last, _ = program.prefill(torch.tensor([prompt_ids], device=dev), slots[:L])  # [1, 1], [1, L, H]
    cur = torch.empty(1, 1, dtype=torch.long, device=dev)  # the stable one-token window
    cur.copy_(last)
    tokens = [int(cur)]
    for pos in range(L, L + max_new - 1):
        if timer is not None:
            timer.mark("verify")
        ids, _ = program.target_verify(cur, slots[pos : pos + 1])  # [1, 1], [1, 1, H]
        if timer is not None:
            timer.mark("host")
        cur.copy_(ids)
        tokens.append(int(cur))
    if timer is not None:
        timer.mark("end")
    return tokens


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--draft-vocab", type=int, default=8192)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--ks", default="2,4,6")
    p.add_argument("--accept", type=float, default=0.8, help="oracle: chance a position's proposal is right")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--skip", default="", help="comma-separated methods to skip (hf-eager,hf-compiled,...)")
    p.add_argument("--out", default=None, help="write the results JSON here")
    p.add_argument("--device", default="cuda", help="cuda (cpu: a smoke test with emulated graphs)")
    return p.parse_args(argv)


CUDA = torch.cuda.is_available()


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def peak_gib() -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if CUDA else None


def build(args, dev):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(
        vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        max_position_embeddings=4096, rms_norm_eps=1e-5, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=None, pad_token_id=0,
    )
    torch.manual_seed(0)
    with torch.device(dev):
        model = LlamaForCausalLM(cfg).eval()
    permutation_bigram_init(model, args.layers)
    model = model.to(torch.bfloat16)
    model.generation_config.eos_token_id = None
    model.generation_config.pad_token_id = 0
    n = args.layers
    dcfg = DraftConfig(
        hidden_size=args.hidden, num_attention_heads=args.heads, num_key_value_heads=args.kv_heads,
        intermediate_size=args.intermediate, vocab_size=args.vocab, draft_vocab_size=args.draft_vocab,
        aux_layer_ids=[2, n // 2, n - 3], target_hidden_size=args.hidden,
    )
    max_seq = 1 << (args.prompt_len + args.new + 16).bit_length()
    spec = ProgramSpec(max_seq_len=max_seq, min_prefill=1, max_prefill=args.prompt_len, chain_len=4,
                       min_verify_len=2, max_verify_len=8)
    with torch.device(dev):
        draft = Eagle3DraftHead(dcfg, max_seq)
    module = Eagle3Speculator(TargetAdapter(model, dcfg.aux_layer_ids, max_seq), draft)
    module = module.to(device=dev, dtype=torch.bfloat16).eval()
    n_target = sum(p.numel() for p in model.parameters())
    n_draft = sum(p.numel() for p in draft.parameters())
    return model, EagerBackend(module, spec), n_target, n_draft


@torch.no_grad()
def permutation_bigram_init(model, n_layers: int) -> None:
    """Random weights with a robust greedy path. With the default init (std 0.02 everywhere)
    the top-1/top-2 logit margins of a random model are so small that a K+1-row verify and a
    one-row decode round differently in bf16 within ~10 tokens, and no acceptance can be
    controlled. Here the embedding is N(0, 1), lm_head rows are the embedding rows permuted
    (lm_head[perm[x]] = embed[x], so the greedy next token of x is perm[x] by a margin of
    ~H / rms), and the residual projections (o_proj, down_proj) use the GPT-2 scaled init
    std 0.02 / sqrt(2 L). All weights stay random; the arithmetic per token is unchanged."""
    embed = model.model.embed_tokens.weight
    embed.normal_(0.0, 1.0)
    gen = torch.Generator().manual_seed(0)
    perm = torch.randperm(embed.shape[0], generator=gen).to(embed.device)
    model.lm_head.weight.index_copy_(0, perm, embed)
    for layer in model.model.layers:
        layer.self_attn.o_proj.weight.normal_(0.0, 0.02 / (2 * n_layers) ** 0.5)
        layer.mlp.down_proj.weight.normal_(0.0, 0.02 / (2 * n_layers) ** 0.5)


def timed(fn, repeats: int):
    """Runs fn once to warm up, then `repeats` times; returns (last output, wall seconds each)."""
    out = fn()
    walls = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        out = fn()
        sync()
        walls.append(time.perf_counter() - t0)
    return out, walls


def summarize(walls, new_tokens, rounds, phases=None, tau=None, extra=None):
    wall = statistics.median(walls)
    row = {
        "tokens_per_s": new_tokens / wall,
        "wall_ms": wall * 1e3,
        "walls_ms": [w * 1e3 for w in walls],
        "tau": tau,
        "rounds": rounds,
        "ms_per_round": wall * 1e3 / rounds,
        "peak_gib": peak_gib(),
    }
    if phases is not None:
        row.update({f"{k}_ms_per_round": v / rounds for k, v in phases.items() if k in ("verify", "draft", "host")})
        busy = phases["verify"] + phases["draft"]
        row["host_share"] = phases["host"] / busy if busy else None
    row.update(extra or {})
    return row


def main(argv=None) -> int:
    args = parse_args(argv)
    global CUDA
    dev = torch.device(args.device)
    CUDA = dev.type == "cuda"
    mode = "cuda" if CUDA else "emulate"
    skip = set(filter(None, args.skip.split(",")))
    model, plain, n_target, n_draft = build(args, dev)
    graphed = GraphedProgram(plain, mode)
    eager_draft = GraphedProgram(plain, mode, draft_graphs=False)
    gen = torch.Generator().manual_seed(1)
    prompt = torch.randint(3, args.vocab, (args.prompt_len,), generator=gen).tolist()
    prompt_t = torch.tensor([prompt], device=dev)
    tok = IdTokenizer(args.vocab)
    import transformers

    res = {
        "gpu": torch.cuda.get_device_name() if CUDA else "cpu (smoke test)",
        "torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/gpu_bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "target": {"params": n_target, "layers": args.layers, "hidden": args.hidden, "intermediate": args.intermediate,
                   "heads": args.heads, "kv_heads": args.kv_heads, "vocab": args.vocab, "dtype": "bfloat16",
                   "weights": "random (seed 0): embedding N(0,1), lm_head = permuted embedding rows, "
                              "o_proj/down_proj N(0, 0.02/sqrt(2L)), others N(0, 0.02); greedy next token "
                              "of x is perm[x] by a wide margin (see permutation_bigram_init)"},
        "draft": {"params": n_draft, "draft_vocab": args.draft_vocab, "mode": "oracle",
                  "accept": args.accept,
                  "note": "real EAGLE-3 head (random weights) runs and is timed on every draft call; its ids are "
                          "replaced by the greedy continuation, right with probability `accept` per position"},
        "prompt_len": args.prompt_len, "new_tokens": args.new, "repeats": args.repeats,
        "tokens_per_s_definition": "new tokens / wall time of the whole request (prefill included), median",
        "results": {},
    }

    def save():
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            Path(args.out).write_text(json.dumps(res, indent=2) + "\n")

    def method(name, fn):
        if name in skip:
            return
        if CUDA:
            torch.cuda.reset_peak_memory_stats()
        try:
            res["results"][name] = fn()
        except Exception as e:  # a failing peer is reported, not fatal to the run
            res["results"][name] = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
        print(f"{name}: {json.dumps(res['results'][name])[:300]}", file=sys.stderr, flush=True)
        save()

    def hf_generate(**kw):
        def fn():
            out = model.generate(input_ids=prompt_t, attention_mask=torch.ones_like(prompt_t),
                                 max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False, **kw)
            return out[0, args.prompt_len:].tolist()
        return fn

    def hf_method(**kw):
        toks, walls = timed(hf_generate(**kw), args.repeats)
        greedy.setdefault("hf", toks)
        return summarize(walls, len(toks), len(toks), extra={"tokens_head": toks[:16],
                                                             "identical_to_hf_eager": toks == greedy["hf"]})

    greedy = {}
    method("hf-eager", lambda: hf_method(disable_compile=True))

    def self_method():
        timer = PhaseTimer(dev)
        toks, walls = timed(lambda: graph_greedy(graphed, prompt, args.new), args.repeats)
        graph_greedy(graphed, prompt, args.new, timer=timer)
        greedy["tokens"] = toks
        phases = timer.totals()
        return summarize(walls, len(toks), len(toks) - 1, phases, 1.0,
                         {"tokens_head": toks[:16], "identical_to_hf_eager": toks == greedy.get("hf")})

    method("self-graph", self_method)
    if "tokens" not in greedy:
        greedy["tokens"] = graph_greedy(graphed, prompt, args.new)
    seq = prompt + greedy["tokens"]
    opts = dict(raw=True, bos_id=-1, stop_ids=(), stop_token=None, eos_id=None, max_new_tokens=args.new)

    def spec_method(program, k):
        def fn():
            o = RunOptions(chain_len=k, **opts)
            timer = PhaseTimer(dev)
            out, walls = timed(lambda: DeviceRunner().run(program, tok, prompt, o), args.repeats)
            DeviceRunner(timer).run(program, tok, prompt, o)
            same = out.tokens == greedy["tokens"]
            first = next((i for i, (a, b) in enumerate(zip(out.tokens, greedy["tokens"])) if a != b), None)
            return summarize(walls, len(out.tokens), out.rounds, timer.totals(), out.tau,
                             {"k": k, "identical_to_self_graph": same, "first_divergence": first,
                              "identical_to_hf_eager": out.tokens == greedy.get("hf"),
                              "n_alpha": [sum(a > j for a in out.accepted) / out.rounds for j in range(k)]})
        return fn

    for k in [int(x) for x in args.ks.split(",")]:
        method(f"spec-K{k}", spec_method(OracleDraftProgram(graphed, seq, args.accept), k))
    method("spec-K4-eager-draft", spec_method(OracleDraftProgram(eager_draft, seq, args.accept), 4))
    if CUDA and "spec-K4-compiled-draft" not in skip:  # experimental: inductor-fused chain steps
        fused = GraphedProgram(plain, mode, compile_draft_steps=True)
        method("spec-K4-compiled-draft", spec_method(OracleDraftProgram(fused, seq, args.accept), 4))
    method("spec-K4-own-draft", spec_method(graphed, 4))

    from transformers import CompileConfig

    method("hf-compiled", lambda: hf_method(cache_implementation="static",
                                            compile_config=CompileConfig(mode="reduce-overhead", fullgraph=True)))
    res["ratios"] = ratios(res["results"])
    save()
    print_table(res)
    return 0


def ratios(r: dict) -> dict:
    def tps(name):
        return r.get(name, {}).get("tokens_per_s")

    out = {}
    spec = {n: v for n, v in r.items() if n.startswith("spec-K") and n[6:].isdigit() and "tokens_per_s" in v}
    if tps("self-graph") and tps("spec-K4"):
        out["spec-K4 / self-graph"] = tps("spec-K4") / tps("self-graph")
    if tps("hf-compiled"):
        for n in spec:
            out[f"{n} / hf-compiled"] = tps(n) / tps("hf-compiled")
    if tps("hf-eager"):
        for n in spec:
            out[f"{n} / hf-eager"] = tps(n) / tps("hf-eager")
    for n, v in spec.items():
        out[f"{n} host / (verify + draft)"] = v.get("host_share")
    if tps("spec-K4-compiled-draft") and tps("self-graph"):
        out["spec-K4-compiled-draft / self-graph"] = tps("spec-K4-compiled-draft") / tps("self-graph")
    if tps("spec-K4-compiled-draft") and tps("hf-compiled"):
        out["spec-K4-compiled-draft / hf-compiled"] = tps("spec-K4-compiled-draft") / tps("hf-compiled")
    if tps("spec-K4-eager-draft") and tps("spec-K4"):
        out["spec-K4 / spec-K4-eager-draft"] = tps("spec-K4") / tps("spec-K4-eager-draft")
    return out


def print_table(res: dict) -> None:
    print(f"\n{res['gpu']}  torch {res['torch']}  transformers {res['transformers']}  {res['date']}")
    print(f"target {res['target']['params'] / 1e9:.2f}B params bf16 (random), draft {res['draft']['params'] / 1e6:.0f}M "
          f"({res['draft']['mode']}, accept {res['draft']['accept']}); prompt {res['prompt_len']}, new {res['new_tokens']}")
    from eagle3_check.table import format_rows

    def f(v, fmt):
        return format(v, fmt) if isinstance(v, (int, float)) else "-"

    rows = [("method", "tok/s", "tau", "ms/round", "verify", "draft", "host", "host%", "peak GiB")]
    for name, v in res["results"].items():
        if "error" in v:  # the message in the second column, the numbers blank
            rows.append((name, f"error: {v['error'][:100]}", *[""] * 7))
            continue
        share = v.get("host_share")
        rows.append((name, f(v["tokens_per_s"], ".1f"), f(v.get("tau"), ".2f"), f(v["ms_per_round"], ".3f"),
                     f(v.get("verify_ms_per_round"), ".3f"), f(v.get("draft_ms_per_round"), ".3f"),
                     f(v.get("host_ms_per_round"), ".3f"), f(share * 100 if share is not None else None, ".1f"),
                     f(v["peak_gib"], ".2f")))
    print("\n".join(format_rows(rows, align=("left", *["right"] * 8))))
    ratios = [(k, f(v, ".2f")) for k, v in res.get("ratios", {}).items()]
    if ratios:
        print("\n".join(format_rows(ratios, align=("left", "right"))))


if __name__ == "__main__":
    sys.exit(main())
