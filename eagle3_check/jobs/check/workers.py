"""A prompt set spread over processes: `check --workers N` and `check --shard i/n`.

`--shard i/n` keeps every n-th prompt starting at the i-th (1-based, round robin: prompts of
different lengths spread evenly). Worked example, 5 prompts [a, b, c, d, e] and n = 2:
shard 1/2 = indices 0, 2, 4 = [a, c, e]; shard 2/2 = indices 1, 3 = [b, d]. Every prompt is in
exactly one shard (`tests/jobs/check/test_workers.py` pins it).

`--workers N` splits the prompts the same way over N runner processes (jobs/common/isolation.py:
`IsolatedPool`, the isolated runner's child machinery): each builds its own program and runs the
runner on its share; the harness checks every request of the whole set before any work (one bad
prompt is one error, never a partial report) and judges every request in prompt order, so the
report is the one a serial run gives (same verdicts, same order; only timings differ).

Devices: `cpu` gives every worker the CPU; `cuda` with N workers gives worker i `cuda:i`
(N must not exceed the GPUs there are); a numbered `cuda:K` with N > 1 is an error (which GPUs?).
Worked example: `worker_devices("cuda", 2, 4)` = ["cuda:0", "cuda:1"].
"""

from __future__ import annotations

import re

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
    from eagle3_check.runners.seam import kind_of

    if flag and kind_of(runner).program_file:
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
