"""target_verify near the matmul floor: every verify forward against the floors and gpt-fast, one run.

On the GPU bench target (bench/gpu_bench.py's 1.1B Llama, bf16, permutation-bigram init, a
128-id prompt prefilled), for each window length T in --ts (5: the K = 4 verify; 1: the one-token
step), in one process:
  floor            weight bytes / measured copy bandwidth (gpu_floor)
  matmul floor     the forward's products alone at M = T rows, one CUDA graph: cuBLAS
                   (gpu_floor.matmul_only_ms) and the Triton skinny kernels (triton_verify)
  hf-forward       our target adapter's HF forward, captured (GraphedProgram)
  compiled-*       program/compiled.py (the library's --compile path), captured
  triton-fused     triton_verify.TritonLlamaForward (five fused kernels a layer), tuned, captured
  triton-fused-splitk  the same with triton_splitk's split-K products, tuned over SPLITK_CONFIGS
  triton-persistent-i  triton_persistent: the whole forward as one persistent kernel, one row per
                   --persistent config (its phase times in the JSON), then its barriers alone; a
                   config with "verify": true makes target_verify the kernel's one-launch verify
                   (argmax and the draft's fc inside it); --profile lists every kernel of a replay
  gpt-fast         gpt-fast's own model.py (--gpt-fast PATH, read from its repository into an
                   ignored directory) on the same weights, compiled (default mode), captured
Every forward's ids are checked against the HF forward's on the same window, and its feature's
largest difference from the HF path's is recorded (`feature_max_abs`). All times are the
median replay of one CUDA graph (gpu_floor.replay_graph_ms). The JSON is rewritten after each
section, so a run cut short keeps what it measured.

Reproduce: python bench/verify_fused.py --gpt-fast .gpu/gptfast/model.py --out bench/results/h200-verify-fused.json
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import gptfast_ref  # noqa: E402
import gpu_floor  # noqa: E402
import triton_persistent  # noqa: E402
import triton_splitk  # noqa: E402
import triton_verify  # noqa: E402
from bench_targets import build_program, build_target  # noqa: E402
from gpu_bench import parse_args as bench_args  # noqa: E402
from gpu_draft import init_head, random_prompts  # noqa: E402
from verify_variants import VARIANTS  # noqa: E402

from eagle3_check.atomic import write_text_atomic  # noqa: E402
from eagle3_check.program.compiled import compile_target, fuse_projections  # noqa: E402
from eagle3_check.program.cuda_graph import GraphedProgram  # noqa: E402


def graph_call(fn, *buffers):
    """(graph, outputs) of fn(*buffers) captured after a warm-up on a side stream."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(2):
            fn(*buffers)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        out = fn(*buffers)
    return graph, out


