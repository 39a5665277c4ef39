"""`check`'s time by phase, in one process: before and after the attention window and the two runs at once (issue 49 item 3).

  PYTHONPATH=. python bench/check_speed.py                       # SmolLM2, the 16 held-out prompts x 64 tokens
  PYTHONPATH=. python bench/check_speed.py --fixture tiny-llama  # quick
  PYTHONPATH=. python bench/check_speed.py --out bench/results/check-speed-smollm2.json

Phases (wall seconds, and the process's CPU seconds beside them, every thread's: on a shared machine
the CPU time is what a quiet machine's wall time would be for work on one core):

  imports    torch, transformers and the harness
  load       the program and tokenizer (`CheckContext.setup`), then the HF reference over its weights
  check      `run_check` over the prompt set, three ways: one request at a time attending over every
             KV slot (before: program/kv_window.py off), one at a time windowed, and two requests at
             once on the program and its twin, windowed (the CLI's path: jobs/check/twin_runs.py); the
             reference scores on its own thread in all three (jobs/check/scoring.py). Inside each,
             `runner` is the time in the runs (`InProcess.observe`, every runner thread's added up) and
             `reference` the time in the reference's packed forwards (overlapped with the runs)
  reference  the reference alone on check's requests, packed (judge/packed.py)
  health     draft health (`draft_health.assess`, from the runs' own call logs)

The three check reports must be identical once times are taken out (asserted). Threads as the CLI
sets them (one, unless OMP_NUM_THREADS). The load average (`uptime`) is printed before and after.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Clock:
    """Wall and process CPU seconds of a block."""

    def __enter__(self):
        self.w0, self.c0 = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc):
        self.wall, self.cpu = time.perf_counter() - self.w0, time.process_time() - self.c0


class Accumulate:
    """Wraps a callable, adding its wall seconds to `seconds` (any thread)."""

    def __init__(self, fn):
        import threading

        self.fn, self.seconds, self.lock = fn, 0.0, threading.Lock()

    def __call__(self, *a, **kw):
        t0 = time.perf_counter()
        try:
            return self.fn(*a, **kw)
        finally:
            with self.lock:
                self.seconds += time.perf_counter() - t0


def uptime() -> str:
    return subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()


def judged(report) -> list[dict]:
    """The report's requests without their times."""
    out = []
    for o in report.outcomes:
        j = {k: v for k, v in o.to_json().items() if k != "seconds"}
        j["run"] = {k: v for k, v in j["run"].items() if k != "method_ms"}
        out.append(j)
    return out


def check_once(ctx, prompts, window: bool, parallel: bool) -> tuple[object, dict]:
    """run_check as `check` calls it, windowed or over every slot, two requests at once or one."""
    from contextlib import nullcontext

    from eagle3_check.jobs.check import prompt_set
    from eagle3_check.jobs.check.scoring import ThreadLane
    from eagle3_check.jobs.check.twin_runs import Twins
    from eagle3_check.judge import packed
    from eagle3_check.program import eager
    from eagle3_check.runners.in_process import InProcess

    runner_time = Accumulate(InProcess.observe)
    ref_time = Accumulate(packed.score_many)
    threads: dict[str, float] = {}  # each thread's own CPU seconds (time.thread_time): the critical path's parts
    saved = InProcess.observe, packed.score_many, eager.windowed, Twins._work, ThreadLane._work
    InProcess.observe = lambda self, *a, **kw: runner_time(self, *a, **kw)
    packed.score_many = ref_time
    Twins._work = thread_cpu(Twins._work, threads, "runner thread")
    ThreadLane._work = thread_cpu(ThreadLane._work, threads, "reference thread")
    if not window:
        eager.windowed = lambda program: nullcontext()
    try:
        with Clock() as c:
            t0 = time.thread_time()
            report = prompt_set.run_check(ctx.program, ctx.tokenizer, ctx.reference, prompts, ctx.options,
                                          ctx.tolerance, runner=ctx.runner, tie_budget=ctx.tie_budget,
                                          parallel=parallel)
            threads["calling thread"] = time.thread_time() - t0  # serial: the runs; two at once: the judging
    finally:
        InProcess.observe, packed.score_many, eager.windowed, Twins._work, ThreadLane._work = saved
    return report, {"wall": c.wall, "cpu": c.cpu, "runner": runner_time.seconds, "reference": ref_time.seconds,
                    "threads_cpu": threads}


