"""How long `eagle3-check export` takes, phase by phase, and the stock lowering against ours, in one process.

Exports one fixture through `export_eager` (as `eagle3-check export` does, one torch thread) once
per mode: `fast` (the exact fast legalize, program/fast_lowering.py, and XNNPACK's preprocess over
the usable CPUs, program/parallel_preprocess.py), `serial` (the fast legalize, the preprocess in
this process only: the export before issue 49) and `stock` (`--stock-lowering`: ExecuTorch's own
lowering). Prints, for each mode, each phase's wall seconds: trace (the three torch.export calls),
to_edge (ExecuTorch's decompositions to the edge dialect), partition (the XNNPACK partitioner),
preprocess (XNNPACK's per-partition passes and serialization, `lower_all_submodules_to_backend`),
the rest of lower (fusing each partition into a submodule, the legalize calls), to_executorch,
serialize; the CPU seconds (this process, and its preprocess workers); each mode's seconds over
fast's; whether the .pte files are byte-identical (their sha256); and `uptime` before and after
(the machine is shared: wall seconds compare only within one run at one load). `--cli` also
times `eagle3-check export` itself in a fresh process (startup and imports included).

    PYTHONPATH=. python bench/export_speed.py [--fixture tiny-llama] [--modes fast,serial,stock] [--cli] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PHASES = ("trace", "to_edge", "partition", "preprocess", "lower (rest)", "to_executorch", "serialize", "total")


def uptime() -> str:
    try:
        return subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "load average: " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


@contextlib.contextmanager
def timed_internals(seconds: dict[str, float], cpu: dict[str, float]):
    """Wall and CPU seconds (this process) inside ExecuTorch's to_edge, partitioner and preprocess
    steps (timing only: each wrapped function is called as it is)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir.backend import backend_api
    from executorch.exir.program import _program

    targets = [(_program, "_gen_edge_manager_for_partitioners", "to_edge"),
               (XnnpackPartitioner, "partition", "partition"),
               (backend_api, "lower_all_submodules_to_backend", "preprocess")]
    saved = [(owner, name, vars(owner).get(name)) for owner, name, _ in targets]  # None: inherited

    def wrap(fn, key):
        @functools.wraps(fn)
        def timed(*args, **kwargs):
            t0, c0 = time.perf_counter(), time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                seconds[key] = seconds.get(key, 0.0) + time.perf_counter() - t0
                cpu[key] = cpu.get(key, 0.0) + time.process_time() - c0
        return timed

    for owner, name, key in targets:
        setattr(owner, name, wrap(getattr(owner, name), key))
    try:
        yield
    finally:
        for owner, name, fn in saved:
            if fn is None:
                delattr(owner, name)
            else:
                setattr(owner, name, fn)


def export_once(fixture: str, out: Path, mode: str) -> dict:
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.program import parallel_preprocess as pp
    from eagle3_check.program.eager import EagerBackend
    from eagle3_check.program.export import export_eager

    program = EagerBackend.from_fixture(load_fixture(fixture))
    inner: dict[str, float] = {}
    inner_cpu: dict[str, float] = {}
    marks: list[tuple[str, float]] = []  # (phase, this process's CPU seconds when it started)
    spread = pp.parallel_preprocess
    if mode == "serial":  # lowering.py imports the name at each lowering
        pp.parallel_preprocess = functools.partial(spread, workers=1)
    t0, cpu0 = time.perf_counter(), os.times()
    try:
        with timed_internals(inner, inner_cpu):
            record = export_eager(program, out, "xnnpack", source={"fixture": fixture}, stock_lowering=mode == "stock",
                                  on_phase=lambda name: marks.append((name, time.process_time())))
        marks.append(("end", time.process_time()))
    finally:
        pp.parallel_preprocess = spread
    wall, cpu1 = time.perf_counter() - t0, os.times()
    ph = record.phases
    row = {"trace": sum(v for k, v in ph.items() if k.startswith("trace ")), **inner,
           "lower (rest)": ph["lower"] - sum(inner.values()),
           "to_executorch": ph["to_executorch"], "serialize": ph["serialize"], "total": wall}
    spent: dict[str, float] = {}
    for (name, c0), (_, c1) in zip(marks, marks[1:]):
        key = "trace" if name.startswith("trace ") else name
        spent[key] = spent.get(key, 0.0) + c1 - c0
    cpu_row = {**spent, **inner_cpu, "lower (rest)": spent.get("lower", 0.0) - sum(inner_cpu.values()),
               "total": cpu1.user - cpu0.user + cpu1.system - cpu0.system}
    return {"phases": {k: round(row.get(k, 0.0), 2) for k in PHASES},
            "phases_cpu": {k: round(cpu_row.get(k, 0.0), 2) for k in PHASES},
            "cpu_s": round(cpu1.user - cpu0.user + cpu1.system - cpu0.system, 1),
            "workers_cpu_s": round(cpu1.children_user - cpu0.children_user
                                   + cpu1.children_system - cpu0.children_system, 1),
            "preprocess": record.lowering.get("preprocess"), "edge": record.lowering.get("edge"),
            "partition_test": record.lowering.get("partition"), "sha256": hashlib.sha256(out.read_bytes()).hexdigest()}


