"""`check --workers`: the same prompt set on 1 worker and on N (one per GPU with --device cuda).

Runs `eagle3-check check --json` twice as subprocesses, times each whole command (process start,
model load, the check, draft health: what a user waits for), and prints whether the two reports
are identical verdict for verdict (every request's run and verdict, counts, tau; wall times and
the worker info excepted) and the speedup. Exit 1 when they differ.

    PYTHONPATH=. python bench/workers_bench.py --device cuda --workers 2 --out bench/results/workers-gpu.json
    PYTHONPATH=. python bench/workers_bench.py --device cpu --workers 2 --limit 6 --max-new-tokens 16   # CPU smoke

Needs no executorch (eager programs of an embedded fixture).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from eagle3_check.atomic import write_text_atomic  # noqa: E402

SAME = ("passed", "k", "tau", "n_alpha", "counts", "requests")


def run(args, workers: int, prompts: str) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "eagle3_check.cli", "check", "--json", "--no-progress", "--fixture", args.fixture,
           "--prompts", prompts, "--max-new-tokens", str(args.max_new_tokens), "--device", args.device,
           "--dtype", args.dtype, "--workers", str(workers)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, env=env)
    seconds = time.perf_counter() - t0
    if proc.returncode not in (0, 1):  # 1: the check failed, still a report to compare
        sys.exit(f"{' '.join(cmd)} exited {proc.returncode}: {proc.stderr.strip()[-2000:]}")
    report = json.loads(proc.stdout)
    for r in report["requests"]:
        r["run"].pop("method_ms", None)
    return seconds, report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--fixture", default="tiny-llama")
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--prompts", default=str(ROOT / "fixtures" / "train_prompts.json"))
    ap.add_argument("--limit", type=int, default=None, help="the first N prompts only")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--out", default=None, help="write the numbers as JSON here")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        prompts = json.loads(Path(args.prompts).read_text(encoding="utf-8"))["prompts"][: args.limit]
        path = Path(tmp) / "prompts.json"
        path.write_text(json.dumps({"prompts": prompts}))
        t1, one = run(args, 1, str(path))
        tn, many = run(args, args.workers, str(path))
    diff = [k for k in SAME if one[k] != many[k]] + (["draft_health"] if one["draft_health"] != many["draft_health"] else [])
    result = {"device": args.device, "dtype": args.dtype, "fixture": args.fixture, "prompts": len(prompts),
              "max_new_tokens": args.max_new_tokens, "workers": args.workers,
              "worker_devices": many["info"].get("worker_devices"), "seconds_1": round(t1, 2),
              f"seconds_{args.workers}": round(tn, 2), "speedup": round(t1 / tn, 3),
              "identical": not diff, "differs_in": diff, "passed": [one["passed"], many["passed"]],
              "counts": one["counts"], "tau": one["tau"]}
    print(f"{len(prompts)} prompts x {args.max_new_tokens} new tokens, {args.fixture} {args.dtype} on {args.device}")
    print(f"  1 worker : {t1:8.1f} s  ({len(prompts) / t1:.2f} req/s)")
    print(f"  {args.workers} workers: {tn:8.1f} s  ({len(prompts) / tn:.2f} req/s) on {many['info'].get('worker_devices')}")
    print(f"  speedup {t1 / tn:.2f}x; reports identical: {'yes' if not diff else 'NO, differ in ' + ', '.join(diff)}")
    if args.out:
        write_text_atomic(args.out, json.dumps(result, indent=2) + "\n", "bench result")
    return 0 if not diff else 1


if __name__ == "__main__":
    sys.exit(main())