def thread_cpu(fn, sink: dict, name: str):
    """`fn` (a thread's whole work) adding that thread's CPU seconds to `sink` under `name` (numbered)."""
    import threading

    lock = threading.Lock()

    def wrapped(self, *a):
        t0 = time.thread_time()
        try:
            return fn(self, *a)
        finally:
            with lock:
                sink[f"{name} {sum(k.startswith(name) for k in sink)}"] = time.thread_time() - t0
    return wrapped


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", default="smollm2-135m")
    ap.add_argument("--max-new-tokens", type=int, default=None, help="default: the fixture's own (check's)")
    ap.add_argument("--out", help="write the table as JSON")
    args = ap.parse_args(argv)
    start_load = uptime()
    rows: dict[str, dict] = {}
    with Clock() as c:
        import torch

        import eagle3_check.jobs.check.prompt_set  # noqa: F401
        import eagle3_check.judge.hf  # noqa: F401
    rows["imports"] = {"wall": c.wall, "cpu": c.cpu}
    from eagle3_check.cli import config_of
    from eagle3_check.jobs.check.draft_health import assess
    from eagle3_check.jobs.common.context import CheckContext
    from eagle3_check.jobs.common.world import set_threads
    from eagle3_check.judge.packed import score_many

    argv_check = ["check", "--fixture", args.fixture, "--no-progress"]
    argv_check += ["--max-new-tokens", str(args.max_new_tokens)] if args.max_new_tokens else []
    ctx = CheckContext(config_of(argv_check)[0])
    set_threads("cpu", None)  # as the CLI: one thread unless OMP_NUM_THREADS
    with Clock() as c:
        ctx.setup  # noqa: B018 (program and tokenizer)
        ctx.reference  # noqa: B018 (over the program's weights)
    rows["load"] = {"wall": c.wall, "cpu": c.cpu}
    prompts = ctx.prompts()
    reports = {}
    for name, window, parallel in (("check: one at a time, all slots", False, False),
                                   ("check: one at a time, windowed", True, False),
                                   ("check: two at once, windowed", True, True)):
        reports[name], rows[name] = check_once(ctx, prompts, window, parallel)
    after = reports[name]
    same = len({json.dumps(judged(r)) for r in reports.values()}) == 1
    requests = [(list(o.run.prompt_ids), list(o.run.tokens)) for o in after.outcomes]
    with Clock() as c:
        score_many(ctx.reference, requests)
    rows["reference alone (packed)"] = {"wall": c.wall, "cpu": c.cpu}
    with Clock() as c:
        expect, source = ctx.expected_tau(after.k, ctx.fixture)
        health = assess(ctx.program, after, expect, source)
    rows["health"] = {"wall": c.wall, "cpu": c.cpu}
    end_load = uptime()
    first, last = rows["check: one at a time, all slots"], rows[name]
    fixed = rows["imports"]["wall"] + rows["load"]["wall"] + c.wall
    print(f"# {args.fixture}: {len(prompts)} prompts, {after.counts()['positions']} judged positions, "
          f"torch threads {torch.get_num_threads()}")
    print(f"# load at start: {start_load}\n# load at end:   {end_load}")
    print(f"{'phase':34} {'wall s':>8} {'cpu s':>8} {'runner s':>9} {'reference s':>12}")
    for phase, r in rows.items():
        print(f"{phase:34} {r['wall']:8.2f} {r['cpu']:8.2f} {r.get('runner', float('nan')):9.2f} "
              f"{r.get('reference', float('nan')):12.2f}")
    for phase, r in rows.items():
        if "threads_cpu" in r:
            print(f"  {phase}: CPU s by thread: " + ", ".join(f"{k} {v:.1f}" for k, v in r["threads_cpu"].items()))
    win = rows["check: one at a time, windowed"]
    print(f"windowed / all slots, one at a time: runner {win['runner'] / first['runner']:.3f}, "
          f"process CPU {win['cpu'] / first['cpu']:.3f}; two at once / before: wall {last['wall'] / first['wall']:.3f}")
    print(f"check end to end (imports + load + check + health): before {fixed + first['wall']:.1f} s, "
          f"now {fixed + last['wall']:.1f} s")
    print(f"reports identical (times out): {same}; verdict {'PASS' if after.passed else 'FAIL'}; "
          f"step-0 agreement {health.step0_agreement:.3f}")
    if args.out:
        from eagle3_check.atomic import write_text_atomic

        write_text_atomic(args.out, json.dumps({"fixture": args.fixture, "load_start": start_load, "load_end": end_load,
                                                "threads": torch.get_num_threads(), "phases": rows,
                                                "reports_identical": same}, indent=2))
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