class Bench:
    def __init__(self, a):
        self.a, self.t0 = a, time.perf_counter()
        args = bench_args([])
        self.dev = dev = torch.device("cuda")
        self.model, dcfg, self.max_seq = build_target(args, dev)
        head = init_head(self.model, dcfg, self.max_seq, 0.02).to(torch.bfloat16).eval()
        self.plain = build_program(self.model, dcfg, self.max_seq, head, args, dev)
        self.target = self.plain.module.target
        self.prompt = torch.tensor([random_prompts(1, args.prompt_len, args.vocab, 1)[0]], device=dev)
        self.L = L = self.prompt.shape[1]
        self.plain.prefill(self.prompt, torch.arange(L, device=dev))
        self.ts = [int(t) for t in a.ts.split(",")]
        self.windows = {t: (torch.randint(3, args.vocab, (1, t), device=dev), torch.arange(L, L + t, device=dev))
                        for t in self.ts}
        import transformers
        import triton

        self.res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "triton": triton.__version__,
                    "transformers": transformers.__version__, "shape": vars(args) | {"max_seq": self.max_seq},
                    "ts": self.ts, "rows": {}, "errors": {}}
        hf = GraphedProgram(self.plain, "cuda")
        out = {t: hf.target_verify(*self.windows[t]) for t in self.ts}
        self.want = {t: ids.clone() for t, (ids, _) in out.items()}
        self.want_feature = {t: feature.clone() for t, (_, feature) in out.items()}
        self.row("hf-forward", {t: gpu_floor.verify_replay_ms(hf, t) for t in self.ts}, {t: True for t in self.ts})

    def save(self):
        self.res["wall_s"] = round(time.perf_counter() - self.t0, 1)
        floor = self.res.get("floor_ms")
        for r in self.res["rows"].values():  # rows measured before the floor
            r["x_floor"] = {t: v / floor for t, v in r["ms"].items() if v} if floor else None
        if self.a.out:
            write_text_atomic(self.a.out, json.dumps(self.res, indent=2) + "\n", "bench JSON")

    def row(self, name, ms, same=None, **extra):
        floor = self.res.get("floor_ms")
        r = {"ms": ms, "x_floor": None, "ids_equal_hf_forward": same, **extra}
        self.res["rows"][name] = r
        print(f"[{time.perf_counter() - self.t0:6.1f} s] {name}: " + "  ".join(
            f"T={t} {v:.3f} ms" + (f" ({v / floor:.2f}x)" if floor else "") for t, v in ms.items())
            + (f"  ids {same}" if same else ""), flush=True)
        self.save()

    def section(self, name, fn):
        try:
            fn()
        except Exception as e:  # one section's failure is recorded; the others still run
            self.res["errors"][name] = f"{type(e).__name__}: {str(e)[:400]}"
            print(f"{name} error: {self.res['errors'][name]}", flush=True)
            self.save()
        finally:
            self.target.fast_forward = None

    def floors(self):
        bw = gpu_floor.copy_bandwidth(self.dev)
        self.res.update(copy_bandwidth_tb_s=bw / 1e12, weight_bytes=gpu_floor.weight_bytes(self.model),
                        kv_cache_bytes=gpu_floor.kv_bytes(self.target))
        self.res["floor_ms"] = self.res["weight_bytes"] / bw * 1e3
        fused = [fuse_projections(lay) for lay in self.model.model.layers]
        weights = [(None, qkv, lay.self_attn.o_proj.weight, None, gu, lay.mlp.down_proj.weight)
                   for (qkv, gu), lay in zip(fused, self.model.model.layers)]
        ms = {t: gpu_floor.matmul_only_ms(weights, self.model.lm_head.weight, t) for t in self.ts}
        self.row("matmul-floor-cublas", ms)

    def graphed(self, name, **extra):
        """A row for the program's captured target_verify: replay ms, ids against the HF forward's, and
        the feature's largest difference from the HF path's (`feature_max_abs`: summation order)."""
        graphs = GraphedProgram(self.plain, "cuda")
        out = {t: graphs.target_verify(*self.windows[t]) for t in self.ts}
        same = {t: bool(torch.equal(ids, self.want[t])) for t, (ids, _) in out.items()}
        diff = {t: float((f.float() - self.want_feature[t].float()).abs().max()) for t, (_, f) in out.items()}
        self.row(name, {t: gpu_floor.verify_replay_ms(graphs, t) for t in self.ts}, same, feature_max_abs=diff,
                 **extra)
        return graphs

    def triton(self):
        t0 = time.perf_counter()
        fw = triton_verify.TritonLlamaForward(self.target)
        if self.a.tune:
            self.res["triton_tuning"] = {t: triton_verify.tune(fw, t, gpu_floor._time_graph) for t in self.ts}
        else:  # the first run's picks (triton_verify.TUNED_H200)
            fw.configs = {(n, t): c for n, c in triton_verify.TUNED_H200.items() for t in self.ts}
        ms = {t: triton_verify.matmul_only_ms(fw, t, gpu_floor._time_graph) for t in self.ts}
        self.row("matmul-floor-triton", ms)
        self.row("attention-only-triton", {t: triton_verify.attention_only_ms(fw, t, gpu_floor._time_graph)
                                           for t in self.ts})
        self.target.fast_forward = fw
        self.graphed("triton-fused", configs={f"{n} T={t}": list(c) for (n, t), c in fw.configs.items()},
                     setup_s=round(time.perf_counter() - t0, 1))
        self.fw = fw

    def splitk(self):
        """The fused forward with triton_splitk's split-K products (tuned over SPLITK_CONFIGS)."""
        t0 = time.perf_counter()
        fw = triton_verify.TritonLlamaForward(self.target)
        fw.linear_fn, fw.default_config = triton_splitk.splitk_linear, triton_splitk.SPLITK_CONFIGS[0]
        if self.a.tune:
            self.res["splitk_tuning"] = {t: triton_verify.tune(fw, t, gpu_floor._time_graph, triton_splitk.SPLITK_CONFIGS,
                                                               triton_splitk.fits) for t in self.ts}
        else:
            fw.configs = {(n, t): c for n, c in triton_splitk.TUNED_H200.items() for t in self.ts}
        ms = {t: triton_verify.matmul_only_ms(fw, t, gpu_floor._time_graph) for t in self.ts}
        self.row("matmul-floor-triton-splitk", ms)
        self.target.fast_forward = fw
        self.graphed("triton-fused-splitk", configs={f"{n} T={t}": list(c) for (n, t), c in fw.configs.items()},
                     setup_s=round(time.perf_counter() - t0, 1))

    def persistent(self, name, configs):
        """The whole forward as one persistent kernel (triton_persistent) with these configs; with
        "verify": true in them, target_verify is that kernel's one-launch verify (the argmax and the
        draft's fc inside it: PersistentLlamaForward.verify) in place of forward + argmax + fuse."""
        t0 = time.perf_counter()
        configs = dict(configs)
        one_launch = configs.pop("verify", False)
        fw = triton_persistent.PersistentLlamaForward(self.target, configs)
        self.target.fast_forward = fw
        spec, fc = self.plain.module, self.plain.module.draft.fc.weight
        if one_launch:
            if spec.draft.input_norm is not None or spec.draft.fc_norm is not None:
                raise ValueError("verify: the bench draft has a norm before its fc; the kernel's fc has none")
            spec.target_verify = lambda tokens, positions: fw.verify(tokens, positions, fc)
        try:
            graphs = self.graphed(name, configs=fw.pconfigs | {"verify": one_launch}, programs=fw.programs,
                                  setup_s=round(time.perf_counter() - t0, 1))
        finally:
            if one_launch:
                del spec.target_verify
        if self.a.profile:  # every kernel of one T-row verify replay: what runs around the persistent kernel
            self.res["rows"][name]["graph_kernels"] = {
                t: gpu_floor.graph_kernels_us(graphs, t) for t in self.ts}
            print(f"  {name} graph kernels T={self.ts[0]}: {self.res['rows'][name]['graph_kernels'][self.ts[0]]}",
                  flush=True)
        self.res["rows"][name]["failed_barriers"] = fw.failed_barriers()
        self.res["rows"][name]["kernel"] = fw.kernel_info
        print(f"  {name} kernel: {fw.kernel_info}", flush=True)
        fw.times = torch.zeros(10 * len(fw.weights) + 2, device=self.dev, dtype=torch.int64)
        if one_launch:  # one timed call (program 0's clock): where the forward's time goes
            fw.verify(*self.windows[self.ts[0]], fc)
        else:
            fw(*self.windows[self.ts[0]])
        self.res["rows"][name]["phase_us"] = fw.phase_us()
        print(f"  {name} T={self.ts[0]} phases (us a layer): {fw.phase_us()}", flush=True)
        fw.times = None
        n = fw.barriers
        self.row(f"{name}-barriers-only", {t: triton_persistent.barriers_only_ms(fw, n, gpu_floor._time_graph)
                                           for t in self.ts[:1]}, barriers=n)

    def triton_variants(self, names=("pdl", "pdl-prefetch")):
        for name, pdl, prefetch in (("pdl", True, False), ("pdl-prefetch", True, True)):
            if name not in names:
                continue
            self.section(f"triton-{name}", lambda n=name, d=pdl, f=prefetch: self.triton_pdl(self.fw, n, d, f))
        triton_verify.ONEPASS_NORM = True  # not HF's rounding order at the norms: a measured variant
        try:
            self.section("triton-pdl-prefetch-onepass",
                         lambda: self.triton_pdl(self.fw, "pdl-prefetch-onepass", True, True))
        finally:
            triton_verify.ONEPASS_NORM = False

    def triton_pdl(self, fw, name, pdl, prefetch):
        """The same kernels with programmatic dependent launch (and the weights' L2 prefetch); with
        --retune the prefetching variant is tuned again (co-resident blocks may favour less shared memory)."""
        triton_verify.PDL, triton_verify.PREFETCH = pdl, prefetch
        try:
            if prefetch and self.a.retune:
                self.res[f"triton_tuning_{name}"] = {t: triton_verify.tune(fw, t, gpu_floor._time_graph) for t in self.ts}
            self.row(f"matmul-floor-triton-{name}",
                     {t: triton_verify.matmul_only_ms(fw, t, gpu_floor._time_graph) for t in self.ts})
            self.target.fast_forward = fw
            self.graphed(f"triton-fused-{name}", configs={f"{n} T={t}": list(c) for (n, t), c in fw.configs.items()})
        finally:
            triton_verify.PDL = triton_verify.PREFETCH = False

    def compiled(self, name):
        import torch._inductor.config as inductor_config

        gran, mode, attn, cfg = VARIANTS[name]
        torch._dynamo.reset()
        t0 = time.perf_counter()
        with inductor_config.patch(cfg):
            compile_target(self.target, gran, mode, attention=attn)
            self.graphed(f"compiled-{name}", compile_s=round(time.perf_counter() - t0, 1))

    @torch.no_grad()
    def gptfast(self):
        mod = gptfast_ref.load_gptfast(self.a.gpt_fast)
        gf = gptfast_ref.from_hf(mod, self.model, self.max_seq)
        gf(self.prompt, torch.arange(self.L, device=self.dev))  # the same prefill, eager
        torch._dynamo.reset()
        t0 = time.perf_counter()
        step = torch.compile(gf, dynamic=False, fullgraph=True)  # gpt-fast's flags; our graph, not reduce-overhead
        ms, same = {}, {}
        for t in self.ts:
            tokens, positions = (w.clone() for w in self.windows[t])
            graph, logits = graph_call(step, tokens, positions)
            same[t] = bool(torch.equal(logits.argmax(-1), self.want[t]))
            ms[t] = gpu_floor.replay_graph_ms(graph)
        self.row("gpt-fast", ms, same, compile_s=round(time.perf_counter() - t0, 1),
                 note="gpt-fast model.py forward (logits only: no taps, fuse or argmax), compiled default mode")
        del gf, step


