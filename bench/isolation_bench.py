"""The cost of running the runner in its own process: the same `check`, in process and isolated.

    python bench/isolation_bench.py [--repeats 3] [--suite budget] [--out bench/results/isolation.json]
                                    [-- CHECK ARGS]

Two routes, in one run:
- `check`: `eagle3-check check --no-progress --json [CHECK ARGS]` (default: the embedded fixture,
  the reference runner; the isolated child builds its own program);
- `suite`: `eagle3-check check --suite NAME --fixture tiny-llama --no-progress --json` (each case's
  program is the harness's, called over the pipe: runners/isolate/remote.py); `--suite none` skips it.
Each alternately in process and with `--isolate` (the runner in a child process, eagle3_check/
isolate), `--repeats` times each; prints the wall time of each run and, per route, the ratio of
the medians (isolated / in process; the target is <= 1.10). Both must pass with the same tokens
(the same case verdicts): a cheaper isolation that changes the verdict is no isolation. Writes the
numbers as JSON.
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


def one(extra: list[str]) -> tuple[float, dict]:
    cmd = [sys.executable, "-m", "eagle3_check.cli", "check", "--fixture", "tiny-llama", "--no-progress", "--json", *extra]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    seconds = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        raise SystemExit(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr[-500:]}")
    return seconds, json.loads(p.stdout)


def outcome(report: dict) -> list:
    """What must not change with isolation: each request's tokens, or each case's status and details."""
    if "requests" in report:
        return [r["run"]["tokens"] for r in report["requests"]]
    return [(c["name"], c["status"], c["details"].get("tokens")) for r in report["reports"] for c in r["cases"]]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--suite", default="budget", help="the suite route's suite ('none': the check route only)")
    ap.add_argument("--out", default=None, help="write the results here (JSON)")
    ap.add_argument("check_args", nargs="*", help="extra `check` arguments (after --)")
    args = ap.parse_args(argv)
    routes = {"check": list(args.check_args)}
    if args.suite != "none":
        routes["suite"] = ["--suite", args.suite, "--fixture", "tiny-llama"]
    times = {r: {"in_process": [], "isolated": []} for r in routes}
    seen: dict[tuple, list] = {}
    for _ in range(args.repeats):
        for route, route_args in routes.items():
            for mode, extra in (("in_process", []), ("isolated", ["--isolate"])):
                seconds, report = one([*route_args, *extra])
                times[route][mode].append(seconds)
                got = outcome(report)
                if seen.setdefault((route, mode), got) != got or not report["passed"]:
                    raise SystemExit(f"{route} {mode}: the check did not pass with the same outcome every run")
                print(f"{route:6s} {mode:10s} {seconds:6.2f} s  passed={report['passed']}", flush=True)
    result = {"command": "python bench/isolation_bench.py " + " ".join(argv or sys.argv[1:]),
              "check_args": args.check_args, "target": 1.10, "cpus": os.cpu_count(),
              "load_average": list(os.getloadavg()), "python": platform.python_version(), "routes": {}}
    for route in routes:
        if seen[(route, "in_process")] != seen[(route, "isolated")]:
            raise SystemExit(f"{route}: isolated and in-process runs judged different outcomes")
        med = {m: statistics.median(t) for m, t in times[route].items()}
        ratio = med["isolated"] / med["in_process"]
        print(f"{route}: median in process {med['in_process']:.2f} s, isolated {med['isolated']:.2f} s, "
              f"ratio {ratio:.3f} (target <= 1.10)")
        result["routes"][route] = {"args": routes[route], "seconds": times[route], "median": med,
                                   "ratio": round(ratio, 4), "items": len(seen[(route, "isolated")])}
    if args.out:
        from eagle3_check.atomic import write_text_atomic

        write_text_atomic(args.out, json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