def cli_once(fixture: str, out: Path) -> float:
    """Wall seconds of `eagle3-check export` in a fresh process (imports included)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "eagle3_check.cli", "export", "--fixture", fixture, "-o", str(out),
                    "--no-progress"], check=True, stdout=subprocess.DEVNULL)
    return round(time.perf_counter() - t0, 1)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", default="tiny-llama")
    ap.add_argument("--modes", default="fast,serial,stock", help="comma-separated, in this order: fast, serial, stock")
    ap.add_argument("--cli", action="store_true", help="also time `eagle3-check export` in a fresh process")
    ap.add_argument("--json", default=None, help="write the numbers here too")
    args = ap.parse_args()
    import torch

    from eagle3_check.program.export import require_executorch

    torch.set_num_threads(1)  # as the CLI's export
    require_executorch()
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    result: dict = {"fixture": args.fixture, "cpus": os.cpu_count(), "uptime_before": uptime(), "modes": {}}
    print(f"{args.fixture}; {os.cpu_count()} CPUs; {result['uptime_before']}", flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            r = export_once(args.fixture, Path(tmp) / f"{mode}.pte", mode)
            result["modes"][mode] = r
            print(f"{mode}: wall {r['phases']['total']:.1f} s, cpu {r['cpu_s']:.1f} s here + {r['workers_cpu_s']:.1f} s "
                  f"in preprocess workers; preprocess {r['preprocess']}; edge {r['edge']}; partition {r['partition_test']}",
                  flush=True)
        if args.cli:
            result["cli_s"] = cli_once(args.fixture, Path(tmp) / "cli.pte")
            print(f"eagle3-check export --fixture {args.fixture}: {result['cli_s']} s wall (fresh process)", flush=True)
    result["uptime_after"] = uptime()
    rows = result["modes"]
    against = [m for m in modes if m != "fast"] if "fast" in rows else []  # each ratio: that mode's seconds / fast's
    print("\n| phase | " + " | ".join(f"{m} s" for m in modes) + "".join(f" | {m} / fast" for m in against) + " |")
    print("|---|" + "---:|" * (len(modes) + len(against)))
    for phase in PHASES:
        cells = [f"{rows[m]['phases'][phase]:.1f}" for m in modes]
        fast = rows["fast"]["phases"][phase] if against else 0.0
        cells += [f"{rows[m]['phases'][phase] / fast:.2f}" if fast > 0.05 else "" for m in against]
        print(f"| {phase} | " + " | ".join(cells) + " |")
    print("\nCPU seconds of this process per phase (the preprocess workers' apart):\n")
    print("| phase | " + " | ".join(f"{m} CPU s" for m in modes) + " |")
    print("|---|" + "---:|" * len(modes))
    for phase in PHASES:
        print(f"| {phase} | " + " | ".join(f"{rows[m]['phases_cpu'][phase]:.1f}" for m in modes) + " |")
    print("| CPU s (workers) | " + " | ".join(f"{rows[m]['cpu_s']:.1f} ({rows[m]['workers_cpu_s']:.1f})" for m in modes)
          + " |" * (len(against) + 1))
    same = len({r["sha256"] for r in rows.values()}) == 1
    result["identical_bytes"] = same
    digests = ", ".join(f"{m} {r['sha256'][:16]}" for m, r in rows.items())
    print(f"\n.pte sha256: {digests}; identical: {same}")
    print(f"after: {result['uptime_after']}")
    if args.json:
        from eagle3_check.atomic import write_text_atomic

        write_text_atomic(args.json, json.dumps(result, indent=1) + "\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