def table(res) -> str:
    ts = res["ts"]
    lines = [f"floor {res['floor_ms']:.3f} ms ({res['copy_bandwidth_tb_s']:.2f} TB/s copy, "
             f"{res['weight_bytes'] / 1e9:.3f} GB of weights)" if "floor_ms" in res else "no floor",
             "| forward | " + " | ".join(f"T={t} ms | x floor | ids" for t in ts) + " |",
             "|---|" + "---:|---:|---|" * len(ts)]
    for name, r in res["rows"].items():
        cells = []
        for t in ts:
            v = r["ms"].get(t)
            x = (r["x_floor"] or {}).get(t)
            ids = (r["ids_equal_hf_forward"] or {}).get(t, "-")
            cells.append("- | -" if v is None else f"{v:.3f} | {x:.2f}" if x else f"{v:.3f} | -")
            cells.append(str(ids))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    for name, e in res["errors"].items():
        lines.append(f"{name}: ERROR {e[:200]}")
    return "\n".join(lines)


@torch.no_grad()
def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--ts", default="5,1")
    p.add_argument("--variants", default="layer-grouped", help="compiled variants (verify_variants)")
    p.add_argument("--gpt-fast", default=".gpu/gptfast/model.py", help="gpt-fast's model.py (ignored directory)")
    p.add_argument("--skip", default="", help="comma-separated sections to skip: triton,splitk,persistent,pdl,gpt-fast,compiled")
    p.add_argument("--no-tune", dest="tune", action="store_false",
                   help="use triton_verify.TUNED_H200 (the first run's picks) instead of tuning (~25 s)")
    p.add_argument("--retune", action="store_true", help="tune the PDL + prefetch variant again")
    p.add_argument("--persistent", default="[{}]",
                   help="JSON list of triton_persistent config overrides, one row each ([{}]: its DEFAULT)")
    p.add_argument("--profile", action="store_true",
                   help="persistent rows: list every kernel of one verify graph replay with its time (torch.profiler)")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    skip = set(filter(None, a.skip.split(",")))
    b = Bench(a)
    b.section("floors", b.floors)
    if "triton" not in skip:
        b.section("triton", b.triton)
    if "splitk" not in skip:  # the likely best first: a run cut short keeps it
        b.section("triton-splitk", b.splitk)
    if "persistent" not in skip:
        for i, cfg in enumerate(json.loads(a.persistent)):
            b.section(f"persistent-{i}", lambda i=i, cfg=cfg: b.persistent(f"triton-persistent-{i}", cfg))
    if "pdl" not in skip and hasattr(b, "fw"):
        b.section("triton-pdl-prefetch", lambda: b.triton_pdl(b.fw, "pdl-prefetch", True, True))
    if "gpt-fast" not in skip:
        b.section("gpt-fast", b.gptfast)
    if "pdl" not in skip and hasattr(b, "fw"):
        b.triton_variants(names=("pdl",))
    if "compiled" not in skip:
        for name in filter(None, a.variants.split(",")):
            b.section(f"compiled-{name}", lambda name=name: b.compiled(name))
    b.save()
    print("\n" + table(b.res), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
