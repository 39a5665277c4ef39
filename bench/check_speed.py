"""`check`'s time by phase, the previous path against the current one, in one process (issue 49 item 3).

  PYTHONPATH=. python bench/check_speed.py                       # SmolLM2, the 16 held-out prompts x 64 tokens
  PYTHONPATH=. python bench/check_speed.py --fixture tiny-llama  # quick
  PYTHONPATH=. python bench/check_speed.py --out bench/results/check-speed-smollm2.json

Phases (wall seconds, and the process's CPU seconds beside them: on a shared machine the CPU time
is what a quiet machine's wall time would be for work on one core):

  imports    torch, transformers and the harness
  load       the program and tokenizer (`CheckContext.setup`), then the HF reference over its weights
  check      `run_check` over the prompt set, twice: the previous path (every request scored right
             after its run, one forward each: `InlineLane`) and the current one (scored on a second
             thread, what waits packed: `ThreadLane`); inside each, `runner` is the time in the runner
             (`guarded_run`) and `reference` the time in the reference's forwards (on the second
             thread in the current path: overlapped, so the parts add up to more than the wall)
  reference  the reference alone on check's requests: one forward a request, then packed (judge/packed.py)
  health     draft health (`draft_health.assess`, from the runs' own call logs)

The two check reports must be identical once times are taken out (asserted), and the packed
scores those of one forward a request (asserted). Threads as the CLI sets them (one, unless
OMP_NUM_THREADS). The load average (`uptime`) is printed before and after.
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
        self.fn, self.seconds = fn, 0.0

    def __call__(self, *a, **kw):
        t0 = time.perf_counter()
        try:
            return self.fn(*a, **kw)
        finally:
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


def check_once(ctx, prompts, threaded: bool) -> tuple[object, dict]:
    """run_check as `check` calls it, on the previous (inline) or current (threaded) scoring path."""
    from eagle3_check.jobs.check import prompt_set, scoring
    from eagle3_check.judge import packed

    runner_time = Accumulate(prompt_set.guarded_run)
    ref_time = Accumulate(packed.score_many)
    inline_score = Accumulate(ctx.reference.score)
    saved = prompt_set.guarded_run, packed.score_many, scoring.lane
    prompt_set.guarded_run, packed.score_many = runner_time, ref_time
    if not threaded:
        scoring.lane = lambda reference, runner: scoring.InlineLane(reference)
        ctx.reference.score = inline_score
    try:
        with Clock() as c:
            report = prompt_set.run_check(ctx.program, ctx.tokenizer, ctx.reference, prompts, ctx.options,
                                          ctx.tolerance, runner=ctx.runner, tie_budget=ctx.tie_budget)
    finally:
        prompt_set.guarded_run, packed.score_many, scoring.lane = saved
        ctx.reference.__dict__.pop("score", None)
    ref = ref_time.seconds if threaded else inline_score.seconds
    return report, {"wall": c.wall, "cpu": c.cpu, "runner": runner_time.seconds, "reference": ref}


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
    before, rows["check (previous)"] = check_once(ctx, prompts, threaded=False)
    after, rows["check (current)"] = check_once(ctx, prompts, threaded=True)
    same = judged(before) == judged(after)
    requests = [(list(o.run.prompt_ids), list(o.run.tokens)) for o in after.outcomes]
    with Clock() as c:
        one = [ctx.reference.score(p, t) for p, t in requests]
    rows["reference (one a forward)"] = {"wall": c.wall, "cpu": c.cpu}
    with Clock() as c:
        many = score_many(ctx.reference, requests)
    rows["reference (packed)"] = {"wall": c.wall, "cpu": c.cpu}
    with Clock() as c:
        expect, source = ctx.expected_tau(after.k, ctx.fixture)
        health = assess(ctx.program, after, expect, source)
    rows["health"] = {"wall": c.wall, "cpu": c.cpu}
    end_load = uptime()
    total_prev = rows["imports"]["wall"] + rows["load"]["wall"] + rows["check (previous)"]["wall"] + c.wall
    total_cur = rows["imports"]["wall"] + rows["load"]["wall"] + rows["check (current)"]["wall"] + c.wall
    print(f"# {args.fixture}: {len(prompts)} prompts, {after.counts()['positions']} judged positions, "
          f"torch threads {torch.get_num_threads()}")
    print(f"# load at start: {start_load}\n# load at end:   {end_load}")
    print(f"{'phase':28} {'wall s':>8} {'cpu s':>8} {'runner s':>9} {'reference s':>12}")
    for name, r in rows.items():
        print(f"{name:28} {r['wall']:8.2f} {r['cpu']:8.2f} {r.get('runner', float('nan')):9.2f} "
              f"{r.get('reference', float('nan')):12.2f}")
    prev, cur = rows["check (previous)"], rows["check (current)"]
    print(f"check current / previous: wall {cur['wall'] / prev['wall']:.3f}; reference packed / one a forward: "
          f"wall {rows['reference (packed)']['wall'] / rows['reference (one a forward)']['wall']:.3f}")
    print(f"check end to end (imports + load + check + health): previous {total_prev:.1f} s, current {total_cur:.1f} s")
    print(f"reports identical (times out): {same}; packed scores identical: {many == one}; "
          f"verdict {'PASS' if after.passed else 'FAIL'}; step-0 agreement {health.step0_agreement:.3f}")
    if args.out:
        from eagle3_check.atomic import write_text_atomic

        write_text_atomic(args.out, json.dumps({"fixture": args.fixture, "load_start": start_load, "load_end": end_load,
                                         "threads": torch.get_num_threads(), "phases": rows,
                                         "total_previous_s": total_prev, "total_current_s": total_cur,
                                         "reports_identical": same, "packed_identical": many == one}, indent=2))
    return 0 if same and many == one else 1


if __name__ == "__main__":
    sys.exit(main())
