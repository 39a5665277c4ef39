"""GPU benchmark: speculative decoding with a trained draft and a compiled, graph-captured
target_verify, against greedy peers, with the verify forward measured against its bandwidth floor.

Target: a Llama-shaped model of about 1.1B parameters with random bf16 weights (built in
memory, seeded; permutation-bigram init, see `permutation_bigram_init`). Draft: an EAGLE-3
head (one layer, hidden = the target's, full vocab) distilled in this run on the target's own
greedy text (bench/gpu_draft.py: recipe and seeds in the JSON), or `--draft random` (untrained).

Measured in one run, prompt --prompt-len random ids, --new tokens, greedy, batch 1:
  (a) hf-eager              HF generate, dynamic cache, eager
  (b) hf-compiled           HF generate, static cache + torch.compile(mode="reduce-overhead")
  (c) self-graph            greedy through our target (HF forward), one-token target_verify as a CUDA graph
  (c') self-graph-compiled  the same with the compiled target forward (program/compiled.py)
  (d) spec-K                DeviceRunner, trained draft, compiled target_verify + compiled one-token
                            draft steps, both captured as CUDA graphs, K in --ks
  plus spec-K4-eager-target (HF forward in the graphs), spec-K4-oracle-1.0 (every proposal right:
  the upper bound of this loop) and spec-K4-oracle-0.8 (the earlier runs' controlled acceptance).
Each: tokens/s (new tokens over the whole call, prefill included; median of --repeats), tau,
n-alpha, ms per round split into verify / draft / host (device-timeline spans from CUDA events),
peak GPU memory. Then verify ms against the floor (bench/gpu_floor.py), the draft's card
(K = 1..7 on held-out prompts), and the ratios.

Real mode (`--target DIR --draft-dir DIR --tokenizer F --prompts F`, chat frame flags): the same rows on a
trained model and its trained draft, the first prompt of the set in its chat frame, the card on the next
--card-prompts; the random 1.1B target above stays the upper bound of the loop (its next token is a
fixed permutation of the last: tau 5.0 at K 4, no real draft gets that), labelled as such.

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
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gpu_floor  # noqa: E402
from bench_targets import build_program, build_real, build_target  # noqa: E402
from gpu_draft import bigram_coverage, distill_bench_draft, random_prompts  # noqa: E402
from gpu_greedy import IdTokenizer, graph_greedy, measure_card, n_alpha  # noqa: E402
from gpu_report import print_table, ratios  # noqa: E402

from eagle3_check.program.cuda_graph import GraphedProgram  # noqa: E402
from eagle3_check.runners.device_loop import DeviceRunner, PhaseTimer  # noqa: E402
from eagle3_check.runners.options import RunOptions  # noqa: E402
from eagle3_check.suites.oracle import OracleDraftProgram  # noqa: E402


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--layers", type=int, default=16)
    p.add_argument("--hidden", type=int, default=2048)
    p.add_argument("--intermediate", type=int, default=8192)
    p.add_argument("--heads", type=int, default=32)
    p.add_argument("--kv-heads", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32000)
    p.add_argument("--prompt-len", type=int, default=128)
    p.add_argument("--new", type=int, default=256)
    p.add_argument("--ks", default="2,4,6")
    p.add_argument("--accept", type=float, default=0.8, help="oracle row: chance a position's proposal is right")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--hf-eager-repeats", type=int, default=2, help="(a) is host-bound and slow: fewer repeats")
    p.add_argument("--skip", default="", help="comma-separated methods to skip (hf-eager,hf-compiled,...)")
    p.add_argument("--out", default=None, help="write the results JSON here")
    p.add_argument("--device", default="cuda", help="cuda (cpu: a smoke test with emulated graphs, no compile)")
    p.add_argument("--compile", default="layer", choices=["layer", "model", "off"],
                   help="compile the target forward before capture (program/compiled.py); off: HF forward only")
    p.add_argument("--compile-mode", default="default", choices=["default", "max-autotune-no-cudagraphs"])
    p.add_argument("--compile-attention", default="grouped", choices=["grouped", "sdpa"],
                   help="grouped: no per-head copy of the KV cache (the fastest verify variant measured, docs/cuda.md)")
    p.add_argument("--draft", default="trained", choices=["trained", "random"])
    p.add_argument("--train-prompts", type=int, default=512)
    p.add_argument("--train-prompt-len", type=int, default=16)
    p.add_argument("--train-new", type=int, default=240)
    p.add_argument("--train-steps", type=int, default=600)
    p.add_argument("--train-batch", type=int, default=16)
    p.add_argument("--train-lr", type=float, default=1e-3)
    p.add_argument("--ttt-steps", type=int, default=5)
    p.add_argument("--init-std", type=float, default=0.02)
    p.add_argument("--card-ks", default="1,2,3,4,5,6,7")
    p.add_argument("--card-prompts", type=int, default=4)
    real = p.add_argument_group("a real target (instead of the random 1.1B one): its own trained draft, "
                                "real prompts in its chat frame")
    real.add_argument("--target", default=None, help="HF save_pretrained directory of the target")
    real.add_argument("--draft-dir", default=None, help="the trained EAGLE-3 draft for --target")
    real.add_argument("--tokenizer", default=None, help="tokenizer.json of --target")
    real.add_argument("--prompts", default=None, help="prompt set JSON ({'prompts': [{'id', 'text'}]}): the "
                      "bench prompt is the first, the card's are the next --card-prompts")
    real.add_argument("--chat-prefix", default="", help="prepended to each prompt text")
    real.add_argument("--chat-suffix", default="", help="appended to each prompt text")
    real.add_argument("--bos-id", type=int, default=-1, help="-1: no BOS")
    return p.parse_args(argv)


CUDA = torch.cuda.is_available()


def sync() -> None:
    if CUDA:
        torch.cuda.synchronize()


def peak_gib() -> float | None:
    return torch.cuda.max_memory_allocated() / 2**30 if CUDA else None


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
        row["host_pct_of_round"] = 100 * phases["host"] / (busy + phases["host"]) if busy else None
    row.update(extra or {})
    return row

def main(argv=None) -> int:
    args = parse_args(argv)
    global CUDA
    dev = torch.device(args.device)
    CUDA = dev.type == "cuda"
    mode = "cuda" if CUDA else "emulate"
    skip = set(filter(None, args.skip.split(",")))
    import transformers

    real = args.target is not None
    if real:
        missing = [f for f in ("draft_dir", "tokenizer", "prompts") if getattr(args, f) is None]
        if missing:
            sys.exit(f"--target needs --{missing[0].replace('_', '-')} too (the real mode)")
        plain, model, dcfg, max_seq, tok, real_ids = build_real(args, dev)
        args.prompt_len = len(real_ids[0])
    else:
        model, dcfg, max_seq = build_target(args, dev)
    n_target = sum(p.numel() for p in model.parameters())
    res = {
        "gpu": torch.cuda.get_device_name() if CUDA else "cpu (smoke test)",
        "torch": torch.__version__, "cuda": torch.version.cuda, "transformers": transformers.__version__,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/gpu_bench.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "target": {"params": n_target, "dir": args.target, "draft": args.draft_dir, "prompts": args.prompts,
                   "dtype": "bfloat16", "weights": "real (trained)"} if real else {
                   "params": n_target, "layers": args.layers, "hidden": args.hidden, "intermediate": args.intermediate,
                   "heads": args.heads, "kv_heads": args.kv_heads, "vocab": args.vocab, "dtype": "bfloat16",
                   "weights": "random (seed 0): embedding N(0,1), lm_head = permuted embedding rows, "
                              "o_proj/down_proj N(0, 0.02/sqrt(2L)), others N(0, 0.02); greedy next token "
                              "of x is perm[x] by a wide margin (see permutation_bigram_init)"},
        "prompt_len": args.prompt_len, "new_tokens": args.new, "repeats": args.repeats,
        "tokens_per_s_definition": "new tokens / wall time of the whole request (prefill included), median",
        "results": {},
    }

    def save():
        if args.out:
            Path(args.out).parent.mkdir(parents=True, exist_ok=True)
            tmp = Path(args.out).with_suffix(".tmp")
            tmp.write_text(json.dumps(res, indent=2) + "\n")
            tmp.replace(args.out)

    if CUDA:  # the floor first, on an idle device
        bw = gpu_floor.copy_bandwidth(dev)
        wb = gpu_floor.weight_bytes(model)
        res["floor"] = {"copy_bandwidth_tb_s": bw / 1e12, "weight_bytes": wb, "floor_ms": wb / bw * 1e3,
                        "definition": "bytes of every target weight but the embedding table / device copy "
                                      "bandwidth (read + written), measured in this run"}
        print(f"floor: {wb / 1e9:.2f} GB of weights at {bw / 1e12:.2f} TB/s = {wb / bw * 1e3:.3f} ms", flush=True)
    t0 = time.perf_counter()
    if real:
        head, train_pairs = plain.module.draft, set()
        res["draft"] = {"mode": f"trained, loaded from {args.draft_dir}"}
    elif args.draft == "trained":
        head, train_pairs, res["draft"] = distill_bench_draft(model, dcfg, max_seq, args)
    else:
        from gpu_draft import init_head

        head, train_pairs = init_head(model, dcfg, max_seq, args.init_std).to(torch.bfloat16).eval(), set()
        res["draft"] = {"mode": "random (untrained)"}
    res["draft"].update(params=sum(p.numel() for p in head.parameters()), draft_vocab=dcfg.draft_vocab_size,
                        build_s=round(time.perf_counter() - t0, 2))
    save()
    if not real:
        plain = build_program(model, dcfg, max_seq, head, args, dev)
        tok = IdTokenizer(args.vocab)
    graphed = GraphedProgram(plain, mode)
    prompt = real_ids[0] if real else random_prompts(1, args.prompt_len, args.vocab, 1)[0]
    prompt_t = torch.tensor([prompt], device=dev)
    opts = dict(raw=True, bos_id=-1, stop_ids=(), stop_token=None, eos_id=None, max_new_tokens=args.new)

    def method(name, fn):
        if name in skip:
            return
        if CUDA:
            torch.cuda.reset_peak_memory_stats()
        t = time.perf_counter()
        try:
            res["results"][name] = fn()
        except Exception as e:  # a failing peer is reported, not fatal to the run
            res["results"][name] = {"error": f"{type(e).__name__}: {str(e)[:400]}"}
        res["results"][name]["method_s"] = round(time.perf_counter() - t, 1)
        print(f"{name}: {json.dumps(res['results'][name])[:300]}", file=sys.stderr, flush=True)
        save()

    def hf_method(repeats, **kw):
        def run():
            out = model.generate(input_ids=prompt_t, attention_mask=torch.ones_like(prompt_t),
                                 max_new_tokens=args.new, min_new_tokens=args.new, do_sample=False, **kw)
            return out[0, args.prompt_len:].tolist()
        toks, walls = timed(run, repeats)
        greedy.setdefault("hf", toks)
        return summarize(walls, len(toks), len(toks), extra={"tokens_head": toks[:16],
                                                             "identical_to_hf_eager": toks == greedy["hf"]})

    def self_method(program):
        def fn():
            timer = PhaseTimer(dev)
            toks, walls = timed(lambda: graph_greedy(program, prompt, args.new), args.repeats)
            graph_greedy(program, prompt, args.new, timer=timer)
            greedy.setdefault("tokens", toks)
            return summarize(walls, len(toks), len(toks) - 1, timer.totals(), 1.0,
                             {"tokens_head": toks[:16], "identical_to_hf_eager": toks == greedy.get("hf"),
                              "identical_to_self_graph": toks == greedy["tokens"]})
        return fn

    def spec_method(program, k, draft_label):
        def fn():
            o = RunOptions(chain_len=k, **opts)
            timer = PhaseTimer(dev)
            out, walls = timed(lambda: DeviceRunner().run(program, tok, prompt, o), args.repeats)
            DeviceRunner(timer).run(program, tok, prompt, o)
            first = next((i for i, (a, b) in enumerate(zip(out.tokens, greedy["tokens"])) if a != b), None)
            return summarize(walls, len(out.tokens), out.rounds, timer.totals(), out.tau,
                             {"k": k, "draft": draft_label, "identical_to_self_graph": out.tokens == greedy["tokens"],
                              "first_divergence": first, "identical_to_hf_eager": out.tokens == greedy.get("hf"),
                              "n_alpha": n_alpha(out.accepted, k)})
        return fn

    greedy: dict = {}
    method("hf-eager", lambda: hf_method(args.hf_eager_repeats, disable_compile=True))
    method("self-graph", self_method(graphed))
    if "tokens" not in greedy:
        greedy["tokens"] = graph_greedy(graphed, prompt, args.new)
    seq = prompt + greedy["tokens"]
    if not real:
        res["draft"]["bench_text_bigram_coverage"] = bigram_coverage(train_pairs, seq[args.prompt_len - 1:])
    if (real or args.draft == "trained") and "card" not in skip:
        res["card"] = measure_card(graphed, tok, args, opts, real_ids[1:] if real else None)
        save()
    method("spec-K4-eager-target", spec_method(graphed, 4, args.draft))
    verify_eager = {t: gpu_floor.verify_replay_ms(graphed, t) for t in (1, 5)} if CUDA else {}

    compiled = None
    if args.compile != "off" and CUDA:
        from eagle3_check.program.compiled import compile_target, compile_unavailable

        reason = compile_unavailable(dev)
        if reason:
            print(f"{reason}: compiled rows skipped", file=sys.stderr)
            res["compile"] = {"unavailable": reason}
        else:
            compiled = compile_target(plain.module.target, args.compile, args.compile_mode,
                                      attention=args.compile_attention)
            res["compile"] = {"granularity": args.compile, "mode": args.compile_mode, "attention": args.compile_attention,
                              "what": "target forward (program/compiled.py) and the draft's one-token chain steps"}
    if compiled is not None:
        fast = GraphedProgram(plain, mode, compile_draft_steps=True)
        method("self-graph-compiled", self_method(fast))
        for k in [int(x) for x in args.ks.split(",")]:
            method(f"spec-K{k}", spec_method(fast, k, args.draft))
        if not real:  # a real bf16 target's compiled greedy path leaves the eager one at its first near-tie
            # (token 5 on the H200), after which an oracle built from `seq` proposes the wrong text:
            # the oracle rows are the permutation target's upper bound only
            method("spec-K4-oracle-1.0", spec_method(OracleDraftProgram(fast, seq, 1.0), 4, "oracle 1.0 (upper bound)"))
            method(f"spec-K4-oracle-{args.accept}",
                   spec_method(OracleDraftProgram(fast, seq, args.accept), 4, f"oracle {args.accept}"))
        res["compile"]["compiled_calls"] = compiled.compiled_calls
        verify_compiled = {t: gpu_floor.verify_replay_ms(fast, t) for t in (1, 5)}
        mm = {t: gpu_floor.matmul_only_ms(compiled.weights, plain.module.target.model.lm_head.weight, t)
              for t in (1, 5)}
        res["floor"].update(verify_replay_ms={"hf_forward": verify_eager, "compiled": verify_compiled},
                            matmul_only_ms=mm)
    else:
        for k in [int(x) for x in args.ks.split(",")]:
            method(f"spec-K{k}", spec_method(graphed, k, args.draft))
        if CUDA:
            res["floor"]["verify_replay_ms"] = {"hf_forward": verify_eager}

    from transformers import CompileConfig

    if CUDA:
        method("hf-compiled", lambda: hf_method(args.repeats, cache_implementation="static",
                                                compile_config=CompileConfig(mode="reduce-overhead", fullgraph=True)))
    res["ratios"] = ratios(res)
    save()
    print_table(res)
    return 0

if __name__ == "__main__":
    sys.exit(main())
