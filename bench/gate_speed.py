"""Where `eagle3-check gate` spends its time: each check (phase) split into the steps that cost.

    python bench/gate_speed.py --pte tiny.pte [--runner exec:BINARY] [--routes binary,replay,in-process]
                               [--base OLD_CHECKOUT] [--keep DIR] [--out FILE.json] [-- GATE ARGS]

Per route, one `gate --pte PTE --no-progress --report R` of this tree (and of --base's)
in a child process: `binary` is `gate --runner exec:BINARY` (default the fake seed runner,
fixtures/fake_runners/fake_seed_runner, a Python stand-in for the seed's C++ runner with its CLI),
each request recorded on its way (bench/replay_runner.py: one more ~0.1 s process per request);
`replay` is the same gate with those recordings replayed by a process that starts in milliseconds,
as the C++ binary does (the same bytes, so the same verdicts: the harness's own cost); `in-process`
is `gate` with our reference runner. The child times, by wrapping the functions that do it:
  binary process (ExecRunner.execute: the binary's wall time), pte rewrite (pte_edit.omit_metadata),
  pte load (PteBackend, the load probe's child), HF load / HF reference (HFReference), self reference
  (the program's own greedy decoding and scores), our runner (ReferenceRunner.run: held_to_ours and the
  in-process runner), id recovery (judge.recover.recover_ids, its own walk);
each step's time is exclusive (a step inside another is counted once, in the inner one), and the rest
of a phase is `other`. Prints, per route, the phase table (wall seconds, calls), the CPU seconds of
the harness and of its children (the binary's processes: the load-independent cost), the load
(`uptime`) before and after, and the ratio against the previous figure (the issue's 470-501 s for the
binary route). With `--base DIR` (a checkout of an earlier commit) each route also runs there, alternately
with this tree in the same run, and the table gains the ratio new / old per phase, and the two reports
are compared (tests/compare_reports.py: identical except times and paths).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PREVIOUS = {"binary": (470.0, 501.0)}  # issue 49: the gate through the fake seed binary, tiny fixture, seconds
STEPS = [  # (step, module, attribute): a function or a Class.method, wrapped in the child
    ("binary process", "eagle3_check.runners.binary.runner", "ExecRunner.execute"),
    ("pte rewrite", "eagle3_check.program.pte_edit", "omit_metadata"),
    ("pte load", "eagle3_check.program.pte_backend", "PteBackend.__init__"),
    ("pte load", "eagle3_check.program.pte_probe", "probe_load"),
    ("HF load", "eagle3_check.judge.hf", "HFReference.__init__"),
    ("HF reference", "eagle3_check.judge.hf", "HFReference.greedy"),
    ("HF reference", "eagle3_check.judge.hf", "HFReference.score"),
    ("self reference", "eagle3_check.judge.self_ref", "self_greedy"),
    ("self reference", "eagle3_check.judge.self_ref", "self_score"),
    ("self reference", "eagle3_check.jobs.suites.execute", "self_score"),
    ("our runner", "eagle3_check.runners.loop", "ReferenceRunner.run"),
    ("id recovery", "eagle3_check.judge.binary", "recover_ids"),
]


class Clock:
    """Exclusive time per (phase, step): a step's wall minus the steps inside it, per thread."""

    def __init__(self):
        self.phase = "start"
        self.rows: dict[tuple[str, str], list[float]] = {}  # (phase, step) -> [seconds, calls]
        self.local = threading.local()

    def add(self, phase: str, step: str, seconds: float, calls: int = 1) -> None:
        row = self.rows.setdefault((phase, step), [0.0, 0])
        row[0] += seconds
        row[1] += calls

    def wrap(self, step: str, fn):
        clock = self

        def timed(*args, **kwargs):
            stack = clock.local.__dict__.setdefault("stack", [])
            stack.append(0.0)  # the time of the steps inside this one
            t0 = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                wall = time.perf_counter() - t0
                inner = stack.pop()
                clock.add(clock.phase, step, wall - inner)
                if stack:
                    stack[-1] += wall
        timed.__wrapped__ = fn
        return timed


