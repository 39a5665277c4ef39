"""A quantized export's time against the fp32 export of the same fixture, in one process (issue 32).

Exports the base fixture (fp32) and its quantized variants (each an XNNPACK `.pte`, into a temporary
directory) through `export_eager`, as `eagle3-check export` does, on one torch thread, after executorch
is imported once; prints each export's wall and CPU seconds, its phases, and the ratio to fp32
(target: <= 2). CPU seconds beside wall seconds tell waiting (a lock, a sleep, a starved thread) from
work: on a shared machine wall >> CPU is the load, not the export.

    PYTHONPATH=. python bench/quant_export_speed.py [--fixture tiny-llama] [--variants tiny-llama-int4]
                                                    [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

TARGET_RATIO = 2.0


def export_once(name: str, out: Path) -> dict:
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.program.eager import EagerBackend
    from eagle3_check.program.export import export_eager

    wall, cpu = time.perf_counter(), time.process_time()
    program = EagerBackend.from_fixture(load_fixture(name))  # the variant's build quantizes (torchao)
    record = export_eager(program, out, "xnnpack", source={"fixture": name})
    return {"wall_s": round(time.perf_counter() - wall, 2), "cpu_s": round(time.process_time() - cpu, 2),
            "phases": record.phases, "delegate_calls": record.delegated, "bytes": out.stat().st_size}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", default="tiny-llama")
    ap.add_argument("--variants", default="tiny-llama-int4", help="comma-separated quantized variants")
    ap.add_argument("--json", default=None, help="write the numbers here too")
    args = ap.parse_args()
    import torch

    from eagle3_check.program.export import require_executorch

    torch.set_num_threads(1)  # as the CLI's export (cli/common.py set_threads)
    require_executorch()  # imported before the first timed export
    rows = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in [args.fixture, *filter(None, args.variants.split(","))]:
            rows[name] = export_once(name, Path(tmp) / f"{name}.pte")
            r = rows[name]
            phases = ", ".join(f"{k} {v:.0f}" for k, v in r["phases"].items())
            print(f"{name:20s} wall {r['wall_s']:7.1f} s  cpu {r['cpu_s']:7.1f} s  ({phases})  "
                  f"delegate calls {r['delegate_calls']}  {r['bytes'] / 1e6:.2f} MB", flush=True)
    base = rows[args.fixture]
    ratios = {n: {"wall": r["wall_s"] / base["wall_s"], "cpu": r["cpu_s"] / base["cpu_s"]}
              for n, r in rows.items() if n != args.fixture}
    for n, q in ratios.items():
        print(f"{n} / {args.fixture}: wall {q['wall']:.2f}, cpu {q['cpu']:.2f} (target <= {TARGET_RATIO})")
    print(f"[{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}]")
    if args.json:
        from eagle3_check.atomic import write_text_atomic

        write_text_atomic(args.json, json.dumps({"fixture": args.fixture, "exports": rows, "ratios": ratios,
                                                 "target_ratio": TARGET_RATIO, "cpus": os.cpu_count(),
                                                 "load_1min": os.getloadavg()[0]}, indent=1) + "\n")
    return 0 if all(q["wall"] <= TARGET_RATIO for q in ratios.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
