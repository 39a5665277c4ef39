"""Cost of one eager target_verify call (K + 1 = 5 rows) against the program's max_seq_len.

The eager program attends over all max_seq_len slots at every step (program/target.py), so the
`--target` default max_seq_len (program/target_spec.py SEQ_CAP) trades context for step cost.
Prints the median ms of `--calls` verify calls after a 32-token prefill per max_seq_len, and the
ratio to the smallest; writes JSON with --out.

  OMP_NUM_THREADS=1 python bench/seq_len_cost.py --target T --draft D --seq 256 1024 4096 8192 --out r.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from eagle3_check.atomic import write_text_atomic
from eagle3_check.fixtures.registry import ProgramSpec
from eagle3_check.program.eager import EagerBackend


def verify_ms(target: str, draft: str, seq: int, calls: int) -> float:
    spec = ProgramSpec(max_seq_len=seq, min_prefill=1, max_prefill=64, chain_len=4, min_verify_len=2, max_verify_len=8)
    program = EagerBackend.from_dirs(target, draft, spec)
    torch.manual_seed(0)
    tokens = torch.randint(3, 1000, (1, 32))  # [1, 32]
    with torch.inference_mode():
        program.prefill(tokens, torch.arange(32))
        times = []
        for i in range(calls + 1):
            t0 = time.perf_counter()
            program.target_verify(tokens[:, :5], torch.arange(32 + 5 * i, 37 + 5 * i))
            times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times[1:])  # the first call warms up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--target", required=True)
    ap.add_argument("--draft", required=True)
    ap.add_argument("--seq", type=int, nargs="+", default=[256, 1024, 4096, 8192])
    ap.add_argument("--calls", type=int, default=15)
    ap.add_argument("--out", default=None)
    a = ap.parse_args()
    torch.set_num_threads(1)
    rows = [{"max_seq_len": s, "verify_ms": verify_ms(a.target, a.draft, s, a.calls)} for s in a.seq]
    for r in rows:
        r["ratio"] = r["verify_ms"] / rows[0]["verify_ms"]
        print(f"max_seq_len {r['max_seq_len']:>6}: {r['verify_ms']:7.1f} ms  x{r['ratio']:.2f}")
    if a.out:
        write_text_atomic(a.out, json.dumps({"target": a.target, "threads": 1, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
