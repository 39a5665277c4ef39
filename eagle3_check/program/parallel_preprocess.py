"""XNNPACK's per-partition preprocess spread over the CPUs, each result the stock call's own (issue 49).

After partitioning, `to_edge_transform_and_lower` hands every delegate partition of every method to
`XnnpackBackend.preprocess_multimethod`, which ExecuTorch 1.5.1 inherits from `BackendDetails`: a
loop calling `preprocess(program, compile_specs)` on each partition in turn. Each call runs the 17
XNNPACK passes (each an `ExportPass` that re-interprets the partition on fake tensors) and
serializes the XNNPACK graph: ~0.1 to 0.5 s a partition whatever its size, 106 partitions in the
tiny-llama export, 40 % of its CPU time (docs/speed.md "Export").

Each call is a pure function of its partition (`lower_all_submodules_to_backend` hands it a deep
copy, `copy_exported_program_for_preprocess`) and its result (`PreprocessResult`: the delegate's
bytes, its debug handle map, its named data) is plain data. `parallel_preprocess()` replaces the
loop, for our lowering only, by the same calls split over `workers` processes: the first partition
runs here (it warms the passes up, ~3 s, before the copies are made), the others are dealt to the
workers by size (node count, longest first, each to the least loaded), each worker a fork of this
process that runs stock's `preprocess` on its partitions and sends the pickled results back through
a pipe; this process runs its own share meanwhile, then puts every result in its place. A worker that
fails sends nothing: its partitions are preprocessed here (`PreprocessStats.reason` says so).
`tests/pte/test_fast_lowering_pte.py` compares the cached export (made this way) with a
`--stock-lowering` export byte for byte.

Guarded: the stock loop's source must hash to the version this was written from (executorch 1.5.1),
XnnpackBackend must not override it, the platform must fork (Linux) and torch must run one thread
(as `export` does unless --threads or OMP_NUM_THREADS say otherwise: `_threads_reason`); otherwise,
and with one worker (one usable CPU), the stock loop runs and the reason is recorded.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import os
import pickle
import sys
import time
from dataclasses import asdict, dataclass, field
from typing import Any

# sha256 (first 16 hex) of inspect.getsource of the stock loop replaced here (executorch 1.5.1).
_STOCK_SOURCE = "BackendDetails.preprocess_multimethod"
_EXPECTED = "4a833eb94738777c"
MAX_WORKERS = 4  # more copies of a large model's lowering cost memory for little: most of `lower` is not preprocess


@dataclass
class PreprocessStats:
    """How the XNNPACK preprocess ran: `workers` processes (1: the stock loop), `reason` when the
    stock loop was forced, the partitions each process preprocessed and the seconds of the whole."""

    workers: int = 1
    reason: str = ""
    partitions: list[int] = field(default_factory=list)  # per process, this one first
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity where the platform says, else all)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _source_digest(fn) -> str:
    return hashlib.sha256(inspect.getsource(fn).encode()).hexdigest()[:16]


def guard(backend_cls) -> str:
    """'' when `backend_cls` runs the stock loop reproduced here and this platform forks; else why not."""
    from executorch.exir.backend.backend_details import BackendDetails

    if "preprocess_multimethod" in vars(backend_cls):
        return f"{backend_cls.__name__} overrides preprocess_multimethod"
    got = _source_digest(BackendDetails.preprocess_multimethod)
    if got != _EXPECTED:
        return f"executorch's {_STOCK_SOURCE} source {got} is not the reproduced version {_EXPECTED}"
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return f"no fork on {sys.platform}"
    return ""


def _threads_reason() -> str:
    """'' when torch runs one thread here (as `export` does unless told otherwise); else why no fork:
    a forked copy of a process whose OpenMP pool has threads may hang in its first parallel region,
    and a worker on other thread counts than this process could fold a constant otherwise."""
    import torch

    n = torch.get_num_threads()
    return "" if n == 1 else f"torch runs {n} threads here (workers are forked from a one-thread export only)"


def deal(costs: list[int], workers: int) -> list[list[int]]:
    """Indices of `costs` dealt into `workers` shares, longest first, each to the least loaded share
    (ties: the lowest share). Example: costs [5, 1, 4, 2], 2 workers -> [[0, 1], [2, 3]] (5+1 vs 4+2)."""
    shares: list[list[int]] = [[] for _ in range(workers)]
    loads = [0] * workers
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        w = loads.index(min(loads))
        shares[w].append(i)
        loads[w] += costs[i]
    return [sorted(s) for s in shares]


def _cost(program) -> int:
    return 2 + sum(1 for n in program.graph.nodes if n.op == "call_function")  # 2: a pass's fixed cost


def _run_child(preprocess, items, share: list[int], write_fd: int) -> None:
    """In the forked worker: preprocess the share, pickle [(index, result)] into the pipe, exit."""
    code = 1
    try:
        out = [(i, preprocess(*items[i])) for i in share]
        with os.fdopen(write_fd, "wb") as f:
            pickle.dump(out, f, protocol=pickle.HIGHEST_PROTOCOL)
        code = 0
    except BaseException:  # noqa: BLE001 - nothing is sent: the parent preprocesses this share itself
        pass
    finally:
        os._exit(code)  # no atexit handlers, no flush of the parent's buffers


def _read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _preprocess_all(preprocess, items: list, workers: int, stats: PreprocessStats) -> list:
    """[preprocess(*item) for item in items], the items after the first split over `workers` processes."""
    results: list = [None] * len(items)
    results[0] = preprocess(*items[0])  # warms the passes up before the fork
    rest = list(range(1, len(items)))
    shares = [[rest[i] for i in s] for s in deal([_cost(items[i][0]) for i in rest], workers)]
    children = []
    try:
        for share in shares[1:]:
            read_fd, write_fd = os.pipe()
            sys.stdout.flush()
            sys.stderr.flush()
            pid = os.fork()
            if pid == 0:  # pragma: no cover - the forked worker (covered by the .pte bytes test)
                os.close(read_fd)
                _run_child(preprocess, items, share, write_fd)
            os.close(write_fd)
            children.append((pid, read_fd, share))
        for i in shares[0]:
            results[i] = preprocess(*items[i])
        stats.partitions = [1 + len(shares[0])]
        while children:
            pid, read_fd, share = children.pop(0)
            data = _read_all(read_fd)
            os.close(read_fd)
            _, status = os.waitpid(pid, 0)
            got = pickle.loads(data) if status == 0 and data else None
            if got is None or sorted(i for i, _ in got) != share:
                stats.reason = f"a worker failed (status {status}): its {len(share)} partitions were preprocessed here"
                got = [(i, preprocess(*items[i])) for i in share]
            for i, result in got:
                results[i] = result
            stats.partitions.append(len(share))
    finally:
        for pid, read_fd, _ in children:  # an error or an interrupt here: no worker outlives the export
            os.close(read_fd)
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, 9)
            os.waitpid(pid, 0)
    return results


@contextlib.contextmanager
def parallel_preprocess(backend_cls, workers: int | None = None, enabled: bool = True):
    """Within: `backend_cls.preprocess_multimethod` is the stock loop with its calls spread over
    `workers` processes (default: the usable CPUs, at most MAX_WORKERS), when `enabled` and the
    guard passes. Yields the PreprocessStats, filled in as the lowering runs."""
    stats = PreprocessStats()
    workers = min(usable_cpus(), MAX_WORKERS) if workers is None else workers
    why = "--stock-lowering" if not enabled else guard(backend_cls) or _threads_reason() or (
        "one worker" if workers < 2 else "")
    if why:
        stats.reason = why
        yield stats
        return

    def preprocess_multimethod(cls, edge_programs, compile_specs):
        t0 = time.perf_counter()
        items, slots = [], []
        for method_name, programs in edge_programs.items():  # stock's checks, in stock's order
            assert method_name in compile_specs, f"Error: missing compile specs for {method_name}"
            specs = compile_specs[method_name]
            assert len(specs) == len(programs), (
                f"Error: method {method_name} has {len(programs)} partitions but only {len(specs)}")
            for k, (program, spec) in enumerate(zip(programs, specs)):
                items.append((program, spec))
                slots.append((method_name, k))
        n = min(workers, len(items) - 1)
        if n < 2:
            results = [cls.preprocess(*item) for item in items]
            stats.partitions = [len(items)]
        else:
            results = _preprocess_all(cls.preprocess, items, n, stats)
        stats.workers = max(1, n)
        out: dict[str, list] = {name: [None] * len(programs) for name, programs in edge_programs.items()}
        for (name, k), result in zip(slots, results):
            out[name][k] = result
        stats.seconds = round(stats.seconds + time.perf_counter() - t0, 3)
        return out

    backend_cls.preprocess_multimethod = classmethod(preprocess_multimethod)
    try:
        yield stats
    finally:
        del backend_cls.preprocess_multimethod  # the inherited stock loop again
