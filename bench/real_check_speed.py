"""What `check` costs on a real model against its two parts, in one run (issue 27's Speed section).

Three processes per repeat (a fresh process each: its own peak memory, max RSS):

  check      `eagle3-check check --fixture FX --max-new-tokens N --json` on the prompt set
  runner     the reference runner alone on the same prompts (the program built as check builds it)
  reference  the HF reference alone: the teacher-forced score of each prompt + check's own tokens,
             what the verdict reads (one forward a request)

Each process imports torch, transformers and the harness first, timed apart (every phase pays them
once: counted twice in the sum, they would flatter the ratio), then does its work, timed.
ratio = check work / (runner work + reference work), target <= 1.3; the wall-clock ratio beside
it. The phases alternate order between repeats (the machine is shared and never idle: a load
change then hits every phase, not one). Prints a line per repeat; writes JSON (--out).

  PYTHONPATH=. python bench/real_check_speed.py --repeats 2 --out bench/results/real-check-speed.json
  PYTHONPATH=. python bench/real_check_speed.py --fixture tiny-llama --max-new-tokens 16   # quick

--compare-threads 1,2 times the check phase alone at each thread count instead, alternating
(1, 2, 1, 2, ...), and prints the ratio of their work times per pair (docs/real-models.md "Threads").
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHASES = ("check", "runner", "reference")


def phase_cmd(args, phase: str, tokens_file: str | None = None) -> list[str]:
    """The command of one phase: this script in child mode."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--phase", phase, "--fixture", args.fixture,
           "--max-new-tokens", str(args.max_new_tokens), "--threads", str(args.threads)]
    return cmd + (["--prompts", args.prompts] if args.prompts else []) + (["--tokens", tokens_file] if tokens_file else [])


def run_phase(args, phase: str, env: dict, tokens_file: str | None = None) -> tuple[dict, str]:
    """({wall, import, work seconds, peak RSS GiB}, the phase's stdout)."""
    cmd = phase_cmd(args, phase, tokens_file)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
    wall = time.perf_counter() - t0
    stats = [ln for ln in p.stderr.splitlines() if ln.startswith("phase-stats ")]
    if p.returncode not in (0, 1) or not stats:
        raise SystemExit(f"{phase}: {' '.join(cmd)} exited {p.returncode}: {p.stderr[-800:]}")
    st = json.loads(stats[-1].split(" ", 1)[1])
    return {"wall_s": round(wall, 2), "import_s": round(st["import_s"], 2), "work_s": round(st["work_s"], 2),
            "peak_rss_gib": round(st["peak_rss_kib"] / 2**20, 3)}, p.stdout


