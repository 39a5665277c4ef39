"""Cost of exact mode (`check --exact`, docs/exact.md) against normal mode, in one run: the median ms of
one eager target_verify (K + 1 = 5 rows after a 32-token prefill) and of a one-row decode, and the
wall time per judged token of `check` over the fixture's prompt set (runner + the HF reference's
scoring), each normal vs exact, with the ratios. Writes JSON with --out.

  OMP_NUM_THREADS=1 python bench/exact_cost.py --fixture tiny-llama --dtype bfloat16 --out bench/results/exact-cost-cpu.json
  python bench/exact_cost.py --fixture tiny-llama --dtype bfloat16 --device cuda   # the Triton kernels
  python bench/exact_cost.py --shape 8b --device cuda   # a random Llama of that shape: the HF forward only

With --shape (1.1b: bench/gpu_bench.py's target shape; 8b: Llama-3.1-8B's) the model is a random HF Llama
built on the device (no weights shipped) and only its forward is timed: 5 rows and 1 row on a
DynamicCache holding a 128-token prefix (cropped back after each call).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eagle3_check.atomic import write_text_atomic  # noqa: E402
from eagle3_check.cli import main as cli_main  # noqa: E402
from eagle3_check.exact import exact_numerics  # noqa: E402
from eagle3_check.fixtures.registry import load_fixture  # noqa: E402
from eagle3_check.program.eager import EagerBackend  # noqa: E402


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def method_ms(program, device: str, rows: int, calls: int) -> float:
    """Median ms of one target_verify of `rows` rows after a 32-token prefill (first call: warm-up)."""
    tokens = torch.randint(3, 200, (1, 32), generator=torch.Generator().manual_seed(0)).to(device)  # [1, 32]
    with torch.inference_mode():
        program.prefill(tokens, torch.arange(32, device=device))
        times = []
        for i in range(calls + 1):
            pos = torch.arange(32 + i * rows, 32 + (i + 1) * rows, device=device)  # [rows]
            _sync(device)
            t0 = time.perf_counter()
            program.target_verify(tokens[:, :rows], pos)
            _sync(device)
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[1:])


SHAPES = {  # hidden, MLP, layers, heads, kv heads, vocab
    "1.1b": (2048, 8192, 16, 32, 8, 32000),
    "8b": (4096, 14336, 32, 32, 8, 128256),
}


def shape_forward_ms(shape: str, device: str, dtype: str, calls: int) -> dict:
    """{rows: (normal ms, exact ms)} for the HF forward of a random Llama of `shape` (rows 5 and 1)."""
    from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM

    h, mlp, layers, heads, kv, vocab = SHAPES[shape]
    cfg = LlamaConfig(hidden_size=h, intermediate_size=mlp, num_hidden_layers=layers, num_attention_heads=heads,
                      num_key_value_heads=kv, vocab_size=vocab, max_position_embeddings=4096,
                      attn_implementation="sdpa")
    torch.manual_seed(0)
    torch.set_default_dtype(getattr(torch, dtype))  # built in the run dtype: no fp32 copy of 8B on the way
    try:
        with torch.device(device):
            model = LlamaForCausalLM(cfg).eval()
    finally:
        torch.set_default_dtype(torch.float32)
    ids = torch.randint(0, vocab, (1, 160), device=device)  # [1, 160]
    out = {}
    for rows in (5, 1):
        pair = []
        for exact in (False, True):
            cache = DynamicCache()
            with torch.inference_mode(), (exact_numerics(model) if exact else torch.inference_mode()):
                model(input_ids=ids[:, :128], past_key_values=cache, use_cache=True)
                times = []
                for _ in range(calls + 1):
                    _sync(device)
                    t0 = time.perf_counter()
                    model(input_ids=ids[:, 128:128 + rows], past_key_values=cache, use_cache=True)
                    _sync(device)
                    times.append((time.perf_counter() - t0) * 1e3)
                    cache.crop(-rows)  # back to the 128-token prefix
            pair.append(statistics.median(times[1:]))
        out[rows] = pair
    return out


def check_per_token(args, exact: bool) -> dict:
    """`check` over the prompt set: wall seconds of its requests (run + audit + scoring) per judged token."""
    argv = ["check", "--fixture", args.fixture, "--dtype", args.dtype, "--device", args.device,
            "--max-new-tokens", str(args.max_new_tokens), "--json", "--no-progress", *(["--exact"] if exact else [])]
    out = io.StringIO()
    with redirect_stdout(out):
        rc = cli_main(argv)
    report = json.loads(out.getvalue())
    seconds = sum(r["seconds"] for r in report["requests"])
    counts = report["counts"]
    return {"rc": rc, "positions": counts["positions"], "ties": counts["tie_positions"],
            "fails": counts["fail_positions"], "seconds": round(seconds, 3),
            "ms_per_token": round(seconds / counts["positions"] * 1e3, 3)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fixture", default="tiny-llama")
    p.add_argument("--dtype", default="bfloat16", choices=["float32", "bfloat16"])
    p.add_argument("--device", default="cpu")
    p.add_argument("--calls", type=int, default=20)
    p.add_argument("--max-new-tokens", type=int, default=32)
    p.add_argument("--shape", default=None, choices=sorted(SHAPES), help="time a random Llama of this shape instead")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    if args.shape:
        times = shape_forward_ms(args.shape, args.device, args.dtype, args.calls)
        result = {"shape": args.shape, "dtype": args.dtype, "device": args.device, "torch": torch.__version__}
        for rows, (normal, exact) in times.items():
            result[f"forward_{rows}_rows_ms"] = {"normal": round(normal, 3), "exact": round(exact, 3),
                                                 "ratio": round(exact / normal, 2)}
            print(f"{args.shape} forward, {rows} rows: normal {normal:.3f} ms  exact {exact:.3f} ms  "
                  f"ratio {exact / normal:.2f}")
        if args.out:
            write_text_atomic(args.out, json.dumps(result, indent=2) + "\n")
        return
    program = EagerBackend.from_fixture(load_fixture(args.fixture), device=args.device, dtype=args.dtype)
    result = {"fixture": args.fixture, "dtype": args.dtype, "device": args.device, "threads": torch.get_num_threads(),
              "torch": torch.__version__}
    for name, rows in (("verify_ms", 5), ("decode_ms", 1)):
        normal = method_ms(program, args.device, rows, args.calls)
        with exact_numerics():
            exact = method_ms(program, args.device, rows, args.calls)
        result[name] = {"normal": round(normal, 3), "exact": round(exact, 3), "ratio": round(exact / normal, 2)}
    normal, exact = check_per_token(args, False), check_per_token(args, True)
    result["check"] = {"normal": normal, "exact": exact,
                       "ratio": round(exact["ms_per_token"] / normal["ms_per_token"], 2)}
    for key in ("verify_ms", "decode_ms"):
        r = result[key]
        print(f"{key}: normal {r['normal']:.3f}  exact {r['exact']:.3f}  ratio {r['ratio']:.2f}")
    c = result["check"]
    print(f"check ms per judged token: normal {c['normal']['ms_per_token']:.3f} ({c['normal']['ties']} ties)  "
          f"exact {c['exact']['ms_per_token']:.3f} ({c['exact']['ties']} ties)  ratio {c['ratio']:.2f}")
    if args.out:
        write_text_atomic(args.out, json.dumps(result, indent=2) + "\n")


if __name__ == "__main__":
    main()
