"""Verify forward variants against the bandwidth floor, one run: what bounds target_verify.

For the GPU bench target (bench/gpu_bench.py's, random draft: only the target is timed), each
variant compiles the target forward (program/compiled.py) with one setting, captures the T-row
target_verify as a CUDA graph (GraphedProgram) and times its replays (gpu_floor); the ids are
checked against the HF forward's on the same window. Also: the floor and the matrix products
alone. Prints a table; --out writes the JSON.

Reproduce: python bench/verify_variants.py --out bench/results/h200-verify-variants.json
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

import gpu_floor  # noqa: E402
from bench_targets import build_program, build_target  # noqa: E402
from gpu_bench import parse_args as bench_args  # noqa: E402
from gpu_draft import init_head, random_prompts  # noqa: E402

from eagle3_check.program.compiled import compile_target  # noqa: E402
from eagle3_check.program.cuda_graph import GraphedProgram  # noqa: E402

# name -> (granularity, mode, attention, inductor config)
VARIANTS = {
    "layer": ("layer", "default", "sdpa", {}),
    "layer-grouped": ("layer", "default", "grouped", {}),
    "layer-grouped-cdt": ("layer", "default", "grouped", {"coordinate_descent_tuning": True}),
    "model-grouped": ("model", "default", "grouped", {}),
    "layer-grouped-autotune": ("layer", "max-autotune-no-cudagraphs", "grouped", {}),
    "model-grouped-autotune": ("model", "max-autotune-no-cudagraphs", "grouped", {}),
}


@torch.no_grad()
def main() -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--variants", default=",".join(VARIANTS))
    p.add_argument("--ts", default="5,1")
    p.add_argument("--out", default=None)
    a = p.parse_args()
    import torch._inductor.config as inductor_config

    args = bench_args([])
    dev = torch.device("cuda")
    model, dcfg, max_seq = build_target(args, dev)
    head = init_head(model, dcfg, max_seq, 0.02).to(torch.bfloat16).eval()
    plain = build_program(model, dcfg, max_seq, head, args, dev)
    bw = gpu_floor.copy_bandwidth(dev)
    floor = gpu_floor.weight_bytes(model) / bw * 1e3
    prompt = torch.tensor([random_prompts(1, args.prompt_len, args.vocab, 1)[0]], device=dev)
    L = prompt.shape[1]
    plain.prefill(prompt, torch.arange(L, device=dev))
    ts = [int(t) for t in a.ts.split(",")]
    windows = {t: (torch.randint(3, args.vocab, (1, t), device=dev), torch.arange(L, L + t, device=dev)) for t in ts}
    hf_graphs = GraphedProgram(plain, "cuda")
    want = {t: hf_graphs.target_verify(*windows[t])[0].clone() for t in ts}
    res = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "floor_ms": floor,
           "copy_bandwidth_tb_s": bw / 1e12, "variants": {}}
    res["hf_forward_ms"] = {t: gpu_floor.verify_replay_ms(hf_graphs, t) for t in ts}
    fused = None
    for name in a.variants.split(","):
        gran, mode, attn, cfg = VARIANTS[name]
        torch._dynamo.reset()
        t0 = time.perf_counter()
        try:
            with inductor_config.patch(cfg):
                fused = compile_target(plain.module.target, gran, mode, attention=attn)
                graphs = GraphedProgram(plain, "cuda")
                same = {t: bool(torch.equal(graphs.target_verify(*windows[t])[0], want[t])) for t in ts}
            ms = {t: gpu_floor.verify_replay_ms(graphs, t) for t in ts}
            row = {"ms": ms, "x_floor": {t: v / floor for t, v in ms.items()}, "ids_equal_hf_forward": same,
                   "compile_s": round(time.perf_counter() - t0, 1)}
        except Exception as e:
            row = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        res["variants"][name] = row
        print(name, json.dumps(row), flush=True)
        plain.module.target.fast_forward = None
    if fused is not None:
        res["matmul_only_ms"] = {t: gpu_floor.matmul_only_ms(fused.weights, model.lm_head.weight, t) for t in ts}
    if a.out:
        Path(a.out).write_text(json.dumps(res, indent=2) + "\n")
    print(f"\nfloor {floor:.3f} ms ({bw / 1e12:.2f} TB/s); HF forward {res['hf_forward_ms']}; "
          f"matmuls only {res.get('matmul_only_ms')}")
    for name, row in res["variants"].items():
        if "error" in row:
            print(f"{name:26} error {row['error'][:120]}")
        else:
            print(f"{name:26} " + "  ".join(f"T={t}: {row['ms'][t]:.3f} ms ({row['x_floor'][t]:.2f}x)" for t in ts)
                  + f"  same ids {row['ids_equal_hf_forward']}  compile {row['compile_s']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
