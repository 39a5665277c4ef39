"""`golden verify` per prompt against `check` per prompt on the same fixture, in one process (issue 32).

Both commands go through `eagle3_check.cli.main`, as a user runs them, on the same prompts (the
goldens' prompt ids, looked up in the fixture's prompt set) with the goldens' K and max new tokens;
`check` also builds and runs the HF reference, so a golden verify that costs more per prompt
rebuilds or reloads something. The heavy imports happen once, before the first timed command; torch's
thread count is put back to the interpreter's default before each command, as a fresh process has it.
Each command runs `--repeats` times, interleaved, and the fastest is kept (load only adds).

    PYTHONPATH=. python bench/golden_speed.py [--fixture tiny-llama] [-k 4] [--repeats 2] [--json OUT.json]

Prints one line per command and the ratio `golden verify / check` per prompt (target: <= 1.3).
`golden verify --threads 2` is timed too: the thread count `golden verify` ran with before it
took check's default of one thread.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET_RATIO = 1.3


def goldens_of(fixture: str, k: int) -> list[Path]:
    """The committed eager CPU goldens of `fixture` at chain length `k`."""
    from eagle3_check.jobs.golden.file import load_golden

    found = [p for p in sorted((ROOT / "golden").glob(f"{fixture}__eager__cpu__*.json")) if load_golden(p).key.k == k]
    if not found:
        sys.exit(f"error: no golden/{fixture}__eager__cpu__*k{k}*.json; pick a fixture and K that have goldens")
    return found


def prompt_file(fixture: str, goldens: list[Path], out: Path) -> tuple[Path, int, int, int]:
    """A prompt set with the goldens' prompts (by id, from the fixture's prompt set): (path, n, K, max new)."""
    from eagle3_check.fixtures.registry import load_fixture
    from eagle3_check.jobs.golden.file import load_golden

    texts = {p.id: p.text for p in load_fixture(fixture).prompts()}
    ids, key = [], None
    for g in goldens:
        golden = load_golden(g)
        key = golden.key
        ids += [p.prompt_id for p in golden.prompts if p.prompt_id not in ids]
    missing = [i for i in ids if i not in texts]
    if missing:
        sys.exit(f"error: golden prompt ids {missing} are not in {fixture}'s prompt set")
    out.write_text(json.dumps({"prompts": [{"id": i, "text": texts[i]} for i in ids]}))
    return out, len(ids), key.k, key.max_new


def timed(argv: list[str], default_threads: int) -> float:
    import torch

    from eagle3_check.cli import main

    torch.set_num_threads(default_threads)  # as a fresh process starts
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()) as err:
        rc = main(argv)
    seconds = time.perf_counter() - t0
    if rc != 0:
        sys.exit(f"error: eagle3-check {' '.join(argv)} exited {rc}: {err.getvalue().strip()[-400:]}")
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixture", default="tiny-llama")
    ap.add_argument("-k", type=int, default=4, help="the goldens' chain length")
    ap.add_argument("--repeats", type=int, default=2, help="runs of check and golden verify (--threads 2: one)")
    ap.add_argument("--json", default=None, help="write the numbers here too")
    args = ap.parse_args()
    os.environ.pop("OMP_NUM_THREADS", None)  # the CLI's own thread default is what is measured
    import torch
    import transformers  # noqa: F401  (imported once, before the first timed command)

    import eagle3_check.jobs.check.prompt_set  # noqa: F401
    import eagle3_check.jobs.golden.verify  # noqa: F401

    default_threads = torch.get_num_threads()
    goldens = goldens_of(args.fixture, args.k)
    with tempfile.TemporaryDirectory() as tmp:
        prompts, n_golden_prompts, k, max_new = prompt_file(args.fixture, goldens, Path(tmp) / "prompts.json")
        n_verify = sum(len(json.loads(g.read_text())["prompts"]) for g in goldens)
        commands = {
            "check": (["check", "--fixture", args.fixture, "--prompts", str(prompts), "-k", str(k),
                       "--max-new-tokens", str(max_new), "--no-progress"], n_golden_prompts),
            "golden verify": (["golden", "verify", *map(str, goldens), "--no-baseline", "--no-progress"], n_verify),
            "golden verify --threads 2": (["golden", "verify", *map(str, goldens), "--no-baseline", "--no-progress",
                                           "--threads", "2"], n_verify),
        }
        best = {name: float("inf") for name in commands}
        for i in range(args.repeats):
            for name, (argv, _n) in commands.items():
                if i == 0 or "--threads" not in argv:  # two threads on a loaded machine: minutes, once is enough
                    best[name] = min(best[name], timed(argv, default_threads))
    per = {name: best[name] / commands[name][1] for name in commands}
    for name, (_argv, n) in commands.items():
        print(f"{name:28s} {best[name]:7.2f} s for {n:2d} prompts = {per[name]:.3f} s a prompt")
    ratio = per["golden verify"] / per["check"]
    print(f"golden verify / check per prompt: {ratio:.2f} (target <= {TARGET_RATIO}); "
          f"with 2 threads: {per['golden verify --threads 2'] / per['check']:.2f}  "
          f"[{args.fixture}, K = {k}, {max_new} new tokens, torch default threads {default_threads}, "
          f"{os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}]")
    if args.json:
        from eagle3_check.atomic import write_text_atomic

        write_text_atomic(args.json, json.dumps({
            "fixture": args.fixture, "k": k, "max_new": max_new, "goldens": [g.name for g in goldens],
            "seconds": best, "prompts": {n: c[1] for n, c in commands.items()}, "per_prompt": per,
            "ratio": ratio, "target_ratio": TARGET_RATIO, "default_threads": default_threads,
            "cpus": os.cpu_count(), "load_1min": os.getloadavg()[0]}, indent=1) + "\n")
    return 0 if ratio <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
