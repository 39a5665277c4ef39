"""The exact fast lowering against ExecuTorch's stock one (issue 32 item 4), in one process.

Exports one fixture twice through `export_eager`, as `eagle3-check export` does, on one torch
thread: with the fast per-partition legalize (program/fast_lowering.py) and with
`stock_lowering`; prints each export's `lower` seconds, the seconds spent inside legalize_graph,
the ratio stock / fast of both, and whether the two .pte files are byte-identical.

`--sample-every N` (a real model, where a stock export takes hours on this machine) runs ONE
lowering (trace + `lower` only, no .pte) with the fast path, handing every N-th legalize call to
stock: the stock calls' mean time times all calls estimates stock's legalize seconds, hence
stock's `lower` (the rest of `lower` is the same work in both: the partitioner, XNNPACK's preprocess).

    PYTHONPATH=. python bench/lowering_speed.py [--fixture tiny-llama] [--quantize int4-weight]
                                                [--sample-every N] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
import tempfile
import time
from pathlib import Path


def build(name: str, quantize: str | None):
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.program.eager import EagerBackend

    program = EagerBackend.from_fixture(load_fixture(name))
    if quantize:
        from eagle3_check.program.quantize import make_spec

        program.quantize(make_spec(quantize, None, False))
    return program


def export_once(name: str, quantize: str | None, out: Path, stock: bool) -> dict:
    from eagle3_check.program.export import export_eager

    wall, cpu = time.perf_counter(), time.process_time()
    record = export_eager(build(name, quantize), out, "xnnpack", source={"fixture": name}, stock_lowering=stock)
    return {"wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2),
            "phases": record.phases, "lowering": record.lowering, "delegate_calls": record.delegated}


def lower_once(name: str, quantize: str | None) -> dict:
    """Trace and `lower` only (no to_executorch, no file), as export_eager does them."""
    from eagle3_check.program.export import constant_methods, export_methods
    from eagle3_check.program.lowering import lower_edge

    program = build(name, quantize)
    t0 = time.perf_counter()
    programs = export_methods(program.module, program.spec, int(program.module.draft.cfg.hidden_size))
    t1 = time.perf_counter()
    edge, lowering = lower_edge(programs, constant_methods(program.metadata(), "xnnpack", []), "xnnpack")
    return {"phases": {"trace": round(t1 - t0, 2), "lower": round(time.perf_counter() - t1, 2)},
            "lowering": lowering, "cpu_s": round(time.process_time(), 2)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", default="tiny-llama")
    ap.add_argument("--quantize", default=None, choices=["int8-weight", "int4-weight"])
    ap.add_argument("--sample-every", type=int, default=0, metavar="N",
                    help="one fast export, every N-th legalize stock: estimate stock (a real model)")
    ap.add_argument("--json", default=None, help="write the numbers here too")
    args = ap.parse_args()
    import torch

    from eagle3_check.program import fast_lowering as fl
    from eagle3_check.program.export import require_executorch

    torch.set_num_threads(1)  # as the CLI's export
    require_executorch()
    result: dict = {"fixture": args.fixture, "quantize": args.quantize, "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory() as tmp:
        if args.sample_every:
            fl.fast_lowering = functools.partial(fl.fast_lowering, sample_every=args.sample_every)
            row = lower_once(args.fixture, args.quantize)
            low = row["lowering"]
            calls = low["fast"] + low["stock"]
            per_stock, per_fast = low["stock_s"] / low["stock"], low["fast_s"] / max(low["fast"], 1)
            other = row["phases"]["lower"] - low["fast_s"] - low["stock_s"]
            est = {"legalize_stock_s": round(per_stock * calls, 1), "legalize_fast_s": round(per_fast * calls, 1),
                   "lower_stock_s": round(other + per_stock * calls, 1), "lower_fast_s": round(other + per_fast * calls, 1)}
            result.update(export=row, estimate=est, ratio_legalize=est["legalize_stock_s"] / est["legalize_fast_s"],
                          ratio_lower=est["lower_stock_s"] / est["lower_fast_s"])
            print(f"{args.fixture} {args.quantize or 'fp32'}: {calls} legalize calls, {low['stock']} of them stock "
                  f"({per_stock:.2f} s each) and {low['fast']} fast ({per_fast:.3f} s each); lower {row['phases']['lower']:.0f} s "
                  f"as run; estimated lower stock {est['lower_stock_s']:.0f} s / fast {est['lower_fast_s']:.0f} s "
                  f"= {result['ratio_lower']:.1f}x (legalize {result['ratio_legalize']:.0f}x)", flush=True)
        else:
            rows = {}
            for mode in ("fast", "stock"):
                rows[mode] = export_once(args.fixture, args.quantize, Path(tmp) / f"{mode}.pte", stock=mode == "stock")
                r = rows[mode]
                print(f"{mode:5s} wall {r['wall_s']:7.1f} s  cpu {r['cpu_s']:7.1f} s  lower {r['phases']['lower']:7.1f} s  "
                      f"legalize calls {r['lowering']}", flush=True)
            same = (Path(tmp) / "fast.pte").read_bytes() == (Path(tmp) / "stock.pte").read_bytes()
            ratio = rows["stock"]["phases"]["lower"] / rows["fast"]["phases"]["lower"]
            result.update(exports=rows, identical_bytes=same, ratio_lower=ratio)
            print(f"stock / fast lower: {ratio:.2f}; .pte bytes identical: {same}")
    print(f"[{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}]")
    result["load_1min"] = os.getloadavg()[0]
    if args.json:
        from eagle3_check.atomic import write_text_atomic

        write_text_atomic(args.json, json.dumps(result, indent=1) + "\n")
    return 0 if result.get("identical_bytes", True) else 1


if __name__ == "__main__":
    sys.exit(main())
