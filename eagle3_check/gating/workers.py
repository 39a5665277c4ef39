"""A prompt set spread over processes: `check --workers N` and `check --shard i/n`.

`--shard i/n` keeps every n-th prompt starting at the i-th (1-based, round robin: prompts of
different lengths spread evenly). Worked example, 5 prompts [a, b, c, d, e] and n = 2:
shard 1/2 = indices 0, 2, 4 = [a, c, e]; shard 2/2 = indices 1, 3 = [b, d]. Every prompt is in
exactly one shard (`tests/test_workers.py` pins it).

`--workers N` splits the prompts the same way over N processes (spawned, so CUDA works in each).
Each worker builds its own program, tokenizer and reference (`build(device)`), checks every
request of the whole set before any work (one bad prompt is one error, never a partial report),
runs its share through `run_check` and, for draft health, teacher-forces its requests' step-0
proposals. The parent merges the outcomes back into prompt order: the report is the one a
serial run gives (same verdicts, same order; only timings differ).

Devices: `cpu` gives every worker the CPU; `cuda` with N workers gives worker i `cuda:i`
(N must not exceed the GPUs there are); a numbered `cuda:K` with N > 1 is an error (which GPUs?).
Worked example: `worker_devices("cuda", 2, 4)` = ["cuda:0", "cuda:1"].
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from eagle3_check.errors import OptionError

SHARD_RE = re.compile(r"(\d+)/(\d+)")


def parse_shard(text: str) -> tuple[int, int]:
    """"i/n" -> (i, n) with 1 <= i <= n; else a one-line error."""
    m = SHARD_RE.fullmatch(text.strip())
    if not m or not 1 <= int(m[1]) <= int(m[2]):
        raise OptionError(f"--shard {text}", "i/n with 1 <= i <= n (e.g. 1/2 and 2/2)", "pass e.g. --shard 1/2")
    return int(m[1]), int(m[2])


def check_flags(workers: int, shard: str | None, suite: str | None, runner: str | None) -> None:
    """`check --workers N --shard I/N`, checked before anything loads."""
    if workers < 1:
        raise OptionError(f"--workers {workers}", "an integer >= 1", "pass e.g. --workers 2")
    if shard:
        parse_shard(shard)
    flag = "--shard" if shard else "--workers" if workers > 1 else None
    if flag and suite:
        raise OptionError(f"{flag} with --suite", "a prompt-set check (the suites spread under pytest-xdist)",
                          "run the suites as tests: pytest -n N --eagle3-fixture NAME (or --eagle3-pte FILE)")
    if flag and (runner or "").startswith("exec:"):
        raise OptionError(f"{flag} with --runner {runner}", "an in-process runner", f"drop {flag}")


def shard_indices(count: int, i: int, n: int) -> list[int]:
    """The prompt indices of shard i of n (1-based i): i-1, i-1+n, i-1+2n, ... below count."""
    return list(range(i - 1, count, n))


def worker_devices(device: str, workers: int, cuda_count: int) -> list[str]:
    """The device of each worker (see the module doc)."""
    if workers < 1:
        raise OptionError(f"--workers {workers}", "an integer >= 1", "pass e.g. --workers 2")
    if not device.startswith("cuda"):
        return [device] * workers
    if workers == 1:
        return [device]
    if device != "cuda":
        raise OptionError(f"--device {device} with --workers {workers}", "--device cuda (worker i runs on cuda:i)",
                          "pass --device cuda, or --workers 1 for one numbered GPU")
    if workers > cuda_count:
        raise OptionError(f"--workers {workers} with --device cuda", f"at most {cuda_count} workers "
                          f"(one per GPU; {cuda_count} visible)", f"pass --workers {max(cuda_count, 1)} or fewer")
    return [f"cuda:{i}" for i in range(workers)]


@dataclass
class Share:
    """What one worker sends back."""

    indices: list[int]  # positions of its prompts in the whole set
    outcomes: list  # RequestOutcome, one per index
    k: int
    step0: tuple[int, int]  # draft health: (hits, rows) over its requests
    info: dict  # what build() says about the program (fixture, backend, device, ...)


def run_share(build: Callable, device: str, prompts: list, indices: list[int], options, tolerance,
              runner_spec: str, tie_budget: float, health: bool) -> Share:
    """One worker's job (runs in the worker process; `build(device)` -> (program, tokenizer, reference, info))."""
    from eagle3_check.gating.check import request_ids, run_check
    from eagle3_check.gating.draft_health import step0_totals
    from eagle3_check.program.contract import read_metadata
    from eagle3_check.run.options import check_options
    from eagle3_check.run.plugin import load_runner

    program, tokenizer, reference, info = build(device)
    md = read_metadata(program.metadata())
    check_options(options, md, md.vocab_size or tokenizer.vocab_size)
    request_ids(tokenizer, prompts, options, md)  # the whole set, as a serial check does before any work
    report = run_check(program, tokenizer, reference, [prompts[i] for i in indices], options, tolerance,
                       runner=load_runner(runner_spec), tie_budget=tie_budget)
    step0 = step0_totals(program, report.outcomes) if health else (0, 0)
    return Share(indices, report.outcomes, report.k, step0, info)


def run_check_workers(build: Callable, devices: list[str], prompts: list, options, tolerance, runner_spec: str,
                      tie_budget: float = 0.0, health: bool = True,
                      on_share: Callable[[Share], None] | None = None):
    """(CheckReport in prompt order, (step-0 hits, rows)) of `prompts` spread over one process per
    device in `devices` (round robin, as shards). `build` must be picklable (a module-level function
    or a functools.partial of one): each worker calls it."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from eagle3_check.gating.check import CheckReport

    n = len(devices)
    jobs = [(d, shard_indices(len(prompts), w + 1, n)) for w, d in enumerate(devices)]
    jobs = [(d, idx) for d, idx in jobs if idx]
    shares: list[Share] = []
    with ProcessPoolExecutor(len(jobs), mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(run_share, build, d, prompts, idx, options, tolerance, runner_spec, tie_budget,
                               health) for d, idx in jobs]
        for f in futures:
            share = f.result()  # a worker's Eagle3CheckError comes back here: one line, no report
            shares.append(share)
            if on_share:
                on_share(share)
    ks = {s.k for s in shares}
    if len(ks) != 1:
        raise OptionError(f"workers ran with K = {sorted(ks)}", "one K for the whole prompt set",
                          "pass -k explicitly")
    by_index = {i: o for s in shares for i, o in zip(s.indices, s.outcomes)}
    report = CheckReport(k=ks.pop(), outcomes=[by_index[i] for i in range(len(prompts))], tie_budget=tie_budget,
                         info={**shares[0].info, "workers": n, "worker_devices": devices})
    hits, rows = sum(s.step0[0] for s in shares), sum(s.step0[1] for s in shares)
    return report, (hits, rows)
