"""The cost of running the runner in its own process: the same `check`, in process and isolated.

    python bench/isolation_bench.py [--repeats 3] [--out bench/results/isolation.json] [-- CHECK ARGS]

Runs `eagle3-check check --no-progress --json [CHECK ARGS]` (default: the embedded fixture, the
reference runner) alternately in process and with `--isolate` (the runner in a child process,
eagle3_check/isolate), `--repeats` times each, and prints the wall time of each run and the ratio
of the medians (isolated / in process; the target is <= 1.10). Both must pass with the same
tokens: a cheaper isolation that changes the verdict is no isolation. Writes the numbers as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path


def one(extra: list[str]) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "eagle3_check.cli", "check", "--fixture", "tiny-llama", "--no-progress", "--json", *extra]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-500:]}")
    return seconds, json.loads(p.stdout)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None, help="write the results here (JSON)")
    ap.add_argument("check_args", nargs="*", help="extra `check` arguments (after --)")
    args = ap.parse_args(argv)
    times: dict[str, list[float]] = {"in_process": [], "isolated": []}
    tokens: dict[str, list] = {}
    for _ in range(args.repeats):
        for mode, extra in (("in_process", []), ("isolated", ["--isolate"])):
            seconds, report = one([*args.check_args, *extra])
            times[mode].append(seconds)
            got = [r["run"]["tokens"] for r in report["requests"]]
            if tokens.setdefault(mode, got) != got or not report["passed"]:
                raise SystemExit(f"{mode}: the check did not pass with the same tokens every run")
            print(f"{mode:10s} {seconds:6.2f} s  passed={report['passed']}", flush=True)
    if tokens["in_process"] != tokens["isolated"]:
        raise SystemExit("isolated and in-process runs emitted different tokens")
    med = {m: statistics.median(t) for m, t in times.items()}
    ratio = med["isolated"] / med["in_process"]
    print(f"median: in process {med['in_process']:.2f} s, isolated {med['isolated']:.2f} s, ratio {ratio:.3f} "
          f"(target <= 1.10)")
    if args.out:
        result = {"command": "python bench/isolation_bench.py " + " ".join(argv or sys.argv[1:]),
                  "check_args": args.check_args, "seconds": times, "median": med, "ratio": round(ratio, 4),
                  "target": 1.10, "cpus": os.cpu_count(), "load_average": list(os.getloadavg()),
                  "python": platform.python_version(), "requests": len(tokens["isolated"])}
        Path(args.out).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