def child(args) -> int:
    """One phase in this process: the shared imports, then the work; stats on stderr's last line."""
    import resource

    t0 = time.perf_counter()
    import torch  # noqa: F401
    import transformers  # noqa: F401

    import eagle3_check.program.eager  # noqa: F401
    import eagle3_check.judge.hf  # noqa: F401
    import eagle3_check.jobs.check.job  # noqa: F401

    t1 = time.perf_counter()
    rc = {"check": phase_check, "runner": phase_runner, "reference": phase_reference}[args.phase](args)
    t2 = time.perf_counter()
    sys.stdout.flush()
    stats = {"import_s": t1 - t0, "work_s": t2 - t1, "peak_rss_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    print("phase-stats " + json.dumps(stats), file=sys.stderr)
    return rc


def check_argv(args) -> list[str]:
    return ["check", "--fixture", args.fixture, "--max-new-tokens", str(args.max_new_tokens), "--no-progress",
            "--threads", str(args.threads)] + (["--prompts", args.prompts] if args.prompts else [])


def phase_check(args) -> int:
    """`eagle3-check check ... --json` (its report on stdout)."""
    from eagle3_check.cli import main as cli

    return cli([*check_argv(args), "--json"])


def context(args):
    from eagle3_check.cli import config_of
    from eagle3_check.jobs.common.context import CheckContext

    return CheckContext(config_of(check_argv(args))[0])


def phase_runner(args) -> int:
    """The reference runner alone on the prompt set; prints {prompt id: tokens}."""
    ctx = context(args)
    program, tokenizer, options, runner = ctx.program, ctx.tokenizer, ctx.options, ctx.loaded_runner
    print(json.dumps({p.id: list(runner.run(program, tokenizer, p.request(), options).tokens)
                      for p in ctx.prompts()}))
    return 0


def phase_reference(args) -> int:
    """The HF reference alone: one teacher-forced score of each request's prompt ids + check's tokens."""
    from eagle3_check.jobs.common.world import set_threads

    set_threads("cpu", args.threads)
    requests = json.loads(Path(args.tokens).read_text())
    reference = context(args).hf_reference()
    for prompt_ids, tokens in requests:
        reference.score(prompt_ids, tokens)
    print(json.dumps({"scored": len(requests)}))
    return 0


def one_repeat(args, rep: int, env: dict, tokens_file: str) -> dict:
    order = list(PHASES) if rep % 2 == 0 else ["reference", "runner", "check"]  # the reference needs check's tokens:
    row, outs = {"repeat": rep, "order": order}, {}  # on odd repeats it scores the previous repeat's (identical)
    for phase in order:
        row[phase], outs[phase] = run_phase(args, phase, env, tokens_file if phase == "reference" else None)
        if phase == "check":
            report = json.loads(outs[phase])
            Path(tokens_file).write_text(json.dumps([[r["run"]["prompt_ids"], r["run"]["tokens"]]
                                                     for r in report["requests"]]))
            taus = [r["run"]["tau"] for r in report["requests"]]
            row["check"].update(passed=report["passed"], requests=len(report["requests"]),
                                positions=report["counts"].get("positions"), k=report.get("k"),
                                mean_tau=round(sum(taus) / len(taus), 3))
            check_tokens = {r["prompt_id"]: r["run"]["tokens"] for r in report["requests"]}
    if json.loads(outs["runner"]) != check_tokens:
        raise SystemExit("the runner alone emitted other tokens than check's runner")
    for key in ("work", "wall"):
        row[f"ratio_{key}"] = round(row["check"][f"{key}_s"] / (row["runner"][f"{key}_s"] + row["reference"][f"{key}_s"]), 3)
    print(f"repeat {rep} ({' -> '.join(order)}): " + ", ".join(
        f"{ph} {row[ph]['work_s']:.1f} s (+{row[ph]['import_s']:.1f} s imports, {row[ph]['peak_rss_gib']:.2f} GiB)"
        for ph in PHASES) + f": ratio {row['ratio_work']:.2f} (wall {row['ratio_wall']:.2f}; target <= 1.3)", flush=True)
    return row


def compare_threads(args, env: dict, counts: list[int], save) -> dict:
    """The check phase at each thread count, alternating, `args.repeats` rounds: work times and ratios
    (`save(measured)` after each round)."""
    rows = []
    for rep in range(args.repeats):
        row = {"repeat": rep}
        for n in (counts if rep % 2 == 0 else counts[::-1]):
            args.threads = n
            row[str(n)], out = run_phase(args, "check", {**env, "OMP_NUM_THREADS": str(n)})
            row[str(n)]["passed"] = json.loads(out)["passed"]
        row["ratio"] = round(row[str(counts[1])]["work_s"] / row[str(counts[0])]["work_s"], 3)
        rows.append(row)
        print(f"repeat {rep}: " + ", ".join(f"{n} thread(s) {row[str(n)]['work_s']:.1f} s" for n in counts)
              + f": {counts[1]} / {counts[0]} = {row['ratio']:.2f}", flush=True)
        ratios = sorted(r["ratio"] for r in rows)
        measured = {"compare_threads": counts, "rows": rows, "ratio_median": ratios[len(ratios) // 2]}
        save(measured)
    return measured


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixture", default="smollm2-135m")
    ap.add_argument("--prompts", default=None, help="prompt set (default: the fixture's held-out prompts)")
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--phase", choices=PHASES, default=None, help=argparse.SUPPRESS)
    ap.add_argument("--tokens", default=None, help=argparse.SUPPRESS)
    ap.add_argument("--out", default=None, help="write the results JSON here")
    ap.add_argument("--compare-threads", default=None, metavar="A,B", help="time check at A and at B threads instead")
    args = ap.parse_args(argv)
    if args.phase:
        return child(args)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    load0, threads = os.getloadavg(), args.threads

    def save(measured: dict) -> dict:
        """The results so far, written (atomically) after every repeat: a run cut short keeps them."""
        result = {"fixture": args.fixture, "prompts": args.prompts or "the fixture's",
                  "max_new_tokens": args.max_new_tokens, "threads": None if args.compare_threads else threads,
                  "cpus": os.cpu_count(), "loadavg_start": [round(x, 2) for x in load0],
                  "loadavg_end": [round(x, 2) for x in os.getloadavg()], "machine": platform.platform(),
                  "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), **measured}
        if args.out:
            from eagle3_check.atomic import atomic_writer

            with atomic_writer(args.out, what="bench results") as f:
                f.write(json.dumps(result, indent=2) + "\n")
        return result

    if args.compare_threads:
        result = save(compare_threads(args, env, [int(x) for x in args.compare_threads.split(",")], save))
    else:
        rows = []
        with tempfile.TemporaryDirectory() as tmp:
            for rep in range(args.repeats):
                rows.append(one_repeat(args, rep, env, str(Path(tmp) / "tokens.json")))
                ratios = sorted(r["ratio_work"] for r in rows)
                result = save({"rows": rows, "ratio_work_median": ratios[len(ratios) // 2]})
    if not args.compare_threads:
        print(f"ratio check / (runner + reference): {result['ratio_work_median']:.2f} (median of "
              f"{len(result['rows'])}; target <= 1.3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