def _install(clock: Clock) -> None:
    import importlib

    for step, module, attr in STEPS:
        mod = importlib.import_module(module)
        owner, _, name = attr.rpartition(".")
        target = getattr(mod, owner) if owner else mod
        setattr(target, name, clock.wrap(step, getattr(target, name)))
    from eagle3_check.jobs.gate import gate as gate_mod

    plain, requests = gate_mod.timed, gate_mod.request_checks

    def phase(name, fn, *args):  # a gate check: its wall, less the steps inside it, is its `other`
        before, clock.phase = clock.phase, name
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            clock.add(name, "(phase)", time.perf_counter() - t0)
            clock.phase = before
    gate_mod.timed = lambda name, fn: phase(name, plain, name, fn)
    # in process the three request checks run as one call (their times are their cases')
    gate_mod.request_checks = lambda *a: phase("request checks (in process)", requests, *a)


def child(args: argparse.Namespace, gate_args: list[str]) -> None:
    """One gate run in this process, profiled; prints its numbers as one JSON line."""
    t0 = time.perf_counter()
    clock = Clock()
    _install(clock)
    from eagle3_check.cli import main

    clock.phase = "gate"
    argv = ["gate", "--pte", args.pte, "--no-progress", "--report", args.report, *gate_args]
    if args.runner:
        argv += ["--runner", args.runner]
    rc = main(argv)
    wall = time.perf_counter() - t0
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    print(json.dumps({"rc": rc, "wall": wall, "cpu_self": me.ru_utime + me.ru_stime,
                      "cpu_children": kids.ru_utime + kids.ru_stime,
                      "rows": [[p, s, v[0], v[1]] for (p, s), v in clock.rows.items()]}))


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def run_route(tree: Path, route: str, args, gate_args: list[str], out_dir: Path) -> dict:
    """One profiled gate of `tree` by `route` into out_dir (RUN/ROUTE): `binary` (the binary's requests
    recorded under RUN/recorded, bench/replay_runner.py), `replay` (those recordings replayed), `in-process`."""
    runner = None
    replayer = f"exec:{sys.executable} -S {ROOT / 'bench' / 'replay_runner.py'}"
    recorded = out_dir.parent / "recorded"  # the tree's run directory: old/ or new/
    recorded.mkdir(exist_ok=True)
    recorded.chmod(0o777)  # written by the recorder, which runs as the binary does (`nobody` under a root gate)
    if route == "binary":
        binary = (args.runner or f"exec:{tree / 'fixtures' / 'fake_runners' / 'fake_seed_runner'}")[len("exec:"):]
        runner = f"{replayer} record {recorded} {binary}"
    elif route == "replay":
        runner = f"{replayer} replay {recorded}"
    report = out_dir / f"{route}.json"
    cmd = [sys.executable, str(Path(__file__).resolve()), "--child", "--pte", args.pte, "--report", str(report)]
    cmd += ["--runner", runner] if runner else []
    env = {**os.environ, "PYTHONPATH": str(tree), "PYTHON": sys.executable, "OMP_NUM_THREADS": args.threads}
    load = uptime()
    t0 = time.perf_counter()
    p = subprocess.run([*cmd, "--", *gate_args], capture_output=True, text=True, env=env, cwd=tree)
    wall = time.perf_counter() - t0
    lines = [line for line in p.stdout.splitlines() if line.startswith('{"rc"')]
    if not lines:
        raise SystemExit(f"gate in {tree} exited {p.returncode}: {p.stderr[-2000:]}")
    got = json.loads(lines[-1])
    got.update(route=route, tree=str(tree), process_wall=wall, load_before=load, load_after=uptime(),
               report=str(report))
    return got


def run_dir(tmp: str, tag: str, route: str) -> Path:
    d = Path(tmp) / tag / route
    d.mkdir(parents=True, exist_ok=True)
    return d


def table(new: dict, old: dict | None) -> str:
    def phases(run):
        out: dict[str, dict[str, list[float]]] = {}
        for phase, step, sec, calls in run["rows"]:
            out.setdefault(phase, {})[step] = [sec, calls]
        for steps in out.values():  # a check's own time, less its steps'
            if "(phase)" in steps:
                steps["other"] = [steps.pop("(phase)")[0] - sum(v[0] for v in steps.values()), 0]
        return out

    a, b = phases(new), phases(old) if old else {}
    rows = [("phase", "step", "seconds", "calls") + (("old s", "new/old") if old else ())]
    order = ["start", "gate", "load", "metadata"] + [p for p in a if p not in ("start", "gate", "load", "metadata")]
    for phase in [p for p in order if p in a or p in b]:
        total_new = sum(v[0] for v in a.get(phase, {}).values())
        total_old = sum(v[0] for v in b.get(phase, {}).values())
        rows.append((phase, "(all)", f"{total_new:.1f}", "") + ((f"{total_old:.1f}",
                    f"{total_new / total_old:.2f}" if total_old else "-") if old else ()))
        for step, (sec, calls) in sorted(a.get(phase, {}).items(), key=lambda kv: -kv[1][0]):
            if sec < 0.05 and step != "other":
                continue
            o = b.get(phase, {}).get(step)
            rows.append(("", step, f"{sec:.1f}", str(calls) if calls else "") +
                        ((f"{o[0]:.1f}" if o else "-", f"{sec / o[0]:.2f}" if o and o[0] > 0.05 else "-") if old else ()))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows)


def summary(run: dict) -> str:
    return (f"{run['tree']}: wall {run['process_wall']:.1f} s (gate {run['wall']:.1f} s), exit {run['rc']}; CPU: "
            f"harness {run['cpu_self']:.1f} s, its children (the binary's processes, the load probe) "
            f"{run['cpu_children']:.1f} s\n  load before: {run['load_before']}\n  load after:  {run['load_after']}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pte", required=True, help="the .pte to gate (the tiny fixture's: tests/pte's export cache)")
    ap.add_argument("--runner", help="exec:BINARY (default: the tree's fake seed runner)")
    ap.add_argument("--routes", default="binary,replay,in-process")
    ap.add_argument("--base", help="a checkout of an earlier commit, run alternately in the same run")
    ap.add_argument("--threads", default="1", help="OMP_NUM_THREADS of every gate (default 1)")
    ap.add_argument("--out", help="write every run's numbers here (JSON)")
    ap.add_argument("--keep", help="keep each run's gate report in this directory (old/ROUTE/, new/ROUTE/, and each tree's recorded requests in old/recorded, new/recorded)")
    ap.add_argument("--report", help=argparse.SUPPRESS)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    argv = sys.argv[1:]
    gate_args = argv[argv.index("--") + 1:] if "--" in argv else []
    args = ap.parse_args(argv[:argv.index("--")] if "--" in argv else argv)
    args.pte = str(Path(args.pte).resolve())
    if args.child:
        child(args, gate_args)
        return
    import tempfile

    runs = []
    with tempfile.TemporaryDirectory(prefix="gate-speed-") as tmp:
        tmp = args.keep or tmp
        Path(tmp).mkdir(parents=True, exist_ok=True)
        Path(tmp).chmod(0o755)  # the recorder runs as the binary does, as `nobody` when the gate is root: it
        # must reach RUN/recorded (docs/isolation.md)
        for route in args.routes.split(","):
            old = None
            if args.base:
                old = run_route(Path(args.base).resolve(), route, args, gate_args, run_dir(tmp, "old", route))
            new = run_route(ROOT, route, args, gate_args, run_dir(tmp, "new", route))
            print(f"\n== gate, route {route} ==")
            print(summary(new))
            if old:
                print(summary(old))
            print(table(new, old))
            if route in PREVIOUS and not args.runner:
                lo, hi = PREVIOUS[route]
                print(f"the previous figure (issue 49, a lighter load): {lo:.0f}-{hi:.0f} s; this run "
                      f"{new['process_wall']:.0f} s at the load above: previous / this = {lo / new['process_wall']:.2f}-"
                      f"{hi / new['process_wall']:.2f}")
            if old:
                same = subprocess.run([sys.executable, str(ROOT / "tests" / "compare_reports.py"),
                                       str(Path(tmp) / "old" / route), str(Path(tmp) / "new" / route),
                                       *(f"--root={r}" for r in (ROOT, args.base, Path(tmp) / "old", Path(tmp) / "new"))],
                                      capture_output=True, text=True)
                print(f"reports old vs new (tests/compare_reports.py): "
                      f"{'identical except times and paths' if same.returncode == 0 else 'DIFFER'}")
                if same.returncode:
                    print(same.stdout[-4000:])
                print(f"wall new/old: {new['process_wall'] / old['process_wall']:.2f}; CPU (harness + children) "
                      f"new/old: {(new['cpu_self'] + new['cpu_children']) / (old['cpu_self'] + old['cpu_children']):.2f}")
            runs += [r for r in (old, new) if r]
    if args.out:
        from eagle3_check.atomic import write_text_atomic

        write_text_atomic(args.out, json.dumps(runs, indent=1) + "\n")


if __name__ == "__main__":
    main()
